/* The backward pass against the double-precision reference under DESIGN.md's gradient rule
 * (max|g - ref| <= 3 * max|naive - ref| + 1e-6, the naive in the same storage; half: + 1e-4) on
 * the forward shape list; the reference itself against finite differences; determinism; bad
 * input. */
#include "common.h"

#include <math.h>

/* tests/CMakeLists.txt builds this file several times: for the fused backward (suite "backward");
 * with TEST_STANDARD, for the standard path's (suite "standard_backward"); with TEST_MMA, for the
 * tensor-core kernels backward_mma, forced on every shape they support (head dims up to 128) and
 * run with mma.sync emulated (CLATTN_MMA_EMULATE) where the device has no tensor cores. With
 * TEST_HALF each of them in half storage, fp16 on the whole list and bf16 on a few shapes:
 * suites "backward_half" (the device's plan), "standard_backward_half" and "backward_mma_half"
 * (backward_mma_half forced). */
#ifdef TEST_HALF
#define STORAGE CLATTN_F16
#define MMA_KERNEL "backward_mma_half"
#else
#define STORAGE CLATTN_F32
#define MMA_KERNEL "backward_mma"
#endif
#if defined(TEST_HALF) && defined(TEST_STANDARD)
#define SUITE standard_backward_half
#define ALGORITHM CLATTN_ALGO_STANDARD
#elif defined(TEST_HALF) && defined(TEST_MMA)
#define SUITE backward_mma_half
#define ALGORITHM CLATTN_ALGO_FUSED
#elif defined(TEST_HALF)
#define SUITE backward_half
#define ALGORITHM CLATTN_ALGO_FUSED
#elif defined(TEST_STANDARD)
#define SUITE standard_backward
#define ALGORITHM CLATTN_ALGO_STANDARD
#elif defined(TEST_MMA)
#define SUITE backward_mma
#define ALGORITHM CLATTN_ALGO_FUSED
#else
#define SUITE backward
#define ALGORITHM CLATTN_ALGO_FUSED
#endif
#ifdef TEST_MMA
/* Before Criterion forks its tests, so that every context sees it. */
__attribute__((constructor)) static void emulate_mma(void) {
  setenv("CLATTN_MMA_EMULATE", "1", 1);
}
#endif
#include <stdlib.h>
#include <string.h>

typedef struct {
  clattn_problem p;     /* its dtype is the buffers' storage; host copies hold the rounded values */
  size_t hkv, dv, n[8]; /* element counts: q k v o do dq dk dv (each buffer has GUARD more) */
  float *host[5];       /* q k v o(unused) d_o */
  cl_mem buf[8], lse;   /* q k v o d_o dq dk dv */
  clattn_tensor view[8];
} grads;

enum { Q, K, V, O, DO, DQ, DK, DV };
/* NaN elements after each buffer, which no call may write. */
enum { GUARD = 16 };

/* The outputs (O, LSE, the gradients) start NaN in their storage, so that an element a call
 * leaves unwritten fails the comparison instead of passing on what the buffer held. */
static void fill_nan(clattn_context *ctx, clattn_dtype t, cl_mem buf, size_t n) {
  float nan = NAN;
  uint16_t bits = t == CLATTN_F32 ? 0 : ref_half_bits(t, NAN);
  size_t size = check_elem_size(t);
  cr_assert_eq(clEnqueueFillBuffer(clattn_context_queue(ctx), buf,
                                   t == CLATTN_F32 ? (void *)&nan : (void *)&bits, size, 0,
                                   n * size, 0, NULL, NULL),
               CL_SUCCESS);
  clFinish(clattn_context_queue(ctx));
}

