/* clattn_kv_append (issue 18): checks, then one kernel (cl/kv_append.cl) that writes each
 * sequence's new K and V rows at its current length. The cache's reads are the decode family's
 * (runtime/kernels/decode_family.c), planned as any forward call. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>

/* Work-items a row of the append (cl/kv_append.cl's AW, a power of two for its tree): its
 * columns' loads at once; fewer where the device allows fewer. */
static size_t append_wg(const clattn_context *ctx) {
  return clattn__helper_wg(&ctx->device, 64);
}

/* The append kernel for the call's storage and cache (options: its DTYPE, PAGED, KV8), built
 * on first use and kept by the context (ctx->append; a decode loop appends every step, and the
 * build's lookup and clCreateKernel cost tens of microseconds a call). */
static clattn_status append_kernel(clattn_context *ctx, const clattn__shape *s, cl_kernel *out) {
  cl_kernel *slot = &ctx->append[s->dtype][s->kv_paged ? 1 : 0][s->kv_i8 ? 1 : 0];
  if (*slot) {
    *out = *slot;
    return CLATTN_OK;
  }
  const clattn__family *f = clattn__family_for(CLATTN__ROLE_KV_APPEND);
  char *src = NULL, options[96];
  snprintf(options, sizeof options, "-cl-std=CL1.2 -DSCALE_QUAL= -DAW=%zu%s%s%s", append_wg(ctx),
           clattn__dtype_define(s->dtype), s->kv_paged ? " -DPAGED=1" : "",
           s->kv_i8 ? " -DKV8=1" : "");
  clattn_status st = clattn__family_source(ctx, f, &src);
  cl_program prog = NULL;
  if (st == CLATTN_OK) st = clattn__build(ctx, src, options, &prog);
  free(src);
  if (st != CLATTN_OK) return st;
  cl_int err;
  *out = clCreateKernel(prog, f->entries[0], &err);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateKernel(kv_append)");
  *slot = *out;
  return CLATTN_OK;
}

void clattn__kv_release(clattn_context *ctx) {
  cl_kernel *k = &ctx->append[0][0][0];
  for (size_t i = 0; i < sizeof ctx->append / sizeof *k; i++)
    if (k[i]) clReleaseKernel(k[i]), k[i] = NULL;
}

/* The new rows' views, which the cache's written members must not overlap. */
static clattn_status check_new_rows(clattn_context *ctx, const clattn__shape *s,
                                    const clattn_tensor *k_new, const clattn_tensor *v_new,
                                    const clattn__region cache[6]) {
  clattn__region rk, rv;
  size_t n = s->empty ? 0 : s->seqlen_q;
  clattn_status st;
  if ((st = clattn__view_region(ctx, "k_new", k_new, s->batch, n, s->heads_kv, s->d, s->elem, 0,
                                &rk)) ||
      (st = clattn__view_region(ctx, "v_new", v_new, s->batch, n, s->heads_kv, s->dv, s->elem, 0,
                                &rv)))
    return st;
  static const char *const written[4] = {"kv_cache.k", "kv_cache.v", "kv_cache.k_scale",
                                         "kv_cache.v_scale"};
  for (int i = 0; i < 4; i++)
    if (clattn__regions_overlap(&rk, &cache[i]) || clattn__regions_overlap(&rv, &cache[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s overlaps %s in the same buffer",
                          clattn__regions_overlap(&rk, &cache[i]) ? "k_new" : "v_new", written[i]);
  return CLATTN_OK;
}

static clattn_status append_enqueue(clattn_context *ctx, const clattn__shape *s,
                                    const clattn_kv_cache *c, const clattn_tensor *k_new,
                                    const clattn_tensor *v_new, cl_uint num_wait,
                                    const cl_event *wait, cl_event *done) {
  size_t rows;
  if (__builtin_mul_overflow(s->batch * s->seqlen_q, s->heads_kv, &rows))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "batch * seqlen_q * heads_kv overflows");
  cl_kernel kernel = NULL;
  clattn_status st = append_kernel(ctx, s, &kernel);
  if (st != CLATTN_OK) return st;
  clattn__args a = {kernel, 0, CL_SUCCESS, NULL};
  cl_mem bufs[4] = {k_new->buffer, v_new->buffer, c->k.buffer, c->v.buffer};
  for (int i = 0; i < 4; i++) clattn__arg_mem(&a, &bufs[i]);
  clattn__arg_view(&a, k_new);
  clattn__arg_view(&a, v_new);
  clattn__arg_view(&a, &c->k);
  clattn__arg_view(&a, &c->v);
  cl_uint hkv = (cl_uint)s->heads_kv, n = (cl_uint)s->seqlen_q, cap = (cl_uint)s->seqlen_kv,
          d = (cl_uint)s->d, dv = (cl_uint)s->dv;
  clattn__arg_mem(&a, &c->seqlens);
  clattn__arg(&a, sizeof hkv, &hkv);
  clattn__arg(&a, sizeof n, &n);
  clattn__arg(&a, sizeof cap, &cap);
  clattn__arg(&a, sizeof d, &d);
  clattn__arg(&a, sizeof dv, &dv);
  clattn__launch l = {kernel, a.next, rows, append_wg(ctx), NULL};
  cl_ulong base = 0;
  clattn__arg(&a, sizeof base, &base);
  clattn__arg_cache(&a, s);
  if (a.err != CL_SUCCESS) st = clattn__fail_cl(ctx, a.err, "clSetKernelArg(kv_append)");
  if (st == CLATTN_OK)
    st = clattn__launch_grid(ctx, ctx->queue, ctx->queue_in_order, &l, 0, num_wait, wait, NULL,
                             done);
  clFlush(ctx->queue);
  return st;
}

clattn_status clattn_kv_append(clattn_context *ctx, const clattn_problem *problem,
                               const clattn_kv_cache *cache, const clattn_tensor *k_new,
                               const clattn_tensor *v_new, cl_uint num_wait, const cl_event *wait,
                               cl_event *done) {
  if (done) *done = NULL;
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__shape s;
  clattn__region r[6];
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st == CLATTN_OK && num_wait && !wait)
    st =
        clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "num_wait is %u but wait is NULL", num_wait);
  if (st == CLATTN_OK && s.varlen)
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "CLATTN_VARLEN in clattn_kv_append: new rows are [batch][seqlen_q]");
  if (st == CLATTN_OK) st = clattn__check_kv_cache(ctx, &s, cache, 1, r);
  if (st == CLATTN_OK) st = check_new_rows(ctx, &s, k_new, v_new, r);
  if (st == CLATTN_OK && (s.empty || !s.heads_kv)) {
    if (done) {
      cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, num_wait, wait, done);
      if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
      clFlush(ctx->queue);
    }
  } else if (st == CLATTN_OK) {
    st = append_enqueue(ctx, &s, cache, k_new, v_new, num_wait, wait, done);
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}
