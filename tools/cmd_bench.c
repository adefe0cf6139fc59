/* `clattn bench`: fused vs standard attention (and, on CPUs, a host OpenBLAS implementation)
 * over a sweep of shapes, timed in turns in one run on one device. */
#include "bench_args.h"
#include "bench_host.h"
#include "check.h"
#include "commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Device buffers and host data of one row. */
typedef struct {
  float *hq, *hk, *hv, *ho, *hs;
  cl_mem q, k, v, o[2], lse, g, dq, dk, dv; /* the last five with --backward */
  clattn_tensor tq, tk, tv, to[2], tg, tdq, tdk, tdv;
  check_extras ex;    /* --alibi, --sinks, --seqlens-kv's arrays */
  cl_mem cu_q, cu_kv; /* --varlen's */
} data;

static void data_free(data *x) {
  free(x->hq), free(x->hk), free(x->hv), free(x->ho), free(x->hs);
  cl_mem m[] = {x->q, x->k,  x->v,  x->o[0], x->o[1], x->lse,
                x->g, x->dq, x->dk, x->dv,   x->cu_q, x->cu_kv};
  for (int i = 0; i < 12; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  check_release_extras(&x->ex);
}

/* --seqlens-kv's and --varlen's lengths: entry b of B has ceil(N (b + 1) / B), an even ramp
 * whose last entry is full (half the keys padding on average, as a serving batch might). */
static size_t *bench_lengths(size_t n, size_t batch) {
  size_t *len = malloc((batch ? batch : 1) * sizeof *len);
  for (size_t b = 0; len && b < batch; b++) len[b] = (n * (b + 1) + batch - 1) / batch;
  return len;
}

/* The variants' arrays of the row: ALiBi slopes, sinks (and d_sinks with --backward), the
 * padded batch's key lengths, varlen's cu_seqlens; 0 with why on failure. */
static int extras_make(clattn_context *ctx, const bench_opts *o, const clattn_problem *p, data *x,
                       char *why, size_t len) {
  check_spec sp = {0};
  sp.problem = *p, sp.alibi = o->alibi, sp.sinks = o->sinks, sp.seqlens_kv = o->padded;
  size_t *lens = o->padded || o->varlen ? bench_lengths(p->seqlen_q, p->batch) : NULL;
  int *cu = o->varlen ? malloc(2 * (p->batch + 1) * sizeof *cu) : NULL;
  cl_int err = (o->padded || o->varlen) && !lens ? CL_OUT_OF_HOST_MEMORY : CL_SUCCESS;
  if (o->varlen && !cu) err = CL_OUT_OF_HOST_MEMORY;
  sp.lengths = lens;
  if (err == CL_SUCCESS) err = check_make_extras(ctx, &sp, o->backward && o->sinks, &x->ex);
  if (err == CL_SUCCESS && cu) {
    check_varlen_lengths(p, lens, cu, cu + p->batch + 1);
    size_t bytes = (p->batch + 1) * sizeof *cu;
    cl_context cl = clattn_context_cl_context(ctx);
    x->cu_q = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, cu, &err);
    if (err == CL_SUCCESS)
      x->cu_kv = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                                cu + p->batch + 1, &err);
  }
  free(lens), free(cu);
  if (err != CL_SUCCESS)
    snprintf(why, len, "cannot make the variants' arrays (OpenCL error %d)", err);
  return err == CL_SUCCESS;
}

/* The call's arguments, with column c's output. */
static clattn_args call_args(const data *x, int c) {
  clattn_args a = {0};
  a.q = x->tq, a.k = x->tk, a.v = x->tv, a.o = x->to[c], a.lse = x->lse;
  a.d_o = x->tg, a.dq = x->tdq, a.dk = x->tdk, a.dv = x->tdv;
  check_set_args(&a, &x->ex);
  a.cu_seqlens_q = x->cu_q, a.cu_seqlens_kv = x->cu_kv;
  return a;
}

