/* The standard (unfused) path, the baseline the fused kernels are measured against:
 * S = scale * Q K^T into a global-memory workspace with CLBlast's batched GEMM, a row softmax in
 * place (cl/standard.cl), O = P V with CLBlast. The N^2 workspace is planned against global
 * memory and split over batch * heads. */
#include "ops.h"

#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CLBlast converts offsets to int and indexes with int: every element it touches must lie below
 * 2^31 in its buffer. */
#define CLBLAST_MAX_INDEX ((size_t)1 << 31)
/* CLBlast's indirect GEMM copies A, B and C into buffers padded to its tile sizes, for the whole
 * batch. Its tiles are at most 128 on the devices its database knows; budget for that. */
#define CLBLAST_PAD 128

static size_t pad_up(size_t n) {
  return (n + CLBLAST_PAD - 1) / CLBLAST_PAD * CLBLAST_PAD;
}

/* Saturating arithmetic: a plan that overflows simply does not fit. */
static size_t mul_sat(size_t a, size_t b) {
  size_t r;
  return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add_sat(size_t a, size_t b) {
  size_t r;
  return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

void clattn__standard_plan_of(const clattn_context *ctx, const clattn__shape *s, unsigned matrices,
                              clattn__standard_plan *out) {
  /* Half storage packs every operand (standard_pack.c), whatever its view: the forward (one
   * matrix) Q, K, V and O, the backward (two) Q, K, V, dO, dQ, dK and dV, one fp32 copy each per
   * head. fp32's copies depend on the views, which a plan without tensors does not know. */
  size_t pack = 0;
  if (s->dtype != CLATTN_F32) {
    size_t q = mul_sat(s->seqlen_q, s->d), kv = mul_sat(s->seqlen_kv, add_sat(s->d, s->dv));
    size_t o = mul_sat(s->seqlen_q, s->dv), once = add_sat(add_sat(q, kv), o);
    pack = mul_sat(matrices > 1 ? add_sat(once, add_sat(q, kv)) : once, sizeof(float));
  }
  clattn__standard_plan_packed(ctx, s, matrices, pack, out);
}

void clattn__standard_plan_packed(const clattn_context *ctx, const clattn__shape *s,
                                  unsigned matrices, size_t pack_bytes,
                                  clattn__standard_plan *out) {
  memset(out, 0, sizeof *out);
  size_t nq = s->seqlen_q, nkv = s->seqlen_kv, f = sizeof(float);
  size_t pq = pad_up(nq), pkv = pad_up(nkv), pd = pad_up(s->d), pdv = pad_up(s->dv);
  out->head_workspace = add_sat(mul_sat(mul_sat(mul_sat(nq, nkv), f), matrices), pack_bytes);
  /* The larger of the two GEMMs' padded copies: (Q, K, S) and (P, V, O). */
  size_t t1 = add_sat(add_sat(mul_sat(pq, pd), mul_sat(pkv, pd)), mul_sat(pq, pkv));
  size_t t2 = add_sat(add_sat(mul_sat(pq, pkv), mul_sat(pkv, pdv)), mul_sat(pq, pdv));
  out->head_temp = mul_sat(t1 > t2 ? t1 : t2, f);
  out->limit = ctx->workspace_limit;
  size_t heads = s->batch * s->heads_q, per_head = add_sat(out->head_workspace, out->head_temp);
  /* Each buffer must fit the device's largest allocation and CLBlast's 32-bit indexing. */
  size_t biggest = mul_sat(mul_sat(pq, pkv), f);
  size_t max_buf = ctx->device.max_alloc < CLBLAST_MAX_INDEX * f ? (size_t)ctx->device.max_alloc
                                                                 : CLBLAST_MAX_INDEX * f;
  size_t chunk = heads;
  if (per_head && out->limit / per_head < chunk) chunk = out->limit / per_head;
  if (biggest && max_buf / (biggest * matrices) < chunk) chunk = max_buf / (biggest * matrices);
  /* The workspace (scores and packed copies) is one buffer, every element of it addressable. */
  if (out->head_workspace && max_buf / out->head_workspace < chunk)
    chunk = max_buf / out->head_workspace;
  if (nkv == 0) chunk = heads; /* nothing to hold */
  out->chunk = chunk;
  out->bytes = mul_sat(chunk ? chunk : 1, per_head);
}

static void marks_release(clattn_context *ctx) {
  for (size_t i = 0; i < ctx->step_marks_count; i++)
    if (ctx->step_marks[i]) clReleaseEvent(ctx->step_marks[i]);
  free(ctx->step_marks);
  ctx->step_marks = NULL;
  ctx->step_marks_count = 0;
}

/* A marker before step `step` of chunk `chunk` (step 3: after the last); only when profiling. */
static void mark(clattn_context *ctx, size_t chunk, int step) {
  if (!ctx->step_marks) return;
  clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &ctx->step_marks[chunk * 4 + step]);
}

void clattn__standard_release(clattn_context *ctx) {
  marks_release(ctx);
  clattn__std_kernels_release(ctx);
  if (ctx->workspace) clReleaseMemObject(ctx->workspace);
  ctx->workspace = NULL;
  ctx->workspace_bytes = 0;
}

/* The largest element index of a [n0][n1][n2][dim] view, which CLBlast must be able to address. */
static size_t last_index(const clattn_tensor *t, size_t n0, size_t n1, size_t n2, size_t dim) {
  if (!n0 || !n1 || !n2 || !dim) return 0;
  return t->offset + (n0 - 1) * t->stride_batch + (n1 - 1) * t->stride_seq +
         (n2 - 1) * t->stride_head + dim - 1;
}

static clattn_status clblast_fail(clattn_context *ctx, CLBlastStatusCode code, const char *what) {
  if (code == CLBlastTempBufferAllocFailure || code == CLBlastOpenCLOutOfResources)
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "CLBlast %s: out of device memory (status %d)", what, (int)code);
  if (code == CLBlastOpenCLBuildProgramFailure)
    return clattn__fail(ctx, CLATTN_ERR_BUILD, "CLBlast %s: its kernels failed to build", what);
  return clattn__fail(ctx, CLATTN_ERR_OPENCL, "CLBlast %s failed with status %d", what, (int)code);
}

