/* clattn_forward, clattn_forward_ex and clattn_explain: validate, plan, set arguments, enqueue. */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Both entry points: ext is clattn_forward_ex's args (its variant members checked after the
 * problem and the tensors), NULL from clattn_forward. */
static clattn_status forward_call(clattn_context *ctx, const clattn_problem *problem,
                                  const clattn_tensor *q, const clattn_tensor *k,
                                  const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                  const clattn_args *ext, cl_uint num_wait, const cl_event *wait,
                                  cl_event *done) {
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st == CLATTN_OK && num_wait && !wait)
    st =
        clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "num_wait is %u but wait is NULL", num_wait);
  const clattn_kv_cache *cache = ext ? ext->kv_cache : NULL;
  if (st == CLATTN_OK && cache) {
    /* K and V are the cache's views (paged: a pool the kernels index through the table). */
    st = clattn__check_cache_forward(ctx, &s, ext);
    k = &cache->k, v = &cache->v;
  } else if (st == CLATTN_OK) {
    st = clattn__check_forward_tensors(ctx, &s, q, k, v, o, lse);
    if (st == CLATTN_OK) st = clattn__check_variant_args(ctx, &s, ext, 0);
  }
  if (st == CLATTN_OK && s.empty) {
    if (done) {
      cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, num_wait, wait, done);
      if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
      clFlush(ctx->queue);
    }
  } else if (st == CLATTN_OK && s.algo == CLATTN_ALGO_STANDARD && s.kv_cache) {
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "a KV cache (kv_cache) is read by the fused path's decode kernels only, not "
                      "the standard one (head dims above %d need it)",
                      CLATTN__MAX_FUSED_DIM);
  } else if (st == CLATTN_OK && s.algo == CLATTN_ALGO_STANDARD && s.varlen) {
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "variable-length sequences (CLATTN_VARLEN) run on the fused path only so "
                      "far, not the standard one (head dims above %d need it)",
                      CLATTN__MAX_FUSED_DIM);
  } else if (st == CLATTN_OK && s.algo == CLATTN_ALGO_STANDARD) {
    st = clattn__standard_forward(ctx, &s, q, k, v, o, lse, num_wait, wait, done);
  } else if (st == CLATTN_OK) {
    const clattn__plan *p;
    st = clattn__plan_for_grid(ctx, &s, &p);
    unsigned per_split = 0,
             splits = st == CLATTN_OK ? clattn__split_count(ctx, &s, p, &per_split) : 1;
    if (st == CLATTN_OK && splits > 1)
      st = clattn__forward_split(ctx, &s, p, splits, per_split, q, k, v, o, lse, num_wait, wait,
                                 done);
    else if (st == CLATTN_OK)
      st = clattn__enqueue_forward(ctx, ctx->queue, ctx->queue_in_order, &s, p, NULL, q, k, v, o,
                                   lse, num_wait, wait, done);
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

clattn_status clattn_forward(clattn_context *ctx, const clattn_problem *problem,
                             const clattn_tensor *q, const clattn_tensor *k, const clattn_tensor *v,
                             const clattn_tensor *o, cl_mem lse, cl_uint num_wait,
                             const cl_event *wait, cl_event *done) {
  if (done) *done = NULL;
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  return forward_call(ctx, problem, q, k, v, o, lse, NULL, num_wait, wait, done);
}

clattn_status clattn_forward_ex(clattn_context *ctx, const clattn_problem *problem,
                                const clattn_args *args, cl_uint num_wait, const cl_event *wait,
                                cl_event *done) {
  if (done) *done = NULL;
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  if (!args) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "args is NULL");
  return forward_call(ctx, problem, &args->q, &args->k, &args->v, &args->o, args->lse, args,
                      num_wait, wait, done);
}

/* The fused plan's fields of clattn_plan_info. */
static void describe_plan(const clattn_context *ctx, const clattn__plan *p, const clattn__shape *s,
                          clattn_plan_info *out) {
  clattn_config pub;
  clattn__config_to_public(&p->cfg, &pub);
  snprintf(out->kernel, sizeof out->kernel, "%s", pub.kernel);
  out->rows_per_item = pub.rows_per_item;
  out->vector_width = pub.vector_width;
  out->block_q = pub.block_q;
  out->block_kv = pub.block_kv;
  out->threads_per_row = pub.threads_per_row;
  out->stage_kv = pub.stage_kv;
  out->pad = pub.pad;
  out->work_group_size = clattn__config_work_group(&p->cfg);
  size_t model = clattn__config_local_bytes(&ctx->device, &p->cls, &p->cfg);
  out->local_mem_bytes = p->local_mem > model ? p->local_mem : model;
  snprintf(out->origin, sizeof out->origin, "%s", p->origin);
  out->seqlen_bucket = p->cls.bucket;
  snprintf(out->reason, sizeof out->reason, "%s", p->reason);
  clattn__bytes fused = clattn__traffic_fused(s, &p->cfg, 0);
  out->fused_read_bytes = fused.read;
  out->fused_write_bytes = fused.write;
}

