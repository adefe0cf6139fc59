/* The context's lifecycle, on top of every layer (docs/DESIGN.md): the caller's OpenCL objects,
 * the device model and options resolved at creation, and at destroy every layer's caches. */
#include "tune.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

/* An option given explicitly wins; then the environment (read here, once); then the default. */
static void resolve_options(clattn_context *ctx, const clattn_options *opt) {
  const char *cache = opt && opt->cache_dir ? opt->cache_dir : getenv("CLATTN_CACHE_DIR");
  if (cache) {
    ctx->cache_dir = cache[0] ? strdup(cache) : NULL;
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0]) {
      if (asprintf(&ctx->cache_dir, "%s/clattn", xdg) < 0) ctx->cache_dir = NULL;
    } else if (home && home[0]) {
      if (asprintf(&ctx->cache_dir, "%s/.cache/clattn", home) < 0) ctx->cache_dir = NULL;
    }
  }
  const char *db = opt && opt->tuning_db ? opt->tuning_db : getenv("CLATTN_TUNING_DB");
  if (db) {
    ctx->tuning_db = db[0] ? strdup(db) : NULL;
  } else if (ctx->cache_dir) {
    if (asprintf(&ctx->tuning_db, "%s/tuning.json", ctx->cache_dir) < 0) ctx->tuning_db = NULL;
  }
  const char *kdir = opt && opt->kernel_dir ? opt->kernel_dir : getenv("CLATTN_KERNEL_DIR");
  ctx->kernel_dir = kdir && kdir[0] ? dup_or_null(kdir) : NULL;
  /* The caller's tensors live in global memory too: by default the standard path takes half. */
  const char *ws = getenv("CLATTN_WORKSPACE_LIMIT");
  char *end = NULL;
  unsigned long long env = ws && ws[0] ? strtoull(ws, &end, 10) : 0;
  if (end && *end) {
    clattn__warn(ctx, "CLATTN_WORKSPACE_LIMIT=%s is not a number of bytes; ignored", ws);
    env = 0;
  }
  ctx->workspace_limit = opt && opt->workspace_limit ? opt->workspace_limit
                         : env                       ? (size_t)env
                                                     : (size_t)(ctx->device.global_mem / 2);
  /* An experiment's forced count of key ranges for split-key plans (README). */
  const char *sp = getenv("CLATTN_SPLITS");
  end = NULL;
  unsigned long splits = sp && sp[0] ? strtoul(sp, &end, 10) : 0;
  if ((end && *end) || splits > 128) {
    clattn__warn(ctx, "CLATTN_SPLITS=%s is not a count from 1 to 128; ignored", sp);
    splits = 0;
  }
  ctx->force_splits = (unsigned)splits;
  /* The decode kernels may merge their own key ranges, the last work-group of a tile combining
   * them, where one work-group's stores can be ordered before another's loads, which OpenCL 1.2
   * does not promise: on NVIDIA by PTX's fence (cl/decode_common.cl), on a CPU (coherent
   * caches). 1: where a tile's rows x ranges are few (runtime/ops/split.c); 2: always
   * ($CLATTN_FUSED_MERGE=1); 0: never ($CLATTN_FUSED_MERGE=0). */
  const char *fm = getenv("CLATTN_FUSED_MERGE");
  if (fm && strcmp(fm, "0") && strcmp(fm, "1")) {
    clattn__warn(ctx, "CLATTN_FUSED_MERGE=%s is neither 0 nor 1; ignored", fm);
    fm = NULL;
  }
  const int ordered = (ctx->device.tensor_cores && !ctx->device.mma_emulated) ||
                      (ctx->device.type & CL_DEVICE_TYPE_CPU);
  ctx->merge_fused = !ordered || (fm && !strcmp(fm, "0")) ? 0 : fm && !strcmp(fm, "1") ? 2 : 1;
  /* Build options and logging are fixed for the context's life, as every other setting, so a
   * program that changes its environment later (or another thread's setenv) changes nothing. */
  const char *extra = getenv("CLATTN_BUILD_OPTIONS");
  ctx->device.build_options = extra && extra[0] ? strdup(extra) : NULL;
  ctx->build_log = getenv("CLATTN_BUILD_LOG") != NULL;
}

