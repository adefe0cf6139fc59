/* The standard path beyond the shared shape list (test_forward.c built with TEST_STANDARD):
 * splitting over batch*heads under a small workspace limit, the out-of-memory message, the
 * automatic choice for head dims the fused kernels cannot run, queues and wait lists. */
#include "common.h"
#include "tune.h" /* the context's launch pieces */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static clattn_problem problem(size_t b, size_t h, size_t n, size_t d, unsigned flags) {
  clattn_problem p = {0};
  p.batch = b, p.heads_q = h, p.seqlen_q = p.seqlen_kv = n, p.head_dim = d, p.flags = flags;
  p.algorithm = CLATTN_ALGO_STANDARD;
  return p;
}

static void expect_pass(clattn_context *ctx, const clattn_problem *p, int bhsd, size_t offset) {
  test_forward_check(ctx, p, bhsd, offset, 1, 7, "standard");
}

/* A limit that holds two heads' workspace and padded copies, but not three: six heads run in
 * three launches, each writing its own heads' O and LSE. */
Test(standard, chunks_over_batch_and_heads) {
  clattn_problem p = problem(2, 3, 100, 24, CLATTN_CAUSAL);
  p.heads_kv = 1; /* GQA offsets inside each chunk */
  clattn_context *probe = test_context(NULL);
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(probe, &p, &info), CLATTN_OK, "%s", clattn_last_error(probe));
  cr_assert_eq(info.standard_heads_per_chunk, 6);
  size_t per_head = info.standard_workspace_bytes / 6;
  /* The backward holds P and dS: at least a second 100 x 100 matrix per head. */
  cr_assert_geq(info.standard_backward_workspace_bytes,
                info.standard_workspace_bytes + 6 * 100 * 100 * sizeof(float));
  clattn_context_destroy(probe);

  clattn_context *ctx = test_context_limited(NULL, 2 * per_head + per_head / 2);
  clattn_standard_profile prof;
  cr_assert_eq(clattn_standard_profile_last(ctx, &prof), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "no standard-path call"));
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_eq(info.standard_heads_per_chunk, 2);
  cr_assert_str_eq(info.algorithm, "standard");
  expect_pass(ctx, &p, 0, 5);
  expect_pass(ctx, &p, 1, 0);
  /* The step profile covers the three launches of the last call. */
  cr_assert_eq(clattn_standard_profile_last(ctx, &prof), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(prof.launches, 3);
  cr_assert(prof.gemm_s_ms >= 0 && prof.softmax_ms > 0 && prof.gemm_o_ms >= 0);
  /* A later call with no keys runs no steps: no profile is left from the one before. */
  clattn_problem none = problem(1, 1, 8, 8, 0);
  none.seqlen_kv = 0;
  expect_pass(ctx, &none, 0, 0);
  cr_assert_eq(clattn_standard_profile_last(ctx, &prof), CLATTN_ERR_INVALID_ARGUMENT);
  clattn_context_destroy(ctx);
}

Test(standard, one_head_too_big_is_out_of_resources) {
  clattn_context *ctx = test_context_limited(NULL, 1 << 20);
  clattn_problem p = problem(1, 2, 1024, 8, 0); /* one head: 4 MiB of scores */
  size_t n = 1024 * 2 * 8;
  cl_mem q = test_buffer(ctx, n, 0.5f), o = test_buffer(ctx, n, 7.0f);
  clattn_tensor t = clattn_bshd(q, 1024, 2, 8), to = clattn_bshd(o, 1024, 2, 8);
  cl_event done = (cl_event)(uintptr_t)1;
  clattn_status st = clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 0, NULL, &done);
  const char *msg = clattn_last_error(ctx);
  cr_assert_eq(st, CLATTN_ERR_OUT_OF_RESOURCES, "%s", msg);
  cr_assert_null(done);
  cr_assert(strstr(msg, "4194304") && strstr(msg, "available: 1048576"),
            "the message should name the bytes needed and available: %s", msg);
  float first = 0;
  clEnqueueReadBuffer(clattn_context_queue(ctx), o, CL_TRUE, 0, sizeof first, &first, 0, NULL,
                      NULL);
  cr_assert_eq(first, 7.0f, "O was written by a failed call");
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_eq(info.standard_heads_per_chunk, 0);
  /* Auto still runs the fused path, which needs no workspace. */
  p.algorithm = CLATTN_ALGO_AUTO;
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  clReleaseMemObject(q), clReleaseMemObject(o);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