/* Both explain calls: args (clattn_explain_ex's, NULL from clattn_explain) are checked as
 * clattn_forward_ex checks them, so that their variants (a cache, ALiBi, sinks, lengths) reach
 * the class. */
static clattn_status explain_call(clattn_context *ctx, const clattn_problem *problem,
                                  const clattn_args *args, clattn_plan_info *out) {
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st == CLATTN_OK && !out) st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "out is NULL");
  if (st == CLATTN_OK && args && args->kv_cache) {
    st = clattn__check_cache_forward(ctx, &s, args);
  } else if (st == CLATTN_OK && args) {
    st = clattn__check_forward_tensors(ctx, &s, &args->q, &args->k, &args->v, &args->o, args->lse);
    if (st == CLATTN_OK) st = clattn__check_variant_args(ctx, &s, args, 0);
  }
  const clattn__plan *p = NULL;
  /* The fused plan is described whenever the fused kernels can run the problem, so both plans'
   * traffic can be compared even when the call asks for the standard one. */
  if (st == CLATTN_OK && s.d <= CLATTN__MAX_FUSED_DIM && s.dv <= CLATTN__MAX_FUSED_DIM)
    st = clattn__plan_for_grid(ctx, &s, &p);
  if (st == CLATTN_OK) {
    memset(out, 0, sizeof *out);
    if (p) {
      describe_plan(ctx, p, &s, out);
      clattn__class cls = p->cls;
      clattn__config bc;
      cls.pass = CLATTN__BACKWARD;
      /* A cache call has no backward (clattn_backward_ex refuses one). */
      if (s.kv_cache)
        snprintf(out->backward_origin, sizeof out->backward_origin, "none");
      else
        clattn__plan_choice(ctx, &cls, &bc, out->backward_origin);
      if (!s.kv_cache) clattn__config_to_public(&bc, &out->backward);
    }
    unsigned per_split;
    out->kv_splits = p ? clattn__split_count(ctx, &s, p, &per_split) : 1;
    if (out->kv_splits > 1) {
      /* The ranges' partial O and LSE are written, then read by the merge. */
      double part = (double)out->kv_splits * (double)s.batch * (double)s.heads_q *
                    (double)s.seqlen_q * (double)(s.dv + 1) * sizeof(float);
      out->fused_write_bytes += part;
      out->fused_read_bytes += part;
      size_t len = strlen(out->reason);
      snprintf(out->reason + len, sizeof out->reason - len,
               "; keys split into %u ranges of %u, merged by LSE %s, to fill the compute units",
               out->kv_splits, per_split,
               clattn__split_fused(ctx, &s, p, out->kv_splits)
                   ? "in the kernel (the last of a tile's ranges)"
                   : "by a second kernel");
    }
    snprintf(out->algorithm, sizeof out->algorithm, "%s",
             s.algo == CLATTN_ALGO_FUSED ? "fused" : "standard");
    out->flops = clattn__forward_flops(&s);
    clattn__bytes std = clattn__traffic_standard(&s, 0);
    out->standard_read_bytes = std.read;
    out->standard_write_bytes = std.write;
    out->io_lower_bound_bytes = clattn__io_lower_bound(&s, (double)ctx->device.local_mem_reported);
    clattn__standard_plan sp;
    clattn__standard_plan_of(ctx, &s, 1, &sp);
    out->standard_heads_per_chunk = sp.chunk;
    out->standard_workspace_bytes = sp.bytes;
    out->workspace_limit = sp.limit;
    clattn__standard_plan_of(ctx, &s, 2, &sp);
    out->standard_backward_workspace_bytes = sp.bytes;
    out->local_mem_available = (size_t)ctx->device.local_mem;
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

clattn_status clattn_explain(clattn_context *ctx, const clattn_problem *problem,
                             clattn_plan_info *out) {
  return explain_call(ctx, problem, NULL, out);
}

clattn_status clattn_explain_ex(clattn_context *ctx, const clattn_problem *problem,
                                const clattn_args *args, clattn_plan_info *out) {
  if (ctx && !args) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "args is NULL");
  return explain_call(ctx, problem, args, out);
}
