/* The register-tiled variant (cl/forward_tiles.cl) on the forward shape list, forced through
 * overrides with micro-tiles of several shapes: the same numerical standard as forward_rows. */
#include "common.h"

#include <string.h>

static void run_cfg(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, size_t dv,
                    unsigned flags, int bhsd, size_t offset, clattn_config cfg) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, CLATTN_F32, 0.0f, flags};
  test_forward_shape(&p, bhsd, offset, 1, &cfg);
}

static void run(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, size_t dv,
                unsigned flags, int bhsd, size_t offset, unsigned bq, unsigned bkv, unsigned tx,
                unsigned rm) {
  clattn_config cfg = {"forward_tiles", bq, bkv, tx, 1, 1, rm, 1};
  run_cfg(b, hq, hkv, nq, nkv, d, dv, flags, bhsd, offset, cfg);
}

#define C CLATTN_CAUSAL
/*                           b hq hkv  nq   nkv   d  dv flags bhsd off  bq bkv tx rm */
Test(tiles, d1_len1) {
  run(1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 8, 8, 4, 2);
}
Test(tiles, d59_len17) {
  run(2, 3, 0, 17, 17, 59, 0, 0, 0, 0, 16, 16, 4, 4);
}
Test(tiles, d111_113x203_bhsd) {
  run(1, 2, 0, 113, 203, 111, 0, 0, 1, 0, 32, 32, 8, 4);
}
Test(tiles, d256_80x64) {
  run(1, 2, 0, 80, 64, 256, 0, 0, 0, 0, 16, 16, 16, 2);
}
Test(tiles, d64_1023x1024) {
  run(1, 1, 0, 1023, 1024, 64, 0, 0, 0, 0, 64, 32, 8, 4);
}
Test(tiles, d128_1023x1024_causal) {
  run(1, 1, 0, 1023, 1024, 128, 0, C, 1, 0, 32, 16, 4, 2);
}
Test(tiles, causal_q_shorter) {
  run(1, 2, 0, 113, 203, 64, 0, C, 0, 0, 16, 64, 16, 1);
}
Test(tiles, causal_q_longer) {
  run(1, 2, 0, 203, 113, 64, 0, C, 0, 0, 64, 8, 8, 8);
}
Test(tiles, causal_rows_without_keys) {
  run(1, 1, 0, 50, 10, 16, 0, C, 0, 0, 16, 16, 2, 4);
}
Test(tiles, empty_kv) {
  run(2, 2, 0, 7, 0, 32, 0, 0, 0, 0, 8, 8, 2, 2);
}
Test(tiles, dv_larger) {
  run(1, 2, 0, 45, 61, 32, 100, 0, 0, 0, 16, 32, 8, 2);
}
Test(tiles, dv_smaller) {
  run(1, 2, 0, 61, 45, 100, 32, C, 1, 0, 32, 32, 32, 4);
}
Test(tiles, gqa) {
  run(2, 8, 2, 129, 129, 64, 0, 0, 0, 0, 32, 64, 16, 4);
}
Test(tiles, mqa_causal_bhsd) {
  run(1, 4, 1, 77, 77, 32, 0, C, 1, 0, 16, 16, 4, 4);
}
Test(tiles, offset_bshd) {
  run(2, 3, 0, 33, 41, 40, 0, 0, 0, 37, 8, 16, 8, 1);
}
Test(tiles, offset_bhsd_causal) {
  run(1, 2, 2, 31, 29, 17, 0, C, 1, 5, 16, 8, 1, 4);
}
Test(tiles, decode_one_query) {
  run(2, 4, 0, 1, 1000, 128, 0, C, 0, 0, 4, 128, 32, 4);
}
Test(tiles, d2_dv1) {
  run(1, 1, 0, 31, 31, 2, 1, 0, 0, 0, 8, 16, 4, 1);
}
Test(tiles, d256_causal_bhsd) {
  run(1, 2, 1, 130, 130, 256, 0, C, 1, 3, 8, 16, 8, 1);
}

Test(tiles, illegal_micro_tiles_are_rejected) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 64, p.head_dim = 32;
  clattn_config cfg = {"forward_tiles", 16, 16, 32, 1, 0, 2}; /* 32 work-items on 16 keys */
  cr_assert_eq(clattn_override_config(ctx, &p, &cfg), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "multiple"), "%s", clattn_last_error(ctx));
  cfg.threads_per_row = 4, cfg.rows_per_item = 32; /* 32 rows per item in a block of 16 */
  cr_assert_eq(clattn_config_check(ctx, &p, &cfg), CLATTN_ERR_INVALID_ARGUMENT);
  clattn_context_destroy(ctx);
}

/* Vector loads (vload2/vload4) in both variants, also on unaligned offsets and strides. */
static const clattn_config tiles4 = {"forward_tiles", 32, 16, 4, 1, 1, 2, 4};
static const clattn_config rows4 = {"forward_rows", 16, 32, 2, 1, 1, 1, 4};
static const clattn_config rows2 = {"forward_rows", 8, 16, 1, 1, 0, 1, 2};
Test(tiles, vec4_tiles_offset) {
  run_cfg(2, 3, 0, 33, 41, 40, 0, 0, 0, 37, tiles4);
}
Test(tiles, vec4_tiles_causal_bhsd) {
  run_cfg(1, 4, 2, 130, 97, 128, 64, C, 1, 1, tiles4);
}
Test(tiles, vec4_rows_staged_gqa) {
  run_cfg(2, 8, 2, 129, 129, 64, 0, 0, 0, 3, rows4);
}
Test(tiles, vec2_rows_unstaged_causal) {
  run_cfg(1, 2, 0, 61, 45, 34, 22, C, 1, 5, rows2);
}
