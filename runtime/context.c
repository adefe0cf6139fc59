/* Context: the caller's OpenCL objects, the device model, options, per-thread error messages,
 * and the caches that belong to one device. */
#include "internal.h"
#include "tunedb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The last failure of a call that had no context (DESIGN.md: thread-local). */
static _Thread_local char no_context_error[1024];

const char *clattn_status_string(clattn_status status) {
  switch (status) {
#define CLATTN_STATUS_TEXT_(name, value, text)                                                     \
  case CLATTN_##name:                                                                              \
    return "CLATTN_" #name ": " text;
    CLATTN_STATUS_MAP(CLATTN_STATUS_TEXT_)
#undef CLATTN_STATUS_TEXT_
  }
  return "unknown clattn status";
}

static clattn__thread_error *thread_slot(clattn_context *ctx) {
  pthread_t self = pthread_self();
  for (clattn__thread_error *e = ctx->errors; e; e = e->next)
    if (pthread_equal(e->thread, self)) return e;
  clattn__thread_error *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->thread = self;
  e->next = ctx->errors;
  ctx->errors = e;
  return e;
}

static void set_message(clattn_context *ctx, char *msg) {
  if (!ctx) {
    snprintf(no_context_error, sizeof no_context_error, "%s", msg ? msg : "out of host memory");
    free(msg);
    return;
  }
  clattn__thread_error *e = thread_slot(ctx);
  if (!e) {
    free(msg);
    return;
  }
  free(e->message);
  e->message = msg;
}

clattn_status clattn__fail(clattn_context *ctx, clattn_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  va_end(ap);
  set_message(ctx, msg);
  return status;
}

clattn_status clattn__fail_cl(clattn_context *ctx, cl_int err, const char *what) {
  clattn_status st = CLATTN_ERR_OPENCL;
  if (err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
      err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
    st = CLATTN_ERR_OUT_OF_RESOURCES;
  return clattn__fail(ctx, st, "%s failed: %s (%d)", what, clattn__cl_error_name(err), err);
}

void clattn__warn(clattn_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = NULL;
  if (vasprintf(&line, fmt, ap) < 0) line = NULL;
  va_end(ap);
  if (!line) return;
  if (!ctx->diagnostics || !strstr(ctx->diagnostics, line)) {
    char *all = NULL;
    if (asprintf(&all, "%s%s\n", ctx->diagnostics ? ctx->diagnostics : "", line) >= 0) {
      free(ctx->diagnostics);
      ctx->diagnostics = all;
    }
  }
  free(line);
}

const char *clattn__diagnostics_last(const clattn_context *ctx) {
  if (!ctx->diagnostics) return "";
  size_t n = strlen(ctx->diagnostics);
  const char *p = ctx->diagnostics + n - 1; /* the final newline */
  while (p > ctx->diagnostics && p[-1] != '\n') p--;
  return p;
}

const char *clattn_context_diagnostics(const clattn_context *ctx) {
  return ctx && ctx->diagnostics ? ctx->diagnostics : "";
}

void clattn__append_error(clattn_context *ctx, const char *text) {
  if (!ctx) return;
  clattn__thread_error *e = thread_slot(ctx);
  if (!e) return;
  char *msg = NULL;
  if (asprintf(&msg, "%s%s", e->message ? e->message : "", text) < 0) return;
  free(e->message);
  e->message = msg;
}

const char *clattn__last_error_locked(const clattn_context *ctx) {
  const char *msg = "";
  pthread_t self = pthread_self();
  for (const clattn__thread_error *e = ctx->errors; e; e = e->next)
    if (pthread_equal(e->thread, self) && e->message) msg = e->message;
  return msg;
}

const char *clattn_last_error(const clattn_context *cctx) {
  if (!cctx) return no_context_error;
  clattn_context *ctx = (clattn_context *)cctx;
  const char *msg = "";
  pthread_mutex_lock(&ctx->lock);
  pthread_t self = pthread_self();
  for (clattn__thread_error *e = ctx->errors; e; e = e->next)
    if (pthread_equal(e->thread, self) && e->message) msg = e->message;
  pthread_mutex_unlock(&ctx->lock);
  return msg;
}

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
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
  return st;
}

void clattn_context_destroy(clattn_context *ctx) {
  if (!ctx) return;
  clattn__plans_forget(ctx, NULL);
  for (clattn__override *o = ctx->overrides, *next; o; o = next) {
    next = o->next;
    free(o);
  }
  if (ctx->db) clattn__db_free(ctx->db);
  free(ctx->db);
  free(ctx->diagnostics);
  clattn__standard_release(ctx);
  clattn__split_release(ctx);
  clattn__backward_release(ctx);
  clattn__program_cache_release(ctx);
  for (clattn__thread_error *e = ctx->errors, *next; e; e = next) {
    next = e->next;
    free(e->message);
    free(e);
  }
  clReleaseCommandQueue(ctx->queue);
  clReleaseDevice(ctx->device_id);
  clReleaseContext(ctx->cl);
  clattn__device_release(&ctx->device);
  free(ctx->cache_dir);
  free(ctx->tuning_db);
  free(ctx->kernel_dir);
  pthread_mutex_destroy(&ctx->lock);
  free(ctx);
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

clattn_tensor clattn_bshd(cl_mem buf, size_t seqlen, size_t heads, size_t dim) {
  clattn_tensor t = {buf, 0, seqlen * heads * dim, heads * dim, dim};
  return t;
}

clattn_tensor clattn_bhsd(cl_mem buf, size_t seqlen, size_t heads, size_t dim) {
  clattn_tensor t = {buf, 0, heads * seqlen * dim, dim, seqlen * dim};
  return t;
}
