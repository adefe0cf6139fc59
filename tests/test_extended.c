/* The extended entry points clattn_forward_ex and clattn_backward_ex (clattn_args) and the
 * variants' fields of clattn_problem: the extended calls compute exactly what clattn_forward and
 * clattn_backward do (bitwise, outputs starting NaN and checked whole); the variants' values are
 * checked (INVALID_ARGUMENT), and so are ALiBi's slopes, the sinks, seqlens_kv and varlen's
 * arrays against their sizes and the outputs (the standard path refuses varlen: UNSUPPORTED); every
 * refusal leaves the outputs untouched and the context usable. The variants' results are checked
 * against the reference by suite variants. */
#include "common.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, H = 3, NQ = 37, NKV = 45, D = 24, BUFS = 8 };
enum { Q, K, V, O, DO, DQ, DK, DV };

typedef struct {
  clattn_context *ctx;
  clattn_problem p;
  cl_mem buf[BUFS], lse;
  size_t n[BUFS];
  clattn_args a;
} fixture;

static cl_mem upload(clattn_context *ctx, size_t n, uint64_t seed) {
  float *x = malloc(n * sizeof *x);
  ref_fill_normal(x, n, &seed);
  cl_int err;
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx),
                            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *x, x, &err);
  cr_assert_eq(err, CL_SUCCESS);
  free(x);
  return m;
}

/* Causal GQA-free problem with packed bshd tensors; outputs (O, LSE, gradients) start NaN. */
static fixture make(void) {
  fixture f;
  memset(&f, 0, sizeof f);
  f.ctx = test_context(NULL);
  f.p = (clattn_problem){B, H, 0, NQ, NKV, D, 0, CLATTN_F32, 0.0f, CLATTN_CAUSAL};
  size_t seq[BUFS] = {NQ, NKV, NKV, NQ, NQ, NQ, NKV, NKV};
  clattn_tensor *views[BUFS] = {&f.a.q,   &f.a.k,  &f.a.v,  &f.a.o,
                                &f.a.d_o, &f.a.dq, &f.a.dk, &f.a.dv};
  for (int t = 0; t < BUFS; t++) {
    f.n[t] = (size_t)B * seq[t] * H * D;
    f.buf[t] = t == O || t >= DQ ? test_buffer(f.ctx, f.n[t], NAN) : upload(f.ctx, f.n[t], 11 + t);
    *views[t] = clattn_bshd(f.buf[t], seq[t], H, D);
  }
  f.lse = test_buffer(f.ctx, (size_t)B * H * NQ, NAN);
  f.a.lse = f.lse;
  return f;
}

static float *read_all(const fixture *f, cl_mem m, size_t n) {
  float *x = malloc(n * sizeof *x);
  cr_assert_eq(clEnqueueReadBuffer(clattn_context_queue(f->ctx), m, CL_TRUE, 0, n * sizeof *x, x, 0,
                                   NULL, NULL),
               CL_SUCCESS);
  return x;
}

static void refill_nan(fixture *f) {
  float nan = NAN;
  cl_command_queue q = clattn_context_queue(f->ctx);
  for (int t = 0; t < BUFS; t++)
    if (t == O || t >= DQ)
      clEnqueueFillBuffer(q, f->buf[t], &nan, sizeof nan, 0, f->n[t] * sizeof nan, 0, NULL, NULL);
  clEnqueueFillBuffer(q, f->lse, &nan, sizeof nan, 0, (size_t)B * H * NQ * sizeof nan, 0, NULL,
                      NULL);
  clFinish(q);
}

static void done_with(fixture *f) {
  for (int t = 0; t < BUFS; t++) clReleaseMemObject(f->buf[t]);
  clReleaseMemObject(f->lse);
  clattn_context_destroy(f->ctx);
}

/* The outputs after a call of each entry point: O, LSE, dQ, dK, dV (every element finite). */
static void outputs(const fixture *f, float *out[5]) {
  int t[5] = {O, -1, DQ, DK, DV};
  for (int i = 0; i < 5; i++) {
    size_t n = t[i] < 0 ? (size_t)B * H * NQ : f->n[t[i]];
    out[i] = read_all(f, t[i] < 0 ? f->lse : f->buf[t[i]], n);
    for (size_t e = 0; e < n; e++)
      cr_assert(isfinite(out[i][e]), "output %d element %zu is %g (unwritten?)", i, e, out[i][e]);
  }
}

