/* The tensor-core forward in half storage (forward_mma_half), forced by an override on shapes of
 * every kind the shape list has, with mma.sync m16n8k16 emulated (CLATTN_MMA_EMULATE) where the
 * device has no tensor cores: fp16 on most, bf16 on a few. The bar is test_half.c's: the double
 * reference of the same half inputs against the naive same-precision implementation, + 1e-4;
 * outputs start NaN. Emulated kernels compile slowly on PoCL (seconds each), so the list is
 * short and each shape takes one config; together the configs cover one to eight warps, key
 * tiles of 16 to 128 and both paddings. */
#include "common.h"

/* Before Criterion forks its tests, so that every context sees it. */
__attribute__((constructor)) static void emulate_mma(void) {
  setenv("CLATTN_MMA_EMULATE", "1", 1);
}

static void run_tiles(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv,
                      size_t d, size_t dv, unsigned flags, int bhsd, size_t offset, int lse,
                      unsigned bq, unsigned bkv, unsigned pad, unsigned stage, unsigned rm) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, t, 0.0f, flags, CLATTN_ALGO_FUSED};
  clattn_config c = {.kernel = "forward_mma_half", .threads_per_row = 1, .rows_per_item = rm};
  c.block_q = bq, c.block_kv = bkv, c.stage_kv = stage, c.pad = pad;
  test_forward_shape(&p, bhsd, offset, lse, &c);
}

static void run_staged(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv,
                       size_t d, size_t dv, unsigned flags, int bhsd, size_t offset, int lse,
                       unsigned bq, unsigned bkv, unsigned pad, unsigned stage) {
  run_tiles(t, b, hq, hkv, nq, nkv, d, dv, flags, bhsd, offset, lse, bq, bkv, pad, stage, 1);
}

static void run(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d,
                size_t dv, unsigned flags, int bhsd, size_t offset, int lse, unsigned bq,
                unsigned bkv, unsigned pad) {
  run_staged(t, b, hq, hkv, nq, nkv, d, dv, flags, bhsd, offset, lse, bq, bkv, pad, 1);
}

enum { BSHD = 0, BHSD = 1, NOLSE = 0, LSE = 1 };
#define C CLATTN_CAUSAL
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16

/*                                              b  hq hkv   nq   nkv    d   dv flags layout off lse
 *                                              BQ BKV pad */
Test(forward_mma_half, f16_d1_len1) {
  run(F16, 1, 1, 0, 1, 1, 1, 0, 0, BSHD, 0, LSE, 16, 16, 1);
}
Test(forward_mma_half, f16_d59_len17) {
  run(F16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, NOLSE, 32, 32, 0);
}
Test(forward_mma_half, f16_d111_113x203_bhsd) {
  run(F16, 1, 2, 0, 113, 203, 111, 0, 0, BHSD, 0, LSE, 64, 64, 1);
}
Test(forward_mma_half, f16_d128_causal_q_shorter) {
  run(F16, 1, 2, 0, 113, 203, 128, 0, C, BSHD, 0, LSE, 64, 32, 1);
}
Test(forward_mma_half, f16_causal_q_longer_rows_without_keys) {
  run(F16, 1, 2, 0, 203, 113, 64, 0, C, BSHD, 0, LSE, 128, 16, 1);
}
Test(forward_mma_half, f16_gqa_dv_larger) {
  run(F16, 2, 4, 2, 45, 61, 32, 100, 0, BSHD, 0, LSE, 32, 128, 1);
}
Test(forward_mma_half, f16_dv_smaller_causal_bhsd) {
  run(F16, 1, 2, 0, 61, 45, 100, 32, C, BHSD, 0, NOLSE, 16, 32, 0);
}
Test(forward_mma_half, f16_offset_odd) {
  run(F16, 2, 3, 0, 33, 41, 40, 0, 0, BSHD, 37, LSE, 64, 16, 0);
}
Test(forward_mma_half, f16_empty_kv) {
  run(F16, 2, 2, 0, 7, 0, 32, 0, 0, BSHD, 0, LSE, 64, 64, 1);
}
Test(forward_mma_half, bf16_d59_len17) {
  run(BF16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, LSE, 64, 64, 1);
}
Test(forward_mma_half, bf16_causal_gqa_offset_bhsd) {
  run(BF16, 1, 2, 2, 31, 29, 17, 0, C, BHSD, 5, LSE, 32, 16, 1);
}
Test(forward_mma_half, bf16_d256_causal_mqa) {
  run(BF16, 1, 2, 1, 80, 70, 256, 0, C, BSHD, 3, LSE, 32, 32, 1);
}

