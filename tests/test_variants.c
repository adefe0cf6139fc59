/* The variants of issue 17 that the kernels compute so far: the sliding window (CLATTN_WINDOW,
 * either side unbounded or not, with or without a causal bound), the top-left causal alignment
 * (CLATTN_CAUSAL_TOP_LEFT), the softcap, ALiBi (per head or per batch entry and head), the
 * attention sinks (their gradient too) and a padded batch's key lengths (seqlens_kv), alone and in
 * the combinations models use, against the
 * double reference of tools/check.c and runtime/tune/reference*.c under DESIGN.md's rule (2x the
 * naive error for O and LSE, 3x for the gradients, + 1e-6 in fp32 or 1e-4 in half). Outputs start
 * NaN. Each case runs every path that computes it: the forward through the device's plan, through
 * forward_rows forced (half: forward_mma_half, emulated; forward_mma on two fp32 cases) and on
 * the standard path, and the backward through the device's plan (backward_rows), the tensor-core
 * family of the storage where the forward's is forced (emulated) and the standard path. Half
 * storage: each dtype on two shapes. The shapes are curated (odd lengths, nq < nkv and nq > nkv,
 * GQA, dv != d, bhsd, an offset, rows that see no key, a decode row whose keys are split), not a
 * cross product. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

enum { BSHD = 0, BHSD = 1 };
#define C CLATTN_CAUSAL
#define TL CLATTN_CAUSAL_TOP_LEFT
#define W CLATTN_WINDOW

typedef struct vcase {
  clattn_dtype dtype;
  size_t b, hq, hkv, nq, nkv, d, dv;
  unsigned flags;
  int64_t left, right;
  float softcap;
  int bhsd;
  size_t offset;
  int forward_only;
  int mma;    /* fp32: forward_mma forced too, emulated (slow: two cases) */
  int alibi;  /* 1: ALiBi slopes per head, 2: per batch entry and head */
  int sinks;  /* a sink per head (and its gradient) */
  int kvlens; /* a padded batch: seqlens_kv by tools/check.h's pattern (entries 2 to 4 of 5 see
                 no key, two of them by being out of range) */
} vcase;

static clattn_problem problem_of(const vcase *v, clattn_algorithm algo) {
  clattn_problem p = {v->b,  v->hq,    v->hkv, v->nq,    v->nkv, v->d,
                      v->dv, v->dtype, 0.0f,   v->flags, algo};
  p.window_left = v->left, p.window_right = v->right, p.softcap = v->softcap;
  if (v->alibi == 2) p.flags |= CLATTN_ALIBI_PER_BATCH;
  return p;
}

/* The checked run's spec: the problem on a path, the layout, ALiBi and the sinks. */
static check_spec spec_of(const vcase *v, clattn_algorithm algo) {
  check_spec sp = {problem_of(v, algo), v->bhsd, v->offset};
  sp.alibi = v->alibi != 0, sp.sinks = v->sinks, sp.seqlens_kv = v->kvlens;
  return sp;
}

/* The backward on a path: the device's plan, a forced backward config (cfg), or the standard
 * path. */
