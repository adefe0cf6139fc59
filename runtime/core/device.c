/* Device model: what the tiling and the memory plans need to know about a device, read once
 * at context creation. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *clattn__cl_error_name(cl_int err) {
  static const struct {
    cl_int code;
    const char *name;
  } names[] = {
      {CL_SUCCESS, "CL_SUCCESS"},
      {CL_DEVICE_NOT_FOUND, "CL_DEVICE_NOT_FOUND"},
      {CL_DEVICE_NOT_AVAILABLE, "CL_DEVICE_NOT_AVAILABLE"},
      {CL_COMPILER_NOT_AVAILABLE, "CL_COMPILER_NOT_AVAILABLE"},
      {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
      {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
      {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
      {CL_PROFILING_INFO_NOT_AVAILABLE, "CL_PROFILING_INFO_NOT_AVAILABLE"},
      {CL_MEM_COPY_OVERLAP, "CL_MEM_COPY_OVERLAP"},
      {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
      {CL_MAP_FAILURE, "CL_MAP_FAILURE"},
      {CL_MISALIGNED_SUB_BUFFER_OFFSET, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
      {CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
       "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
      {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
      {CL_INVALID_DEVICE_TYPE, "CL_INVALID_DEVICE_TYPE"},
      {CL_INVALID_PLATFORM, "CL_INVALID_PLATFORM"},
      {CL_INVALID_DEVICE, "CL_INVALID_DEVICE"},
      {CL_INVALID_CONTEXT, "CL_INVALID_CONTEXT"},
      {CL_INVALID_QUEUE_PROPERTIES, "CL_INVALID_QUEUE_PROPERTIES"},
      {CL_INVALID_COMMAND_QUEUE, "CL_INVALID_COMMAND_QUEUE"},
      {CL_INVALID_HOST_PTR, "CL_INVALID_HOST_PTR"},
      {CL_INVALID_MEM_OBJECT, "CL_INVALID_MEM_OBJECT"},
      {CL_INVALID_BUILD_OPTIONS, "CL_INVALID_BUILD_OPTIONS"},
      {CL_INVALID_PROGRAM, "CL_INVALID_PROGRAM"},
      {CL_INVALID_PROGRAM_EXECUTABLE, "CL_INVALID_PROGRAM_EXECUTABLE"},
      {CL_INVALID_KERNEL_NAME, "CL_INVALID_KERNEL_NAME"},
      {CL_INVALID_KERNEL, "CL_INVALID_KERNEL"},
      {CL_INVALID_ARG_INDEX, "CL_INVALID_ARG_INDEX"},
      {CL_INVALID_ARG_VALUE, "CL_INVALID_ARG_VALUE"},
      {CL_INVALID_ARG_SIZE, "CL_INVALID_ARG_SIZE"},
      {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
      {CL_INVALID_WORK_DIMENSION, "CL_INVALID_WORK_DIMENSION"},
      {CL_INVALID_WORK_GROUP_SIZE, "CL_INVALID_WORK_GROUP_SIZE"},
      {CL_INVALID_WORK_ITEM_SIZE, "CL_INVALID_WORK_ITEM_SIZE"},
      {CL_INVALID_GLOBAL_OFFSET, "CL_INVALID_GLOBAL_OFFSET"},
      {CL_INVALID_EVENT_WAIT_LIST, "CL_INVALID_EVENT_WAIT_LIST"},
      {CL_INVALID_EVENT, "CL_INVALID_EVENT"},
      {CL_INVALID_OPERATION, "CL_INVALID_OPERATION"},
      {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
      {CL_INVALID_GLOBAL_WORK_SIZE, "CL_INVALID_GLOBAL_WORK_SIZE"},
      {-1001, "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL driver is installed or registered)"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == err) return names[i].name;
  return "unknown OpenCL error";
}

static cl_int info_str(cl_device_id dev, cl_device_info what, char *buf, size_t len) {
  cl_int err = clGetDeviceInfo(dev, what, len, buf, NULL);
  if (err != CL_SUCCESS) buf[0] = 0;
  buf[len - 1] = 0;
  return err;
}

static cl_int info_alloc_str(cl_device_id dev, cl_device_info what, char **out) {
  size_t n = 0;
  cl_int err = clGetDeviceInfo(dev, what, 0, NULL, &n);
  if (err != CL_SUCCESS) return err;
  *out = calloc(n + 1, 1);
  if (!*out) return CL_OUT_OF_HOST_MEMORY;
  return clGetDeviceInfo(dev, what, n, *out, NULL);
}

/* The local memory a work-group of an NVIDIA GPU may use, by compute capability: CUDA's
 * opt-in maximum of shared memory per block, less 1 KiB for what the compiler adds to a kernel's
 * arrays (4-16 bytes measured). NVIDIA's OpenCL reports CUDA's default of 48 KiB, yet builds and
 * runs kernels with larger static __local arrays: on an H100 (9.0) 160 KiB were written and read
 * back right, and 227 KiB plus the compiler's 4 bytes failed to build (tools/ptx_probe's local
 * probe, docs/BENCHMARKS.md stop 40). 0 where not known. */
static cl_ulong nvidia_local_mem(cl_uint major, cl_uint minor) {
  unsigned kib = 0;
  if (major == 7) kib = minor == 5 ? 64 : 96;
  if (major == 8) kib = minor == 0 || minor == 7 ? 163 : 99;
  if (major == 9 || major == 10) kib = 227;
  if (major == 12) kib = 99;
  return kib ? (cl_ulong)(kib - 1) * 1024 : 0;
}

