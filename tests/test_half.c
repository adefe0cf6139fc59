/* Half storage (CLATTN_F16, CLATTN_BF16) on the portable fused forward kernels: the rule of
 * DESIGN.md against the double reference of the same (rounded) inputs, relative to the naive
 * same-precision implementation (S, P and O rounded to the type, fp32 sums), + 1e-4. Outputs
 * start NaN in their own type. Not a cross product: fp16 on shapes of every kind the list has,
 * bf16 on a few, each through the device's plan (forward_tiles on PoCL) and forward_rows forced;
 * and each tensor-core family refuses the storage it does not compute, by name. The standard path
 * in half and the tensor-core kernels have their own suites (test_standard_half.c,
 * test_forward_mma_half.c; test_backward.c as backward_mma_half). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d,
                size_t dv, unsigned flags, int bhsd, size_t offset, int lse,
                const clattn_config *cfg) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, t, 0.0f, flags, CLATTN_ALGO_FUSED};
  test_forward_shape(&p, bhsd, offset, lse, cfg);
}

enum { BSHD = 0, BHSD = 1, NOLSE = 0, LSE = 1 };
#define C CLATTN_CAUSAL
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16

/* forward_rows with K/V read from global memory (its other staging path) and vector loads. */
static const clattn_config rows = {"forward_rows", 32, 16, 2, 0, 1, 1, 2};

/*                                          b  hq hkv   nq   nkv    d   dv flags layout off lse */
Test(half, f16_d1_len1) {
  run(F16, 1, 1, 0, 1, 1, 1, 0, 0, BSHD, 0, LSE, NULL);
}
Test(half, f16_d59_len17) {
  run(F16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, NOLSE, NULL);
}
Test(half, f16_d111_113x203_bhsd) {
  run(F16, 1, 2, 0, 113, 203, 111, 0, 0, BHSD, 0, LSE, NULL);
}
Test(half, f16_d256_80x64) {
  run(F16, 1, 2, 0, 80, 64, 256, 0, 0, BSHD, 0, NOLSE, NULL);
}
Test(half, f16_d128_1023x1024_causal_bhsd) {
  run(F16, 1, 1, 0, 1023, 1024, 128, 0, C, BHSD, 0, LSE, NULL);
}
Test(half, f16_causal_q_longer) {
  run(F16, 1, 2, 0, 203, 113, 64, 0, C, BSHD, 0, LSE, NULL);
}
Test(half, f16_empty_kv) {
  run(F16, 2, 2, 0, 7, 0, 32, 0, 0, BSHD, 0, LSE, NULL);
}
Test(half, f16_dv_smaller_causal_bhsd) {
  run(F16, 1, 2, 0, 61, 45, 100, 32, C, BHSD, 0, NOLSE, NULL);
}
Test(half, f16_gqa) {
  run(F16, 2, 8, 2, 129, 129, 64, 0, 0, BSHD, 0, LSE, NULL);
}
Test(half, f16_offset_odd) {
  run(F16, 2, 3, 0, 33, 41, 40, 0, 0, BSHD, 37, LSE, NULL);
}
Test(half, f16_decode_row) {
  run(F16, 2, 4, 0, 1, 1000, 128, 0, C, BSHD, 0, LSE, NULL);
}
Test(half, f16_rows) {
  run(F16, 1, 4, 1, 77, 77, 32, 0, C, BHSD, 3, LSE, &rows);
}
Test(half, bf16_d59_len17) {
  run(BF16, 2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, LSE, NULL);
}
Test(half, bf16_causal_gqa_offset) {
  run(BF16, 1, 2, 2, 31, 29, 17, 0, C, BHSD, 5, LSE, NULL);
}
Test(half, bf16_d256_causal_gqa_bhsd) {
  run(BF16, 1, 2, 1, 130, 130, 256, 0, C, BHSD, 3, LSE, NULL);
}
Test(half, bf16_rows) {
  run(BF16, 1, 2, 0, 113, 203, 64, 0, C, BSHD, 0, LSE, &rows);
}

/* Each tensor-core family computes one kind of storage: the fp32 ones (3xTF32) refuse half and
 * the half ones (m16n8k16) refuse fp32, by name; the context stays usable. */
Test(half, tensor_core_families_by_storage) {
  setenv("CLATTN_MMA_EMULATE", "1", 1); /* tensor cores, emulated: read at context creation */
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {1, 2, 0, 16, 16, 64, 0, CLATTN_F16, 0.0f, 0, CLATTN_ALGO_FUSED};
  /* The tensor-core backward: backward_mma stays fp32, backward_mma_half computes half storage
   * (suite backward_mma_half). */
  clattn_config bmma = {.kernel = "backward_mma", .block_q = 32, .block_kv = 32};
  cr_assert_eq(clattn_override_config(ctx, &p, &bmma), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_F16 storage"), "%s", clattn_last_error(ctx));
  clattn_config bmma_half = {.kernel = "backward_mma_half", .block_q = 32, .block_kv = 32};
  cr_assert_eq(clattn_override_config(ctx, &p, &bmma_half), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  p.dtype = CLATTN_F32;
  cr_assert_eq(clattn_override_config(ctx, &p, &bmma_half), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_F32 storage"), "%s", clattn_last_error(ctx));
  p.dtype = CLATTN_F16;
  /* The tensor-core forward: forward_mma stays fp32 (3xTF32), forward_mma_half computes half
   * storage (suite forward_mma_half). */
  clattn_config mma = test_mma_config(64, 32);
  cr_assert_eq(clattn_override_config(ctx, &p, &mma), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_F16 storage"), "%s", clattn_last_error(ctx));
  clattn_config mma_half = mma;
  snprintf(mma_half.kernel, sizeof mma_half.kernel, "forward_mma_half");
  cr_assert_eq(clattn_override_config(ctx, &p, &mma_half), CLATTN_OK, "%s", clattn_last_error(ctx));
  p.dtype = CLATTN_BF16;
  cr_assert_eq(clattn_override_config(ctx, &p, &mma_half), CLATTN_OK, "%s", clattn_last_error(ctx));
  p.dtype = CLATTN_F32;
  cr_assert_eq(clattn_override_config(ctx, &p, &mma_half), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_F32 storage"), "%s", clattn_last_error(ctx));
  p.dtype = CLATTN_F16;
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}
