/* The traffic model and FLOP count on cases small enough to count by hand. */
#include "common.h"
#include "tune.h"

static clattn__shape shape(size_t b, size_t h, size_t nq, size_t nkv, size_t d, unsigned causal) {
  clattn__shape s = {0};
  s.batch = b, s.heads_q = h, s.heads_kv = h, s.seqlen_q = nq, s.seqlen_kv = nkv;
  s.d = s.dv = d, s.causal = causal, s.scale = 1.0f;
  return s;
}

static const clattn__config tiles_bq2 = {.bq = 2, .bkv = 2, .tpr = 1, .stage = 1, .kernel = 1};

/* B = H = 1, N = 4, d = 2: Q and O are 4 rows x 2 floats = 32 bytes each. */
Test(traffic, fused_non_causal) {
  clattn__shape s = shape(1, 1, 4, 4, 2, 0);
  clattn__bytes b = clattn__traffic_fused(&s, &tiles_bq2, 0);
  /* Two query blocks each stream all 4 keys of K and V: 2 * 4 * (2 + 2) * 4 = 128 bytes. */
  cr_assert_float_eq(b.read, 32.0 + 128.0, 1e-9);
  cr_assert_float_eq(b.write, 32.0, 1e-9);
  b = clattn__traffic_fused(&s, &tiles_bq2, 1);
  cr_assert_float_eq(b.write, 32.0 + 16.0, 1e-9, "LSE adds 4 bytes per row");
}

Test(traffic, fused_causal_skips_blocks) {
  clattn__shape s = shape(1, 1, 4, 4, 2, 1);
  /* Block 0 (rows 0-1) needs keys 0-1, block 1 keys 0-3: 6 keys * 16 bytes. */
  clattn__bytes b = clattn__traffic_fused(&s, &tiles_bq2, 0);
  cr_assert_float_eq(b.read, 32.0 + 96.0, 1e-9);
  /* seqlen_q > seqlen_kv (6 x 3): rows 0-2 see nothing; blocks need 0, 1 and 3 keys. */
  s = shape(1, 1, 6, 3, 2, 1);
  b = clattn__traffic_fused(&s, &tiles_bq2, 0);
  cr_assert_float_eq(b.read, 6 * 2 * 4.0 + 4 * 16.0, 1e-9);
}

Test(traffic, fused_unstaged_rows_read_per_row) {
  clattn__shape s = shape(1, 1, 4, 4, 2, 0);
  clattn__config rows = {.bq = 2, .bkv = 2, .tpr = 1, .stage = 0, .kernel = 0};
  /* Each of 4 rows reads all 4 keys of K and V itself. */
  cr_assert_float_eq(clattn__traffic_fused(&s, &rows, 0).read, 32.0 + 4 * 4 * 16.0, 1e-9);
  rows.stage = 1;
  cr_assert_float_eq(clattn__traffic_fused(&s, &rows, 0).read, 32.0 + 128.0, 1e-9);
}

Test(traffic, standard_round_trips) {
  clattn__shape s = shape(1, 1, 4, 4, 2, 0);
  clattn__bytes b = clattn__traffic_standard(&s, 0);
  /* Reads: Q 32, K and V 64, S by the softmax 64, P by the second GEMM 64.
   * Writes: S 64, P 64, O 32. */
  cr_assert_float_eq(b.read, 32.0 + 64.0 + 64.0 + 64.0, 1e-9);
  cr_assert_float_eq(b.write, 64.0 + 64.0 + 32.0, 1e-9);
  cr_assert_float_eq(clattn__traffic_standard(&s, 1).write, 160.0 + 16.0, 1e-9);
  /* Causal: the softmax reads the 1+2+3+4 = 10 visible scores; the GEMMs still see all. */
  s.causal = 1;
  cr_assert_float_eq(clattn__traffic_standard(&s, 0).read, 32.0 + 64.0 + 40.0 + 64.0, 1e-9);
}

/* Half storage on the standard path: Q, K, V are read in 2 bytes, widened to fp32 copies the
 * GEMMs read; O is written as fp32, read back and written in 2 bytes. Scores stay fp32. */
Test(traffic, standard_half_counts_its_copies) {
  clattn__shape s = shape(1, 1, 4, 4, 2, 0);
  s.dtype = CLATTN_F16, s.elem = 2;
  clattn__bytes b = clattn__traffic_standard(&s, 1);
  /* 24 elements of Q, K, V, 8 of O. Reads: 24 * 2 + 24 * 4 (the GEMMs' copies) + 8 * 4 (the
   * rounding pass) + S 64 + P 64. Writes: 24 * 4 (the copies) + S 64 + P 64 + O 8 * 4 in fp32,
   * 8 * 2 rounded, LSE 16. */
  cr_assert_float_eq(b.read, 48.0 + 96.0 + 32.0 + 64.0 + 64.0, 1e-9);
  cr_assert_float_eq(b.write, 96.0 + 64.0 + 64.0 + 32.0 + 16.0 + 16.0, 1e-9);
}

