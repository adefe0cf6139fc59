/* Split keys (flash-decoding): a few queries against many keys run as key ranges merged by
 * their LSE. Through the public API where the device has idle compute units, and forced through
 * the internal entry on shapes where ranges are empty for some rows or rows see no key. */
#include "common.h"
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(split, decode_is_split_and_exact) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = 1, p.seqlen_kv = 1000, p.head_dim = 64;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  unsigned units = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                  NULL);
  if (units >= 2) {
    cr_assert_geq(info.kv_splits, 2, "one work-group on %u compute units", units);
    cr_assert(strstr(info.reason, "keys split"), "%s", info.reason);
  }
  test_forward_shape(&p, 0, 0, 1, NULL);
  p.flags = CLATTN_CAUSAL, p.seqlen_q = 3, p.head_dim = 59;
  test_forward_shape(&p, 1, 7, 1, NULL);
  /* Queries enough for finer blocks, keys enough to split: the keys are split and the class's
   * query block is kept (finer blocks would read every K/V tile once per block). */
  clattn_plan_info whole;
  p.seqlen_q = 100, p.seqlen_kv = 4096, p.flags = 0, p.head_dim = 16;
  cr_assert_eq(clattn_explain(ctx, &p, &whole), CLATTN_OK);
  if (units >= 2 && whole.block_q >= 100) {
    cr_assert_geq(whole.kv_splits, 2, "%s", whole.reason);
    cr_assert_null(strstr(whole.reason, "instead of"), "%s", whole.reason);
  }
  /* Enough heads for the compute units: no split. */
  p.heads_q = 4 * (units ? units : 1);
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_eq(info.kv_splits, 1);
  clattn_context_destroy(ctx);
}

/* $CLATTN_SPLITS forces the count of key ranges (an experiment's knob, README), also where the
 * planner would not split, and the result stays exact; a bad value is ignored with a warning. */
Test(split, forced_count_through_the_environment) {
  setenv("CLATTN_SPLITS", "5", 1);
  clattn_context *ctx = test_context(NULL);
  unsigned units = 1;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                  NULL);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 4 * units, p.seqlen_q = 1, p.seqlen_kv = 1000, p.head_dim = 64;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  /* 5, unless whole key tiles a range make fewer (ops/split.c's rounding, redone here). */
  size_t bkv = info.block_kv, per = (1000 + 4) / 5;
  per = (per + bkv - 1) / bkv * bkv;
  cr_assert_eq(info.kv_splits, (1000 + per - 1) / per, "%u: %s", info.kv_splits, info.reason);
  cr_assert_gt(info.kv_splits, 1, "%s", info.reason);
  p.heads_q = 2;
  test_forward_shape(&p, 0, 0, 1, NULL);
  clattn_context_destroy(ctx);
  setenv("CLATTN_SPLITS", "129", 1);
  ctx = test_context(NULL);
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_neq(info.kv_splits, 129);
  const char *diag = clattn_context_diagnostics(ctx);
  cr_assert(diag && strstr(diag, "CLATTN_SPLITS=129"), "%s", diag ? diag : "(none)");
  clattn_context_destroy(ctx);
}

/* Uploads n host floats in storage t (half: rounded, and the host copy rounded with them, so the
 * references see the values the device does). */
static cl_mem upload(clattn_context *ctx, clattn_dtype t, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = ref_round(t, x[i]);
  void *bits = check_pack(t, x, n);
  cl_int err;
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_COPY_HOST_PTR,
                            n * check_elem_size(t), bits ? bits : x, &err);
  cr_assert_eq(err, CL_SUCCESS);
  free(bits);
  return m;
}

/* Packed [B][S][H][D] data in storage t, a forced split of key ranges one tile long, against the
 * references (half: the same-precision naive and its floor); cfg (optional) overrides the
 * kernel config. */
/* The variants' fields of forced_cfg's problems (a test sets them first; each test is its own
 * process). */
