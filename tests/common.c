#include "common.h"

#include <ftw.h>
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

void test_context_still_works(clattn_context *ctx) {
  check_spec sp = {0};
  sp.problem.batch = 1, sp.problem.heads_q = 2, sp.problem.seqlen_q = 9;
  sp.problem.seqlen_kv = 13, sp.problem.head_dim = 8;
  sp.with_lse = 1;
  check_result r;
  clattn_status st = check_run(ctx, &sp, &r);
  cr_assert_eq(st, CLATTN_OK, "context unusable after a failure: %s", clattn_last_error(ctx));
  cr_assert(r.pass, "wrong result after a failure: err %g > tol %g", r.err_o, r.tol_o);
}

static const char *const kernel_files[] = {"forward.cl", "forward_tiles.cl", "forward_mma.cl",
                                           "backward.cl", "backward_mma.cl"};
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
  clattn_context *ctx = test_context(NULL);
  check_spec sp = {0};
  sp.problem = *p;
  sp.bhsd = bhsd, sp.offset = offset, sp.with_lse = with_lse;
  sp.seed = (unsigned)(p->seqlen_q * 31 + p->head_dim);
  if (cfg) {
    cr_assert_eq(clattn_override_config(ctx, p, cfg), CLATTN_OK, "%s", clattn_last_error(ctx));
    clattn_plan_info info;
    cr_assert_eq(clattn_explain(ctx, p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
    cr_assert_str_eq(info.kernel, cfg->kernel);
    cr_assert_str_eq(info.origin, "override");
    cr_assert_eq(info.vector_width, cfg->vector_width ? cfg->vector_width : 1);
    cr_assert_eq(info.work_group_size,
                 strcmp(cfg->kernel, "forward_mma")
                     ? (size_t)(cfg->block_q / cfg->rows_per_item) * cfg->threads_per_row
                     : (size_t)cfg->block_q * 2 /* a warp of 32 per 16 rows */);
  }
  check_result r;
  cr_assert_eq(check_run(ctx, &sp, &r), CLATTN_OK, "forward failed: %s", clattn_last_error(ctx));
  cr_log_info("max|o-ref| %.3g (tol %.3g), max|lse-ref| %.3g (tol %.3g)", r.err_o, r.tol_o,
              r.err_lse, r.tol_lse);
  cr_expect_leq(r.err_o, r.tol_o, "O error %.3g exceeds tolerance %.3g", r.err_o, r.tol_o);
  if (with_lse)
    cr_expect_leq(r.err_lse, r.tol_lse, "LSE error %.3g exceeds %.3g", r.err_lse, r.tol_lse);
  /* A kernel that stopped building would be passed over for another: say so here. */
  cr_expect_str_empty(clattn_context_diagnostics(ctx), "diagnostics: %s",
                      clattn_context_diagnostics(ctx));
  clattn_context_destroy(ctx);
}
