/* Forward results against the double-precision reference, under DESIGN.md's rule
 * (max|o - ref| <= 2 * max|naive fp32 - ref| + 1e-6), on a curated list of shapes that covers
 * DESIGN.md's shape list: head dims 1..256 (odd ones too) and head_dim_v != head_dim, lengths 1,
 * 17, 113x203, 1023x1024, GQA/MQA, causal with seqlen_q < and > seqlen_kv, empty KV, both
 * layouts, nonzero offsets and LSE. */
#include "common.h"

#include <math.h>

/* tests/CMakeLists.txt builds this file four times: as the fused path's tests (suite
 * "forward", whatever variant the device's plan picks: forward_tiles on PoCL); with
 * TEST_STANDARD, as the standard path's (suite "standard"); with TEST_MMA, as the tensor-core
 * kernel forward_mma's, forced on every shape and run with mma.sync emulated
 * (CLATTN_MMA_EMULATE) where the device has no tensor cores; with TEST_ROWS, as forward_rows'
 * (the default on GPUs without tensor cores), forced on every shape with configs that vary by
 * shape; with TEST_HALF, in fp16 storage through the device's plan (suite "forward_half", the
 * half rule: the naive same-precision error, + 1e-4; test_half.c has bf16 and forced kernels).
 * test_tiles.c forces forward_tiles on the same list. All meet the same bar on the same shapes. */
#ifdef TEST_HALF
#define STORAGE CLATTN_F16
#else
#define STORAGE CLATTN_F32
#endif
#ifdef TEST_HALF
#define SUITE forward_half
#define ALGORITHM CLATTN_ALGO_FUSED
#elif defined(TEST_STANDARD)
#define SUITE standard
#define ALGORITHM CLATTN_ALGO_STANDARD
#elif defined(TEST_MMA)
#define SUITE forward_mma
#define ALGORITHM CLATTN_ALGO_FUSED
/* Before Criterion forks its tests, so that every context sees it. */
__attribute__((constructor)) static void emulate_mma(void) {
  setenv("CLATTN_MMA_EMULATE", "1", 1);
}
#elif defined(TEST_ROWS)
#define SUITE forward_rows
#define ALGORITHM CLATTN_ALGO_FUSED
#else
#define SUITE forward
#define ALGORITHM CLATTN_ALGO_FUSED
#endif

#ifdef TEST_ROWS
/* A forward_rows config for a shape, picked by pick from a few that cover its paths: rows
 * shared by 1, 2 or 4 work-items, K/V staged in local memory or read from global memory,
 * padded local rows, and the widest vector loads both head dims allow. */
static clattn_config rows_config(size_t d, size_t dv, size_t pick) {
  static const unsigned shapes[6][5] = {/* BQ BKV TPR STAGE PAD */
                                        {64, 32, 1, 1, 0}, {32, 16, 2, 1, 1}, {16, 64, 4, 0, 0},
                                        {32, 32, 1, 0, 1}, {16, 16, 2, 0, 0}, {8, 128, 4, 1, 0}};
  const unsigned *s = shapes[pick % 6];
  dv = dv ? dv : d;
  clattn_config c = {"forward_rows", s[0], s[1], s[2], s[3], s[4], 1, 1};
  c.vector_width = d % 4 == 0 && dv % 4 == 0 ? 4 : d % 2 == 0 && dv % 2 == 0 ? 2 : 1;
  return c;
}
#endif

static void run(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, size_t dv,
                unsigned flags, int bhsd, size_t offset, int lse) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, STORAGE, 0.0f, flags, ALGORITHM};
#ifdef TEST_MMA
  /* 64 rows (4 warps), 32 keys, padded rows: every fragment and layout path of the kernel. */
  /* As the H200's defaults: K/V stored split, in 32-key tiles up to d = 64 and 16-key tiles up
   * to 128 (NT = 2); larger head dims keep fp32 tiles, the other staging path. */
  clattn_config mma = test_mma_config(64, d > 64 && d <= 128 ? 16 : 32);
  mma.stage_kv = d <= 128 ? 2 : 1;
  test_forward_shape(&p, bhsd, offset, lse, &mma);
