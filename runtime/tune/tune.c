/* The autotuner: for one problem class, find the fastest legal config by measurement.
 *
 * Candidates come from the local-memory model (illegal configs are pruned before anything is
 * compiled). Each candidate is built, run once (a warm-up: PoCL compiles per local size at the
 * first enqueue) with its outputs poisoned with NaN, and checked against a double-precision host
 * reference on every row of a small problem of the class and sampled rows of the timed one
 * (DESIGN.md's rule; an unwritten element, NaN or Inf anywhere disqualifies; tune_fwd.c,
 * tune_bwd.c), then timed by OpenCL event profiling until
 * the spread is small or a cap. Exhaustive when the space is small; otherwise the heuristic and
 * a few diverse configs seed a local search around the best. The best few and the heuristic's
 * config are timed again interleaved at the end, so noise cannot crown a config. */
#include "tune.h"
#include "tunedb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_SPACE = 8192, FINALISTS = 3, FINAL_ROUNDS = 7, MAX_RUNS = 15 };

typedef struct {
  clattn__config cfg;
  int state; /* 0 untried, 1 measured, -1 disqualified or did not fit */
  double median, min, spread;
  clattn__plan plan; /* its kernels, kept for the finalists' re-timing */
} cand;

/* A pass's problems, behind one interface (tune_fwd.c, tune_bwd.c). */
typedef struct {
  clattn_status (*make)(clattn_context *ctx, cl_command_queue queue, const clattn__shape *s,
                        int every_row, void **out);
  double (*run)(void *bench, const clattn__plan *p, int poison);
  void (*check)(void *bench, char *why, size_t len);
  void (*release)(void *bench);
} pass_bench;

static clattn_status fwd_make(clattn_context *ctx, cl_command_queue queue, const clattn__shape *s,
                              int every_row, void **out) {
  return clattn__fwd_bench_new(ctx, queue, s, every_row, (clattn__fwd_bench **)out);
}
static double fwd_run(void *b, const clattn__plan *p, int poison) {
  return clattn__fwd_bench_run(b, p, poison);
}
static void fwd_check(void *b, char *why, size_t len) {
  clattn__fwd_bench_check(b, why, len);
}
static void fwd_release(void *b) {
  clattn__fwd_bench_free(b);
}
static clattn_status bwd_make(clattn_context *ctx, cl_command_queue queue, const clattn__shape *s,
                              int every_row, void **out) {
  return clattn__bwd_bench_new(ctx, queue, s, every_row, (clattn__bwd_bench **)out);
}
static double bwd_run(void *b, const clattn__plan *p, int poison) {
  return clattn__bwd_bench_run(b, p, poison);
}
static void bwd_check(void *b, char *why, size_t len) {
  clattn__bwd_bench_check(b, why, len);
}
static void bwd_release(void *b) {
  clattn__bwd_bench_free(b);
}

static const pass_bench benches[CLATTN__PASSES] = {
    [CLATTN__FORWARD] = {fwd_make, fwd_run, fwd_check, fwd_release},
    [CLATTN__BACKWARD] = {bwd_make, bwd_run, bwd_check, bwd_release},
};

typedef struct {
  clattn_context *ctx;
  cl_command_queue queue; /* with profiling */
  clattn__shape s;
  clattn__class cls;
  clattn__sources src; /* the class's pass's */
  double t0, deadline;
  /* A small problem of the class, checked on every row, beside the timed one, checked on
   * sampled rows (the double reference of the timed problem would take minutes at large N). */
  const pass_bench *pass;
  void *check, *timed;
} bench;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The two problems of the tuner (tune.h). */
static clattn_status setup(bench *b) {
  clattn__shape small = clattn__tune_small_shape(&b->s);
  clattn_status st = b->pass->make(b->ctx, b->queue, &small, 1, &b->check);
  if (st == CLATTN_OK) st = b->pass->make(b->ctx, b->queue, &b->s, 0, &b->timed);
  return st;
}

static void teardown(bench *b) {
  if (b->pass) b->pass->release(b->check), b->pass->release(b->timed);
  clattn__sources_free(&b->src);
}

