/* The forward tuner's problems: random Q, K, V in bhsd layout on the device, O and LSE buffers
 * the candidates write, and the double-precision reference of the rows that are checked (every
 * row of the small problem, sampled rows of the timed one) with DESIGN.md's tolerance: twice the
 * naive loop's error on the same rows (in the problem's storage: half has its same-precision
 * naive), plus 1e-6 (half: 1e-4). Also the helpers both tuners' problems share. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SAMPLE_ROWS = 48 };

struct clattn__fwd_bench {
  clattn_context *ctx;
  cl_command_queue queue; /* the tuner's, in order, with profiling */
  clattn__shape s;
  cl_mem buf[5]; /* q k v o lse */
  cl_mem kv[4];  /* a cache class's: lengths, block table, K and V scales */
  clattn_tensor t[4];
  ref_view hv[3]; /* the host copies' views (a paged cache's device views differ) */
  float *host[3];
  size_t o_elems, rows;
  float *o_out, *lse_out;
  size_t *checked, nchecked; /* rows (flat: (b * heads_q + h) * seqlen_q + i) with a reference */
  double *ref_o, *ref_lse, tol_o, tol_lse;
};

clattn__shape clattn__tune_small_shape(const clattn__shape *s) {
  clattn__shape small = *s;
  size_t group = s->heads_q / s->heads_kv;
  small.batch = s->batch < 2 ? s->batch : 2;
  small.heads_kv = s->heads_kv < 2 ? s->heads_kv : 2;
  small.heads_q = small.heads_kv * group;
  small.seqlen_q = s->seqlen_q < 203 ? s->seqlen_q : 203;
  small.seqlen_kv = s->seqlen_kv < 211 ? s->seqlen_kv : 211;
  return small;
}

clattn_problem clattn__tune_problem_of(const clattn__shape *s) {
  clattn_problem p = {0};
  p.batch = s->batch, p.heads_q = s->heads_q, p.heads_kv = s->heads_kv;
  p.seqlen_q = s->seqlen_q, p.seqlen_kv = s->seqlen_kv;
  p.head_dim = s->d, p.head_dim_v = s->dv, p.scale = s->scale;
  p.flags = s->causal ? CLATTN_CAUSAL : 0;
  p.dtype = s->dtype;
  return p;
}

size_t clattn__tune_visible(const clattn__shape *s, size_t i) {
  if (!s->causal) return s->seqlen_kv;
  long long n = (long long)i + (long long)s->seqlen_kv - (long long)s->seqlen_q + 1;
  return n <= 0 ? 0 : (size_t)n;
}

cl_int clattn__tune_poison(cl_command_queue queue, cl_mem buf, size_t n) {
  cl_float nan = NAN;
  return n ? clEnqueueFillBuffer(queue, buf, &nan, sizeof nan, 0, n * sizeof nan, 0, NULL, NULL)
           : CL_SUCCESS;
}

cl_int clattn__tune_poison_as(cl_command_queue queue, cl_mem buf, clattn_dtype t, size_t n) {
  if (t == CLATTN_F32) return clattn__tune_poison(queue, buf, n);
  cl_ushort nan = 0xffffu; /* a NaN in fp16 and in bf16 alike */
  return n ? clEnqueueFillBuffer(queue, buf, &nan, sizeof nan, 0, n * sizeof nan, 0, NULL, NULL)
           : CL_SUCCESS;
}

clattn_status clattn__tune_upload(clattn_context *ctx, clattn_dtype t, float *host, size_t n,
                                  cl_mem *out) {
  size_t elem = t == CLATTN_F32 ? sizeof(float) : sizeof(cl_ushort), bytes = (n ? n : 1) * elem;
  cl_ushort *bits = NULL;
  if (t != CLATTN_F32) {
    bits = malloc(bytes);
    if (!bits) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
    for (size_t i = 0; i < n; i++) bits[i] = ref_half_bits(t, host[i]);
    for (size_t i = 0; i < n; i++) host[i] = ref_half_value(t, bits[i]);
  }
  cl_int err = CL_SUCCESS;
  *out = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | (n ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                        n ? (bits ? (void *)bits : (void *)host) : NULL, &err);
  free(bits);
  if (err != CL_SUCCESS) *out = NULL;
  return err == CL_SUCCESS ? CLATTN_OK : clattn__fail_cl(ctx, err, "clCreateBuffer (tuning data)");
}