/* n elements of storage t on the device, from host floats (half: rounded) or uninitialised. */
static cl_mem upload(clattn_context *ctx, clattn_dtype t, const float *host, size_t n,
                     cl_int *err) {
  if (*err != CL_SUCCESS) return NULL;
  size_t bytes = n * check_elem_size(t);
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes, NULL, err);
  void *bits = host ? check_pack(t, host, n) : NULL;
  if (*err == CL_SUCCESS && host)
    *err = clEnqueueWriteBuffer(clattn_context_queue(ctx), m, CL_TRUE, 0, bytes,
                                bits ? bits : (const void *)host, 0, NULL, NULL);
  free(bits);
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
  clattn_dtype t = p->dtype;
  x->q = upload(ctx, t, x->hq, nq, &err), x->k = upload(ctx, t, x->hk, nq, &err);
  x->v = upload(ctx, t, x->hv, nq, &err);
  x->o[0] = upload(ctx, t, NULL, nq, &err), x->o[1] = upload(ctx, t, NULL, nq, &err);
  if (backward) {
    x->lse = upload(ctx, CLATTN_F32, NULL, p->batch * p->heads_q * n, &err);
    x->g = upload(ctx, t, x->hv, nq, &err); /* any data will do for dO */
    x->dq = upload(ctx, t, NULL, nq, &err), x->dk = upload(ctx, t, NULL, nq, &err);
    x->dv = upload(ctx, t, NULL, nq, &err);
  }
  if (err != CL_SUCCESS) {
    snprintf(why, len, "cannot allocate the tensors on the device (OpenCL error %d)", err);
    return 0;
  }
  /* Packed sequences are one "batch entry" of total rows (the buffers hold B N rows). */
  size_t h = p->heads_q, d = p->head_dim;
  if (p->flags & CLATTN_VARLEN) n = p->total_q;
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
  clattn_args args = call_args(x, c);
  clEnqueueMarkerWithWaitList(clattn_context_queue(ctx), 0, NULL, &start);
  *st = clattn_forward_ex(ctx, p, &args, 0, NULL, NULL);
  if (*st == CLATTN_OK) *st = clattn_backward_ex(ctx, p, &args, 0, NULL, &done);
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

static double max_diff(clattn_context *ctx, clattn_dtype t, data *x, size_t n) {
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double m = -1.0;
  cl_command_queue q = clattn_context_queue(ctx);
  if (a && b && check_read(q, x->o[0], t, a, n, 0, NULL) == CL_SUCCESS &&
      check_read(q, x->o[1], t, b, n, 0, NULL) == CL_SUCCESS) {
    m = 0.0;
    for (size_t i = 0; i < n; i++) {
      double e = fabs((double)a[i] - b[i]);
      if (!(e <= m)) m = e;
    }
  }
  free(a), free(b);
  return m;
}

/* The row's variants beyond the mask, in words. */
static void describe_variants(const bench_opts *o, char *out, size_t len) {
  char mask[96] = "";
  args_mask_text(&o->variant, mask, sizeof mask);
  const char *more = strchr(mask, ','); /* past the mask's own words */
  snprintf(out, len, "%s%s%s%s%s", more ? more + 2 : "", o->alibi ? ", ALiBi" : "",
           o->sinks ? ", sinks" : "", o->padded ? ", padded batch (seqlens_kv)" : "",
           o->varlen ? ", packed sequences (varlen)" : "");
  if (!more && out[0]) memmove(out, out + 2, strlen(out + 2) + 1);
}

