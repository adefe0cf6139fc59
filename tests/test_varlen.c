/* Packed variable-length sequences (CLATTN_VARLEN, clattn_args.cu_seqlens_q/kv), forward and
 * backward, through tools/check_varlen.c: batches of 4 or 5 sequences hold the longest, a middle
 * one, one without queries and one query over no keys, so empty sequences sit inside every batch;
 * outputs start NaN and each sequence is checked against its own double reference under
 * DESIGN.md's rule. Each case runs the device's plan (PoCL: forward_tiles, backward_rows), and
 * forced forward_rows or, in half storage, the tensor-core families (emulated); fp32 on six
 * shapes, each half dtype on two. Then device ranges out of bounds: a sequence whose keys lie
 * outside k sees none, one whose queries lie outside q writes nothing, and nothing outside the
 * outputs is written. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define C CLATTN_CAUSAL
#define TL CLATTN_CAUSAL_TOP_LEFT
#define W CLATTN_WINDOW

typedef struct lcase {
  clattn_dtype dtype;
  size_t b, hq, hkv, nq, nkv, d, dv;
  unsigned flags;
  int64_t left, right;
  float softcap;
  int bhsd;
  size_t offset;
  int alibi, sinks;
} lcase;

static void run_on(const lcase *v, const clattn_config *fwd, const clattn_config *bwd) {
  clattn_context *ctx = test_context(NULL);
  check_spec sp = {
      {v->b, v->hq, v->hkv, v->nq, v->nkv, v->d, v->dv, v->dtype, 0.0f, v->flags | CLATTN_VARLEN}};
  sp.problem.window_left = v->left, sp.problem.window_right = v->right;
  sp.problem.softcap = v->softcap;
  if (v->alibi == 2) sp.problem.flags |= CLATTN_ALIBI_PER_BATCH;
  sp.bhsd = v->bhsd, sp.offset = v->offset, sp.alibi = v->alibi != 0, sp.sinks = v->sinks;
  sp.seed = (unsigned)(v->nq * 13 + v->d);
  /* An override belongs to the problem's class: the totals do not change it. */
  const clattn_config *cfgs[2] = {fwd, bwd};
  for (int i = 0; i < 2; i++)
    if (cfgs[i])
      cr_assert_eq(clattn_override_config(ctx, &sp.problem, cfgs[i]), CLATTN_OK, "%s",
                   clattn_last_error(ctx));
  check_varlen_result r;
  cr_assert_eq(check_varlen_run(ctx, &sp, 1, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  const char *path = fwd ? fwd->kernel : "plan";
  cr_expect_leq(r.err_o, r.tol_o, "%s: O error %g, tolerance %g", path, r.err_o, r.tol_o);
  cr_expect_leq(r.err_lse, r.tol_lse, "%s: LSE error %g, tolerance %g", path, r.err_lse, r.tol_lse);
  static const char *const names[3] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; g++)
    cr_expect_leq(r.err[g], r.tol[g], "%s: %s error %g, tolerance %g", bwd ? bwd->kernel : "plan",
                  names[g], r.err[g], r.tol[g]);
  if (v->sinks)
    cr_expect_leq(r.err_sinks, r.tol_sinks, "d_sinks error %g, tolerance %g", r.err_sinks,
                  r.tol_sinks);
  clattn_context_destroy(ctx);
}

static void check_case(const lcase *v) {
  run_on(v, NULL, NULL);
  if (v->dtype == CLATTN_F32) {
    clattn_config rows = {.kernel = "forward_rows",
                          .block_q = 16,
                          .block_kv = 16,
                          .threads_per_row = 2,
                          .stage_kv = 1,
                          .rows_per_item = 1};
    run_on(v, &rows, NULL);
  } else {
    setenv("CLATTN_MMA_EMULATE", "1", 1);
    clattn_config mma = {.kernel = "forward_mma_half",
                         .block_q = 32,
                         .block_kv = 16,
                         .threads_per_row = 1,
                         .stage_kv = 1,
                         .rows_per_item = 1};
    clattn_config bmma = {.kernel = "backward_mma_half", .block_q = 32, .block_kv = 32};
    run_on(v, &mma, &bmma);
  }
}

#define F32 CLATTN_F32
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16
#define LCASE(name, ...)                                                                           \
  Test(varlen, name) {                                                                             \
    lcase v = {__VA_ARGS__};                                                                       \
    check_case(&v);                                                                                \
  }

