/* `clattn tune`: find and store the fastest tiles per problem class. */
#include "args.h"
#include "commands.h"

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
             "  --batch B (1)  --heads H (8)  --head-dim-v D (head dim)  --dtype f32\n"
             "  --budget SECONDS   bound of the whole run, split over the classes (120)\n"
             "  --max-candidates N per class (no limit)\n"
             "  --db PATH          tuning database (default: the context's, see README)\n"
             "  --device SPEC      like CLATTN_DEVICE\n"
             "  --backward         tune clattn_backward's fused kernels (backward_rows blocks)\n"
             "                     instead of the forward's\n"
             "  --dry-run          measure, write nothing\n"
             "  --force            tune classes the database already has for this device (by\n"
             "                     default a rerun skips them, so an interrupted run resumes)\n"
             "  --json             machine-readable results on stdout\n"
             "  --quiet            no progress bar\n"
             "  --verbose          a line per candidate on stderr: config, local and private\n"
             "                     memory (spills), time or why it was disqualified\n"
             "exit codes: 0 every class tuned, 1 a class had no correct candidate, 2 usage error,\n"
             "            3 a clattn error (device, database not writable)\n");
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
  else
    snprintf(out, len, "rows BQ=%u BKV=%u TPR=%u stage=%u pad=%u vec=%u", c->block_q, c->block_kv,
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

int cmd_tune(int argc, char **argv) {
  size_t dims[8] = {64, 128}, nd = 2, causal[2] = {0, 1}, nc = 2, seqs[8] = {1024}, ns = 1;
  size_t batch = 1, heads = 8, dv = 0, max_cand = 0;
  double budget = 120;
  const char *db = NULL;
  int json = 0, force = 0;
  clattn_tune_options opt = {0};
  progress_state ps = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "--head-dims"))
      ok = val && (nd = parse_size_list(val, dims, 8)), i++;
    else if (!strcmp(a, "--causal-list"))
      ok = val && (nc = parse_size_list(val, causal, 2)), i++;
    else if (!strcmp(a, "--seqlens"))
      ok = val && (ns = parse_size_list(val, seqs, 8)), i++;
    else if (!strcmp(a, "--batch"))
      ok = val && parse_size(val, &batch), i++;
    else if (!strcmp(a, "--heads"))
      ok = val && parse_size(val, &heads), i++;
    else if (!strcmp(a, "--head-dim-v"))
      ok = val && parse_size(val, &dv), i++;
    else if (!strcmp(a, "--max-candidates"))
      ok = val && parse_size(val, &max_cand), i++;
    else if (!strcmp(a, "--budget"))
      ok = val && (budget = atof(val)) > 0, i++;
    else if (!strcmp(a, "--db"))
      ok = (db = val) != NULL, i++;
    else if (!strcmp(a, "--device"))
      ok = val && !setenv("CLATTN_DEVICE", val, 1), i++;
    else if (!strcmp(a, "--dtype"))
      ok = val && !strcmp(val, "f32"), i++;
    else if (!strcmp(a, "--dry-run"))
      opt.dry_run = 1;
    else if (!strcmp(a, "--backward"))
      opt.backward = 1;
    else if (!strcmp(a, "--json"))
      json = 1;
    else if (!strcmp(a, "--quiet"))
      ps.quiet = 1;
    else if (!strcmp(a, "--force"))
      force = 1;
    else if (!strcmp(a, "--verbose"))
      ps.verbose = 1;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      tune_usage(stdout);
      return CLI_OK;
    } else {
      fprintf(stderr, "clattn tune: unknown option '%s'\n", a);
      tune_usage(stderr);
      return CLI_USAGE;
    }
    if (!ok) {
      fprintf(stderr, "clattn tune: %s needs a valid value\n", a);
      return CLI_USAGE;
    }
  }
  for (size_t c = 0; c < nc; c++)
    if (causal[c] > 1) {
      fprintf(stderr, "clattn tune: --causal-list takes 0 and 1\n");
      return CLI_USAGE;
    }
  clattn_options copt = {0};
  copt.tuning_db = db;
  clattn_context *ctx = NULL;
  if (clattn_context_create_default(&copt, &ctx) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(NULL));
    return CLI_ERROR;
  }
  ps.classes = (unsigned)(nd * nc * ns);
  double started = now_s();
  opt.max_candidates = (unsigned)max_cand;
  opt.progress = on_progress, opt.user = &ps;
  if (!json) {
    printf("device: %s\n", clattn_context_device_summary(ctx));
    printf("database: %s%s\n", clattn_context_tuning_db(ctx), opt.dry_run ? " (dry run)" : "");
    printf("budget: %.0f s for %u classes\n\n", budget, ps.classes);
  } else {
    printf("[");
  }
  int rc = CLI_OK, first = 1;
  for (size_t a = 0; a < nd; a++)
    for (size_t c = 0; c < nc; c++)
      for (size_t s = 0; s < ns; s++) {
        ps.cls++;
        clattn_problem p = {0};
        p.batch = batch, p.heads_q = heads, p.seqlen_q = p.seqlen_kv = seqs[s];
        p.head_dim = dims[a], p.head_dim_v = dv, p.flags = causal[c] ? CLATTN_CAUSAL : 0;
        clattn_plan_info have;
        if (!force && clattn_explain(ctx, &p, &have) == CLATTN_OK &&
            !strcmp(opt.backward ? have.backward_origin : have.origin, "tuned")) {
          /* A rerun after an interruption resumes: finished classes are kept. */
          fprintf(stderr, "clattn tune: d=%zu %s N=%zu%s already tuned (--force tunes it again)\n",
                  dims[a], causal[c] ? "causal" : "full", seqs[s], opt.backward ? " backward" : "");
          continue;
        }
        clattn_tune_result r;
        double left = budget - (now_s() - started);
        opt.budget_seconds = left / (ps.classes - ps.cls + 1);
        if (opt.budget_seconds < 1) opt.budget_seconds = 1;
        clattn_status st = clattn_tune(ctx, &p, &opt, &r);
        if (!ps.quiet) fprintf(stderr, "\r%120s\r", "");
        char best[80], heur[80];
        config_text(&r.best, best, sizeof best);
        config_text(&r.heuristic, heur, sizeof heur);
        if (st != CLATTN_OK && st != CLATTN_ERR_IO) {
          fprintf(stderr, "clattn tune: d=%zu causal=%zu seqlen=%zu: %s\n", dims[a], causal[c],
                  seqs[s], clattn_last_error(ctx));
          rc = st == CLATTN_ERR_UNSUPPORTED ? CLI_CHECK_FAILED : CLI_ERROR;
          continue;
        }
        if (st == CLATTN_ERR_IO) {
          fprintf(stderr, "clattn tune: %s\n", clattn_last_error(ctx));
          rc = CLI_ERROR;
        }
        double speedup = r.heuristic_ms > 0 ? r.heuristic_ms / r.best_ms : 0;
        if (json) {
          printf("%s\n {\"pass\": \"%s\", \"head_dim\": %zu, \"causal\": %s, \"seqlen\": %zu, "
                 "\"seqlen_bucket\": %u, "
                 "\"heuristic_ms\": %.6g, \"tuned_ms\": %.6g, \"speedup\": %.4g, "
                 "\"config\": {\"kernel\": \"%s\", \"block_q\": %u, \"block_kv\": %u, "
                 "\"threads_per_row\": %u, \"rows_per_item\": %u, \"stage_kv\": %u, \"pad\": %u}, "
                 "\"local_mem\": %zu, \"local_mem_available\": "
                 "%zu, \"private_mem\": %zu, \"margin\": %.4g, \"tried\": %u, "
                 "\"disqualified\": %u, \"pruned\": %u, \"elapsed_s\": %.3g, \"saved\": %s}",
                 first ? "" : ",", opt.backward ? "backward" : "forward", dims[a],
                 causal[c] ? "true" : "false", seqs[s], r.seqlen_bucket, r.heuristic_ms, r.best_ms,
                 speedup, r.best.kernel, r.best.block_q, r.best.block_kv, r.best.threads_per_row,
                 r.best.rows_per_item, r.best.stage_kv, r.best.pad, r.local_mem_bytes,
                 r.local_mem_available, r.private_mem_bytes, r.margin, r.tried, r.disqualified,
                 r.pruned, r.elapsed_s, r.saved ? "true" : "false");
        } else {
          if (first)
            printf("%-32s %10s %10s %8s  %-34s %-16s %8s %s\n", "class", "heuristic", "tuned",
                   "speedup", "config", "local memory", "margin", "tried/disq./pruned");
          char cls[48], mem[32];
          snprintf(cls, sizeof cls, "d=%zu %s N=%zu (bucket %u)%s", dims[a],
                   causal[c] ? "causal" : "full", seqs[s], r.seqlen_bucket,
                   opt.backward ? " bwd" : "");
          snprintf(mem, sizeof mem, "%.1f/%.0f KiB", r.local_mem_bytes / 1024.0,
                   r.local_mem_available / 1024.0);
          char heur_ms[24] = "n/a", gain[16] = "n/a"; /* disqualified or not reached */
          if (r.heuristic_ms > 0) {
            snprintf(heur_ms, sizeof heur_ms, "%.3fms", r.heuristic_ms);
            snprintf(gain, sizeof gain, "%.2fx", speedup);
          }
          printf("%-32s %10s %8.3fms %8s  %-34s %-16s %7.1f%% %u/%u/%u\n", cls, heur_ms, r.best_ms,
                 gain, best, mem, 100 * r.margin, r.tried, r.disqualified, r.pruned);
          if (r.report[0]) printf("  disqualified:\n%s", r.report);
        }
        first = 0;
      }
  if (json) printf("\n]\n");
  const char *diag = clattn_context_diagnostics(ctx);
  if (diag[0]) fprintf(stderr, "warnings:\n%s", diag);
  clattn_context_destroy(ctx);
  return rc;
}