cl_int clattn__tune_read(cl_command_queue queue, cl_mem buf, clattn_dtype t, float *out, size_t n) {
  if (!n) return CL_SUCCESS;
  if (t == CLATTN_F32)
    return clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, n * sizeof(float), out, 0, NULL, NULL);
  cl_ushort *bits = malloc(n * sizeof *bits);
  if (!bits) return CL_OUT_OF_HOST_MEMORY;
  cl_int err = clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, n * sizeof *bits, bits, 0, NULL, NULL);
  for (size_t i = 0; err == CL_SUCCESS && i < n; i++) out[i] = ref_half_value(t, bits[i]);
  free(bits);
  return err;
}

static ref_view view_of(const clattn__fwd_bench *b, int i) {
  return b->hv[i];
}

/* Every row, or the first and last rows of the first and last heads (the causal edges, the
 * partial last block) and rows spread over the rest. */
static void choose_rows(clattn__fwd_bench *b) {
  size_t total = b->rows, n = b->nchecked;
  for (size_t k = 0; k < n; k++) {
    size_t r = n == total ? k
               : k == 0   ? 0
               : k == 1   ? total - 1
                          : (size_t)((double)(k - 1) * total / n);
    if (n != total && k == 2) r = b->s.seqlen_q - 1; /* last row of the first head */
    b->checked[k] = r;
  }
}

/* The reference of the checked rows and, from the naive fp32 loop's error on them, the
 * tolerances. */
static clattn_status reference(clattn__fwd_bench *b) {
  const clattn__shape *s = &b->s;
  clattn_problem p = clattn__tune_problem_of(s);
  float *naive = malloc((s->dv + 1) * sizeof(float));
  double naive_o = 0, naive_lse = 0;
  for (size_t k = 0; naive && k < b->nchecked; k++) {
    size_t r = b->checked[k], i = r % s->seqlen_q, h = (r / s->seqlen_q) % s->heads_q,
           bb = r / s->seqlen_q / s->heads_q;
    double *ref = b->ref_o + k * s->dv;
    float lse32;
    ref_row_f64(&p, view_of(b, 0), view_of(b, 1), view_of(b, 2), bb, h, i, ref, &b->ref_lse[k]);
    ref_row_f32(&p, view_of(b, 0), view_of(b, 1), view_of(b, 2), bb, h, i, naive, &lse32);
    for (size_t c = 0; c < s->dv; c++) naive_o = fmax(naive_o, fabs(naive[c] - ref[c]));
    if (isfinite(b->ref_lse[k])) naive_lse = fmax(naive_lse, fabs(lse32 - b->ref_lse[k]));
  }
  b->tol_o = 2 * naive_o + ref_tolerance_floor(s->dtype);
  b->tol_lse = 2 * naive_lse + ref_tolerance_floor(s->dtype);
  clattn_status st =
      naive ? CLATTN_OK : clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  free(naive);
  return st;
}

