/* The tuning database: round trip, every lookup level as the runtime sees it (explain's
 * origin), bad files of every kind, concurrent writers; and config overrides. */
#include "common.h"
#include "tune.h"
#include "tunedb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char db_path[300];

static clattn_context *context_with_db(void) {
  return test_context_with_db(db_path, sizeof db_path);
}

static clattn_problem problem(void) {
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 100, p.head_dim = 32;
  return p;
}

/* An entry for the context's own device, class of problem(), with an unusual config. */
static clattn__db_entry entry_for(clattn_context *ctx) {
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

static void save(const clattn__db_entry *e, size_t n) {
  char why[256];
  cr_assert_eq(clattn__db_save_merged(db_path, e, n, why, sizeof why), CLATTN_OK, "%s", why);
}

/* The database file's text, to be edited by hand. */
static void read_db(char *buf, size_t len) {
  FILE *f = fopen(db_path, "rb");
  cr_assert_not_null(f, "%s", db_path);
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
}

static clattn_plan_info explain_fresh(clattn_context **ctx) {
  /* A new context reads the database again. */
  clattn_context_destroy(*ctx);
  clattn_options opt = {test_tmpdir(), db_path, NULL};
  cr_assert_eq(clattn_context_create_default(&opt, ctx), CLATTN_OK);
  clattn_problem p = problem();
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(*ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(*ctx));
  return info;
}

Test(tunedb, round_trip) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[3] = {entry_for(ctx), entry_for(ctx), entry_for(ctx)};
  e[1].cls.causal = 1, e[2].cls.d = 64, e[2].cfg.bkv = 64;
  save(e, 3);
  save(e, 1); /* the same key again replaces, never duplicates */
  clattn__db db = {0};
  size_t skipped;
  char why[256];
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 3);
  cr_assert_eq(skipped, 0);
  for (size_t i = 0; i < 3; i++) {
    cr_assert_eq(memcmp(&db.entries[i].cfg, &e[i].cfg, sizeof e[i].cfg), 0);
    cr_assert_eq(memcmp(&db.entries[i].cls, &e[i].cls, sizeof e[i].cls), 0);
    cr_assert_eq(db.entries[i].source_hash, e[i].source_hash);
    cr_assert_str_eq(db.entries[i].dev.driver, e[i].dev.driver);
    cr_assert_float_eq(db.entries[i].median_ms, 1.5, 1e-12);
  }
  clattn__db_free(&db);
  clattn_context_destroy(ctx);
}

Test(tunedb, every_lookup_level) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  clattn_plan_info info = explain_fresh(&ctx);
  cr_assert(!strcmp(info.origin, "heuristic") || !strcmp(info.origin, "built-in"), "%s",
            info.origin);
  save(&e, 1);
  info = explain_fresh(&ctx);
  cr_assert_str_eq(info.origin, "tuned");
  cr_assert_eq(info.block_q, 8);
  cr_assert_eq(info.block_kv, 16);
  cr_assert_eq(info.threads_per_row, 2);
  remove(db_path);
  clattn__db_entry other = e; /* another driver of the same device */
  snprintf(other.dev.driver, sizeof other.dev.driver, "0.0-other");
  save(&other, 1);
  info = explain_fresh(&ctx);
  cr_assert_str_eq(info.origin, "fallback");
  cr_assert(strstr(info.reason, "another driver"), "%s", info.reason);
  remove(db_path);
  other = e; /* another device of the same vendor and type */
  snprintf(other.dev.name, sizeof other.dev.name, "some other device");
  save(&other, 1);
  info = explain_fresh(&ctx);
  cr_assert_str_eq(info.origin, "fallback");
  cr_assert(strstr(info.reason, "another device"), "%s", info.reason);
  remove(db_path);
  other = e; /* this device, another sequence-length bucket */
  other.cls.bucket = 4096;
  save(&other, 1);
  info = explain_fresh(&ctx);
  cr_assert_str_eq(info.origin, "fallback");
  remove(db_path);
  other = e; /* another kernel source: stale, never used */
  other.source_hash ^= 1;
  save(&other, 1);
  info = explain_fresh(&ctx);
  cr_assert_str_neq(info.origin, "tuned");
  cr_assert_str_neq(info.origin, "fallback");
  remove(db_path);
  other = e; /* another vendor: nothing */
  snprintf(other.dev.vendor, sizeof other.dev.vendor, "Nobody Inc.");
  save(&other, 1);
  info = explain_fresh(&ctx);
  cr_assert_str_neq(info.origin, "fallback");
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

