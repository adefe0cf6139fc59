/* The backward with atomic dQ (CLATTN_NONDETERMINISTIC: backward_mma_half's bwd_dkdv adds dS K
 * into an fp32 accumulator, bwd_dq rounds it into dq), emulated on devices without tensor cores,
 * against the double reference under DESIGN.md's gradient rule (3x the same-precision naive
 * error + 1e-4) through tools/check_bwd.c and tools/check_varlen.c, whose outputs start NaN.
 * Curated shapes, each a case the accumulator could get wrong: odd head dims and lengths
 * (partial key blocks, columns past D in the last 16-column unit), dv != d, GQA (a K/V head's
 * work-group adds into several query heads), causal rows that see no key and no keys at all (dq
 * is the accumulator's zeros), a view at an offset, more dQ units than warps (BKV 16) and fewer,
 * a window with a softcap, a padded batch (seqlens_kv) and packed sequences (CLATTN_VARLEN, with
 * an empty one). fp16 and bf16. With sinks the class keeps the two-kernel backward
 * (test_context.c's atomic_dq_defines_by_compute_capability). */
#include "common.h"
#include "ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* An override sized for the two-kernel backward, whose atomic bwd_dkdv (K and dS^T staged too)
 * does not fit the device's local memory (CLATTN_LOCAL_MEM, 8 KiB: 6 KiB for the two kernels'
 * one stage of 16 rows, 10 for the atomic one's): the call takes the two kernels rather than
 * failing, since CLATTN_NONDETERMINISTIC permits the atomic dQ and never requires it. */
Test(backward_atomic, override_too_big_takes_two_kernels) {
  setenv("CLATTN_LOCAL_MEM", "8192", 1);
  check_case(&(acase){F16, 1, 2, 0, 40, 50, 32, 0, C, 0, 0, 32, 32});
}

/* One stage of staged rows (NBUF 1: each block's copies issued and awaited at the top of its
 * trip, with the pending block's dQ between the two): an 11 KiB device (CLATTN_LOCAL_MEM) where
 * the atomic bwd_dkdv of 32 keys at d = 32 fits 16 rows in one stage (9.9 KiB) but not in two
 * (12.5). GQA and causal: the pending block crosses from one query head to the next. */
Test(backward_atomic, f16_one_stage_gqa_causal) {
  setenv("CLATTN_LOCAL_MEM", "11264", 1);
  clattn_context *ctx = test_context(NULL);
  clattn__class cls = {
      32, 32, 1, clattn__seqlen_bucket(70), CLATTN__BACKWARD, CLATTN_F16, CLATTN__VAR_ATOMIC, 0};
  clattn__config c = {32, 32, 1, 1, 0, (unsigned)clattn__family_find("backward_mma_half"), 1, 1};
  char opts[1024];
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_assert(strstr(opts, "-DSQ=16 -DSK=16 -DNBUF=1 -DDQ_ATOMIC=1"), "%s", opts);
  clattn_context_destroy(ctx);
  check_case(&(acase){F16, 1, 4, 2, 70, 70, 32, 0, C, 0, 0, 32, 32});
}

/* One key that every row sees, at an LSE of -64 (q = 2, k = -2, d = 16, scale 1): its dS is 0,
 * so dq must be exactly 0. The 15 keys of the block past it are staged as zeros, and their
 * P = exp(0 - LSE) is huge: dS = -P D rounds to infinity, which times K's zeros would be NaN in
 * dQ = dS K unless those keys' dS is left out. */
Test(backward_atomic, f16_padding_keys_with_infinite_ds_add_nothing) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {1, 1, 1, 16, 1, 16, 16, CLATTN_F16, 1.0f, ND};
  cl_mem q = test_buffer_of(ctx, CLATTN_F16, 256, 2.0f),
         k = test_buffer_of(ctx, CLATTN_F16, 16, -2.0f);
  cl_mem v = test_buffer_of(ctx, CLATTN_F16, 16, 1.0f),
         g = test_buffer_of(ctx, CLATTN_F16, 256, 1.0f);
  cl_mem o = test_buffer_of(ctx, CLATTN_F16, 256, NAN),
         dq = test_buffer_of(ctx, CLATTN_F16, 256, NAN);
  cl_mem dk = test_buffer_of(ctx, CLATTN_F16, 16, NAN),
         dv = test_buffer_of(ctx, CLATTN_F16, 16, NAN);
  cl_mem lse = test_buffer(ctx, 16, NAN);
  clattn_tensor tq = clattn_bhsd(q, 16, 1, 16), tk = clattn_bhsd(k, 1, 1, 16);
  clattn_tensor tv = clattn_bhsd(v, 1, 1, 16), tg = clattn_bhsd(g, 16, 1, 16);
  clattn_tensor to = clattn_bhsd(o, 16, 1, 16), tdq = clattn_bhsd(dq, 16, 1, 16);
  clattn_tensor tdk = clattn_bhsd(dk, 1, 1, 16), tdv = clattn_bhsd(dv, 1, 1, 16);
  clattn_config cfg = {.kernel = "backward_mma_half", .block_q = 16, .block_kv = 16};
  cr_assert_eq(clattn_override_config(ctx, &p, &cfg), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_forward(ctx, &p, &tq, &tk, &tv, &to, lse, 0, NULL, NULL), CLATTN_OK);
  cr_assert_eq(
      clattn_backward(ctx, &p, &tq, &tk, &tv, &to, &tg, lse, &tdq, &tdk, &tdv, 0, NULL, NULL),
      CLATTN_OK, "%s", clattn_last_error(ctx));
  float x[256], l[16];
  cl_command_queue cq = clattn_context_queue(ctx);
  cr_assert_eq(check_read(cq, dq, CLATTN_F16, x, 256, 0, NULL), CL_SUCCESS);
  cr_assert_eq(clEnqueueReadBuffer(cq, lse, CL_TRUE, 0, sizeof l, l, 0, NULL, NULL), CL_SUCCESS);
  cr_expect_float_eq(l[0], -64.0f, 1e-3f);
  for (int i = 0; i < 256; i++) cr_assert_eq(x[i], 0.0f, "dq[%d] = %g", i, x[i]);
  cl_mem all[] = {q, k, v, g, o, dq, dk, dv, lse};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) clReleaseMemObject(all[i]);
  clattn_context_destroy(ctx);
}

/* The tuner tunes the plain class of a CLATTN_NONDETERMINISTIC problem (its bench has no atomic
 * dQ accumulator: the atomic kernels would write past its row workspace): backward_mma_half's
 * candidates (the first, tensor cores ranked first) run and pass. */
static void count_mma(void *user, const clattn_tune_progress *p) {
  if (!strcmp(p->candidate.kernel, "backward_mma_half") && p->candidate_ms > 0) ++*(int *)user;
}

Test(backward_atomic, tune_takes_the_plain_class) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {1, 1, 1, 32, 32, 16, 16, CLATTN_F16, 0.0f, ND};
  int mma = 0;
  clattn_tune_options t = {.budget_seconds = 30,
                           .max_candidates = 1,
                           .dry_run = 1,
                           .progress = count_mma,
                           .user = &mma,
                           .backward = 1};
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &t, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_expect_gt(r.best_ms, 0.0);
  cr_expect_eq(mma, 1, "backward_mma_half's candidate did not run");
  clattn_context_destroy(ctx);
}
