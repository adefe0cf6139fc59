/* The tuning database's files that are not ours to replace: a file that cannot be read (a
 * folder at the path; a file the user cannot read) or of a newer version is never written over
 * by a save; a corrupt one is kept aside as <path>.corrupt-<time>, with one warning, and a fresh
 * database written. Loading any of them at context creation is a warning, never fatal. */
#include "common.h"
#include "tune.h"
#include "tunedb.h"

#include <dirent.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char db_path[500];

static clattn_context *context_with_db(void) {
  return test_context_with_db(db_path, sizeof db_path);
}

/* An entry for the context's device; the save does not care what it tunes. */
static clattn__db_entry entry_for(clattn_context *ctx) {
  clattn__db_entry e;
  memset(&e, 0, sizeof e);
  clattn__db_device_of(&ctx->device, &e.dev);
  clattn__class cls = {32, 32, 0, clattn__seqlen_bucket(100)};
  clattn__config cfg = {8, 16, 2, 1, 1, 0, 1, 1};
  e.cls = cls, e.cfg = cfg, e.median_ms = 1.5;
  return e;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

static void read_file(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* A new context on the database: one warning naming it, no crash, correct results. */
static void expect_warned_at_load(clattn_context **ctx, const char *needle) {
  clattn_context_destroy(*ctx);
  clattn_options opt = {test_tmpdir(), db_path, NULL};
  cr_assert_eq(clattn_context_create_default(&opt, ctx), CLATTN_OK);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 100, p.head_dim = 32;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(*ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(*ctx));
  cr_assert_eq(clattn_explain(*ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(*ctx));
  cr_assert_str_neq(info.origin, "tuned");
  const char *diag = clattn_context_diagnostics(*ctx);
  cr_assert_eq(count(diag, db_path), 1, "one warning naming %s: \"%s\"", db_path, diag);
  cr_assert(strstr(diag, needle), "\"%s\" should say \"%s\"", diag, needle);
  test_context_still_works(*ctx);
}

/* The save fails with CLATTN_ERR_IO and a message naming the path. */
static void expect_save_refused(const clattn__db_entry *e) {
  char why[512] = "";
  cr_assert_eq(clattn__db_save_merged(db_path, e, 1, why, sizeof why), CLATTN_ERR_IO,
               "the save should fail (%s)", why);
  cr_assert(strstr(why, db_path), "the message \"%s\" should name the path", why);
}

Test(tunedb_files, folder_at_the_path_is_not_written_over) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  cr_assert_eq(mkdir(db_path, 0700), 0);
  char inside[600];
  snprintf(inside, sizeof inside, "%s/keep", db_path);
  write_file(inside, "mine");
  expect_save_refused(&e);
  struct stat st;
  cr_assert(stat(db_path, &st) == 0 && S_ISDIR(st.st_mode), "the folder is gone");
  char buf[64];
  read_file(inside, buf, sizeof buf);
  cr_assert_str_eq(buf, "mine");
  expect_warned_at_load(&ctx, "cannot be read");
  clattn_context_destroy(ctx);
}

Test(tunedb_files, newer_version_is_not_written_over) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  const char *newer = "{\"format\": \"clattn-tuning-db\", \"version\": 999, \"entries\": "
                      "[{\"what\": \"a later library's entry\"}]}\n";
  write_file(db_path, newer);
  expect_save_refused(&e);
  char buf[512];
  read_file(db_path, buf, sizeof buf);
  cr_assert_str_eq(buf, newer, "the file was changed");
  expect_warned_at_load(&ctx, "unknown version");
  clattn_context_destroy(ctx);
}

/* Valid JSON that is not a clattn database (a mistyped CLATTN_TUNING_DB pointing at another
 * program's file) is not "corrupt": neither moved aside nor written over. */
Test(tunedb_files, foreign_json_is_not_written_over) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  const char *foreign = "{\"name\": \"someone-elses-package\", \"version\": \"1.0.0\"}\n";
  write_file(db_path, foreign);
  expect_save_refused(&e);
  char buf[512];
  read_file(db_path, buf, sizeof buf);
  cr_assert_str_eq(buf, foreign, "the file was changed");
  expect_warned_at_load(&ctx, "not a clattn tuning database");
  clattn_context_destroy(ctx);
}

