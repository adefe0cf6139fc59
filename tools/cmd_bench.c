/* `clattn bench`: fused vs standard attention (and, on CPUs, a host OpenBLAS implementation)
 * over a sweep of shapes, timed in turns in one run on one device. */
#include "args.h"
#include "bench.h"
#include "bench_host.h"
#include "check.h"
#include "commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 32

typedef struct {
  size_t seqlens[MAX_LIST], dims[MAX_LIST], batches[MAX_LIST], heads[MAX_LIST];
  size_t nseq, ndim, nbatch, nheads;
  int causal[2], ncausal;
  size_t tokens, hidden; /* when set: batch = max(1, tokens / N), heads = hidden / d */
  int warmup, repeat;
  int want[COLS];
  int csv, json, bandwidth, backward, force;
  clattn_config forced;
  const char *plot;
} opts;

static void usage(FILE *f) {
  fprintf(f, "usage: clattn bench [options]\n"
             "  --seqlen LIST      sequence lengths (512,1024,2048,4096)\n"
             "  --head-dim LIST    (64)\n"
             "  --causal off|on|both (off)\n"
             "  --batch LIST (1)  --heads LIST (8)\n"
             "  --tokens T --hidden W  batch = max(1, T/N) and heads = W/d per row, as\n"
             "                     FlashAttention's and ../shared/peers' benchmarks (16384, 2048)\n"
             "  --warmup W (2)  --repeat R (10)\n"
             "  --columns LIST     of fused,standard,host (all; host: CPUs, OpenBLAS)\n"
             "  --csv | --json     machine-readable output instead of the table\n"
             "  --plot FILE.png    time and modelled traffic against N (gnuplot)\n"
             "  --config K/BQ/BKV/TPR/RM/STAGE/PAD[/VEC]  force the fused config (as clattn run)\n"
             "  --backward         time forward + backward (FLOPs 3.5x the forward's; the host\n"
             "                     column and the traffic columns stay forward-only)\n"
             "  --bandwidth        also check the traffic model: a copy kernel's bandwidth beside\n"
             "                     the standard path's steps and the fused kernel\n"
             "  --device SPEC      like CLATTN_DEVICE\n");
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int parse_opts(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  size_t def_seq[] = {512, 1024, 2048, 4096};
  memcpy(o->seqlens, def_seq, sizeof def_seq), o->nseq = 4;
  o->dims[0] = 64, o->ndim = 1, o->batches[0] = 1, o->nbatch = 1, o->heads[0] = 8, o->nheads = 1;
  o->causal[0] = 0, o->ncausal = 1, o->warmup = 2, o->repeat = 10;
  for (int c = 0; c < COLS; c++) o->want[c] = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    size_t n;
    struct {
      const char *flag;
      size_t *list, *count;
    } lists[] = {{"--seqlen", o->seqlens, &o->nseq},
                 {"--head-dim", o->dims, &o->ndim},
                 {"--batch", o->batches, &o->nbatch},
                 {"--heads", o->heads, &o->nheads}};
    int matched = 0;
    for (size_t j = 0; j < 4 && !matched; j++)
      if (!strcmp(a, lists[j].flag)) {
        matched = 1;
        if (!val || !(*lists[j].count = parse_size_list(val, lists[j].list, MAX_LIST))) goto bad;
        for (size_t k = 0; k < *lists[j].count; k++)
          if (lists[j].list[k] == 0) goto bad;
        i++;
      }
    if (matched) continue;
    if (!strcmp(a, "--causal")) {
      if (!val) goto bad;
      if (!strcmp(val, "off"))
        o->causal[0] = 0, o->ncausal = 1;
      else if (!strcmp(val, "on"))
        o->causal[0] = 1, o->ncausal = 1;
      else if (!strcmp(val, "both"))
        o->causal[0] = 0, o->causal[1] = 1, o->ncausal = 2;
      else
        goto bad;
      i++;
    } else if (!strcmp(a, "--tokens") || !strcmp(a, "--hidden")) {
      if (!val || !parse_size(val, &n) || n == 0) goto bad;
      *(a[2] == 't' ? &o->tokens : &o->hidden) = n, i++;
    } else if (!strcmp(a, "--warmup") || !strcmp(a, "--repeat")) {
      if (!val || !parse_size(val, &n) || n > 10000 || (a[2] == 'r' && n == 0)) goto bad;
      *(a[2] == 'w' ? &o->warmup : &o->repeat) = (int)n, i++;
    } else if (!strcmp(a, "--columns")) {
      if (!val) goto bad;
      for (int c = 0; c < COLS; c++) o->want[c] = strstr(val, bench_col_names[c]) != NULL;
      if (!o->want[0] && !o->want[1] && !o->want[2]) goto bad;
      i++;
    } else if (!strcmp(a, "--csv")) {
      o->csv = 1;
    } else if (!strcmp(a, "--json")) {
      o->json = 1;
    } else if (!strcmp(a, "--config")) {
      if (!parse_config(val, &o->forced)) goto bad;
      o->force = 1, i++;
    } else if (!strcmp(a, "--backward")) {
      o->backward = 1;
    } else if (!strcmp(a, "--bandwidth")) {
      o->bandwidth = 1;
    } else if (!strcmp(a, "--plot")) {
      if (!val) goto bad;
      o->plot = val, i++;
    } else if (!strcmp(a, "--device")) {
      if (!val) goto bad;
      setenv("CLATTN_DEVICE", val, 1), i++;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 1;
    } else {
      fprintf(stderr, "clattn bench: unknown option '%s'\n", a);
      usage(stderr);
      return -1;
    }
    continue;
  bad:
    fprintf(stderr, "clattn bench: %s needs a valid value\n", a);
    return -1;
  }
  if ((o->tokens != 0) != (o->hidden != 0)) {
    fprintf(stderr, "clattn bench: --tokens and --hidden go together\n");
    return -1;
  }
  return 0;
}

