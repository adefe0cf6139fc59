/* What the planner takes from the tuning database, as the runtime sees it (explain's origin):
 * every lookup level, the built-in defaults where there is no entry, config overrides, and
 * backward entries and overrides beside the forward ones. Apart from the file's own tests
 * (test_tunedb.c, the same binary and suite); their helpers are tunedb_common.h. */
#include "tunedb_common.h"

#include <stdio.h>
#include <string.h>

/* The database holds only entry e: the plan falls back to it, for the reason named. */
static void expect_fallback(clattn_context **ctx, const clattn__db_entry *e, const char *reason) {
  save(e, 1);
  clattn_plan_info info = explain_fresh(ctx);
  cr_assert_str_eq(info.origin, "fallback");
  cr_assert(strstr(info.reason, reason), "%s", info.reason);
  remove(db_path);
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
  expect_fallback(&ctx, &other, "another driver");
  other = e; /* another device of the same vendor and type */
  snprintf(other.dev.name, sizeof other.dev.name, "some other device");
  expect_fallback(&ctx, &other, "another device");
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

/* The H200's built-in rows match an H200 (the half forward's an H100 too), and fit the local
 * memory NVIDIA's OpenCL lets a work-group use there (226 KiB of static arrays; it reports 48). */
Test(tunedb, built_in_defaults_for_the_h200) {
  clattn__device h200;
  memset(&h200, 0, sizeof h200);
  snprintf(h200.platform_name, sizeof h200.platform_name, "NVIDIA CUDA");
  snprintf(h200.name, sizeof h200.name, "NVIDIA H200");
  h200.type = CL_DEVICE_TYPE_GPU, h200.local_mem = 226 * 1024, h200.local_mem_reported = 49152;
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
          /* The forward's rows are the FlashAttention-2 order, two-tile kernels BENCHMARKS.md
           * timed fastest: one stage of 128 keys at d = 64 ("Stop 35"), and at d = 128 64 keys
           * with Q in local memory (stage 4, 69 KiB: FlashAttention-2's own tiles, "Stop 41";
           * rows once read stage and pad swapped: a legal config, but the slow staging). */
          if (pass == CLATTN__FORWARD)
            cr_assert(hc.stage == (d == 64 ? 3u : 4u) && hc.pad == 1 && hc.rm == 2 &&
                          hc.bq == 128 && hc.bkv == (d == 64 ? 128u : 64u),
                      "d %u: stage %u pad %u rows_per_item %u BQ %u BKV %u", d, hc.stage, hc.pad,
                      hc.rm, hc.bq, hc.bkv);
          clattn__class f32 = half;
          f32.dtype = CLATTN_F32;
          cr_assert_not(clattn__config_legal(&h200, &f32, &hc, why, sizeof why));
        }
  /* The half forward's rows, measured on an H100, are the H100's too, and the H100 has fp32
   * forward rows of its own (forward_mma in one stage, "Stop 40"); the backward's are not. */
  snprintf(h200.name, sizeof h200.name, "NVIDIA H100 80GB HBM3");
  clattn__class hf = {64, 64, 1, 4096, CLATTN__FORWARD, CLATTN_BF16}, hb = hf, f32 = hf, f32b;
  hb.pass = CLATTN__BACKWARD, f32.dtype = CLATTN_F32, f32b = f32, f32b.pass = CLATTN__BACKWARD;
  clattn__config h100;
  cr_assert(clattn__builtin_find(&h200, &hf, &h100));
  cr_assert_str_eq(clattn__family_of(&h100)->name, "forward_mma_half");
  cr_assert_not(clattn__builtin_find(&h200, &hb, &h100));
  cr_assert(clattn__builtin_find(&h200, &f32, &h100));
  cr_assert(!strcmp(clattn__family_of(&h100)->name, "forward_mma") && h100.stage == 1,
            "the H100's fp32 forward: %s stage %u", clattn__family_of(&h100)->name, h100.stage);
  cr_assert(clattn__config_legal(&h200, &f32, &h100, why, sizeof why), "%s", why);
  cr_assert_not(clattn__builtin_find(&h200, &f32b, &h100));
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
  clattn__db_entry e[2] = {entry_for(ctx), backward_entry_for(ctx)};
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

/* A built-in row's device field against device names: each '|'-separated name is looked for
 * anywhere in the device's name, however long either is; an empty field is any device. */
Test(tunedb, built_in_device_names) {
  char longname[200];
  memset(longname, 'x', 100), longname[100] = 0;
  char device[300];
  snprintf(device, sizeof device, "Vendor %s GPU", longname);
  cr_assert(clattn__name_matches(device, longname), "a name of 100 characters is compared");
  cr_assert(clattn__name_matches("NVIDIA H200", "H100|H200"));
  cr_assert(clattn__name_matches("NVIDIA H100 80GB HBM3", "H100|H200"));
  cr_assert_not(clattn__name_matches("NVIDIA A100", "H100|H200"));
  cr_assert_not(clattn__name_matches("H10", "H100"), "a name longer than the device's");
  cr_assert(clattn__name_matches("pthread-AMD EPYC", ""), "an empty field is any device");
  longname[99] = 'y';
  cr_assert_not(clattn__name_matches(device, longname), "the whole name must match");
}