#elif defined(TEST_ROWS)
  clattn_config rows = rows_config(d, dv, nq * 7 + nkv + d);
  test_forward_shape(&p, bhsd, offset, lse, &rows);
#else
  test_forward_shape(&p, bhsd, offset, lse, NULL);
#endif
}

enum { BSHD = 0, BHSD = 1, NOLSE = 0, LSE = 1 };
#define C CLATTN_CAUSAL

/*                        b  hq hkv   nq    nkv    d   dv flags layout off lse */
Test(SUITE, d1_len1) {
  run(1, 1, 0, 1, 1, 1, 0, 0, BSHD, 0, LSE);
}
Test(SUITE, d59_len17) {
  run(2, 3, 0, 17, 17, 59, 0, 0, BSHD, 0, NOLSE);
}
Test(SUITE, d111_113x203_bhsd) {
  run(1, 2, 0, 113, 203, 111, 0, 0, BHSD, 0, LSE);
}
Test(SUITE, d256_80x64) {
  run(1, 2, 0, 80, 64, 256, 0, 0, BSHD, 0, NOLSE);
}
Test(SUITE, d64_1023x1024) {
  run(1, 1, 0, 1023, 1024, 64, 0, 0, BSHD, 0, LSE);
}
Test(SUITE, d128_1023x1024_causal) {
  run(1, 1, 0, 1023, 1024, 128, 0, C, BHSD, 0, LSE);
}
Test(SUITE, causal_q_shorter) {
  run(1, 2, 0, 113, 203, 64, 0, C, BSHD, 0, LSE);
}
Test(SUITE, causal_q_longer) {
  run(1, 2, 0, 203, 113, 64, 0, C, BSHD, 0, LSE);
}
Test(SUITE, causal_rows_without_keys) {
  run(1, 1, 0, 50, 10, 16, 0, C, BSHD, 0, LSE);
}
Test(SUITE, empty_kv) {
  run(2, 2, 0, 7, 0, 32, 0, 0, BSHD, 0, LSE);
}
Test(SUITE, dv_larger) {
  run(1, 2, 0, 45, 61, 32, 100, 0, BSHD, 0, LSE);
}
Test(SUITE, dv_smaller) {
  run(1, 2, 0, 61, 45, 100, 32, C, BHSD, 0, NOLSE);
}
Test(SUITE, gqa) {
  run(2, 8, 2, 129, 129, 64, 0, 0, BSHD, 0, LSE);
}
Test(SUITE, mqa_causal_bhsd) {
  run(1, 4, 1, 77, 77, 32, 0, C, BHSD, 0, LSE);
}
Test(SUITE, offset_bshd) {
  run(2, 3, 0, 33, 41, 40, 0, 0, BSHD, 37, LSE);
}
Test(SUITE, offset_bhsd_causal) {
  run(1, 2, 2, 31, 29, 17, 0, C, BHSD, 5, LSE);
}
Test(SUITE, decode_one_query) {
  run(2, 4, 0, 1, 1000, 128, 0, C, BSHD, 0, LSE);
}
Test(SUITE, many_heads_small_dim) {
  run(3, 5, 0, 65, 65, 8, 0, 0, BHSD, 0, NOLSE);
}
Test(SUITE, d2_dv1) {
  run(1, 1, 0, 31, 31, 2, 1, 0, BSHD, 0, LSE);
}
Test(SUITE, d256_causal_bhsd) {
  run(1, 2, 1, 130, 130, 256, 0, C, BHSD, 3, LSE);
}

#ifdef TEST_MMA
/* forward_mma's build knobs for experiments (CLATTN_BUILD_OPTIONS) keep the results right, so
 * that a knob the H200 favours can become a default: S's odd k-steps in chains of their own
 * (SCHAINS) with longer chains, one-value V reads (VW), causal blocks in order (REVERSE 0). Two
 * query blocks, a tile cut short, causal, and 3 k-step pairs at d = 40. */