/* Stage 2 (two stages of cp.async copies, ldmatrix fragments; emulated: plain copies and
 * reads): tiles in flight across a partial last one, GQA with V's own head dim, rows that see
 * no key, and views not 16-byte aligned (offset 5: the copies go through registers). */
Test(forward_mma_half, stage2_f16_d128_causal_q_shorter) {
  run_staged(F16, 1, 2, 0, 113, 203, 128, 0, C, BSHD, 0, LSE, 64, 32, 1, 2);
}
Test(forward_mma_half, stage2_f16_gqa_dv_smaller_bhsd_offset) {
  run_staged(F16, 2, 4, 2, 45, 161, 64, 32, 0, BHSD, 8, LSE, 32, 64, 1, 2);
}
Test(forward_mma_half, stage2_bf16_causal_q_longer_unaligned) {
  run_staged(BF16, 1, 2, 0, 70, 41, 32, 0, C, BSHD, 5, LSE, 16, 16, 1, 2);
}

/* Two m16 tiles a warp (rows_per_item 2: one B fragment read feeds both): a second tile past
 * the last row, a partial last key tile, causal tiles masked only on the diagonal, unaligned
 * views, in both stagings; and with a window and a softcap (every tile masked). */
Test(forward_mma_half, rm2_stage2_f16_causal_q_shorter) {
  run_tiles(F16, 1, 2, 0, 113, 203, 64, 0, C, BSHD, 0, LSE, 64, 32, 1, 2, 2);
}
Test(forward_mma_half, rm2_stage2_bf16_gqa_unaligned_q_longer) {
  run_tiles(BF16, 2, 4, 2, 70, 41, 32, 48, C, BHSD, 5, LSE, 32, 16, 1, 2, 2);
}
Test(forward_mma_half, rm2_stage1_f16_d59_len17) {
  run_tiles(F16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, LSE, 32, 32, 0, 1, 2);
}
static void run_window_softcap(unsigned bq, unsigned bkv, unsigned stage) {
  clattn_problem p = {1, 2, 0, 77, 93, 64, 0, F16, 0.0f, CLATTN_WINDOW, CLATTN_ALGO_FUSED};
  p.window_left = 20, p.window_right = 5, p.softcap = 3.0f;
  clattn_config c = {.kernel = "forward_mma_half", .threads_per_row = 1, .rows_per_item = 2};
  c.block_q = bq, c.block_kv = bkv, c.stage_kv = stage, c.pad = 1;
  test_forward_shape(&p, BSHD, 0, LSE, &c);
}
Test(forward_mma_half, rm2_stage2_f16_window_softcap) {
  run_window_softcap(64, 16, 2);
}
/* Config bad (at head dim d) is refused with a message naming `word`; config good is taken. */
static void expect_refused(size_t d, const clattn_config *bad, const char *word,
                           const clattn_config *good) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {1, 1, 0, 64, 64, d, 0, F16, 0.0f, 0, CLATTN_ALGO_FUSED};
  cr_assert_eq(clattn_config_check(ctx, &p, bad), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), word), "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_config_check(ctx, &p, good), CLATTN_OK, "%s", clattn_last_error(ctx));
  clattn_context_destroy(ctx);
}
Test(forward_mma_half, rm2_bad_block_q_rejected) {
  clattn_config c = {.kernel = "forward_mma_half", .threads_per_row = 1, .rows_per_item = 2};
  c.block_q = 16, c.block_kv = 16, c.stage_kv = 1, c.pad = 1;
  clattn_config ok = c;
  ok.block_q = 32;
  expect_refused(64, &c, "rows_per_item", &ok);
}