Test(standard, auto_takes_standard_beyond_fused_head_dims) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = problem(1, 2, 37, 300, CLATTN_CAUSAL);
  p.algorithm = CLATTN_ALGO_AUTO;
  p.head_dim_v = 260;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(info.algorithm, "standard");
  cr_assert_eq(info.fused_read_bytes, 0.0);
  cr_assert_gt(info.standard_read_bytes, 0.0);
  expect_pass(ctx, &p, 0, 0);
  p.head_dim = 64, p.head_dim_v = 0;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.algorithm, "fused");
  clattn_context_destroy(ctx);
}

Test(standard, out_of_order_queue_is_rejected) {
  clattn_context *base = test_context(NULL);
  cl_int err;
  cl_command_queue ooo =
      clCreateCommandQueue(clattn_context_cl_context(base), clattn_context_device(base),
                           CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  if (err != CL_SUCCESS) {
    clattn_context_destroy(base);
    cr_skip_test("the device has no out-of-order queues");
  }
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create(clattn_context_cl_context(base), clattn_context_device(base),
                                     ooo, NULL, &ctx),
               CLATTN_OK);
  clattn_problem p = problem(1, 1, 16, 8, 0);
  cl_mem q = test_buffer(ctx, 128, 1.0f), o = test_buffer(ctx, 128, 0.0f);
  clattn_tensor t = clattn_bshd(q, 16, 1, 8), to = clattn_bshd(o, 16, 1, 8);
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 0, NULL, NULL),
               CLATTN_ERR_UNSUPPORTED);
  cr_assert(strstr(clattn_last_error(ctx), "in-order queue"), "%s", clattn_last_error(ctx));
  clReleaseMemObject(q), clReleaseMemObject(o);
  clattn_context_destroy(ctx);
  clReleaseCommandQueue(ooo);
  clattn_context_destroy(base);
}

/* The caller's wait list gates the GEMMs (CLBlast takes none: a barrier does). */
Test(standard, waits_for_the_callers_events) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = problem(1, 1, 16, 8, 0);
  cl_mem q = test_buffer(ctx, 128, 1.0f), o = test_buffer(ctx, 128, NAN); /* NaN: unwritten */
  clattn_tensor t = clattn_bshd(q, 16, 1, 8), to = clattn_bshd(o, 16, 1, 8);
  cl_int err;
  cl_event gate = clCreateUserEvent(clattn_context_cl_context(ctx), &err);
  cr_assert_eq(err, CL_SUCCESS);
  cl_event done = NULL;
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 1, &gate, &done), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cl_int state = CL_QUEUED;
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
  cr_assert_neq(state, CL_COMPLETE, "the call finished before its wait list did");
  clSetUserEventStatus(gate, CL_COMPLETE);
  cr_assert_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  float out[128];
  clEnqueueReadBuffer(clattn_context_queue(ctx), o, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  for (int i = 0; i < 128; i++) cr_assert_float_eq(out[i], 1.0f, 1e-6f); /* V is all ones */
  clReleaseEvent(done), clReleaseEvent(gate);
  clReleaseMemObject(q), clReleaseMemObject(o);
  clattn_context_destroy(ctx);
}

/* Views CLBlast cannot take as its leading dimension (a row stride below the row's length: a
 * broadcast's 0, rows that overlap, a single row with any stride): the standard path runs them as
 * the fused one does, forward and backward, checked against the double reference under
 * DESIGN.md's rule (2x the naive error for O and LSE, 3x for the gradients). Outputs start NaN;
 * a failed call must leave every one of their elements NaN. */
typedef struct {
  size_t offset, sb, ss, sh;
} layout;

typedef struct {
  float *host;
  size_t elems;
  cl_mem buf;
  clattn_tensor view;
} vtensor;

/* q k v o d_o dq dk dv */
enum { NT = 8 };

