/* The PTX probes' host program (issue 19; tools/gpu-ptx-probe.sh runs it on the device machine).
 * Answers four questions about NVIDIA's OpenCL compiler and the device, each with what it
 * printed:
 *   1. the .version and .target lines of the PTX it emits for a trivial kernel (the program
 *      binary NVIDIA's OpenCL returns is PTX text);
 *   2. whether tools/probe_wgmma.cl (Hopper's wgmma.mma_async through inline PTX, which needs
 *      .target sm_90a) builds with each of a few option sets, and the build log if not;
 *   3. for a build that succeeds, whether it runs right: D = A B over ones must be 16
 *      everywhere (32: the matrix descriptor pointed at the wrong half of the local buffer);
 *   4. the dense mma.sync m16n8k16 rate in fp16 and bf16 (tools/probe_mma_rate.cl), the
 *      yardstick of the tensor-core kernels' achieved rate: median of 5 timed runs (OpenCL
 *      events) after one untimed;
 *   5. whether a work-group may have more local memory than CL_DEVICE_LOCAL_MEM_SIZE (48 KiB on
 *      NVIDIA; CUDA lets a kernel opt in to 227 KiB on Hopper, and FlashAttention-2's d = 128
 *      tiles use 64 KiB+): static arrays past it built, and a __local argument of each size
 *      set, run and read back (tools/probe_local.c).
 * Usage: ptx_probe WGMMA_KERNEL MMA_RATE_KERNEL [DEVICE_SUBSTRING]
 * (default device: the first GPU, else any) */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void local_probe(cl_context ctx, cl_device_id dev); /* tools/probe_local.c */

static cl_device_id pick(const char *want) {
  cl_platform_id plats[16];
  cl_uint np = 0;
  cl_device_id any = NULL;
  if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS) return NULL;
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id devs[16];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
    for (cl_uint d = 0; d < nd; d++) {
      char name[256] = "";
      cl_device_type t = 0;
      clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof name, name, NULL);
      clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof t, &t, NULL);
      if (want ? strstr(name, want) != NULL : (t & CL_DEVICE_TYPE_GPU) != 0) return devs[d];
      if (!any) any = devs[d];
    }
  }
  return want ? NULL : any;
}

/* The program's binary (PTX on NVIDIA): its lines that start with one of the prefixes. */
static void print_binary_lines(cl_program prog, const char *tag) {
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
      !size) {
    printf("%s: no program binary\n", tag);
    return;
  }
  unsigned char *bin = malloc(size + 1);
  unsigned char *bins[1] = {bin};
  if (!bin || clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
    printf("%s: the binary could not be read\n", tag);
    free(bin);
    return;
  }
  bin[size] = 0;
  int shown = 0;
  for (char *line = strtok((char *)bin, "\n"); line; line = strtok(NULL, "\n"))
    if (!strncmp(line, ".version", 8) || !strncmp(line, ".target", 7) ||
        !strncmp(line, ".address_size", 13))
      printf("%s: %s\n", tag, line), shown++;
  if (!shown) printf("%s: %zu-byte binary without .version/.target lines (not PTX)\n", tag, size);
  free(bin);
}

static cl_program build(cl_context ctx, cl_device_id dev, const char *src, const char *opts,
                        const char *tag) {
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
  if (err != CL_SUCCESS) {
    printf("%s: clCreateProgramWithSource FAILED (%d)\n", tag, (int)err);
    return NULL;
  }
  err = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
  printf("%s: options \"%s\": build %s (%d)\n", tag, opts, err == CL_SUCCESS ? "ok" : "FAILED",
         (int)err);
  size_t len = 0;
  clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
  char *log = malloc(len + 1);
  if (log && clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, log, NULL) == CL_SUCCESS) {
    log[len] = 0;
    int lines = 0;
    for (char *l = strtok(log, "\n"); l && lines < 12; l = strtok(NULL, "\n"), lines++)
      printf("%s:   log: %s\n", tag, l);
  }
  free(log);
  if (err != CL_SUCCESS) {
    clReleaseProgram(prog);
    return NULL;
  }
  print_binary_lines(prog, tag);
  return prog;
}