static void run(fixture *f, int extended) {
  const clattn_args *a = &f->a;
  clattn_status st =
      extended ? clattn_forward_ex(f->ctx, &f->p, a, 0, NULL, NULL)
               : clattn_forward(f->ctx, &f->p, &a->q, &a->k, &a->v, &a->o, a->lse, 0, NULL, NULL);
  cr_assert_eq(st, CLATTN_OK, "%s", clattn_last_error(f->ctx));
  st = extended ? clattn_backward_ex(f->ctx, &f->p, a, 0, NULL, NULL)
                : clattn_backward(f->ctx, &f->p, &a->q, &a->k, &a->v, &a->o, &a->d_o, a->lse,
                                  &a->dq, &a->dk, &a->dv, 0, NULL, NULL);
  cr_assert_eq(st, CLATTN_OK, "%s", clattn_last_error(f->ctx));
  clFinish(clattn_context_queue(f->ctx));
}

/* The extended calls are the plain ones: the same O, LSE and gradients, bit for bit (the plain
 * calls' results are checked against the reference by the forward and backward suites). */
Test(extended, same_results_as_the_plain_calls) {
  fixture f = make();
  float *plain[5], *ext[5];
  run(&f, 0);
  outputs(&f, plain);
  refill_nan(&f);
  run(&f, 1);
  outputs(&f, ext);
  size_t n[5] = {f.n[O], (size_t)B * H * NQ, f.n[DQ], f.n[DK], f.n[DV]};
  for (int i = 0; i < 5; i++) {
    cr_assert(!memcmp(plain[i], ext[i], n[i] * sizeof(float)), "output %d differs", i);
    free(plain[i]), free(ext[i]);
  }
  done_with(&f);
}

/* A refused call: its status, a message naming the cause, no event, O untouched (still NaN);
 * then the context still works. */
static void expect_refused(fixture *f, int backward, clattn_status want, const char *needle) {
  refill_nan(f);
  cl_event done = (cl_event)(uintptr_t)1;
  clattn_status st = backward ? clattn_backward_ex(f->ctx, &f->p, &f->a, 0, NULL, &done)
                              : clattn_forward_ex(f->ctx, &f->p, &f->a, 0, NULL, &done);
  const char *msg = clattn_last_error(f->ctx);
  cr_assert_eq(st, want, "got %s, want %s (%s)", clattn_status_string(st),
               clattn_status_string(want), msg);
  cr_assert_null(done, "*done must be NULL on error");
  cr_assert(strstr(msg, needle), "message \"%s\" should mention \"%s\"", msg, needle);
  float *o = read_all(f, f->buf[backward ? DQ : O], 1);
  cr_assert(isnan(o[0]), "an output was written by a refused call");
  free(o);
  test_context_still_works(f->ctx);
}

Test(extended, null_args_rejected) {
  fixture f = make();
  cl_event done = (cl_event)(uintptr_t)1;
  cr_assert_eq(clattn_forward_ex(f.ctx, &f.p, NULL, 0, NULL, &done), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_null(done);
  cr_assert(strstr(clattn_last_error(f.ctx), "args is NULL"));
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, NULL, 0, NULL, NULL), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_eq(clattn_forward_ex(NULL, &f.p, &f.a, 0, NULL, NULL), CLATTN_ERR_INVALID_ARGUMENT);
  /* An absent required tensor is named as clattn_forward names a NULL buffer. */
  f.a.v.buffer = NULL;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "v.buffer is NULL");
  done_with(&f);
}

/* CLATTN_VARLEN and its members: each without the other, the totals without the flag, seqlens_kv
 * beside it, arrays too small or over an output are refused by name (INVALID_ARGUMENT), the
 * views are checked as [total][heads][dim] first, and the standard path refuses it
 * (UNSUPPORTED, naming it). Device values out of range are suite varlen's. */
