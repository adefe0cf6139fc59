/* `clattn tune`: find and store the fastest tiles per problem class. */
#include "args.h"
#include "commands.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void tune_usage(FILE *f) {
  fprintf(f, "usage: clattn tune [options]\n"
             "  --head-dims LIST   head dims to tune (64,128)\n"
             "  --causal-list LIST 0,1 for non-causal and causal (0,1)\n"
             "  --seqlens LIST     sequence lengths; each falls in a bucket (1024)\n"
             "  --batch B (1)  --heads H (8)  --head-dim-v D (head dim)\n"
             "  --dtype f32|f16|bf16  storage of the classes (f32)\n"
             "  --budget SECONDS   bound of the whole run, split over the classes (120)\n"
             "  --max-candidates N per class (no limit)\n"
             "  --db PATH          tuning database (default: the context's, see README)\n"
             "  --device SPEC      like CLATTN_DEVICE\n"
             "  --backward         tune clattn_backward's fused kernels (backward_rows blocks)\n"
             "                     instead of the forward's\n"
             "  --kv-cache contiguous|paged  tune the decode kernels of calls over such a KV\n"
             "                     cache: --seqlens are its contexts, --seqlen-q R the query\n"
             "                     rows per sequence (1), --heads-kv its heads (--heads),\n"
             "                     --page-size P (16), --cache-dtype f32|f16|bf16|i8 (--dtype's)\n"
             "  --dry-run          measure, write nothing\n"
             "  --force            tune classes the database already has for this device (by\n"
             "                     default a rerun skips them, so an interrupted run resumes)\n"
             "  --json             machine-readable results on stdout\n"
             "  --quiet            no progress bar\n"
             "  --verbose          a line per candidate on stderr: config, local and private\n"
             "                     memory (spills), time or why it was disqualified\n"
             "exit codes: 0 every class tuned, 1 a class had no correct candidate, 2 usage error,\n"
             "            3 a clattn error (device, database not writable); the worst over the\n"
             "            classes, each failed class listed on stderr at the end\n");
}

typedef struct {
  int quiet, verbose;
  unsigned cls, classes;
} progress_state;

static void config_text(const clattn_config *c, char *out, size_t len) {
  if (!strncmp(c->kernel, "backward_", 9))
    snprintf(out, len, "%s BQ=%u BKV=%u", c->kernel, c->block_q, c->block_kv);
  else if (!strcmp(c->kernel, "forward_tiles"))
    snprintf(out, len, "tiles BQ=%u BKV=%u TX=%u RM=%u pad=%u vec=%u", c->block_q, c->block_kv,
             c->threads_per_row, c->rows_per_item, c->pad, c->vector_width);
  else if (!strcmp(c->kernel, "decode"))
    snprintf(out, len, "decode BQ=%u BKV=%u TPR=%u RM=%u stage=%u vec=%u", c->block_q, c->block_kv,
             c->threads_per_row, c->rows_per_item, c->stage_kv, c->vector_width);
  else /* forward_rows, forward_mma, forward_mma_half: by name, less "forward_" */
    snprintf(out, len, "%s BQ=%u BKV=%u TPR=%u stage=%u pad=%u vec=%u",
             c->kernel + (strncmp(c->kernel, "forward_", 8) ? 0 : 8), c->block_q, c->block_kv,
             c->threads_per_row, c->stage_kv, c->pad, c->vector_width);
}