static void vt_make(clattn_context *ctx, vtensor *t, layout l, const size_t ext[4], int random,
                    uint64_t *rng) {
  t->elems = l.offset + (ext[0] - 1) * l.sb + (ext[1] - 1) * l.ss + (ext[2] - 1) * l.sh + ext[3];
  t->host = malloc(t->elems * sizeof(float));
  cr_assert_not_null(t->host);
  if (random)
    ref_fill_normal(t->host, t->elems, rng);
  else
    for (size_t i = 0; i < t->elems; i++) t->host[i] = NAN;
  cl_int err;
  t->buf = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                          t->elems * sizeof(float), t->host, &err);
  cr_assert_eq(err, CL_SUCCESS);
  t->view = (clattn_tensor){t->buf, l.offset, l.sb, l.ss, l.sh};
}

static void read_back(clattn_context *ctx, cl_mem buf, float *x, size_t n) {
  cr_assert_eq(clEnqueueReadBuffer(clattn_context_queue(ctx), buf, CL_TRUE, 0, n * sizeof *x, x, 0,
                                   NULL, NULL),
               CL_SUCCESS);
}

/* max|x - ref| over a packed [b][h][s][dim] reference gathered from view t (NaN: infinite), and
 * the naive error beside it. */
static void view_err(const vtensor *t, const size_t ext[4], const double *ref, const float *naive,
                     double *err, double *nerr) {
  *err = 0, *nerr = 0;
  const clattn_tensor *v = &t->view;
  for (size_t b = 0; b < ext[0]; b++)
    for (size_t h = 0; h < ext[2]; h++)
      for (size_t i = 0; i < ext[1]; i++)
        for (size_t c = 0; c < ext[3]; c++) {
          size_t r = ((b * ext[2] + h) * ext[1] + i) * ext[3] + c;
          double x =
              t->host[v->offset + b * v->stride_batch + i * v->stride_seq + h * v->stride_head + c];
          double e = fabs(x - ref[r]);
          *err = fmax(*err, isnan(e) ? INFINITY : e);
          *nerr = fmax(*nerr, fabs((double)naive[r] - ref[r]));
        }
}

static int all_nan(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isnan(x[i])) return 0;
  return 1;
}

