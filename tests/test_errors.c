/* Failure paths: each bad input returns its status with a message naming what is wrong, sets
 * *done to NULL, writes nothing, and leaves the context usable. */
#include "common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  clattn_context *ctx;
  clattn_problem p;
  cl_mem q, k, v, o, lse;
  clattn_tensor tq, tk, tv, to;
} fixture;

/* A valid problem (B=1, H=4, N=16, d=8) with packed bshd tensors; tests break one thing. */
static fixture make_in(const char *kernel_dir) {
  fixture f;
  memset(&f, 0, sizeof f);
  f.ctx = test_context(kernel_dir);
  f.p.batch = 1, f.p.heads_q = 4, f.p.seqlen_q = f.p.seqlen_kv = 16, f.p.head_dim = 8;
  size_t n = 1 * 16 * 4 * 8;
  f.q = test_buffer(f.ctx, n, 0.5f), f.k = test_buffer(f.ctx, n, 0.25f);
  f.v = test_buffer(f.ctx, n, 1.0f), f.o = test_buffer(f.ctx, n, 7.0f);
  f.lse = test_buffer(f.ctx, 4 * 16, 7.0f);
  f.tq = clattn_bshd(f.q, 16, 4, 8), f.tk = clattn_bshd(f.k, 16, 4, 8);
  f.tv = clattn_bshd(f.v, 16, 4, 8), f.to = clattn_bshd(f.o, 16, 4, 8);
  return f;
}

static fixture make(void) {
  return make_in(NULL);
}

static clattn_status call(fixture *f, cl_event *done) {
  return clattn_forward(f->ctx, &f->p, &f->tq, &f->tk, &f->tv, &f->to, f->lse, 0, NULL, done);
}

/* The call fails with want, a message containing needle, no event, O untouched; then the
 * context still computes correct results. */
static void expect_failure(fixture *f, clattn_status want, const char *needle) {
  cl_event done = (cl_event)(uintptr_t)1;
  clattn_status st = call(f, &done);
  const char *msg = clattn_last_error(f->ctx);
  cr_assert_eq(st, want, "got %s, want %s (%s)", clattn_status_string(st),
               clattn_status_string(want), msg);
  cr_assert_null(done, "*done must be NULL on error");
  cr_assert(strstr(msg, needle), "message \"%s\" should mention \"%s\"", msg, needle);
  float first = 0;
  clEnqueueReadBuffer(clattn_context_queue(f->ctx), f->o, CL_TRUE, 0, sizeof first, &first, 0, NULL,
                      NULL);
  cr_assert_eq(first, 7.0f, "O was written by a failed call");
  test_context_still_works(f->ctx);
}

static void done_with(fixture *f) {
  cl_mem m[] = {f->q, f->k, f->v, f->o, f->lse};
  for (int i = 0; i < 5; i++) clReleaseMemObject(m[i]);
  clattn_context_destroy(f->ctx);
}

Test(errors, null_context) {
  clattn_problem p = {0};
  cl_event done = (cl_event)(uintptr_t)1;
  cr_assert_eq(clattn_forward(NULL, &p, NULL, NULL, NULL, NULL, NULL, 0, NULL, &done),
               CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_null(done);
  cr_assert(strstr(clattn_last_error(NULL), "context is NULL"));
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(NULL, &p, &info), CLATTN_ERR_INVALID_ARGUMENT);
}

Test(errors, null_problem_and_tensors) {
  fixture f = make();
  cl_event done;
  cr_assert_eq(clattn_forward(f.ctx, NULL, &f.tq, &f.tk, &f.tv, &f.to, NULL, 0, NULL, &done),
               CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(f.ctx), "problem is NULL"));
  cr_assert_eq(clattn_forward(f.ctx, &f.p, &f.tq, NULL, &f.tv, &f.to, NULL, 0, NULL, &done),
               CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(f.ctx), "tensor k is NULL"));
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(f.ctx, &f.p, NULL), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_eq(clattn_explain(f.ctx, NULL, &info), CLATTN_ERR_INVALID_ARGUMENT);
  f.tv.buffer = NULL;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "v.buffer is NULL");
  done_with(&f);
}

Test(errors, heads_not_a_multiple) {
  fixture f = make();
  f.p.heads_kv = 3;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "not a multiple of heads_kv");
  done_with(&f);
}

Test(errors, zero_head_dim) {
  fixture f = make();
  f.p.head_dim = 0;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "head_dim is 0");
  done_with(&f);
}

