/* The standard path's backward, the baseline for the fused one: P is recomputed into a
 * global-memory workspace (S = scale Q K^T by CLBlast, then P = exp(S - LSE)), dP = dO V^T by
 * CLBlast, dS = P (dP - D) in place, then dQ = scale dS K, dK = scale dS^T Q and dV = P^T dO by
 * CLBlast. GQA: dK and dV of a K/V head sum over its query heads, one GEMM call per position in
 * the group (the first overwrites, the others add), so no call writes a matrix twice.
 * Half storage: Q, K, V and dO are widened into fp32 copies in the workspace, and dQ, dK and dV
 * computed in fp32 there and rounded into the caller's views once complete (standard_pack.c);
 * D reads O and dO in their storage. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  size_t *q, *k, *v, *g, *dq, *dk, *dv, *p, *ds; /* element offsets per batch entry */
} offsets;

static clattn_status elementwise(clattn_context *ctx, cl_kernel k, cl_uint base_arg, size_t n) {
  return clattn__std_launch(ctx, k, base_arg, (n + 63) / 64, 64);
}

clattn_status clattn__bwd_ws_reserve(clattn_context *ctx, size_t bytes) {
  if (ctx->bwd_ws_bytes < bytes) {
    if (ctx->bwd_ws) clReleaseMemObject(ctx->bwd_ws);
    cl_int err;
    ctx->bwd_ws = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    ctx->bwd_ws_bytes = err == CL_SUCCESS ? bytes : 0;
    if (err != CL_SUCCESS) {
      ctx->bwd_ws = NULL;
      return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                          "backward: cannot allocate its %zu-byte row workspace (%s)", bytes,
                          clattn__cl_error_name(err));
    }
  }
  return CLATTN_OK;
}

clattn_status clattn__bwd_rowsum(clattn_context *ctx, const clattn__shape *s,
                                 const clattn_tensor *o, const clattn_tensor *d_o) {
  /* The LSE's rows: [batch][heads_q][seqlen_q], or varlen's [heads_q][total_q] (a batch of one
   * sequence of total_q rows to bwd_rowdot, whose views' batch strides then go unused). */
  size_t rows = s->lse_rows;
  /* With sinks, the rows' sums of P dP follow D (cl/common.cl's PDP_ARG). */
  clattn_status st = clattn__bwd_ws_reserve(ctx, (s->sinks ? 2 : 1) * rows * sizeof(float));
  if (st != CLATTN_OK) return st;
  cl_kernel k;
  /* O and dO in the problem's storage (cl/common.cl's DTYPE; fp32 adds nothing). */
  char options[64];
  snprintf(options, sizeof options, "-D WG=1 -D CPI=0 -D CAUSAL=0%s",
           clattn__dtype_define(s->dtype));
  st = clattn__std_kernel(ctx, "bwd_rowdot", options, &k);
  if (st != CLATTN_OK) return st;
  cl_ulong ov[4] = {o->offset, o->stride_batch, o->stride_seq, o->stride_head};
  cl_ulong gv[4] = {d_o->offset, d_o->stride_batch, d_o->stride_seq, d_o->stride_head};
  cl_uint hq = (cl_uint)s->heads_q, nq = (cl_uint)s->vq, dv = (cl_uint)s->dv;
  cl_ulong n = rows;
  cl_int err = clSetKernelArg(k, 0, sizeof(cl_mem), &o->buffer);
  for (int i = 0; i < 4 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 1 + i, 8, &ov[i]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 5, sizeof(cl_mem), &d_o->buffer);
  for (int i = 0; i < 4 && err == CL_SUCCESS; i++) err = clSetKernelArg(k, 6 + i, 8, &gv[i]);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 10, sizeof(cl_mem), &ctx->bwd_ws);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 11, 4, &hq);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 12, 4, &nq);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 13, 4, &dv);
  /* Rows in the views' order: heads inner where O's heads are closer than its positions. */
  cl_uint h_inner = o->stride_head < o->stride_seq;
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 14, 8, &n);
  if (err == CL_SUCCESS) err = clSetKernelArg(k, 15, 4, &h_inner);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clSetKernelArg(bwd_rowdot)");
  st = clattn__std_launch(ctx, k, 16, (n + 63) / 64, 64); /* a row a work-item */
  if (st == CLATTN_OK && s->sinks && s->varlen) {         /* rows in no sequence: a P dP of 0 */
    cl_float zero = 0.0f;
    err = clEnqueueFillBuffer(ctx->queue, ctx->bwd_ws, &zero, sizeof zero, rows * sizeof zero,
                              rows * sizeof zero, 0, NULL, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueFillBuffer(backward rows)");
  }
  return st;
}

