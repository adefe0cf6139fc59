/* clattn_backward: validation, then D = rowsum(dO o O) and the two kernels of cl/backward.cl
 * with the class's plan (bwd_plan.c), or the standard path. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUPS_PER_LAUNCH ((size_t)1 << 20)

void clattn__backward_release(clattn_context *ctx) {
  for (clattn__bwd_plan *p = ctx->bwd_plans, *next; p; p = next) {
    next = p->next;
    clattn__bwd_plan_release(p);
    free(p);
  }
  ctx->bwd_plans = NULL;
  if (ctx->bwd_ws) clReleaseMemObject(ctx->bwd_ws);
  ctx->bwd_ws = NULL;
  ctx->bwd_ws_bytes = 0;
}

/* The buffer, then its view's offset and strides. */
static void arg_view(clattn__args *a, const clattn_tensor *t) {
  clattn__arg(a, sizeof(cl_mem), &t->buffer);
  clattn__arg_view(a, t);
}

/* Launches groups work-groups of wg work-items in chunks (the last argument is the first
 * group); *first and *last (NULL allowed) get the first and last chunk's events. */
static clattn_status launch(clattn_context *ctx, cl_command_queue queue, clattn__args *a,
                            size_t groups, size_t wg, cl_event *first, cl_event *last) {
  cl_uint base_arg = a->next;
  cl_ulong zero = 0;
  clattn__arg(a, sizeof zero, &zero);
  if (a->err != CL_SUCCESS) return clattn__fail_cl(ctx, a->err, "clSetKernelArg(backward)");
  for (size_t start = 0; start < groups; start += GROUPS_PER_LAUNCH) {
    size_t n = groups - start < GROUPS_PER_LAUNCH ? groups - start : GROUPS_PER_LAUNCH;
    size_t global = n * wg;
    cl_ulong base = start;
    cl_event ev = NULL;
    int want = (first && start == 0) || (last && start + n == groups);
    cl_int err = clSetKernelArg(a->kernel, base_arg, sizeof base, &base);
    if (err == CL_SUCCESS)
      err = clEnqueueNDRangeKernel(queue, a->kernel, 1, NULL, &global, &wg, 0, NULL,
                                   want ? &ev : NULL);
    if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clEnqueueNDRangeKernel(backward)");
    if (first && start == 0) clRetainEvent(ev), *first = ev;
    if (last && start + n == groups) clRetainEvent(ev), *last = ev;
    if (ev) clReleaseEvent(ev);
  }
  return CLATTN_OK;
}

clattn_status clattn__bwd_enqueue(clattn_context *ctx, cl_command_queue queue,
                                  const clattn__shape *s, const clattn__bwd_plan *p,
                                  const clattn_tensor *q, const clattn_tensor *k,
                                  const clattn_tensor *v, const clattn_tensor *d_o, cl_mem lse,
                                  cl_mem drow, const clattn_tensor *dq, const clattn_tensor *dk,
                                  const clattn_tensor *dv, cl_event *first, cl_event *last) {
  size_t rows = s->batch * s->heads_q * s->seqlen_q;
  cl_uint hq = (cl_uint)s->heads_q, hkv = (cl_uint)s->heads_kv, nq = (cl_uint)s->seqlen_q,
          nkv = (cl_uint)s->seqlen_kv;
  cl_float scale = s->scale;
  clattn_status st = CLATTN_OK;
  if (first) *first = NULL;
  if (last) *last = NULL;
  cl_event *dkdv_last = rows ? NULL : last; /* with no rows, bwd_dkdv (zeros) is all there is */
  size_t wg_kv, wg_q;
  clattn__bwd_work_groups(&p->cfg, &wg_kv, &wg_q);
  if (s->seqlen_kv) { /* dK, dV: zero where no query sees a key */
    size_t nkb = (s->seqlen_kv + p->cfg.bkv - 1) / p->cfg.bkv;
    cl_uint nb = (cl_uint)nkb;
    clattn__args a = {p->dkdv, 0, CL_SUCCESS};
    arg_view(&a, q), arg_view(&a, k), arg_view(&a, v), arg_view(&a, d_o);
    cl_mem ws = rows ? drow : d_o->buffer; /* unread when there are no rows */
    cl_mem lse_or = rows ? lse : d_o->buffer;
    clattn__arg(&a, sizeof(cl_mem), &lse_or);
    clattn__arg(&a, sizeof(cl_mem), &ws);
    arg_view(&a, dk), arg_view(&a, dv);
    clattn__arg(&a, sizeof hq, &hq), clattn__arg(&a, sizeof hkv, &hkv),
        clattn__arg(&a, sizeof nq, &nq);
    clattn__arg(&a, sizeof nkv, &nkv), clattn__arg(&a, sizeof nb, &nb),
        clattn__arg(&a, sizeof scale, &scale);
    st = launch(ctx, queue, &a, nkb * s->batch * s->heads_kv, wg_kv, first, dkdv_last);
  }
  if (st == CLATTN_OK && rows) { /* dQ: zero for rows that see no key */
    size_t nqb = (s->seqlen_q + p->cfg.bq - 1) / p->cfg.bq;
    cl_uint nb = (cl_uint)nqb;
    clattn__args a = {p->dq, 0, CL_SUCCESS};
    arg_view(&a, q), arg_view(&a, k), arg_view(&a, v), arg_view(&a, d_o);
    clattn__arg(&a, sizeof(cl_mem), &lse);
    clattn__arg(&a, sizeof(cl_mem), &drow);
    arg_view(&a, dq);
    clattn__arg(&a, sizeof hq, &hq), clattn__arg(&a, sizeof hkv, &hkv),
        clattn__arg(&a, sizeof nq, &nq);
    clattn__arg(&a, sizeof nkv, &nkv), clattn__arg(&a, sizeof nb, &nb),
        clattn__arg(&a, sizeof scale, &scale);
    st = launch(ctx, queue, &a, nqb * s->batch * s->heads_q, wg_q, first && !*first ? first : NULL,
                last);
  }
  return st;
}