static void write_text(const char *text) {
  FILE *f = fopen(db_path, "wb");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

/* A bad file: a warning (once), the heuristic, correct results. */
static void expect_ignored(clattn_context **ctx, const char *needle) {
  clattn_plan_info info = explain_fresh(ctx);
  cr_assert(!strcmp(info.origin, "heuristic") || !strcmp(info.origin, "built-in"),
            "origin %s with a bad database", info.origin);
  const char *diag = clattn_context_diagnostics(*ctx);
  cr_assert(strstr(diag, needle), "diagnostics \"%s\" should mention \"%s\"", diag, needle);
  const char *first = strstr(diag, needle);
  cr_assert_null(strstr(first + 1, needle), "reported more than once: %s", diag);
  test_context_still_works(*ctx);
}

Test(tunedb, corrupt_truncated_foreign_files) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e = entry_for(ctx);
  save(&e, 1);
  FILE *f = fopen(db_path, "rb");
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n / 2] = 0; /* truncated */
  write_text(buf);
  expect_ignored(&ctx, "not valid JSON");
  write_text("\x01\x02garbage{{{");
  expect_ignored(&ctx, "not valid JSON");
  write_text("{\"format\": \"something-else\", \"entries\": []}");
  expect_ignored(&ctx, "not a clattn tuning database");
  write_text("[1, 2, 3]");
  expect_ignored(&ctx, "not a clattn tuning database");
  write_text("{\"format\": \"clattn-tuning-db\", \"version\": 99, \"entries\": []}");
  expect_ignored(&ctx, "unknown version");
  clattn_context_destroy(ctx);
}

Test(tunedb, hostile_values) {
  clattn_context *ctx = context_with_db();
  /* Deep nesting: cJSON refuses it; no stack overflow. */
  size_t depth = 100000;
  char *deep = malloc(2 * depth + 1);
  memset(deep, '[', depth);
  memset(deep + depth, ']', depth);
  deep[2 * depth] = 0;
  write_text(deep);
  free(deep);
  expect_ignored(&ctx, "not valid JSON");
  /* Wrong types and huge numbers: the entries are skipped. */
  clattn__db_entry e = entry_for(ctx);
  save(&e, 1);
  char buf[8192];
  read_db(buf, sizeof buf);
  char *at = strstr(buf, "\"block_q\":");
  cr_assert_not_null(at);
  char hostile[9000];
  snprintf(hostile, sizeof hostile, "%.*s\"block_q\": 1e300, %s", (int)(at - buf), buf,
           strchr(at, ',') + 1);
  write_text(hostile);
  expect_ignored(&ctx, "entries skipped");
  snprintf(hostile, sizeof hostile, "%.*s\"block_q\": \"eight\", %s", (int)(at - buf), buf,
           strchr(at, ',') + 1);
  write_text(hostile);
  expect_ignored(&ctx, "entries skipped");
  /* A config that no longer fits the device: never used. */
  remove(db_path);
  e.cfg.bq = 1024, e.cfg.tpr = 1024; /* a work-group of a million */
  save(&e, 1);
  expect_ignored(&ctx, "no longer fits this device");
  clattn_context_destroy(ctx);
}

/* Two processes merging into one file at once lose no entry of either. */
Test(tunedb, concurrent_writers) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry base = entry_for(ctx);
  clattn_context_destroy(ctx);
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    cr_assert_neq(kids[k], -1);
    if (kids[k] == 0) {
      for (unsigned i = 0; i < 25; i++) {
        clattn__db_entry e = base;
        e.cls.d = 1 + i + 25 * k; /* a distinct class per write */
        char why[256];
        if (clattn__db_save_merged(db_path, &e, 1, why, sizeof why) != CLATTN_OK) _exit(1);
      }
      _exit(0);
    }
  }
  for (int k = 0; k < 2; k++) {
    int status = 0;
    waitpid(kids[k], &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", k);
  }
  clattn__db db = {0};
  size_t skipped;
  char why[256];
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 50, "entries lost: %zu of 50", db.count);
  clattn__db_free(&db);
}