static void on_progress(void *user, const clattn_tune_progress *p) {
  const progress_state *ps = user;
  if (ps->verbose) { /* one line per candidate: private memory makes spilling configs visible */
    char cfg[80];
    config_text(&p->candidate, cfg, sizeof cfg);
    if (p->candidate_ms >= 0)
      fprintf(stderr, "\r%-44s local %6.1f KiB  private %5zu B  %9.3f ms\n", cfg,
              p->candidate_local_mem / 1024.0, p->candidate_private_mem, p->candidate_ms);
    else
      fprintf(stderr, "\r%-44s local %6.1f KiB  private %5zu B  %s\n", cfg,
              p->candidate_local_mem / 1024.0, p->candidate_private_mem, p->note);
  }
  if (ps->quiet) return;
  char best[96] = "none yet";
  if (p->best_ms >= 0) {
    char cfg[80];
    config_text(&p->best, cfg, sizeof cfg);
    snprintf(best, sizeof best, "%.3f ms (%s)", p->best_ms, cfg);
  }
  unsigned width = 20, filled = p->planned ? width * p->tried / p->planned : 0;
  char bar[32];
  for (unsigned i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
  bar[width] = 0;
  double eta = p->budget_s - p->elapsed_s;
  fprintf(stderr, "\r[class %u/%u] [%s] %u/%u  best %s  ETA %.0fs   ", ps->cls, ps->classes, bar,
          p->tried, p->planned, best, eta > 0 ? eta : 0);
  fflush(stderr);
}

enum {
  OPT_HEAD_DIMS = OPT_COMMAND,
  OPT_CAUSAL_LIST,
  OPT_SEQLENS,
  OPT_MAX_CANDIDATES,
  OPT_BUDGET,
  OPT_DB,
  OPT_DRY_RUN,
  OPT_BACKWARD,
  OPT_JSON,
  OPT_QUIET,
  OPT_FORCE,
  OPT_VERBOSE,
  OPT_KV_CACHE,
  OPT_PAGE_SIZE,
  OPT_CACHE_DTYPE,
  OPT_ROWS,
  OPT_HEADS_KV_
};
static const struct option tune_options[] = {
    {"head-dims", required_argument, NULL, OPT_HEAD_DIMS},
    {"kv-cache", required_argument, NULL, OPT_KV_CACHE},
    {"page-size", required_argument, NULL, OPT_PAGE_SIZE},
    {"cache-dtype", required_argument, NULL, OPT_CACHE_DTYPE},
    {"seqlen-q", required_argument, NULL, OPT_ROWS},
    {"heads-kv", required_argument, NULL, OPT_HEADS_KV_},
    {"causal-list", required_argument, NULL, OPT_CAUSAL_LIST},
    {"seqlens", required_argument, NULL, OPT_SEQLENS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"head-dim-v", required_argument, NULL, OPT_HEAD_DIM_V},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"max-candidates", required_argument, NULL, OPT_MAX_CANDIDATES},
    {"budget", required_argument, NULL, OPT_BUDGET},
    {"db", required_argument, NULL, OPT_DB},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"backward", no_argument, NULL, OPT_BACKWARD},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"force", no_argument, NULL, OPT_FORCE},
    {"verbose", no_argument, NULL, OPT_VERBOSE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};
static const size_t def_dims[] = {64, 128}, def_causal[] = {0, 1}, def_seqs[] = {1024};
static const char *const kv_kinds[] = {"contiguous", "paged"}, *const kv_types[] = {"f32", "f16",
                                                                                    "bf16", "i8"};

typedef struct {
  size_list dims, causal, seqs;
  size_t batch, heads, dv, max_cand;
  double budget;
  const char *db;
  int json, force;
  clattn_dtype dtype; /* --dtype: every class's storage */
  /* --kv-cache (1 contiguous, 2 paged): the decode classes of such a cache; like's dtype (-1:
   * --dtype's) and page size; rows, heads_kv of the problem. */
  int kv, cache_dtype;
  size_t page_size, rows, heads_kv;
  clattn_kv_cache like;
} tune_opts;

