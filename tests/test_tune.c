/* The autotuner: a wrong candidate never wins, configs beyond local memory are never compiled,
 * the winner is stored and used, the budget holds, a dry run writes nothing. */
#include "common.h"
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

static clattn_problem small_problem(void) {
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 96, p.head_dim = 16;
  return p;
}

typedef struct {
  size_t local_limit;
  unsigned calls, over_limit;
} watch;

static void on_progress(void *user, const clattn_tune_progress *p) {
  watch *w = user;
  w->calls++;
  if (p->candidate_local_mem > w->local_limit) w->over_limit++;
}

/* The heuristic's config h for p, and "#if" with a condition true in exactly that config, for
 * a kernel edited by a test (TX, RM and STAGE_KV are undefined, so 0, in the kernel that does
 * not use them). */
static void heuristic_condition(const clattn_problem *p, clattn_plan_info *h, char *out,
                                size_t len) {
  clattn_context *probe = test_context(NULL);
  cr_assert_eq(clattn_explain(probe, p, h), CLATTN_OK);
  clattn_context_destroy(probe);
  int tiles = !strcmp(h->kernel, "forward_tiles");
  snprintf(
      out, len, "#if BQ == %u && BKV == %u && %s == %u && %s == %u && PAD == %u && VEC == %u\n",
      h->block_q, h->block_kv, tiles ? "TX" : "TPR", h->threads_per_row, tiles ? "RM" : "STAGE_KV",
      tiles ? h->rows_per_item : h->stage_kv, h->pad, h->vector_width);
}

/* A kernel that is wrong (by 1%) for exactly the heuristic's config: the tuner must measure it
 * (the heuristic is always its first candidate), disqualify it and pick another. */
Test(tune, wrong_candidate_is_never_selected) {
  clattn_problem p = small_problem();
  clattn_plan_info h;
  char dir[64], wrong[512], is_h[160];
  heuristic_condition(&p, &h, is_h, sizeof is_h);
  snprintf(wrong, sizeof wrong,
           "%s    const float inv = 1.01f / l; /* test-only: wrong */\n#else\n"
           "    const float inv = l > 0.0f ? 1.0f / l : 0.0f;\n#endif\n",
           is_h);
  test_kernel_dir(dir, sizeof dir, "const float inv = l > 0.0f ? 1.0f / l : 0.0f;", wrong, 1);
  clattn_context *ctx = test_context(dir);
  clattn_tune_options opt = {0};
  opt.budget_seconds = 30, opt.max_candidates = 5; /* the count ends it; the budget is room */
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_log_info("disqualified: %s", r.report);
  cr_assert_geq(r.disqualified, 1);
  cr_assert(strstr(r.report, "wrong result"), "report: %s", r.report);
  cr_assert(r.best.block_q != h.block_q || r.best.block_kv != h.block_kv ||
                r.best.threads_per_row != h.threads_per_row || r.best.stage_kv != h.stage_kv ||
                r.best.pad != h.pad,
            "the wrong config won");
  cr_assert_lt(r.heuristic_ms, 0, "the disqualified heuristic has no time");
  /* The winner is stored and used, here and by a new context. */
  cr_assert(r.saved);
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.origin, "tuned");
  cr_assert_eq(info.block_q, r.best.block_q);
  cr_assert_eq(info.block_kv, r.best.block_kv);
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

/* With the model's local memory cut to 8 KiB, most of the space is illegal: those configs must
 * be pruned before anything is compiled. What was compiled is observed, not taken from the model
 * that did the pruning: the context counts the programs it compiled, and every kernel of every
 * program in it must use at most 8 KiB of local memory as the OpenCL compiler reports it (the
 * device has far more, so a config that slipped past the pruning would compile and show here). */