clattn_status clattn__std_gemm(clattn_context *ctx, const char *what, int trans_a, int trans_b,
                               size_t m, size_t n, size_t k, float alpha, cl_mem a,
                               const size_t *ao, size_t lda, cl_mem b, const size_t *bo, size_t ldb,
                               float beta, cl_mem c, const size_t *co, size_t ldc, size_t count,
                               float *alphas, float *betas) {
  int strided = 1;
  for (size_t i = 2; i < count && strided; i++)
    strided = ao[i] - ao[i - 1] == ao[1] - ao[0] && bo[i] - bo[i - 1] == bo[1] - bo[0] &&
              co[i] - co[i - 1] == co[1] - co[0];
  if (count > 1) strided = strided && ao[1] > ao[0] && bo[1] > bo[0] && co[1] > co[0];
  CLBlastTranspose ta = trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastTranspose tb = trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
  CLBlastStatusCode r;
  if (strided) {
    /* CLBlast rejects a zero stride, even for one matrix: then any other value does. */
    size_t sa = count > 1 ? ao[1] - ao[0] : 1, sb = count > 1 ? bo[1] - bo[0] : 1,
           sc = count > 1 ? co[1] - co[0] : 1;
    r = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, m, n, k, alpha, a, ao[0], lda, sa,
                                   b, bo[0], ldb, sb, beta, c, co[0], ldc, sc, count, &ctx->queue,
                                   NULL);
  } else {
    for (size_t i = 0; i < count; i++) alphas[i] = alpha, betas[i] = beta;
    r = CLBlastSgemmBatched(CLBlastLayoutRowMajor, ta, tb, m, n, k, alphas, a, ao, lda, b, bo, ldb,
                            betas, c, co, ldc, count, &ctx->queue, NULL);
  }
  return r == CLBlastSuccess ? CLATTN_OK : clblast_fail(ctx, r, what);
}