/* Device buffers and host data of one row. */
typedef struct {
  float *hq, *hk, *hv, *ho, *hs;
  cl_mem q, k, v, o[2], lse, g, dq, dk, dv; /* the last five with --backward */
  clattn_tensor tq, tk, tv, to[2], tg, tdq, tdk, tdv;
} data;

static void data_free(data *x) {
  free(x->hq), free(x->hk), free(x->hv), free(x->ho), free(x->hs);
  cl_mem m[] = {x->q, x->k, x->v, x->o[0], x->o[1], x->lse, x->g, x->dq, x->dk, x->dv};
  for (int i = 0; i < 10; i++)
    if (m[i]) clReleaseMemObject(m[i]);
}

static cl_mem upload(clattn_context *ctx, const float *host, size_t n, cl_int *err) {
  if (*err != CL_SUCCESS) return NULL;
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, n * sizeof(float),
                            NULL, err);
  if (*err == CL_SUCCESS && host)
    *err = clEnqueueWriteBuffer(clattn_context_queue(ctx), m, CL_TRUE, 0, n * sizeof(float), host,
                                0, NULL, NULL);
  return m;
}

static int data_make(clattn_context *ctx, const clattn_problem *p, int host, int backward, data *x,
                     char *why, size_t len) {
  memset(x, 0, sizeof *x);
  size_t n = p->seqlen_q, nq = p->batch * n * p->heads_q * p->head_dim;
  x->hq = malloc(nq * sizeof(float)), x->hk = malloc(nq * sizeof(float));
  x->hv = malloc(nq * sizeof(float));
  if (host) {
    x->ho = malloc(nq * sizeof(float));
    x->hs = malloc(n * n * sizeof(float));
  }
  if (!x->hq || !x->hk || !x->hv || (host && (!x->ho || !x->hs))) {
    snprintf(why, len, "out of host memory");
    return 0;
  }
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  ref_fill_normal(x->hq, nq, &rng);
  ref_fill_normal(x->hk, nq, &rng);
  ref_fill_normal(x->hv, nq, &rng);
  cl_int err = CL_SUCCESS;
  x->q = upload(ctx, x->hq, nq, &err), x->k = upload(ctx, x->hk, nq, &err);
  x->v = upload(ctx, x->hv, nq, &err);
  x->o[0] = upload(ctx, NULL, nq, &err), x->o[1] = upload(ctx, NULL, nq, &err);
  if (backward) {
    x->lse = upload(ctx, NULL, p->batch * p->heads_q * n, &err);
    x->g = upload(ctx, x->hv, nq, &err); /* any data will do for dO */
    x->dq = upload(ctx, NULL, nq, &err), x->dk = upload(ctx, NULL, nq, &err);
    x->dv = upload(ctx, NULL, nq, &err);
  }
  if (err != CL_SUCCESS) {
    snprintf(why, len, "cannot allocate the tensors on the device (OpenCL error %d)", err);
    return 0;
  }
  size_t h = p->heads_q, d = p->head_dim;
  x->tq = clattn_bshd(x->q, n, h, d), x->tk = clattn_bshd(x->k, n, h, d);
  x->tv = clattn_bshd(x->v, n, h, d);
  x->to[0] = clattn_bshd(x->o[0], n, h, d), x->to[1] = clattn_bshd(x->o[1], n, h, d);
  x->tg = clattn_bshd(x->g, n, h, d), x->tdq = clattn_bshd(x->dq, n, h, d);
  x->tdk = clattn_bshd(x->dk, n, h, d), x->tdv = clattn_bshd(x->dv, n, h, d);
  return 1;
}

