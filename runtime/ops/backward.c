/* clattn_backward and clattn_backward_ex: validation, then D = rowsum(dO o O) and the two kernels
 * of the backward class's plan (plan/planner.c), or the standard path. */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clattn__backward_release(clattn_context *ctx) {
  if (ctx->bwd_ws) clReleaseMemObject(ctx->bwd_ws);
  ctx->bwd_ws = NULL;
  ctx->bwd_ws_bytes = 0;
}

/* CLATTN_NONDETERMINISTIC permits the atomic dQ, never requires it: where its kernels do not fit
 * (an override sized for the two-kernel backward, whose K and dS^T staging the atomic bwd_dkdv
 * adds) or its accumulator cannot be allocated, the class's two-kernel plan, and a shape that
 * binds their arguments (clattn__backward_bind reads the flag from it). */
static clattn_status deterministic_plan(clattn_context *ctx, clattn__shape *s, clattn__class *cls,
                                        const clattn__plan **p) {
  s->nondet = 0;
  cls->variants &= ~(unsigned)CLATTN__VAR_ATOMIC;
  return clattn__plan_get(ctx, cls, p);
}

/* Both entry points, as forward.c's forward_call. */
static clattn_status backward_call(clattn_context *ctx, const clattn_problem *problem,
                                   const clattn_tensor *q, const clattn_tensor *k,
                                   const clattn_tensor *v, const clattn_tensor *o,
                                   const clattn_tensor *d_o, cl_mem lse, const clattn_tensor *dq,
                                   const clattn_tensor *dk, const clattn_tensor *dv,
                                   const clattn_args *ext, cl_uint num_wait, const cl_event *wait,
                                   cl_event *done) {
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  const int wide = st == CLATTN_OK && (s.d > CLATTN__MAX_FUSED_DIM || s.dv > CLATTN__MAX_FUSED_DIM);
  if (st == CLATTN_OK && wide && s.algo != CLATTN_ALGO_STANDARD)
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "backward: head dims %zu/%zu; the fused kernels support at most %d (the "
                      "standard algorithm goes further)",
                      s.d, s.dv, CLATTN__MAX_FUSED_DIM);
  if (st == CLATTN_OK && num_wait && !wait)
    st =
        clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "num_wait is %u but wait is NULL", num_wait);
  if (st == CLATTN_OK && !ctx->queue_in_order)
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "backward needs an in-order queue: its kernels share a workspace");
  if (st == CLATTN_OK)
    st = clattn__check_backward_tensors(ctx, &s, q, k, v, o, d_o, lse, dq, dk, dv);
  if (st == CLATTN_OK) st = clattn__check_variant_args(ctx, &s, ext, 1);
  if (st == CLATTN_OK && s.varlen && s.algo == CLATTN_ALGO_STANDARD)
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "variable-length sequences (CLATTN_VARLEN) run on the fused path only so "
                      "far, not the standard one");
  const clattn__plan *p = NULL;
  int nothing = st == CLATTN_OK && (s.batch == 0 || s.heads_q == 0);
  /* The standard path when asked for (or when the head dims rule out the fused one); with no
   * queries or no keys there is nothing to multiply, and the fused kernels write the zeros. */
  int standard =
      st == CLATTN_OK && !nothing && s.algo == CLATTN_ALGO_STANDARD && s.seqlen_q && s.seqlen_kv;
  /* No queries or no keys at head dims past the fused kernels': zeros, written as the standard
   * forward writes an empty call's O (cl/standard.cl's empty_rows). */
  int empty_wide = st == CLATTN_OK && !nothing && !standard && wide;
  if (st == CLATTN_OK && !nothing && !standard && !empty_wide) {
    clattn__class cls = clattn__class_of(&s, CLATTN__BACKWARD);
    st = clattn__plan_get(ctx, &cls, &p);
    if (st == CLATTN_ERR_OUT_OF_RESOURCES && (cls.variants & CLATTN__VAR_ATOMIC))
      st = deterministic_plan(ctx, &s, &cls, &p); /* an override sized for the two kernels */
  }
  if (st == CLATTN_OK && num_wait) {
    cl_int err = clEnqueueBarrierWithWaitList(ctx->queue, num_wait, wait, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueBarrierWithWaitList");
  }
  if (st == CLATTN_OK && standard)
    st = clattn__standard_backward(ctx, &s, q, k, v, o, d_o, lse, dq, dk, dv);
  else if (st == CLATTN_OK && empty_wide)
    st = clattn__standard_backward_empty(ctx, &s, dq, dk, dv);
  else if (st == CLATTN_OK && !nothing) {
    /* Atomic dQ (CLATTN_NONDETERMINISTIC): its fp32 accumulator follows D, zeroed first. */
    int atomic = clattn__dq_atomic(clattn__family_of(&p->cfg), p->cls.variants);
    size_t acc = s.lse_rows * s.d * sizeof(float), at = clattn__dq_acc_offset(s.lse_rows);
    if (atomic) st = clattn__bwd_ws_reserve(ctx, at * sizeof(float) + acc);
    if (st == CLATTN_ERR_OUT_OF_RESOURCES && atomic) { /* no room for the accumulator */
      clattn__class cls = p->cls;
      st = deterministic_plan(ctx, &s, &cls, &p);
      atomic = 0;
    }
    if (st == CLATTN_OK && s.batch && s.heads_q && s.seqlen_q && s.lse_rows)
      st = clattn__bwd_rowsum(ctx, &s, o, d_o);
    if (st == CLATTN_OK && atomic && acc) {
      cl_float zero = 0.0f;
      cl_int err = clEnqueueFillBuffer(ctx->queue, ctx->bwd_ws, &zero, sizeof zero,
                                       at * sizeof zero, acc, 0, NULL, NULL);
      if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueFillBuffer(dQ accumulator)");
    }
    if (st == CLATTN_OK)
      st = clattn__bwd_enqueue(ctx, ctx->queue, &s, p, q, k, v, d_o, lse, ctx->bwd_ws, dq, dk, dv,
                               NULL, NULL);
  }
  if (st == CLATTN_OK) st = clattn__bwd_sinks(ctx, &s, lse);
  if (st == CLATTN_OK && done) {
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, done);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
  }
  clFlush(ctx->queue);
  pthread_mutex_unlock(&ctx->lock);
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
  return backward_call(ctx, problem, q, k, v, o, d_o, lse, dq, dk, dv, NULL, num_wait, wait, done);
}

clattn_status clattn_backward_ex(clattn_context *ctx, const clattn_problem *problem,
                                 const clattn_args *args, cl_uint num_wait, const cl_event *wait,
                                 cl_event *done) {
  if (done) *done = NULL;
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  if (!args) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "args is NULL");
  if (args->kv_cache)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "args.kv_cache in a backward call: a KV cache is for inference; the "
                        "backward takes k and v");
  return backward_call(ctx, problem, &args->q, &args->k, &args->v, &args->o, &args->d_o, args->lse,
                       &args->dq, &args->dk, &args->dv, args, num_wait, wait, done);
}