/* Packed tensors (bshd, or bhsd), offset elements before each; forward, then backward. */
static void setup(grads *g, clattn_context *ctx, const clattn_problem *p, int bhsd, size_t offset) {
  memset(g, 0, sizeof *g);
  g->p = *p;
  g->hkv = p->heads_kv ? p->heads_kv : p->heads_q;
  g->dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  size_t seq[8] = {p->seqlen_q, p->seqlen_kv, p->seqlen_kv, p->seqlen_q,
                   p->seqlen_q, p->seqlen_q,  p->seqlen_kv, p->seqlen_kv};
  size_t heads[8] = {p->heads_q, g->hkv,     g->hkv, p->heads_q,
                     p->heads_q, p->heads_q, g->hkv, g->hkv};
  size_t dim[8] = {p->head_dim, p->head_dim, g->dv, g->dv, g->dv, p->head_dim, p->head_dim, g->dv};
  uint64_t rng = 99;
  cl_int err;
  for (int t = 0; t < 8; t++) {
    size_t n = offset + p->batch * seq[t] * heads[t] * dim[t];
    g->n[t] = n;
    float *host = malloc((n + GUARD) * sizeof *host);
    ref_fill_normal(host, n, &rng);
    for (size_t i = 0; i < n; i++) host[i] = ref_round(p->dtype, host[i]);
    if (t == O || t >= DQ)
      for (size_t i = 0; i < n; i++) host[i] = NAN;
    for (size_t i = n; i < n + GUARD; i++) host[i] = NAN;
    void *bits = check_pack(p->dtype, host, n + GUARD);
    g->buf[t] = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_COPY_HOST_PTR,
                               (n + GUARD) * check_elem_size(p->dtype), bits ? bits : host, &err);
    free(bits);
    cr_assert_eq(err, CL_SUCCESS);
    g->view[t] = bhsd ? clattn_bhsd(g->buf[t], seq[t], heads[t], dim[t])
                      : clattn_bshd(g->buf[t], seq[t], heads[t], dim[t]);
    g->view[t].offset = offset;
    if (t < 5)
      g->host[t] = host;
    else
      free(host);
  }
  size_t rows = p->batch * p->heads_q * p->seqlen_q;
  g->lse = test_buffer(ctx, rows + GUARD, NAN);
  cr_assert_eq(clattn_forward(ctx, p, &g->view[Q], &g->view[K], &g->view[V], &g->view[O], g->lse, 0,
                              NULL, NULL),
               CLATTN_OK, "%s", clattn_last_error(ctx));
}

