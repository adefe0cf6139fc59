/* The tuner's backward problems: random Q, K, V and dO on the device in bhsd layout, O and LSE
 * from the context's forward plan (checked: every element written, sampled rows against the
 * double reference), D = rowsum(dO o O) in a buffer of the instance's own (so two instances can
 * coexist), and the double-precision reference gradients, of every row (the small instance) or
 * of sampled query and key rows (the timed one, tune_bwd_rows.c), with DESIGN.md's tolerance
 * (3x the naive loop's error in the problem's storage, plus 1e-6; half: 1e-4). */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { Q, K, V, O, DO, DQ, DK, DV, TENSORS };
enum { SAMPLES = 16 }; /* sampled query rows and key rows of the timed instance */

/* The sampled rows of an instance without the full reference: (b, head, row) each, and their
 * reference gradients (dQ rows; dK and dV rows) with tolerances. */
typedef struct {
  size_t q[SAMPLES][3], k[SAMPLES][3], nq, nk;
  double *dq, *dk, *dv, tol[3];
} samples;

struct clattn__bwd_bench {
  clattn_context *ctx;
  cl_command_queue queue;
  clattn__shape s;
  clattn_tensor t[TENSORS];
  size_t elems[TENSORS];
  cl_mem lse, drow;
  float *host[TENSORS]; /* Q, K, V, dO (inputs); dQ, dK, dV (read back) */
  double *ref[3];       /* dQ, dK, dV; NULL without a reference */
  double tol[3];
  samples smp;                 /* query rows sampled (and, without a reference, key rows) */
  float *lse_host, *drow_host; /* the forward's LSE and D as the candidates get them */
};

static ref_view host_view(const clattn__bwd_bench *b, int i) {
  ref_view v = {b->host[i], 0, b->t[i].stride_batch, b->t[i].stride_seq, b->t[i].stride_head};
  return v;
}

/* The reference gradients and, from the naive fp32 loop's error against them, the tolerances. */
static clattn_status reference(clattn__bwd_bench *b) {
  clattn_problem p = clattn__tune_problem_of(&b->s);
  float *naive[3] = {NULL, NULL, NULL};
  for (int g = 0; g < 3; g++) {
    size_t n = b->elems[DQ + g] ? b->elems[DQ + g] : 1;
    b->ref[g] = malloc(n * sizeof(double));
    naive[g] = malloc(n * sizeof(float));
  }
  clattn_status st = CLATTN_OK;
  if (!b->ref[0] || !b->ref[1] || !b->ref[2] || !naive[0] || !naive[1] || !naive[2]) {
    st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  } else {
    ref_view q = host_view(b, Q), k = host_view(b, K), v = host_view(b, V), g = host_view(b, DO);
    ref_backward_f64(&p, q, k, v, g, b->ref[0], b->ref[1], b->ref[2]);
    ref_backward_f32(&p, q, k, v, g, naive[0], naive[1], naive[2]);
    for (int i = 0; i < 3; i++) {
      double e = 0;
      for (size_t j = 0; j < b->elems[DQ + i]; j++) e = fmax(e, fabs(naive[i][j] - b->ref[i][j]));
      b->tol[i] = 3 * e + ref_tolerance_floor(b->s.dtype);
    }
  }
  for (int g = 0; g < 3; g++) free(naive[g]);
  return st;
}

static clattn__bwd_host host_of(const clattn__bwd_bench *b) {
  clattn__bwd_host h = {b->s, host_view(b, Q), host_view(b, K), host_view(b, V), host_view(b, DO)};
  return h;
}

/* n of total rows, heads of per_head each, as (b, head, row): every row when they are few, else
 * the first and last (the causal edges, the partial last block), the last of the first head, and
 * rows spread over the rest. */
static size_t spread(size_t total, size_t per_head, size_t heads, size_t out[SAMPLES][3]) {
  size_t n = total < SAMPLES ? total : SAMPLES;
  for (size_t k = 0; k < n; k++) {
    size_t r = n == total ? k
               : k == 0   ? 0
               : k == 1   ? total - 1
               : k == 2   ? per_head - 1
                          : (size_t)((double)(k - 1) * total / n);
    out[k][2] = r % per_head, out[k][1] = (r / per_head) % heads, out[k][0] = r / per_head / heads;
  }
  return n;
}

/* The larger of worst and |x - ref|, where equal infinities (a row that sees no key) differ by 0
 * and NaN is the largest (fmax would drop it). */