Test(tunedb, overrides) {
  clattn_context *ctx = context_with_db();
  clattn_problem p = problem();
  clattn_config cfg = {"forward_rows", 4, 8, 2, 1, 0};
  cr_assert_eq(clattn_override_config(ctx, &p, &cfg), CLATTN_OK, "%s", clattn_last_error(ctx));
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.origin, "override");
  cr_assert_eq(info.block_q, 4);
  cr_assert_eq(info.block_kv, 8);
  test_context_still_works(ctx); /* another class: unaffected */
  check_spec sp = {0};
  sp.problem = p, sp.with_lse = 1;
  check_result r;
  cr_assert_eq(check_run(ctx, &sp, &r), CLATTN_OK);
  cr_assert(r.pass, "the override computes wrong results: %g > %g", r.err_o, r.tol_o);
  clattn_config huge = {"forward_rows", 4096, 4096, 1, 1, 0};
  cr_assert_eq(clattn_override_config(ctx, &p, &huge), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "local memory") ||
                strstr(clattn_last_error(ctx), "work-group"),
            "%s", clattn_last_error(ctx));
  clattn_config unknown = {"nope", 4, 8, 1, 1, 0};
  cr_assert_eq(clattn_override_config(ctx, &p, &unknown), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "unknown kernel variant"));
  cr_assert_eq(clattn_override_config(ctx, &p, NULL), CLATTN_OK);
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_neq(info.origin, "override");
  clattn_context_destroy(ctx);
}

/* forward_mma's tiles stored split (stage_kv 2, "split_kv" in the file) survive a round trip;
 * on any other kernel they are refused, in an override and in the file. */
Test(tunedb, split_kv) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[2] = {entry_for(ctx), entry_for(ctx)};
  e[0].cfg.kernel = 2, e[0].cfg.stage = 2, e[0].cfg.bq = 64, e[0].cfg.bkv = 32;
  e[0].cfg.tpr = 1;
  e[1].cls.causal = 1; /* forward_rows, stage 1 */
  save(e, 2);
  clattn__db db = {0};
  size_t skipped;
  char why[256];
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 2);
  for (size_t i = 0; i < 2; i++)
    cr_assert_eq(memcmp(&db.entries[i].cfg, &e[i].cfg, sizeof e[i].cfg), 0, "entry %zu", i);
  clattn__db_free(&db);
  /* split_kv on forward_rows: the entry is skipped. */
  char buf[8192];
  read_db(buf, sizeof buf);
  char *at = strstr(buf, "\"split_kv\"");
  cr_assert_not_null(at, "%s", buf);
  char *rows = strstr(buf, "\"kernel\":\t\"forward_rows\"");
  cr_assert_not_null(rows, "%s", buf);
  char text[9000];
  snprintf(text, sizeof text, "%.*s\"split_kv\": true, %s", (int)(rows - buf), buf, rows);
  remove(db_path);
  FILE *w = fopen(db_path, "wb");
  fputs(text, w);
  fclose(w);
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 1);
  cr_assert_eq(skipped, 1);
  cr_assert_eq(db.entries[0].cfg.stage, 2);
  clattn__db_free(&db);
  clattn_problem p = problem();
  clattn_config cfg = {"forward_rows", 4, 8, 2, 2, 0};
  cr_assert_eq(clattn_override_config(ctx, &p, &cfg), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "forward_mma's (tiles"), "%s", clattn_last_error(ctx));
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

/* With no database entry, PoCL's CPU device gets the built-in defaults measured here. */
Test(tunedb, built_in_defaults_on_pocl) {
  clattn_context *ctx = context_with_db();
  if (!strstr(ctx->device.platform_name, "Portable Computing Language") ||
      !(ctx->device.type & CL_DEVICE_TYPE_CPU)) {
    clattn_context_destroy(ctx);
    cr_skip_test("built-in defaults are measured for PoCL's CPU device");
  }
  clattn_problem p = problem();
  p.head_dim = 128, p.seqlen_q = p.seqlen_kv = 1000, p.flags = CLATTN_CAUSAL;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(info.origin, "built-in");
  p.seqlen_q = p.seqlen_kv = 5000; /* another bucket: the nearest measured one below */
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.origin, "built-in");
  /* Half classes have rows of their own: bf16 at d = 128, causal, two rows per work-item. */
  p.seqlen_q = p.seqlen_kv = 1000, p.dtype = CLATTN_BF16;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(info.origin, "built-in");
  cr_assert_str_eq(info.kernel, "forward_tiles");
  cr_assert(info.block_q == 128 && info.block_kv == 32 && info.rows_per_item == 2,
            "bf16 d = 128 causal: %u/%u rm %u", info.block_q, info.block_kv, info.rows_per_item);
  p.dtype = CLATTN_F32;
  p.head_dim = 100; /* no built-in for this head dim */
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.origin, "heuristic");
  clattn_context_destroy(ctx);
}

