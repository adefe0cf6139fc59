/* clattn_backward: validation, the backward kernels' plan per problem class (block sizes from
 * the local-memory model), and the three launches of cl/backward.cl. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUPS_PER_LAUNCH ((size_t)1 << 20)

typedef struct clattn__bwd_plan {
  clattn__class cls;
  unsigned bq, bkv;
  cl_kernel dkdv, dq;
  struct clattn__bwd_plan *next;
} clattn__bwd_plan;

/* Local memory of the two block kernels (cl/backward.cl): bwd_dkdv stages BQ rows of Q and dO
 * and their LSE and D; bwd_dq stages BKV rows of K and V. */
static size_t bwd_local_bytes(const clattn__class *c, unsigned bq, unsigned bkv) {
  size_t dkdv = (size_t)bq * (c->d + c->dv + 2), dq = (size_t)bkv * (c->d + c->dv);
  return (dkdv > dq ? dkdv : dq) * sizeof(float);
}

static clattn_status bwd_plan(clattn_context *ctx, const clattn__class *cls,
                              const clattn__bwd_plan **out) {
  for (clattn__bwd_plan *p = ctx->bwd_plans; p; p = p->next)
    if (!memcmp(&p->cls, cls, sizeof *cls)) return *out = p, CLATTN_OK;
  /* The largest equal blocks of 64 rows or fewer that fit local memory and work-groups. */
  unsigned b = 64;
  while (b > 1 && (bwd_local_bytes(cls, b, b) > ctx->device.local_mem ||
                   b > ctx->device.max_work_group || b > ctx->device.max_item_size[0]))
    b /= 2;
  if (bwd_local_bytes(cls, b, b) > ctx->device.local_mem)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "backward: head dims %u/%u need %zu bytes of local memory even with "
                        "blocks of one row; the device has %llu",
                        cls->d, cls->dv, bwd_local_bytes(cls, 1, 1),
                        (unsigned long long)ctx->device.local_mem);
  char *src = NULL, options[160];
  snprintf(options, sizeof options, "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DCAUSAL=%u",
           cls->d, cls->dv, b, b, cls->causal);
  clattn_status st = clattn__kernel_source(ctx, "backward.cl", &src);
  cl_program prog = NULL;
  if (st == CLATTN_OK) st = clattn__build(ctx, src, options, &prog);
  free(src);
  if (st != CLATTN_OK) return st;
  clattn__bwd_plan *p = calloc(1, sizeof *p);
  if (!p) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  cl_int e1, e2;
  p->dkdv = clCreateKernel(prog, "bwd_dkdv", &e1);
  p->dq = clCreateKernel(prog, "bwd_dq", &e2);
  if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) {
    if (p->dkdv) clReleaseKernel(p->dkdv);
    if (p->dq) clReleaseKernel(p->dq);
    free(p);
    return clattn__fail_cl(ctx, e1 != CL_SUCCESS ? e1 : e2, "clCreateKernel(backward)");
  }
  p->cls = *cls, p->bq = p->bkv = b;
  p->next = ctx->bwd_plans;
  ctx->bwd_plans = p;
  *out = p;
  return CLATTN_OK;
}