/* 0: tune; 1: --help was printed; -1: a usage error (a message was printed). */
static int parse(int argc, char **argv, tune_opts *o, clattn_tune_options *opt,
                 progress_state *ps) {
  args a;
  args_init(&a, "tune", argc, argv, tune_options);
  int id, state = 0, k;
  while (!state && (id = args_next(&a)) != ARGS_END) {
    int ok = 1;
    switch (id) {
    case ARGS_BAD:
      ok = 0;
      break;
    case 'h':
      tune_usage(stdout);
      state = 1;
      break;
    case OPT_KV_CACHE:
      if ((ok = args_choice(&a, kv_kinds, 2, &k))) o->kv = 1 + k;
      break;
    case OPT_PAGE_SIZE:
      ok = args_size(&a, 1, 256, &o->page_size);
      break;
    case OPT_CACHE_DTYPE:
      ok = args_choice(&a, kv_types, 4, &o->cache_dtype);
      break;
    case OPT_ROWS:
      ok = args_size(&a, 1, INT32_MAX, &o->rows);
      break;
    case OPT_HEADS_KV_:
      ok = args_size(&a, 1, SIZE_MAX, &o->heads_kv);
      break;
    case OPT_HEAD_DIMS:
      ok = args_size_list(&a, 1, SIZE_MAX, &o->dims);
      break;
    case OPT_CAUSAL_LIST:
      ok = args_size_list(&a, 0, 1, &o->causal);
      break;
    case OPT_SEQLENS:
      ok = args_size_list(&a, 1, SIZE_MAX, &o->seqs);
      break;
    case OPT_BATCH:
      ok = args_size(&a, 1, SIZE_MAX, &o->batch);
      break;
    case OPT_HEADS:
      ok = args_size(&a, 1, SIZE_MAX, &o->heads);
      break;
    case OPT_HEAD_DIM_V:
      ok = args_size(&a, 0, SIZE_MAX, &o->dv);
      break;
    case OPT_MAX_CANDIDATES:
      ok = args_size(&a, 0, UINT_MAX, &o->max_cand);
      break;
    case OPT_DTYPE:
      if ((ok = args_choice(&a, args_dtypes, 3, &k))) o->dtype = (clattn_dtype)k;
      break;
    case OPT_DEVICE:
      setenv("CLATTN_DEVICE", a.val, 1);
      break;
    case OPT_DB:
      o->db = a.val;
      break;
    case OPT_BUDGET:
      if ((ok = args_number(&a, &o->budget)) && !(o->budget > 0))
        ok = args_bad(&a, "out of range (seconds, more than 0)");
      break;
    case OPT_DRY_RUN:
      opt->dry_run = 1;
      break;
    case OPT_BACKWARD:
      opt->backward = 1;
      break;
    case OPT_JSON:
      o->json = 1;
      break;
    case OPT_QUIET:
      ps->quiet = 1;
      break;
    case OPT_FORCE:
      o->force = 1;
      break;
    case OPT_VERBOSE:
      ps->verbose = 1;
      break;
    default:
      ok = 0;
      break;
    }
    if (!ok) state = -1;
  }
  return state;
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++)
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  putchar('"');
}

/* The classes that failed, for the summary at the end (a class's own message is printed when
 * it fails); grows as needed. */
typedef struct {
  char *text;
  size_t len, count;
} failures;

static void failures_add(failures *f, const char *cls, const char *why) {
  size_t add = strlen(cls) + strlen(why) + 8;
  char *t = realloc(f->text, f->len + add);
  if (t) {
    f->text = t;
    f->len += (size_t)snprintf(t + f->len, add, "  %s: %s\n", cls, why);
  }
  f->count++;
}

/* The exit status of the whole run: an error outranks a class without a correct candidate. */
static int worse(int rc, int other) {
  return rc == CLI_ERROR || other == CLI_ERROR ? CLI_ERROR : rc > other ? rc : other;
}

/* One tuned class: a JSON object or a table row (after the header when header is set); error:
 * the result is valid but was not saved, and why. */