/* The H200's built-in rows match an H200 only, and fit its 48 KiB of local memory. */
Test(tunedb, built_in_defaults_for_the_h200) {
  clattn__device h200;
  memset(&h200, 0, sizeof h200);
  snprintf(h200.platform_name, sizeof h200.platform_name, "NVIDIA CUDA");
  snprintf(h200.name, sizeof h200.name, "NVIDIA H200");
  h200.type = CL_DEVICE_TYPE_GPU, h200.local_mem = 49152;
  h200.max_work_group = h200.max_item_size[0] = 1024;
  h200.tensor_cores = 1; /* compute capability 9.0 */
  unsigned dims[] = {64, 128};
  for (int i = 0; i < 2; i++)
    for (unsigned causal = 0; causal < 2; causal++) {
      clattn__class cls = {dims[i], dims[i], causal, 4096};
      clattn__config found, *c = &found;
      cr_assert(clattn__builtin_find(&h200, &cls, c), "no built-in for d=%u causal=%u", dims[i],
                causal);
      char why[160];
      cr_assert(clattn__config_legal(&h200, &cls, c, why, sizeof why), "%s", why);
      cr_assert(clattn__family_of(c)->tensor_cores,
                "the H200's defaults are the tensor-core kernels");
      /* Were the tensor cores not detected, the row would be illegal and skipped. */
      h200.tensor_cores = 0;
      cr_assert_not(clattn__config_legal(&h200, &cls, c, why, sizeof why));
      h200.tensor_cores = 1;
    }
  /* Half classes have rows of their own: the half tensor-core kernels at d = 64 and 128 in each
   * half dtype, forward and backward, legal for the class and not for fp32. */
  char why[160];
  for (unsigned pass = CLATTN__FORWARD; pass <= CLATTN__BACKWARD; pass++)
    for (unsigned dt = CLATTN_F16; dt <= CLATTN_BF16; dt++)
      for (unsigned d = 64; d <= 128; d *= 2)
        for (unsigned causal = 0; causal < 2; causal++) {
          clattn__class half = {d, d, causal, 4096, pass, dt};
          clattn__config hc;
          cr_assert(clattn__builtin_find(&h200, &half, &hc),
                    "no built-in for pass %u dtype %u d %u", pass, dt, d);
          cr_assert_str_eq(clattn__family_of(&hc)->name,
                           pass == CLATTN__FORWARD ? "forward_mma_half" : "backward_mma_half");
          cr_assert(clattn__config_legal(&h200, &half, &hc, why, sizeof why), "%s", why);
          clattn__class f32 = half;
          f32.dtype = CLATTN_F32;
          cr_assert_not(clattn__config_legal(&h200, &f32, &hc, why, sizeof why));
        }
  snprintf(h200.name, sizeof h200.name, "NVIDIA A100");
  clattn__class cls = {64, 64, 0, 4096};
  clattn__config none;
  cr_assert_not(clattn__builtin_find(&h200, &cls, &none), "H200 rows must not match another GPU");
}

/* Backward entries ("pass": "backward") live beside the forward ones of the same class: each
 * pass finds its own, a stale source hash or a bad pass is not used, and overrides of the two
 * passes are set apart and removed together. */