Test(extended, varlen_members_rejected) {
  fixture f = make();
  cl_mem cu = test_buffer(f.ctx, B + 1, 0.0f), small = test_buffer(f.ctx, B, 0.0f);
  f.a.cu_seqlens_q = cu;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "flags lack CLATTN_VARLEN");
  f.a.cu_seqlens_q = NULL, f.p.total_q = NQ;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "lack CLATTN_VARLEN");
  f.p.flags |= CLATTN_VARLEN, f.p.total_kv = NKV;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "args.cu_seqlens_q is NULL");
  f.a.cu_seqlens_q = cu;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "args.cu_seqlens_kv is NULL");
  f.a.cu_seqlens_kv = small;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_kv: the view needs");
  f.a.cu_seqlens_kv = f.lse;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_kv overlaps lse");
  f.a.cu_seqlens_kv = cu, f.a.seqlens_kv = small;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "seqlens_kv with CLATTN_VARLEN");
  f.a.seqlens_kv = NULL, f.p.total_q = (size_t)B * NQ * 4; /* past q's buffer */
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "q: the view needs");
  f.p.total_q = (size_t)1 << 31; /* int32 offsets, 32-bit row counts */
  expect_refused(&f, 0, CLATTN_ERR_UNSUPPORTED, "below 2^31");
  f.p.total_q = NQ, f.p.algorithm = CLATTN_ALGO_STANDARD;
  expect_refused(&f, 0, CLATTN_ERR_UNSUPPORTED, "CLATTN_VARLEN");
  expect_refused(&f, 1, CLATTN_ERR_UNSUPPORTED, "CLATTN_VARLEN");
  clReleaseMemObject(cu), clReleaseMemObject(small);
  done_with(&f);
}

/* ALiBi's slopes, the sinks and seqlens_kv: a buffer too small for its layout, a flag or gradient
 * without its input, and an input that overlaps an output (or a gradient that overlaps anything)
 * are refused by name (INVALID_ARGUMENT); the forward ignores d_sinks. Entries of seqlens_kv out
 * of range are the device's to bound (suite variants). */
Test(extended, alibi_sinks_seqlens_bad_input_rejected) {
  fixture f = make();
  cl_mem small = test_buffer(f.ctx, H - 1, 1.0f), heads = test_buffer(f.ctx, H, 0.5f);
  cl_mem grad = test_buffer(f.ctx, H, NAN);
  f.a.alibi_slopes = small;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "alibi_slopes: the view needs");
  f.a.alibi_slopes = heads, f.p.flags |= CLATTN_ALIBI_PER_BATCH; /* needs B * H */
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "alibi_slopes: the view needs");
  f.a.alibi_slopes = NULL;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "CLATTN_ALIBI_PER_BATCH");
  f.p.flags &= ~(unsigned)CLATTN_ALIBI_PER_BATCH;
  f.a.sinks = small;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "sinks: the view needs");
  f.a.sinks = NULL, f.a.d_sinks = grad;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "args.sinks is NULL");
  /* Overlaps: an input over an output, the gradient over an input or another output. */
  f.a.d_sinks = NULL, f.a.sinks = f.buf[O];
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "sinks overlaps o");
  f.a.sinks = heads, f.a.alibi_slopes = f.buf[DK];
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "alibi_slopes overlaps dk");
  f.a.alibi_slopes = NULL, f.a.d_sinks = heads;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "d_sinks overlaps sinks");
  f.a.d_sinks = f.buf[Q];
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "d_sinks overlaps q");
  /* Without queries the backward still writes dk and dv (zeros): they are outputs whole. */
  f.p.seqlen_q = 0, f.a.d_sinks = f.buf[DK];
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "d_sinks overlaps dk");
  f.p.seqlen_q = NQ;
  /* seqlens_kv: [batch] int32, an input like the slopes. */
  f.a.d_sinks = NULL, f.a.seqlens_kv = test_buffer(f.ctx, B - 1, 0.0f);
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "seqlens_kv: the view needs");
  clReleaseMemObject(f.a.seqlens_kv);
  f.a.seqlens_kv = f.lse;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "seqlens_kv overlaps lse");
  f.a.seqlens_kv = NULL;
  /* The forward ignores the backward's member; with it valid, both passes compute. */
  f.a.d_sinks = grad;
  cr_assert_eq(clattn_forward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  float *g = read_all(&f, grad, H);
  for (int h = 0; h < H; h++) cr_assert(isfinite(g[h]), "d_sinks[%d] = %g", h, g[h]);
  free(g);
  clReleaseMemObject(small), clReleaseMemObject(heads), clReleaseMemObject(grad);
  done_with(&f);
}