/* The device buffers and host copies of a shape; the caller frees b whatever happens. */
static clattn_status alloc(clattn__fwd_bench *b) {
  const clattn__shape *s = &b->s;
  size_t n[4], dims[4] = {s->d, s->d, s->dv, s->dv};
  /* A cache class lays its K and V rows out as a cache (tune_kv.c): [batch][rows][heads][dim]. */
  size_t kv_rows = s->kv_cache ? clattn__tune_kv_rows(s) : s->seqlen_kv;
  size_t seq[4] = {s->seqlen_q, kv_rows, kv_rows, s->seqlen_q};
  size_t heads[4] = {s->heads_q, s->heads_kv, s->heads_kv, s->heads_q};
  uint64_t rng = 0x243F6A8885A308D3ull;
  clattn_status st = CLATTN_OK;
  for (int i = 0; i < 4 && st == CLATTN_OK; i++) {
    cl_int err = CL_SUCCESS;
    if (__builtin_mul_overflow(s->batch, seq[i], &n[i]) ||
        __builtin_mul_overflow(n[i], heads[i], &n[i]) ||
        __builtin_mul_overflow(n[i], dims[i], &n[i]) || n[i] > SIZE_MAX / 8) {
      st = clattn__fail(b->ctx, CLATTN_ERR_INVALID_ARGUMENT, "tuning problem too large");
      break;
    }
    int cached = s->kv_cache && (i == 1 || i == 2);
    b->t[i] = cached ? clattn_bshd(NULL, seq[i], heads[i], dims[i])
                     : clattn_bhsd(NULL, seq[i], heads[i], dims[i]);
    size_t bytes = (n[i] ? n[i] : 1) * (cached && s->kv_i8 ? 1 : s->elem);
    /* A tensor no buffer of the device can hold fails here, before its host copy is asked of
     * malloc (petabytes for an impossible class: a sanitizer's allocator aborts on those). */
    if (bytes > b->ctx->device.max_alloc) {
      st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "tuning problem: a tensor of %zu bytes exceeds the device's largest "
                        "allocation (%llu bytes)",
                        bytes, (unsigned long long)b->ctx->device.max_alloc);
      break;
    }
    size_t floats = (n[i] ? n[i] : 1) * sizeof(float);
    if (i < 3 && (b->host[i] = malloc(floats)) != NULL) ref_fill_normal(b->host[i], n[i], &rng);
    if (i < 3 && !b->host[i])
      st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
    if (st == CLATTN_OK && cached && s->kv_i8)
      st = clattn__tune_kv_upload_i8(b->ctx, b->host[i], n[i] / dims[i], dims[i], &b->buf[i],
                                     &b->kv[i + 1]);
    else if (st == CLATTN_OK && i < 3)
      st = clattn__tune_upload(b->ctx, s->dtype, b->host[i], n[i], &b->buf[i]);
    else if (st == CLATTN_OK)
      b->buf[i] = clCreateBuffer(b->ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (st == CLATTN_OK && err != CL_SUCCESS)
      st = clattn__fail_cl(b->ctx, err, "clCreateBuffer (tuning data)");
    b->t[i].buffer = b->buf[i];
    if (i < 3) {
      ref_view hv = {b->host[i], 0, b->t[i].stride_batch, b->t[i].stride_seq, b->t[i].stride_head};
      b->hv[i] = hv;
    }
  }
  if (st == CLATTN_OK && s->kv_cache)
    st = clattn__tune_kv_attach(b->ctx, &b->s, &b->t[1], &b->t[2], b->kv);
  b->o_elems = st == CLATTN_OK ? n[3] : 0;
  b->rows = s->batch * s->heads_q * s->seqlen_q;
  size_t row_bytes = (b->rows ? b->rows : 1) * sizeof(float);
  if (st == CLATTN_OK) {
    cl_int err = CL_SUCCESS;
    b->buf[4] = clCreateBuffer(b->ctx->cl, CL_MEM_READ_WRITE, row_bytes, NULL, &err);
    if (err != CL_SUCCESS) st = clattn__fail_cl(b->ctx, err, "clCreateBuffer (tuning LSE)");
  }
  if (st == CLATTN_OK) {
    b->o_out = malloc((b->o_elems ? b->o_elems : 1) * sizeof(float));
    b->lse_out = malloc(row_bytes);
    b->checked = malloc((b->nchecked + 1) * sizeof *b->checked);
    b->ref_o = malloc((b->nchecked * s->dv + 1) * sizeof(double));
    b->ref_lse = malloc((b->nchecked + 1) * sizeof(double));
    if (!b->o_out || !b->lse_out || !b->checked || !b->ref_o || !b->ref_lse)
      st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  return st;
}

clattn_status clattn__fwd_bench_new(clattn_context *ctx, cl_command_queue queue,
                                    const clattn__shape *s, int every_row,
                                    clattn__fwd_bench **out) {
  clattn__fwd_bench *b = calloc(1, sizeof *b);
  *out = b;
  clattn_status st =
      b ? CLATTN_OK : clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  if (st == CLATTN_OK) {
    size_t rows = s->batch * s->heads_q * s->seqlen_q;
    b->ctx = ctx, b->queue = queue, b->s = *s;
    b->nchecked = every_row || rows < SAMPLE_ROWS ? rows : SAMPLE_ROWS;
    st = alloc(b);
  }
  if (st == CLATTN_OK) {
    choose_rows(b);
    st = reference(b);
  }
  return st;
}

double clattn__fwd_bench_run(clattn__fwd_bench *b, const clattn__plan *p, int poison) {
  cl_event ev = NULL;
  cl_int err = CL_SUCCESS;
  cl_ulong t0 = 0, t1 = 0;
  if (poison) err = clattn__tune_poison_as(b->queue, b->buf[3], b->s.dtype, b->o_elems);
  if (poison && err == CL_SUCCESS) err = clattn__tune_poison(b->queue, b->buf[4], b->rows);
  if (err != CL_SUCCESS)
    clattn__fail_cl(b->ctx, err, "clEnqueueFillBuffer (poisoning the candidate's outputs)");
  clattn_status st = err != CL_SUCCESS ? CLATTN_ERR_OPENCL
                                       : clattn__enqueue_forward(b->ctx, b->queue, 1, &b->s, p,
                                                                 NULL, &b->t[0], &b->t[1], &b->t[2],
                                                                 &b->t[3], b->buf[4], 0, NULL, &ev);
  if (st == CLATTN_OK && ev) {
    err = clWaitForEvents(1, &ev);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    if (err != CL_SUCCESS) clattn__fail_cl(b->ctx, err, "running the candidate");
  }
  if (ev) clReleaseEvent(ev);
  return st == CLATTN_OK && ev && err == CL_SUCCESS ? (double)(t1 - t0) * 1e-6 : -1.0;
}

/* Every element of O and LSE: written (not the NaN poison), finite, and LSE -inf exactly where
 * the row sees no key. */
static void check_written(const clattn__fwd_bench *b, char *why, size_t len) {
  const clattn__shape *s = &b->s;
  for (size_t e = 0; e < b->o_elems && !why[0]; e++)
    if (!isfinite(b->o_out[e]))
      snprintf(why, len, "%s o at element %zu of %zu (row %zu)",
               isnan(b->o_out[e]) ? "unwritten or NaN" : "non-finite", e, b->o_elems, e / s->dv);
  for (size_t r = 0; r < b->rows && !why[0]; r++) {
    float l = b->lse_out[r];
    int sees = clattn__tune_visible(s, r % s->seqlen_q) > 0;
    if (isnan(l))
      snprintf(why, len, "unwritten or NaN lse at row %zu of %zu", r, b->rows);
    else if (sees ? !isfinite(l) : l != -INFINITY)
      snprintf(why, len, "wrong lse %g at row %zu, which sees %s key", l, r, sees ? "a" : "no");
  }
}

/* The checked rows against their reference, within the tolerances. */
static void compare(const clattn__fwd_bench *b, char *why, size_t len) {
  const clattn__shape *s = &b->s;
  double err_o = 0, err_lse = 0;
  for (size_t k = 0; k < b->nchecked; k++) {
    size_t r = b->checked[k];
    const float *o = b->o_out + r * s->dv;
    for (size_t c = 0; c < s->dv; c++) err_o = fmax(err_o, fabs(o[c] - b->ref_o[k * s->dv + c]));
    float l = b->lse_out[r];
    double e = isinf(b->ref_lse[k]) ? (l == b->ref_lse[k] ? 0 : INFINITY) : fabs(l - b->ref_lse[k]);
    if (!(e <= err_lse)) err_lse = e;
  }
  if (!(err_o <= b->tol_o) || !(err_lse <= b->tol_lse))
    snprintf(why, len,
             "wrong result: max|o - ref| %.3g (tolerance %.3g), max|lse - ref| %.3g (%.3g) on %s",
             err_o, b->tol_o, err_lse, b->tol_lse,
             b->nchecked == b->rows ? "every row" : "sampled rows");
}

void clattn__fwd_bench_check(clattn__fwd_bench *b, char *why, size_t len) {
  why[0] = 0;
  cl_int err = clattn__tune_read(b->queue, b->buf[3], b->s.dtype, b->o_out, b->o_elems);
  if (err == CL_SUCCESS)
    err = clEnqueueReadBuffer(b->queue, b->buf[4], CL_TRUE, 0, b->rows * sizeof(float), b->lse_out,
                              0, NULL, NULL);
  if (err != CL_SUCCESS)
    snprintf(why, len, "reading the output failed: %s", clattn__cl_error_name(err));
  else
    check_written(b, why, len);
  if (!why[0]) compare(b, why, len);
}

void clattn__fwd_bench_free(clattn__fwd_bench *b) {
  if (!b) return;
  for (int i = 0; i < 5; i++)
    if (b->buf[i]) clReleaseMemObject(b->buf[i]);
  for (int i = 0; i < 4; i++)
    if (b->kv[i]) clReleaseMemObject(b->kv[i]);
  for (int i = 0; i < 3; i++) free(b->host[i]);
  free(b->o_out), free(b->lse_out), free(b->checked), free(b->ref_o), free(b->ref_lse);
  free(b);
}