/*    name              dtype b hq hkv nq nkv  d dv flags left right cap bhsd off alibi sinks */
LCASE(plain, F32, 4, 2, 0, 37, 61, 32, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0)
LCASE(causal, F32, 5, 2, 0, 45, 45, 24, 0, C, 0, 0, 0.0f, 0, 0, 0, 0)
LCASE(causal_window_gqa_dv, F32, 4, 4, 2, 40, 70, 32, 16, C | W, 12, 0, 0.0f, 0, 3, 0, 0)
LCASE(window_bhsd, F32, 4, 2, 0, 33, 50, 17, 0, W, 6, 4, 0.0f, 1, 0, 0, 0)
LCASE(top_left_softcap, F32, 4, 3, 0, 50, 30, 40, 0, TL, 0, 0, 3.0f, 0, 0, 0, 0)
LCASE(alibi_sinks_causal, F32, 5, 2, 1, 29, 41, 32, 0, C, 0, 0, 0.0f, 0, 0, 2, 1)
/* Half storage: two shapes per dtype. */
LCASE(f16_causal_gqa, F16, 4, 4, 2, 35, 50, 64, 0, C, 0, 0, 0.0f, 0, 0, 0, 0)
LCASE(f16_window_sinks, F16, 4, 2, 0, 30, 40, 32, 0, W, 8, 8, 0.0f, 0, 0, 0, 1)
LCASE(bf16_alibi_causal, BF16, 4, 2, 0, 33, 47, 48, 0, C, 0, 0, 0.0f, 0, 0, 1, 0)
LCASE(bf16_top_left_window, BF16, 4, 2, 2, 28, 28, 32, 0, TL | W, 5, 0, 0.0f, 1, 0, 0, 0)

/* Device ranges out of bounds (fp32, B = 3 sequences of 4, 5, 3 queries over 6, 6, 3 keys
 * packed in 12 query and 15 key rows): sequence 1's key range ends past total_kv, so its rows
 * see no key (O = 0, LSE = -inf); sequence 2's query range ends past total_q, so it writes
 * nothing (its rows stay NaN); sequence 0 is computed as usual; nothing outside O and LSE is
 * written. */
Test(varlen, device_ranges_out_of_bounds) {
  clattn_context *ctx = test_context(NULL);
  enum { B = 3, H = 2, D = 8, TQ = 12, TKV = 15, GUARD = 8 };
  clattn_problem p = {B, H, 0, 5, 6, D, 0, CLATTN_F32, 0.0f, CLATTN_VARLEN};
  p.total_q = TQ, p.total_kv = TKV;
  int cu_q[B + 1] = {0, 4, 9, 99}, cu_kv[B + 1] = {0, 6, 40, 15};
  size_t nq = TQ * H * D, nkv = TKV * H * D;
  cl_mem q = test_buffer(ctx, nq, 0.5f), k = test_buffer(ctx, nkv, 0.25f),
         v = test_buffer(ctx, nkv, 2.0f), o = test_buffer(ctx, nq + GUARD, NAN),
         lse = test_buffer(ctx, TQ * H + GUARD, NAN);
  cl_int err;
  cl_context cl = clattn_context_cl_context(ctx);
  cl_mem cq = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cu_q, cu_q, &err);
  cl_mem ck =
      clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cu_kv, cu_kv, &err);
  clattn_args a = {0};
  a.q = clattn_bshd(q, TQ, H, D), a.k = clattn_bshd(k, TKV, H, D), a.v = clattn_bshd(v, TKV, H, D);
  a.o = clattn_bshd(o, TQ, H, D), a.lse = lse, a.cu_seqlens_q = cq, a.cu_seqlens_kv = ck;
  cr_assert_eq(clattn_forward_ex(ctx, &p, &a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  float ho[nq + GUARD], hl[TQ * H + GUARD];
  cl_command_queue queue = clattn_context_queue(ctx);
  cr_assert_eq(clEnqueueReadBuffer(queue, o, CL_TRUE, 0, sizeof ho, ho, 0, NULL, NULL), 0);
  cr_assert_eq(clEnqueueReadBuffer(queue, lse, CL_TRUE, 0, sizeof hl, hl, 0, NULL, NULL), 0);
  /* Every value of V is 2 and every score equal: a row that sees keys gets O = 2 exactly, and
   * LSE = scale q.k + log(keys) = 0.5 * 0.25 * D / sqrt(D) + log 6. */
  double lse0 = 0.5 * 0.25 * D / sqrt((double)D) + log(6.0);
  for (size_t t = 0; t < TQ; t++)
    for (size_t h = 0; h < H; h++) {
      float want_o = t < 4 ? 2.0f : t < 9 ? 0.0f : NAN;
      for (size_t c = 0; c < D; c++) {
        float x = ho[(t * H + h) * D + c];
        if (isnan(want_o))
          cr_expect(isnan(x), "token %zu (in no valid sequence) was written: %g", t, x);
        else
          cr_expect_float_eq(x, want_o, 1e-6, "token %zu head %zu: O %g, want %g", t, h, x, want_o);
      }
      float l = hl[h * TQ + t];
      if (t < 4)
        cr_expect_float_eq(l, lse0, 1e-5, "token %zu head %zu: LSE %g, want %g", t, h, l, lse0);
      else if (t < 9)
        cr_expect(isinf(l) && l < 0, "token %zu (no keys): LSE %g, want -inf", t, l);
      else
        cr_expect(isnan(l), "token %zu (in no valid sequence): LSE %g written", t, l);
    }
  for (int g = 0; g < GUARD; g++) {
    cr_expect(isnan(ho[nq + g]), "O's guard %d written", g);
    cr_expect(isnan(hl[TQ * H + g]), "LSE's guard %d written", g);
  }
  cl_mem m[7] = {q, k, v, o, lse, cq, ck};
  for (int i = 0; i < 7; i++) clReleaseMemObject(m[i]);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}
