/* KV caches (clattn_kv_cache, issue 18): filled by clattn_kv_append in two calls (the second
 * across page boundaries, or filling pages exactly), read by clattn_forward_ex through the decode
 * family, and checked against the double reference on the cache's own (dequantised) contents
 * under DESIGN.md's rule (tools/check_kvcache.c). Outputs start NaN; batches mix lengths of the
 * capacity, 2/3 of it, 0, 1 and two out of range; contiguous and paged (NHD and HND, page sizes
 * 1 to 64), in every dtype and int8; GQA, MQA and MHA; causal, window, softcap, sinks and ALiBi.
 * Appends must reproduce the rows they were given (int8: within half a quantum). Then bad input,
 * refused before anything is enqueued. */
#include "common.h"
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define C CLATTN_CAUSAL
#define W CLATTN_WINDOW

typedef struct kcase {
  clattn_dtype dtype, cache;
  size_t b, hq, hkv, nq, cap, d, dv;
  size_t page, first;
  int hnd, bad_pages;
  unsigned flags;
  int64_t left, right;
  float softcap;
  int alibi, sinks;
  float scale;     /* the problem's (0: 1 / sqrt(d)) */
  unsigned stage;  /* not 0: the decode kernel forced (an override) with this stage_kv */
  const char *mma; /* not NULL: mma.sync emulated, and the plan's family must be this one */
  unsigned mma_bq, mma_bkv; /* mma_bq not 0: decode_mma forced with tiles of this many rows, and
                               blocks of mma_bkv keys (16 if 0) */
  unsigned mma_stage;       /* ... and this stage_kv (1 if 0) */
} kcase;