/* A negative scale (legal: finite is the rule): the maxima's -inf substitution and the masks
 * hold with S's signs reversed; with causal masking (-inf scores) in two stages, and in one. */
static void run_scaled(clattn_dtype t, float scale, unsigned flags, unsigned stage) {
  clattn_problem p = {1, 2, 0, 45, 77, 64, 0, t, scale, flags, CLATTN_ALGO_FUSED};
  clattn_config c = {.kernel = "forward_mma_half", .threads_per_row = 1, .rows_per_item = 1};
  c.block_q = 32, c.block_kv = 32, c.stage_kv = stage, c.pad = 1;
  test_forward_shape(&p, BSHD, 0, LSE, &c);
}
Test(forward_mma_half, negative_scale_f16_causal_stage2) {
  run_scaled(F16, -0.2f, C, 2);
}
Test(forward_mma_half, negative_scale_bf16_stage1) {
  run_scaled(BF16, -0.3f, 0, 1);
}

/* The lazy rescale (LAZY, 8 by default): with scale 3 a row's maximum rises past 2^8 on some
 * later tiles of 16 keys and not on others, so a warp both rescales and keeps stale maxima (P
 * up to 2^8) within one row; causal with more queries than keys, so that the first 53 rows see
 * no key (their maxima stay -inf while their warps keep others'), in the planned staging. */
Test(forward_mma_half, lazy_rescale_wide_scores_stage3) {
  clattn_problem p = {1, 2, 0, 203, 150, 64, 0, F16, 3.0f, C, CLATTN_ALGO_FUSED};
  clattn_config c = {.kernel = "forward_mma_half", .threads_per_row = 1, .rows_per_item = 2};
  c.block_q = 64, c.block_kv = 16, c.stage_kv = 3, c.pad = 1;
  test_forward_shape(&p, BSHD, 0, LSE, &c);
}

/* Stages 3 and 4 (one stage each of K and V, V copied during S and K during P V; 4: Q in local
 * memory, its A fragments read by ldmatrix): a partial last tile of 48 keys, causal, GQA with V's
 * own head dim, a window with a softcap (unaligned views, every copy, Q's included, through
 * registers: swizzled_stage4 below). */
Test(forward_mma_half, stage3_f16_d128_causal_q_shorter_bkv48) {
  run_tiles(F16, 1, 2, 0, 113, 203, 128, 0, C, BSHD, 0, LSE, 64, 48, 1, 3, 2);
}
Test(forward_mma_half, stage4_f16_gqa_dv_smaller_bhsd_bkv48) {
  run_tiles(F16, 2, 4, 2, 45, 161, 64, 32, 0, BHSD, 8, LSE, 64, 48, 1, 4, 2);
}
Test(forward_mma_half, stage4_f16_window_softcap) {
  run_window_softcap(32, 32, 4);
}

/* Unpadded rows in stages 2-4 are swizzled (16-byte chunks XORed with the row, head dims multiples
 * of 64): two stages at d = 128 causal with a partial tile, Q in local memory at d = 64 with GQA
 * and unaligned views; a head dim that is not a multiple of 64 is refused by name. */
Test(forward_mma_half, swizzled_stage2_f16_d128_causal) {
  run_tiles(F16, 1, 2, 0, 113, 203, 128, 0, C, BSHD, 0, LSE, 64, 32, 0, 2, 2);
}
Test(forward_mma_half, swizzled_stage4_bf16_gqa_unaligned) {
  run_tiles(BF16, 2, 4, 2, 70, 141, 64, 0, C, BHSD, 5, LSE, 64, 64, 0, 4, 2);
}
Test(forward_mma_half, swizzled_head_dim_not_of_64_rejected) {
  clattn_config c = {.kernel = "forward_mma_half", .threads_per_row = 1, .rows_per_item = 1};
  c.block_q = 64, c.block_kv = 64, c.stage_kv = 4, c.pad = 0;
  clattn_config ok = c;
  ok.pad = 1;
  expect_refused(96, &c, "swizzled", &ok);
}