clattn_status clattn__std_workspace(clattn_context *ctx, size_t bytes) {
  if (ctx->workspace_bytes >= bytes) return CLATTN_OK;
  if (ctx->workspace) clReleaseMemObject(ctx->workspace);
  ctx->workspace = NULL;
  ctx->workspace_bytes = 0;
  cl_int err;
  cl_mem m = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS)
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "standard attention: cannot allocate its %zu-byte workspace (%s)", bytes,
                        clattn__cl_error_name(err));
  ctx->workspace = m;
  ctx->workspace_bytes = bytes;
  return CLATTN_OK;
}

/* Zeros through a view t of batch x rows x heads x cols elements (cl/standard.cl's empty_rows),
 * and, where lse is not NULL, LSE = -inf (or the sink) for its batch x heads x rows rows. */
static clattn_status zero_rows(clattn_context *ctx, const clattn__shape *s, const clattn_tensor *t,
                               size_t heads, size_t rows, size_t cols, cl_mem lse) {
  cl_kernel k;
  char options[80]; /* t in the problem's storage; of the variants only the sinks count */
  int sinks = lse && s->sinks;
  snprintf(options, sizeof options, "-D WG=1 -D CPI=0 -D CAUSAL=0%s%s",
           clattn__dtype_define(s->dtype), sinks ? " -D SINKS=1" : "");
  clattn_status st = clattn__std_kernel(ctx, "empty_rows", options, &k);
  if (st != CLATTN_OK) return st;
  cl_ulong view[4] = {t->offset, t->stride_batch, t->stride_seq, t->stride_head};
  cl_int write_lse = lse != NULL;
  cl_mem lse_arg = lse ? lse : t->buffer; /* any valid buffer when unused */
  cl_uint nh = (cl_uint)heads, nq = (cl_uint)rows, nc = (cl_uint)cols;
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &t->buffer);
  for (int i = 0; i < 4; i++)
    if (err == CL_SUCCESS) err = clSetKernelArg(k, 1 + i, sizeof view[i], &view[i]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 5, sizeof(cl_mem), &lse_arg);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 6, sizeof write_lse, &write_lse);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 7, sizeof nh, &nh);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 8, sizeof nq, &nq);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 9, sizeof nc, &nc);
  clattn__shape sinks_only = {0};
  sinks_only.sinks = sinks ? s->sinks : NULL, sinks_only.heads_q = s->heads_q;
  clattn__args va = {k, 11, err, NULL}; /* after base, which clattn__std_launch sets */
  clattn__arg_variants(&va, &sinks_only, 1.0);
  err = va.err;
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clSetKernelArg(empty_rows)");
  return clattn__std_launch(ctx, k, 10, s->batch * heads * rows * cols, 1);
}

/* seqlen_kv = 0: no scores to compute; O = 0 and LSE = -inf (or the sink). */
static clattn_status empty_keys(clattn_context *ctx, const clattn__shape *s, const clattn_tensor *o,
                                cl_mem lse) {
  return zero_rows(ctx, s, o, s->heads_q, s->seqlen_q, s->dv, lse);
}

/* The backward of a call with no queries or no keys (head dims above the fused kernels'): the
 * gradients that have elements are zero, dk and dv (no queries) or dq (no keys). */
clattn_status clattn__standard_backward_empty(clattn_context *ctx, const clattn__shape *s,
                                              const clattn_tensor *dq, const clattn_tensor *dk,
                                              const clattn_tensor *dv) {
  if (!s->batch || !s->heads_q) return CLATTN_OK;
  if (s->seqlen_q && !s->seqlen_kv)
    return zero_rows(ctx, s, dq, s->heads_q, s->seqlen_q, s->d, NULL);
  if (!s->seqlen_q && s->seqlen_kv) {
    clattn_status st = zero_rows(ctx, s, dk, s->heads_kv, s->seqlen_kv, s->d, NULL);
    return st == CLATTN_OK ? zero_rows(ctx, s, dv, s->heads_kv, s->seqlen_kv, s->dv, NULL) : st;
  }
  return CLATTN_OK;
}

