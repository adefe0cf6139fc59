/* `clattn bench --bandwidth`: the achievable global-memory bandwidth, measured by a plain copy
 * kernel on clattn's own context and queue (Nsight Compute does not see NVIDIA OpenCL kernels),
 * and the traffic model checked against it. */
#include "bench.h"
#include "clattn.h"

#include <stdio.h>
#include <stdlib.h>

static const char *copy_src = "__kernel void copy(__global const float4 *a, __global float4 *b) {\n"
                              "  const size_t i = get_global_id(0);\n"
                              "  b[i] = a[i];\n"
                              "}\n";

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_copy_bandwidth(clattn_context *ctx, double *bytes) {
  cl_context cl = clattn_context_cl_context(ctx);
  cl_device_id dev = clattn_context_device(ctx);
  cl_command_queue q = clattn_context_queue(ctx);
  cl_ulong max_alloc = 0;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
  size_t size = (size_t)1 << 28; /* 256 MiB each way: far beyond any cache */
  if (size > max_alloc / 2) size = (size_t)(max_alloc / 2) & ~(size_t)15;
  cl_int err;
  cl_program prog = clCreateProgramWithSource(cl, 1, &copy_src, NULL, &err);
  if (err == CL_SUCCESS) err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(prog, "copy", &err) : NULL;
  cl_mem a = err == CL_SUCCESS ? clCreateBuffer(cl, CL_MEM_READ_WRITE, size, NULL, &err) : NULL;
  cl_mem b = err == CL_SUCCESS ? clCreateBuffer(cl, CL_MEM_READ_WRITE, size, NULL, &err) : NULL;
  if (err == CL_SUCCESS) {
    float zero = 0.0f;
    err = clEnqueueFillBuffer(q, a, &zero, sizeof zero, 0, size, 0, NULL, NULL);
  }
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof a, &a);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof b, &b);
  enum { WARMUP = 3, RUNS = 15 };
  double ms[RUNS];
  size_t global = size / 16, local = 256;
  if (global % local) local = 0; /* the driver picks */
  for (int i = 0; i < WARMUP + RUNS && err == CL_SUCCESS; i++) {
    cl_event ev;
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, local ? &local : NULL, 0, NULL, &ev);
    if (err != CL_SUCCESS) break;
    cl_ulong t0 = 0, t1 = 0;
    clWaitForEvents(1, &ev);
    err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    clReleaseEvent(ev);
    if (i >= WARMUP) ms[i - WARMUP] = (t1 - t0) / 1e6;
  }
  if (k) clReleaseKernel(k);
  if (prog) clReleaseProgram(prog);
  if (a) clReleaseMemObject(a);
  if (b) clReleaseMemObject(b);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clattn bench: the copy kernel failed (OpenCL error %d)\n", err);
    return -1.0;
  }
  qsort(ms, RUNS, sizeof *ms, cmp);
  *bytes = 2.0 * (double)size;
  return ms[RUNS / 2] > 0 ? *bytes / (ms[RUNS / 2] * 1e6) : -1.0;
}

void bench_print_bandwidth(const bench_row *rows, size_t n, double copy_gbps, double copy_bytes) {
  printf("\nbandwidth check: copy kernel %.1f GB/s (%.0f MB read + written, median of 15, OpenCL "
         "events)\n",
         copy_gbps, copy_bytes / 1e6);
  printf("%6s %4s %3s | %9s %9s %9s | softmax: %9s %8s %6s | standard: %8s %6s | fused: %8s "
         "%6s %8s\n",
         "N", "d", "cau", "S GEMM ms", "softmax", "O GEMM", "model MB", "GB/s", "%copy", "GB/s",
         "%copy", "GB/s", "%copy", "TFLOP/s");
  for (size_t i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    printf("%6zu %4zu %3s |", r->seqlen, r->head_dim, r->causal ? "yes" : "no");
    if (r->steps) {
      double sm = r->softmax_bytes / (r->steps_ms[1] * 1e6);
      double whole = r->standard_bytes / (r->t[COL_STANDARD].median_ms * 1e6);
      printf(" %9.3f %9.3f %9.3f | %18.4g %8.1f %5.0f%% | %18.1f %5.0f%% |", r->steps_ms[0],
             r->steps_ms[1], r->steps_ms[2], r->softmax_bytes / 1e6, sm, 100 * sm / copy_gbps,
             whole, 100 * whole / copy_gbps);
    } else {
      printf(" %9s %9s %9s | %18s %8s %6s | %18s %6s |", "-", "-", "-", "-", "-", "-", "-", "-");
    }
    if (r->t[COL_FUSED].ran) {
      double f = r->fused_bytes / (r->t[COL_FUSED].median_ms * 1e6);
      printf(" %14.1f %5.0f%% %8.3f\n", f, 100 * f / copy_gbps,
             r->flops / (r->t[COL_FUSED].median_ms * 1e9));
    } else {
      printf(" %14s\n", "-");
    }
  }
}
