/* ptx_probe's fifth question (issue 19): may a work-group use more local memory than
 * CL_DEVICE_LOCAL_MEM_SIZE says? NVIDIA's OpenCL reports 48 KiB, the CUDA default; CUDA kernels
 * opt in to up to 227 KiB on Hopper (cudaFuncAttributeMaxDynamicSharedMemorySize), and
 * FlashAttention-2's d = 128 forward keeps 64 KiB of Q, K and V tiles there, which 48 KiB cannot
 * hold beside Q in registers (docs/BENCHMARKS.md). Two ways are tried and each answer printed:
 * a static __local array of each size (does it build?), and a __local kernel argument of each
 * size (clSetKernelArg with a size and no pointer, which CUDA calls dynamic shared memory):
 * set, enqueued, and every word written and read back by the work-group, so that a launch that
 * "succeeds" with less memory than asked for shows as wrong words. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

/* Both kernels write every word of buf, then count the words read back right (reversed). */
static const char *src =
    "#define FILL_AND_CHECK(buf, n)                                                    \\\n"
    "  const uint lid = get_local_id(0), ls = get_local_size(0);                       \\\n"
    "  for (uint i = lid; i < n; i += ls) buf[i] = i * 2654435761u;                    \\\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);                                                   \\\n"
    "  uint ok = 0;                                                                    \\\n"
    "  for (uint i = lid; i < n; i += ls) ok += buf[n - 1 - i] == (n - 1 - i) * 2654435761u; \\\n"
    "  out[get_global_id(0)] = ok;\n"
    "__kernel void dyn(__global uint *out, __local uint *buf, uint n) { FILL_AND_CHECK(buf, n) }\n"
    "#ifdef STATIC_WORDS\n"
    "__kernel void fixed(__global uint *out, uint n) {\n"
    "  __local uint buf[STATIC_WORDS];\n"
    "  FILL_AND_CHECK(buf, n)\n"
    "}\n"
    "#endif\n";

/* One work-group of 256 over n words of local memory (the kernel's argument 1 is `bytes` of
 * dynamic local memory when dynamic): the error or the count of words read back right. */
static void launch(cl_context ctx, cl_device_id dev, cl_program p, int dynamic, cl_uint n) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
  cl_kernel k = err == CL_SUCCESS ? clCreateKernel(p, dynamic ? "dyn" : "fixed", &err) : NULL;
  cl_mem out = err == CL_SUCCESS
                   ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256 * sizeof(cl_uint), NULL, &err)
                   : NULL;
  const char *step = "setup";
  cl_ulong kmem = 0;
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 0, sizeof out, &out);
  if (err == CL_SUCCESS && dynamic)
    step = "clSetKernelArg", err = clSetKernelArg(k, 1, 4 * (size_t)n, NULL);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, dynamic ? 2 : 1, sizeof n, &n);
  if (err == CL_SUCCESS)
    clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof kmem, &kmem, NULL);
  size_t g = 256;
  if (err == CL_SUCCESS)
    step = "clEnqueueNDRangeKernel",
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &g, 0, NULL, NULL);
  cl_uint host[256] = {0};
  if (err == CL_SUCCESS)
    step = "read back",
    err = clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) {
    printf("local[%s %u bytes]: %s FAILED (%d)\n", dynamic ? "argument" : "static", 4 * n, step,
           (int)err);
  } else {
    cl_ulong right = 0;
    for (int i = 0; i < 256; i++) right += host[i];
    printf("local[%s %u bytes]: ran; CL_KERNEL_LOCAL_MEM_SIZE %llu; %llu of %u words read back "
           "right\n",
           dynamic ? "argument" : "static", 4 * n, (unsigned long long)kmem,
           (unsigned long long)right, n);
  }
  if (out) clReleaseMemObject(out);
  if (k) clReleaseKernel(k);
  if (q) clReleaseCommandQueue(q);
}

void local_probe(cl_context ctx, cl_device_id dev) {
  cl_ulong dev_mem = 0;
  clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof dev_mem, &dev_mem, NULL);
  printf("local: CL_DEVICE_LOCAL_MEM_SIZE %llu bytes\n", (unsigned long long)dev_mem);
  const cl_uint kib[] = {32, 47, 48, 64, 96, 160, 227};
  for (size_t i = 0; i < sizeof kib / sizeof *kib; i++) {
    const cl_uint n = kib[i] * 256; /* words */
    char opts[64];
    snprintf(opts, sizeof opts, "-DSTATIC_WORDS=%u", n);
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    if (err == CL_SUCCESS) err = clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
      printf("local[static %u bytes]: build FAILED (%d)\n", 4 * n, (int)err);
      if (p) clReleaseProgram(p);
      /* the dynamic kernel alone, without the static one */
      p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
      if (err == CL_SUCCESS) err = clBuildProgram(p, 1, &dev, "", NULL, NULL);
      if (err != CL_SUCCESS) {
        printf("local: the dynamic kernel does not build (%d)\n", (int)err);
        if (p) clReleaseProgram(p);
        continue;
      }
    } else {
      launch(ctx, dev, p, 0, n);
    }
    launch(ctx, dev, p, 1, n);
    clReleaseProgram(p);
  }
}