static double worse(double worst, double x, double ref) {
  double e = x == ref ? 0 : fabs(x - ref);
  return e <= worst ? worst : e;
}

/* The forward's O, LSE and D as computed on the device, against sampled rows' reference (the
 * forward's rule: twice the naive fp32 loop's error, plus 1e-6), and, without the full
 * reference, the sampled rows' reference gradients. */
static clattn_status sample_rows(clattn__bwd_bench *b, const clattn__plan *fp) {
  const clattn__shape *s = &b->s;
  clattn__bwd_host h = host_of(b);
  samples *m = &b->smp;
  m->nq = spread(s->batch * s->heads_q * s->seqlen_q, s->seqlen_q, s->heads_q, m->q);
  m->nk = b->ref[0]
              ? 0
              : spread(s->batch * s->heads_kv * s->seqlen_kv, s->seqlen_kv, s->heads_kv, m->k);
  size_t scratch_n = 2 * s->seqlen_kv + s->dv + 1; /* scores, dP, O (tune_bwd_rows.c) */
  double *sc64 = malloc(scratch_n * sizeof(double));
  float *sc32 = malloc(scratch_n * sizeof(float)), *r32 = malloc((s->d + s->dv) * sizeof(float));
  m->dq = malloc((m->nq * s->d + 1) * sizeof(double));
  m->dk = malloc((m->nk * s->d + 1) * sizeof(double));
  m->dv = malloc((m->nk * s->dv + 1) * sizeof(double));
  clattn_status st = CLATTN_OK;
  if (!sc64 || !sc32 || !r32 || !m->dq || !m->dk || !m->dv)
    st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  double err_in[2] = {0, 0}, naive_in[2] = {0, 0}, naive[3] = {0, 0, 0};
  for (size_t k = 0; st == CLATTN_OK && k < m->nq; k++) {
    size_t bb = m->q[k][0], hq = m->q[k][1], i = m->q[k][2],
           r = (bb * s->heads_q + hq) * s->seqlen_q + i;
    double lse, drow, *dq = m->dq + k * s->d;
    float lse32, drow32;
    clattn__bwd_row_dq_f64(&h, bb, hq, i, sc64, dq, &lse, &drow);
    clattn__bwd_row_dq_f32(&h, bb, hq, i, sc32, r32, &lse32, &drow32);
    for (size_t c = 0; c < s->d; c++) naive[0] = worse(naive[0], r32[c], dq[c]);
    err_in[0] = worse(err_in[0], b->lse_host[r], lse), naive_in[0] = worse(naive_in[0], lse32, lse);
    err_in[1] = worse(err_in[1], b->drow_host[r], drow);
    naive_in[1] = worse(naive_in[1], drow32, drow);
  }
  double floor = ref_tolerance_floor(s->dtype);
  double tol_in[2] = {2 * naive_in[0] + floor, 2 * naive_in[1] + floor};
  if (st == CLATTN_OK && (!(err_in[0] <= tol_in[0]) || !(err_in[1] <= tol_in[1])))
    st = clattn__fail(b->ctx, CLATTN_ERR_UNSUPPORTED,
                      "the forward plan (%s BQ=%u BKV=%u, %s) that makes the backward tuner's "
                      "inputs is wrong: max|lse - ref| %.3g (tolerance %.3g), max|D - ref| %.3g "
                      "(%.3g) on sampled rows",
                      clattn__family_of(&fp->cfg)->name, fp->cfg.bq, fp->cfg.bkv, fp->origin,
                      err_in[0], tol_in[0], err_in[1], tol_in[1]);
  for (size_t k = 0; st == CLATTN_OK && k < m->nk; k++) {
    size_t bb = m->k[k][0], hk = m->k[k][1], j = m->k[k][2];
    double *dk = m->dk + k * s->d, *dv = m->dv + k * s->dv;
    clattn__bwd_row_dkdv_f64(&h, b->lse_host, b->drow_host, bb, hk, j, dk, dv);
    clattn__bwd_row_dkdv_f32(&h, b->lse_host, b->drow_host, bb, hk, j, r32, r32 + s->d);
    for (size_t c = 0; c < s->d; c++) naive[1] = worse(naive[1], r32[c], dk[c]);
    for (size_t c = 0; c < s->dv; c++) naive[2] = worse(naive[2], r32[s->d + c], dv[c]);
  }
  for (int g = 0; g < 3; g++) m->tol[g] = 3 * naive[g] + floor;
  free(sc64), free(sc32), free(r32);
  return st;
}

/* Every element of O, LSE and D the forward plan wrote: not the NaN poison, finite (LSE -inf
 * exactly for rows that see no key). */
