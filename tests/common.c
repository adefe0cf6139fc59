#include "common.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

/* The folders test_context made, removed when the test process exits (each test is a process
 * of its own under Criterion), so runs do not pile them up under build/tests/tmp. */
static char made[64][256];
static int nmade;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void remove_made(void) {
  for (int i = 0; i < nmade; i++) nftw(made[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *test_tmpdir(void) {
  return tmpdir;
}

clattn_context *test_context(const char *kernel_dir) {
  return test_context_limited(kernel_dir, 0);
}

clattn_context *test_context_limited(const char *kernel_dir, size_t workspace_limit) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/clattn-test-XXXXXX", base && base[0] ? base : "/tmp");
  cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
  if (nmade == 0) atexit(remove_made);
  /* The no-kernel selftests (tests/nowrite_check.cmake): after a case's first failing check its
   * later checks pass without running (tools/check.h), so the case fails by its own assertion
   * and need not compute the rest of its shapes. */
  if (getenv("CLATTN_TEST_FAIL_FAST")) check_fail_fast = 1;
  if (nmade < 64) snprintf(made[nmade++], sizeof made[0], "%s", tmpdir);
  char db[300];
  snprintf(db, sizeof db, "%s/tuning.json", tmpdir);
  clattn_options opt = {tmpdir, db, kernel_dir, workspace_limit};
  clattn_context *ctx = NULL;
  clattn_status st = clattn_context_create_default(&opt, &ctx);
  cr_assert_eq(st, CLATTN_OK, "no test context: %s", clattn_last_error(NULL));
  return ctx;
}

cl_mem test_buffer(clattn_context *ctx, size_t n, float value) {
  cl_int err;
  cl_mem buf = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, n * sizeof(float),
                              NULL, &err);
  cr_assert_eq(err, CL_SUCCESS, "clCreateBuffer(%zu floats): %d", n, err);
  err = clEnqueueFillBuffer(clattn_context_queue(ctx), buf, &value, sizeof value, 0,
                            n * sizeof(float), 0, NULL, NULL);
  cr_assert_eq(err, CL_SUCCESS);
  clFinish(clattn_context_queue(ctx));
  return buf;
}

cl_mem test_buffer_of(clattn_context *ctx, clattn_dtype t, size_t n, float value) {
  if (t == CLATTN_F32) return test_buffer(ctx, n, value);
  cl_int err;
  cl_mem buf = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE,
                              n * sizeof(uint16_t), NULL, &err);
  cr_assert_eq(err, CL_SUCCESS, "clCreateBuffer(%zu halves): %d", n, err);
  uint16_t bits = ref_half_bits(t, value);
  err = clEnqueueFillBuffer(clattn_context_queue(ctx), buf, &bits, sizeof bits, 0, n * sizeof bits,
                            0, NULL, NULL);
  cr_assert_eq(err, CL_SUCCESS);
  clFinish(clattn_context_queue(ctx));
  return buf;
}

void test_context_still_works(clattn_context *ctx) {
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = 9, p.seqlen_kv = 13, p.head_dim = 8;
  test_forward_check(ctx, &p, 0, 0, 1, 0, "after a failure");
}

double test_err(double err, double x, double ref) {
  if (x == ref) return err; /* also the -inf LSE of a row that sees no key */
  double d = fabs(x - ref);
  return isfinite(d) ? fmax(err, d) : INFINITY;
}

double test_naive_err(double err, double naive, double ref) {
  double d = fabs(naive - ref);
  return isfinite(d) ? fmax(err, d) : err;
}

/* NaN elements after each output buffer, which must stay NaN. */
enum { GUARD = 16 };

/* Checks that the elements of host[0, n) outside the view's in-mask are still NaN. */
static void expect_untouched(const float *host, const char *in, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (!in[i] && !isnan(host[i])) {
      cr_expect_fail("%s: element %zu, outside the output, was written (%g)", what, i, host[i]);
      break;
    }
}

void test_forward_check(clattn_context *ctx, const clattn_problem *p, int bhsd, size_t offset,
                        int with_lse, unsigned seed, const char *what) {
  check_spec sp = {0};
  sp.problem = *p, sp.bhsd = bhsd, sp.offset = offset, sp.seed = seed;
  test_forward_check_spec(ctx, &sp, with_lse, what);
}