Test(errors, head_dim_too_large) {
  fixture f = make();
  f.p.head_dim = 300;
  f.p.algorithm = CLATTN_ALGO_FUSED; /* auto would run the standard path */
  expect_failure(&f, CLATTN_ERR_UNSUPPORTED, "at most 256");
  f.p.algorithm = CLATTN_ALGO_AUTO;
  f.p.head_dim = 20000;
  expect_failure(&f, CLATTN_ERR_UNSUPPORTED, "at most 16384");
  f.p.head_dim = 64;
  f.p.algorithm = (clattn_algorithm)7;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "not a clattn_algorithm");
  done_with(&f);
}

/* A dtype outside the enum, on either path (what half storage lacks is in test_half.c). */
Test(errors, unknown_dtype) {
  fixture f = make();
  f.p.algorithm = CLATTN_ALGO_STANDARD;
  f.p.dtype = (clattn_dtype)9;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "not a clattn_dtype");
  f.p.algorithm = CLATTN_ALGO_AUTO;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "not a clattn_dtype");
  done_with(&f);
}

Test(errors, bad_flags_and_scale) {
  fixture f = make();
  f.p.flags = 0x80;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "unknown flags");
  f.p.flags = 0;
  f.p.scale = NAN;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "scale");
  done_with(&f);
}

Test(errors, buffer_too_small) {
  fixture f = make();
  f.p.seqlen_kv = 17; /* K holds 16 rows */
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "CL_MEM_SIZE");
  f.p.seqlen_kv = 16;
  f.tq.offset = 1; /* one element past the end */
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "q: the view needs");
  done_with(&f);
}

Test(errors, lse_too_small) {
  fixture f = make();
  clReleaseMemObject(f.lse);
  f.lse = test_buffer(f.ctx, 4 * 16 - 1, 0.0f);
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "lse");
  done_with(&f);
}

Test(errors, size_overflow) {
  fixture f = make();
  f.tk.stride_seq = SIZE_MAX / 8;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "overflow");
  f.tk = clattn_bshd(f.k, 16, 4, 8);
  f.p.batch = SIZE_MAX / 2; /* past the batch limit (tests/test_errors_limits.c) */
  expect_failure(&f, CLATTN_ERR_UNSUPPORTED, "below 2^31");
  f.p.batch = ((size_t)1 << 31) - 1; /* within it, but not within K's buffer */
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "CL_MEM_SIZE");
  f.p.batch = 1;
  f.p.seqlen_q = (size_t)1 << 40;
  expect_failure(&f, CLATTN_ERR_UNSUPPORTED, "below 2^31");
  done_with(&f);
}

Test(errors, output_overlaps_input) {
  fixture f = make();
  f.to.buffer = f.q; /* in place over Q */
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "o overlaps q");
  f.to.buffer = f.o;
  clattn_tensor keep = f.to;
  cl_mem lse_keep = f.lse;
  f.lse = f.o; /* LSE over O */
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "overlaps lse");
  f.lse = lse_keep, f.to = keep;
  done_with(&f);
}

Test(errors, wait_list_inconsistent) {
  fixture f = make();
  cl_event done = (cl_event)(uintptr_t)1;
  cr_assert_eq(clattn_forward(f.ctx, &f.p, &f.tq, &f.tk, &f.tv, &f.to, NULL, 2, NULL, &done),
               CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_null(done);
  cr_assert(strstr(clattn_last_error(f.ctx), "wait is NULL"));
  test_context_still_works(f.ctx);
  done_with(&f);
}

Test(errors, buffer_of_another_context) {
  fixture f = make();
  clattn_context *other = test_context(NULL);
  cl_mem foreign = test_buffer(other, 16 * 4 * 8, 0.0f);
  f.tk.buffer = foreign;
  expect_failure(&f, CLATTN_ERR_INVALID_ARGUMENT, "another OpenCL context");
  clReleaseMemObject(foreign);
  clattn_context_destroy(other);
  done_with(&f);
}

/* A kernel that does not compile gives CLATTN_ERR_BUILD with the build log; once the source is
 * fixed the same context builds and runs (the kernel dir is read when a class is planned). */
Test(errors, kernel_that_fails_to_build) {
  char dir[64], path[128];
  test_kernel_dir(dir, sizeof dir, "const uint lid = get_local_id(0);", "  this is not C;\n", 0);
  fixture f = make_in(dir);
  cl_event done = (cl_event)(uintptr_t)1;
  cr_assert_eq(call(&f, &done), CLATTN_ERR_BUILD, "%s", clattn_last_error(f.ctx));
  cr_assert_null(done);
  const char *msg = clattn_last_error(f.ctx);
  cr_assert(strstr(msg, "clBuildProgram failed") && strstr(msg, "build log"), "msg: %s", msg);
  cr_assert(strstr(msg, "error"), "the build log should be in the message: %s", msg);
  /* Fix the sources: remove the broken copies, so the embedded kernels are used again. */
  static const char *const files[] = {"forward.cl", "forward_tiles.cl", "forward_mma.cl"};
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    remove(path);
  }
  test_context_still_works(f.ctx);
  test_kernel_dir_remove(dir);
  done_with(&f);
}