/* The corrupt copies of db_path in its folder. */
static size_t corrupt_copies(char *first, size_t len) {
  const char *dir = test_tmpdir();
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (!strncmp(de->d_name, "db.json.corrupt-", 16) && !n++)
      snprintf(first, len, "%s/%s", dir, de->d_name);
  closedir(d);
  return n;
}

Test(tunedb_files, corrupt_file_is_kept_aside_and_replaced) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  const char *corrupt = "{\"format\": \"clattn-tuning-db\", \"version\": 1, \"entr";
  write_file(db_path, corrupt);
  expect_warned_at_load(&ctx, "not valid JSON");
  char why[512] = "";
  cr_assert_eq(clattn__db_save_merged(db_path, &e, 1, why, sizeof why), CLATTN_OK, "%s", why);
  /* The warning comes back for the caller's diagnostics, naming both files. */
  char aside[800] = "";
  cr_assert_eq(corrupt_copies(aside, sizeof aside), 1, "one corrupt copy expected");
  cr_assert(strstr(why, db_path) && strstr(why, aside), "the warning \"%s\" should name %s", why,
            aside);
  char buf[512];
  read_file(aside, buf, sizeof buf);
  cr_assert_str_eq(buf, corrupt, "the corrupt file's text should be kept");
  clattn__db db = {0};
  size_t skipped = 0;
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 1, "the fresh database holds the new entry");
  clattn__db_free(&db);
  /* A second corrupt file gets a copy of its own; the first is kept. (Valid JSON that is not a
   * database is someone else's file: foreign_json_is_not_written_over.) */
  write_file(db_path, "[1, 2, 3");
  cr_assert_eq(clattn__db_save_merged(db_path, &e, 1, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(corrupt_copies(aside, sizeof aside), 2, "a second copy, the first kept");
  clattn_context_destroy(ctx);
}

/* A file the user cannot read (root reads everything, so the save runs as nobody, in a folder
 * nobody owns, on a file only root may read): the save must not replace it. */
Test(tunedb_files, unreadable_file_is_not_written_over) {
  struct passwd *pw = getpwnam("nobody");
  if (!pw || geteuid() != 0) cr_skip_test("needs root and the user nobody");
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  clattn_context_destroy(ctx);
  char dir[400]; /* beside test_tmpdir(), which only root may enter */
  snprintf(dir, sizeof dir, "%s", test_tmpdir());
  snprintf(strrchr(dir, '/'), sizeof dir - (size_t)(strrchr(dir, '/') - dir),
           "/clattn-nobody-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  cr_assert_eq(chown(dir, pw->pw_uid, pw->pw_gid), 0);
  cr_assert_eq(chmod(dir, 0755), 0);
  snprintf(db_path, sizeof db_path, "%s/db.json", dir);
  const char *secret = "{\"format\": \"clattn-tuning-db\", \"version\": 1, \"entries\": []}\n";
  write_file(db_path, secret);
  cr_assert_eq(chmod(db_path, 0600), 0);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    char why[512] = "";
    int ok = setgid(pw->pw_gid) == 0 && setuid(pw->pw_uid) == 0 &&
             clattn__db_save_merged(db_path, &e, 1, why, sizeof why) == CLATTN_ERR_IO &&
             strstr(why, db_path);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  char buf[512];
  read_file(db_path, buf, sizeof buf);
  char cmd[500];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the save as nobody should fail");
  cr_assert_str_eq(buf, secret, "the file was changed");
}

/* Through clattn_tune, as `clattn tune` saves: a folder at the path fails the run with the path
 * in the error; a corrupt file is kept aside with a warning in the context's diagnostics. */
Test(tunedb_files, tune_saves_as_the_database_allows) {
  clattn_context *ctx = context_with_db();
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 96, p.head_dim = 16;
  clattn_tune_options opt = {0};
  opt.budget_seconds = 5, opt.max_candidates = 1;
  clattn_tune_result r;
  cr_assert_eq(mkdir(db_path, 0700), 0);
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_IO, "a folder at %s", db_path);
  cr_assert(strstr(clattn_last_error(ctx), db_path), "\"%s\" should name %s",
            clattn_last_error(ctx), db_path);
  cr_assert_eq(rmdir(db_path), 0);
  write_file(db_path, "{ corrupt");
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.saved);
  char aside[800] = "";
  cr_assert_eq(corrupt_copies(aside, sizeof aside), 1);
  const char *diag = clattn_context_diagnostics(ctx);
  cr_assert_eq(count(diag, aside), 1, "one warning naming %s: \"%s\"", aside, diag);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

/* A KV cache class's entry ("kv_cache" in its class) survives a save and a load, apart from the
 * plain class's of the same sizes (a lookup of either finds its own), and a kv_cache the format
 * does not know skips the entry. */
Test(tunedb_files, kv_cache_classes_kept_apart) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[2] = {entry_for(ctx), entry_for(ctx)};
  e[1].cls.variants = CLATTN__VAR_KVCACHE | CLATTN__VAR_PAGED | CLATTN__VAR_KV8;
  /* told apart by their configs; decode's stage 3 (the next block's K with V, "next_k" in the
   * file) survives the round trip */
  e[1].cfg = (clattn__config){.kernel = clattn__family_find("decode"),
                              .bq = 4,
                              .bkv = 64,
                              .tpr = 4,
                              .stage = 3,
                              .rm = 2,
                              .vec = 4};
  char why[512] = "";
  cr_assert_eq(clattn__db_save_merged(db_path, e, 2, why, sizeof why), CLATTN_OK, "%s", why);
  char text[8192];
  read_file(db_path, text, sizeof text);
  cr_assert(count(text, "\"kv_cache\"") == 1 && count(text, "\"paged_i8\"") == 1, "%s", text);
  cr_assert(count(text, "\"next_k\"") == 1, "%s", text);
  clattn__db db = {0};
  size_t skipped = 0;
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 2);
  cr_assert_eq(skipped, 0);
  uint64_t hash[CLATTN__MAX_FAMILIES];
  for (int i = 0; i < CLATTN__MAX_FAMILIES; i++) hash[i] = e[0].source_hash;
  clattn__match level;
  clattn__class cache = e[1].cls, plain = e[0].cls;
  cache.variants |= CLATTN__VAR_KVLENS; /* a call's class has its lengths too */
  const clattn__db_entry *got = clattn__db_lookup(&db, &ctx->device, hash, &cache, &level);
  cr_assert(got && !memcmp(&got->cfg, &e[1].cfg, sizeof got->cfg), "the cache class's entry");
  got = clattn__db_lookup(&db, &ctx->device, hash, &plain, &level);
  cr_assert(got && got->cfg.bq == e[0].cfg.bq, "the plain class's entry");
  clattn__class contiguous = cache;
  contiguous.variants &= ~(unsigned)CLATTN__VAR_PAGED;
  cr_assert_null(clattn__db_lookup(&db, &ctx->device, hash, &contiguous, &level));
  clattn__db_free(&db);
  /* An unknown kv_cache: that entry is skipped, the other kept. */
  char *at = strstr(text, "paged_i8");
  memcpy(at, "paged_i9", 8);
  write_file(db_path, text);
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 1);
  cr_assert_eq(skipped, 1);
  cr_assert(strstr(why, "kv_cache"), "%s", why);
  clattn__db_free(&db);
  clattn_context_destroy(ctx);
}
