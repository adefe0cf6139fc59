/* clattn_forward and clattn_explain: validate, plan, set arguments, enqueue. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Work-groups per enqueue: keeps every global size far from 32-bit limits of drivers and grid
 * limits of GPUs; larger problems are split into several launches. */
#define GROUPS_PER_LAUNCH ((size_t)1 << 20)

void clattn__arg(clattn__args *a, size_t size, const void *value) {
  if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->kernel, a->next, size, value);
  a->next++;
}

void clattn__arg_view(clattn__args *a, const clattn_tensor *t) {
  cl_ulong v[4] = {t->offset, t->stride_batch, t->stride_seq, t->stride_head};
  for (int i = 0; i < 4; i++) clattn__arg(a, sizeof v[i], &v[i]);
}

clattn__class clattn__class_of(const clattn__shape *s) {
  clattn__class c = {(unsigned)s->d, (unsigned)s->dv, s->causal, clattn__seqlen_bucket(s->seqlen_q),
                     0};
  return c;
}

clattn_status clattn__enqueue_forward(clattn_context *ctx, cl_command_queue queue, int in_order,
                                      const clattn__shape *s, const clattn__plan *p,
                                      const clattn__split *split, const clattn_tensor *q,
                                      const clattn_tensor *k, const clattn_tensor *v,
                                      const clattn_tensor *o, cl_mem lse, cl_uint num_wait,
                                      const cl_event *wait, cl_event *done) {
  clattn__split none = {1, (unsigned)s->seqlen_kv, 0, 0, 0};
  if (!split) split = &none;
  size_t nqb = (s->seqlen_q + p->cfg.bq - 1) / p->cfg.bq, groups;
  if (__builtin_mul_overflow(nqb, split->count, &groups) ||
      __builtin_mul_overflow(groups, s->heads_q, &groups) ||
      __builtin_mul_overflow(groups, s->batch, &groups))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "batch * heads * query blocks overflows");
  clattn__args a = {p->kernel, 0, CL_SUCCESS};
  cl_mem bufs[5] = {q->buffer, k->buffer, v->buffer, o->buffer, lse};
  for (int i = 0; i < 5; i++) clattn__arg(&a, sizeof(cl_mem), &bufs[i]);
  clattn__arg_view(&a, q);
  clattn__arg_view(&a, k);
  clattn__arg_view(&a, v);
  clattn__arg_view(&a, o);
  cl_uint heads = (cl_uint)s->heads_q, group = (cl_uint)(s->heads_q / s->heads_kv),
          nq = (cl_uint)s->seqlen_q, nkv = (cl_uint)s->seqlen_kv, nb = (cl_uint)nqb;
  cl_float scale_log2 = (cl_float)(s->scale * M_LOG2E);
  cl_int write_lse = lse != NULL;
  cl_uint splits = split->count, per_split = split->kv_per_split;
  clattn__arg(&a, sizeof heads, &heads);
  clattn__arg(&a, sizeof group, &group);
  clattn__arg(&a, sizeof nq, &nq);
  clattn__arg(&a, sizeof nkv, &nkv);
  clattn__arg(&a, sizeof nb, &nb);
  cl_uint base_index = a.next;
  cl_ulong base = 0;
  clattn__arg(&a, sizeof base, &base);
  clattn__arg(&a, sizeof scale_log2, &scale_log2);
  clattn__arg(&a, sizeof write_lse, &write_lse);
  clattn__arg(&a, sizeof splits, &splits);
  clattn__arg(&a, sizeof per_split, &per_split);
  clattn__arg(&a, sizeof split->o_split, &split->o_split);
  clattn__arg(&a, sizeof split->lse_off, &split->lse_off);
  clattn__arg(&a, sizeof split->lse_split, &split->lse_split);
  if (a.err != CL_SUCCESS) return clattn__fail_cl(ctx, a.err, "clSetKernelArg");

  size_t wg = clattn__config_work_group(&p->cfg);
  cl_event prev = NULL;
  for (size_t first = 0; first < groups; first += GROUPS_PER_LAUNCH) {
    size_t count = groups - first < GROUPS_PER_LAUNCH ? groups - first : GROUPS_PER_LAUNCH;
    size_t global = count * wg;
    base = first;
    cl_int err = clSetKernelArg(p->kernel, base_index, sizeof base, &base);
    /* The caller's wait list gates the first launch; later ones follow the previous launch
     * (implicit on an in-order queue, by event on an out-of-order one). */
    cl_uint nw = prev ? (in_order ? 0 : 1) : num_wait;
    const cl_event *w = prev ? (in_order ? NULL : &prev) : (num_wait ? wait : NULL);
    cl_event ev = NULL;
    if (err == CL_SUCCESS)
      err = clEnqueueNDRangeKernel(queue, p->kernel, 1, NULL, &global, &wg, nw, w, &ev);
    if (prev) clReleaseEvent(prev);
    if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clEnqueueNDRangeKernel(forward)");
    prev = ev;
  }
  clFlush(queue);
  if (done)
    *done = prev;
  else if (prev)
    clReleaseEvent(prev);
  return CLATTN_OK;
}