/* A variant that does not build on the device (as a driver might refuse inline PTX) is passed
 * over for the next: the call succeeds on another variant, and a diagnostic says why. */
Test(errors, variant_that_fails_to_build_gives_way) {
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "#define DVP ((DV + TX - 1) / TX)",
                  "#error test-only: this variant does not build here\n", 0);
  clattn_context *ctx = test_context(dir);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 100, p.head_dim = 64; /* PoCL: tiles */
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_neq(info.kernel, "forward_tiles");
  const char *diag = clattn_context_diagnostics(ctx);
  cr_assert(strstr(diag, "forward_tiles does not build") && strstr(diag, "test-only"), "%s", diag);
  check_spec sp = {0};
  sp.problem = p, sp.with_lse = 1;
  check_result r;
  cr_assert_eq(check_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "%g > %g", r.err_o, r.tol_o);
  /* Forced, the variant fails as asked, with its build log. */
  clattn_config tiles = {"forward_tiles", 32, 16, 1, 1, 0, 1, 1};
  p.head_dim = 32;
  cr_assert_eq(clattn_override_config(ctx, &p, &tiles), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_ERR_BUILD);
  cr_assert(strstr(clattn_last_error(ctx), "test-only"), "%s", clattn_last_error(ctx));
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

/* The same for the backward: with tensor cores (emulated here) backward_mma comes first; when
 * it does not build, backward_rows computes the gradients, and a diagnostic says why. */
Test(errors, backward_variant_that_fails_to_build_gives_way) {
  setenv("CLATTN_MMA_EMULATE", "1", 1); /* this test's process only */
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "#define FLUSH_K 4",
                  "#error test-only: this variant does not build here\n", 0);
  clattn_context *ctx = test_context(dir);
  check_spec sp = {0};
  sp.problem.batch = 1, sp.problem.heads_q = 2, sp.problem.seqlen_q = 40;
  sp.problem.seqlen_kv = 40, sp.problem.head_dim = 32, sp.with_lse = 1;
  check_bwd_result r;
  cr_assert_eq(check_backward_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "gradients wrong: %g %g %g", r.err[0], r.err[1], r.err[2]);
  const char *diag = clattn_context_diagnostics(ctx);
  cr_assert(strstr(diag, "backward_mma does not build") && strstr(diag, "test-only"), "%s", diag);
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

Test(errors, missing_kernel_file) {
  fixture f = make_in("/nonexistent/clattn-kernels");
  cl_event done = (cl_event)(uintptr_t)1;
  cr_assert_eq(call(&f, &done), CLATTN_ERR_IO);
  cr_assert_null(done);
  cr_assert(strstr(clattn_last_error(f.ctx), "/nonexistent/clattn-kernels"), "%s",
            clattn_last_error(f.ctx));
  done_with(&f);
}

/* Every one of n floats of buf is still value (a bit pattern compare, so NaN counts). */
static void expect_unchanged(clattn_context *ctx, cl_mem buf, size_t n, float value,
                             const char *name) {
  float *x = malloc(n * sizeof *x);
  cr_assert_not_null(x);
  cr_assert_eq(clEnqueueReadBuffer(clattn_context_queue(ctx), buf, CL_TRUE, 0, n * sizeof *x, x, 0,
                                   NULL, NULL),
               CL_SUCCESS);
  size_t changed = 0;
  for (size_t i = 0; i < n; i++) changed += memcmp(&x[i], &value, sizeof value) != 0;
  free(x);
  cr_assert_eq(changed, 0, "%zu elements of %s were written by a failed call", changed, name);
}

/* An output that overlaps itself is rejected for the output (o) on both paths, with a message
 * naming the tensor and its strides, O and LSE untouched. Each view lies inside its buffer, so
 * only the self-overlap check can catch them. */
