/* The tuners' trust: a candidate that writes nothing, or is wrong where a check does not look,
 * is never crowned, by the forward tuner or the backward one. The kernel folder
 * CLATTN_BROKEN_DIR (made at build time by cmake/broken_kernels.cmake with the condition
 * "BKV == 64") returns at the top of every kernel built with 64-key blocks, forward and backward
 * alike, so such a candidate leaves its outputs as they were: the tuner must poison them before
 * each candidate and disqualify it. Kernels wrong on one row the timed problem's samples miss,
 * or on keys the small problem lacks, show that both problems are checked. Also: backward
 * tuning on a context whose queue is out of order. */
#include "common.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  unsigned seen, broken, broken_timed, broken_unexplained;
  char log[2048];
} candidates;

/* Records every candidate with 64-key blocks: it must not be timed, and its note must say why
 * it was disqualified (or that it did not fit, and so never ran). */
static void on_candidate(void *user, const clattn_tune_progress *p) {
  candidates *c = user;
  c->seen++;
  size_t len = strlen(c->log);
  snprintf(c->log + len, sizeof c->log - len, "%s BQ=%u BKV=%u: %.3f ms %s\n", p->candidate.kernel,
           p->candidate.block_q, p->candidate.block_kv, p->candidate_ms, p->note);
  if (p->candidate.block_kv != 64) return;
  c->broken++;
  if (p->candidate_ms >= 0) c->broken_timed++;
  if (!strstr(p->note, "unwritten") && !strstr(p->note, "non-finite") &&
      !strstr(p->note, "wrong result") && !strstr(p->note, "fit"))
    c->broken_unexplained++;
}

static void check_never_crowned(const clattn_tune_result *r, const candidates *c) {
  cr_log_info("candidates:\n%s", c->log);
  cr_assert_gt(c->broken, 0, "no candidate with BKV=64 was tried:\n%s", c->log);
  cr_assert_lt(c->broken, c->seen, "every candidate had BKV=64:\n%s", c->log);
  cr_assert_eq(c->broken_timed, 0, "%u broken candidates were timed:\n%s", c->broken_timed, c->log);
  cr_assert_eq(c->broken_unexplained, 0, "broken candidates without a reason:\n%s", c->log);
  cr_assert_geq(r->disqualified + r->did_not_fit, c->broken, "disqualified %u of %u broken",
                r->disqualified, c->broken);
  cr_assert_neq(r->best.block_kv, 64, "a broken config (BKV=64) was crowned");
  cr_assert_neq(r->runner_up.block_kv, 64, "a broken config (BKV=64) is the runner-up");
}

/* The repro: clattn tune --head-dims 64 --causal-list 0 --seqlens 256 --dry-run crowned
 * a BKV=64 config that writes nothing, at a 12,000x "speedup", with 0 disqualified. */
Test(tune_trust, forward_broken_kernels_never_crowned) {
  clattn_context *ctx = test_context(CLATTN_BROKEN_DIR);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 256, p.head_dim = 64;
  candidates c = {0};
  clattn_tune_options opt = {0};
  opt.budget_seconds = 60, opt.max_candidates = 8, opt.dry_run = 1; /* room for 8 under load */
  opt.progress = on_candidate, opt.user = &c;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  check_never_crowned(&r, &c);
  clattn_context_destroy(ctx);
}

/* The same for the backward's kernels (BKV: keys per bwd_dkdv work-group, also bwd_dq's staged
 * key block). The forward that makes the backward's O and LSE is forced to a config the folder
 * does not break, so that every candidate sees right inputs. */
Test(tune_trust, backward_broken_kernels_never_crowned) {
  clattn_context *ctx = test_context(CLATTN_BROKEN_DIR);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.heads_kv = 1, p.seqlen_q = p.seqlen_kv = 128, p.head_dim = 32;
  p.flags = CLATTN_CAUSAL;
  clattn_config fwd = {"forward_rows", 32, 32, 1, 1, 0, 0, 1};
  cr_assert_eq(clattn_override_config(ctx, &p, &fwd), CLATTN_OK, "%s", clattn_last_error(ctx));
  candidates c = {0};
  clattn_tune_options opt = {0};
  opt.budget_seconds = 60, opt.max_candidates = 8, opt.dry_run = 1, opt.backward = 1;
  opt.progress = on_candidate, opt.user = &c;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  check_never_crowned(&r, &c);
  clattn_context_destroy(ctx);
}