/* Forward (with LSE) then backward, timed from a marker before the forward to the backward's
 * done marker (OpenCL events). */
static double time_fwd_bwd(clattn_context *ctx, const clattn_problem *p, data *x, int c,
                           clattn_status *st) {
  cl_event start = NULL, done = NULL;
  clEnqueueMarkerWithWaitList(clattn_context_queue(ctx), 0, NULL, &start);
  *st = clattn_forward(ctx, p, &x->tq, &x->tk, &x->tv, &x->to[c], x->lse, 0, NULL, NULL);
  if (*st == CLATTN_OK)
    *st = clattn_backward(ctx, p, &x->tq, &x->tk, &x->tv, &x->to[c], &x->tg, x->lse, &x->tdq,
                          &x->tdk, &x->tdv, 0, NULL, &done);
  double ms = -1.0;
  cl_ulong a = 0, b = 0;
  if (*st == CLATTN_OK && clWaitForEvents(1, &done) == CL_SUCCESS &&
      clGetEventProfilingInfo(start, CL_PROFILING_COMMAND_END, sizeof a, &a, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) == CL_SUCCESS)
    ms = b > a ? (b - a) / 1e6 : 0.0;
  if (start) clReleaseEvent(start);
  if (done) clReleaseEvent(done);
  return ms;
}

static void summarize(double *ms, int n, bench_time *t) {
  qsort(ms, n, sizeof *ms, cmp_double);
  t->ran = 1, t->median_ms = ms[n / 2], t->min_ms = ms[0], t->max_ms = ms[n - 1];
}

static double max_diff(clattn_context *ctx, data *x, size_t n) {
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double m = -1.0;
  cl_command_queue q = clattn_context_queue(ctx);
  if (a && b &&
      clEnqueueReadBuffer(q, x->o[0], CL_TRUE, 0, n * sizeof *a, a, 0, NULL, NULL) == CL_SUCCESS &&
      clEnqueueReadBuffer(q, x->o[1], CL_TRUE, 0, n * sizeof *b, b, 0, NULL, NULL) == CL_SUCCESS) {
    m = 0.0;
    for (size_t i = 0; i < n; i++) {
      double e = fabs((double)a[i] - b[i]);
      if (!(e <= m)) m = e;
    }
  }
  free(a), free(b);
  return m;
}

