/* The per-context program cache: keyed by source hash and options; shapes of one problem class
 * reuse the compiled kernel; CLATTN_KERNEL_DIR sources are keyed by their own text. */
#include "common.h"
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void forward_once(clattn_context *ctx, size_t nq, size_t nkv, size_t d, unsigned flags) {
  check_spec sp = {0};
  sp.problem.batch = 1, sp.problem.heads_q = 2, sp.problem.seqlen_q = nq;
  sp.problem.seqlen_kv = nkv, sp.problem.head_dim = d, sp.problem.flags = flags;
  check_result r;
  cr_assert_eq(check_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "err %g > tol %g", r.err_o, r.tol_o);
}

Test(cache, one_program_per_problem_class) {
  clattn_context *ctx = test_context(NULL);
  cr_assert_eq(clattn__program_cache_size(ctx), 0);
  forward_once(ctx, 10, 20, 32, 0);
  cr_assert_eq(clattn__program_cache_size(ctx), 1);
  forward_once(ctx, 70, 33, 32, 0); /* other lengths, same class: reused */
  cr_assert_eq(clattn__program_cache_size(ctx), 1);
  forward_once(ctx, 10, 20, 32, CLATTN_CAUSAL); /* causal is another class */
  cr_assert_eq(clattn__program_cache_size(ctx), 2);
  forward_once(ctx, 10, 20, 48, 0); /* another head_dim */
  cr_assert_eq(clattn__program_cache_size(ctx), 3);
  clattn_context_destroy(ctx);
}

Test(cache, keyed_by_source_and_options) {
  clattn_context *ctx = test_context(NULL);
  const char *src = "__kernel void f(__global float *x) { x[0] = VALUE; }";
  cl_program a, b, c, d;
  cr_assert_eq(clattn__build(ctx, src, "-DVALUE=1", &a), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn__build(ctx, src, "-DVALUE=1", &b), CLATTN_OK);
  cr_assert_eq(a, b, "same source and options must reuse the program");
  cr_assert_eq(clattn__build(ctx, src, "-DVALUE=2", &c), CLATTN_OK);
  cr_assert_neq(a, c, "other options are another program");
  const char *src2 = "__kernel void f(__global float *x) { x[0] = VALUE + 0; }";
  cr_assert_eq(clattn__build(ctx, src2, "-DVALUE=1", &d), CLATTN_OK);
  cr_assert_neq(a, d, "other source text is another program");
  cr_assert_eq(clattn__program_cache_size(ctx), 3);
  clattn_context_destroy(ctx);
}

Test(cache, hash_distinguishes_texts) {
  uint64_t h1 = clattn__hash("abc", 3, 0), h2 = clattn__hash("abd", 3, 0);
  cr_assert_neq(h1, h2);
  cr_assert_eq(h1, clattn__hash("abc", 3, 0));
}

/* A kernel directory replaces the embedded text at run time: an edited copy is compiled (and
 * cached) on its own and gives the same results. */
Test(cache, kernel_dir_replaces_embedded_source) {
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "#define WG", "/* edited copy */\n", 0);
  clattn_context *ctx = test_context(dir);
  forward_once(ctx, 33, 47, 24, CLATTN_CAUSAL);
  cr_assert_eq(clattn__program_cache_size(ctx), 1);
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__FORWARD, &src), CLATTN_OK);
  /* Every family whose file has the marker reads the edited copy (the others have no copy). */
  for (unsigned v = 0; v < clattn__families(); v++)
    if (src.text[v] && strstr(src.text[v], "#define WG"))
      cr_assert(strstr(src.text[v], "/* edited copy */"), "the kernel dir's text is used");
  cr_assert(ctx->programs->source_hash == src.hash[0] || ctx->programs->source_hash == src.hash[1],
            "the program was built from an edited copy");
  clattn__sources_free(&src);
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

/* The tuner's parallel compiles land in the cache: building them afterwards compiles nothing. */
Test(cache, prebuild_compiles_in_parallel_into_the_cache) {
  clattn_context *ctx = test_context(NULL);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 2) {
    clattn_context_destroy(ctx);
    cr_skip_test("one core: prebuild leaves compiling to clattn__build");
  }
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__FORWARD, &src), CLATTN_OK);
  clattn__class cls = {24, 24, 1, 256};
  clattn__config cfgs[2] = {{16, 16, 1, 1, 0, 0, 1}, {16, 16, 4, 1, 1, 1, 2}};
  clattn__prebuild(ctx, &src, &cls, cfgs, 2);
  cr_assert_eq(ctx->compiled, 2);
  cr_assert_eq(clattn__program_cache_size(ctx), 2);
  for (int i = 0; i < 2; i++) {
    clattn__plan p = {0};
    char why[200];
    cr_assert_eq(clattn__plan_build(ctx, &src, &cls, &cfgs[i], &p, why, sizeof why), CLATTN_OK);
    cr_assert_not_null(p.kernels[0], "%s", why);
    clattn__plan_release(&p);
  }
  cr_assert_eq(ctx->compiled, 2, "the prebuilt programs were compiled again");
  clattn__sources_free(&src);
  clattn_context_destroy(ctx);
}