/* Builds a candidate; c->plan.kernels[0] is NULL when it does not fit (note says why). */
static clattn_status build_cand(bench *b, cand *c, char *note, size_t note_len) {
  c->plan.cls = b->cls;
  return clattn__plan_build(b->ctx, &b->src, &b->cls, &c->cfg, &c->plan, note, note_len);
}

static void release_cand(bench *b, cand *c) {
  clattn__plan_release(&c->plan);
}

/* One timed run of a built candidate on the timed problem (poison: its outputs filled with NaN
 * first, for a checked run), or on the small one (small); < 0 on failure. */
static double run_cand(bench *b, const cand *c, int small, int poison) {
  return b->pass->run(small ? b->check : b->timed, &c->plan, poison);
}

static size_t local_bytes(const bench *b, const clattn__config *c) {
  return clattn__config_local_bytes(&b->ctx->device, &b->cls, c);
}

/* Builds, checks and times one candidate. */
static clattn_status evaluate(bench *b, cand *c, double cap_s, double best_ms, char *note,
                              size_t note_len) {
  note[0] = 0;
  clattn_status st = build_cand(b, c, note, note_len);
  if (st == CLATTN_ERR_BUILD) { /* a candidate the compiler rejects: disqualified, not fatal */
    c->state = -1;
    const char *msg = clattn__last_error_locked(b->ctx), *log = strstr(msg, "build log:");
    snprintf(note, note_len, "failed to build: %.200s", log ? log + strlen("build log:") : msg);
    return CLATTN_OK;
  }
  if (st != CLATTN_OK) return st;
  c->state = -1;
  if (!c->plan.kernels[0]) return CLATTN_OK;
  /* Checked on the small problem, every row, and on the timed one, sampled rows; both runs
   * with the outputs poisoned first, so what another candidate wrote cannot pass for this
   * one's. */
  if (run_cand(b, c, 1, 1) < 0 || run_cand(b, c, 0, 1) < 0) {
    snprintf(note, note_len, "the candidate failed to run: %.200s",
             clattn__last_error_locked(b->ctx));
    return CLATTN_OK;
  }
  b->pass->check(b->check, note, note_len);
  if (!note[0]) b->pass->check(b->timed, note, note_len);
  if (note[0]) return CLATTN_OK;
  double ms[MAX_RUNS], start = now_s();
  int n = 0;
  while (n < MAX_RUNS) {
    double t = run_cand(b, c, 0, 0);
    if (t < 0) break;
    ms[n++] = t;
    if (n == 1 && best_ms > 0 && t > 1.5 * best_ms) break; /* cannot win: save the budget */
    if (n >= 3 && (now_s() - start > cap_s || now_s() > b->deadline)) break;
    if (n >= 5) { /* stop once the middle half lies within 3% */
      double sorted[MAX_RUNS];
      memcpy(sorted, ms, n * sizeof *ms);
      qsort(sorted, n, sizeof *sorted, cmp_double);
      if ((sorted[3 * n / 4] - sorted[n / 4]) <= 0.03 * sorted[n / 2]) break;
    }
  }
  if (n == 0) {
    snprintf(note, note_len, "timing failed");
    return CLATTN_OK;
  }
  qsort(ms, n, sizeof *ms, cmp_double);
  c->median = ms[n / 2], c->min = ms[0];
  c->spread = (ms[n - 1] - ms[0]) / ms[n / 2];
  c->state = 1;
  return CLATTN_OK;
}

/* Differ in exactly one parameter, by one step (x2 or /2 for sizes). */
static int neighbours(const clattn__config *a, const clattn__config *b) {
  if (a->kernel != b->kernel) return 0;
  int diff = (a->bq != b->bq) + (a->bkv != b->bkv) + (a->tpr != b->tpr) + (a->stage != b->stage) +
             (a->pad != b->pad) + (a->rm != b->rm) + (a->vec != b->vec);
  if (diff != 1) return 0;
  if (a->rm != b->rm) return a->rm == 2 * b->rm || b->rm == 2 * a->rm;
  if (a->bq != b->bq) return a->bq == 2 * b->bq || b->bq == 2 * a->bq;
  if (a->bkv != b->bkv) return a->bkv == 2 * b->bkv || b->bkv == 2 * a->bkv;
  if (a->tpr != b->tpr) return a->tpr == 2 * b->tpr || b->tpr == 2 * a->tpr;
  return 1;
}