static void run(const kcase *v) {
  if (v->mma) setenv("CLATTN_MMA_EMULATE", "1", 1); /* read when the context is created */
  clattn_context *ctx = test_context(NULL);
  check_spec sp = {{v->b, v->hq, v->hkv, v->nq, v->cap, v->d, v->dv, v->dtype, 0.0f, v->flags}};
  sp.problem.window_left = v->left, sp.problem.window_right = v->right;
  sp.problem.softcap = v->softcap, sp.problem.scale = v->scale;
  sp.alibi = v->alibi, sp.sinks = v->sinks;
  sp.seed = (unsigned)(v->cap * 7 + v->d + v->page);
  check_kv kv = {v->cache, v->page, v->hnd, v->first, v->bad_pages};
  /* V loaded with K (stage 2), or the next block's K loaded with V (stage 3), which PoCL's
   * plans never take, in blocks of 32 keys that P V's work-items cover in 2 to 4 passes of VU
   * keys: at stage 2 the first pass's V came with K, later passes load their own. */
  clattn_config forced = {.kernel = "decode", .block_q = 8, .block_kv = 32, .threads_per_row = 2};
  forced.stage_kv = v->stage, forced.rows_per_item = 2, forced.vector_width = 2;
  if (v->mma_bq) /* tiles of fewer rows than the fragment's 8 or 16 (a GPU's tight rows) */
    forced = (clattn_config){"decode_mma",
                             v->mma_bq,
                             v->mma_bkv ? v->mma_bkv : 16,
                             1,
                             v->mma_stage ? v->mma_stage : 1,
                             0,
                             1,
                             1};
  if (v->stage || v->mma_bq)
    cr_assert_eq(clattn_override_config(ctx, &sp.problem, &forced), CLATTN_OK, "%s",
                 clattn_last_error(ctx));
  check_result r;
  double append_err;
  cr_assert_eq(check_kvcache_run(ctx, &sp, &kv, &r, &append_err), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  if (v->stage || v->mma_stage) /* the forced stage is the one the call ran, not mapped */
    cr_expect_eq(kv.plan.stage_kv, v->stage | v->mma_stage, "%s", kv.plan.reason);
  if (v->mma) cr_expect_str_eq(kv.plan.kernel, v->mma, "%s", kv.plan.reason);
  cr_expect_eq(append_err, 0.0, "appended rows differ from their sources by %g", append_err);
  cr_expect_leq(r.err_o, r.tol_o, "O error %g, tolerance %g", r.err_o, r.tol_o);
  cr_expect_leq(r.err_lse, r.tol_lse, "LSE error %g, tolerance %g", r.err_lse, r.tol_lse);
  clattn_context_destroy(ctx);
}

#define F32 CLATTN_F32
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16
#define I8 CLATTN_I8

/* fp32, contiguous: decode with GQA 4, MQA, MHA with its own dv, 4 query rows causal. */
Test(kvcache, contiguous_decode_gqa) {
  run(&(kcase){F32, F32, 6, 8, 2, 1, 150, 64, 0, 0, 37});
}
Test(kvcache, contiguous_mqa_causal_rows) {
  run(&(kcase){F32, F32, 6, 4, 1, 4, 97, 32, 0, 0, 50, .flags = C});
}
Test(kvcache, contiguous_mha_dv) {
  run(&(kcase){F32, F32, 3, 3, 3, 2, 61, 24, 40, 0, 20});
  /* Rows wider than the append's work-group of 64 (four and three columns a work-item), int8's
   * maxima by its tree */
  run(&(kcase){F32, I8, 3, 4, 2, 2, 40, 200, 136, 0, 17});
}
/* Paged: page sizes 1, 16 (the second append from 5 crosses pages), 64 (filled exactly), HND. */
Test(kvcache, paged_page1) {
  run(&(kcase){F32, F32, 6, 4, 2, 1, 45, 16, 0, 1, 7});
}
Test(kvcache, paged_16_nhd_causal) {
  run(&(kcase){F32, F32, 6, 8, 2, 3, 133, 64, 0, 16, 5, .flags = C});
}
Test(kvcache, paged_64_hnd_exact_pages) {
  run(&(kcase){F32, F32, 6, 4, 4, 1, 128, 32, 0, 64, 64, 1});
}
Test(kvcache, paged_pages_out_of_pool) {
  run(&(kcase){F32, F32, 3, 4, 2, 2, 70, 16, 0, 16, 10, .bad_pages = 1});
}
/* The variants models use with a cache. */
Test(kvcache, window_causal) {
  run(&(kcase){F32, F32, 6, 4, 2, 3, 140, 32, 0, 16, 40, .flags = C | W, .left = 17});
}
Test(kvcache, softcap_sinks) {
  run(&(kcase){F32, F32, 6, 8, 2, 1, 90, 32, 0, 0, 30, .softcap = 5.0f, .sinks = 1});
}
Test(kvcache, sinks_causal_window_alibi) {
  run(&(kcase){F32, F32, 6, 4, 2, 2, 100, 16, 0, 8, 20, .flags = C | W, .left = 30, .right = 0,
               .alibi = 1, .sinks = 1});
}
/* Half storage, contiguous and paged. */
Test(kvcache, f16_contiguous) {
  run(&(kcase){F16, F16, 6, 8, 2, 1, 120, 64, 0, 0, 33});
}
Test(kvcache, f16_paged_causal) {
  run(&(kcase){F16, F16, 6, 4, 2, 4, 90, 32, 0, 16, 21, 1, .flags = C, .stage = 3});
}
Test(kvcache, bf16_contiguous_causal) {
  run(&(kcase){BF16, BF16, 6, 4, 1, 2, 80, 32, 0, 0, 40, .flags = C});
}
Test(kvcache, bf16_paged) {
  run(&(kcase){BF16, BF16, 6, 8, 2, 1, 100, 64, 0, 32, 17, .stage = 2});
}
/* int8 caches under fp32 and half queries. */
Test(kvcache, i8_contiguous_f32) {
  run(&(kcase){F32, I8, 6, 8, 2, 1, 110, 64, 0, 0, 50});
}
Test(kvcache, i8_paged_f16_causal) {
  run(&(kcase){F16, I8, 6, 4, 2, 3, 100, 32, 0, 16, 9, .flags = C, .stage = 2});
}
Test(kvcache, i8_paged_bf16_hnd_sinks) {
  run(&(kcase){BF16, I8, 6, 8, 4, 1, 64, 16, 0, 8, 24, 1, .sinks = 1, .stage = 3});
}
/* One sequence, one KV head: too few work-groups for the compute units, so the keys are split
 * and merged (the sink in the first split only). */
Test(kvcache, split_keys_long_context) {
  run(&(kcase){F32, F32, 1, 4, 1, 1, 700, 32, 0, 16, 300, .sinks = 1});
}
Test(kvcache, split_keys_i8_f16) {
  run(&(kcase){F16, I8, 1, 8, 1, 2, 600, 32, 0, 0, 100, .flags = C});
}

/* On tensor cores (decode_mma, mma.sync emulated): fp16 and bf16 caches, contiguous and paged
 * (NHD and HND, a page of 1, pages out of the pool), one and four rows (8 and 16 packed: both
 * fragment halves), GQA and MHA, every variant, head dims 64 and 128 and K's above V's, int8
 * caches; split keys where the entries are few. Head dims off 32 (int8: 64) stay decode's. */
Test(kvcache, mma_f16) {
  run(&(kcase){F16, F16, 6, 8, 2, 1, 130, 128, 0, 16, 50, .sinks = 1, .mma = "decode_mma"});
  run(&(kcase){F16, F16, 3, 8, 2, 4, 90, 64, 0, 1, 21, 1, 1, .flags = C, .mma = "decode_mma"});
  run(&(kcase){F16, F16, 5, 8, 2, 1, 60, 128, 0, 16, 20, .mma = "decode_mma", .mma_bq = 4});
  run(&(kcase){F16, F16, 3, 4, 1, 2, 75, 64, 0, 8, 30, .flags = C, .mma = "decode_mma", .mma_bq = 8,
               .mma_bkv = 32});
  /* Each 16 keys' loads during the previous 16's math (stage 2), paged, the last step partial */
  run(&(kcase){F16, F16, 4, 8, 2, 1, 91, 128, 0, 16, 20, .mma = "decode_mma", .mma_bq = 8,
               .mma_bkv = 32, .mma_stage = 2});
  run(&(kcase){F16, F16, 6, 4, 4, 2, 100, 96, 64, 0, 40, .flags = C | W, .left = 30,
               .softcap = 30.0f, .alibi = 1, .mma = "decode_mma"});
  /* Pages of 16 (a step's keys share one table read) with pages out of the pool, and a window
   * whose first key is not a step's (those steps read the table per key) */
  run(&(kcase){F16, F16, 3, 8, 2, 1, 150, 64, 0, 16, 40, 0, 1, .flags = C | W, .left = 37,
               .mma = "decode_mma"});
}
Test(kvcache, mma_bf16) {
  run(&(kcase){BF16, BF16, 6, 16, 4, 1, 80, 64, 0, 8, 24, 1, .alibi = 1, .mma = "decode_mma"});
  run(&(kcase){BF16, BF16, 1, 4, 1, 3, 700, 128, 0, 32, 300, .flags = C, .sinks = 1,
               .mma = "decode_mma"});
}
Test(kvcache, mma_i8) {
  run(&(kcase){F16, I8, 6, 8, 2, 1, 70, 64, 0, 16, 30, .mma = "decode_mma"});
  run(&(kcase){BF16, I8, 4, 8, 4, 4, 100, 128, 0, 8, 33, 1, .flags = C | W, .left = 40,
               .softcap = 20.0f, .sinks = 1, .mma = "decode_mma"});
  run(&(kcase){F16, I8, 3, 8, 2, 1, 77, 64, 0, 0, 30, .flags = C, .mma = "decode_mma", .mma_bq = 4,
               .mma_bkv = 32, .mma_stage = 2});
  /* Blocks of 64 keys (four steps' loads at once: an int8 step has half fp16's bytes), paged
   * with the last block partial */
  run(&(kcase){F16, I8, 3, 8, 2, 1, 150, 128, 0, 16, 41, .mma = "decode_mma", .mma_bq = 4,
               .mma_bkv = 64});
  /* Scores spread wide (scale 1: standard deviation 8 at d = 64) over 900 keys, V's scales about
   * 0.025: most P far below the row's largest, P' = P s_v / vmax rounded in fp16. (Random data
   * puts the mass on the largest few P, so it cannot show P' underflowing where many small P
   * carry it, which P' relative to vmax rather than to 1 / 16 prevents.) */
  run(&(kcase){F16, I8, 2, 4, 1, 1, 900, 64, 0, 0, 900, .mma = "decode_mma", .scale = 1.0f});
}
Test(kvcache, mma_falls_back_to_decode) {
  run(&(kcase){F16, I8, 6, 8, 2, 1, 70, 96, 0, 16, 30, .mma = "decode"});
  run(&(kcase){BF16, BF16, 6, 8, 2, 1, 70, 80, 0, 0, 30, .mma = "decode"});
}

/* Call i of a series on one context: run and checked (kv->plan then holds its plan). */
static void expect_call(clattn_context *ctx, const check_spec *sp, check_kv *kv, int i) {
  check_result r;
  double append_err;
  cr_assert_eq(check_kvcache_run(ctx, sp, kv, &r, &append_err), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cr_expect(r.pass, "call %d: O error %g (tolerance %g), LSE %g (%g)", i, r.err_o, r.tol_o,
            r.err_lse, r.tol_lse);
}

/* Calls of one plan one after another with other scalars (the scale, the offsets of new
 * buffers, the lengths, the split): each reads its own, though a plan skips setting an argument
 * to the value it already holds (clattn__argmemo). */
Test(kvcache, repeated_calls_take_their_own_arguments) {
  clattn_context *ctx = test_context(NULL);
  const float scales[3] = {0.0f, 0.37f, 0.05f};
  const size_t batches[3] = {3, 3, 2};
  for (int i = 0; i < 3; i++) {
    check_spec sp = {{batches[i], 4, 2, 1, 90 - 20 * (size_t)i, 32, 0, F32, scales[i], 0}};
    sp.seed = 11 + (unsigned)i, sp.offset = 3 * (size_t)i;
    check_kv kv = {F32, 0, 0, 30, 0};
    expect_call(ctx, &sp, &kv, i);
  }
  clattn_context_destroy(ctx);
}

/* Split calls one after another on one context with other batches, lengths, storage, paging,
 * data and range counts (CLATTN_SPLITS forces ranges): each merges its own ranges from the
 * context's reused workspace. fused: the decode kernels merge them (this CPU allows it), so
 * each call must find the counts of finished ranges back at 0 though its tiles and ranges
 * differ from the last call's, and no merge kernel is built; else (CLATTN_FUSED_MERGE=0)
 * fp32's merge kernel, used by the first and the last call, is built once. */
static void split_calls(int fused) {
  setenv("CLATTN_SPLITS", "6", 1); /* read when the context is created */
  setenv("CLATTN_FUSED_MERGE", fused ? "1" : "0", 1);
  clattn_context *ctx = test_context(NULL);
  unsetenv("CLATTN_FUSED_MERGE");
  const size_t batch[3] = {2, 3, 1}, cap[3] = {700, 500, 900};
  cl_kernel merge = NULL;
  for (int i = 0; i < 3; i++) {
    check_spec sp = {
        {batch[i], 8, 2, 1 + (size_t)i, cap[i], 64, 0, i == 1 ? F16 : F32, 0.0f, i == 2 ? C : 0}};
    sp.seed = 21 + (unsigned)i;
    check_kv kv = {sp.problem.dtype, i == 1 ? 16 : 0, 0, cap[i] / 3, 0};
    expect_call(ctx, &sp, &kv, i);
    cr_assert_gt(kv.plan.kv_splits, 1, "%s", kv.plan.reason);
    if (i == 0) merge = ctx->merge[F32];
  }
  if (fused) {
    cr_expect_null(merge, "a fused merge built the merge kernel");
    cr_expect_not_null(ctx->merge_count, "a fused merge kept no counts");
  } else {
    cr_assert_not_null(merge, "a split call left no merge kernel");
    cr_expect_eq(ctx->merge[F32], merge, "the merge kernel was built again");
  }
  clattn_context_destroy(ctx);
}

Test(kvcache, split_calls_one_after_another) {
  split_calls(1);
}

Test(kvcache, split_calls_merged_by_a_kernel) {
  split_calls(0);
}

/* Where a split call's ranges are merged by default (runtime/ops/split.c's FUSED_MERGE_MOST, 32
 * rows x ranges a tile): a GQA group of 4 heads' one row is a tile of 4 rows, so 8 ranges (32)
 * are merged in the decode kernel and 15 (60) by merge_splits; both calls exact. */
static void merged_where(const char *splits, const char *how) {
  setenv("CLATTN_SPLITS", splits, 1);
  clattn_context *ctx = test_context(NULL);
  unsetenv("CLATTN_SPLITS");
  check_spec sp = {{2, 8, 2, 1, 900, 64, 0, F32, 0.0f, 0}};
  sp.seed = 31;
  check_kv kv = {F32, 0, 0, 300, 0};
  expect_call(ctx, &sp, &kv, 0);
  cr_expect(strstr(kv.plan.reason, how), "%s ranges: %s", splits, kv.plan.reason);
  /* The call went the way its plan says: merge_splits built only where it merged. */
  const int kernel_merged = strstr(how, "in the kernel") != NULL;
  cr_expect_eq(ctx->merge[F32] == NULL, kernel_merged, "%s ranges: merge kernel %s", splits,
               ctx->merge[F32] ? "built" : "not built");
  clattn_context_destroy(ctx);
}

Test(kvcache, few_rows_times_ranges_merged_in_the_kernel) {
  merged_where("8", "8 ranges of 128, merged by LSE in the kernel");
}

Test(kvcache, many_rows_times_ranges_merged_by_a_second_kernel) {
  merged_where("15", "15 ranges of 64, merged by LSE by a second kernel");
}

/* An override legal for the problem's class but not for a call's cache (the class before the
 * call has none) fails that call as unsupported, naming the rule (words w1 and w2), and the
 * context serves the call once the override is removed. */
static void override_refused_for_the_cache(size_t d, clattn_dtype cache, clattn_config forced,
                                           const char *w1, const char *w2) {
  setenv("CLATTN_MMA_EMULATE", "1", 1);
  clattn_context *ctx = test_context(NULL);
  check_spec sp = {{2, 4, 2, 1, 40, d, 0, F16, 0.0f, 0}};
  sp.seed = 3;
  check_kv kv = {cache, 16, 0, 20, 0};
  cr_assert_eq(clattn_override_config(ctx, &sp.problem, &forced), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  check_result r;
  double append_err;
  cr_assert_eq(check_kvcache_run(ctx, &sp, &kv, &r, &append_err), CLATTN_ERR_UNSUPPORTED, "%s",
               clattn_last_error(ctx));
  cr_assert(strstr(clattn_last_error(ctx), w1) && strstr(clattn_last_error(ctx), w2), "%s",
            clattn_last_error(ctx));
  cr_assert_eq(clattn_override_config(ctx, &sp.problem, NULL), CLATTN_OK);
  cr_assert_eq(check_kvcache_run(ctx, &sp, &kv, &r, &append_err), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cr_expect(r.pass, "O error %g (tolerance %g)", r.err_o, r.tol_o);
  clattn_context_destroy(ctx);
}

/* decode_mma over an int8 cache at head_dim 32 (int8 needs a multiple of 64). */
Test(kvcache, override_illegal_for_the_cache_rejected) {
  override_refused_for_the_cache(32, I8, (clattn_config){"decode_mma", 8, 16, 1, 1, 0, 1, 1},
                                 "KV cache", "a multiple of 64");
}

/* decode_mma's 64-key blocks are for int8 caches: forced over an fp16 cache. */
Test(kvcache, block_of_64_keys_over_fp16_cache_rejected) {
  override_refused_for_the_cache(64, F16, (clattn_config){"decode_mma", 4, 64, 1, 1, 0, 1, 1},
                                 "BKV=64", "int8 caches only");
}

/* The GPU's planning rules, on the test device made to look like a GPU of 132 compute units:
 * a GQA group of 4 heads' one row takes 4-row tiles (tight_rows: the family's entry has more);
 * 4 x 36 (batch, KV head) tiles fill the 132 units but not 4 work-groups on each, so the keys
 * are split (split_fill); the kernels are built as a GPU's (loops unrolled, loads packed); and
 * the context keeps one merge kernel per storage type across calls. */
Test(kvcache, gpu_planning_rules) {
  clattn_context *ctx = test_context(NULL);
  ctx->device.type = CL_DEVICE_TYPE_GPU, ctx->device.local_mem_emulated = 0;
  ctx->device.compute_units = 132;
  ctx->merge_fused = 0; /* as a GPU without NVIDIA's fence has it (context.c) */
  check_spec sp = {{4, 144, 36, 1, 1000, 16, 0, F32, 0.0f, 0}};
  sp.seed = 5;
  check_kv kv = {F32, 16, 0, 300, 0};
  check_result r;
  double append_err;
  cr_assert_eq(check_kvcache_run(ctx, &sp, &kv, &r, &append_err), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cr_expect(r.pass, "O error %g (tolerance %g), LSE %g (%g)", r.err_o, r.tol_o, r.err_lse,
            r.tol_lse);
  cr_expect_eq(kv.plan.block_q, 4, "%s", kv.plan.reason);
  cr_expect(strstr(kv.plan.reason, "the rows its tiles have"), "%s", kv.plan.reason);
  cr_expect_geq(kv.plan.kv_splits, 2, "%u key ranges: %s", kv.plan.kv_splits, kv.plan.reason);
  cl_kernel merge = ctx->merge[F32];
  cr_assert_not_null(merge, "a split call left no merge kernel");
  sp.problem.batch = 3, sp.seed = 6; /* the same class: no new build but the merge's */
  cr_assert_eq(check_kvcache_run(ctx, &sp, &kv, &r, &append_err), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cr_expect(r.pass, "O error %g (tolerance %g), LSE %g (%g)", r.err_o, r.tol_o, r.err_lse,
            r.tol_lse);
  cr_expect_geq(kv.plan.kv_splits, 2, "%u key ranges: %s", kv.plan.kv_splits, kv.plan.reason);
  cr_expect_eq(ctx->merge[F32], merge, "the merge kernel was built again");
  /* A GPU's build keeps its loads packed until used (cl/decode.cl's PACKED; a CPU's converts
   * them as loaded): fp16, bf16 and int8 unpacked, in a small paged cache each. */
  const clattn_dtype q_types[3] = {F16, BF16, F16}, c_types[3] = {F16, BF16, I8};
  for (int t = 0; t < 3; t++) {
    check_spec hs = {{2, 8, 2, 1, 200, 16, 0, q_types[t], 0.0f, 0}};
    hs.seed = 7 + t;
    check_kv hk = {c_types[t], 16, t == 1, 100, 0};
    cr_assert_eq(check_kvcache_run(ctx, &hs, &hk, &r, &append_err), CLATTN_OK, "%s",
                 clattn_last_error(ctx));
    cr_expect(r.pass, "cache dtype %d: O error %g (tolerance %g), LSE %g (%g)", (int)c_types[t],
              r.err_o, r.tol_o, r.err_lse, r.tol_lse);
  }
  clattn_context_destroy(ctx);
}

/* The decode family on ordinary K and V (no cache), forced by an override: GQA decode, a few
 * causal rows, a window, MHA with odd lengths, half storage; rows per work-item from one to the
 * whole tile, K rows loaded in aligned vectors (16-wide fp16) and element by element (20-wide
 * bf16 in 8-element chunks, the last partial). */
static void dense(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, clattn_dtype t,
                  unsigned flags, unsigned bq, unsigned bkv, unsigned rm, unsigned vec) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, 0, t, 0.0f, flags};
  if (flags & W) p.window_left = 20, p.window_right = 0;
  clattn_config c = {.kernel = "decode", .block_q = bq, .block_kv = bkv, .threads_per_row = 2};
  c.stage_kv = 1, c.rows_per_item = rm, c.vector_width = vec;
  test_forward_shape(&p, 0, 0, 1, &c);
}
Test(kvcache, dense_decode_forced) {
  dense(3, 8, 2, 1, 300, 64, F32, 0, 8, 32, 4, 2);
  dense(2, 4, 1, 5, 77, 32, F32, C, 16, 16, 16, 2);
  dense(2, 4, 2, 33, 90, 16, F16, C | W, 16, 64, 1, 2);
  dense(1, 3, 3, 17, 17, 20, BF16, 0, 4, 16, 2, 4);
}

/* The harness's own check: decode kernels whose O is 1% off must fail it (r.pass, which
 * `clattn run --kv-cache` reports), in an fp16 cache as in int8. */
Test(kvcache, wrong_output_rejected) {
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "if (e < ncol) STO(o, obase + e, acc[i][e] * inv);",
                  "          if (e < ncol) STO(o, obase + e, acc[i][e] * inv * 1.01f);\n", 1);
  clattn_context *ctx = test_context(dir);
  clattn_dtype caches[2] = {F16, I8};
  for (int i = 0; i < 2; i++) {
    check_spec sp = {{2, 4, 2, 1, 50, 16, 0, F16}};
    sp.seed = 3;
    check_kv kv = {caches[i], 8, 0, 20, 0};
    check_result r;
    double append_err;
    cr_assert_eq(check_kvcache_run(ctx, &sp, &kv, &r, &append_err), CLATTN_OK, "%s",
                 clattn_last_error(ctx));
    cr_expect_not(r.pass, "a 1%% error passed (O error %g, tolerance %g)", r.err_o, r.tol_o);
  }
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}