static void backward(grads *g, clattn_context *ctx) {
  cl_event done = NULL;
  cr_assert_eq(clattn_backward(ctx, &g->p, &g->view[Q], &g->view[K], &g->view[V], &g->view[O],
                               &g->view[DO], g->lse, &g->view[DQ], &g->view[DK], &g->view[DV], 0,
                               NULL, &done),
               CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_not_null(done);
  clWaitForEvents(1, &done);
  clReleaseEvent(done);
}

/* n elements of storage t, widened to floats. */
static float *read(clattn_context *ctx, clattn_dtype t, cl_mem m, size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  if (n) cr_assert_eq(check_read(clattn_context_queue(ctx), m, t, x, n, 0, NULL), CL_SUCCESS);
  return x;
}

static void release(grads *g) {
  for (int t = 0; t < 8; t++) clReleaseMemObject(g->buf[t]);
  for (int t = 0; t < 5; t++) free(g->host[t]);
  clReleaseMemObject(g->lse);
}

static ref_view hv(const grads *g, int t) {
  ref_view r = {g->host[t], g->view[t].offset, g->view[t].stride_batch, g->view[t].stride_seq,
                g->view[t].stride_head};
  return r;
}

/* max |device - ref| and |naive - ref| over a gradient, gathering the device's strided view of
 * its n elements (and GUARD after them); *untouched: every element outside the view is still
 * NaN. */
static void compare(const grads *g, const float *dev, size_t n, const clattn_tensor *view,
                    size_t heads, size_t seq, size_t dim, const double *ref, const float *naive,
                    double *err, double *nerr, int *untouched) {
  *err = 0, *nerr = 0;
  char *in = calloc(n + GUARD, 1);
  for (size_t b = 0; b < g->p.batch; b++)
    for (size_t h = 0; h < heads; h++)
      for (size_t i = 0; i < seq; i++)
        for (size_t c = 0; c < dim; c++) {
          size_t r = ((b * heads + h) * seq + i) * dim + c;
          size_t at = view->offset + b * view->stride_batch + i * view->stride_seq +
                      h * view->stride_head + c;
          in[at] = 1;
          *err = test_err(*err, dev[at], ref[r]);
          *nerr = test_naive_err(*nerr, naive[r], ref[r]);
        }
  *untouched = 1;
  for (size_t i = 0; i < n + GUARD; i++) *untouched &= in[i] || isnan(dev[i]);
  free(in);
}

/* The gradients the last backward wrote against the references. */
static void expect_right(const grads *g, clattn_context *ctx) {
  const clattn_problem *p = &g->p;
  size_t nq = p->batch * p->heads_q * p->seqlen_q * p->head_dim;
  size_t nk = p->batch * g->hkv * p->seqlen_kv * p->head_dim,
         nv = p->batch * g->hkv * p->seqlen_kv * g->dv;
  double *rq = malloc((nq + 1) * 8), *rk = malloc((nk + 1) * 8), *rv = malloc((nv + 1) * 8);
  float *fq = malloc((nq + 1) * 4), *fk = malloc((nk + 1) * 4), *fv = malloc((nv + 1) * 4);
  ref_backward_f64(p, hv(g, Q), hv(g, K), hv(g, V), hv(g, DO), rq, rk, rv);
  ref_backward_f32(p, hv(g, Q), hv(g, K), hv(g, V), hv(g, DO), fq, fk, fv);
  const char *names[] = {"dq", "dk", "dv"};
  int outs[] = {DQ, DK, DV};
  size_t heads[] = {p->heads_q, g->hkv, g->hkv}, seqs[] = {p->seqlen_q, p->seqlen_kv, p->seqlen_kv},
         dims[] = {p->head_dim, p->head_dim, g->dv};
  double *refs[] = {rq, rk, rv};
  float *naive[] = {fq, fk, fv};
  for (int i = 0; i < 3; i++) {
    float *dev = read(ctx, p->dtype, g->buf[outs[i]], g->n[outs[i]] + GUARD);
    double err, nerr;
    int untouched;
    compare(g, dev, g->n[outs[i]], &g->view[outs[i]], heads[i], seqs[i], dims[i], refs[i], naive[i],
            &err, &nerr, &untouched);
    cr_expect_leq(err, 3 * nerr + ref_tolerance_floor(p->dtype), "%s: error %g, naive %s %g",
                  names[i], err,
                  p->dtype == CLATTN_F32   ? "fp32"
                  : p->dtype == CLATTN_F16 ? "fp16"
                                           : "bf16",
                  nerr);
    cr_expect(untouched, "%s: an element outside the gradient (offset, guard) was written",
              names[i]);
    free(dev);
  }
  free(rq), free(rk), free(rv), free(fq), free(fk), free(fv);
}

/* With cfg, the backward's blocks are forced by an override first. */
static void check_shape(const clattn_problem *p, int bhsd, size_t offset,
                        const clattn_config *cfg) {
  clattn_context *ctx = test_context(NULL);
  if (cfg) {
    cr_assert_eq(clattn_override_config(ctx, p, cfg), CLATTN_OK, "%s", clattn_last_error(ctx));
    clattn_plan_info info;
    cr_assert_eq(clattn_explain(ctx, p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
    cr_assert_str_eq(info.backward_origin, "override");
    cr_assert_eq(info.backward.block_q, cfg->block_q);
  }
  grads g;
  setup(&g, ctx, p, bhsd, offset);
  backward(&g, ctx);
  expect_right(&g, ctx);
  release(&g);
  clattn_context_destroy(ctx);
}

static void run_in(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d,
                   size_t dv, unsigned flags, int bhsd, size_t offset) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, t, 0.0f, flags, ALGORITHM};
#ifdef TEST_MMA
  /* Two warps in each kernel, four 8-row steps per staged query block. */
  clattn_config mma = {.kernel = MMA_KERNEL, .block_q = 32, .block_kv = 32};
  check_shape(&p, bhsd, offset, d <= 128 && (dv ? dv : d) <= 128 ? &mma : NULL);
#else
  check_shape(&p, bhsd, offset, NULL);
#endif
}

static void run(size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv, size_t d, size_t dv,
                unsigned flags, int bhsd, size_t offset) {
  run_in(STORAGE, b, hq, hkv, nq, nkv, d, dv, flags, bhsd, offset);
}

#define C CLATTN_CAUSAL
/*                         b  hq hkv  nq   nkv    d   dv flags bhsd off */
Test(SUITE, d1_len1) {
  run(1, 1, 0, 1, 1, 1, 0, 0, 0, 0);
}
Test(SUITE, d59_len17) {
  run(2, 3, 0, 17, 17, 59, 0, 0, 0, 0);
}
Test(SUITE, d111_113x203_bhsd) {
  run(1, 2, 0, 113, 203, 111, 0, 0, 1, 0);
}
Test(SUITE, d256_80x64) {
  run(1, 2, 0, 80, 64, 256, 0, 0, 0, 0);
}
Test(SUITE, d64_1023x1024_causal) {
  run(1, 1, 0, 1023, 1024, 64, 0, C, 1, 0);
}
Test(SUITE, causal_q_shorter) {
  run(1, 2, 0, 113, 203, 64, 0, C, 0, 0);
}
Test(SUITE, causal_q_longer) {
  run(1, 2, 0, 203, 113, 64, 0, C, 0, 0);
}
Test(SUITE, causal_rows_without_keys) {
  run(1, 1, 0, 50, 10, 16, 0, C, 0, 0);
}
Test(SUITE, empty_kv) {
  run(2, 2, 0, 7, 0, 32, 0, 0, 0, 0);
}
Test(SUITE, empty_queries_zero_dk_dv) {
  run(1, 2, 0, 0, 9, 8, 0, 0, 0, 0);
}
Test(SUITE, dv_larger) {
  run(1, 2, 0, 45, 61, 32, 100, 0, 0, 0);
}
Test(SUITE, dv_smaller_causal) {
  run(1, 2, 0, 61, 45, 100, 32, C, 1, 0);
}
Test(SUITE, gqa_sums_over_group) {
  run(2, 8, 2, 129, 129, 64, 0, 0, 0, 0);
}
Test(SUITE, mqa_causal_bhsd) {
  run(1, 4, 1, 77, 77, 32, 0, C, 1, 0);
}
Test(SUITE, offset_bshd) {
  run(2, 3, 0, 33, 41, 40, 0, 0, 0, 37);
}
Test(SUITE, decode_one_query) {
  run(2, 4, 0, 1, 300, 128, 0, C, 0, 0);
}
Test(SUITE, d256_causal_gqa_offset) {
  run(1, 2, 1, 130, 130, 256, 0, C, 1, 3);
}

#ifdef TEST_HALF
/* bf16 on a few shapes of the list's kinds (fp16 has all of them above). */
Test(SUITE, bf16_d59_len17) {
  run_in(CLATTN_BF16, 2, 3, 0, 17, 17, 59, 0, 0, 0, 0);
}
Test(SUITE, bf16_causal_gqa_offset_bhsd) {
  run_in(CLATTN_BF16, 1, 4, 2, 77, 93, 24, 40, C, 1, 5);
}
Test(SUITE, bf16_d128_causal_q_shorter) {
  run_in(CLATTN_BF16, 1, 2, 0, 113, 203, 128, 0, C, 0, 0);
}
Test(SUITE, bf16_decode_one_query) {
  run_in(CLATTN_BF16, 2, 4, 1, 1, 300, 64, 0, C, 0, 0);
}
#endif

#ifndef TEST_STANDARD
/* Unequal blocks, either way round, on causal GQA with partial blocks: bwd_dq's work-group and
 * bwd_dkdv's staged rows are BQ, bwd_dkdv's work-group and bwd_dq's staged keys BKV. */
Test(SUITE, forced_blocks) {
  clattn_problem p = {2, 4, 2, 77, 93, 24, 40, STORAGE, 0.0f, C, ALGORITHM};
#ifdef TEST_MMA
  clattn_config tall = {.kernel = MMA_KERNEL, .block_q = 16, .block_kv = 64};
  clattn_config wide = {.kernel = MMA_KERNEL, .block_q = 64, .block_kv = 16};
#else
  clattn_config tall = {.kernel = "backward_rows", .block_q = 4, .block_kv = 128};
  clattn_config wide = {.kernel = "backward_rows", .block_q = 128, .block_kv = 8};
#endif
  check_shape(&p, 0, 0, &tall);
  check_shape(&p, 1, 0, &wide);
}
#endif

#if defined(TEST_MMA) && defined(TEST_HALF)
/* The staged blocks in 16-byte copies (head dims multiples of 16; emulated: plain copies) and two
 * stages, the next block's copies in flight while one computes: bwd_dkdv's across a GQA group's
 * heads, with more LSE rows than work-items (BKV 16); 16-byte aligned views (cp.async) and views
 * at an odd offset (copied through registers); odd lengths, so partial last blocks. */
static void run_staged(clattn_dtype t, size_t b, size_t hq, size_t hkv, size_t nq, size_t nkv,
                       size_t d, size_t dv, unsigned flags, int bhsd, size_t offset, unsigned bq,
                       unsigned bkv) {
  clattn_problem p = {b, hq, hkv, nq, nkv, d, dv, t, 0.0f, flags, ALGORITHM};
  clattn_config c = {.kernel = MMA_KERNEL, .block_q = bq, .block_kv = bkv};
  check_shape(&p, bhsd, offset, &c);
}
/*                                                b hq hkv  nq  nkv   d  dv flags bhsd off BQ BKV */
Test(SUITE, stage_f16_gqa_causal_aligned) {
  run_staged(CLATTN_F16, 2, 4, 2, 131, 197, 64, 32, C, 0, 8, 32, 16);
}
Test(SUITE, stage_bf16_causal_q_longer_unaligned_bhsd) {
  run_staged(CLATTN_BF16, 1, 2, 1, 150, 77, 64, 64, C, 1, 5, 16, 32);
}
#endif

/* Bitwise identical gradients over 20 runs, each into buffers that start NaN, written whole;
 * the first against the references (identical wrong gradients would pass otherwise). */
Test(SUITE, deterministic) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {2, 4, 2, 97, 131, 48, 40, STORAGE, 0.0f, C, ALGORITHM};
  grads g;
  setup(&g, ctx, &p, 0, 0);
  float *first[3] = {0};
  for (int run = 0; run < 20; run++) {
    for (int i = 0; i < 3; i++) fill_nan(ctx, p.dtype, g.buf[DQ + i], g.n[DQ + i]);
    backward(&g, ctx);
    if (run == 0) expect_right(&g, ctx);
    for (int i = 0; i < 3; i++) {
      float *x = read(ctx, p.dtype, g.buf[DQ + i], g.n[DQ + i]);
      for (size_t e = 0; e < g.n[DQ + i]; e++)
        cr_assert(isfinite(x[e]), "run %d: gradient %d element %zu is %g", run, i, e, x[e]);
      if (!first[i])
        first[i] = x;
      else {
        cr_assert(!memcmp(x, first[i], g.n[DQ + i] * sizeof *x), "run %d differs in %s", run,
                  i == 0   ? "dq"
                  : i == 1 ? "dk"
                           : "dv");
        free(x);
      }
    }
  }
  for (int i = 0; i < 3; i++) free(first[i]);
  release(&g);
  clattn_context_destroy(ctx);
}