Test(tunedb, backward_entries_and_overrides) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[2] = {entry_for(ctx), entry_for(ctx)};
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__BACKWARD, &src), CLATTN_OK);
  clattn__config bwd = {0};
  bwd.kernel = clattn__family_find("backward_rows"), bwd.bq = 16, bwd.bkv = 32;
  uint64_t hash = src.hash[bwd.kernel];
  clattn__sources_free(&src);
  e[1].cls.pass = CLATTN__BACKWARD, e[1].cfg = bwd, e[1].source_hash = hash;
  save(e, 2);
  clattn__db db = {0};
  size_t skipped;
  char why[256];
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 2, "one class, two passes: two entries");
  for (size_t i = 0; i < 2; i++) {
    cr_assert_eq(memcmp(&db.entries[i].cls, &e[i].cls, sizeof e[i].cls), 0);
    cr_assert_eq(memcmp(&db.entries[i].cfg, &e[i].cfg, sizeof e[i].cfg), 0);
  }
  clattn__db_free(&db);
  clattn_plan_info info = explain_fresh(&ctx);
  cr_assert_str_eq(info.origin, "tuned");
  cr_assert_eq(info.block_q, e[0].cfg.bq);
  cr_assert_str_eq(info.backward_origin, "tuned");
  cr_assert_str_eq(info.backward.kernel, "backward_rows");
  cr_assert_eq(info.backward.block_q, 16);
  cr_assert_eq(info.backward.block_kv, 32);
  /* The backward runs with it and computes the right gradients. */
  check_spec sp = {0};
  sp.problem = problem();
  check_bwd_result r;
  cr_assert_eq(check_backward_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "dq %g (tol %g) dk %g (%g) dv %g (%g)", r.err[0], r.tol[0], r.err[1], r.tol[1],
            r.err[2], r.tol[2]);
  /* Stale kernel source: the backward entry is passed over. */
  e[1].source_hash ^= 1;
  remove(db_path);
  save(e, 2);
  info = explain_fresh(&ctx);
  cr_assert_str_eq(info.origin, "tuned");
  cr_assert_str_eq(info.backward_origin, "heuristic");
  /* A pass that is neither forward nor backward: the entry is skipped. */
  e[1].source_hash ^= 1;
  remove(db_path);
  save(&e[1], 1);
  FILE *f = fopen(db_path, "rb");
  char buf[8192], bad[8300];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *at = strstr(buf, "\"backward\"");
  cr_assert_not_null(at);
  snprintf(bad, sizeof bad, "%.*s\"sideways\"%s", (int)(at - buf), buf,
           at + strlen("\"backward\""));
  write_text(bad);
  expect_ignored(&ctx, "entries skipped");
  /* Overrides: one per pass; NULL removes both. */
  clattn_problem p = problem();
  clattn_config fwd = {"forward_rows", 4, 8, 2, 1, 0};
  clattn_config back = {"backward_rows", 8, 128, 1, 1, 0};
  cr_assert_eq(clattn_override_config(ctx, &p, &fwd), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_override_config(ctx, &p, &back), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.origin, "override");
  cr_assert_eq(info.block_q, 4);
  cr_assert_str_eq(info.backward_origin, "override");
  cr_assert_eq(info.backward.block_q, 8);
  cr_assert_eq(info.backward.block_kv, 128);
  sp.problem = p;
  cr_assert_eq(check_backward_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "the backward override computes wrong gradients");
  clattn_config odd = {"backward_rows", 3, 8, 1, 1, 0};
  cr_assert_eq(clattn_override_config(ctx, &p, &odd), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "BQ=3"), "%s", clattn_last_error(ctx));
  if (!ctx->device.tensor_cores) { /* PoCL without the emulation */
    clattn_config mma = {"backward_mma", 32, 32, 1, 1, 0};
    cr_assert_eq(clattn_override_config(ctx, &p, &mma), CLATTN_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(clattn_last_error(ctx), "tensor cores"), "%s", clattn_last_error(ctx));
  }
  clattn_config big = {"backward_rows", 512, 8, 1, 1, 0};
  cr_assert_eq(clattn_config_check(ctx, &p, &big), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "powers of two of at most 256"), "%s",
            clattn_last_error(ctx));
  cr_assert_eq(clattn_override_config(ctx, &p, NULL), CLATTN_OK);
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_neq(info.origin, "override");
  cr_assert_str_neq(info.backward_origin, "override");
  clattn_context_destroy(ctx);
}

/* A JSON string's body as cJSON_Print escapes it, so that the device strings below read back
 * as this device's whatever they hold. */
