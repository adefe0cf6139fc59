/* Device selection and hashing. The default device: $CLATTN_DEVICE ("P:D" indices or a name
 * substring), else the first GPU, else the first device of any type. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PLATFORMS = 16, MAX_DEVICES = 64 };

typedef struct {
  cl_platform_id platform;
  cl_device_id device;
} choice;

static int parse_indices(const char *s, unsigned *p, unsigned *d) {
  char tail;
  return sscanf(s, "%u:%u%c", p, d, &tail) == 2;
}

static clattn_status pick(const char *want, choice *out) {
  cl_platform_id platforms[MAX_PLATFORMS];
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(MAX_PLATFORMS, platforms, &np);
  if (err != CL_SUCCESS || np == 0)
    return clattn__fail(NULL, CLATTN_ERR_NO_DEVICE, "no OpenCL platform found (%s)",
                        clattn__cl_error_name(err));
  if (np > MAX_PLATFORMS) np = MAX_PLATFORMS;
  unsigned wp = 0, wd = 0;
  int by_index = want && parse_indices(want, &wp, &wd);
  int have_any = 0, have_gpu = 0;
  choice any = {0}, gpu = {0};
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id devs[MAX_DEVICES];
    cl_uint nd = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS)
      continue;
    if (nd > MAX_DEVICES) nd = MAX_DEVICES;
    for (cl_uint d = 0; d < nd; d++) {
      choice c = {platforms[p], devs[d]};
      if (by_index) {
        if (p == wp && d == wd) {
          *out = c;
          return CLATTN_OK;
        }
        continue;
      }
      if (want) {
        char name[256] = {0};
        clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
        if (strstr(name, want)) {
          *out = c;
          return CLATTN_OK;
        }
        continue;
      }
      cl_device_type type = 0;
      clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
      if (!have_any) any = c, have_any = 1;
      if (!have_gpu && (type & CL_DEVICE_TYPE_GPU)) gpu = c, have_gpu = 1;
    }
  }
  if (want)
    return clattn__fail(NULL, CLATTN_ERR_NO_DEVICE,
                        "CLATTN_DEVICE=\"%s\" matches no device (use \"P:D\" indices or a part of "
                        "the device name; `clattn devices` lists them)",
                        want);
  if (!have_any) return clattn__fail(NULL, CLATTN_ERR_NO_DEVICE, "no OpenCL device found");
  *out = have_gpu ? gpu : any;
  return CLATTN_OK;
}

clattn_status clattn__pick_device(cl_platform_id *platform, cl_device_id *device) {
  const char *want = getenv("CLATTN_DEVICE");
  choice c;
  clattn_status st = pick(want && want[0] ? want : NULL, &c);
  if (st == CLATTN_OK) *platform = c.platform, *device = c.device;
  return st;
}

uint64_t clattn__hash(const void *data, size_t len, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull ^ seed; /* FNV-1a, 64-bit */
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
