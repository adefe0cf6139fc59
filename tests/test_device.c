/* The device model read at context creation. */
#include "common.h"
#include "tune.h"

#include <string.h>

Test(device, model_matches_the_device) {
  clattn_context *ctx = test_context(NULL);
  const clattn__device *d = &ctx->device;
  cl_device_id id = clattn_context_device(ctx);
  cl_ulong local = 0, global = 0;
  clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
  cr_assert_eq(d->local_mem, local);
  cr_assert_eq(d->global_mem, global);
  cr_assert_gt(d->max_alloc, 0);
  cr_assert_leq(d->max_alloc, d->global_mem);
  cr_assert_gt(d->compute_units, 0);
  cr_assert_gt(d->max_work_group, 0);
  cr_assert_gt(d->max_item_size[0], 0);
  cr_assert_gt(strlen(d->name), 0);
  cr_assert_not_null(d->extensions);
  /* The fingerprint names the platform, device and driver (keys of the tuning database). */
  cr_assert(strstr(d->fingerprint, d->name) && strstr(d->fingerprint, d->driver) &&
                strstr(d->fingerprint, d->platform_name),
            "fingerprint: %s", d->fingerprint);
  if (d->type & CL_DEVICE_TYPE_CPU)
    cr_assert(d->local_mem_emulated, "PoCL's CPU device reports CL_GLOBAL local memory");
  clattn_context_destroy(ctx);
}

Test(device, error_names) {
  cr_assert_str_eq(clattn__cl_error_name(CL_INVALID_MEM_OBJECT), "CL_INVALID_MEM_OBJECT");
  cr_assert(strstr(clattn__cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR"));
  cr_assert_str_eq(clattn__cl_error_name(-12345), "unknown OpenCL error");
}