static void json_escaped(const char *s, char *out, size_t len) {
  size_t n = 0;
  for (; *s && n + 7 < len; s++) {
    unsigned char c = (unsigned char)*s;
    const char *esc = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                                  : NULL;
    if (esc)
      n += (size_t)snprintf(out + n, len - n, "%s", esc);
    else if (c < 32)
      n += (size_t)snprintf(out + n, len - n, "\\u%04x", c);
    else
      out[n++] = (char)c;
  }
  out[n] = 0;
}

/* One entry in the shape e098a3b's entry_json gave it under cJSON_Print (tabs, key order, a
 * "pass" only on backward classes, every config field written). */
static int old_entry_json(char *out, size_t len, const clattn__db_device *d, uint64_t hash,
                          unsigned bucket, const char *pass_line, const char *config,
                          const char *timing) {
  char esc[5][1200];
  json_escaped(d->platform, esc[0], sizeof esc[0]);
  json_escaped(d->platform_version, esc[1], sizeof esc[1]);
  json_escaped(d->vendor, esc[2], sizeof esc[2]);
  json_escaped(d->name, esc[3], sizeof esc[3]);
  json_escaped(d->driver, esc[4], sizeof esc[4]);
  return snprintf(out, len,
                  "{\n"
                  "\t\t\t\"device\":\t{\n"
                  "\t\t\t\t\"platform\":\t\"%s\",\n"
                  "\t\t\t\t\"platform_version\":\t\"%s\",\n"
                  "\t\t\t\t\"vendor\":\t\"%s\",\n"
                  "\t\t\t\t\"name\":\t\"%s\",\n"
                  "\t\t\t\t\"driver\":\t\"%s\",\n"
                  "\t\t\t\t\"gpu\":\t%s,\n"
                  "\t\t\t\t\"compute_units\":\t%u,\n"
                  "\t\t\t\t\"local_mem\":\t%llu\n"
                  "\t\t\t},\n"
                  "\t\t\t\"source_hash\":\t\"%016llx\",\n"
                  "\t\t\t\"class\":\t{\n"
                  "\t\t\t\t\"dtype\":\t\"f32\",\n"
                  "\t\t\t\t\"head_dim\":\t32,\n"
                  "\t\t\t\t\"head_dim_v\":\t32,\n"
                  "\t\t\t\t\"causal\":\tfalse,\n"
                  "\t\t\t\t\"seqlen_bucket\":\t%u%s\n"
                  "\t\t\t},\n"
                  "\t\t\t\"config\":\t{\n"
                  "%s"
                  "\t\t\t},\n"
                  "%s"
                  "\t\t}",
                  esc[0], esc[1], esc[2], esc[3], esc[4], d->gpu ? "true" : "false",
                  d->compute_units, d->local_mem, (unsigned long long)hash, bucket, pass_line,
                  config, timing);
}

/* A database written before the kernel registry (by e098a3b, whose writer knew kernels by
 * variant numbers and wrote every field of a backward config as its neutral value) is read by
 * the planner as it was then, and a merge by today's writer keeps its entries. Hand-written,
 * not made by today's writer, so that a change to the reader that only today's writer would
 * satisfy fails here (the text is byte for byte what e098a3b's tunedb.c writes again after
 * reading it); the source hashes are today's, so that the entries are current. */
