/* The tuning database's file: round trip, bad files of every kind, concurrent writers, the
 * config fields a file may hold (split_kv, storage types, kernel names) and a file written
 * before the kernel registry. What the planner takes from it is test_tunedb_plans.c's (the same
 * binary and suite); their helpers are tunedb_common.h. */
#include "tunedb_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* forward_mma_half's one-stage orders (stage_kv 3, "next_k"; 4, "q_local") and its 48-key tiles
 * survive a round trip, with two m16 tiles a warp. */
Test(tunedb, mma_half_stages) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[2] = {entry_for(ctx), entry_for(ctx)};
  for (int i = 0; i < 2; i++) {
    e[i].cls.dtype = CLATTN_F16, e[i].cls.d = e[i].cls.dv = 128, e[i].cls.causal = i;
    e[i].cfg.kernel = clattn__family_find("forward_mma_half"), e[i].cfg.stage = 3 + i;
    e[i].cfg.bq = 64, e[i].cfg.bkv = 48, e[i].cfg.tpr = 1, e[i].cfg.rm = 2, e[i].cfg.pad = 1;
    e[i].cfg.vec = 1;
  }
  save(e, 2);
  char buf[8192];
  read_db(buf, sizeof buf);
  cr_assert(strstr(buf, "\"q_local\"") && strstr(buf, "\"next_k\""), "%s", buf);
  clattn__db db = {0};
  size_t skipped;
  char why[256];
  cr_assert_eq(clattn__db_load(db_path, &db, &skipped, why, sizeof why), CLATTN_OK, "%s", why);
  cr_assert_eq(db.count, 2, "%s", why);
  for (size_t i = 0; i < 2; i++)
    cr_assert_eq(memcmp(&db.entries[i].cfg, &e[i].cfg, sizeof e[i].cfg), 0, "entry %zu", i);
  clattn__db_free(&db);
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
 * empty kernel name (which once read as forward_rows), split_kv on a backward kernel (which
 * cannot split) and two stagings at once. Each such entry is skipped, the others kept. */
Test(tunedb, unnamed_or_unsplittable_kernels_are_skipped) {
  clattn_context *ctx = context_with_db();
  clattn__db_entry e[2] = {entry_for(ctx), backward_entry_for(ctx)};
  save(e, 2);
  char buf[16384], edited[17000], why[256];
  read_db(buf, sizeof buf);
  const char *edits[3][3] = {
      {"\"forward_rows\"", "\"\"", "bad field"},
      {"\"backward_rows\"", "\"backward_rows\", \"split_kv\": true", "cannot split"},
      {"\"forward_rows\"", "\"forward_rows\", \"next_k\": true, \"q_local\": true",
       "exclude each other"}};
  for (int i = 0; i < 3; i++) {
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
