/* The helpers of the tuning database's tests (test_tunedb.c: its file; test_tunedb_plans.c: what
 * the planner takes from it), one binary of two sources: a context on a database of its own, an
 * entry for its device, saves, hand edits of the file and a fresh context's plan. Static, so that
 * each source has its own database path and the helpers stay out of the link. */
#ifndef CLATTN_TEST_TUNEDB_COMMON_H
#define CLATTN_TEST_TUNEDB_COMMON_H

#include "common.h"
#include "tune.h"
#include "tunedb.h"

#include <stdio.h>
#include <string.h>

static char db_path[300];

static inline clattn_context *context_with_db(void) {
  return test_context_with_db(db_path, sizeof db_path);
}

static inline clattn_problem problem(void) {
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 100, p.head_dim = 32;
  return p;
}

/* An entry for the context's own device, class of problem(), with an unusual config. */
static inline clattn__db_entry entry_for(clattn_context *ctx) {
  clattn__db_entry e;
  memset(&e, 0, sizeof e);
  clattn__db_device_of(&ctx->device, &e.dev);
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__FORWARD, &src), CLATTN_OK);
  e.source_hash = src.hash[0]; /* the config below is a forward_rows one */
  clattn__sources_free(&src);
  clattn__class cls = {32, 32, 0, clattn__seqlen_bucket(100)};
  clattn__config cfg = {8, 16, 2, 1, 1, 0, 1, 1};
  e.cls = cls, e.cfg = cfg, e.median_ms = 1.5, e.spread = 0.01;
  snprintf(e.date, sizeof e.date, "2026-12-02");
  return e;
}

/* entry_for's, made a backward entry: backward_rows 16/32 with that kernel's source hash. */
static inline clattn__db_entry backward_entry_for(clattn_context *ctx) {
  clattn__db_entry e = entry_for(ctx);
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__BACKWARD, &src), CLATTN_OK);
  clattn__config bwd = {0};
  bwd.kernel = clattn__family_find("backward_rows"), bwd.bq = 16, bwd.bkv = 32;
  e.cls.pass = CLATTN__BACKWARD, e.cfg = bwd, e.source_hash = src.hash[bwd.kernel];
  clattn__sources_free(&src);
  return e;
}

static inline void save(const clattn__db_entry *e, size_t n) {
  char why[256];
  cr_assert_eq(clattn__db_save_merged(db_path, e, n, why, sizeof why), CLATTN_OK, "%s", why);
}

/* The database file's text, to be edited by hand. */
static inline void read_db(char *buf, size_t len) {
  FILE *f = fopen(db_path, "rb");
  cr_assert_not_null(f, "%s", db_path);
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
}

static inline clattn_plan_info explain_fresh(clattn_context **ctx) {
  /* A new context reads the database again. */
  clattn_context_destroy(*ctx);
  clattn_options opt = {test_tmpdir(), db_path, NULL};
  cr_assert_eq(clattn_context_create_default(&opt, ctx), CLATTN_OK);
  clattn_problem p = problem();
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(*ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(*ctx));
  return info;
}

static inline void write_text(const char *text) {
  FILE *f = fopen(db_path, "wb");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

/* A bad file: a warning (once), the heuristic, correct results. */
static inline void expect_ignored(clattn_context **ctx, const char *needle) {
  clattn_plan_info info = explain_fresh(ctx);
  cr_assert(!strcmp(info.origin, "heuristic") || !strcmp(info.origin, "built-in"),
            "origin %s with a bad database", info.origin);
  const char *diag = clattn_context_diagnostics(*ctx);
  cr_assert(strstr(diag, needle), "diagnostics \"%s\" should mention \"%s\"", diag, needle);
  const char *first = strstr(diag, needle);
  cr_assert_null(strstr(first + 1, needle), "reported more than once: %s", diag);
  test_context_still_works(*ctx);
}

#endif