Test(tunedb, file_written_before_the_registry) {
  clattn_context *ctx = context_with_db();
  clattn__db_device dev;
  clattn__db_device_of(&ctx->device, &dev);
  clattn__sources src;
  unsigned tiles = clattn__family_find("forward_tiles"),
           rows = clattn__family_find("backward_rows");
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__FORWARD, &src), CLATTN_OK);
  uint64_t tiles_hash = src.hash[tiles];
  clattn__sources_free(&src);
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__BACKWARD, &src), CLATTN_OK);
  uint64_t rows_hash = src.hash[rows];
  clattn__sources_free(&src);
  unsigned bucket = clattn__seqlen_bucket(100);
  /* Unlike the defaults of this class on PoCL (forward_tiles 128 x 32 with one row per
   * work-item, backward_rows 64 x 64), so that only the entries can explain what the planner
   * reports; legal there: 32 work-items of 2 rows x 8 keys, padded rows, loads of 4. */
  static const char fwd_config[] = "\t\t\t\t\"kernel\":\t\"forward_tiles\",\n"
                                   "\t\t\t\t\"block_q\":\t32,\n"
                                   "\t\t\t\t\"block_kv\":\t16,\n"
                                   "\t\t\t\t\"threads_per_row\":\t2,\n"
                                   "\t\t\t\t\"stage_kv\":\ttrue,\n"
                                   "\t\t\t\t\"pad\":\t1,\n"
                                   "\t\t\t\t\"rows_per_item\":\t2,\n"
                                   "\t\t\t\t\"vector_width\":\t4\n";
  static const char bwd_config[] = "\t\t\t\t\"kernel\":\t\"backward_rows\",\n"
                                   "\t\t\t\t\"block_q\":\t16,\n"
                                   "\t\t\t\t\"block_kv\":\t32,\n"
                                   "\t\t\t\t\"threads_per_row\":\t1,\n"
                                   "\t\t\t\t\"stage_kv\":\tfalse,\n"
                                   "\t\t\t\t\"pad\":\t0,\n"
                                   "\t\t\t\t\"rows_per_item\":\t1,\n"
                                   "\t\t\t\t\"vector_width\":\t1\n";
  char fwd[8192], bwd[8192], text[17000];
  cr_assert_lt(old_entry_json(fwd, sizeof fwd, &dev, tiles_hash, bucket, "", fwd_config,
                              "\t\t\t\"median_ms\":\t2.25,\n"
                              "\t\t\t\"spread\":\t0.03,\n"
                              "\t\t\t\"date\":\t\"2026-11-30T08:15:00Z\"\n"),
               (int)sizeof fwd);
  cr_assert_lt(old_entry_json(bwd, sizeof bwd, &dev, rows_hash, bucket,
                              ",\n\t\t\t\t\"pass\":\t\"backward\"", bwd_config,
                              "\t\t\t\"median_ms\":\t7.5,\n"
                              "\t\t\t\"spread\":\t0.04,\n"
                              "\t\t\t\"date\":\t\"2026-11-30T08:20:00Z\"\n"),
               (int)sizeof bwd);
  snprintf(text, sizeof text,
           "{\n\t\"format\":\t\"clattn-tuning-db\",\n\t\"version\":\t1,\n\t\"entries\":\t[%s, "
           "%s]\n}\n",
           fwd, bwd);
  write_text(text);

  /* Through the public API: both entries applied, field by field, and none skipped. Heads
   * enough that the query blocks fill any device's compute units, so the planner reports the
   * entry's blocks rather than finer ones of the same config. */
  clattn_context_destroy(ctx);
  clattn_options opt = {test_tmpdir(), db_path, NULL};
  cr_assert_eq(clattn_context_create_default(&opt, &ctx), CLATTN_OK);
  clattn_problem p = problem();
  p.heads_q = 64;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(info.origin, "tuned", "%s: %s", info.origin, info.reason);
  cr_assert_str_eq(info.kernel, "forward_tiles");
  cr_assert_eq(info.block_q, 32);
  cr_assert_eq(info.block_kv, 16);
  cr_assert_eq(info.threads_per_row, 2);
  cr_assert_eq(info.stage_kv, 1);
  cr_assert_eq(info.pad, 1);
  cr_assert_eq(info.rows_per_item, 2);
  cr_assert_eq(info.vector_width, 4);
  cr_assert_str_eq(info.backward_origin, "tuned");
  cr_assert_str_eq(info.backward.kernel, "backward_rows");
  cr_assert_eq(info.backward.block_q, 16);
  cr_assert_eq(info.backward.block_kv, 32);
  cr_assert_str_eq(clattn_context_diagnostics(ctx), "");

  /* The entries as read, timing and date included, to compare after the merge. */
  clattn__db db = {0};
  size_t skipped;
  char why[256];
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 2);
  cr_assert_eq(skipped, 0, "%s", why);
  clattn__db_entry old[2] = {db.entries[0], db.entries[1]};
  clattn__db_free(&db);
  cr_assert_float_eq(old[0].median_ms, 2.25, 1e-12);
  cr_assert_float_eq(old[1].spread, 0.04, 1e-12);
  cr_assert_str_eq(old[1].date, "2026-11-30T08:20:00Z");

  /* Another class (causal) merged in by today's writer: the old entries are kept unchanged. */
  clattn__db_entry other = entry_for(ctx);
  other.cls.causal = 1;
  save(&other, 1);
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 3);
  cr_assert_eq(skipped, 0, "%s", why);
  for (size_t i = 0; i < 2; i++)
    cr_assert_eq(memcmp(&db.entries[i], &old[i], sizeof old[i]), 0, "entry %zu changed", i);
  clattn__db_free(&db);
  clattn_context_destroy(ctx);
}