/* One problem with the given layouts on one algorithm: forward, then backward from its O/LSE. */
static void check_views(clattn_context *ctx, clattn_problem p, clattn_algorithm algo,
                        const layout l[NT]) {
  p.algorithm = algo;
  size_t hkv = p.heads_kv ? p.heads_kv : p.heads_q, d = p.head_dim,
         dv = p.head_dim_v ? p.head_dim_v : d, nq = p.seqlen_q, nkv = p.seqlen_kv, B = p.batch;
  const size_t ext[NT][4] = {{B, nq, p.heads_q, d},  {B, nkv, hkv, d},       {B, nkv, hkv, dv},
                             {B, nq, p.heads_q, dv}, {B, nq, p.heads_q, dv}, {B, nq, p.heads_q, d},
                             {B, nkv, hkv, d},       {B, nkv, hkv, dv}};
  static const int random[NT] = {1, 1, 1, 0, 1, 0, 0, 0};
  static const char *const names[NT] = {"q", "k", "v", "o", "d_o", "dq", "dk", "dv"};
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  vtensor t[NT];
  for (int i = 0; i < NT; i++) vt_make(ctx, &t[i], l[i], ext[i], random[i], &rng);
  size_t rows = B * p.heads_q * nq;
  float *lse = malloc(rows * sizeof *lse);
  for (size_t i = 0; i < rows; i++) lse[i] = NAN;
  cl_int err;
  cl_mem lse_buf =
      clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                     rows * sizeof *lse, lse, &err);
  cr_assert_eq(err, CL_SUCCESS);
  ref_view rv[NT];
  for (int i = 0; i < NT; i++)
    rv[i] = (ref_view){t[i].host, l[i].offset, l[i].sb, l[i].ss, l[i].sh};
  const char *path = algo == CLATTN_ALGO_STANDARD ? "standard" : "fused";

  clattn_status st = clattn_forward(ctx, &p, &t[0].view, &t[1].view, &t[2].view, &t[3].view,
                                    lse_buf, 0, NULL, NULL);
  read_back(ctx, t[3].buf, t[3].host, t[3].elems);
  read_back(ctx, lse_buf, lse, rows);
  if (st != CLATTN_OK) {
    cr_expect(all_nan(t[3].host, t[3].elems) && all_nan(lse, rows),
              "%s forward failed after writing part of O or LSE", path);
    cr_expect_fail("%s forward: %s", path, clattn_last_error(ctx));
    /* The backward is checked all the same, from the fused path's O and LSE. */
    clattn_problem fused = p;
    fused.algorithm = CLATTN_ALGO_FUSED;
    cr_assert_eq(clattn_forward(ctx, &fused, &t[0].view, &t[1].view, &t[2].view, &t[3].view,
                                lse_buf, 0, NULL, NULL),
                 CLATTN_OK, "%s", clattn_last_error(ctx));
    read_back(ctx, t[3].buf, t[3].host, t[3].elems);
    read_back(ctx, lse_buf, lse, rows);
  }
  size_t nmax = B * p.heads_q * (nq > nkv ? nq : nkv) * (d > dv ? d : dv); /* any gradient */
  double *ref = malloc(3 * nmax * sizeof *ref), *ref_lse = malloc(rows * sizeof *ref_lse);
  float *naive = malloc(3 * nmax * sizeof *naive), *naive_lse = malloc(rows * sizeof *naive_lse);
  ref_forward_f64(&p, rv[0], rv[1], rv[2], ref, ref_lse);
  ref_forward_f32(&p, rv[0], rv[1], rv[2], naive, naive_lse);
  double e, ne;
  view_err(&t[3], ext[3], ref, naive, &e, &ne);
  cr_expect_leq(e, 2 * ne + 1e-6, "%s forward: O error %g, naive %g", path, e, ne);
  double el = 0, nel = 0;
  for (size_t i = 0; i < rows; i++) {
    double x = fabs(lse[i] - ref_lse[i]);
    el = fmax(el, isnan(x) ? INFINITY : x);
    nel = fmax(nel, fabs(naive_lse[i] - ref_lse[i]));
  }
  cr_expect_leq(el, 2 * nel + 1e-6, "%s forward: LSE error %g, naive %g", path, el, nel);

  st = clattn_backward(ctx, &p, &t[0].view, &t[1].view, &t[2].view, &t[3].view, &t[4].view, lse_buf,
                       &t[5].view, &t[6].view, &t[7].view, 0, NULL, NULL);
  for (int i = 5; i < NT; i++) read_back(ctx, t[i].buf, t[i].host, t[i].elems);
  if (st != CLATTN_OK) {
    for (int i = 5; i < NT; i++)
      cr_expect(all_nan(t[i].host, t[i].elems), "%s backward failed after writing part of %s", path,
                names[i]);
    cr_expect_fail("%s backward: %s", path, clattn_last_error(ctx));
  } else {
    ref_backward_f64(&p, rv[0], rv[1], rv[2], rv[4], ref, ref + nmax, ref + 2 * nmax);
    ref_backward_f32(&p, rv[0], rv[1], rv[2], rv[4], naive, naive + nmax, naive + 2 * nmax);
    for (int g = 0; g < 3; g++) {
      view_err(&t[5 + g], ext[5 + g], ref + g * nmax, naive + g * nmax, &e, &ne);
      cr_expect_leq(e, 3 * ne + 1e-6, "%s backward: %s error %g, naive %g", path, names[5 + g], e,
                    ne);
    }
  }
  free(ref), free(ref_lse), free(naive), free(naive_lse), free(lse);
  clReleaseMemObject(lse_buf);
  for (int i = 0; i < NT; i++) clReleaseMemObject(t[i].buf), free(t[i].host);
}

