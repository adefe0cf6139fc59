/* An LD_PRELOAD profiler of the host's cost (issue 18's ≤ 20 µs a decode call): wraps the OpenCL
 * calls a clattn call makes and prints, at exit, each one's count and total wall time on stderr.
 * `LD_PRELOAD=libclattn_host_shim.so clattn bench --kv-cache ...` then tells where the host
 * column's microseconds go (divide by the calls the bench made).
 * SHIM_KERNEL_TIMES=1 adds each kernel's device time, by name (an event per launch, read at
 * exit from a profiling queue, as `clattn bench` makes): which of a pass's kernels costs what,
 * e.g. bwd_rowdot, bwd_dkdv and bwd_dq of a backward, which no profiler reaches through NVIDIA's
 * OpenCL. Its events are the shim's own, so its host times are then not the library's.
 * SHIM_SERIAL=1 drains the queue before each launch (below). Not installed. */
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ARG, NDRANGE, MEMINFO, FLUSH, MARKER, KERNELINFO, RETAIN, RELEASE, N };
static const char *names[N] = {
    "clSetKernelArg",    "clEnqueueNDRangeKernel",      "clGetMemObjectInfo",
    "clFlush",           "clEnqueueMarkerWithWaitList", "clGetKernelWorkGroupInfo",
    "clRetainMemObject", "clReleaseMemObject"};
static double total[N];
static long count[N];

/* SHIM_KERNEL_TIMES: the launches' events (up to MAXEV) and their kernels' names. */
enum { MAXEV = 1 << 16, MAXK = 32 };
static cl_event events[MAXEV];
static short event_kernel[MAXEV];
static int nevents, nkernels, kernel_times = -1;
static char kernel_names[MAXK][64];

static int kernel_slot(cl_kernel k) {
  char name[64] = "?";
  clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
  name[sizeof name - 1] = 0;
  for (int i = 0; i < nkernels; i++)
    if (!strcmp(kernel_names[i], name)) return i;
  if (nkernels == MAXK) return -1;
  strcpy(kernel_names[nkernels], name);
  return nkernels++;
}

static void report_kernels(void) {
  double t[MAXK] = {0};
  long c[MAXK] = {0};
  for (int i = 0; i < nevents; i++) {
    cl_ulong a = 0, b = 0;
    if (clWaitForEvents(1, &events[i]) == CL_SUCCESS &&
        clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) ==
            CL_SUCCESS &&
        clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) ==
            CL_SUCCESS)
      t[event_kernel[i]] += (b - a) / 1e3, c[event_kernel[i]]++;
    clReleaseEvent(events[i]);
  }
  if (nevents == MAXEV)
    fprintf(stderr, "host_shim: kernel times cover the first %d launches only\n", MAXEV);
  for (int k = 0; k < nkernels; k++)
    if (c[k])
      fprintf(stderr, "host_shim: kernel %-22s %7ld launches %12.1f us device (%.2f us each)\n",
              kernel_names[k], c[k], t[k], t[k] / c[k]);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void report(void) {
  if (kernel_times > 0) report_kernels();
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
/* clEnqueueNDRangeKernel, timed as the others; with SHIM_KERNEL_TIMES, an event of its own
 * where the caller asked for none (kept for the report), or a retained copy of the caller's. */
cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o,
                              const size_t *g, const size_t *l, cl_uint n, const cl_event *w,
                              cl_event *e) {
  static cl_int (*real)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                        const size_t *, cl_uint, const cl_event *, cl_event *);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clEnqueueNDRangeKernel");
  if (kernel_times < 0) kernel_times = getenv("SHIM_KERNEL_TIMES") != NULL;
  cl_event own = NULL, *ev = e;
  if (kernel_times > 0 && !ev && nevents < MAXEV) ev = &own;
  /* SHIM_SERIAL: each launch waits for the queue to drain first, so that a kernel's event times
   * it alone (a device may start a kernel's clock while the one before still runs). */
  static int serial = -1;
  if (serial < 0) serial = getenv("SHIM_SERIAL") != NULL;
  if (serial) clFinish(q);
  const double t0 = now_us();
  const cl_int r = real(q, k, d, o, g, l, n, w, ev);
  total[NDRANGE] += now_us() - t0, count[NDRANGE]++;
  if (kernel_times > 0 && r == CL_SUCCESS && ev && nevents < MAXEV) {
    const int slot = kernel_slot(k);
    if (slot >= 0) {
      if (ev == e) clRetainEvent(*e);
      events[nevents] = *ev, event_kernel[nevents++] = (short)slot;
    } else if (own) {
      clReleaseEvent(own);
    }
  }
  return r;
}
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