/* The next candidate: exhaustive order for small spaces; else seeds (the heuristic, then
 * configs spread over the ranked list), then untried neighbours of the best, then the next
 * seed as a restart. -1 when none is left. */
static long next_candidate(const cand *all, size_t n, long best, unsigned tried) {
  if (n <= 16) {
    for (size_t i = 0; i < n; i++)
      if (all[i].state == 0) return (long)i;
    return -1;
  }
  enum { SEEDS = 6 };
  if (tried < SEEDS + 1) {
    if (all[0].state == 0) return 0; /* the heuristic's own choice first */
    /* The best-ranked config of every other kernel family is always a seed: the heuristic
     * ranks the families apart, and only measurement can say which suits the device. */
    unsigned seen = 1u << all[0].cfg.kernel;
    for (size_t i = 0; i < n; i++)
      if (!(seen & (1u << all[i].cfg.kernel))) {
        seen |= 1u << all[i].cfg.kernel;
        if (all[i].state == 0) return (long)i;
      }
    for (unsigned k = 0; k < SEEDS; k++) {
      /* Spread over the better third of the heuristic's ranking: diverse, but not configs the
       * model already knows to be poor (each costs a compile and slow runs). */
      size_t i = k == 0 ? 0 : (size_t)k * (n / 3) / (SEEDS - 1);
      if (all[i].state == 0) return (long)i;
    }
  }
  if (best >= 0)
    for (size_t i = 0; i < n; i++)
      if (all[i].state == 0 && neighbours(&all[i].cfg, &all[best].cfg)) return (long)i;
  for (size_t i = 0; i < n; i++)
    if (all[i].state == 0) return (long)i;
  return -1;
}

/* Compiles this candidate and the ones the search would pick after it (if nothing better turns
 * up) at once, on threads: compiling is most of a candidate's cost. */
static void prebuild_upcoming(bench *b, cand *all, size_t n, long best, unsigned done, long first) {
  enum { AHEAD = 8 };
  clattn__config cfgs[AHEAD];
  long picked[AHEAD];
  size_t k = 0;
  for (long i = first; i >= 0 && k < AHEAD; i = next_candidate(all, n, best, done + (unsigned)k)) {
    picked[k] = i;
    cfgs[k++] = all[i].cfg;
    all[i].state = 2; /* reserved, so next_candidate moves on */
  }
  for (size_t j = 0; j < k; j++) all[picked[j]].state = 0;
  clattn__prebuild(b->ctx, &b->src, &b->cls, cfgs, k);
}

static void report_line(const bench *b, clattn_tune_result *r, const clattn__config *c,
                        const char *why) {
  size_t len = strlen(r->report);
  char text[160];
  clattn__config_describe(c, text, sizeof text);
  if (len + 1 < sizeof r->report)
    snprintf(r->report + len, sizeof r->report - len, "%s: %s\n", text, why);
}

/* Times the finalists (the best few and the heuristic's config) round-robin, so a config's
 * luck in its own timing window cannot make it win. */