/* The variants' fields: bad values are refused (INVALID_ARGUMENT) by every entry point, the
 * good ones run; a family that does not compute a variant is refused as an override
 * (UNSUPPORTED, naming the variant) and passed over by the planner. */
Test(extended, variant_fields_rejected) {
  fixture f = make();
  f.p.flags = CLATTN_CAUSAL | CLATTN_CAUSAL_TOP_LEFT;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "two alignments");
  f.p.flags = CLATTN_CAUSAL;
  f.p.window_left = 8;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "lack CLATTN_WINDOW");
  f.p.flags |= CLATTN_WINDOW;
  f.p.window_left = -2;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "window_left -2");
  f.p.window_left = 8, f.p.window_right = 3;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "with a causal mask");
  f.p.window_left = 8, f.p.window_right = -1;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(f.ctx, &f.p, &info), CLATTN_OK, "%s", clattn_last_error(f.ctx));
  float caps[] = {-1.0f, NAN, INFINITY, 1e-30f};
  for (int i = 0; i < 4; i++) {
    f.p.softcap = caps[i];
    expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "softcap");
  }
  f.p.softcap = 50.0f;
  clattn_config cfg = {
      .kernel = "forward_naive", .block_q = 16, .block_kv = 16, .threads_per_row = 1};
  cr_assert_eq(clattn_override_config(f.ctx, &f.p, &cfg), CLATTN_ERR_UNSUPPORTED);
  cr_assert(strstr(clattn_last_error(f.ctx), "forward_naive does not compute a key range"), "%s",
            clattn_last_error(f.ctx));
  f.p.flags = CLATTN_CAUSAL, f.p.window_left = f.p.window_right = 0;
  /* Both run, and the context serves a plain call after the refusals. */
  run(&f, 1);
  f.p.softcap = 0.0f;
  run(&f, 0);
  done_with(&f);
}

/* An override belongs to the problem's class and serves its calls with ALiBi, sinks or
 * seqlens_kv too (a problem cannot name them): with the test-only forward_naive forced, which
 * computes none of them, each such call is refused naming the variant, and the plain call runs
 * it. (Were the override not found for them, they would run the planner's kernels and pass.) */
Test(extended, override_reaches_alibi_sinks_seqlens_calls_rejected) {
  fixture f = make();
  clattn_config cfg = {
      .kernel = "forward_naive", .block_q = 16, .block_kv = 16, .threads_per_row = 1};
  cr_assert_eq(clattn_override_config(f.ctx, &f.p, &cfg), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  cl_mem heads = test_buffer(f.ctx, H, 0.5f), lens = test_buffer(f.ctx, B, 0.0f);
  cl_mem *members[3] = {&f.a.alibi_slopes, &f.a.sinks, &f.a.seqlens_kv};
  cl_mem values[3] = {heads, heads, lens};
  const char *names[3] = {"ALiBi", "sinks", "seqlens_kv"};
  for (int i = 0; i < 3; i++) {
    *members[i] = values[i];
    expect_refused(&f, 0, CLATTN_ERR_UNSUPPORTED, names[i]);
    *members[i] = NULL;
  }
  refill_nan(&f);
  cr_assert_eq(clattn_forward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  /* Finished before the buffers go: PoCL may still be compiling the kernel when the process
   * exits otherwise (it crashed so under the sanitizers). */
  clFinish(clattn_context_queue(f.ctx));
  clReleaseMemObject(heads), clReleaseMemObject(lens);
  done_with(&f);
}