static void print_result(const tune_opts *o, const clattn_tune_options *opt,
                         const clattn_tune_result *r, size_t d, int causal, size_t n, int first,
                         int header, const char *error) {
  char best[80];
  config_text(&r->best, best, sizeof best);
  double speedup = r->heuristic_ms > 0 && r->best_ms > 0 ? r->heuristic_ms / r->best_ms : 0;
  if (o->json) {
    printf("%s\n {\"pass\": \"%s\", \"dtype\": \"%s\", \"head_dim\": %zu, \"causal\": %s, "
           "\"seqlen\": %zu, "
           "\"seqlen_bucket\": %u, "
           "\"heuristic_ms\": %.6g, \"tuned_ms\": %.6g, \"speedup\": %.4g, "
           "\"config\": {\"kernel\": \"%s\", \"block_q\": %u, \"block_kv\": %u, "
           "\"threads_per_row\": %u, \"rows_per_item\": %u, \"stage_kv\": %u, \"pad\": %u}, "
           "\"local_mem\": %zu, \"local_mem_available\": "
           "%zu, \"private_mem\": %zu, \"margin\": %.4g, \"tried\": %u, "
           "\"disqualified\": %u, \"pruned\": %u, \"elapsed_s\": %.3g, \"saved\": %s",
           first ? "" : ",", opt->backward ? "backward" : "forward", args_dtypes[o->dtype], d,
           causal ? "true" : "false", n, r->seqlen_bucket, r->heuristic_ms, r->best_ms, speedup,
           r->best.kernel, r->best.block_q, r->best.block_kv, r->best.threads_per_row,
           r->best.rows_per_item, r->best.stage_kv, r->best.pad, r->local_mem_bytes,
           r->local_mem_available, r->private_mem_bytes, r->margin, r->tried, r->disqualified,
           r->pruned, r->elapsed_s, r->saved ? "true" : "false");
    if (error) printf(", \"error\": "), json_string(error);
    printf("}");
  } else {
    if (header)
      printf("%-32s %10s %10s %8s  %-34s %-16s %8s %s\n", "class", "heuristic", "tuned", "speedup",
             "config", "local memory", "margin", "tried/disq./pruned");
    char cls[64], mem[32];
    snprintf(cls, sizeof cls, "d=%zu %s N=%zu (bucket %u)%s%s%s", d, causal ? "causal" : "full", n,
             r->seqlen_bucket, o->dtype ? " " : "", o->dtype ? args_dtypes[o->dtype] : "",
             opt->backward ? " bwd" : "");
    snprintf(mem, sizeof mem, "%.1f/%.0f KiB", r->local_mem_bytes / 1024.0,
             r->local_mem_available / 1024.0);
    char heur_ms[24] = "n/a", gain[16] = "n/a"; /* disqualified or not reached */
    if (r->heuristic_ms > 0) {
      snprintf(heur_ms, sizeof heur_ms, "%.3fms", r->heuristic_ms);
      snprintf(gain, sizeof gain, "%.2fx", speedup);
    }
    printf("%-32s %10s %8.3fms %8s  %-34s %-16s %7.1f%% %u/%u/%u\n", cls, heur_ms, r->best_ms, gain,
           best, mem, 100 * r->margin, r->tried, r->disqualified, r->pruned);
    if (r->report[0]) printf("  disqualified:\n%.*s", (int)sizeof r->report, r->report);
  }
}

/* The state of a run over the classes. */
typedef struct {
  clattn_context *ctx;
  const tune_opts *o;
  clattn_tune_options *opt;
  progress_state *ps;
  double started;
  int first, header; /* no JSON object yet; the table's header not printed yet */
  failures failed;
} tune_run;

/* Tunes one class and prints its result or failure; returns its exit status. */
static int tune_class(tune_run *t, size_t d, int causal, size_t n) {
  const tune_opts *o = t->o;
  clattn_tune_options *opt = t->opt;
  int rc = CLI_OK;
  t->ps->cls++;
  clattn_problem p = {0};
  p.batch = o->batch, p.heads_q = o->heads, p.seqlen_q = p.seqlen_kv = n;
  if (o->kv) p.seqlen_q = o->rows, p.heads_kv = o->heads_kv;
  p.head_dim = d, p.head_dim_v = o->dv, p.flags = causal ? CLATTN_CAUSAL : 0;
  p.dtype = o->dtype;
  char cls[80];
  snprintf(cls, sizeof cls, "d=%zu %s N=%zu%s%s%s%s", d, causal ? "causal" : "full", n,
           o->dtype ? " " : "", o->dtype ? args_dtypes[o->dtype] : "",
           opt->backward ? " backward" : "", o->kv ? " kv-cache" : "");
  clattn_tune_result r;
  memset(&r, 0, sizeof r);
  double left = o->budget - (now_s() - t->started);
  opt->budget_seconds = left / (t->ps->classes - t->ps->cls + 1);
  if (opt->budget_seconds < 1) opt->budget_seconds = 1;
  opt->keep_tuned = !o->force; /* a rerun after an interruption resumes: tuned classes stay */
  clattn_status st = clattn_tune(t->ctx, &p, opt, &r);
  if (!t->ps->quiet) fprintf(stderr, "\r%120s\r", "");
  if (st == CLATTN_OK && r.kept) {
    fprintf(stderr, "clattn tune: %s already tuned (--force tunes it again)\n", cls);
    return rc;
  }
  char why[600] = "";
  if (st != CLATTN_OK) {
    snprintf(why, sizeof why, "%s", clattn_last_error(t->ctx));
    fprintf(stderr, "clattn tune: %s: %s\n", cls, why);
    failures_add(&t->failed, cls, why);
    rc = st == CLATTN_ERR_UNSUPPORTED ? CLI_CHECK_FAILED : CLI_ERROR;
  }
  /* Only a database that could not be written leaves a result (still used in this context):
   * it is shown with the error; every other failure (an unreadable kernel file is IO too)
   * leaves none to read, and the result stays zeroed, without a kernel. */
  if (st == CLATTN_OK || (st == CLATTN_ERR_IO && r.best.kernel[0])) {
    print_result(o, opt, &r, d, causal, n, t->first, t->header, st ? why : NULL);
    t->first = 0, t->header = 0;
  } else if (o->json) {
    printf("%s\n {\"pass\": \"%s\", \"head_dim\": %zu, \"causal\": %s, \"seqlen\": %zu, "
           "\"error\": ",
           t->first ? "" : ",", opt->backward ? "backward" : "forward", d,
           causal ? "true" : "false", n);
    json_string(why);
    printf("}");
    t->first = 0;
  }
  return rc;
}

