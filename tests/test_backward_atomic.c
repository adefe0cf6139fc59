/* The backward with atomic dQ (CLATTN_NONDETERMINISTIC: backward_mma_half's bwd_dkdv adds dS K
 * into an fp32 accumulator, bwd_dq rounds it into dq), emulated on devices without tensor cores,
 * against the double reference under DESIGN.md's gradient rule (3x the same-precision naive
 * error + 1e-4) through tools/check_bwd.c and tools/check_varlen.c, whose outputs start NaN.
 * Curated shapes, each a case the accumulator could get wrong: odd head dims and lengths
 * (partial key blocks, columns past D in the last 16-column unit), dv != d, GQA (a K/V head's
 * work-group adds into several query heads), causal rows that see no key and no keys at all (dq
 * is the accumulator's zeros), a view at an offset, more dQ units than warps (BKV 16) and fewer,
 * a window with a softcap, a padded batch (seqlens_kv), packed sequences (CLATTN_VARLEN, with an
 * empty one), and the sinks, which keep the two-kernel backward. fp16 and bf16. */
#include "common.h"

#include <stdlib.h>

#define C CLATTN_CAUSAL
#define W CLATTN_WINDOW
#define ND CLATTN_NONDETERMINISTIC

/* Before Criterion forks its tests, so that every context sees it. */
__attribute__((constructor)) static void emulate_mma(void) {
  setenv("CLATTN_MMA_EMULATE", "1", 1);
}

typedef struct acase {
  clattn_dtype dtype;
  size_t b, hq, hkv, nq, nkv, d, dv;
  unsigned flags;
  int bhsd;
  size_t offset;
  unsigned bq, bkv; /* backward_mma_half's blocks, forced */
  int64_t left;     /* with W: the window's left side (its right: 0) */
  float softcap;
  int kvlens, varlen, sinks;
} acase;

static void check_case(const acase *v) {
  clattn_context *ctx = test_context(NULL);
  check_spec sp = {{v->b, v->hq, v->hkv, v->nq, v->nkv, v->d, v->dv, v->dtype, 0.0f,
                    v->flags | ND | (v->varlen ? CLATTN_VARLEN : 0u)},
                   v->bhsd,
                   v->offset};
  sp.problem.window_left = v->left, sp.problem.softcap = v->softcap;
  sp.seqlens_kv = v->kvlens, sp.sinks = v->sinks;
  sp.seed = (unsigned)(v->nq * 11 + v->d);
  clattn_config cfg = {.kernel = "backward_mma_half", .block_q = v->bq, .block_kv = v->bkv};
  cr_assert_eq(clattn_override_config(ctx, &sp.problem, &cfg), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  double err[3], tol[3], err_sinks = 0, tol_sinks = 0;
  if (v->varlen) {
    check_varlen_result r;
    cr_assert_eq(check_varlen_run(ctx, &sp, 1, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
    for (int g = 0; g < 3; g++) err[g] = r.err[g], tol[g] = r.tol[g];
    err_sinks = r.err_sinks, tol_sinks = r.tol_sinks;
  } else {
    check_bwd_result r;
    cr_assert_eq(check_backward_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
    for (int g = 0; g < 3; g++) err[g] = r.err[g], tol[g] = r.tol[g];
    err_sinks = r.err_sinks, tol_sinks = r.tol_sinks;
  }
  static const char *const names[3] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; g++)
    cr_expect_leq(err[g], tol[g], "%s: error %g, tolerance %g", names[g], err[g], tol[g]);
  if (v->sinks)
    cr_expect_leq(err_sinks, tol_sinks, "d_sinks: error %g, tolerance %g", err_sinks, tol_sinks);
  clattn_context_destroy(ctx);
}

#define F16 CLATTN_F16
#define BF16 CLATTN_BF16
/*                                 b hq hkv  nq  nkv    d  dv flags bhsd off BQ BKV */
Test(backward_atomic, f16_odd_dim_gqa_partial_blocks) {
  check_case(&(acase){F16, 2, 4, 2, 45, 71, 59, 0, 0, 0, 0, 32, 32});
}
Test(backward_atomic, bf16_dv_larger_causal_bhsd_offset) {
  check_case(&(acase){BF16, 1, 2, 1, 61, 45, 32, 100, C, 1, 5, 32, 32});
}
Test(backward_atomic, f16_causal_rows_without_keys_units_past_warps) {
  /* BKV 16: one warp, a block's dQ in several units */
  check_case(&(acase){F16, 1, 3, 0, 50, 10, 40, 0, C, 0, 0, 16, 16});
}
Test(backward_atomic, f16_no_keys_zero_dq) {
  check_case(&(acase){F16, 2, 2, 0, 7, 0, 32, 0, 0, 0, 0, 32, 32});
}
Test(backward_atomic, bf16_d128_window_softcap) {
  check_case(&(acase){BF16, 1, 2, 0, 97, 130, 128, 0, C | W, 0, 0, 16, 64, 20, 30.0f});
}
Test(backward_atomic, f16_padded_batch_gqa) {
  check_case(&(acase){F16, 5, 4, 2, 33, 47, 64, 0, C, 0, 0, 32, 32, .kvlens = 1});
}
Test(backward_atomic, bf16_varlen_causal) {
  check_case(&(acase){BF16, 4, 2, 1, 37, 53, 48, 0, C, 0, 0, 32, 32, .varlen = 1});
}
Test(backward_atomic, f16_sinks_keep_two_kernels) {
  check_case(&(acase){F16, 1, 2, 0, 29, 41, 32, 0, C, 0, 0, 32, 32, .sinks = 1});
}
