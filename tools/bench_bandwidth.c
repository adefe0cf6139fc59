/* `clattn bench --bandwidth`: the achievable global-memory bandwidth, measured by a plain copy
 * kernel on clattn's own context and queue (Nsight Compute does not see NVIDIA OpenCL kernels),
 * and the traffic model checked against it. */
#include "bench.h"
#include "clattn.h"

#include <stdio.h>
#include <stdlib.h>

/* The copy kernel (bench --bandwidth) and a read-only one (decode's reference: a KV cache is
 * only read), which sums its part of the buffer and stores only a value it never reaches, so
 * the loads cannot be dropped. */
static const char *stream_src =
    "__kernel void copy(__global const float4 *a, __global float4 *b, ulong n) {\n"
    "  const size_t i = get_global_id(0);\n"
    "  b[i] = a[i];\n"
    "}\n"
    "__kernel void read(__global const float4 *a, __global float4 *b, ulong n) {\n"
    "  float4 s = 0.0f;\n"
    "  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) s += a[i];\n"
    "  if (s.x == -1.0f) b[0] = s;\n"
    "}\n";

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median GB/s of kernel `name` over a buffer of size bytes (read only, or copied into a second
 * one), 15 runs after 3, timed by OpenCL events; < 0 on failure (message on stderr). */
static double stream(clattn_context *ctx, const char *name, size_t size, int copy, double *bytes) {
  cl_context cl = clattn_context_cl_context(ctx);
  cl_device_id dev = clattn_context_device(ctx);
  cl_command_queue q = clattn_context_queue(ctx);
  cl_int err;
  cl_program prog = clCreateProgramWithSource(cl, 1, &stream_src, NULL, &err);
  if (err == CL_SUCCESS) err = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(prog, name, &err) : NULL;
  cl_mem a = err == CL_SUCCESS ? clCreateBuffer(cl, CL_MEM_READ_WRITE, size, NULL, &err) : NULL;
  cl_mem b = err == CL_SUCCESS ? clCreateBuffer(cl, CL_MEM_READ_WRITE, copy ? size : 16, NULL, &err)
                               : NULL;
  if (err == CL_SUCCESS) {
    float zero = 0.0f;
    err = clEnqueueFillBuffer(q, a, &zero, sizeof zero, 0, size, 0, NULL, NULL);
  }
  cl_ulong n = size / 16;
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof a, &a);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof b, &b);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof n, &n);
  enum { WARMUP = 3, RUNS = 15 };
  double ms[RUNS];
  /* The copy: a work-item per float4; the read: a grid of 2^20 (enough in flight on any GPU,
   * a few per core on a CPU) striding over the buffer. */
  size_t global = copy ? (size_t)n : (size_t)1 << 20, local = 256;
  if (!copy && global > n) global = (size_t)n;
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
    fprintf(stderr, "clattn: the %s kernel failed (OpenCL error %d)\n", name, err);
    return -1.0;
  }
  qsort(ms, RUNS, sizeof *ms, cmp);
  *bytes = (copy ? 2.0 : 1.0) * (double)size;
  return ms[RUNS / 2] > 0 ? *bytes / (ms[RUNS / 2] * 1e6) : -1.0;
}

static cl_ulong max_alloc(clattn_context *ctx) {
  cl_ulong m = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof m, &m, NULL);
  return m;
}

double bench_copy_bandwidth(clattn_context *ctx, double *bytes) {
  size_t size = (size_t)1 << 28; /* 256 MiB each way: far beyond any cache */
  if (size > max_alloc(ctx) / 2) size = (size_t)(max_alloc(ctx) / 2) & ~(size_t)15;
  return stream(ctx, "copy", size, 1, bytes);
}

double bench_read_bandwidth(clattn_context *ctx, double *bytes) {
  size_t size = (size_t)1 << 30; /* 1 GiB: twenty times the largest L2 */
  if (size > max_alloc(ctx)) size = (size_t)max_alloc(ctx) & ~(size_t)15;
  return stream(ctx, "read", size, 0, bytes);
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