Test(tune, configs_beyond_local_memory_are_never_compiled) {
  const size_t limit = 8 * 1024;
  clattn_context *ctx = test_context(NULL);
  ctx->device.local_mem = limit;
  clattn_problem p = small_problem();
  watch w = {limit, 0, 0};
  clattn_tune_options opt = {0};
  opt.budget_seconds = 5, opt.max_candidates = 8, opt.dry_run = 1;
  opt.progress = on_progress, opt.user = &w;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_gt(r.pruned, 0, "pruned %u of %u", r.pruned, r.space);
  cr_assert_gt(w.calls, 0);
  /* A fresh cache folder: every program in the context was compiled here, none loaded. */
  size_t programs = 0, kernels = 0;
  for (const clattn__program *pr = ctx->programs; pr; pr = pr->next, programs++) {
    cl_uint nk = 0;
    cr_assert_eq(clCreateKernelsInProgram(pr->program, 0, NULL, &nk), CL_SUCCESS);
    cl_kernel *ks = calloc(nk, sizeof *ks);
    cr_assert_eq(clCreateKernelsInProgram(pr->program, nk, ks, NULL), CL_SUCCESS);
    for (cl_uint i = 0; i < nk; i++, kernels++) {
      cl_ulong lmem = 0;
      cr_assert_eq(clGetKernelWorkGroupInfo(ks[i], ctx->device_id, CL_KERNEL_LOCAL_MEM_SIZE,
                                            sizeof lmem, &lmem, NULL),
                   CL_SUCCESS);
      cr_expect_leq(lmem, limit, "compiled with %llu B of local memory: %s",
                    (unsigned long long)lmem, pr->options);
      clReleaseKernel(ks[i]);
    }
    free(ks);
  }
  cr_assert_gt(ctx->compiled, 0, "the tuner compiled nothing");
  cr_assert_eq(programs, ctx->compiled, "%zu programs in the context, %u compiled", programs,
               ctx->compiled);
  cr_assert_gt(kernels, 0);
  clattn_context_destroy(ctx);
}

Test(tune, budget_and_dry_run) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = small_problem();
  p.flags = CLATTN_CAUSAL;
  clattn_tune_options opt = {0};
  opt.budget_seconds = 4, opt.dry_run = 1;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_leq(r.elapsed_s, 4 * 1.5 + 2, "ran %.1f s on a 4 s budget", r.elapsed_s);
  cr_assert_gt(r.tried, 0);
  cr_assert_gt(r.best_ms, 0);
  cr_assert_leq(r.best_min_ms, r.best_ms);
  cr_assert_eq(r.saved, 0);
  struct stat st;
  cr_assert_neq(stat(clattn_context_tuning_db(ctx), &st), 0, "a dry run wrote the database");
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_neq(info.origin, "tuned");
  clattn_context_destroy(ctx);
}