clattn_status clattn_context_create(cl_context cl_ctx, cl_device_id device, cl_command_queue queue,
                                    const clattn_options *options, clattn_context **out) {
  if (!out) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!cl_ctx || !device)
    return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "%s is NULL",
                        !cl_ctx ? "the cl_context" : "the cl_device_id");
  clattn_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  pthread_mutex_init(&ctx->lock, NULL);
  pthread_mutex_init(&ctx->text_lock, NULL);
  char why[128];
  cl_int err = clattn__device_query(device, &ctx->device, why, sizeof why);
  clattn_status st = CLATTN_OK;
  if (err != CL_SUCCESS) {
    st = clattn__fail_cl(NULL, err, why);
    goto fail;
  }
  if (queue) {
    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    cl_command_queue_properties props = 0;
    err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
    if (err == CL_SUCCESS)
      err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
    if (err == CL_SUCCESS)
      err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS) {
      st = clattn__fail_cl(NULL, err, "clGetCommandQueueInfo on the given queue");
      goto fail;
    }
    if (qctx != cl_ctx || qdev != device) {
      st = clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "the queue belongs to another %s",
                        qctx != cl_ctx ? "context" : "device");
      goto fail;
    }
    clRetainCommandQueue(queue);
    ctx->queue = queue;
    ctx->queue_in_order = !(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  } else {
    ctx->queue = clCreateCommandQueue(cl_ctx, device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
      st = clattn__fail_cl(NULL, err, "clCreateCommandQueue");
      goto fail;
    }
    ctx->queue_in_order = 1;
  }
  clRetainContext(cl_ctx);
  clRetainDevice(device);
  ctx->cl = cl_ctx;
  ctx->device_id = device;
  resolve_options(ctx, options);
  const clattn__device *d = &ctx->device;
  snprintf(ctx->summary, sizeof ctx->summary,
           "%s (%s; driver %s; %s) | %u compute units | local memory %llu KiB%s | global %.1f GiB, "
           "max allocation %.1f GiB",
           d->name, d->vendor, d->driver, d->platform_name, d->compute_units,
           (unsigned long long)(d->local_mem / 1024), d->local_mem_emulated ? " (emulated)" : "",
           d->global_mem / 1073741824.0, d->max_alloc / 1073741824.0);
  *out = ctx;
  return CLATTN_OK;
fail:
  clattn__device_release(&ctx->device);
  pthread_mutex_destroy(&ctx->text_lock);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return st;
}

void clattn_context_destroy(clattn_context *ctx) {
  if (!ctx) return;
  /* Every layer's caches, top down: plans (kernels) before the programs they came from. */
  clattn__plans_forget(ctx, NULL);
  clattn__overrides_release(ctx);
  clattn__context_db_release(ctx);
  clattn__standard_release(ctx);
  clattn__split_release(ctx);
  clattn__kv_release(ctx);
  clattn__backward_release(ctx);
  clattn__program_cache_release(ctx);
  clattn__errors_release(ctx);
  clReleaseCommandQueue(ctx->queue);
  clReleaseDevice(ctx->device_id);
  clReleaseContext(ctx->cl);
  free(ctx->device.build_options);
  clattn__device_release(&ctx->device);
  free(ctx->cache_dir);
  free(ctx->tuning_db);
  free(ctx->kernel_dir);
  pthread_mutex_destroy(&ctx->text_lock);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
}

/* CLATTN_LIBRARY_VERSION* come from CMake's project version (CMakeLists.txt): they say which
 * library this is, whatever header a caller was compiled with. */
const char *clattn_version(void) {
  return CLATTN_LIBRARY_VERSION;
}

unsigned clattn_version_number(void) {
  return CLATTN_LIBRARY_VERSION_NUMBER;
}

cl_context clattn_context_cl_context(const clattn_context *ctx) {
  return ctx ? ctx->cl : NULL;
}
cl_command_queue clattn_context_queue(const clattn_context *ctx) {
  return ctx ? ctx->queue : NULL;
}
cl_device_id clattn_context_device(const clattn_context *ctx) {
  return ctx ? ctx->device_id : NULL;
}
const char *clattn_context_device_summary(const clattn_context *ctx) {
  return ctx ? ctx->summary : "";
}

/* The default device (core/select.c), in a context of its own. */
clattn_status clattn_context_create_default(const clattn_options *options, clattn_context **out) {
  if (!out) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  cl_platform_id platform;
  cl_device_id device;
  clattn_status st = clattn__pick_device(&platform, &device);
  if (st != CLATTN_OK) return st;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  cl_int err;
  cl_context cl = clCreateContext(props, 1, &device, NULL, NULL, &err);
  if (err != CL_SUCCESS) return clattn__fail_cl(NULL, err, "clCreateContext");
  st = clattn_context_create(cl, device, NULL, options, out);
  clReleaseContext(cl); /* the clattn context holds its own reference */
  return st;
}