/* Work-group and columns per work-item of the softmax for rows of nkv keys. Work-groups stay
 * at 256 while each work-item can hold its columns in registers (up to 64): on the H200, rows of
 * 16384 keys ran at 60% of the copy bandwidth with 1024-wide groups (ten barrier levels, two
 * groups per SM) and at ~100% with 256-wide ones (docs/TRAFFIC.md). */
static void softmax_shape(const clattn_context *ctx, size_t nkv, size_t *wg, unsigned *cpi) {
  size_t w = 64, max = ctx->device.max_work_group < 1024 ? ctx->device.max_work_group : 1024;
  while (w * 2 <= max && w < 256 && (nkv + w - 1) / w > 16) w *= 2;
  while (w * 2 <= max && (nkv + w - 1) / w > 64) w *= 2;
  while (w > max) w /= 2;
  size_t per = (nkv + w - 1) / w;
  unsigned c = 1;
  while (c < per) c *= 2;
  *wg = w;
  *cpi = c > 64 ? 0 : c;
}

/* The softcap's tanh is the fused kernels' on the device (clattn__cap_tanh_define), so that a
 * forward on one path and its backward on the other see the same capped scores. */
void clattn__std_options(const clattn_context *ctx, const clattn__shape *s, size_t wg, unsigned cpi,
                         char *out, size_t len) {
  const int cap = s->softcap > 0.0f;
  snprintf(out, len, "-D WG=%zu -D CPI=%u -D CAUSAL=%u%s%s%s%s%s%s", wg, cpi, s->causal,
           s->mask ? " -D MASK=1" : "", cap ? " -D SOFTCAP=1" : "",
           cap ? clattn__cap_tanh_define(&ctx->device, s->dtype) : "",
           s->alibi ? " -D ALIBI=1" : "", s->sinks ? " -D SINKS=1" : "",
           s->seqlens_kv ? " -D KVLENS=1" : "");
}

static clattn_status softmax(clattn_context *ctx, const clattn__shape *s, size_t rows,
                             size_t lse_base, cl_mem lse) {
  size_t wg;
  unsigned cpi;
  softmax_shape(ctx, s->seqlen_kv, &wg, &cpi);
  char opt[128];
  clattn__std_options(ctx, s, wg, cpi, opt, sizeof opt);
  cl_kernel k;
  clattn_status st = clattn__std_kernel(ctx, "softmax_rows", opt, &k);
  if (st != CLATTN_OK) return st;
  cl_uint nq = (cl_uint)s->seqlen_q, nkv = (cl_uint)s->seqlen_kv;
  cl_ulong lb = lse_base;
  cl_int write_lse = lse != NULL;
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &ctx->workspace);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 1, sizeof(cl_mem), &lse);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 2, sizeof nq, &nq);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 3, sizeof nkv, &nkv);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 5, sizeof lb, &lb);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 6, sizeof write_lse, &write_lse);
  clattn__args va = {k, 7, err, NULL};
  clattn__arg_variants(&va, s, 1.0);
  err = va.err;
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clSetKernelArg(softmax_rows)");
  return clattn__std_launch(ctx, k, 4, rows, wg);
}

clattn_status clattn__std_addressable(clattn_context *ctx, const clattn__shape *s,
                                      const clattn_tensor *q, const clattn_tensor *k,
                                      const clattn_tensor *v, const clattn_tensor *o) {
  /* Half views reach CLBlast only through their fp32 copies in the workspace, which the plan
   * keeps addressable; the copy kernels index with 64 bits. */
  if (s->dtype != CLATTN_F32) return CLATTN_OK;
  size_t last[4] = {last_index(q, s->batch, s->seqlen_q, s->heads_q, s->d),
                    last_index(k, s->batch, s->seqlen_kv, s->heads_kv, s->d),
                    last_index(v, s->batch, s->seqlen_kv, s->heads_kv, s->dv),
                    last_index(o, s->batch, s->seqlen_q, s->heads_q, s->dv)};
  const char *names = "qkvo";
  for (int i = 0; i < 4; i++)
    if (last[i] >= CLBLAST_MAX_INDEX)
      return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                          "standard attention: %c reaches element %zu of its buffer; CLBlast "
                          "addresses elements below 2^31 only",
                          names[i], last[i]);
  return CLATTN_OK;
}