Test(tune, bad_input) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = small_problem();
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(NULL, &p, NULL, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_eq(clattn_tune(ctx, &p, NULL, NULL), CLATTN_ERR_INVALID_ARGUMENT);
  p.batch = 0;
  cr_assert_eq(clattn_tune(ctx, &p, NULL, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "empty problem"));
  p.batch = 1, p.head_dim = 0;
  cr_assert_eq(clattn_tune(ctx, &p, NULL, &r), CLATTN_ERR_INVALID_ARGUMENT);
  /* The variants take the plain class's entry: their problems are not tuned. */
  p = small_problem();
  p.softcap = 30.0f;
  clattn_tune_options dry = {.dry_run = 1};
  cr_assert_eq(clattn_tune(ctx, &p, &dry, &r), CLATTN_ERR_UNSUPPORTED);
  cr_assert(strstr(clattn_last_error(ctx), "plain classes"), "%s", clattn_last_error(ctx));
  p.softcap = 0.0f, p.flags = CLATTN_WINDOW, p.window_left = 8;
  dry.backward = 1;
  cr_assert_eq(clattn_tune(ctx, &p, &dry, &r), CLATTN_ERR_UNSUPPORTED);
  p.flags = CLATTN_VARLEN, p.window_left = 0, p.total_q = p.seqlen_q, p.total_kv = p.seqlen_kv;
  cr_assert_eq(clattn_tune(ctx, &p, &dry, &r), CLATTN_ERR_UNSUPPORTED);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_VARLEN"), "%s", clattn_last_error(ctx));
  p.flags = CLATTN_ALIBI_PER_BATCH, p.total_q = p.total_kv = 0;
  cr_assert_eq(clattn_tune(ctx, &p, &dry, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_ALIBI_PER_BATCH"), "%s", clattn_last_error(ctx));
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

typedef struct {
  int rows, tiles;
} variants_seen;

static void on_variant(void *user, const clattn_tune_progress *p) {
  variants_seen *v = user;
  if (!strcmp(p->candidate.kernel, "forward_rows")) v->rows++;
  if (!strcmp(p->candidate.kernel, "forward_tiles")) v->tiles++;
}

/* A candidate that does not build (here the heuristic's own config) is reported and passed
 * over; the tuner still picks a winner among the others. */
Test(tune, candidate_that_fails_to_build_is_skipped) {
  clattn_problem p = small_problem();
  clattn_plan_info h;
  char dir[64], broken[512], is_h[160];
  heuristic_condition(&p, &h, is_h, sizeof is_h);
  snprintf(broken, sizeof broken, "%s#error test-only: this config does not build\n#endif\n", is_h);
  test_kernel_dir(dir, sizeof dir, "const float inv = l > 0.0f ? 1.0f / l : 0.0f;", broken, 0);
  clattn_context *ctx = test_context(dir);
  clattn_tune_options opt = {0};
  opt.budget_seconds = 30, opt.max_candidates = 4, opt.dry_run = 1;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(strstr(r.report, "failed to build") && strstr(r.report, "test-only"), "report: %s",
            r.report);
  cr_assert_geq(r.disqualified, 1);
  cr_assert_gt(r.tried, r.disqualified, "no candidate was timed");
  cr_assert(r.best.block_q != h.block_q || r.best.block_kv != h.block_kv ||
                r.best.threads_per_row != h.threads_per_row || r.best.pad != h.pad ||
                r.best.vector_width != h.vector_width,
            "the config that does not build won");
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

/* Both kernel variants compete from the first candidates on. */
Test(tune, both_variants_are_measured) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = small_problem();
  variants_seen v = {0, 0};
  clattn_tune_options opt = {0};
  opt.budget_seconds = 30, opt.max_candidates = 3, opt.dry_run = 1;
  opt.progress = on_variant, opt.user = &v;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_gt(v.rows, 0);
  cr_assert_gt(v.tiles, 0, "the register-tiled variant was never tried");
  /* (960 forward_rows + 1920 forward_tiles) x 2 widths + 320 forward_mma + 320 forward_mma_half
   * (both illegal on PoCL) + 2160 decode + 8 decode_mma (ranked for KV cache classes only) */
  cr_assert_eq(r.space, 8408);
  clattn_context_destroy(ctx);
}

/* The backward kernels' classes: a candidate whose dV is wrong (by 1%) for exactly the
 * heuristic's blocks is disqualified; the winner is stored as a backward entry, which explain
 * reports and clattn_backward uses, while the forward's plan is untouched. */
Test(tune, backward_wrong_candidate_and_winner_used) {
  clattn_context *probe = test_context(NULL);
  clattn_problem p = small_problem();
  p.flags = CLATTN_CAUSAL, p.heads_kv = 1;
  clattn_plan_info h;
  cr_assert_eq(clattn_explain(probe, &p, &h), CLATTN_OK);
  clattn_context_destroy(probe);
  cr_assert_str_eq(h.backward.kernel, "backward_rows");
  cr_assert_str_eq(h.backward_origin, "heuristic");
  char dir[64], wrong[256];
  snprintf(wrong, sizeof wrong,
           "for (uint c = 0; c < DV; c++) /* test-only: wrong */\n"
           "  STS(dv + vb_out + c, dvj[c] * (BQ == %u && BKV == %u ? 1.01f : 1.0f));\n",
           h.backward.block_q, h.backward.block_kv);
  test_kernel_dir(dir, sizeof dir, "STS(dv + vb_out + c, dvj[c]);", wrong, 1);
  clattn_context *ctx = test_context(dir);
  clattn_tune_options opt = {0};
  opt.budget_seconds = 30, opt.max_candidates = 3, opt.backward = 1; /* stops after 3 */
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_geq(r.disqualified, 1);
  cr_assert(strstr(r.report, "wrong result: max|dv"), "report: %s", r.report);
  cr_assert_str_eq(r.best.kernel, "backward_rows");
  cr_assert(r.best.block_q != h.backward.block_q || r.best.block_kv != h.backward.block_kv,
            "the wrong config won");
  cr_assert_lt(r.heuristic_ms, 0);
  cr_assert(r.saved);
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.backward_origin, "tuned");
  cr_assert_eq(info.backward.block_q, r.best.block_q);
  cr_assert_eq(info.backward.block_kv, r.best.block_kv);
  cr_assert_str_neq(info.origin, "tuned", "a backward entry must not serve the forward");
  clattn_context_destroy(ctx);
  /* A new context reads the entry from the database file. */
  char db[300];
  snprintf(db, sizeof db, "%s/tuning.json", test_tmpdir());
  clattn_options o = {test_tmpdir(), db, dir};
  cr_assert_eq(clattn_context_create_default(&o, &ctx), CLATTN_OK);
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.backward_origin, "tuned");
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

Test(tune, backward_bad_input) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = small_problem();
  p.seqlen_kv = 0;
  clattn_tune_options opt = {0};
  opt.backward = 1, opt.dry_run = 1;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "seqlen_kv is 0"), "%s", clattn_last_error(ctx));
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