static clattn_status check_written(clattn__bwd_bench *b, const clattn__plan *fp, const float *o) {
  const clattn__shape *s = &b->s;
  size_t rows = s->batch * s->heads_q * s->seqlen_q, bad = SIZE_MAX;
  const char *what = "";
  for (size_t e = 0; e < b->elems[O] && bad == SIZE_MAX; e++)
    if (!isfinite(o[e])) bad = e, what = "o element";
  for (size_t r = 0; r < rows && bad == SIZE_MAX; r++) {
    int sees = clattn__tune_visible(s, r % s->seqlen_q) > 0;
    float l = b->lse_host[r];
    if (isnan(l) || (sees ? !isfinite(l) : l != -INFINITY))
      bad = r, what = "lse of row";
    else if (!isfinite(b->drow_host[r]))
      bad = r, what = "D of row";
  }
  return bad == SIZE_MAX
             ? CLATTN_OK
             : clattn__fail(b->ctx, CLATTN_ERR_UNSUPPORTED,
                            "the forward plan (%s BQ=%u BKV=%u, %s) that makes the backward "
                            "tuner's inputs left %s %zu unwritten or non-finite",
                            clattn__family_of(&fp->cfg)->name, fp->cfg.bq, fp->cfg.bkv, fp->origin,
                            what, bad);
}

/* O and LSE from the context's forward plan, then D, on the context's queue. That queue may be
 * out of order, so a barrier follows each step: each reads what the one before wrote (O and LSE,
 * then D in ctx->bwd_ws). Every output is poisoned first, so a forward that leaves one unwritten
 * is caught, not read as data. */
