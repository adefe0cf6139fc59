/* The device model read at context creation. */
#include "common.h"
#include "families.h"
#include "plan.h"
#include "tune.h"

#include <stdlib.h>
#include <string.h>

Test(device, model_matches_the_device) {
  clattn_context *ctx = test_context(NULL);
  const clattn__device *d = &ctx->device;
  cl_device_id id = clattn_context_device(ctx);
  cl_ulong local = 0, global = 0;
  clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
  cr_assert_eq(d->local_mem_reported, local);
  cr_assert_geq(d->local_mem, local); /* more only where the device is known to allow it */
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

/* A class without a built-in on PoCL (d = 96), and its plan's config and local memory. */
static clattn_problem problem96(void) {
  clattn_problem p = {.batch = 1, .heads_q = 2, .heads_kv = 2, .seqlen_q = 256, .seqlen_kv = 256};
  p.head_dim = p.head_dim_v = 96, p.scale = 0.1f, p.algorithm = CLATTN_ALGO_FUSED;
  return p;
}

static clattn_plan_info plan96(clattn_context *ctx) {
  clattn_problem p = problem96();
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  return info;
}

/* Where the library allows more local memory than the device reports (NVIDIA, device.c), the
 * heuristic keeps to the reported size (its plans are the measured ones) while an override, a
 * built-in or the tuner may use the rest. Pretended here: PoCL reports 24 KiB. */
Test(device, heuristic_keeps_to_the_reported_local_memory) {
  clattn_context *ctx = test_context(NULL);
  ctx->device.local_mem_reported = 24 * 1024;
  clattn_plan_info h = plan96(ctx);
  cr_assert_str_eq(h.origin, "heuristic");
  cr_assert_leq(h.local_mem_bytes, 24 * 1024, "heuristic plan uses %zu bytes", h.local_mem_bytes);
  clattn_problem p = problem96();
  clattn_config c = {.kernel = "forward_tiles",
                     .block_q = 128,
                     .block_kv = 64,
                     .threads_per_row = 1,
                     .stage_kv = 1,
                     .rows_per_item = 1,
                     .vector_width = 1};
  cr_assert_eq(clattn_override_config(ctx, &p, &c), CLATTN_OK, "%s", clattn_last_error(ctx));
  clattn_plan_info o = plan96(ctx);
  cr_assert_str_eq(o.origin, "override");
  cr_assert_gt(o.local_mem_bytes, 24 * 1024, "the override uses %zu bytes", o.local_mem_bytes);
  clattn_context_destroy(ctx);
}

/* CLATTN_LOCAL_MEM replaces the limit (an experiment's knob); below the reported size the
 * heuristic keeps to it too. */
Test(device, local_mem_from_the_environment) {
  setenv("CLATTN_LOCAL_MEM", "20480", 1);
  clattn_context *ctx = test_context(NULL);
  unsetenv("CLATTN_LOCAL_MEM");
  cl_ulong local = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
  cr_assert_eq(ctx->device.local_mem, 20480);
  cr_assert_eq(ctx->device.local_mem_reported, local);
  clattn_plan_info h = plan96(ctx);
  cr_assert_leq(h.local_mem_bytes, 20480, "heuristic plan uses %zu bytes", h.local_mem_bytes);
  cr_assert_eq(h.local_mem_available, 20480);
  clattn_context_destroy(ctx);
}

/* Where NVIDIA allows more local memory than it reports (device.c), a backward config's staged
 * rows still fit the reported size first, so the kernel is the one it was measured with (fp32
 * backward_mma at d = 128 staged 32 rows in 48 KiB; the larger limit would take 64, twice the
 * memory and half the work-groups an SM). */
Test(device, staged_rows_fit_the_reported_size_first) {
  clattn__device dev = {0};
  dev.type = CL_DEVICE_TYPE_GPU, dev.tensor_cores = 1;
  dev.local_mem = dev.local_mem_reported = 48 * 1024;
  dev.max_work_group = 1024, dev.max_item_size[0] = 1024;
  clattn__class k = {128, 128, 0, 4096, CLATTN__BACKWARD, CLATTN_F32};
  clattn__config c = {128, 128, 1, 1, 0, clattn__family_find("backward_mma"), 1, 1};
  const size_t reported = clattn__config_local_bytes(&dev, &k, &c);
  cr_assert_leq(reported, 48 * 1024);
  dev.local_mem = 226 * 1024; /* Hopper's limit */
  cr_assert_eq(clattn__config_local_bytes(&dev, &k, &c), reported);
  /* Past the reported size only where nothing smaller fits it. */
  dev.local_mem_reported = 8 * 1024;
  cr_assert_gt(clattn__config_local_bytes(&dev, &k, &c), 8 * 1024);
  cr_assert_leq(clattn__config_local_bytes(&dev, &k, &c), 226 * 1024);
}

/* The merge's and the append's work-groups: what they want, else the largest power of two the
 * device allows (the append's tree needs a power of two). */
Test(device, helper_work_groups_fit_the_device) {
  clattn__device d = {0};
  d.max_work_group = 1024, d.max_item_size[0] = 1024;
  cr_assert_eq(clattn__helper_wg(&d, 256), 256);
  cr_assert_eq(clattn__helper_wg(&d, 64), 64);
  d.max_work_group = 200;
  cr_assert_eq(clattn__helper_wg(&d, 256), 128);
  d.max_item_size[0] = 32;
  cr_assert_eq(clattn__helper_wg(&d, 256), 32);
  cr_assert_eq(clattn__helper_wg(&d, 64), 32);
}