static void check_both_paths(clattn_problem p, const layout l[NT]) {
  clattn_context *ctx = test_context(NULL);
  check_views(ctx, p, CLATTN_ALGO_FUSED, l);
  check_views(ctx, p, CLATTN_ALGO_STANDARD, l);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

/* A packed [B][S][H][D] layout, offset elements in. */
static layout bshd(size_t offset, size_t seq, size_t heads, size_t dim) {
  return (layout){offset, seq * heads * dim, heads * dim, dim};
}

/* K and V broadcast over the keys (row stride 0: every key the same row) or with rows that
 * overlap (a row stride below the head dim): GQA over two batch entries, whose K/V offsets
 * CLBlast gets as a list, and causal multi-head in one, whose offsets it gets as one stride (and
 * then checks the leading dimension of). */
Test(standard, broadcast_and_overlapping_kv_rows) {
  clattn_problem p = problem(2, 4, 9, 8, 0);
  p.heads_kv = 2, p.seqlen_kv = 13, p.head_dim_v = 12;
  layout l[NT] = {bshd(0, 9, 4, 8),  {3, 2 * 8, 0, 8}, {1, 2 * 12 + 40, 3, 12}, bshd(0, 9, 4, 12),
                  bshd(2, 9, 4, 12), bshd(0, 9, 4, 8), bshd(0, 13, 2, 8),       bshd(0, 13, 2, 12)};
  check_both_paths(p, l);
  /* Split over batch*heads (each head's padded copies take ~200 kB): each chunk packs its own. */
  clattn_context *small = test_context_limited(NULL, 600000);
  clattn_problem ps = p;
  ps.algorithm = CLATTN_ALGO_STANDARD;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(small, &ps, &info), CLATTN_OK, "%s", clattn_last_error(small));
  cr_assert(info.standard_heads_per_chunk > 0 && info.standard_heads_per_chunk < 8, "%zu",
            (size_t)info.standard_heads_per_chunk);
  check_views(small, p, CLATTN_ALGO_STANDARD, l);
  clattn_context_destroy(small);
  p.batch = 1, p.heads_kv = 4, p.flags = CLATTN_CAUSAL;
  /* K in place, V broadcast: the O GEMM comes after the softmax wrote LSE. */
  l[1] = bshd(0, 13, 4, 8), l[2] = (layout){5, 4 * 12, 0, 12};
  l[6] = bshd(0, 13, 4, 8), l[7] = bshd(0, 13, 4, 12);
  check_both_paths(p, l);
}

/* One query row (and then one key row): the row stride of a single-row view is never used, so
 * any value is valid, below the row's length included, for inputs and outputs alike. */
Test(standard, single_row_views_with_any_row_stride) {
  clattn_problem p = problem(2, 3, 1, 16, 0);
  p.seqlen_kv = 10, p.head_dim_v = 8;
  /* O and dq with row strides 1 and 2 (below dv = 8 and d = 16), Q and d_o with 0. */
  layout l[NT] = {{0, 3 * 16, 0, 16}, bshd(0, 10, 3, 16), bshd(0, 10, 3, 8),  {0, 3 * 8, 1, 8},
                  {4, 3 * 8, 0, 8},   {0, 3 * 16, 2, 16}, bshd(0, 10, 3, 16), bshd(0, 10, 3, 8)};
  check_both_paths(p, l);
  /* One key: K, V, dk and dv with row stride 0; causal (the query sees the key). */
  p.seqlen_kv = 1, p.flags = CLATTN_CAUSAL;
  l[1] = (layout){0, 3 * 16, 0, 16}, l[2] = (layout){0, 3 * 8, 0, 8};
  l[6] = (layout){0, 3 * 16, 0, 16}, l[7] = (layout){0, 3 * 8, 0, 8};
  check_both_paths(p, l);
}

/* The standard path's element kernels (the backward's P, dS and row sums, the packed copies, the
 * empty rows) are enqueued in pieces of work-groups (a million by default, so a piece only
 * starts past the first beyond 2^26 elements); each piece must start where the last ended. With
 * pieces of 3 work-groups a small problem takes many: forward and backward against the
 * reference, K packed (row stride 0) so pack_rows is cut too. (empty_rows has one work-item per
 * group, where groups and elements count alike.) */
