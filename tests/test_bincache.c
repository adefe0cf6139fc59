/* The on-disk program binary cache: a second process reuses what the first compiled; an
 * unreadable, truncated or corrupt entry is rebuilt from source, never fatal. */
#include "common.h"
#include "tune.h"

#include <dirent.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- entries and folders that are not ours alone (as ssh and pip treat theirs) ---- */

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* A second class of problem, so that the cache is consulted again. */
static void run_other_problem(clattn_context *ctx) {
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 20, p.head_dim = 32;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
}

static void chown_nobody(const char *path) {
  struct passwd *pw = getpwnam("nobody");
  if (!pw || geteuid() != 0) cr_skip_test("needs root and the user nobody");
  cr_assert_eq(chown(path, pw->pw_uid, pw->pw_gid), 0, "chown %s", path);
}

/* The programs folder, changed by damage, is neither read nor written; one warning names it;
 * programs still build from source. */
static void expect_folder_ignored(void (*damage)(const char *path)) {
  fill_cache_in_child();
  char dir[400];
  snprintf(dir, sizeof dir, "%s/programs", cache);
  damage(dir);
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  run_other_problem(ctx);
  cr_assert_eq(ctx->bincache_loaded, 0, "an entry was loaded from %s", dir);
  cr_assert_eq(ctx->bincache_stored, 0, "an entry was written into %s", dir);
  cr_assert_eq(ctx->compiled, 2, "both programs are built from source");
  const char *diag = clattn_context_diagnostics(ctx);
  cr_assert_eq(count(diag, dir), 1, "one warning naming %s: \"%s\"", dir, diag);
  clattn_context_destroy(ctx);
}

static void open_to_all(const char *path) {
  cr_assert_eq(chmod(path, 0777), 0);
}

Test(bincache, folder_writable_by_others_is_ignored) {
  expect_folder_ignored(open_to_all);
}
Test(bincache, folder_of_another_user_is_ignored) {
  expect_folder_ignored(chown_nobody);
}

/* The entry, changed by damage, is not loaded (one warning names it); the program is built
 * from source and stored again, as this user's. */
static void expect_entry_ignored(void (*damage)(const char *path)) {
  fill_cache_in_child();
  char path[700];
  entry_file(path, sizeof path);
  damage(path);
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  cr_assert_eq(ctx->bincache_loaded, 0, "the entry %s was loaded", path);
  cr_assert_eq(ctx->compiled, 1);
  const char *diag = clattn_context_diagnostics(ctx);
  cr_assert_eq(count(diag, path), 1, "one warning naming %s: \"%s\"", path, diag);
  clattn_context_destroy(ctx);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert(st.st_uid == geteuid() && (st.st_mode & 0777) == 0600, "rewritten as %o by %u",
            (unsigned)st.st_mode & 0777, (unsigned)st.st_uid);
}

static void entry_open_to_all(const char *path) {
  cr_assert_eq(chmod(path, 0666), 0);
}

Test(bincache, entry_writable_by_others_is_ignored) {
  expect_entry_ignored(entry_open_to_all);
}
Test(bincache, entry_of_another_user_is_ignored) {
  expect_entry_ignored(chown_nobody);
}

Test(bincache, folders_are_created_private) {
  clattn_context *probe = test_context(NULL);
  snprintf(cache, sizeof cache, "%s/fresh/cache", test_tmpdir());
  clattn_context_destroy(probe);
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  cr_assert_eq(ctx->bincache_stored, 1);
  clattn_context_destroy(ctx);
  const char *sub[] = {"", "/programs"};
  for (int i = 0; i < 2; i++) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s%s", cache, sub[i]);
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0, "%s", dir);
    cr_assert_eq(st.st_mode & 0777, 0700, "%s is %o, not 0700", dir, (unsigned)st.st_mode & 0777);
  }
}

/* The peak of this process's virtual memory (VmPeak), in KiB. */
static long vm_peak_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  cr_assert_not_null(f);
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmPeak: %ld kB", &kib) == 1) break;
  fclose(f);
  cr_assert_gt(kib, 0);
  return kib;
}

/* An entry of the right key whose header claims a 1 GiB binary, in a file of a few hundred
 * bytes: rejected, without allocating what the header claims. */
Test(bincache, huge_length_in_tiny_entry_is_rejected) {
  fill_cache_in_child();
  char path[700];
  entry_file(path, sizeof path);
  unsigned char head[16];
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  cr_assert_eq(fread(head, 1, 16, f), 16);
  uint32_t keylen;
  memcpy(&keylen, head + 12, 4);
  char *key = malloc(keylen);
  cr_assert_eq(fread(key, 1, keylen, f), keylen);
  fclose(f);
  uint64_t binlen = (uint64_t)1 << 30, sum = 0;
  f = fopen(path, "wb");
  fwrite(head, 1, 16, f);
  fwrite(key, 1, keylen, f);
  fwrite(&binlen, 8, 1, f);
  fwrite(&sum, 8, 1, f);
  fputs("tiny", f);
  fclose(f);
  free(key);
  clattn_context *ctx = context_on(cache);
  long before = vm_peak_kib();
  run_problem(ctx);
  long grown = vm_peak_kib() - before;
  cr_assert_eq(ctx->bincache_rejected, 1);
  cr_assert_eq(ctx->compiled, 1);
  cr_assert_lt(grown, 512 << 10, "virtual memory grew by %ld KiB", grown);
  clattn_context_destroy(ctx);
}

/* Entries are counted as stored only when written: not where the programs folder is a file,
 * nor where the entry's name is taken by a folder (the rename fails). */
Test(bincache, unwritable_folder_stores_nothing) {
  clattn_context *probe = test_context(NULL);
  snprintf(cache, sizeof cache, "%s/bincache", test_tmpdir());
  clattn_context_destroy(probe);
  cr_assert_eq(mkdir(cache, 0700), 0);
  char dir[400];
  snprintf(dir, sizeof dir, "%s/programs", cache);
  FILE *f = fopen(dir, "wb");
  cr_assert_not_null(f);
  fclose(f);
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  cr_assert_eq(ctx->compiled, 1);
  cr_assert_eq(ctx->bincache_stored, 0, "nothing can be stored under %s", cache);
  clattn_context_destroy(ctx);
}

Test(bincache, failed_write_stores_nothing) {
  fill_cache_in_child();
  char path[700];
  entry_file(path, sizeof path);
  cr_assert_eq(remove(path), 0);
  cr_assert_eq(mkdir(path, 0700), 0);
  clattn_context *ctx = context_on(cache);
  run_problem(ctx);
  cr_assert_eq(ctx->compiled, 1);
  cr_assert_eq(ctx->bincache_stored, 0, "the entry's name is a folder: nothing was stored");
  clattn_context_destroy(ctx);
}