/* The three steps for batch*heads entries [first, first + count) of the problem. */
/* ops: the operands q, k, v, o. */
static clattn_status run_chunk(clattn_context *ctx, const clattn__shape *s, size_t index,
                               size_t first, size_t count, clattn__std_operand *ops, cl_mem lse,
                               size_t *offs, float *scalars) {
  size_t *qo = offs, *ko = qo + count, *vo = ko + count, *oo = vo + count, *so = oo + count;
  size_t nq = s->seqlen_q, nkv = s->seqlen_kv;
  for (size_t i = 0; i < count; i++) so[i] = i * nq * nkv;
  float *alphas = scalars, *betas = scalars + count;
  clattn__std_operand *q = &ops[0], *k = &ops[1], *v = &ops[2], *o = &ops[3];
  mark(ctx, index, 0); /* the S step includes the packed copies, if any */
  clattn_status st = clattn__std_operand_load(ctx, s, q, first, count, qo);
  if (st == CLATTN_OK) st = clattn__std_operand_load(ctx, s, k, first, count, ko);
  if (st == CLATTN_OK) st = clattn__std_operand_load(ctx, s, v, first, count, vo);
  if (st == CLATTN_OK) st = clattn__std_operand_load(ctx, s, o, first, count, oo);
  if (st == CLATTN_OK)
    st = clattn__std_gemm(ctx, "GEMM S = scale * Q K^T", 0, 1, nq, nkv, s->d, s->scale, q->buf, qo,
                          q->ld, k->buf, ko, k->ld, 0.0f, ctx->workspace, so, nkv, count, alphas,
                          betas);
  mark(ctx, index, 1);
  if (st == CLATTN_OK) st = softmax(ctx, s, count * nq, first * nq, lse);
  mark(ctx, index, 2);
  if (st == CLATTN_OK)
    st = clattn__std_gemm(ctx, "GEMM O = P V", 0, 0, nq, s->dv, nkv, 1.0f, ctx->workspace, so, nkv,
                          v->buf, vo, v->ld, 0.0f, o->buf, oo, o->ld, count, alphas, betas);
  /* Half: O was written in fp32 to the workspace; rounded into the caller's view. */
  if (st == CLATTN_OK) st = clattn__std_operand_store(ctx, s, o, first, count);
  mark(ctx, index, 3);
  return st;
}