static clattn_problem variant;
/* Set: the call asks for no LSE (checked: O alone). */
static int no_lse;

static void forced_cfg(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv,
                       size_t d, size_t dv, unsigned flags, const clattn_config *cfg) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {0};
  p.batch = b, p.heads_q = hq, p.heads_kv = hkv, p.seqlen_q = nq, p.seqlen_kv = nkv;
  p.head_dim = d, p.head_dim_v = dv, p.flags = flags, p.dtype = t;
  p.window_left = variant.window_left, p.window_right = variant.window_right;
  p.softcap = variant.softcap;
  if (cfg)
    cr_assert_eq(clattn_override_config(ctx, &p, cfg), CLATTN_OK, "%s", clattn_last_error(ctx));
  clattn__shape s;
  cr_assert_eq(clattn__shape_from_problem(ctx, &p, &s), CLATTN_OK);
  const clattn__plan *plan;
  cr_assert_eq(clattn__plan_for_grid(ctx, &s, &plan), CLATTN_OK, "%s", clattn_last_error(ctx));
  if (cfg) cr_assert_eq(plan->cfg.kernel, (unsigned)clattn__family_find(cfg->kernel));
  unsigned per = plan->cfg.bkv, count = (unsigned)((nkv + per - 1) / per);
  size_t nqe = b * nq * hq * d, nke = b * nkv * s.heads_kv * d, nve = b * nkv * s.heads_kv * s.dv,
         noe = b * nq * hq * s.dv, rows = b * hq * nq;
  float *hq_ = malloc(nqe * 4), *hk = malloc(nke * 4), *hv = malloc(nve * 4);
  uint64_t rng = 12345;
  ref_fill_normal(hq_, nqe, &rng), ref_fill_normal(hk, nke, &rng), ref_fill_normal(hv, nve, &rng);
  cl_mem bq = upload(ctx, t, hq_, nqe), bk = upload(ctx, t, hk, nke), bv = upload(ctx, t, hv, nve);
  cl_mem bo = test_buffer_of(ctx, t, noe, NAN), bl = test_buffer(ctx, rows, NAN);
  clattn_tensor tq = clattn_bshd(bq, nq, hq, d), tk = clattn_bshd(bk, nkv, s.heads_kv, d),
                tv = clattn_bshd(bv, nkv, s.heads_kv, s.dv), to = clattn_bshd(bo, nq, hq, s.dv);
  cl_event done = NULL;
  cr_assert_eq(clattn__forward_split(ctx, &s, plan, count, per, &tq, &tk, &tv, &to,
                                     no_lse ? NULL : bl, 0, NULL, &done),
               CLATTN_OK, "%s", clattn_last_error(ctx));
  clWaitForEvents(1, &done);
  clReleaseEvent(done);
  float *got = malloc(noe * 4), *lse = malloc(rows * 4), *n32 = malloc(noe * 4),
        *l32 = malloc(rows * 4);
  double *ref = malloc(noe * 8), *lref = malloc(rows * 8);
  cl_command_queue queue = clattn_context_queue(ctx);
  cr_assert_eq(check_read(queue, bo, t, got, noe, 0, NULL), CL_SUCCESS);
  clEnqueueReadBuffer(queue, bl, CL_TRUE, 0, rows * 4, lse, 0, NULL, NULL);
  ref_view vq = {hq_, 0, tq.stride_batch, tq.stride_seq, tq.stride_head};
  ref_view vk = {hk, 0, tk.stride_batch, tk.stride_seq, tk.stride_head};
  ref_view vv = {hv, 0, tv.stride_batch, tv.stride_seq, tv.stride_head};
  ref_forward_f64(&p, vq, vk, vv, ref, lref);
  ref_forward_f32(&p, vq, vk, vv, n32, l32);
  double err_o = 0, naive_o = 0, err_l = 0, naive_l = 0;
  for (size_t bb = 0; bb < b; bb++)
    for (size_t h = 0; h < hq; h++)
      for (size_t i = 0; i < nq; i++) {
        size_t r = (bb * hq + h) * nq + i;
        for (size_t c = 0; c < s.dv; c++) {
          double x = got[((bb * nq + i) * hq + h) * s.dv + c];
          err_o = fmax(err_o, isfinite(x) ? fabs(x - ref[r * s.dv + c]) : INFINITY);
          naive_o = fmax(naive_o, fabs(n32[r * s.dv + c] - ref[r * s.dv + c]));
        }
        if (no_lse) {
          cr_assert(isnan(lse[r]), "row %zu: an LSE written to a call without one", r);
        } else if (isinf(lref[r])) {
          cr_assert(isinf(lse[r]) && lse[r] < 0, "row %zu sees no key: LSE %g", r, lse[r]);
        } else {
          err_l = fmax(err_l, isfinite(lse[r]) ? fabs(lse[r] - lref[r]) : INFINITY);
          naive_l = fmax(naive_l, fabs(l32[r] - lref[r]));
        }
      }
  double floor = ref_tolerance_floor(t);
  cr_assert_leq(err_o, 2 * naive_o + floor, "O error %g, naive %g (%u ranges)", err_o, naive_o,
                count);
  cr_assert_leq(err_l, 2 * naive_l + floor, "LSE error %g, naive %g", err_l, naive_l);
  free(hq_), free(hk), free(hv), free(got), free(lse), free(n32), free(l32), free(ref), free(lref);
  cl_mem m[] = {bq, bk, bv, bo, bl};
  for (int i = 0; i < 5; i++) clReleaseMemObject(m[i]);
  clattn_context_destroy(ctx);
}

