/* A kernel family added the way docs/DESIGN.md says: forward_naive is a file in cl/, one entry
 * in runtime/kernels/registry.c and its tests (here, and test_tiling.c's check that nothing
 * plans it), nothing else. It is test-only: it runs only as an override, and then meets the
 * forward's bar (DESIGN.md's rule against the double reference, outputs NaN-filled first) on
 * shapes that cover the list's kinds: head dims 1, odd and 256, head_dim_v != head_dim, causal with
 * fewer and more queries than keys, no keys, GQA, both layouts, offsets, with and without LSE. */
#include "common.h"

static void run(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, size_t dv,
                unsigned flags, int bhsd, size_t offset, int lse) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, CLATTN_F32, 0.0f, flags, CLATTN_ALGO_FUSED};
  clattn_config naive = {"forward_naive", 32, 1, 1, 0, 0, 1, 1};
  test_forward_shape(&p, bhsd, offset, lse, &naive);
}

enum { BSHD = 0, BHSD = 1, NOLSE = 0, LSE = 1 };
#define C CLATTN_CAUSAL

/*                                 b  hq hkv   nq   nkv    d   dv flags layout off lse */
Test(forward_naive, d1_len1) {
  run(1, 1, 0, 1, 1, 1, 0, 0, BSHD, 0, LSE);
}
Test(forward_naive, d111_113x203_bhsd) {
  run(1, 2, 0, 113, 203, 111, 0, 0, BHSD, 0, LSE);
}
Test(forward_naive, causal_203x113) {
  run(1, 2, 0, 203, 113, 64, 0, C, BSHD, 0, LSE);
}
Test(forward_naive, empty_kv) {
  run(2, 2, 0, 7, 0, 32, 0, 0, BSHD, 0, LSE);
}
Test(forward_naive, dv_ne_d_causal_bhsd) {
  run(1, 2, 0, 61, 45, 100, 32, C, BHSD, 0, NOLSE);
}
Test(forward_naive, gqa_offset_causal) {
  run(1, 4, 2, 31, 29, 17, 0, C, BHSD, 5, LSE);
}
Test(forward_naive, d256_causal_gqa_bhsd) {
  run(1, 2, 1, 130, 130, 256, 0, C, BHSD, 3, LSE);
}