Test(errors, forward_output_overlaps_itself) {
  fixture f = make();
  static const clattn_algorithm algos[] = {CLATTN_ALGO_FUSED, CLATTN_ALGO_STANDARD};
  /* seq 0 (every row on the first), head 4 < dv = 8, and seq 16 with head 8 (row 1 of head 0 is
   * row 0 of head 2): strides batch, seq, head. */
  static const size_t strides[][3] = {{128, 0, 8}, {128, 32, 4}, {128, 16, 8}};
  static const char *const needles[] = {"seq 0", "head 4", "seq 16, head 8"};
  for (int a = 0; a < 2; a++)
    for (int i = 0; i < 3; i++) {
      f.p.algorithm = algos[a];
      f.to.stride_batch = strides[i][0], f.to.stride_seq = strides[i][1];
      f.to.stride_head = strides[i][2];
      cl_event done = (cl_event)(uintptr_t)1;
      clattn_status st = call(&f, &done);
      const char *msg = clattn_last_error(f.ctx);
      cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT, "algorithm %d strides %d: %s (%s)", a, i,
                   clattn_status_string(st), msg);
      cr_assert_null(done);
      cr_assert(strstr(msg, "o:") && strstr(msg, "overlap itself") && strstr(msg, needles[i]),
                "message \"%s\" should name o, its strides (%s) and the overlap", msg, needles[i]);
      expect_unchanged(f.ctx, f.o, 16 * 4 * 8, 7.0f, "o");
      expect_unchanged(f.ctx, f.lse, 4 * 16, 7.0f, "lse");
    }
  f.to = clattn_bshd(f.o, 16, 4, 8);
  test_context_still_works(f.ctx);
  done_with(&f);
}

/* The same for the gradients: dq, dk and dv, each overlapping itself in turn, fused and standard;
 * no gradient element is written and the backward still runs after. */
Test(errors, backward_outputs_overlap_themselves) {
  fixture f = make();
  f.p.heads_kv = 2; /* GQA: dk and dv have 2 heads of 8, dq 4 */
  size_t nq = 16 * 4 * 8, nkv = 16 * 2 * 8;
  f.tk = clattn_bshd(f.k, 16, 2, 8), f.tv = clattn_bshd(f.v, 16, 2, 8);
  cl_mem g = test_buffer(f.ctx, nq, 0.5f), grad[3];
  size_t n[3] = {nq, nkv, nkv}, heads[3] = {4, 2, 2};
  for (int i = 0; i < 3; i++) grad[i] = test_buffer(f.ctx, n[i], NAN);
  clattn_tensor tg = clattn_bshd(g, 16, 4, 8);
  cr_assert_eq(call(&f, NULL), CLATTN_OK, "%s", clattn_last_error(f.ctx)); /* O and LSE */
  static const clattn_algorithm algos[] = {CLATTN_ALGO_FUSED, CLATTN_ALGO_STANDARD};
  static const char *const names[] = {"dq", "dk", "dv"};
  for (int a = 0; a < 2; a++)
    for (int t = 0; t < 3; t++)
      for (int bad = 0; bad < 2; bad++) {
        f.p.algorithm = algos[a];
        clattn_tensor tgrad[3];
        for (int i = 0; i < 3; i++) tgrad[i] = clattn_bshd(grad[i], 16, heads[i], 8);
        if (bad == 0)
          tgrad[t].stride_seq = 0;
        else
          tgrad[t].stride_head = 7; /* heads 7 elements apart, rows of 8 */
        cl_event done = (cl_event)(uintptr_t)1;
        clattn_status st = clattn_backward(f.ctx, &f.p, &f.tq, &f.tk, &f.tv, &f.to, &tg, f.lse,
                                           &tgrad[0], &tgrad[1], &tgrad[2], 0, NULL, &done);
        const char *msg = clattn_last_error(f.ctx);
        cr_assert_eq(st, CLATTN_ERR_INVALID_ARGUMENT, "%s algorithm %d: %s (%s)", names[t], a,
                     clattn_status_string(st), msg);
        cr_assert_null(done);
        char want[16];
        snprintf(want, sizeof want, "%s:", names[t]);
        cr_assert(strstr(msg, want) && strstr(msg, "overlap itself") &&
                      strstr(msg, bad ? "head 7" : "seq 0"),
                  "message \"%s\" should name %s, its strides and the overlap", msg, names[t]);
        for (int i = 0; i < 3; i++) expect_unchanged(f.ctx, grad[i], n[i], NAN, names[i]);
      }
  /* Inputs may overlap themselves: a broadcast d_o (every row the same) is fine. */
  tg.stride_seq = 0;
  f.p.algorithm = CLATTN_ALGO_AUTO;
  clattn_tensor tgrad[3];
  for (int i = 0; i < 3; i++) tgrad[i] = clattn_bshd(grad[i], 16, heads[i], 8);
  cr_assert_eq(clattn_backward(f.ctx, &f.p, &f.tq, &f.tk, &f.tv, &f.to, &tg, f.lse, &tgrad[0],
                               &tgrad[1], &tgrad[2], 0, NULL, NULL),
               CLATTN_OK, "%s", clattn_last_error(f.ctx));
  clReleaseMemObject(g);
  for (int i = 0; i < 3; i++) clReleaseMemObject(grad[i]);
  test_context_still_works(f.ctx);
  done_with(&f);
}