clattn_status clattn_backward(clattn_context *ctx, const clattn_problem *problem,
                              const clattn_tensor *q, const clattn_tensor *k,
                              const clattn_tensor *v, const clattn_tensor *o,
                              const clattn_tensor *d_o, cl_mem lse, const clattn_tensor *dq,
                              const clattn_tensor *dk, const clattn_tensor *dv, cl_uint num_wait,
                              const cl_event *wait, cl_event *done) {
  if (done) *done = NULL;
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st == CLATTN_OK && (s.d > 256 || s.dv > 256) &&
      (s.algo != CLATTN_ALGO_STANDARD || !s.seqlen_q || !s.seqlen_kv))
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "backward: head dims %zu/%zu; the fused kernels support at most 256 (the "
                      "standard algorithm goes further)",
                      s.d, s.dv);
  if (st == CLATTN_OK && num_wait && !wait)
    st =
        clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "num_wait is %u but wait is NULL", num_wait);
  if (st == CLATTN_OK && !ctx->queue_in_order)
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "backward needs an in-order queue: its kernels share a workspace");
  if (st == CLATTN_OK)
    st = clattn__check_backward_tensors(ctx, &s, q, k, v, o, d_o, lse, dq, dk, dv);
  const clattn__bwd_plan *p = NULL;
  int nothing = st == CLATTN_OK && (s.batch == 0 || s.heads_q == 0);
  /* The standard path when asked for (or when the head dims rule out the fused one); with no
   * queries or no keys there is nothing to multiply, and the fused kernels write the zeros. */
  int standard =
      st == CLATTN_OK && !nothing && s.algo == CLATTN_ALGO_STANDARD && s.seqlen_q && s.seqlen_kv;
  if (st == CLATTN_OK && !nothing && !standard) {
    clattn__class cls = clattn__class_of(&s);
    cls.backward = 1;
    st = clattn__bwd_plan_get(ctx, &cls, &p);
  }
  if (st == CLATTN_OK && num_wait) {
    cl_int err = clEnqueueBarrierWithWaitList(ctx->queue, num_wait, wait, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueBarrierWithWaitList");
  }
  if (st == CLATTN_OK && standard)
    st = clattn__standard_backward(ctx, &s, q, k, v, o, d_o, lse, dq, dk, dv);
  else if (st == CLATTN_OK && !nothing) {
    if (s.batch && s.heads_q && s.seqlen_q) st = clattn__bwd_rowsum(ctx, &s, o, d_o);
    if (st == CLATTN_OK)
      st = clattn__bwd_enqueue(ctx, ctx->queue, &s, p, q, k, v, d_o, lse, ctx->bwd_ws, dq, dk, dv,
                               NULL, NULL);
  }
  if (st == CLATTN_OK && done) {
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, done);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
  }
  clFlush(ctx->queue);
  pthread_mutex_unlock(&ctx->lock);
  return st;
}