/* Times the columns of one row in turns: fused, standard, host, fused, ... */
static void bench_one(clattn_context *ctx, const opts *o, int host_ok, bench_row *r) {
  clattn_problem p = {0};
  p.batch = r->batch, p.heads_q = r->heads, p.seqlen_q = p.seqlen_kv = r->seqlen;
  p.head_dim = r->head_dim, p.flags = r->causal ? CLATTN_CAUSAL : 0;
  clattn_plan_info info;
  r->max_diff = -1.0;
  /* A forced config that does not fit takes out the fused column only. */
  int fused_ok = !o->force || clattn_override_config(ctx, &p, &o->forced) == CLATTN_OK;
  if (!fused_ok && o->want[COL_FUSED])
    snprintf(r->t[COL_FUSED].why, sizeof r->t[COL_FUSED].why, "%s", clattn_last_error(ctx));
  if (clattn_explain(ctx, &p, &info) != CLATTN_OK) {
    for (int c = 0; c < COLS; c++)
      if (o->want[c]) snprintf(r->t[c].why, sizeof r->t[c].why, "%s", clattn_last_error(ctx));
    return;
  }
  r->backward = o->backward;
  r->flops = info.flops * (o->backward ? 3.5 : 1.0), r->io_bound = info.io_lower_bound_bytes;
  r->fused_bytes = info.fused_read_bytes + info.fused_write_bytes;
  r->standard_bytes = info.standard_read_bytes + info.standard_write_bytes;
  snprintf(r->fused_config, sizeof r->fused_config, "%s %u/%u/%u/%u (%s)", info.kernel,
           info.block_q, info.block_kv, info.threads_per_row, info.rows_per_item, info.origin);
  size_t elems = r->batch * r->seqlen * r->heads * r->head_dim;
  /* Q, K, V, O; with the backward also dO, dQ, dK, dV (and rows of LSE and D). */
  double rows = (double)r->batch * r->heads * r->seqlen * sizeof(float);
  double tensors =
      o->backward ? 8.0 * elems * sizeof(float) + 2 * rows : 4.0 * elems * sizeof(float);
  r->peak_bytes[COL_FUSED] = tensors;
  r->peak_bytes[COL_STANDARD] =
      tensors + (double)(o->backward ? info.standard_backward_workspace_bytes
                                     : info.standard_workspace_bytes);
  r->peak_bytes[COL_HOST] = tensors + (double)r->seqlen * r->seqlen * sizeof(float);
  int run[COLS] = {o->want[0] && fused_ok, o->want[1], o->want[2] && host_ok && !o->backward};
  if (o->want[COL_HOST] && o->backward)
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why, "no host backward");
  if (o->want[COL_HOST] && !host_ok)
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why, "%s",
             bench_host_available() ? "GPU device: host column is for CPUs"
                                    : "built without OpenBLAS");
  /* A standard column that cannot fit fails in its call, whose message names the bytes. */
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (run[COL_HOST] && pages > 0 && r->peak_bytes[COL_HOST] > 0.5 * (double)pages * page) {
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why,
             "needs %.3g B of host memory, more than half of it", r->peak_bytes[COL_HOST]);
    run[COL_HOST] = 0;
  }
  data x;
  char why[200];
  if (!data_make(ctx, &p, run[COL_HOST], o->backward, &x, why, sizeof why)) {
    for (int c = 0; c < COLS; c++)
      if (run[c]) snprintf(r->t[c].why, sizeof r->t[c].why, "%s", why);
    data_free(&x);
    return;
  }
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(clattn_context_queue(ctx), CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  int by_events = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  double *ms[COLS], *steps[3];
  for (int c = 0; c < COLS; c++) ms[c] = calloc(o->repeat, sizeof(double));
  for (int i = 0; i < 3; i++) steps[i] = calloc(o->repeat, sizeof(double));
  int steps_ok = by_events;
  const clattn_algorithm algo[2] = {CLATTN_ALGO_FUSED, CLATTN_ALGO_STANDARD};
  for (int it = 0; it < o->warmup + o->repeat; it++)
    for (int c = 0; c < COLS; c++) {
      if (!run[c]) continue;
      double t;
      if (c == COL_HOST) {
        double t0 = now_ms();
        bench_host_forward(&p, x.hq, x.hk, x.hv, x.ho, x.hs);
        t = now_ms() - t0;
      } else {
        clattn_status st;
        p.algorithm = algo[c];
        t = o->backward
                ? time_fwd_bwd(ctx, &p, &x, c, &st)
                : check_time_forward(ctx, &p, &x.tq, &x.tk, &x.tv, &x.to[c], NULL, by_events, &st);
        if (st != CLATTN_OK) {
          snprintf(r->t[c].why, sizeof r->t[c].why, "%s", clattn_last_error(ctx));
          run[c] = 0;
          continue;
        }
      }
      if (it < o->warmup) continue;
      ms[c][it - o->warmup] = t;
      clattn_standard_profile prof;
      if (c == COL_STANDARD && steps_ok &&
          (steps_ok = clattn_standard_profile_last(ctx, &prof) == CLATTN_OK)) {
        steps[0][it - o->warmup] = prof.gemm_s_ms, steps[1][it - o->warmup] = prof.softmax_ms;
        steps[2][it - o->warmup] = prof.gemm_o_ms;
      }
    }
  if (run[COL_STANDARD] && steps_ok) {
    r->steps = 1;
    for (int i = 0; i < 3; i++) {
      qsort(steps[i], o->repeat, sizeof(double), cmp_double);
      r->steps_ms[i] = steps[i][o->repeat / 2];
    }
    /* The softmax reads the scores each row sees and writes all of P. */
    double pairs = r->flops / (2.0 * 2.0 * (double)r->head_dim);
    r->softmax_bytes = (pairs + (double)r->batch * r->heads * r->seqlen * r->seqlen) * 4.0;
  }
  for (int i = 0; i < 3; i++) free(steps[i]);
  for (int c = 0; c < COLS; c++) {
    if (run[c]) summarize(ms[c], o->repeat, &r->t[c]);
    free(ms[c]);
  }
  if (run[COL_FUSED] && run[COL_STANDARD] && !o->backward) r->max_diff = max_diff(ctx, &x, elems);
  data_free(&x);
}