static void run(cl_context ctx, cl_device_id dev, cl_program prog, const char *tag) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(prog, "probe_wgmma", &err) : NULL;
  cl_mem d = err == CL_SUCCESS
                 ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, 512 * sizeof(float), NULL, &err)
                 : NULL;
  float host[512];
  for (int i = 0; i < 512; i++) host[i] = -1.0f;
  size_t g = 128, l = 128;
  if (err == CL_SUCCESS)
    err = clEnqueueWriteBuffer(q, d, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof d, &d);
  if (err == CL_SUCCESS) err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL);
  if (err == CL_SUCCESS)
    err = clEnqueueReadBuffer(q, d, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    printf("%s: run FAILED (%d)\n", tag, (int)err);
  } else {
    int sixteen = 0, thirtytwo = 0, other = 0;
    for (int i = 0; i < 512; i++)
      host[i] == 16.0f ? sixteen++ : host[i] == 32.0f ? thirtytwo++ : other++;
    printf("%s: run: %d of 512 elements of D are 16 (right), %d are 32 (the descriptor's address "
           "is off), %d other (first: %g)\n",
           tag, sixteen, thirtytwo, other, host[0]);
  }
  if (d) clReleaseMemObject(d);
  if (k) clReleaseKernel(k);
  if (q) clReleaseCommandQueue(q);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char *src = f ? calloc(1, 1 << 20) : NULL;
  if (!f || !src || !fread(src, 1, (1 << 20) - 1, f)) {
    fprintf(stderr, "ptx_probe: cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  return src;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The dense mma.sync rate: 4 work-groups of 8 warps per compute unit, each warp 8 chains of
 * iters mma.sync (4096 FLOPs each). */
static void mma_rate(cl_context ctx, cl_device_id dev, const char *src, const char *type) {
  char opts[64], tag[32];
  snprintf(opts, sizeof opts, "-DMMA_BF16=%d", strcmp(type, "bf16") == 0);
  snprintf(tag, sizeof tag, "mma_rate[%s]", type);
  cl_program p = build(ctx, dev, src, opts, tag);
  if (!p) return;
  cl_uint units = 1, iters = 2048;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
  size_t l = 256, g = (size_t)4 * units * l;
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(p, "probe_mma_rate", &err) : NULL;
  cl_mem out = err == CL_SUCCESS
                   ? clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, g * sizeof(float), NULL, &err)
                   : NULL;
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof out, &out);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof iters, &iters);
  double ms[5];
  for (int r = 0; err == CL_SUCCESS && r < 6; r++) {
    cl_event e;
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &e);
    if (err == CL_SUCCESS) err = clWaitForEvents(1, &e);
    cl_ulong t0 = 0, t1 = 0;
    if (err == CL_SUCCESS) {
      clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
      clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
      clReleaseEvent(e);
      if (r > 0) ms[r - 1] = (double)(t1 - t0) * 1e-6;
    }
  }
  if (err != CL_SUCCESS) {
    printf("%s: run FAILED (%d)\n", tag, (int)err);
  } else {
    qsort(ms, 5, sizeof *ms, cmp_double);
    double flops = (double)g / 32 * iters * 8 * 4096;
    printf("%s: %zu work-groups of 256, %u steps of 8 chains: median %.3f ms (min %.3f, max "
           "%.3f), %.1f TFLOP/s dense mma.sync m16n8k16\n",
           tag, g / l, iters, ms[2], ms[0], ms[4], flops / (ms[2] * 1e-3) / 1e12);
  }
  if (out) clReleaseMemObject(out);
  if (k) clReleaseKernel(k);
  if (q) clReleaseCommandQueue(q);
  clReleaseProgram(p);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s WGMMA_KERNEL MMA_RATE_KERNEL [DEVICE_SUBSTRING]\n", argv[0]);
    return 2;
  }
  char *src = read_file(argv[1]), *rate_src = read_file(argv[2]);
  cl_device_id dev = pick(argc > 3 ? argv[3] : NULL);
  if (!dev) {
    fprintf(stderr, "ptx_probe: no OpenCL device\n");
    return 3;
  }
  char name[256] = "", driver[128] = "", version[128] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof driver, driver, NULL);
  clGetDeviceInfo(dev, CL_DEVICE_VERSION, sizeof version, version, NULL);
  printf("device: %s, driver %s, %s\n", name, driver, version);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    fprintf(stderr, "ptx_probe: clCreateContext: %d\n", (int)err);
    return 3;
  }
  cl_program t =
      build(ctx, dev, "__kernel void t(__global float *x) { x[0] = 1.0f; }", "", "trivial");
  if (t) clReleaseProgram(t);
  /* NVIDIA's documented build options name an architecture with -cl-nv-arch. */
  const char *options[] = {"", "-cl-nv-arch sm_90a", "-cl-nv-arch=sm_90a", "-cl-nv-arch sm_90"};
  for (size_t i = 0; i < sizeof options / sizeof *options; i++) {
    char tag[32];
    snprintf(tag, sizeof tag, "wgmma[%zu]", i);
    cl_program p = build(ctx, dev, src, options[i], tag);
    if (p) {
      run(ctx, dev, p, tag);
      clReleaseProgram(p);
    }
  }
  mma_rate(ctx, dev, rate_src, "f16");
  mma_rate(ctx, dev, rate_src, "bf16");
  local_probe(ctx, dev);
  clReleaseContext(ctx);
  free(src), free(rate_src);
  return 0;
}