clattn_status clattn__bwd_sinks(clattn_context *ctx, const clattn__shape *s, cl_mem lse) {
  if (!s->d_sinks || !s->heads_q) return CLATTN_OK;
  /* A sum over no rows, or over rows of no keys (their sums of P dP are 0). */
  if (s->batch == 0 || s->seqlen_q == 0 || s->lse_rows == 0 || s->seqlen_kv == 0) {
    cl_float zero = 0.0f;
    cl_int err = clEnqueueFillBuffer(ctx->queue, s->d_sinks, &zero, sizeof zero, 0,
                                     s->heads_q * sizeof zero, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLATTN_OK
                             : clattn__fail_cl(ctx, err, "clEnqueueFillBuffer(d_sinks)");
  }
  cl_kernel k;
  clattn_status st = clattn__std_kernel(ctx, "bwd_sinks", "-D WG=64 -D CPI=0 -D CAUSAL=0", &k);
  if (st != CLATTN_OK) return st;
  cl_uint hq = (cl_uint)s->heads_q, nq = (cl_uint)s->vq;
  cl_ulong b = s->vb, pdp_off = s->lse_rows;
  clattn__args a = {k, 0, CL_SUCCESS, NULL};
  clattn__arg_mem(&a, &lse);
  clattn__arg_mem(&a, &ctx->bwd_ws);
  clattn__arg_mem(&a, &s->sinks);
  clattn__arg_mem(&a, &s->d_sinks);
  clattn__arg(&a, sizeof hq, &hq);
  clattn__arg(&a, sizeof nq, &nq);
  clattn__arg(&a, sizeof b, &b);
  clattn__arg(&a, sizeof pdp_off, &pdp_off);
  if (a.err != CL_SUCCESS) return clattn__fail_cl(ctx, a.err, "clSetKernelArg(bwd_sinks)");
  size_t global = s->heads_q * 64, local = 64;
  cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, &local, 0, NULL, NULL);
  return err == CL_SUCCESS ? CLATTN_OK
                           : clattn__fail_cl(ctx, err, "clEnqueueNDRangeKernel(bwd_sinks)");
}

/* With sinks: the chunk's rows' sums of P dP (cl/standard.cl's bwd_pdp), before dS replaces dP
 * (ds_off elements after P in the workspace); rows from row_base. */
static clattn_status pdp_rows(clattn_context *ctx, const clattn__shape *s, size_t rows,
                              cl_ulong row_base, cl_ulong ds_off) {
  cl_kernel k;
  clattn_status st = clattn__std_kernel(ctx, "bwd_pdp", "-D WG=64 -D CPI=0 -D CAUSAL=0", &k);
  if (st != CLATTN_OK) return st;
  cl_ulong pdp_off = s->lse_rows, n = rows;
  cl_uint nkv = (cl_uint)s->seqlen_kv;
  clattn__args a = {k, 0, CL_SUCCESS, NULL};
  clattn__arg_mem(&a, &ctx->workspace);
  clattn__arg(&a, sizeof ds_off, &ds_off);
  clattn__arg_mem(&a, &ctx->bwd_ws);
  clattn__arg(&a, sizeof pdp_off, &pdp_off);
  clattn__arg(&a, sizeof nkv, &nkv);
  clattn__arg(&a, sizeof row_base, &row_base);
  clattn__arg(&a, sizeof n, &n);
  if (a.err != CL_SUCCESS) return clattn__fail_cl(ctx, a.err, "clSetKernelArg(bwd_pdp)");
  return elementwise(ctx, k, 7, rows);
}

/* One chunk: batch*heads entries [first, first + count). ops: the operands q, k, v, d_o, dq, dk,
 * dv; the first four packed into the workspace first where CLBlast cannot read them in place. */