/* Times the columns of one row in turns: fused, standard, host, fused, ... */
static void bench_one(clattn_context *ctx, const bench_opts *o, int host_ok, bench_row *r) {
  clattn_problem p = {0};
  p.batch = r->batch, p.heads_q = r->heads, p.seqlen_q = p.seqlen_kv = r->seqlen;
  p.head_dim = r->head_dim, p.flags = r->causal ? CLATTN_CAUSAL : 0;
  p.dtype = o->dtype;
  p.flags |= o->variant.flags, p.softcap = o->variant.softcap;
  p.window_left = o->variant.window_left, p.window_right = o->variant.window_right;
  if (o->varlen) {
    size_t *lens = bench_lengths(p.seqlen_q, p.batch);
    for (size_t b = 0; lens && b < p.batch; b++) p.total_q += lens[b];
    free(lens);
    p.flags |= CLATTN_VARLEN, p.total_kv = p.total_q;
  }
  r->dtype = (int)o->dtype;
  describe_variants(o, r->variants, sizeof r->variants);
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
  int at =
      snprintf(r->fused_config, sizeof r->fused_config, "%s %u/%u/%u/%u (%s)", info.kernel,
               info.block_q, info.block_kv, info.threads_per_row, info.rows_per_item, info.origin);
  if (o->backward && at > 0 && (size_t)at < sizeof r->fused_config)
    snprintf(r->fused_config + at, sizeof r->fused_config - at, ", backward %s %u/%u (%s)",
             info.backward.kernel, info.backward.block_q, info.backward.block_kv,
             info.backward_origin);
  size_t elems = r->batch * r->seqlen * r->heads * r->head_dim;
  /* Q, K, V, O; with the backward also dO, dQ, dK, dV (and rows of LSE and D). */
  double rows = (double)r->batch * r->heads * r->seqlen * sizeof(float),
         es = (double)check_elem_size(o->dtype);
  double tensors = o->backward ? 8.0 * elems * es + 2 * rows : 4.0 * elems * es;
  r->peak_bytes[COL_FUSED] = tensors;
  r->peak_bytes[COL_STANDARD] =
      tensors + (double)(o->backward ? info.standard_backward_workspace_bytes
                                     : info.standard_workspace_bytes);
  r->peak_bytes[COL_HOST] = tensors + (double)r->seqlen * r->seqlen * sizeof(float);
  /* The host column is a plain fp32 loop (OpenBLAS): no peer for half storage or a variant. */
  int host_plain = !(o->variant.flags & (CLATTN_WINDOW | CLATTN_CAUSAL_TOP_LEFT)) &&
                   o->variant.softcap == 0.0f && !o->alibi && !o->sinks && !o->padded && !o->varlen;
  int host_dtype_ok = o->dtype == CLATTN_F32 && host_plain;
  /* The standard path has no varlen: left out quietly unless named, where its call says so. */
  int run[COLS] = {o->want[0] && fused_ok, o->want[1] && (!o->varlen || o->named),
                   o->want[2] && host_ok && host_dtype_ok && !o->backward};
  if ((r->t[COL_STANDARD].skipped = o->want[COL_STANDARD] && !run[COL_STANDARD]))
    snprintf(r->t[COL_STANDARD].why, sizeof r->t[COL_STANDARD].why, "no varlen on this path");
  if (o->want[COL_HOST] && o->backward)
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why, "no host backward");
  if (o->want[COL_HOST] && !host_dtype_ok)
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why,
             host_plain ? "the host column is fp32 only" : "the host column has no variants");
  else if (o->want[COL_HOST] && !host_ok)
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why, "%s",
             bench_host_available() ? "GPU device: host column is for CPUs"
                                    : "built without OpenBLAS");
  /* Where the host column does not apply, it is left out of the default columns quietly; one
   * named in --columns has failed. */
  r->t[COL_HOST].skipped = o->want[COL_HOST] && !run[COL_HOST] && !o->named;
  /* A standard column that cannot fit fails in its call, whose message names the bytes. */
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (run[COL_HOST] && pages > 0 && r->peak_bytes[COL_HOST] > 0.5 * (double)pages * page) {
    snprintf(r->t[COL_HOST].why, sizeof r->t[COL_HOST].why,
             "needs %.3g B of host memory, more than half of it", r->peak_bytes[COL_HOST]);
    run[COL_HOST] = 0;
  }
  data x;
  char why[200];
  if (!data_make(ctx, &p, run[COL_HOST], o->backward, &x, why, sizeof why) ||
      !extras_make(ctx, o, &p, &x, why, sizeof why)) {
    for (int c = 0; c < COLS; c++)
      if (run[c]) snprintf(r->t[c].why, sizeof r->t[c].why, "%s", why);
    data_free(&x);
    return;
  }
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(clattn_context_queue(ctx), CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  int by_events = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  double *ms[COLS], *steps[3];
  int have_memory = 1;
  for (int c = 0; c < COLS; c++) have_memory &= (ms[c] = calloc(o->repeat, sizeof(double))) != 0;
  for (int i = 0; i < 3; i++) have_memory &= (steps[i] = calloc(o->repeat, sizeof(double))) != 0;
  for (int c = 0; c < COLS && !have_memory; c++)
    if (run[c]) snprintf(r->t[c].why, sizeof r->t[c].why, "out of host memory"), run[c] = 0;
  int steps_ok = by_events;
  const clattn_algorithm algo[2] = {CLATTN_ALGO_FUSED, CLATTN_ALGO_STANDARD};
  for (int it = 0; have_memory && it < o->warmup + o->repeat; it++)
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
        clattn_args a = call_args(&x, c);
        a.lse = NULL;
        t = o->backward ? time_fwd_bwd(ctx, &p, &x, c, &st)
                        : check_time_forward_ex(ctx, &p, &a, by_events, &st);
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
  if (run[COL_FUSED] && run[COL_STANDARD] && !o->backward)
    r->max_diff = max_diff(ctx, o->dtype, &x, elems);
  data_free(&x);
}

static void progress(size_t i, size_t n, const bench_row *r) {
  fprintf(stderr, "\r[%zu/%zu] N=%zu d=%zu B=%zu H=%zu %s", i, n, r->seqlen, r->head_dim, r->batch,
          r->heads, r->causal ? "causal" : "");
  for (int c = 0; c < COLS; c++)
    if (r->t[c].ran) fprintf(stderr, " | %s %.3f ms", bench_col_names[c], r->t[c].median_ms);
  fprintf(stderr, isatty(2) ? "\033[K" : "\n");
}