static void backward_on(const vcase *v, clattn_algorithm algo, const clattn_config *cfg) {
  clattn_context *ctx = test_context(NULL);
  check_spec sp = spec_of(v, algo);
  if (cfg)
    cr_assert_eq(clattn_override_config(ctx, &sp.problem, cfg), CLATTN_OK, "%s",
                 clattn_last_error(ctx));
  sp.seed = (unsigned)(v->nq * 7 + v->d);
  check_bwd_result r;
  cr_assert_eq(check_backward_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  static const char *const names[3] = {"dq", "dk", "dv"};
  const char *path = algo == CLATTN_ALGO_STANDARD ? "standard" : cfg ? cfg->kernel : "fused";
  for (int g = 0; g < 3; g++)
    cr_expect_leq(r.err[g], r.tol[g], "%s backward %s: error %g, naive %g", path, names[g],
                  r.err[g], r.naive_err[g]);
  if (v->sinks)
    cr_expect_leq(r.err_sinks, r.tol_sinks, "%s backward d_sinks: error %g, naive %g", path,
                  r.err_sinks, r.naive_err_sinks);
  clattn_context_destroy(ctx);
}

/* Every path that computes the case, forward (O and LSE) and backward. */
static void check_case(const vcase *v) {
  /* Half: forward_mma_half too, its mma.sync emulated (ranked last so, the plans keep theirs). */
  if (v->dtype != CLATTN_F32 || v->mma) setenv("CLATTN_MMA_EMULATE", "1", 1);
  check_spec sp = spec_of(v, CLATTN_ALGO_AUTO);
  test_forward_shape_spec(&sp, 1, NULL);
  if (v->dtype != CLATTN_F32) {
    clattn_config mma = {.kernel = "forward_mma_half",
                         .block_q = 32,
                         .block_kv = 16,
                         .threads_per_row = 1,
                         .stage_kv = 1,
                         .rows_per_item = 1};
    test_forward_shape_spec(&sp, 1, &mma);
  } else {
    clattn_config rows = {.kernel = "forward_rows",
                          .block_q = 16,
                          .block_kv = 16,
                          .threads_per_row = 2,
                          .stage_kv = 1,
                          .rows_per_item = 1};
    test_forward_shape_spec(&sp, 1, &rows);
    clattn_config mma = {.kernel = "forward_mma",
                         .block_q = 32,
                         .block_kv = 16,
                         .threads_per_row = 1,
                         .stage_kv = 1,
                         .rows_per_item = 1,
                         .pad = 1};
    if (v->mma) test_forward_shape_spec(&sp, 1, &mma);
  }
  check_spec std = spec_of(v, CLATTN_ALGO_STANDARD);
  test_forward_shape_spec(&std, 1, NULL);
  if (v->forward_only) return;
  backward_on(v, CLATTN_ALGO_AUTO, NULL);
  backward_on(v, CLATTN_ALGO_STANDARD, NULL);
  if (v->dtype != CLATTN_F32 || v->mma) {
    clattn_config bmma = {.block_q = 32, .block_kv = 32};
    strcpy(bmma.kernel, v->dtype == CLATTN_F32 ? "backward_mma" : "backward_mma_half");
    backward_on(v, CLATTN_ALGO_AUTO, &bmma);
  }
}

#define F32 CLATTN_F32
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16
#define VCASE(name, ...)                                                                           \
  Test(variants, name) {                                                                           \
    vcase v = {__VA_ARGS__};                                                                       \
    check_case(&v);                                                                                \
  }

/*    name                          dtype b hq hkv  nq  nkv   d  dv flags left right cap layout off
 */
/* The window alone, both sides bounded, one side unbounded, the diagonal alone. */
VCASE(window_both_sides, F32, 2, 2, 0, 77, 130, 24, 0, W, 7, 3, 0.0f, BSHD, 0, 0, 1)
VCASE(window_left_only_q_longer, F32, 1, 3, 0, 131, 60, 17, 0, W, 20, -1, 0.0f, BHSD, 0)
VCASE(window_right_only_gqa, F32, 1, 4, 2, 45, 45, 32, 0, W, -1, 5, 0.0f, BSHD, 5)
VCASE(window_diagonal_and_one_right_odd, F32, 2, 1, 0, 33, 50, 59, 0, W, 0, 1, 0.0f, BSHD, 0)
/* The diagonal alone, forward only: every row's P is exactly 1, so the naive backward's error is 0
 * and the rule's bound is its 1e-6 floor, while the fused backward recomputes P = exp(s - LSE) from
 * the stored LSE, a few ulps from 1 (the gradients are right to 1.9e-6 at d = 59). */
VCASE(window_diagonal_only_odd, F32, 2, 1, 0, 33, 50, 59, 0, W, 0, 0, 0.0f, BSHD, 0, 1)
/* Causal with a window (Mistral, Gemma): rows past the diagonal's start see nothing when
 * nq > nkv, and whole key blocks are skipped. */
VCASE(causal_window, F32, 1, 2, 0, 200, 200, 64, 0, C | W, 31, 0, 0.0f, BSHD, 0)
VCASE(causal_window_q_longer_gqa_dv, F32, 1, 4, 1, 90, 61, 40, 24, C | W, 9, -1, 0.0f, BHSD, 3)
/* Top-left causal (PyTorch SDPA's is_causal), alone and with a window. */
VCASE(causal_top_left_q_shorter, F32, 2, 2, 0, 41, 97, 32, 0, TL, 0, 0, 0.0f, BSHD, 0)
VCASE(causal_top_left_q_longer_bhsd, F32, 1, 3, 0, 97, 41, 16, 0, TL, 0, 0, 0.0f, BHSD, 0)
VCASE(causal_top_left_window, F32, 1, 2, 2, 70, 70, 48, 0, TL | W, 12, 0, 0.0f, BSHD, 0)
/* Softcap alone (Gemma 2's 50, and a small cap that bends most scores), and with causal. */
VCASE(softcap_50, F32, 1, 2, 0, 65, 129, 64, 0, 0, 0, 0, 50.0f, BSHD, 0)
VCASE(softcap_small_gqa, F32, 2, 4, 2, 37, 53, 24, 0, 0, 0, 0, 0.7f, BHSD, 0)
VCASE(causal_softcap, F32, 1, 2, 0, 100, 120, 128, 0, C, 0, 0, 2.0f, BSHD, 7)
/* Everything at once, and a decode row over a long cache whose keys the planner splits where one
 * work-group would leave compute units idle (2 ranges on a 2-core CPU: the first holds no key of
 * the window). */
VCASE(causal_window_softcap, F32, 1, 2, 1, 64, 150, 32, 0, C | W, 40, 0, 5.0f, BSHD, 0, 0, 1)
VCASE(decode_window, F32, 1, 1, 0, 1, 3000, 64, 0, C | W, 100, 0, 0.0f, BSHD, 0)

/* Half storage: each dtype on two shapes, every variant among them. */
VCASE(f16_causal_window_softcap, F16, 1, 2, 0, 77, 130, 64, 0, C | W, 25, 0, 30.0f, BSHD, 0)
VCASE(f16_window_top_left_gqa, F16, 1, 4, 2, 60, 45, 32, 0, TL | W, 10, 0, 0.0f, BHSD, 0)
VCASE(bf16_window_softcap, BF16, 1, 2, 0, 50, 90, 40, 0, W, 12, 6, 1.5f, BSHD, 0)
VCASE(bf16_causal_top_left, BF16, 2, 2, 1, 39, 39, 64, 0, TL, 0, 0, 0.0f, BSHD, 3)
/* Windows wide enough for whole tiles inside them (the tensor-core kernels mask those not:
 * forward_mma_half's warps of 16 rows, 16-key tiles; the backward's 32-row and 32-key blocks). */
VCASE(f16_wide_window_inner_tiles, F16, 1, 2, 0, 130, 150, 32, 0, W, 70, 30, 0.0f, BSHD, 0)
VCASE(bf16_causal_wide_window_gqa, BF16, 1, 4, 2, 100, 100, 32, 0, C | W, 60, 0, 0.0f, BHSD, 0)

/* ALiBi (BLOOM's slopes; per batch entry and head with 2) alone, with causal (BLOOM, MPT), with
 * nq > nkv, and with everything else (the tensor-core families, emulated, run ALiBi, the sinks
 * and seqlens_kv together in seqlens_kv_alibi_sinks). */
/*    name                       dtype b hq hkv nq nkv  d dv flags left right cap layout off fo mma
 *    alibi sinks */
VCASE(alibi, F32, 2, 3, 0, 47, 61, 32, 0, 0, 0, 0, 0.0f, BSHD, 0, 0, 0, 1, 0)
VCASE(alibi_causal_gqa_dv, F32, 1, 4, 2, 70, 70, 40, 24, C, 0, 0, 0.0f, BHSD, 0, 0, 0, 1, 0)
VCASE(alibi_per_batch_q_longer, F32, 3, 2, 0, 55, 31, 17, 0, 0, 0, 0, 0.0f, BSHD, 5, 0, 0, 2, 0)
/* Sinks (gpt-oss; head 2's is -inf, no sink) alone, with a causal window, on rows that see no
 * key (O = 0, LSE = the sink), and in a decode row whose keys are split (the sink joins the first
 * range only); then with ALiBi and the top-left mask. */
VCASE(sinks, F32, 2, 3, 0, 33, 75, 24, 0, 0, 0, 0, 0.0f, BSHD, 0, 0, 0, 0, 1)
VCASE(sinks_causal_window_gqa, F32, 1, 4, 2, 90, 90, 64, 0, C | W, 16, 0, 0.0f, BHSD, 0, 0, 0, 0, 1)
VCASE(sinks_rows_without_keys, F32, 1, 3, 0, 60, 30, 16, 0, C, 0, 0, 0.0f, BSHD, 3, 0, 0, 0, 1)
VCASE(alibi_causal_window_softcap, F32, 1, 2, 1, 64, 100, 32, 0, C | W, 30, 0, 5.0f, BSHD, 0, 0, 0,
      1, 0)
VCASE(alibi_sinks_top_left, F32, 2, 2, 1, 37, 53, 24, 0, TL, 0, 0, 0.0f, BSHD, 0, 0, 0, 2, 1)
VCASE(sinks_decode_split, F32, 1, 1, 0, 1, 3000, 64, 0, 0, 0, 0, 0.0f, BSHD, 0, 0, 0, 1, 1)
/* Half storage: each dtype on two shapes per variant (seqlens_kv's below). */
VCASE(f16_alibi_sinks_causal, F16, 1, 2, 0, 45, 70, 64, 0, C, 0, 0, 0.0f, BSHD, 0, 0, 0, 1, 1)
VCASE(bf16_alibi_per_batch_sinks_causal, BF16, 2, 2, 0, 41, 41, 48, 0, C, 0, 0, 0.0f, BSHD, 0, 0, 0,
      2, 1)
/* Without a mask in half storage: keys on both sides of every row's diagonal, whole tiles of them
 * on either side of a warp's rows (a bias linear in the key there, of opposite signs). */
VCASE(f16_alibi_both_sides, F16, 1, 2, 0, 70, 200, 32, 0, 0, 0, 0, 0.0f, BSHD, 0, 0, 0, 1, 0)

/* A padded batch (seqlens_kv; batches of 5 hold every kind of entry: full, 2/3 + 1, empty, and
 * two out of range, which see no key) alone, with GQA (a KV cache's decode and prefill), causal
 * (aligned to each entry's own length), a top-left window, and with ALiBi and sinks on the
 * tensor-core families (emulated); fp16 and bf16 on two shapes each. */
/*    name                       dtype b hq hkv nq nkv  d dv flags left right cap layout off fo mma
 *    alibi sinks kvlens */
VCASE(seqlens_kv, F32, 5, 2, 0, 29, 61, 32, 0, 0, 0, 0, 0.0f, BSHD, 0, 0, 0, 0, 0, 1)
VCASE(seqlens_kv_gqa_decode, F32, 5, 4, 1, 1, 200, 64, 0, C, 0, 0, 0.0f, BSHD, 0, 0, 0, 0, 0, 1)
VCASE(seqlens_kv_gqa_causal, F32, 2, 6, 2, 45, 90, 40, 24, C, 0, 0, 0.0f, BHSD, 3, 0, 0, 0, 0, 1)
VCASE(seqlens_kv_top_left_window, F32, 5, 1, 0, 40, 33, 17, 0, TL | W, 9, 0, 0.0f, BSHD, 0, 0, 0, 0,
      0, 1)
VCASE(seqlens_kv_softcap_q_longer, F32, 3, 2, 0, 70, 50, 24, 0, C, 0, 0, 4.0f, BSHD, 0, 0, 0, 0, 0,
      1)
VCASE(seqlens_kv_alibi_sinks, F32, 5, 2, 1, 33, 47, 32, 0, C | W, 12, 0, 0.0f, BSHD, 0, 0, 1, 1, 1,
      1)
VCASE(f16_seqlens_kv_alibi_sinks_window, F16, 5, 2, 1, 30, 50, 32, 0, W, 10, 5, 0.0f, BHSD, 0, 0, 0,
      2, 1, 1)
VCASE(bf16_seqlens_kv_sinks_softcap, BF16, 5, 3, 0, 24, 44, 40, 0, 0, 0, 0, 20.0f, BSHD, 0, 0, 0, 0,
      1, 1)
VCASE(bf16_seqlens_kv_alibi_gqa, BF16, 2, 4, 1, 30, 50, 32, 0, C, 0, 0, 0.0f, BSHD, 0, 0, 0, 1, 0,
      1)