static void forced(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, size_t dv,
                   unsigned flags) {
  forced_cfg(CLATTN_F32, b, hq, hkv, nq, nkv, d, dv, flags, NULL);
}

Test(split, ranges_empty_for_early_causal_rows) {
  forced(1, 2, 0, 200, 300, 64, 0, CLATTN_CAUSAL);
}
Test(split, rows_that_see_no_key) {
  forced(1, 1, 0, 300, 100, 32, 0, CLATTN_CAUSAL);
}
Test(split, gqa_odd_dims) {
  forced(2, 4, 2, 17, 250, 59, 40, 0);
}
/* The variants (issue 17): ranges wholly left of a row's window, or right of its top-left
 * diagonal, are empty for it; the merge keeps the others. */
Test(split, window_softcap_ranges_empty_for_most_rows) {
  variant.window_left = 40, variant.softcap = 3.0f;
  forced(1, 2, 0, 150, 400, 32, 0, CLATTN_CAUSAL | CLATTN_WINDOW);
}
Test(split, window_both_sides_and_top_left) {
  variant.window_left = 30, variant.window_right = 20;
  forced(1, 3, 1, 90, 333, 24, 0, CLATTN_WINDOW);
  variant.window_left = variant.window_right = 0;
  forced(1, 2, 0, 90, 333, 24, 0, CLATTN_CAUSAL_TOP_LEFT);
}

/* The tensor-core kernel takes the same split arguments (mma.sync emulated where the device has
 * no tensor cores): causal ranges that are empty for early rows, odd head dims, and the
 * prefetching build (d = 8). */
Test(split, forward_mma) {
  setenv("CLATTN_MMA_EMULATE", "1", 1); /* read when the context is created */
  clattn_config mma = test_mma_config(32, 16);
  forced_cfg(CLATTN_F32, 1, 2, 0, 40, 150, 64, 0, CLATTN_CAUSAL, &mma);
  forced_cfg(CLATTN_F32, 2, 2, 1, 17, 90, 59, 40, 0, &mma);
  forced_cfg(CLATTN_F32, 1, 3, 0, 20, 100, 8, 0, CLATTN_CAUSAL, &mma); /* with the prefetch */
}