static clattn_status prepare(clattn__bwd_bench *b) {
  clattn_context *ctx = b->ctx;
  const clattn__shape *s = &b->s;
  size_t rows = s->batch * s->heads_q * s->seqlen_q;
  const clattn__plan *fp = NULL;
  clattn_status st = clattn__plan_for_grid(ctx, s, &fp);
  cl_int err = CL_SUCCESS;
  if (st == CLATTN_OK) {
    err = clattn__tune_poison_as(ctx->queue, b->t[O].buffer, s->dtype, b->elems[O]);
    if (err == CL_SUCCESS) err = clattn__tune_poison(ctx->queue, b->lse, rows);
    if (err == CL_SUCCESS) err = clattn__tune_poison(ctx->queue, b->drow, rows);
    if (err == CL_SUCCESS) err = clEnqueueBarrierWithWaitList(ctx->queue, 0, NULL, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "poisoning the backward's inputs");
  }
  if (st == CLATTN_OK)
    st = clattn__enqueue_forward(ctx, ctx->queue, ctx->queue_in_order, s, fp, NULL, &b->t[Q],
                                 &b->t[K], &b->t[V], &b->t[O], b->lse, 0, NULL, NULL);
  if (st == CLATTN_OK && rows) {
    err = clEnqueueBarrierWithWaitList(ctx->queue, 0, NULL, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueBarrierWithWaitList");
  }
  if (st == CLATTN_OK && rows) st = clattn__bwd_rowsum(ctx, s, &b->t[O], &b->t[DO]);
  if (st == CLATTN_OK && rows) {
    err = clEnqueueBarrierWithWaitList(ctx->queue, 0, NULL, NULL);
    if (err == CL_SUCCESS)
      err = clEnqueueCopyBuffer(ctx->queue, ctx->bwd_ws, b->drow, 0, 0, rows * sizeof(float), 0,
                                NULL, NULL);
  }
  if (st == CLATTN_OK && err == CL_SUCCESS) err = clFinish(ctx->queue);
  if (st == CLATTN_OK && err != CL_SUCCESS)
    st = clattn__fail_cl(ctx, err, "preparing the backward's inputs");
  float *o = st == CLATTN_OK ? malloc((b->elems[O] + 1) * sizeof(float)) : NULL;
  if (st == CLATTN_OK && !o)
    st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  if (st == CLATTN_OK) {
    err = clattn__tune_read(b->queue, b->t[O].buffer, s->dtype, o, b->elems[O]);
    if (err == CL_SUCCESS && rows)
      err = clEnqueueReadBuffer(b->queue, b->lse, CL_TRUE, 0, rows * sizeof(float), b->lse_host, 0,
                                NULL, NULL);
    if (err == CL_SUCCESS && rows)
      err = clEnqueueReadBuffer(b->queue, b->drow, CL_TRUE, 0, rows * sizeof(float), b->drow_host,
                                0, NULL, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "reading the backward's inputs");
  }
  if (st == CLATTN_OK) st = check_written(b, fp, o);
  free(o);
  if (st == CLATTN_OK) st = sample_rows(b, fp);
  return st;
}

/* The device buffers and host copies of a shape; the caller frees b whatever happens. */
static clattn_status alloc(clattn__bwd_bench *b) {
  const clattn__shape *s = &b->s;
  size_t seq[TENSORS] = {s->seqlen_q, s->seqlen_kv, s->seqlen_kv, s->seqlen_q,
                         s->seqlen_q, s->seqlen_q,  s->seqlen_kv, s->seqlen_kv};
  size_t heads[TENSORS] = {s->heads_q, s->heads_kv, s->heads_kv, s->heads_q,
                           s->heads_q, s->heads_q,  s->heads_kv, s->heads_kv};
  size_t dims[TENSORS] = {s->d, s->d, s->dv, s->dv, s->dv, s->d, s->d, s->dv};
  uint64_t rng = 0x3C6EF372FE94F82Bull;
  clattn_status st = CLATTN_OK;
  for (int i = 0; i < TENSORS && st == CLATTN_OK; i++) {
    size_t n;
    cl_int err = CL_SUCCESS;
    if (__builtin_mul_overflow(s->batch, heads[i], &n) || __builtin_mul_overflow(n, seq[i], &n) ||
        __builtin_mul_overflow(n, dims[i], &n) || n > SIZE_MAX / 8) {
      st = clattn__fail(b->ctx, CLATTN_ERR_INVALID_ARGUMENT, "tuning problem too large");
      break;
    }
    b->elems[i] = n;
    if ((n ? n : 1) * s->elem > b->ctx->device.max_alloc) { /* before malloc, as forward's */
      st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "tuning problem: a tensor of %zu bytes exceeds the device's largest "
                        "allocation (%llu bytes)",
                        (n ? n : 1) * s->elem, (unsigned long long)b->ctx->device.max_alloc);
      break;
    }
    b->t[i] = clattn_bhsd(NULL, seq[i], heads[i], dims[i]);
    int input = i == Q || i == K || i == V || i == DO, output = i >= DQ;
    if ((input || output) && (b->host[i] = malloc((n ? n : 1) * sizeof(float))) == NULL)
      st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
    if (st == CLATTN_OK && input) ref_fill_normal(b->host[i], n, &rng);
    if (st == CLATTN_OK && input)
      st = clattn__tune_upload(b->ctx, s->dtype, b->host[i], n, &b->t[i].buffer);
    else if (st == CLATTN_OK)
      b->t[i].buffer =
          clCreateBuffer(b->ctx->cl, CL_MEM_READ_WRITE, (n ? n : 1) * s->elem, NULL, &err);
    if (st == CLATTN_OK && err != CL_SUCCESS)
      st = clattn__fail_cl(b->ctx, err, "clCreateBuffer (tuning data)");
  }
  size_t rows = s->batch * s->heads_q * s->seqlen_q, bytes = (rows ? rows : 1) * sizeof(float);
  if (st == CLATTN_OK) {
    cl_int err = CL_SUCCESS;
    b->lse = clCreateBuffer(b->ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS)
      b->drow = clCreateBuffer(b->ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) st = clattn__fail_cl(b->ctx, err, "clCreateBuffer (tuning rows)");
  }
  if (st == CLATTN_OK) {
    b->lse_host = malloc(bytes);
    b->drow_host = malloc(bytes);
    if (!b->lse_host || !b->drow_host)
      st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  return st;
}

clattn_status clattn__bwd_bench_new(clattn_context *ctx, cl_command_queue queue,
                                    const clattn__shape *s, int with_reference,
                                    clattn__bwd_bench **out) {
  clattn__bwd_bench *b = calloc(1, sizeof *b);
  *out = b;
  clattn_status st =
      b ? CLATTN_OK : clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  if (st == CLATTN_OK) {
    b->ctx = ctx, b->queue = queue, b->s = *s;
    st = alloc(b);
  }
  if (st == CLATTN_OK && with_reference) st = reference(b);
  if (st == CLATTN_OK) st = prepare(b);
  return st;
}

double clattn__bwd_bench_run(clattn__bwd_bench *b, const clattn__plan *p, int poison) {
  cl_event first = NULL, last = NULL;
  cl_int err = CL_SUCCESS;
  for (int g = DQ; poison && g <= DV && err == CL_SUCCESS; g++)
    err = clattn__tune_poison_as(b->queue, b->t[g].buffer, b->s.dtype, b->elems[g]);
  if (err != CL_SUCCESS)
    clattn__fail_cl(b->ctx, err, "clEnqueueFillBuffer (poisoning the candidate's gradients)");
  clattn_status st =
      err != CL_SUCCESS
          ? CLATTN_ERR_OPENCL
          : clattn__bwd_enqueue(b->ctx, b->queue, &b->s, p, &b->t[Q], &b->t[K], &b->t[V], &b->t[DO],
                                b->lse, b->drow, &b->t[DQ], &b->t[DK], &b->t[DV], &first, &last);
  double ms = -1.0;
  cl_ulong t0 = 0, t1 = 0;
  if (st == CLATTN_OK && first && last) {
    err = clWaitForEvents(1, &last);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    if (err == CL_SUCCESS)
      ms = t1 > t0 ? (double)(t1 - t0) * 1e-6 : 0.0;
    else
      clattn__fail_cl(b->ctx, err, "running the backward candidate"); /* for the tuner's note */
  }
  if (first) clReleaseEvent(first);
  if (last) clReleaseEvent(last);
  return ms;
}

/* The sampled rows of gradient g (0 dQ, 1 dK, 2 dV) against their reference: the largest error. */
static double sampled_error(const clattn__bwd_bench *b, int g) {
  const clattn__shape *s = &b->s;
  const samples *m = &b->smp;
  size_t n = g == 0 ? m->nq : m->nk, width = g == 2 ? s->dv : s->d;
  const double *ref = g == 0 ? m->dq : g == 1 ? m->dk : m->dv;
  double worst = 0;
  for (size_t k = 0; k < n; k++) {
    const size_t *at = g == 0 ? m->q[k] : m->k[k];
    size_t heads = g == 0 ? s->heads_q : s->heads_kv, seq = g == 0 ? s->seqlen_q : s->seqlen_kv;
    const float *x = b->host[DQ + g] + ((at[0] * heads + at[1]) * seq + at[2]) * width;
    for (size_t c = 0; c < width; c++) {
      double e = fabs(x[c] - ref[k * width + c]);
      if (!(e <= worst)) worst = e;
    }
  }
  return worst;
}

void clattn__bwd_bench_check(clattn__bwd_bench *b, char *why, size_t len) {
  static const char *const names[3] = {"dq", "dk", "dv"};
  why[0] = 0;
  for (int g = 0; g < 3 && !why[0]; g++) {
    size_t n = b->elems[DQ + g], bad = SIZE_MAX;
    cl_int err = clattn__tune_read(b->queue, b->t[DQ + g].buffer, b->s.dtype, b->host[DQ + g], n);
    double worst = 0;
    for (size_t i = 0; err == CL_SUCCESS && i < n && bad == SIZE_MAX; i++) {
      float x = b->host[DQ + g][i];
      if (!isfinite(x))
        bad = i;
      else if (b->ref[g])
        worst = fmax(worst, fabs(x - b->ref[g][i]));
    }
    if (err != CL_SUCCESS)
      snprintf(why, len, "reading %s failed: %s", names[g], clattn__cl_error_name(err));
    else if (bad != SIZE_MAX)
      snprintf(why, len, "%s %s at element %zu of %zu",
               isnan(b->host[DQ + g][bad]) ? "unwritten or NaN" : "non-finite", names[g], bad, n);
    else if (b->ref[g] && !(worst <= b->tol[g]))
      snprintf(why, len, "wrong result: max|%s - ref| %.3g (tolerance %.3g) on every row", names[g],
               worst, b->tol[g]);
    else if (!b->ref[g] && !((worst = sampled_error(b, g)) <= b->smp.tol[g]))
      snprintf(why, len, "wrong result: max|%s - ref| %.3g (tolerance %.3g) on sampled rows",
               names[g], worst, b->smp.tol[g]);
  }
}

void clattn__bwd_bench_free(clattn__bwd_bench *b) {
  if (!b) return;
  for (int i = 0; i < TENSORS; i++) {
    if (b->t[i].buffer) clReleaseMemObject(b->t[i].buffer);
    free(b->host[i]);
  }
  if (b->lse) clReleaseMemObject(b->lse);
  if (b->drow) clReleaseMemObject(b->drow);
  for (int g = 0; g < 3; g++) free(b->ref[g]);
  free(b->smp.dq), free(b->smp.dk), free(b->smp.dv), free(b->lse_host), free(b->drow_host);
  free(b);
}