Test(standard, launches_in_pieces_cover_every_element) {
  clattn_context *ctx = test_context(NULL);
  ctx->std_launch_groups = 3;
  clattn_problem p = problem(2, 4, 37, 16, CLATTN_CAUSAL);
  p.heads_kv = 2, p.seqlen_kv = 45;
  layout l[NT] = {bshd(0, 37, 4, 16), {0, 2 * 16, 0, 16}, bshd(0, 45, 2, 16), bshd(0, 37, 4, 16),
                  bshd(0, 37, 4, 16), bshd(0, 37, 4, 16), bshd(0, 45, 2, 16), bshd(0, 45, 2, 16)};
  check_views(ctx, p, CLATTN_ALGO_STANDARD, l);
  clattn_context_destroy(ctx);
}

/* The backward with no queries or no keys at head dims past the fused kernels' (the standard
 * path; V's its own): dk and dv (no queries) or dq (no keys) become zeros through their strided
 * views (GQA, a padded head stride, an offset) and the rest of their buffers stays NaN; the sinks'
 * gradient is 0 (a sum over rows of no keys). */
static void wide_empty_backward(size_t nq, size_t nkv) {
  clattn_context *ctx = test_context(NULL);
  enum { B = 2, HQ = 4, HKV = 2, DIM = 300, DV = 280, PAD = 5, OFF = 3 };
  clattn_problem p = {B, HQ, HKV, nq, nkv, DIM, DV, CLATTN_F32, 0.0f, 0, CLATTN_ALGO_STANDARD};
  size_t n[8] = {nq, nkv, nkv, nq, nq, nq, nkv, nkv}, h[8] = {HQ, HKV, HKV, HQ, HQ, HQ, HKV, HKV};
  size_t dim[8] = {DIM, DIM, DV, DV, DV, DIM, DIM, DV};
  cl_mem m[8];
  clattn_tensor t[8];
  size_t elems[8];
  for (int i = 0; i < 8; i++) { /* q k v o d_o dq dk dv: bshd, heads DIM + PAD apart */
    size_t rows = n[i] ? n[i] : 1, sh = dim[i] + PAD, ss = h[i] * sh, sb = rows * ss;
    elems[i] = OFF + B * sb;
    m[i] = test_buffer(ctx, elems[i], i < 5 ? 0.5f : NAN);
    t[i] = (clattn_tensor){m[i], OFF, sb, ss, sh};
  }
  cl_mem lse = test_buffer(ctx, B * HQ * (nq ? nq : 1), 0.0f), sinks = test_buffer(ctx, HQ, 0.3f),
         d_sinks = test_buffer(ctx, HQ, NAN);
  clattn_args a = {.q = t[0],
                   .k = t[1],
                   .v = t[2],
                   .o = t[3],
                   .lse = lse,
                   .d_o = t[4],
                   .dq = t[5],
                   .dk = t[6],
                   .dv = t[7],
                   .sinks = sinks,
                   .d_sinks = d_sinks};
  cr_assert_eq(clattn_backward_ex(ctx, &p, &a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  for (int i = 5; i < 8; i++) {
    float *x = malloc(elems[i] * sizeof *x);
    cr_assert_not_null(x);
    read_back(ctx, m[i], x, elems[i]);
    for (size_t e = 0; e < elems[i]; e++) {
      /* every (entry, row, head) of the buffer is the view's; its PAD columns are not */
      int inside = e >= OFF && n[i] && (e - OFF) % t[i].stride_head < dim[i];
      if (inside)
        cr_assert_eq(x[e], 0.0f, "gradient %d element %zu: %g, not 0", i - 5, e, x[e]);
      else
        cr_assert(isnan(x[e]), "gradient %d element %zu outside its view written: %g", i - 5, e,
                  x[e]);
    }
    free(x);
  }
  float ds[HQ];
  read_back(ctx, d_sinks, ds, HQ);
  for (int i = 0; i < HQ; i++) cr_assert_eq(ds[i], 0.0f, "d_sinks[%d] = %g", i, ds[i]);
  for (int i = 0; i < 8; i++) clReleaseMemObject(m[i]);
  clReleaseMemObject(lse), clReleaseMemObject(sinks), clReleaseMemObject(d_sinks);
  clattn_context_destroy(ctx);
}
Test(standard, wide_backward_without_queries_zeros_dk_dv) {
  wide_empty_backward(0, 7);
}
Test(standard, wide_backward_without_keys_zeros_dq) {
  wide_empty_backward(5, 0);
}