/* Half storage: the ranges write fp32 partials (cl/common.cl's OUT_ARG) and the merge rounds O
 * once; causal ranges empty for early rows, rows that see no key, GQA with odd dims, in fp16 and
 * bf16, on the device's plan and on forward_rows forced (its other kernel). */
Test(split, half) {
  clattn_config rows = {"forward_rows", 32, 16, 2, 0, 1, 1, 2};
  forced_cfg(CLATTN_F16, 1, 2, 0, 200, 300, 64, 0, CLATTN_CAUSAL, NULL);
  forced_cfg(CLATTN_F16, 1, 1, 0, 300, 100, 32, 0, CLATTN_CAUSAL, &rows);
  forced_cfg(CLATTN_BF16, 2, 4, 2, 17, 250, 59, 40, 0, NULL);
  forced_cfg(CLATTN_BF16, 1, 2, 0, 3, 400, 128, 0, CLATTN_CAUSAL, &rows);
}

/* The tensor-core kernel in half storage takes the same split arguments and writes the ranges'
 * fp32 partials (mma.sync m16n8k16 emulated where the device has no tensor cores): causal ranges
 * empty for early rows, GQA with odd dims, fp16 and bf16. */
Test(split, forward_mma_half) {
  setenv("CLATTN_MMA_EMULATE", "1", 1); /* read when the context is created */
  clattn_config mma = test_mma_config(32, 16);
  snprintf(mma.kernel, sizeof mma.kernel, "forward_mma_half");
  forced_cfg(CLATTN_F16, 1, 2, 0, 40, 150, 64, 0, CLATTN_CAUSAL, &mma);
  forced_cfg(CLATTN_BF16, 2, 2, 1, 17, 90, 59, 40, 0, &mma);
}

/* The decode families through the split path (a tile of a KV group's rows per work-group):
 * ranges empty for early causal rows, GQA groups of 4 rows in tiles of 8 (two query rows' heads
 * in one tile), half storage's fp32 partials, decode_mma (mma.sync emulated); then calls that
 * ask for no LSE (the merge writes O alone). */
Test(split, decode_families) {
  setenv("CLATTN_MMA_EMULATE", "1", 1); /* read when the context is created */
  clattn_config dec = {"decode", 8, 32, 2, 1, 0, 2, 4};
  forced_cfg(CLATTN_F32, 2, 8, 2, 3, 300, 64, 0, CLATTN_CAUSAL, &dec);
  forced_cfg(CLATTN_BF16, 1, 4, 1, 2, 250, 40, 24, 0, &dec);
  clattn_config mma = {"decode_mma", 8, 16, 1, 1, 0, 1, 1};
  forced_cfg(CLATTN_F16, 2, 8, 2, 1, 200, 64, 0, 0, &mma);
  forced_cfg(CLATTN_BF16, 1, 4, 2, 3, 150, 64, 0, CLATTN_CAUSAL, &mma);
  no_lse = 1;
  forced_cfg(CLATTN_F32, 1, 4, 1, 2, 300, 32, 0, CLATTN_CAUSAL, &dec);
  forced_cfg(CLATTN_F16, 1, 8, 2, 1, 200, 64, 0, 0, &mma);
}

/* Through the public API, where the device has idle compute units: a decode row in half. */
Test(split, half_decode_through_the_api) {
  clattn_problem p = {1, 2, 1, 1, 1000, 64, 0, CLATTN_F16, 0.0f, 0, CLATTN_ALGO_FUSED};
  clattn_context *ctx = test_context(NULL);
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  unsigned units = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                  NULL);
  if (units >= 3) cr_assert_geq(info.kv_splits, 2, "%s", info.reason);
  clattn_context_destroy(ctx);
  test_forward_shape(&p, 0, 0, 1, NULL);
  p.dtype = CLATTN_BF16, p.flags = CLATTN_CAUSAL, p.seqlen_q = 3, p.head_dim = 59;
  test_forward_shape(&p, 1, 7, 1, NULL);
}