int cmd_tune(int argc, char **argv) {
  tune_opts o = {0};
  o.batch = 1, o.heads = 8, o.budget = 120, o.cache_dtype = -1, o.rows = 1;
  clattn_tune_options opt = {0};
  progress_state ps = {0};
  int rc = CLI_OK;
  if (!size_list_set(&o.dims, def_dims, 2) || !size_list_set(&o.causal, def_causal, 2) ||
      !size_list_set(&o.seqs, def_seqs, 1)) {
    fprintf(stderr, "clattn tune: out of memory\n");
    rc = CLI_ERROR;
  }
  int parsed = rc == CLI_OK ? parse(argc, argv, &o, &opt, &ps) : 0;
  if (!parsed && !o.kv && (o.page_size || o.cache_dtype >= 0 || o.rows != 1 || o.heads_kv)) {
    fprintf(stderr, "clattn tune: --page-size, --cache-dtype, --seqlen-q and --heads-kv go with "
                    "--kv-cache\n");
    parsed = -1;
  }
  if (!parsed && o.kv == 1 && o.page_size) {
    fprintf(stderr, "clattn tune: --page-size goes with --kv-cache paged\n");
    parsed = -1;
  }
  if (!parsed && o.kv) { /* the cache the decode classes are tuned for (its kind only) */
    o.like.dtype = o.cache_dtype < 0 ? o.dtype : (clattn_dtype)o.cache_dtype;
    o.like.page_size = o.kv == 2 ? (o.page_size ? o.page_size : 16) : 0;
    opt.kv_cache = &o.like;
  }
  if (parsed) rc = parsed > 0 ? CLI_OK : CLI_USAGE;
  clattn_options copt = {0};
  copt.tuning_db = o.db;
  tune_run t = {NULL, &o, &opt, &ps, now_s(), 1, 1, {NULL, 0, 0}};
  if (rc == CLI_OK && !parsed && clattn_context_create_default(&copt, &t.ctx) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(NULL));
    rc = CLI_ERROR;
  }
  if (t.ctx) {
    ps.classes = (unsigned)(o.dims.n * o.causal.n * o.seqs.n);
    opt.max_candidates = (unsigned)o.max_cand;
    opt.progress = on_progress, opt.user = &ps;
    if (!o.json) {
      printf("device: %s\n", clattn_context_device_summary(t.ctx));
      printf("database: %s%s\n", clattn_context_tuning_db(t.ctx), opt.dry_run ? " (dry run)" : "");
      printf("budget: %.0f s for %u classes\n\n", o.budget, ps.classes);
    } else {
      printf("[");
    }
    for (size_t a = 0; a < o.dims.n; a++)
      for (size_t c = 0; c < o.causal.n; c++)
        for (size_t s = 0; s < o.seqs.n; s++)
          rc = worse(rc, tune_class(&t, o.dims.v[a], o.causal.v[c] != 0, o.seqs.v[s]));
    if (o.json) printf("\n]\n");
    if (t.failed.count)
      fprintf(stderr, "clattn tune: %zu of %u classes failed:\n%s", t.failed.count, ps.classes,
              t.failed.text ? t.failed.text : "");
    const char *diag = clattn_context_diagnostics(t.ctx);
    if (diag[0]) fprintf(stderr, "warnings:\n%s", diag);
  }
  free(t.failed.text);
  clattn_context_destroy(t.ctx);
  size_list_free(&o.dims), size_list_free(&o.causal), size_list_free(&o.seqs);
  return rc;
}