clattn_status clattn_forward(clattn_context *ctx, const clattn_problem *problem,
                             const clattn_tensor *q, const clattn_tensor *k, const clattn_tensor *v,
                             const clattn_tensor *o, cl_mem lse, cl_uint num_wait,
                             const cl_event *wait, cl_event *done) {
  if (done) *done = NULL;
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st == CLATTN_OK && num_wait && !wait)
    st =
        clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "num_wait is %u but wait is NULL", num_wait);
  if (st == CLATTN_OK) st = clattn__check_forward_tensors(ctx, &s, q, k, v, o, lse);
  if (st == CLATTN_OK && s.empty) {
    if (done) {
      cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, num_wait, wait, done);
      if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
      clFlush(ctx->queue);
    }
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

/* The fused plan's fields of clattn_plan_info. */
static void describe_plan(const clattn_context *ctx, const clattn__plan *p, const clattn__shape *s,
                          clattn_plan_info *out) {
  snprintf(out->kernel, sizeof out->kernel, "%s", clattn__variant_name(p->cfg.variant));
  out->rows_per_item = p->cfg.variant == 1 && p->cfg.rm ? p->cfg.rm : 1;
  out->vector_width = p->cfg.vec ? p->cfg.vec : 1;
  out->block_q = p->cfg.bq;
  out->block_kv = p->cfg.bkv;
  out->threads_per_row = p->cfg.tpr;
  out->stage_kv = p->cfg.stage;
  out->pad = p->cfg.pad;
  out->work_group_size = clattn__config_work_group(&p->cfg);
  size_t model = clattn__config_local_bytes(&p->cfg, &p->cls);
  out->local_mem_bytes = p->kernel_local_mem > model ? p->kernel_local_mem : model;
  snprintf(out->origin, sizeof out->origin, "%s", p->origin);
  out->seqlen_bucket = p->cls.bucket;
  snprintf(out->reason, sizeof out->reason, "%s", p->reason);
  clattn__bytes fused = clattn__traffic_fused(s, &p->cfg, 0);
  out->fused_read_bytes = fused.read;
  out->fused_write_bytes = fused.write;
}

clattn_status clattn_explain(clattn_context *ctx, const clattn_problem *problem,
                             clattn_plan_info *out) {
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st == CLATTN_OK && !out) st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "out is NULL");
  const clattn__plan *p = NULL;
  /* The fused plan is described whenever the fused kernels can run the problem, so both plans'
   * traffic can be compared even when the call asks for the standard one. */
  if (st == CLATTN_OK && s.d <= 256 && s.dv <= 256) st = clattn__plan_for_grid(ctx, &s, &p);
  if (st == CLATTN_OK) {
    memset(out, 0, sizeof *out);
    if (p) {
      describe_plan(ctx, p, &s, out);
      clattn__class cls = p->cls;
      clattn__config bc;
      cls.backward = 1;
      clattn__bwd_config_choice(ctx, &cls, &bc, out->backward_origin);
      clattn__bwd_config_to_public(&bc, &out->backward);
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
               "; keys split into %u ranges of %u, merged by LSE, to fill the compute units",
               out->kv_splits, per_split);
    }
    snprintf(out->algorithm, sizeof out->algorithm, "%s",
             s.algo == CLATTN_ALGO_FUSED ? "fused" : "standard");
    out->flops = clattn__forward_flops(&s);
    clattn__bytes std = clattn__traffic_standard(&s, 0);
    out->standard_read_bytes = std.read;
    out->standard_write_bytes = std.write;
    out->io_lower_bound_bytes = clattn__io_lower_bound(&s, (double)ctx->device.local_mem);
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