/* The double reference against central finite differences of L = sum(O o G), on tiny shapes
 * (GQA, causal with a row that sees no key, d != dv). */
__attribute__((unused)) static double loss(const clattn_problem *p, ref_view q, ref_view k,
                                           ref_view v, const float *gr) {
  size_t dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  size_t n = p->batch * p->heads_q * p->seqlen_q * dv;
  double *o = malloc(n * sizeof *o), l = 0;
  ref_forward_f64(p, q, k, v, o, NULL);
  for (size_t i = 0; i < n; i++) l += o[i] * gr[i];
  free(o);
  return l;
}

#ifndef TEST_HALF /* host-only and the same in every suite: the fp32 suites have them */
Test(SUITE, reference_matches_finite_differences) {
  clattn_problem p = {1, 2, 1, 4, 3, 3, 2, CLATTN_F32, 0.7f, C};
  size_t nq = 1 * 4 * 2 * 3, nk = 1 * 3 * 1 * 3, nv = 1 * 3 * 1 * 2, no = 1 * 2 * 4 * 2;
  float q[24], k[9], v[6], gpk[16];
  uint64_t rng = 7;
  ref_fill_normal(q, nq, &rng), ref_fill_normal(k, nk, &rng), ref_fill_normal(v, nv, &rng);
  /* G in the references' packed [b][h][i][c] order for the loss, and as a bshd view for dO. */
  float gbshd[16];
  ref_fill_normal(gbshd, no, &rng);
  for (size_t h = 0; h < 2; h++)
    for (size_t i = 0; i < 4; i++)
      for (size_t c = 0; c < 2; c++) gpk[(h * 4 + i) * 2 + c] = gbshd[(i * 2 + h) * 2 + c];
  ref_view vq = {q, 0, 24, 6, 3}, vk = {k, 0, 9, 3, 3}, vv = {v, 0, 6, 2, 2},
           vg = {gbshd, 0, 16, 4, 2};
  double dq[24], dk[9], dv[6];
  ref_backward_f64(&p, vq, vk, vv, vg, dq, dk, dv);
  float *xs[] = {q, k, v};
  size_t ns[] = {nq, nk, nv};
  double *grads_[] = {dq, dk, dv};
  for (int t = 0; t < 3; t++)
    for (size_t e = 0; e < ns[t]; e++) {
      float keep = xs[t][e];
      xs[t][e] = keep + 1e-3f;
      double hi = (double)xs[t][e], lp = loss(&p, vq, vk, vv, gpk);
      xs[t][e] = keep - 1e-3f;
      double lo = (double)xs[t][e], lm = loss(&p, vq, vk, vv, gpk);
      xs[t][e] = keep;
      double fd = (lp - lm) / (hi - lo);
      /* The gradients come packed [b][h][s][d]; the inputs here are bshd with one batch. */
      size_t heads = t == 0 ? 2 : 1, dim = t == 2 ? 2 : 3, seq = t == 0 ? 4 : 3;
      size_t s = e / (heads * dim), h = e / dim % heads, c = e % dim;
      double an = grads_[t][(h * seq + s) * dim + c];
      cr_assert(fabs(fd - an) <= 1e-5 * (1 + fabs(an)),
                "tensor %d element %zu: fd %.9g, analytic %.9g", t, e, fd, an);
    }
}