/* The storage type is part of the class: a half entry of the tuning database is written with
 * its "dtype", read back as such, and never applies to the fp32 class (nor the other way). */
Test(tunedb, half_classes_keep_their_dtype) {
  clattn_context *ctx = test_context(NULL);
  char path[512];
  snprintf(path, sizeof path, "%s/half-db.json", test_tmpdir());
  remove(path);
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__FORWARD, &src), CLATTN_OK);
  clattn__db_entry e;
  memset(&e, 0, sizeof e);
  clattn__db_device_of(&ctx->device, &e.dev);
  e.cls = (clattn__class){64, 64, 1, 1024, CLATTN__FORWARD, CLATTN_BF16};
  char why[256];
  clattn_config rows = {"forward_rows", 32, 16, 2, 0, 1, 1, 2};
  cr_assert(clattn__config_from_public(&rows, &e.cfg, why, sizeof why), "%s", why);
  e.source_hash = src.hash[e.cfg.kernel];
  cr_assert_eq(clattn__db_save_merged(path, &e, 1, why, sizeof why), CLATTN_OK, "%s", why);
  clattn__db db = {0};
  size_t skipped = 0;
  cr_assert_eq(clattn__db_load(path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 1);
  cr_assert_eq(skipped, 0);
  cr_assert_eq(db.entries[0].cls.dtype, CLATTN_BF16);
  clattn__match level;
  cr_assert_not_null(clattn__db_lookup(&db, &ctx->device, src.hash, &e.cls, &level));
  clattn__class f32 = e.cls, f16 = e.cls;
  f32.dtype = CLATTN_F32, f16.dtype = CLATTN_F16;
  cr_assert_null(clattn__db_lookup(&db, &ctx->device, src.hash, &f32, &level));
  cr_assert_null(clattn__db_lookup(&db, &ctx->device, src.hash, &f16, &level));
  clattn__db_free(&db);
  clattn__sources_free(&src);
  clattn_context_destroy(ctx);
}

/* A file's config is read as the API reads one, and refused where the API would refuse it: an
 * empty kernel name (which once read as forward_rows) and split_kv on a backward kernel (which
 * cannot split). Each such entry is skipped, the others kept. */
Test(tunedb, unnamed_or_unsplittable_kernels_are_skipped) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[2] = {entry_for(ctx), entry_for(ctx)};
  clattn__sources src;
  cr_assert_eq(clattn__sources_load(ctx, CLATTN__BACKWARD, &src), CLATTN_OK);
  clattn__config bwd = {0};
  bwd.kernel = clattn__family_find("backward_rows"), bwd.bq = 16, bwd.bkv = 32;
  e[1].cls.pass = CLATTN__BACKWARD, e[1].cfg = bwd, e[1].source_hash = src.hash[bwd.kernel];
  clattn__sources_free(&src);
  save(e, 2);
  char buf[16384], edited[17000], why[256];
  read_db(buf, sizeof buf);
  const char *edits[2][3] = {
      {"\"forward_rows\"", "\"\"", "bad field"},
      {"\"backward_rows\"", "\"backward_rows\", \"split_kv\": true", "cannot split"}};
  for (int i = 0; i < 2; i++) {
    const char *at = strstr(buf, edits[i][0]);
    cr_assert_not_null(at, "%s not in the file", edits[i][0]);
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - buf), buf, edits[i][1],
             at + strlen(edits[i][0]));
    write_text(edited);
    clattn__db db = {0};
    size_t skipped = 0;
    cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
    cr_assert_eq(skipped, 1, "edit %d: %zu skipped", i, skipped);
    cr_assert_eq(db.count, 1, "edit %d: the other entry is kept", i);
    cr_assert(strstr(why, edits[i][2]), "edit %d: %s", i, why);
    clattn__db_free(&db);
  }
  clattn_context_destroy(ctx);
}