cl_int clattn__device_query(cl_device_id dev, clattn__device *d, char *why, size_t why_len) {
  memset(d, 0, sizeof *d);
  cl_platform_id platform = NULL;
  cl_device_local_mem_type lmt = CL_LOCAL;
  struct {
    cl_device_info what;
    void *dst;
    size_t size;
    const char *name;
  } fixed[] = {
      {CL_DEVICE_PLATFORM, &platform, sizeof platform, "CL_DEVICE_PLATFORM"},
      {CL_DEVICE_TYPE, &d->type, sizeof d->type, "CL_DEVICE_TYPE"},
      {CL_DEVICE_LOCAL_MEM_SIZE, &d->local_mem, sizeof d->local_mem, "CL_DEVICE_LOCAL_MEM_SIZE"},
      {CL_DEVICE_LOCAL_MEM_TYPE, &lmt, sizeof lmt, "CL_DEVICE_LOCAL_MEM_TYPE"},
      {CL_DEVICE_GLOBAL_MEM_SIZE, &d->global_mem, sizeof d->global_mem,
       "CL_DEVICE_GLOBAL_MEM_SIZE"},
      {CL_DEVICE_MAX_MEM_ALLOC_SIZE, &d->max_alloc, sizeof d->max_alloc,
       "CL_DEVICE_MAX_MEM_ALLOC_SIZE"},
      {CL_DEVICE_MAX_COMPUTE_UNITS, &d->compute_units, sizeof d->compute_units,
       "CL_DEVICE_MAX_COMPUTE_UNITS"},
      {CL_DEVICE_MAX_WORK_GROUP_SIZE, &d->max_work_group, sizeof d->max_work_group,
       "CL_DEVICE_MAX_WORK_GROUP_SIZE"},
      {CL_DEVICE_MAX_WORK_ITEM_SIZES, d->max_item_size, sizeof d->max_item_size,
       "CL_DEVICE_MAX_WORK_ITEM_SIZES"},
      {CL_DEVICE_MEM_BASE_ADDR_ALIGN, &d->mem_base_align_bits, sizeof d->mem_base_align_bits,
       "CL_DEVICE_MEM_BASE_ADDR_ALIGN"},
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    cl_int err = clGetDeviceInfo(dev, fixed[i].what, fixed[i].size, fixed[i].dst, NULL);
    if (err != CL_SUCCESS) {
      snprintf(why, why_len, "clGetDeviceInfo(%s)", fixed[i].name);
      return err;
    }
  }
  d->local_mem_emulated = lmt == CL_GLOBAL;
  info_str(dev, CL_DEVICE_NAME, d->name, sizeof d->name);
  info_str(dev, CL_DEVICE_VENDOR, d->vendor, sizeof d->vendor);
  info_str(dev, CL_DRIVER_VERSION, d->driver, sizeof d->driver);
  info_str(dev, CL_DEVICE_VERSION, d->version, sizeof d->version);
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof d->platform_name, d->platform_name, NULL);
  clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof d->platform_version, d->platform_version,
                    NULL);
  d->platform_name[sizeof d->platform_name - 1] = 0;
  d->platform_version[sizeof d->platform_version - 1] = 0;
  cl_int err = info_alloc_str(dev, CL_DEVICE_EXTENSIONS, &d->extensions);
  if (err != CL_SUCCESS) {
    snprintf(why, why_len, "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)");
    return err;
  }
  /* Tensor cores through inline PTX (mma.sync TF32 needs sm_80): NVIDIA's OpenCL reports the
   * compute capability with cl_nv_device_attribute_query. */
  d->local_mem_reported = d->local_mem;
  if (strstr(d->vendor, "NVIDIA") && strstr(d->extensions, "cl_nv_device_attribute_query")) {
    cl_uint major = 0, minor = 0;
    if (clGetDeviceInfo(dev, 0x4000 /* CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV */, sizeof major,
                        &major, NULL) == CL_SUCCESS) {
      d->tensor_cores = major >= 8, d->cc_major = major;
      if (clGetDeviceInfo(dev, 0x4001 /* CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV */, sizeof minor,
                          &minor, NULL) == CL_SUCCESS) {
        cl_ulong most = nvidia_local_mem(major, minor);
        if (most > d->local_mem) d->local_mem = most;
      }
    }
  }
  /* CLATTN_LOCAL_MEM (bytes): an experiment's limit in place of the one above. */
  const char *lm = getenv("CLATTN_LOCAL_MEM");
  if (lm && *lm >= '0' && *lm <= '9') { /* digits only: strtoull would wrap "-1" */
    char *end = NULL;
    unsigned long long v = strtoull(lm, &end, 10);
    if (end && !*end && v >= 1024) d->local_mem = v;
  }
  /* For tests: forward_mma's fragment logic on any device, with mma.sync emulated (slow). */
  const char *emu = getenv("CLATTN_MMA_EMULATE");
  if (!d->tensor_cores && emu && !strcmp(emu, "1")) d->tensor_cores = d->mma_emulated = 1;
  snprintf(d->fingerprint, sizeof d->fingerprint, "%s|%s|%s|%s|%s|%u CU|%llu B local%s",
           d->platform_name, d->platform_version, d->vendor, d->name, d->driver, d->compute_units,
           (unsigned long long)d->local_mem_reported, d->mma_emulated ? "|mma emulated" : "");
  return CL_SUCCESS;
}

void clattn__device_release(clattn__device *d) {
  free(d->extensions);
  d->extensions = NULL;
}