static void progress(size_t i, size_t n, const bench_row *r) {
  fprintf(stderr, "\r[%zu/%zu] N=%zu d=%zu B=%zu H=%zu %s", i, n, r->seqlen, r->head_dim, r->batch,
          r->heads, r->causal ? "causal" : "");
  for (int c = 0; c < COLS; c++)
    if (r->t[c].ran) fprintf(stderr, " | %s %.3f ms", bench_col_names[c], r->t[c].median_ms);
  fprintf(stderr, isatty(2) ? "\033[K" : "\n");
}

int cmd_bench(int argc, char **argv) {
  opts o;
  int pr = parse_opts(argc, argv, &o);
  if (pr) return pr > 0 ? CLI_OK : CLI_USAGE;
  clattn_context *ctx = NULL;
  if (clattn_context_create_default(NULL, &ctx) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(NULL));
    return CLI_ERROR;
  }
  cl_device_type type = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL);
  int host_ok = bench_host_available() && (type & CL_DEVICE_TYPE_CPU);
  size_t cap = o.nseq * o.ndim * o.ncausal * o.nbatch * o.nheads, n = 0;
  bench_row *rows = calloc(cap, sizeof *rows);
  for (size_t di = 0; di < o.ndim; di++)
    for (int ci = 0; ci < o.ncausal; ci++)
      for (size_t bi = 0; bi < (o.tokens ? 1 : o.nbatch); bi++)
        for (size_t hi = 0; hi < (o.tokens ? 1 : o.nheads); hi++)
          for (size_t si = 0; si < o.nseq; si++) {
            bench_row *r = &rows[n++];
            r->seqlen = o.seqlens[si], r->head_dim = o.dims[di], r->causal = o.causal[ci];
            r->batch = o.tokens ? (o.tokens / r->seqlen ? o.tokens / r->seqlen : 1) : o.batches[bi];
            r->heads =
                o.tokens ? (o.hidden / r->head_dim ? o.hidden / r->head_dim : 1) : o.heads[hi];
            bench_one(ctx, &o, host_ok, r);
            progress(n, cap, r);
          }
  if (isatty(2)) fprintf(stderr, "\n");
  const char *device = clattn_context_device_summary(ctx);
  if (o.json) {
    char command[1024] = "clattn";
    for (int i = 0; i < argc; i++)
      strncat(command, " ", sizeof command - strlen(command) - 1),
          strncat(command, argv[i], sizeof command - strlen(command) - 1);
    bench_print_json(rows, n, device, command);
  } else if (o.csv) {
    bench_print_csv(rows, n);
  } else {
    bench_print_table(rows, n, device);
  }
  if (o.bandwidth && !o.json && !o.csv) {
    double bytes = 0, gbps = bench_copy_bandwidth(ctx, &bytes);
    if (gbps > 0) bench_print_bandwidth(rows, n, gbps, bytes);
  }
  if (o.plot && bench_plot(rows, n, o.plot, device) == 0)
    fprintf(stderr, "clattn bench: plot written to %s\n", o.plot);
  free(rows);
  clattn_context_destroy(ctx);
  return CLI_OK;
}
