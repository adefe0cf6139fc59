#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

const char *test_tmpdir(void) {
  return tmpdir;
}

clattn_context *test_context(const char *kernel_dir) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/clattn-test-XXXXXX", base && base[0] ? base : "/tmp");
  cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
  char db[300];
  snprintf(db, sizeof db, "%s/tuning.json", tmpdir);
  clattn_options opt = {tmpdir, db, kernel_dir};
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

void test_kernel_dir(char *dir, size_t len, const char *marker, const char *text, int replace) {
  snprintf(dir, len, "%s", "/tmp/clattn-kdir-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  static const char *const files[] = {"forward.cl", "forward_tiles.cl"};
  for (int f = 0; f < 2; f++) {
    char src[512], dst[512], line[1024];
    snprintf(src, sizeof src, "%s/cl/%s", CLATTN_SOURCE_DIR, files[f]);
    snprintf(dst, sizeof dst, "%s/%s", dir, files[f]);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    cr_assert(in && out, "cannot copy %s", src);
    int done = 0;
    while (fgets(line, sizeof line, in)) {
      int hit = !done && strstr(line, marker);
      if (!(hit && replace)) fputs(line, out);
      if (hit) fputs(text, out), done = 1;
    }
    fclose(in), fclose(out);
    cr_assert(done, "marker \"%s\" not found in %s", marker, src);
  }
}

void test_kernel_dir_remove(const char *dir) {
  char path[512];
  static const char *const files[] = {"forward.cl", "forward_tiles.cl"};
  for (int f = 0; f < 2; f++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[f]);
    remove(path);
  }
  remove(dir);
}