/* Backward tuning prepares its inputs (the forward, then D = rowsum(dO o O), then a copy) on the
 * context's queue; on an out-of-order queue those steps must still run in order: the tuner
 * either gives right results (a candidate passes its check) or refuses the queue clearly. The
 * forward is slowed down (its first work-item spins before it starts), so that a D computed
 * without waiting for it reads O before it is written, every time rather than by chance. */
#define SLOW_FORWARD                                                                               \
  "  if (get_global_id(0) == 0) { /* test-only: a slow forward */\n"                               \
  "    volatile float spin = 0.0f;\n"                                                              \
  "    for (int s = 0; s < 20000000; s++) spin += 1.0f;\n"                                         \
  "  }\n"

Test(tune_trust, backward_on_out_of_order_queue) {
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "lse_split OUT_ARG VARIANT_ARGS) {", SLOW_FORWARD, 0);
  clattn_context *base = test_context(NULL);
  cl_context cl = clattn_context_cl_context(base);
  cl_device_id dev = clattn_context_device(base);
  cl_command_queue q = test_out_of_order_queue(base);
  if (!q) {
    clattn_context_destroy(base);
    cr_skip_test("the device has no out-of-order queues");
  }
  char db[300];
  snprintf(db, sizeof db, "%s/tuning.json", test_tmpdir());
  clattn_options o = {test_tmpdir(), db, dir, 0};
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create(cl, dev, q, &o, &ctx), CLATTN_OK);
  clReleaseCommandQueue(q);
  clattn_problem p = {0};
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.seqlen_q = 200, p.seqlen_kv = 240;
  p.head_dim = 64;
  clattn_tune_options opt = {0};
  opt.budget_seconds = 20, opt.max_candidates = 1, opt.dry_run = 1, opt.backward = 1;
  clattn_tune_result r;
  clattn_status st = clattn_tune(ctx, &p, &opt, &r);
  if (st == CLATTN_OK) {
    cr_assert_eq(r.disqualified, 0, "right kernels disqualified on an out-of-order queue:\n%s",
                 r.report);
    cr_assert_gt(r.best_ms, 0);
  } else {
    cr_assert_eq(st, CLATTN_ERR_UNSUPPORTED, "%s", clattn_last_error(ctx));
    cr_assert(strstr(clattn_last_error(ctx), "in-order queue"), "%s", clattn_last_error(ctx));
  }
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
  clattn_context_destroy(base);
  test_kernel_dir_remove(dir);
}

/* Every candidate is wrong (by 1%) on row 100 only, which the timed problem's sampled rows miss
 * (256 rows, 48 sampled): the small problem of the class, checked on every row, catches it. */
Test(tune_trust, forward_every_row_of_the_small_problem_is_checked) {
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "const float inv = l > 0.0f ? 1.0f / l : 0.0f;",
                  "const float inv = (row == 100 ? 1.01f : 1.0f) * (l > 0.0f ? 1.0f / l : 0.0f);"
                  " /* test-only: wrong */\n",
                  1);
  clattn_context *ctx = test_context(dir);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 256, p.head_dim = 16;
  clattn_tune_options opt = {0};
  opt.budget_seconds = 10, opt.max_candidates = 2, opt.dry_run = 1;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_UNSUPPORTED, "%s",
               clattn_last_error(ctx));
  cr_assert(strstr(clattn_last_error(ctx), "wrong result") &&
                strstr(clattn_last_error(ctx), "every row"),
            "%s", clattn_last_error(ctx));
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

/* Every candidate's dV is wrong (by 1%) for keys from 211 on, which the small problem (211 keys)
 * does not have: the timed problem's sampled key rows catch it. */
Test(tune_trust, backward_sampled_rows_of_the_timed_problem_are_checked) {
  char dir[64];
  test_kernel_dir(dir, sizeof dir, "STS(dv + vb_out + c, dvj[c]);",
                  "for (uint c = 0; c < DV; c++) /* test-only: wrong */\n"
                  "  STS(dv + vb_out + c, dvj[c] * (j >= 211 ? 1.01f : 1.0f));\n",
                  1);
  clattn_context *ctx = test_context(dir);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = 128, p.seqlen_kv = 300, p.head_dim = 16;
  clattn_tune_options opt = {0};
  opt.budget_seconds = 20, opt.max_candidates = 2, opt.dry_run = 1, opt.backward = 1;
  clattn_tune_result r;
  cr_assert_eq(clattn_tune(ctx, &p, &opt, &r), CLATTN_ERR_UNSUPPORTED, "%s",
               clattn_last_error(ctx));
  cr_assert(strstr(clattn_last_error(ctx), "max|dv - ref|") &&
                strstr(clattn_last_error(ctx), "sampled rows"),
            "%s", clattn_last_error(ctx));
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}
