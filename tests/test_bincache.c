/* The on-disk program binary cache: a second process reuses what the first compiled; an
 * unreadable, truncated or corrupt entry is rebuilt from source, never fatal. */
#include "common.h"
#include "internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char cache[300];

static clattn_context *context_on(const char *dir) {
  clattn_options opt = {dir, "", NULL};
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create_default(&opt, &ctx), CLATTN_OK, "%s", clattn_last_error(NULL));
  return ctx;
}

/* The cache's single entry file (the tests compile one class). */
static void entry_file(char *out, size_t len) {
  char dir[400];
  snprintf(dir, sizeof dir, "%s/programs", cache);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "no programs folder in %s", cache);
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp")) {
      snprintf(out, len, "%s/%s", dir, e->d_name);
      found++;
    }
  closedir(d);
  cr_assert_eq(found, 1, "expected one cache entry, found %d", found);
}

static void fill_cache_in_child(void) {
  clattn_context *probe = test_context(NULL);
  snprintf(cache, sizeof cache, "%s/bincache", test_tmpdir());
  clattn_context_destroy(probe);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) { /* the first process compiles and stores */
    clattn_context *ctx = context_on(cache);
    clattn_problem p = {0};
    p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 20, p.head_dim = 24;
    clattn_plan_info info;
    int ok = clattn_explain(ctx, &p, &info) == CLATTN_OK && ctx->compiled == 1 &&
             ctx->bincache_stored == 1 && ctx->bincache_loaded == 0;
    clattn_context_destroy(ctx);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the first process failed");
}

static void run_problem(clattn_context *ctx) {
  check_spec sp = {0};
  sp.problem.batch = 1, sp.problem.heads_q = 1, sp.problem.seqlen_q = 20;
  sp.problem.seqlen_kv = 20, sp.problem.head_dim = 24, sp.with_lse = 1;
  check_result r;
  cr_assert_eq(check_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "wrong result: %g > %g", r.err_o, r.tol_o);
}

Test(bincache, second_process_reuses_binaries) {
  fill_cache_in_child();
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  cr_assert_eq(ctx->bincache_loaded, 1, "the second process should load the binary");
  cr_assert_eq(ctx->compiled, 0, "the second process should not compile");
  clattn_context_destroy(ctx);
}

static void corrupt_and_check(void (*damage)(const char *path)) {
  fill_cache_in_child();
  char path[700];
  entry_file(path, sizeof path);
  damage(path);
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  cr_assert_eq(ctx->bincache_loaded, 0);
  cr_assert_eq(ctx->bincache_rejected, 1, "the damaged entry should be rejected");
  cr_assert_eq(ctx->compiled, 1, "and rebuilt from source");
  clattn_context_destroy(ctx);
  ctx = context_on(cache); /* and rewritten: the next process loads it */
  run_problem(ctx);
  cr_assert_eq(ctx->bincache_loaded, 1);
  clattn_context_destroy(ctx);
}

static void truncate_half(const char *path) {
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  cr_assert_eq(truncate(path, n / 2), 0);
}

static void flip_last_byte(const char *path) {
  FILE *f = fopen(path, "r+b");
  fseek(f, -1, SEEK_END);
  int c = fgetc(f);
  fseek(f, -1, SEEK_END);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

static void garbage(const char *path) {
  FILE *f = fopen(path, "wb");
  fputs("not a cache entry at all", f);
  fclose(f);
}

Test(bincache, truncated_entry_is_rebuilt) {
  corrupt_and_check(truncate_half);
}
Test(bincache, corrupt_entry_is_rebuilt) {
  corrupt_and_check(flip_last_byte);
}
Test(bincache, garbage_entry_is_rebuilt) {
  corrupt_and_check(garbage);
}

Test(bincache, disabled_with_empty_cache_dir) {
  clattn_context *ctx = context_on("");
  run_problem(ctx);
  cr_assert_eq(ctx->bincache_stored, 0);
  cr_assert_eq(ctx->compiled, 1);
  clattn_context_destroy(ctx);
}