static clattn_status chunk(clattn_context *ctx, const clattn__shape *s, size_t first, size_t count,
                           clattn__std_operand *ops, cl_mem lse, cl_kernel probs, cl_kernel dscores,
                           const offsets *off, size_t *sub, float *scalars) {
  clattn__std_operand *q = &ops[0], *k = &ops[1], *v = &ops[2], *d_o = &ops[3], *dq = &ops[4],
                      *dk = &ops[5], *dv = &ops[6];
  size_t G = s->heads_q / s->heads_kv, nq = s->seqlen_q, nkv = s->seqlen_kv, mat = nq * nkv;
  for (size_t i = 0; i < count; i++) {
    off->p[i] = i * mat;
    off->ds[i] = (count + i) * mat;
  }
  size_t *const place[7] = {off->q, off->k, off->v, off->g, off->dq, off->dk, off->dv};
  clattn_status st = CLATTN_OK;
  for (int i = 0; i < 7 && st == CLATTN_OK; i++)
    st = clattn__std_operand_load(ctx, s, &ops[i], first, count, place[i]);
  float *al = scalars, *be = scalars + count;
  cl_mem ws = ctx->workspace;
  if (st == CLATTN_OK)
    st = clattn__std_gemm(ctx, "GEMM S = scale * Q K^T", 0, 1, nq, nkv, s->d, s->scale, q->buf,
                          off->q, q->ld, k->buf, off->k, k->ld, 0.0f, ws, off->p, nkv, count, al,
                          be);
  cl_ulong rb = first * nq, n = count * mat;
  cl_uint nq32 = (cl_uint)nq, nkv32 = (cl_uint)nkv;
  cl_int err = CL_SUCCESS;
  if (st == CLATTN_OK) {
    err = clSetKernelArg(probs, 0, sizeof(cl_mem), &ws);
    if (err == CL_SUCCESS) err = clSetKernelArg(probs, 1, sizeof(cl_mem), &lse);
    if (err == CL_SUCCESS) err = clSetKernelArg(probs, 2, 4, &nq32);
    if (err == CL_SUCCESS) err = clSetKernelArg(probs, 3, 4, &nkv32);
    if (err == CL_SUCCESS) err = clSetKernelArg(probs, 4, 8, &rb);
    if (err == CL_SUCCESS) err = clSetKernelArg(probs, 5, 8, &n);
    clattn__args va = {probs, 7, err, NULL}; /* after base, which elementwise sets */
    clattn__arg_variants(&va, s, 1.0);
    err = va.err;
    st = err == CL_SUCCESS ? elementwise(ctx, probs, 6, n)
                           : clattn__fail_cl(ctx, err, "clSetKernelArg(bwd_probs)");
  }
  if (st == CLATTN_OK)
    st = clattn__std_gemm(ctx, "GEMM dP = dO V^T", 0, 1, nq, nkv, s->dv, 1.0f, d_o->buf, off->g,
                          d_o->ld, v->buf, off->v, v->ld, 0.0f, ws, off->ds, nkv, count, al, be);
  if (st == CLATTN_OK && s->sinks) st = pdp_rows(ctx, s, count * nq, rb, count * mat);
  if (st == CLATTN_OK) {
    cl_ulong ds_off = count * mat; /* dS sits after the chunk's P matrices */
    err = clSetKernelArg(dscores, 0, sizeof(cl_mem), &ws);
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 1, 8, &ds_off);
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 2, sizeof(cl_mem), &ctx->bwd_ws);
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 3, 4, &nkv32);
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 4, 8, &rb);
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 5, 8, &n);
    /* The LSE: with a softcap, t is recovered from P and it (cl/standard.cl). */
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 7, sizeof(cl_mem), &lse);
    if (err == CL_SUCCESS) err = clSetKernelArg(dscores, 8, 4, &nq32);
    clattn__args va = {dscores, 9, err, NULL};
    clattn__arg_variants(&va, s, 1.0);
    err = va.err;
    st = err == CL_SUCCESS ? elementwise(ctx, dscores, 6, n)
                           : clattn__fail_cl(ctx, err, "clSetKernelArg(bwd_dscores)");
  }
  if (st == CLATTN_OK)
    st =
        clattn__std_gemm(ctx, "GEMM dQ = scale * dS K", 0, 0, nq, s->d, nkv, s->scale, ws, off->ds,
                         nkv, k->buf, off->k, k->ld, 0.0f, dq->buf, off->dq, dq->ld, count, al, be);
  /* dK and dV: one call per position g in the GQA group; position 0 overwrites. */
  for (size_t g = 0; st == CLATTN_OK && g < G; g++) {
    size_t m = 0;
    size_t *sds = sub, *sq = sub + count, *sdk = sub + 2 * count, *sp = sub + 3 * count,
           *sg = sub + 4 * count, *sdv = sub + 5 * count;
    for (size_t i = 0; i < count; i++)
      if ((first + i) % s->heads_q % G == g) {
        sds[m] = off->ds[i], sq[m] = off->q[i], sdk[m] = off->dk[i];
        sp[m] = off->p[i], sg[m] = off->g[i], sdv[m] = off->dv[i];
        m++;
      }
    if (!m) continue;
    /* Groups are contiguous and run in order, so positions 0..g-1 of an entry's group have been
     * enqueued before it (in this chunk or an earlier one): add from position 1 on. */
    float beta = g > 0 ? 1.0f : 0.0f;
    st = clattn__std_gemm(ctx, "GEMM dK = scale * dS^T Q", 1, 0, nkv, s->d, nq, s->scale, ws, sds,
                          nkv, q->buf, sq, q->ld, beta, dk->buf, sdk, dk->ld, m, al, be);
    if (st == CLATTN_OK)
      st = clattn__std_gemm(ctx, "GEMM dV = P^T dO", 1, 0, nkv, s->dv, nq, 1.0f, ws, sp, nkv,
                            d_o->buf, sg, d_o->ld, beta, dv->buf, sdv, dv->ld, m, al, be);
  }
  /* Half: the gradients finished in this chunk, rounded from the workspace into their views. */
  for (int i = 4; i < 7 && st == CLATTN_OK; i++)
    st = clattn__std_operand_store(ctx, s, &ops[i], first, count);
  return st;
}