void test_forward_check_spec(clattn_context *ctx, const check_spec *spec, int with_lse,
                             const char *what) {
  check_spec sp = *spec;
  const clattn_problem *p = &sp.problem;
  size_t offset = sp.offset;
  int bhsd = sp.bhsd;
  unsigned seed = sp.seed;
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q,
         dv = p->head_dim_v ? p->head_dim_v : p->head_dim,
         rows = p->batch * p->heads_q * p->seqlen_q;
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 1 | 1);
  cl_context cl = clattn_context_cl_context(ctx);
  check_tensor t[3] = {{0}};
  cr_assert_eq(check_make_tensor(cl, &t[0], &sp, p->seqlen_q, p->heads_q, p->head_dim, &rng), 0);
  cr_assert_eq(check_make_tensor(cl, &t[1], &sp, p->seqlen_kv, hkv, p->head_dim, &rng), 0);
  cr_assert_eq(check_make_tensor(cl, &t[2], &sp, p->seqlen_kv, hkv, dv, &rng), 0);
  /* O and LSE start NaN, guards after them too: an element the call does not write fails. */
  size_t no = offset + rows * dv + GUARD, nl = rows + GUARD;
  cl_mem o = test_buffer_of(ctx, p->dtype, no, NAN), lse = test_buffer(ctx, nl, NAN);
  clattn_tensor to = bhsd ? clattn_bhsd(o, p->seqlen_q, p->heads_q, dv)
                          : clattn_bshd(o, p->seqlen_q, p->heads_q, dv);
  to.offset = offset;
  cl_event done = NULL;
  check_extras x;
  cr_assert_eq(check_make_extras(ctx, &sp, 0, &x), CL_SUCCESS);
  clattn_args a = {0};
  a.q = t[0].view, a.k = t[1].view, a.v = t[2].view, a.o = to, a.lse = with_lse ? lse : NULL;
  check_set_args(&a, &x);
  cr_assert_eq(clattn_forward_ex(ctx, p, &a, 0, NULL, &done), CLATTN_OK, "forward %s failed: %s",
               what, clattn_last_error(ctx));
  float *got = malloc(no * sizeof *got), *got_lse = malloc(nl * sizeof *got_lse);
  cl_command_queue queue = clattn_context_queue(ctx);
  cr_assert_eq(check_read(queue, o, p->dtype, got, no, done ? 1 : 0, done ? &done : NULL),
               CL_SUCCESS);
  cr_assert_eq(
      clEnqueueReadBuffer(queue, lse, CL_TRUE, 0, nl * sizeof *got, got_lse, 0, NULL, NULL),
      CL_SUCCESS);
  if (done) clReleaseEvent(done);
  double *ref = malloc((rows * dv + 1) * sizeof *ref), *ref_lse = malloc((rows + 1) * 8);
  float *naive = malloc((rows * dv + 1) * sizeof *naive), *naive_lse = malloc((rows + 1) * 4);
  ref_view vq = check_host_view(&t[0]), vk = check_host_view(&t[1]), vv = check_host_view(&t[2]);
  ref_extras rx = check_ref_extras(&x);
  ref_forward_ex_f64(p, &rx, vq, vk, vv, ref, ref_lse);
  ref_forward_ex_f32(p, &rx, vq, vk, vv, naive, naive_lse);
  char *in = calloc(no, 1);
  double err = 0, nerr = 0, err_l = 0, nerr_l = 0;
  for (size_t b = 0; b < p->batch; b++)
    for (size_t h = 0; h < p->heads_q; h++)
      for (size_t i = 0; i < p->seqlen_q; i++) {
        size_t r = (b * p->heads_q + h) * p->seqlen_q + i;
        size_t at = to.offset + b * to.stride_batch + i * to.stride_seq + h * to.stride_head;
        for (size_t c = 0; c < dv; c++) {
          in[at + c] = 1;
          err = test_err(err, got[at + c], ref[r * dv + c]);
          nerr = test_naive_err(nerr, naive[r * dv + c], ref[r * dv + c]);
        }
        err_l = test_err(err_l, got_lse[r], ref_lse[r]);
        nerr_l = test_naive_err(nerr_l, naive_lse[r], ref_lse[r]);
      }
  /* DESIGN.md's rule; half storage against its same-precision naive baseline, + 1e-4. */
  double floor = ref_tolerance_floor(p->dtype), tol = 2 * nerr + floor, tol_l = 2 * nerr_l + floor;
  cr_log_info("max|o-ref| %.3g (tol %.3g), max|lse-ref| %.3g (tol %.3g)", err, tol, err_l, tol_l);
  cr_expect_leq(err, tol, "%s: O error %.3g exceeds tolerance %.3g", what, err, tol);
  expect_untouched(got, in, no, "O");
  if (with_lse) cr_expect_leq(err_l, tol_l, "%s: LSE error %.3g exceeds %.3g", what, err_l, tol_l);
  for (size_t i = with_lse ? rows : 0; i < nl; i++)
    if (!isnan(got_lse[i])) {
      cr_expect_fail("%s: LSE element %zu written (past its end, or not asked for)", what, i);
      break;
    }
  free(in), free(got), free(got_lse), free(ref), free(ref_lse), free(naive), free(naive_lse);
  for (int i = 0; i < 3; i++) clReleaseMemObject(t[i].buf), free(t[i].host);
  clReleaseMemObject(o), clReleaseMemObject(lse);
  check_release_extras(&x);
}

static const char *const kernel_files[] = {"forward.cl",
                                           "forward_tiles.cl",
                                           "forward_mma.cl",
                                           "forward_mma_half.cl",
                                           "backward.cl",
                                           "backward_mma.cl",
                                           "backward_mma_half.cl",
                                           "backward_mma_half_dq.cl",
                                           "backward_mma_half_atomic.cl",
                                           "decode.cl"};