Test(SUITE, build_knobs_for_experiments) {
  const char *knobs[] = {"-DSCHAINS=2 -DFLUSH_S=8", "-DVW=1", "-DREVERSE=0"};
  for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++) {
    setenv("CLATTN_BUILD_OPTIONS", knobs[i], 1); /* this test's process only */
    cr_log_info("%s", knobs[i]);
    run(1, 2, 0, 100, 90, 64, 0, C, BHSD, 0, LSE);
    run(1, 1, 0, 40, 45, 40, 0, C, BSHD, 0, LSE);
  }
  unsetenv("CLATTN_BUILD_OPTIONS");
}
#endif

#ifndef TEST_HALF /* fp32 buffers written by hand; half views and strides are the list's */
/* Arbitrary strides: Q, K and V interleaved in one packed QKV buffer [B][S][3][H][D] (a common
 * layout of fused projections), O in a padded buffer with a row stride larger than needed. */
Test(SUITE, interleaved_qkv_padded_output) {
  clattn_context *ctx = test_context(NULL);
  const size_t B = 2, S = 37, H = 3, D = 24, OS = H * D + 5;
  size_t nqkv = B * S * 3 * H * D, no = B * S * OS;
  float *host = malloc(nqkv * sizeof *host);
  for (size_t i = 0; i < nqkv; i++) host[i] = (float)sin(0.37 * (double)i);
  cl_int err;
  cl_mem qkv =
      clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_COPY_HOST_PTR | CL_MEM_READ_ONLY,
                     nqkv * sizeof *host, host, &err);
  cr_assert_eq(err, CL_SUCCESS);
  cl_mem o = test_buffer(ctx, no, NAN); /* padding must stay untouched (NaN) */
  clattn_tensor tq = {qkv, 0, S * 3 * H * D, 3 * H * D, D}, tk = tq, tv = tq;
  tk.offset = H * D, tv.offset = 2 * H * D;
  clattn_tensor to = {o, 0, S * OS, OS, D};
  clattn_problem p = {0};
  p.batch = B, p.heads_q = H, p.seqlen_q = p.seqlen_kv = S, p.head_dim = D, p.flags = C;
  p.algorithm = ALGORITHM;
#ifdef TEST_MMA
  clattn_config mma = test_mma_config(32, 16);
  cr_assert_eq(clattn_override_config(ctx, &p, &mma), CLATTN_OK, "%s", clattn_last_error(ctx));
#elif defined(TEST_ROWS)
  clattn_config rows = rows_config(D, D, 1);
  cr_assert_eq(clattn_override_config(ctx, &p, &rows), CLATTN_OK, "%s", clattn_last_error(ctx));
#endif
  cr_assert_eq(clattn_forward(ctx, &p, &tq, &tk, &tv, &to, NULL, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  float *got = malloc(no * sizeof *got);
  clEnqueueReadBuffer(clattn_context_queue(ctx), o, CL_TRUE, 0, no * sizeof *got, got, 0, NULL,
                      NULL);
  double *ref = malloc(B * H * S * D * sizeof *ref);
  float *naive = malloc(B * H * S * D * sizeof *naive);
  ref_view vq = {host, 0, tq.stride_batch, tq.stride_seq, tq.stride_head}, vk = vq, vv = vq;
  vk.offset = tk.offset, vv.offset = tv.offset;
  ref_forward_f64(&p, vq, vk, vv, ref, NULL);
  ref_forward_f32(&p, vq, vk, vv, naive, NULL);
  double err_o = 0, err_naive = 0;
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < H; h++)
      for (size_t s = 0; s < S; s++)
        for (size_t c = 0; c < D; c++) {
          size_t i = ((b * H + h) * S + s) * D + c;
          err_o = test_err(err_o, got[b * S * OS + s * OS + h * D + c], ref[i]);
          err_naive = test_naive_err(err_naive, naive[i], ref[i]);
        }
  cr_expect_leq(err_o, 2 * err_naive + 1e-6, "error %g, naive %g", err_o, err_naive);
  for (size_t b = 0; b < B; b++)
    for (size_t s = 0; s < S; s++)
      for (size_t c = H * D; c < OS; c++)
        cr_assert(isnan(got[b * S * OS + s * OS + c]), "padding overwritten at b%zu s%zu c%zu", b,
                  s, c);
  free(host), free(got), free(ref), free(naive);
  clReleaseMemObject(qkv);
  clReleaseMemObject(o);
  clattn_context_destroy(ctx);
}
#endif