Test(traffic, gqa_counts_per_query_head) {
  clattn__shape s = shape(2, 4, 8, 8, 4, 0);
  s.heads_kv = 2;
  /* 8 query heads; each reads its group's K and V once per query block (8 rows, bq 2: 4). */
  clattn__bytes b = clattn__traffic_fused(&s, &tiles_bq2, 0);
  cr_assert_float_eq(b.read, 8 * (8 * 4 * 4.0) + 8 * 4 * 8 * 8 * 4.0, 1e-9);
}

Test(traffic, flops_and_io_bound) {
  clattn__shape s = shape(1, 1, 4, 4, 2, 0);
  cr_assert_float_eq(clattn__forward_flops(&s), 2.0 * 16 * 4, 1e-9);
  s.causal = 1;
  cr_assert_float_eq(clattn__visible_pairs(&s), 10.0, 1e-9);
  cr_assert_float_eq(clattn__forward_flops(&s), 2.0 * 10 * 4, 1e-9);
  s = shape(1, 1, 6, 3, 2, 1);
  cr_assert_float_eq(clattn__visible_pairs(&s), 6.0, 1e-9);
  /* N^2 d^2 / M: 16 pairs * 4 / (1024 bytes = 256 floats) floats = 1 byte. */
  s = shape(1, 1, 4, 4, 2, 0);
  cr_assert_float_eq(clattn__io_lower_bound(&s, 1024.0), 1.0, 1e-9);
}

/* explain reports the model for the config it planned. */
Test(traffic, explain_reports_the_model) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {0};
  p.batch = 2, p.heads_q = 3, p.seqlen_q = 300, p.seqlen_kv = 500, p.head_dim = 32;
  p.flags = CLATTN_CAUSAL;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  clattn__shape s = shape(2, 3, 300, 500, 32, 1);
  clattn__config c = {.bq = info.block_q,
                      .bkv = info.block_kv,
                      .stage = info.stage_kv,
                      .kernel = (unsigned)clattn__family_find(info.kernel)};
  cr_assert_float_eq(info.fused_read_bytes, clattn__traffic_fused(&s, &c, 0).read, 1e-6);
  cr_assert_float_eq(info.standard_write_bytes, clattn__traffic_standard(&s, 0).write, 1e-6);
  cr_assert_gt(info.standard_read_bytes + info.standard_write_bytes,
               info.fused_read_bytes + info.fused_write_bytes);
  cr_assert_gt(info.io_lower_bound_bytes, 0.0);
  cr_assert_str_eq(info.algorithm, "fused");
  clattn_context_destroy(ctx);
}

/* A window costs the keys it sees: the model's FLOPs count visible pairs (causal + window of w:
 * about N w), and the fused traffic reads each block's keys only. */
Test(traffic, window_counts_the_keys_it_sees) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {1, 8, 0, 1000, 1000, 64, 0, CLATTN_F32, 0.0f, CLATTN_CAUSAL | CLATTN_WINDOW};
  p.window_left = 100;
  clattn_plan_info w, full;
  cr_assert_eq(clattn_explain(ctx, &p, &w), CLATTN_OK, "%s", clattn_last_error(ctx));
  /* rows 0..100 see i + 1 keys, the other 899 see 101 */
  double pairs = 101.0 * 102.0 / 2.0 + 899.0 * 101.0;
  cr_assert_float_eq(w.flops, 2.0 * 8 * pairs * 128, 1.0);
  p.flags = CLATTN_CAUSAL, p.window_left = 0;
  cr_assert_eq(clattn_explain(ctx, &p, &full), CLATTN_OK, "%s", clattn_last_error(ctx));
  /* 128-row blocks: about 228 keys each against 500 on average for the causal mask */
  cr_assert_gt(full.fused_read_bytes, 2.0 * w.fused_read_bytes, "%g vs %g", full.fused_read_bytes,
               w.fused_read_bytes);
  /* Top-left causal on a square problem is the bottom-right one. */
  p.flags = CLATTN_CAUSAL_TOP_LEFT;
  clattn_plan_info tl;
  cr_assert_eq(clattn_explain(ctx, &p, &tl), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_float_eq(tl.flops, full.flops, 1.0);
  clattn_context_destroy(ctx);
}