enum { KERNEL_FILES = sizeof kernel_files / sizeof kernel_files[0] };

void test_kernel_dir(char *dir, size_t len, const char *marker, const char *text, int replace) {
  snprintf(dir, len, "%s", "/tmp/clattn-kdir-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  int copies = 0;
  for (int f = 0; f < KERNEL_FILES; f++) {
    char src[512], dst[512], line[1024];
    snprintf(src, sizeof src, "%s/cl/%s", CLATTN_SOURCE_DIR, kernel_files[f]);
    snprintf(dst, sizeof dst, "%s/%s", dir, kernel_files[f]);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    cr_assert(in && out, "cannot copy %s", src);
    int done = 0;
    while (fgets(line, sizeof line, in)) {
      int hit = !done && strstr(line, marker);
      if (!(hit && replace)) fputs(line, out);
      if (hit) fputs(text, out), done = 1;
    }
    fclose(in), fclose(out);
    if (done)
      copies++;
    else
      remove(dst); /* without the marker the embedded source serves */
  }
  cr_assert(copies, "marker \"%s\" not found in the kernels", marker);
}

void test_kernel_dir_remove(const char *dir) {
  char path[512];
  for (int f = 0; f < KERNEL_FILES; f++) {
    snprintf(path, sizeof path, "%s/%s", dir, kernel_files[f]);
    remove(path);
  }
  remove(dir);
}

clattn_config test_mma_config(unsigned block_q, unsigned block_kv) {
  clattn_config c = {.kernel = "forward_mma", .threads_per_row = 1, .rows_per_item = 1};
  c.block_q = block_q, c.block_kv = block_kv, c.stage_kv = 1, c.pad = 1;
  return c;
}

void test_forward_shape(const clattn_problem *p, int bhsd, size_t offset, int with_lse,
                        const clattn_config *cfg) {
  check_spec sp = {0};
  sp.problem = *p, sp.bhsd = bhsd, sp.offset = offset;
  test_forward_shape_spec(&sp, with_lse, cfg);
}

void test_forward_shape_spec(const check_spec *spec, int with_lse, const clattn_config *cfg) {
  const clattn_problem *p = &spec->problem;
  clattn_context *ctx = test_context(NULL);
  if (cfg) {
    cr_assert_eq(clattn_override_config(ctx, p, cfg), CLATTN_OK, "%s", clattn_last_error(ctx));
    clattn_plan_info info;
    cr_assert_eq(clattn_explain(ctx, p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
    cr_assert_str_eq(info.kernel, cfg->kernel);
    cr_assert_str_eq(info.origin, "override");
    cr_assert_eq(info.vector_width, cfg->vector_width ? cfg->vector_width : 1);
    if (!strcmp(cfg->kernel, "forward_mma_half")) /* every one of its stagings is its own */
      cr_assert_eq(info.stage_kv, cfg->stage_kv ? cfg->stage_kv : 1);
    size_t rm = cfg->rows_per_item ? cfg->rows_per_item : 1;
    cr_assert_eq(info.work_group_size,
                 !strcmp(cfg->kernel, "decode") /* a work-item per key of a tile, per row group */
                     ? (size_t)cfg->block_kv * cfg->threads_per_row
                     : strncmp(cfg->kernel, "forward_mma", 11) /* and forward_mma_half */
                           ? (size_t)(cfg->block_q / rm) * cfg->threads_per_row
                           : (size_t)cfg->block_q * 2 / rm /* a warp of 32 per 16 rm rows */);
  }
  check_spec sp = *spec;
  sp.seed = (unsigned)(p->seqlen_q * 31 + p->head_dim);
  test_forward_check_spec(ctx, &sp, with_lse, "forward");
  /* A kernel that stopped building would be passed over for another: say so here. */
  cr_expect_str_empty(clattn_context_diagnostics(ctx), "diagnostics: %s",
                      clattn_context_diagnostics(ctx));
  clattn_context_destroy(ctx);
}

clattn_context *test_context_with_db(char *db_path, size_t len) {
  clattn_context *probe = test_context(NULL); /* makes the folder */
  snprintf(db_path, len, "%s/db.json", test_tmpdir());
  clattn_context_destroy(probe);
  clattn_options opt = {test_tmpdir(), db_path, NULL};
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create_default(&opt, &ctx), CLATTN_OK, "%s", clattn_last_error(NULL));
  return ctx;
}

cl_command_queue test_out_of_order_queue(clattn_context *base) {
  cl_device_id dev = clattn_context_device(base);
  cl_command_queue_properties props = 0;
  clGetDeviceInfo(dev, CL_DEVICE_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  if (!(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)) return NULL;
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(clattn_context_cl_context(base), dev,
                                            CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  cr_assert_eq(err, CL_SUCCESS);
  return q;
}