/* Says on stderr what of the rows failed: a column asked for that did not run, or fused and
 * standard outputs that could not be compared; returns the exit status they make. */
static int report_failures(const bench_opts *o, const bench_row *rows, size_t n) {
  int rc = CLI_OK;
  for (size_t i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    char row[96];
    snprintf(row, sizeof row, "N=%zu d=%zu B=%zu H=%zu%s", r->seqlen, r->head_dim, r->batch,
             r->heads, r->causal ? " causal" : "");
    for (int c = 0; c < COLS; c++)
      if (o->want[c] && !r->t[c].ran && !r->t[c].skipped) {
        fprintf(stderr, "clattn bench: %s: the %s column failed: %s\n", row, bench_col_names[c],
                r->t[c].why[0] ? r->t[c].why : "not run");
        rc = CLI_ERROR;
      }
    /* max_diff: NaN when an output is not finite (a result that fails), < 0 when unread. */
    if (r->t[COL_FUSED].ran && r->t[COL_STANDARD].ran && !r->backward && !(r->max_diff >= 0)) {
      fprintf(stderr, "clattn bench: %s: %s\n", row,
              r->max_diff != r->max_diff
                  ? "the fused and standard outputs differ by NaN (a non-finite output)"
                  : "the fused and standard outputs could not be read back to compare");
      if (rc == CLI_OK) rc = r->max_diff != r->max_diff ? CLI_CHECK_FAILED : CLI_ERROR;
    }
  }
  return rc;
}

int cmd_bench(int argc, char **argv) {
  bench_opts o;
  int rc = CLI_OK, parsed = bench_parse(argc, argv, &o);
  if (parsed) rc = parsed > 0 ? CLI_OK : CLI_USAGE;
  clattn_context *ctx = NULL;
  if (!parsed && clattn_context_create_default(NULL, &ctx) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(NULL));
    rc = CLI_ERROR;
  }
  if (!parsed && ctx && o.kv_cache) {
    rc = bench_kv(ctx, &o);
    clattn_context_destroy(ctx);
    bench_opts_free(&o);
    return rc;
  }
  /* Rows: every combination of the lists (any length), counted without overflow. */
  size_t cap = 1, n = 0,
         dims[5] = {o.seqlens.n, o.dims.n, (size_t)o.ncausal, o.tokens ? 1 : o.batches.n,
                    o.tokens ? 1 : o.heads.n};
  for (int i = 0; i < 5; i++) cap = cap && dims[i] <= SIZE_MAX / cap ? cap * dims[i] : 0;
  bench_row *rows = ctx && cap ? calloc(cap, sizeof *rows) : NULL;
  if (ctx && !rows) {
    fprintf(stderr, "clattn bench: cannot hold %s rows in host memory\n",
            cap ? "this many" : "more than SIZE_MAX");
    rc = CLI_ERROR;
  }
  if (rows) {
    cl_device_type type = 0;
    clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL);
    int host_ok = bench_host_available() && (type & CL_DEVICE_TYPE_CPU);
    for (size_t di = 0; di < o.dims.n; di++)
      for (int ci = 0; ci < o.ncausal; ci++)
        for (size_t bi = 0; bi < dims[3]; bi++)
          for (size_t hi = 0; hi < dims[4]; hi++)
            for (size_t si = 0; si < o.seqlens.n; si++) {
              bench_row *r = &rows[n++];
              r->seqlen = o.seqlens.v[si], r->head_dim = o.dims.v[di], r->causal = o.causal[ci];
              r->batch =
                  o.tokens ? (o.tokens / r->seqlen ? o.tokens / r->seqlen : 1) : o.batches.v[bi];
              r->heads =
                  o.tokens ? (o.hidden / r->head_dim ? o.hidden / r->head_dim : 1) : o.heads.v[hi];
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
    rc = report_failures(&o, rows, n);
    if (o.bandwidth && !o.json && !o.csv) {
      double bytes = 0, gbps = bench_copy_bandwidth(ctx, &bytes);
      if (gbps > 0) {
        bench_print_bandwidth(rows, n, gbps, bytes);
      } else {
        fprintf(stderr, "clattn bench: the bandwidth check failed\n");
        rc = CLI_ERROR;
      }
    }
    if (o.plot && bench_plot(rows, n, o.plot, device) == 0) {
      fprintf(stderr, "clattn bench: plot written to %s\n", o.plot);
    } else if (o.plot) {
      fprintf(stderr, "clattn bench: the plot failed\n");
      rc = CLI_ERROR;
    }
  }
  free(rows);
  clattn_context_destroy(ctx);
  bench_opts_free(&o);
  return rc;
}