clattn_status clattn__standard_forward(clattn_context *ctx, const clattn__shape *s,
                                       const clattn_tensor *q, const clattn_tensor *k,
                                       const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                       cl_uint num_wait, const cl_event *wait, cl_event *done) {
  if (!ctx->queue_in_order)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "standard attention needs an in-order queue: CLBlast enqueues its kernels "
                        "without wait lists");
  /* Views CLBlast cannot read in place, and in half storage every operand, are packed per chunk
   * after its score matrices (standard_pack.c). */
  clattn__std_operand ops[4];
  size_t group = s->heads_q / s->heads_kv;
  clattn__std_operand_init(&ops[0], q, s->seqlen_q, s->d, 1, s->dtype, 0);
  clattn__std_operand_init(&ops[1], k, s->seqlen_kv, s->d, group, s->dtype, 0);
  clattn__std_operand_init(&ops[2], v, s->seqlen_kv, s->dv, group, s->dtype, 0);
  clattn__std_operand_init(&ops[3], o, s->seqlen_q, s->dv, 1, s->dtype, 1);
  static const char *const out_name[] = {"o"};
  clattn__standard_plan plan;
  clattn__standard_plan_packed(ctx, s, 1, clattn__std_pack_bytes(ops, 4), &plan);
  clattn__std_operands_place(ops, 4, plan.chunk, plan.chunk * s->seqlen_q * s->seqlen_kv);
  if (plan.chunk == 0)
    return clattn__fail(
        ctx, CLATTN_ERR_OUT_OF_RESOURCES,
        "standard attention needs %zu bytes of global memory for one head (its %zu x %zu score "
        "matrix and any packed copies: %zu, CLBlast's padded copies: %zu); available: %zu "
        "(workspace limit %zu, largest allocation %llu)",
        add_sat(plan.head_workspace, plan.head_temp), s->seqlen_q, s->seqlen_kv,
        plan.head_workspace, plan.head_temp,
        plan.limit < ctx->device.max_alloc ? plan.limit : (size_t)ctx->device.max_alloc, plan.limit,
        (unsigned long long)ctx->device.max_alloc);
  clattn_status st = clattn__std_addressable(ctx, s, q, k, v, o);
  if (st == CLATTN_OK) st = clattn__std_outputs_direct(ctx, &ops[3], out_name, 1);
  if (st == CLATTN_OK && s->seqlen_kv)
    st = clattn__std_workspace(ctx, plan.chunk * plan.head_workspace);
  if (st != CLATTN_OK) return st;
  /* CLBlast takes no wait list: a barrier holds what follows until the caller's events. */
  if (num_wait) {
    cl_int err = clEnqueueBarrierWithWaitList(ctx->queue, num_wait, wait, NULL);
    if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clEnqueueBarrierWithWaitList");
  }
  marks_release(ctx); /* a profile describes the last call, or none */
  if (s->seqlen_kv == 0) {
    st = empty_keys(ctx, s, o, lse);
  } else {
    size_t heads = s->batch * s->heads_q, chunks = (heads + plan.chunk - 1) / plan.chunk;
    cl_command_queue_properties props = 0;
    clGetCommandQueueInfo(ctx->queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (props & CL_QUEUE_PROFILING_ENABLE) {
      ctx->step_marks = calloc(4 * chunks, sizeof(cl_event));
      ctx->step_marks_count = ctx->step_marks ? 4 * chunks : 0;
    }
    size_t *offs = malloc(5 * plan.chunk * sizeof *offs);
    float *scalars = malloc(2 * plan.chunk * sizeof *scalars);
    if (!offs || !scalars)
      st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
    for (size_t first = 0, i = 0; st == CLATTN_OK && first < heads; first += plan.chunk, i++) {
      size_t count = heads - first < plan.chunk ? heads - first : plan.chunk;
      st = run_chunk(ctx, s, i, first, count, ops, lse, offs, scalars);
    }
    free(offs);
    free(scalars);
  }
  if (st == CLATTN_OK && done) {
    cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, done);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
  }
  clFlush(ctx->queue);
  return st;
}

clattn_status clattn_standard_profile_last(clattn_context *ctx, clattn_standard_profile *out) {
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn_status st = CLATTN_OK;
  if (!out)
    st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "out is NULL");
  else if (!ctx->step_marks_count)
    st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                      "no standard-path call to profile on this context (or its queue has no "
                      "CL_QUEUE_PROFILING_ENABLE)");
  if (st == CLATTN_OK) {
    memset(out, 0, sizeof *out);
    double *sum[3] = {&out->gemm_s_ms, &out->softmax_ms, &out->gemm_o_ms};
    for (size_t c = 0; st == CLATTN_OK && c < ctx->step_marks_count / 4; c++) {
      cl_event *m = ctx->step_marks + 4 * c;
      if (!m[0] || !m[3]) break; /* the call failed before this chunk */
      cl_int err = clWaitForEvents(1, &m[3]);
      cl_ulong t[4] = {0};
      for (int i = 0; i < 4 && err == CL_SUCCESS; i++)
        err = clGetEventProfilingInfo(m[i], CL_PROFILING_COMMAND_END, sizeof t[i], &t[i], NULL);
      if (err != CL_SUCCESS) {
        st = clattn__fail_cl(ctx, err, "clGetEventProfilingInfo(standard path markers)");
        break;
      }
      for (int i = 0; i < 3; i++) *sum[i] += t[i + 1] > t[i] ? (t[i + 1] - t[i]) / 1e6 : 0.0;
      out->launches++;
    }
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}