/* Half storage: the forward's gate rejects an fp16 candidate 1% wrong (fp16's naive error is far
 * below that; bf16's is not, which is the rule's and not the tuner's), and the winner serves the
 * fp16 class only; the backward tunes a bf16 class and its entry is used. */
Test(tune, half_classes) {
  clattn_problem p = small_problem();
  p.dtype = CLATTN_F16;
  clattn_plan_info h;
  char dir[64], wrong[512], is_h[160];
  heuristic_condition(&p, &h, is_h, sizeof is_h);
  snprintf(wrong, sizeof wrong,
           "%s    const float inv = 1.01f / l; /* test-only: wrong */\n#else\n"
           "    const float inv = l > 0.0f ? 1.0f / l : 0.0f;\n#endif\n",
           is_h);
  test_kernel_dir(dir, sizeof dir, "const float inv = l > 0.0f ? 1.0f / l : 0.0f;", wrong, 1);
  clattn_context *ctx = test_context(dir);
  clattn_tune_options opt = {0};
  opt.budget_seconds = 30, opt.max_candidates = 3;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_geq(r.disqualified, 1, "report: %s", r.report);
  cr_assert(strstr(r.report, "wrong result"), "report: %s", r.report);
  cr_assert(r.saved);
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.origin, "tuned");
  clattn_problem f32 = small_problem();
  cr_assert_eq(clattn_explain(ctx, &f32, &info), CLATTN_OK);
  cr_assert_str_neq(info.origin, "tuned", "an fp16 entry must not serve fp32");
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
  /* The backward, bf16, on the right kernels (this folder's forward is wrong, and the backward
   * tuner's gate refuses inputs made by a wrong forward). */
  ctx = test_context(NULL);
  p.dtype = CLATTN_BF16, p.flags = CLATTN_CAUSAL;
  opt.backward = 1, opt.max_candidates = 2;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(r.disqualified, 0, "report: %s", r.report);
  cr_assert(r.saved);
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.backward_origin, "tuned");
  clattn_context_destroy(ctx);
}

/* KV cache classes (options.kv_cache): the decode kernels tuned on the tuner's own cache (paged
 * int8: quantised rows, the reference on their dequantised values; contiguous fp32), every
 * candidate correct; the winner is the cache class's entry, which a cache call's plan takes
 * ("tuned") while the plain class's is untouched; bad options are refused by name. */