static void retime_interleaved(bench *b, cand *all, long *fin, int nfin) {
  double ms[FINALISTS + 1][FINAL_ROUNDS], round_ms = 0;
  int got[FINALISTS + 1] = {0};
  for (int f = 0; f < nfin; f++) round_ms += all[fin[f]].median;
  /* As many rounds as the budget has room for: at least 3, at most FINAL_ROUNDS. */
  int rounds = (int)((b->deadline - now_s()) * 1e3 / (round_ms > 0 ? round_ms : 1));
  rounds = rounds < 3 ? 3 : rounds > FINAL_ROUNDS ? FINAL_ROUNDS : rounds;
  for (int round = 0; round < rounds; round++)
    for (int f = 0; f < nfin; f++) {
      double t = run_cand(b, &all[fin[f]], 0, 0);
      if (t >= 0) ms[f][got[f]++] = t;
    }
  for (int f = 0; f < nfin; f++)
    if (got[f]) {
      qsort(ms[f], got[f], sizeof(double), cmp_double);
      all[fin[f]].median = ms[f][got[f] / 2];
      all[fin[f]].min = fmin(all[fin[f]].min, ms[f][0]);
    }
}

static clattn_status save_winner(bench *b, const cand *w, clattn_tune_result *r) {
  clattn__db_entry e;
  memset(&e, 0, sizeof e);
  clattn__db_device_of(&b->ctx->device, &e.dev);
  e.source_hash = b->src.hash[w->cfg.kernel];
  e.cls = b->cls, e.cfg = w->cfg, e.median_ms = w->median, e.spread = w->spread;
  e.cls.variants &= CLATTN__VAR_CACHE; /* the database keys a cache class by its cache alone */
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(e.date, sizeof e.date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  clattn__context_db_put(b->ctx, &e);
  clattn__plans_forget(b->ctx, &b->cls);
  if (!b->ctx->tuning_db)
    return clattn__fail(b->ctx, CLATTN_ERR_IO, "no tuning database path (cache disabled)");
  char why[512];
  clattn_status st = clattn__db_save_merged(b->ctx->tuning_db, &e, 1, why, sizeof why);
  if (st != CLATTN_OK) return clattn__fail(b->ctx, st, "%s", why);
  if (why[0]) clattn__warn(b->ctx, "tuning database: %s", why); /* a corrupt file kept aside */
  r->saved = 1;
  return CLATTN_OK;
}

static clattn_status search(bench *b, const clattn_tune_options *opt, clattn_tune_result *r) {
  clattn__config *cfgs = malloc(MAX_SPACE * sizeof *cfgs);
  if (!cfgs) return clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  size_t n = clattn__configs_ranked(&b->ctx->device, &b->cls, cfgs, MAX_SPACE);
  r->space = (unsigned)clattn__config_space_size((clattn__pass)b->cls.pass);
  r->pruned = r->space - (unsigned)n;
  cand *all = n ? calloc(n, sizeof *all) : NULL;
  for (size_t i = 0; all && i < n; i++) all[i].cfg = cfgs[i];
  free(cfgs);
  if (n == 0)
    return clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "no config fits this device");
  if (!all) return clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  double budget = opt->budget_seconds > 0 ? opt->budget_seconds : 60.0;
  double search_end = b->t0 + 0.85 * budget; /* the rest is for the interleaved re-timing */
  b->deadline = b->t0 + budget;
  long best = -1;
  double slowest = 0; /* the longest candidate so far: none starts that cannot finish in time */
  clattn_status st = CLATTN_OK;
  char skipped[256] = ""; /* the last note of a candidate that did not fit: the failure's reason */
  /* Leave room for the final re-timing: 3 rounds of up to FINALISTS + 1 configs. */
  while (
      st == CLATTN_OK &&
      now_s() + slowest + (best >= 0 ? 3 * (FINALISTS + 1) * all[best].median * 1.5e-3 : 0) <
          search_end &&
      (!opt->max_candidates || r->tried + r->disqualified + r->did_not_fit < opt->max_candidates)) {
    unsigned done = r->tried + r->disqualified + r->did_not_fit;
    long i = next_candidate(all, n, best, done);
    if (i < 0) break;
    prebuild_upcoming(b, all, n, best, done, i);
    char note[256];
    double cap = fmax(0.3, budget / 40), started = now_s();
    st = evaluate(b, &all[i], cap, best >= 0 ? all[best].median : -1.0, note, sizeof note);
    slowest = fmax(slowest, now_s() - started);
    if (st != CLATTN_OK) break;
    if (all[i].state == 1) {
      r->tried++;
      if (best < 0 || all[i].median < all[best].median) best = i;
    } else if (all[i].plan.kernels[0] || strstr(note, "wrong") || strstr(note, "non-finite") ||
               strstr(note, "unwritten") || strstr(note, "failed")) {
      r->tried++, r->disqualified++;
      report_line(b, r, &all[i].cfg, note);
    } else {
      r->did_not_fit++;
      snprintf(skipped, sizeof skipped, "%s", note);
    }
    if (all[i].state != 1) release_cand(b, &all[i]);
    if (opt->progress) {
      done++;
      double el = now_s() - b->t0, per = el / done;
      clattn_tune_progress pr = {0};
      pr.tried = done;
      pr.planned = done + (unsigned)fmax(0, (search_end - now_s()) / per);
      if (pr.planned > n) pr.planned = (unsigned)n;
      pr.elapsed_s = el, pr.budget_s = budget;
      clattn__config_to_public(&all[i].cfg, &pr.candidate);
      pr.candidate_local_mem = local_bytes(b, &all[i].cfg);
      pr.candidate_private_mem = all[i].plan.private_mem;
      pr.candidate_ms = all[i].state == 1 ? all[i].median : -1.0;
      pr.note = all[i].state == 1 ? "" : note;
      pr.best_ms = best >= 0 ? all[best].median : -1.0;
      if (best >= 0) clattn__config_to_public(&all[best].cfg, &pr.best);
      opt->progress(opt->user, &pr);
    }
  }
  if (st == CLATTN_OK && best < 0) /* say why, also where no candidate was wrong */
    st = clattn__fail(b->ctx, CLATTN_ERR_UNSUPPORTED,
                      "no candidate passed the correctness check (%u disqualified, %u did not fit "
                      "or ran past their time%s%s, in %.1f of %.0f s of budget):\n%s",
                      r->disqualified, r->did_not_fit, skipped[0] ? "; the last: " : "", skipped,
                      now_s() - b->t0, budget, r->report);
  if (st == CLATTN_OK) {
    /* Finalists: the best few by their own timing, and the heuristic's config (index 0). */
    long fin[FINALISTS + 1];
    int nfin = 0;
    for (int k = 0; k < FINALISTS; k++) {
      long pick = -1;
      for (size_t i = 0; i < n; i++) {
        int taken = 0;
        for (int f = 0; f < nfin; f++) taken |= fin[f] == (long)i;
        if (all[i].state == 1 && !taken && (pick < 0 || all[i].median < all[pick].median))
          pick = (long)i;
      }
      if (pick >= 0) fin[nfin++] = pick;
    }
    int have_heuristic = 0;
    for (int f = 0; f < nfin; f++) have_heuristic |= fin[f] == 0;
    if (!have_heuristic && all[0].state == 1) fin[nfin++] = 0;
    retime_interleaved(b, all, fin, nfin);
    long win = fin[0], second = -1;
    for (int f = 1; f < nfin; f++)
      if (all[fin[f]].median < all[win].median) win = fin[f];
    for (int f = 0; f < nfin; f++)
      if (fin[f] != win && (second < 0 || all[fin[f]].median < all[second].median)) second = fin[f];
    const cand *w = &all[win];
    clattn__config_to_public(&w->cfg, &r->best);
    r->best_ms = w->median, r->best_min_ms = w->min, r->best_spread = w->spread;
    size_t model = local_bytes(b, &w->cfg);
    r->local_mem_bytes = w->plan.local_mem > model ? w->plan.local_mem : model;
    r->private_mem_bytes = w->plan.private_mem;
    if (second >= 0) {
      clattn__config_to_public(&all[second].cfg, &r->runner_up);
      r->runner_up_ms = all[second].median;
      r->margin = all[second].median / w->median - 1.0;
    }
    clattn__config_to_public(&all[0].cfg, &r->heuristic);
    r->heuristic_ms = all[0].state == 1 ? all[0].median : -1.0;
    if (!opt->dry_run) st = save_winner(b, w, r);
  }
  for (size_t i = 0; i < n; i++) release_cand(b, &all[i]);
  free(all);
  return st;
}