Test(SUITE, bad_input) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {1, 2, 0, 16, 16, 8, 0, CLATTN_F32, 0.0f, 0};
  grads g;
  setup(&g, ctx, &p, 0, 0);
  cl_event done = (cl_event)1;
  clattn_status st =
      clattn_backward(ctx, &p, &g.view[Q], &g.view[K], &g.view[V], &g.view[O], &g.view[DO], NULL,
                      &g.view[DQ], &g.view[DK], &g.view[DV], 0, NULL, &done);
  cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_null(done);
  cr_assert(strstr(clattn_last_error(ctx), "lse is NULL"), "%s", clattn_last_error(ctx));
  cl_mem small = test_buffer(ctx, 4, 0.0f);
  st = clattn_backward(ctx, &p, &g.view[Q], &g.view[K], &g.view[V], &g.view[O], &g.view[DO], small,
                       &g.view[DQ], &g.view[DK], &g.view[DV], 0, NULL, NULL);
  cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "lse"), "%s", clattn_last_error(ctx));
  clattn_tensor short_do = g.view[DO];
  short_do.offset = GUARD + 10; /* past the guard too */
  st = clattn_backward(ctx, &p, &g.view[Q], &g.view[K], &g.view[V], &g.view[O], &short_do, g.lse,
                       &g.view[DQ], &g.view[DK], &g.view[DV], 0, NULL, NULL);
  cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "d_o"), "%s", clattn_last_error(ctx));
  st = clattn_backward(ctx, &p, &g.view[Q], &g.view[K], &g.view[V], &g.view[O], &g.view[DO], g.lse,
                       &g.view[DQ], &g.view[DQ], &g.view[DV], 0, NULL, NULL);
  cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "overlaps"), "%s", clattn_last_error(ctx));
  st = clattn_backward(ctx, &p, &g.view[Q], &g.view[K], &g.view[V], &g.view[O], &g.view[DO], g.lse,
                       &g.view[Q], &g.view[DK], &g.view[DV], 0, NULL, NULL);
  cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "dq overlaps q"), "%s", clattn_last_error(ctx));
  clReleaseMemObject(small);
  release(&g);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}
#endif