Test(tune, kv_cache_classes_tuned_apart) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {2, 4, 2, 1, 100, 16};
  clattn_kv_cache like = {0};
  like.dtype = CLATTN_I8, like.page_size = 16;
  clattn_tune_options opt = {0};
  opt.budget_seconds = 60, opt.max_candidates = 3, opt.kv_cache = &like;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(r.best.kernel, "decode");
  cr_assert_eq(r.disqualified, 0, "%u candidates wrong", r.disqualified);
  cr_assert(r.saved);
  /* A paged int8 cache call of the problem: 7 pages of 16 tokens per sequence. */
  enum { PAGES = 14, PS = 16, HKV = 2, D = 16 };
  cl_mem q = test_buffer(ctx, 2 * 4 * D, 0.5f), o = test_buffer(ctx, 2 * 4 * D, NAN);
  cl_mem k = test_buffer(ctx, PAGES * PS * HKV * D / 4, 0.0f);
  cl_mem v = test_buffer(ctx, PAGES * PS * HKV * D / 4, 0.0f);
  cl_mem sk = test_buffer(ctx, PAGES * PS * HKV, 1.0f),
         sv = test_buffer(ctx, PAGES * PS * HKV, 1.0f);
  cl_mem table = test_buffer(ctx, 2 * 7, 0.0f), lens = test_buffer(ctx, 2, 0.0f);
  clattn_kv_cache c = like;
  c.num_pages = PAGES, c.max_pages = 7, c.block_table = table, c.seqlens = lens;
  c.k = clattn_bshd(k, PS, HKV, D), c.v = clattn_bshd(v, PS, HKV, D), c.k_scale = sk,
  c.v_scale = sv;
  clattn_args a = {0};
  a.q = clattn_bshd(q, 1, 4, D), a.o = clattn_bshd(o, 1, 4, D), a.kv_cache = &c;
  clattn_plan_info cached, plain;
  cr_assert_eq(clattn_explain_ex(ctx, &p, &a, &cached), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(cached.kernel, "decode");
  cr_assert_str_eq(cached.origin, "tuned");
  /* The call's block is the entry's or, on a GPU with fewer rows in its tiles (2 here),
   * tightened to them (plan/grid.c, tight_rows). */
  cr_assert_leq(cached.block_q, r.best.block_q);
  cr_assert_eq(cached.block_kv, r.best.block_kv);
  /* The bucket is the context's (100 keys: 256), not seqlen_q's (64); an override set from the
   * problem, keyed by seqlen_q's, still reaches the cache call, and removing it gives the entry
   * back. */
  cr_assert_eq(r.seqlen_bucket, 256);
  cr_assert_eq(cached.seqlen_bucket, 256);
  /* An override is checked against the problem's own (plain, fp32) class, where the int8
   * class's winner may not fit (int8 loads 4 elements a word: fewer P V chunks), so a config
   * both classes take. */
  clattn_config both = {"decode", 16, 64, 1, 1, 0, 4, 4};
  cr_assert_eq(clattn_override_config(ctx, &p, &both), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_explain_ex(ctx, &p, &a, &cached), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(cached.origin, "override");
  cr_assert_eq(clattn_override_config(ctx, &p, NULL), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_explain_ex(ctx, &p, &a, &cached), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(cached.origin, "tuned");
  cr_assert_eq(clattn_explain(ctx, &p, &plain), CLATTN_OK);
  cr_assert_str_neq(plain.origin, "tuned", "the plain class took the cache class's entry");
  cr_assert_eq(clattn_forward_ex(ctx, &p, &a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  /* keep_tuned (how `clattn tune` resumes): the tuned class is reported, not measured again. */
  clattn_tune_result kept;
  opt.keep_tuned = 1;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &kept), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(kept.kept && !kept.saved && kept.tried == 0);
  cr_assert_str_eq(kept.best.kernel, "decode");
  cr_assert_eq(kept.best.block_q, r.best.block_q);
  cr_assert_eq(kept.best.block_kv, r.best.block_kv);
  cr_assert_eq(kept.best.threads_per_row, r.best.threads_per_row);
  /* A contiguous fp32 cache, measured only: a class of its own, not kept. */
  like.dtype = CLATTN_F32, like.page_size = 0, opt.dry_run = 1;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(!r.kept && r.tried > 0);
  cr_assert_eq(r.disqualified, 0, "%u candidates wrong", r.disqualified);
  opt.keep_tuned = 0;
  /* Refused: a backward, a page size, a dtype. */
  opt.backward = 1;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "a cache has no backward"));
  opt.backward = 0, like.page_size = 24;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "page_size 24"));
  like.page_size = 0, like.dtype = CLATTN_F16;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "CLATTN_F32"));
  clFinish(clattn_context_queue(ctx));
  cl_mem m[] = {q, o, k, v, sk, sv, table, lens};
  for (int i = 0; i < 8; i++) clReleaseMemObject(m[i]);
  clattn_context_destroy(ctx);
}