void clattn__backward_release(clattn_context *ctx) {
  for (clattn__bwd_plan *p = ctx->bwd_plans, *next; p; p = next) {
    next = p->next;
    clReleaseKernel(p->dkdv), clReleaseKernel(p->dq);
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

/* Launches items work-groups of wg work-items in chunks; the last argument is the first group. */
static clattn_status launch(clattn_context *ctx, clattn__args *a, size_t groups, size_t wg) {
  cl_uint base_arg = a->next;
  cl_ulong zero = 0;
  clattn__arg(a, sizeof zero, &zero);
  if (a->err != CL_SUCCESS) return clattn__fail_cl(ctx, a->err, "clSetKernelArg(backward)");
  for (size_t first = 0; first < groups; first += GROUPS_PER_LAUNCH) {
    size_t n = groups - first < GROUPS_PER_LAUNCH ? groups - first : GROUPS_PER_LAUNCH;
    size_t global = n * wg;
    cl_ulong base = first;
    cl_int err = clSetKernelArg(a->kernel, base_arg, sizeof base, &base);
    if (err == CL_SUCCESS)
      err = clEnqueueNDRangeKernel(ctx->queue, a->kernel, 1, NULL, &global, &wg, 0, NULL, NULL);
    if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clEnqueueNDRangeKernel(backward)");
  }
  return CLATTN_OK;
}

static clattn_status run(clattn_context *ctx, const clattn__shape *s, const clattn__bwd_plan *p,
                         const clattn_tensor *q, const clattn_tensor *k, const clattn_tensor *v,
                         const clattn_tensor *o, const clattn_tensor *d_o, cl_mem lse,
                         const clattn_tensor *dq, const clattn_tensor *dk,
                         const clattn_tensor *dv) {
  size_t rows = s->batch * s->heads_q * s->seqlen_q;
  cl_uint hq = (cl_uint)s->heads_q, hkv = (cl_uint)s->heads_kv, nq = (cl_uint)s->seqlen_q,
          nkv = (cl_uint)s->seqlen_kv;
  cl_float scale = s->scale;
  clattn_status st = CLATTN_OK;
  if (rows) st = clattn__bwd_rowsum(ctx, s, o, d_o);
  if (st == CLATTN_OK && s->seqlen_kv) { /* dK, dV: zero where no query sees a key */
    size_t nkb = (s->seqlen_kv + p->bkv - 1) / p->bkv;
    cl_uint nb = (cl_uint)nkb;
    clattn__args a = {p->dkdv, 0, CL_SUCCESS};
    arg_view(&a, q), arg_view(&a, k), arg_view(&a, v), arg_view(&a, d_o);
    cl_mem ws = rows ? ctx->bwd_ws : d_o->buffer; /* unread when there are no rows */
    cl_mem lse_or = rows ? lse : d_o->buffer;
    clattn__arg(&a, sizeof(cl_mem), &lse_or);
    clattn__arg(&a, sizeof(cl_mem), &ws);
    arg_view(&a, dk), arg_view(&a, dv);
    clattn__arg(&a, sizeof hq, &hq), clattn__arg(&a, sizeof hkv, &hkv),
        clattn__arg(&a, sizeof nq, &nq);
    clattn__arg(&a, sizeof nkv, &nkv), clattn__arg(&a, sizeof nb, &nb),
        clattn__arg(&a, sizeof scale, &scale);
    st = launch(ctx, &a, nkb * s->batch * s->heads_kv, p->bkv);
  }
  if (st == CLATTN_OK && rows) { /* dQ: zero for rows that see no key */
    size_t nqb = (s->seqlen_q + p->bq - 1) / p->bq;
    cl_uint nb = (cl_uint)nqb;
    clattn__args a = {p->dq, 0, CL_SUCCESS};
    arg_view(&a, q), arg_view(&a, k), arg_view(&a, v), arg_view(&a, d_o);
    clattn__arg(&a, sizeof(cl_mem), &lse);
    clattn__arg(&a, sizeof(cl_mem), &ctx->bwd_ws);
    arg_view(&a, dq);
    clattn__arg(&a, sizeof hq, &hq), clattn__arg(&a, sizeof hkv, &hkv),
        clattn__arg(&a, sizeof nq, &nq);
    clattn__arg(&a, sizeof nkv, &nkv), clattn__arg(&a, sizeof nb, &nb),
        clattn__arg(&a, sizeof scale, &scale);
    st = launch(ctx, &a, nqb * s->batch * s->heads_q, p->bq);
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
    st = bwd_plan(ctx, &cls, &p);
  }
  if (st == CLATTN_OK && num_wait) {
    cl_int err = clEnqueueBarrierWithWaitList(ctx->queue, num_wait, wait, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueBarrierWithWaitList");
  }
  if (st == CLATTN_OK && standard)
    st = clattn__standard_backward(ctx, &s, q, k, v, o, d_o, lse, dq, dk, dv);
  else if (st == CLATTN_OK && !nothing)
    st = run(ctx, &s, p, q, k, v, o, d_o, lse, dq, dk, dv);
  if (st == CLATTN_OK && done) {
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, done);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
  }
  clFlush(ctx->queue);
  pthread_mutex_unlock(&ctx->lock);
  return st;
}