clattn_status clattn__standard_backward(clattn_context *ctx, const clattn__shape *s,
                                        const clattn_tensor *q, const clattn_tensor *k,
                                        const clattn_tensor *v, const clattn_tensor *o,
                                        const clattn_tensor *d_o, cl_mem lse,
                                        const clattn_tensor *dq, const clattn_tensor *dk,
                                        const clattn_tensor *dv) {
  /* q k v d_o dq dk dv: the inputs CLBlast cannot read in place, and in half storage all seven,
   * are packed per chunk after its P and dS matrices; in fp32 the outputs never need it
   * (validation rejects those that would). */
  clattn__std_operand ops[7];
  const clattn_tensor *t[7] = {q, k, v, d_o, dq, dk, dv};
  size_t G = s->heads_q / s->heads_kv, nq = s->seqlen_q, nkv = s->seqlen_kv;
  const size_t rows[7] = {nq, nkv, nkv, nq, nq, nkv, nkv},
               cols[7] = {s->d, s->d, s->dv, s->dv, s->d, s->d, s->dv},
               group[7] = {1, G, G, 1, 1, G, G};
  for (int i = 0; i < 7; i++)
    clattn__std_operand_init(&ops[i], t[i], rows[i], cols[i], group[i], s->dtype, i >= 4);
  static const char *const out_names[] = {"dq", "dk", "dv"};
  clattn__standard_plan plan;
  clattn__standard_plan_packed(ctx, s, 2, clattn__std_pack_bytes(ops, 7), &plan);
  clattn__std_operands_place(ops, 7, plan.chunk, 2 * plan.chunk * nq * nkv);
  if (plan.chunk == 0)
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "standard attention backward needs %zu bytes of global memory for one "
                        "head (P and dS, %zu x %zu each, any packed copies, and CLBlast's padded "
                        "copies); available: %zu (workspace limit)",
                        plan.head_workspace + plan.head_temp, s->seqlen_q, s->seqlen_kv,
                        plan.limit);
  clattn_status st = clattn__std_addressable(ctx, s, q, k, v, o);
  if (st == CLATTN_OK) st = clattn__std_addressable(ctx, s, dq, dk, dv, d_o);
  if (st == CLATTN_OK) st = clattn__std_outputs_direct(ctx, &ops[4], out_names, 3);
  if (st == CLATTN_OK) st = clattn__std_workspace(ctx, plan.chunk * plan.head_workspace);
  cl_kernel kp = NULL, kd = NULL;
  char opt[128];
  clattn__std_options(ctx, s, 1, 0, opt, sizeof opt);
  if (st == CLATTN_OK) st = clattn__std_kernel(ctx, "bwd_probs", opt, &kp);
  if (st == CLATTN_OK) st = clattn__std_kernel(ctx, "bwd_dscores", opt, &kd);
  if (st == CLATTN_OK) st = clattn__bwd_rowsum(ctx, s, o, d_o);
  size_t heads = s->batch * s->heads_q;
  offsets off = {0};
  size_t *mem = malloc(15 * plan.chunk * sizeof *mem);
  float *scalars = malloc(2 * plan.chunk * sizeof *scalars);
  if (st == CLATTN_OK && (!mem || !scalars))
    st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  if (mem) {
    size_t c = plan.chunk;
    off = (offsets){mem,         mem + c,     mem + 2 * c, mem + 3 * c, mem + 4 * c,
                    mem + 5 * c, mem + 6 * c, mem + 7 * c, mem + 8 * c};
  }
  for (size_t first = 0; st == CLATTN_OK && first < heads; first += plan.chunk) {
    size_t count = heads - first < plan.chunk ? heads - first : plan.chunk;
    st = chunk(ctx, s, first, count, ops, lse, kp, kd, &off, mem + 9 * plan.chunk, scalars);
  }
  free(mem);
  free(scalars);
  return st;
}
