/* The standard path (CLBlast's SGEMM on fp32 copies of the half inputs, O and the gradients
 * rounded on the way out: runtime/ops/standard_pack.c) in half storage, under DESIGN.md's rule
 * against the double reference of the same rounded inputs, relative to the naive same-precision
 * implementation, + 1e-4 (2x for O and LSE, 3x for the gradients). Outputs start NaN in their
 * own type. Not a cross product: fp16 on shapes of the list's kinds, bf16 on a few; and chunks
 * over batch*heads, whose plan counts the fp32 copies, with GQA groups that span chunks. */
#include "common.h"
#include "tune.h" /* the context's launch pieces */

enum { BSHD = 0, BHSD = 1, NOLSE = 0, LSE = 1 };
#define C CLATTN_CAUSAL
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16

/* The forward: O (and LSE) through test_forward_shape. */
static void run_std(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv,
                    size_t d, size_t dv, unsigned flags, int bhsd, size_t offset, int lse) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, t, 0.0f, flags, CLATTN_ALGO_STANDARD};
  test_forward_shape(&p, bhsd, offset, lse, NULL);
}

/*                       b  hq hkv   nq   nkv    d   dv flags layout off lse */
Test(standard_half, f16_d1_len1) {
  run_std(F16, 1, 1, 0, 1, 1, 1, 0, 0, BSHD, 0, LSE);
}
Test(standard_half, f16_d59_len17) {
  run_std(F16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, NOLSE);
}
Test(standard_half, f16_d111_113x203_bhsd) {
  run_std(F16, 1, 2, 0, 113, 203, 111, 0, 0, BHSD, 0, LSE);
}
Test(standard_half, f16_d256_causal_q_shorter) {
  run_std(F16, 1, 2, 0, 80, 130, 256, 0, C, BSHD, 0, LSE);
}
Test(standard_half, f16_d128_1023x1024_causal_bhsd) {
  run_std(F16, 1, 1, 0, 1023, 1024, 128, 0, C, BHSD, 0, LSE);
}
Test(standard_half, f16_causal_q_longer_bhsd) {
  run_std(F16, 1, 2, 0, 203, 113, 64, 0, C, BHSD, 0, LSE);
}
Test(standard_half, f16_gqa_dv_smaller) {
  run_std(F16, 2, 8, 2, 65, 129, 64, 24, 0, BSHD, 0, LSE);
}
Test(standard_half, f16_offset_odd_causal_gqa) {
  run_std(F16, 2, 4, 1, 33, 41, 40, 0, C, BHSD, 37, LSE);
}
Test(standard_half, f16_empty_kv) {
  run_std(F16, 2, 2, 0, 7, 0, 32, 0, 0, BSHD, 3, LSE);
}
Test(standard_half, f16_d300_beyond_the_fused) {
  run_std(F16, 1, 2, 0, 20, 33, 300, 0, C, BSHD, 0, LSE);
}
Test(standard_half, bf16_d59_len17) {
  run_std(BF16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, LSE);
}
Test(standard_half, bf16_causal_gqa_offset) {
  run_std(BF16, 1, 4, 2, 31, 29, 17, 0, C, BHSD, 5, LSE);
}
Test(standard_half, bf16_empty_kv_bhsd) {
  run_std(BF16, 1, 3, 0, 9, 0, 16, 0, 0, BHSD, 0, LSE);
}

/* The standard path's backward in half (the suite backward_half runs the fused one;
 * test_backward.c's harness runs one path per build): gradients against the double reference of the
 * rounded inputs, 3x the naive same-precision error + 1e-4; they start NaN (tools/check_bwd.c). In
 * ctx when given (else a fresh context). */
static void bwd_std_in(clattn_context *ctx, clattn_dtype t, size_t b, size_t hq, size_t hkv,
                       size_t nq, size_t nkv, size_t d, size_t dv, unsigned flags, int bhsd,
                       size_t offset) {
  clattn_context *own = ctx ? NULL : test_context(NULL);
  check_spec sp = {
      {b, hq, hkv, nq, nkv, d, dv, t, 0.0f, flags, CLATTN_ALGO_STANDARD}, bhsd, offset};
  sp.seed = 11;
  check_bwd_result r;
  clattn_context *c = ctx ? ctx : own;
  cr_assert_eq(check_backward_run(c, &sp, &r), CLATTN_OK, "%s", clattn_last_error(c));
  static const char *const names[3] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; g++)
    cr_expect_leq(r.err[g], r.tol[g], "%s: error %g, naive %g", names[g], r.err[g], r.naive_err[g]);
  if (own) clattn_context_destroy(own);
}

static void bwd_std(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv,
                    size_t d, size_t dv, unsigned flags, int bhsd, size_t offset) {
  bwd_std_in(NULL, t, b, hq, hkv, nq, nkv, d, dv, flags, bhsd, offset);
}

