/* An LD_PRELOAD profiler of the host's cost (issue 18's ≤ 20 µs a decode call): wraps the OpenCL
 * calls a clattn call makes and prints, at exit, each one's count and total wall time on stderr.
 * `LD_PRELOAD=libclattn_host_shim.so clattn bench --kv-cache ...` then tells where the host
 * column's microseconds go (divide by the calls the bench made). Not installed. */
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ARG, NDRANGE, MEMINFO, FLUSH, MARKER, KERNELINFO, RETAIN, RELEASE, N };
static const char *names[N] = {
    "clSetKernelArg",    "clEnqueueNDRangeKernel",      "clGetMemObjectInfo",
    "clFlush",           "clEnqueueMarkerWithWaitList", "clGetKernelWorkGroupInfo",
    "clRetainMemObject", "clReleaseMemObject"};
static double total[N];
static long count[N];

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void report(void) {
  for (int i = 0; i < N; i++)
    if (count[i])
      fprintf(stderr, "host_shim: %-28s %9ld calls %12.1f us (%.2f us each)\n", names[i], count[i],
              total[i], total[i] / count[i]);
}

__attribute__((constructor)) static void init(void) {
  atexit(report);
}

/* The real function, looked up once; its time and count added to slot i. */
#define WRAP(i, ret, name, params, args)                                                           \
  ret name params {                                                                                \
    static ret(*real) params;                                                                      \
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, #name);                                          \
    const double t0 = now_us();                                                                    \
    const ret shim_ret_ = real args;                                                               \
    total[i] += now_us() - t0, count[i]++;                                                         \
    return shim_ret_;                                                                              \
  }

WRAP(ARG, cl_int, clSetKernelArg, (cl_kernel k, cl_uint i, size_t s, const void *v), (k, i, s, v))
WRAP(NDRANGE, cl_int, clEnqueueNDRangeKernel,
     (cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g, const size_t *l,
      cl_uint n, const cl_event *w, cl_event *e),
     (q, k, d, o, g, l, n, w, e))
WRAP(MEMINFO, cl_int, clGetMemObjectInfo, (cl_mem m, cl_mem_info p, size_t s, void *v, size_t *r),
     (m, p, s, v, r))
WRAP(FLUSH, cl_int, clFlush, (cl_command_queue q), (q))
WRAP(MARKER, cl_int, clEnqueueMarkerWithWaitList,
     (cl_command_queue q, cl_uint n, const cl_event *w, cl_event *e), (q, n, w, e))
WRAP(KERNELINFO, cl_int, clGetKernelWorkGroupInfo,
     (cl_kernel k, cl_device_id d, cl_kernel_work_group_info p, size_t s, void *v, size_t *r),
     (k, d, p, s, v, r))
WRAP(RETAIN, cl_int, clRetainMemObject, (cl_mem m), (m))
WRAP(RELEASE, cl_int, clReleaseMemObject, (cl_mem m), (m))