clattn_status clattn_tune(clattn_context *ctx, const clattn_problem *problem,
                          const clattn_tune_options *options, clattn_tune_result *out) {
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn_tune_options none = {0};
  const clattn_tune_options *opt = options ? options : &none;
  bench b;
  memset(&b, 0, sizeof b);
  b.ctx = ctx, b.t0 = now_s();
  clattn_status st = clattn__shape_from_problem(ctx, problem, &b.s);
  if (st == CLATTN_OK && !out) st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "out is NULL");
  if (st == CLATTN_OK && b.s.empty)
    st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                      "cannot tune an empty problem (batch, heads_q or seqlen_q is 0)");
  clattn__pass pass = opt->backward ? CLATTN__BACKWARD : CLATTN__FORWARD;
  if (st == CLATTN_OK && pass == CLATTN__BACKWARD && !b.s.seqlen_kv)
    st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                      "cannot tune the backward of a problem without keys (seqlen_kv is 0)");
  if (st == CLATTN_OK && b.s.algo != CLATTN_ALGO_FUSED)
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "the tuner tunes the fused kernels; this problem runs the standard path "
                      "(head dims %zu/%zu, or CLATTN_ALGO_STANDARD)",
                      b.s.d, b.s.dv);
  /* The tuner's problems and references are the plain class's, and the database keys classes
   * without the variants (a variant takes the plain class's entry). */
  /* A flag that needs a call's args (its slopes) would fail every candidate's run. */
  if (st == CLATTN_OK && b.s.alibi_per_batch)
    st = clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                      "flags have CLATTN_ALIBI_PER_BATCH, but a tuning problem has no "
                      "alibi_slopes (ALiBi calls take the plain class's entry)");
  if (st == CLATTN_OK && (b.s.mask || b.s.softcap > 0.0f || b.s.varlen))
    st = clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                      "the tuner tunes plain classes (causal or not); a window, "
                      "CLATTN_CAUSAL_TOP_LEFT, softcap or CLATTN_VARLEN takes the plain class's "
                      "entry");
  if (st == CLATTN_OK && opt->kv_cache) st = clattn__tune_kv_class(ctx, opt->kv_cache, pass, &b.s);
  /* CLATTN_NONDETERMINISTIC: the plain class too (its bench's row workspace holds D alone, no
   * atomic dQ accumulator), whose entry the atomic class takes. */
  b.s.nondet = 0;
  if (st == CLATTN_OK) {
    memset(out, 0, sizeof *out);
    b.cls = clattn__class_of(&b.s, pass);
    b.pass = &benches[pass];
    out->seqlen_bucket = b.cls.bucket;
    out->local_mem_available = (size_t)ctx->device.local_mem;
    st = clattn__sources_load(ctx, pass, &b.src);
  }
  clattn__config have; /* keep_tuned: a tuned class is only reported */
  int todo = st == CLATTN_OK;
  if (todo && opt->keep_tuned &&
      clattn__db_tuned(clattn__context_db(ctx), &ctx->device, b.src.hash, &b.cls, &have)) {
    clattn__config_to_public(&have, &out->best);
    out->kept = 1, todo = 0;
  }
  cl_int err = CL_SUCCESS;
  if (todo) { /* a private queue: profiling on, whatever the caller's queue has */
    b.queue = clCreateCommandQueue(ctx->cl, ctx->device_id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clCreateCommandQueue (tuning)");
  }
  if (todo && st == CLATTN_OK) st = setup(&b);
  if (todo && st == CLATTN_OK) st = search(&b, opt, out);
  if (out && st != CLATTN_ERR_INVALID_ARGUMENT) out->elapsed_s = now_s() - b.t0;
  if (b.queue) {
    clFinish(b.queue);
    clReleaseCommandQueue(b.queue);
  }
  teardown(&b);
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

const char *clattn_context_tuning_db(const clattn_context *ctx) {
  return ctx && ctx->tuning_db ? ctx->tuning_db : "";
}