/*                                         b  hq hkv  nq  nkv    d  dv flags layout off */
Test(standard_half, backward_f16_d1_len1) {
  bwd_std(F16, 1, 1, 0, 1, 1, 1, 0, 0, BSHD, 0);
}
Test(standard_half, backward_f16_d59_len17) {
  bwd_std(F16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0);
}
Test(standard_half, backward_f16_d111_bhsd) {
  bwd_std(F16, 1, 2, 0, 113, 203, 111, 0, 0, BHSD, 0);
}
Test(standard_half, backward_f16_d256_causal_q_shorter) {
  bwd_std(F16, 1, 2, 0, 40, 70, 256, 0, C, BSHD, 0);
}
Test(standard_half, backward_f16_causal_q_longer_gqa) {
  bwd_std(F16, 1, 4, 2, 90, 50, 32, 0, C, BHSD, 0);
}
Test(standard_half, backward_f16_gqa_dv_larger_offset) {
  bwd_std(F16, 2, 6, 2, 33, 41, 24, 40, 0, BSHD, 37);
}
Test(standard_half, backward_f16_d300_beyond_the_fused) {
  bwd_std(F16, 1, 2, 0, 20, 33, 300, 0, C, BSHD, 0);
}
Test(standard_half, backward_bf16_d59_len17) {
  bwd_std(BF16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0);
}
Test(standard_half, backward_bf16_causal_mqa_bhsd) {
  bwd_std(BF16, 1, 4, 1, 31, 29, 17, 0, C, BHSD, 5);
}

/* Chunks over batch*heads under a small workspace limit: the half copies count in the plan
 * (explain's workspace grows by them), and in the backward a GQA group of 3 query heads spans
 * chunks of 2, so dK and dV of a K/V head are summed over two chunks before they are rounded. */
Test(standard_half, chunks_split_gqa_groups) {
  clattn_problem p = {2, 6, 2, 40, 50, 16, 0, F16, 0.0f, C, CLATTN_ALGO_STANDARD};
  clattn_context *probe = test_context(NULL);
  clattn_plan_info h, f;
  cr_assert_eq(clattn_explain(probe, &p, &h), CLATTN_OK, "%s", clattn_last_error(probe));
  clattn_problem p32 = p;
  p32.dtype = CLATTN_F32;
  cr_assert_eq(clattn_explain(probe, &p32, &f), CLATTN_OK, "%s", clattn_last_error(probe));
  cr_assert_eq(h.standard_heads_per_chunk, 12);
  /* Q, K, V, O in fp32 per head: (40 + 50 + 50 + 40) * 16 floats. */
  cr_assert_eq(h.standard_workspace_bytes, f.standard_workspace_bytes + 12 * 180 * 16 * 4);
  cr_assert_eq(h.standard_backward_workspace_bytes,
               f.standard_backward_workspace_bytes + 12 * (180 + 140) * 16 * 4);
  size_t per_head = h.standard_backward_workspace_bytes / 12;
  clattn_context_destroy(probe);
  clattn_context *ctx = test_context_limited(NULL, 2 * per_head + per_head / 2);
  cr_assert_eq(clattn_explain(ctx, &p, &h), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_geq(h.standard_heads_per_chunk, 2);
  test_forward_check(ctx, &p, BSHD, 0, LSE, 5, "standard f16 in chunks");
  bwd_std_in(ctx, F16, 2, 6, 2, 40, 50, 16, 0, C, BSHD, 0);
  clattn_context_destroy(ctx);
  /* One head per chunk: every group spans three. */
  ctx = test_context_limited(NULL, per_head + per_head / 2);
  bwd_std_in(ctx, BF16, 2, 6, 2, 40, 50, 16, 0, C, BHSD, 3);
  clattn_context_destroy(ctx);
}

/* The copy kernels (pack_rows, store_rows) and empty_rows enqueued in pieces of 3 work-groups
 * (test_standard.c has why): each piece must start where the last ended, in both directions. */
Test(standard_half, launches_in_pieces_cover_every_element) {
  clattn_context *ctx = test_context(NULL);
  ctx->std_launch_groups = 3;
  clattn_problem p = {2, 4, 2, 37, 45, 16, 0, BF16, 0.0f, C, CLATTN_ALGO_STANDARD};
  test_forward_check(ctx, &p, BHSD, 2, LSE, 3, "standard bf16 in pieces");
  bwd_std_in(ctx, BF16, 2, 4, 2, 37, 45, 16, 0, C, BSHD, 0);
  p.dtype = F16, p.seqlen_kv = 0;
  test_forward_check(ctx, &p, BSHD, 0, LSE, 3, "standard f16 without keys, in pieces");
  clattn_context_destroy(ctx);
}
