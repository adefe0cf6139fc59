/* One checked run of packed variable-length sequences (CLATTN_VARLEN) through clattn_forward_ex
 * and clattn_backward_ex, against the references run sequence by sequence. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void check_varlen_lengths(const clattn_problem *p, const size_t *lengths, int *cu_q, int *cu_kv) {
  long long nq = (long long)p->seqlen_q, nkv = (long long)p->seqlen_kv;
  /* The longest, a middle one, no queries, one query over no keys; odd lengths throughout. */
  const long long lq[4] = {nq, nq / 2 + 1, 0, 1}, lkv[4] = {nkv, nkv / 3 + 1, nkv / 2, 0};
  cu_q[0] = cu_kv[0] = 0;
  for (size_t b = 0; b < p->batch; b++) {
    long long q = lengths ? (long long)lengths[b] : lq[b % 4];
    long long kv = lengths ? (long long)lengths[b] : lkv[b % 4];
    cu_q[b + 1] = cu_q[b] + (int)(q < nq ? q : nq);
    cu_kv[b + 1] = cu_kv[b] + (int)(kv < nkv ? kv : nkv);
  }
}

/* Sequence b alone as an ordinary problem, and host views of its rows. */
static clattn_problem entry(const clattn_problem *p, const int *cu_q, const int *cu_kv, size_t b) {
  clattn_problem e = *p;
  e.batch = 1, e.seqlen_q = (size_t)(cu_q[b + 1] - cu_q[b]);
  e.seqlen_kv = (size_t)(cu_kv[b + 1] - cu_kv[b]);
  e.flags &= ~(unsigned)(CLATTN_VARLEN | CLATTN_ALIBI_PER_BATCH);
  e.total_q = e.total_kv = 0;
  return e;
}

static ref_view rows_of(const check_tensor *t, int first) {
  ref_view v = check_host_view(t);
  v.offset += (size_t)first * v.stride_seq;
  return v;
}

/* The error of the device's rows of one sequence (view t from row first, packed reference
 * [heads][n][dim]) and of the naive's, folded into err and nerr. */
static void fold(const check_tensor *t, int first, size_t heads, size_t n, size_t dim,
                 const double *ref, const float *naive, double *err, double *nerr) {
  for (size_t h = 0; h < heads; h++)
    for (size_t i = 0; i < n; i++)
      for (size_t c = 0; c < dim; c++) {
        size_t at =
            t->view.offset + ((size_t)first + i) * t->view.stride_seq + h * t->view.stride_head + c;
        double x = t->host[at], r = ref[(h * n + i) * dim + c];
        *err = fmax(*err, isfinite(x) || x == r ? (x == r ? 0 : fabs(x - r)) : INFINITY);
        if (isfinite(naive[(h * n + i) * dim + c]))
          *nerr = fmax(*nerr, fabs((double)naive[(h * n + i) * dim + c] - r));
      }
}

/* One call of the pass, in ms from a marker before it to its end (OpenCL events). */
static double timed(clattn_context *ctx, const clattn_problem *p, const clattn_args *a,
                    int backward, clattn_status *st) {
  cl_event start = NULL, done = NULL;
  clEnqueueMarkerWithWaitList(clattn_context_queue(ctx), 0, NULL, &start);
  *st = backward ? clattn_backward_ex(ctx, p, a, 0, NULL, &done)
                 : clattn_forward_ex(ctx, p, a, 0, NULL, &done);
  double ms = -1.0;
  cl_ulong t0 = 0, t1 = 0;
  if (*st == CLATTN_OK && clWaitForEvents(1, &done) == CL_SUCCESS &&
      clGetEventProfilingInfo(start, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL) == 0 &&
      clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == 0)
    ms = t1 > t0 ? (t1 - t0) / 1e6 : 0.0;
  if (start) clReleaseEvent(start);
  if (done) clReleaseEvent(done);
  return ms;
}

static cl_int fill_nan(clattn_context *ctx, check_tensor *t, clattn_dtype dt) {
  float nan = NAN;
  uint16_t bits = dt == CLATTN_F32 ? 0 : ref_half_bits(dt, NAN);
  size_t es = check_elem_size(dt);
  return t->elems ? clEnqueueFillBuffer(clattn_context_queue(ctx), t->buf,
                                        dt == CLATTN_F32 ? (void *)&nan : (void *)&bits, es, 0,
                                        t->elems * es, 0, NULL, NULL)
                  : CL_SUCCESS;
}

clattn_status check_varlen_run(clattn_context *ctx, const check_spec *spec, int backward,
                               check_varlen_result *r) {
  memset(r, 0, sizeof *r);
  if (check_skipped()) return r->pass = 1, CLATTN_OK;
  check_spec sp = *spec;
  clattn_problem *p = &sp.problem;
  size_t B = p->batch, hq = p->heads_q, hkv = p->heads_kv ? p->heads_kv : hq, d = p->head_dim,
         dv = p->head_dim_v ? p->head_dim_v : d;
  int *cu_q = malloc((B + 1) * sizeof *cu_q), *cu_kv = malloc((B + 1) * sizeof *cu_kv);
  check_varlen_lengths(p, sp.lengths, cu_q, cu_kv);
  p->flags |= CLATTN_VARLEN, p->total_q = (size_t)cu_q[B], p->total_kv = (size_t)cu_kv[B];
  size_t tq = p->total_q, tkv = p->total_kv;
  /* The packed tensors: one "batch entry" of total rows; q k v o d_o dq dk dv. */
  check_spec one = sp;
  one.problem.batch = 1;
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)sp.seed << 1 | 1);
  cl_context cl = clattn_context_cl_context(ctx);
  size_t seq[8] = {tq, tkv, tkv, tq, tq, tq, tkv, tkv},
         heads[8] = {hq, hkv, hkv, hq, hq, hq, hkv, hkv};
  size_t dims[8] = {d, d, dv, dv, dv, d, d, dv};
  check_tensor t[8];
  memset(t, 0, sizeof t);
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < 8 && err == CL_SUCCESS; i++)
    err = check_make_tensor(cl, &t[i], &one, seq[i], heads[i], dims[i], &rng);
  for (int i = 3; i < 8 && err == CL_SUCCESS; i++)
    if (i != 4) err = fill_nan(ctx, &t[i], p->dtype);
  check_extras x = {0};
  if (err == CL_SUCCESS) err = check_make_extras(ctx, &sp, backward, &x);
  cl_mem lse = NULL, cq = NULL, ck = NULL;
  size_t rows = hq * tq;
  float nan = NAN;
  if (err == CL_SUCCESS)
    lse = clCreateBuffer(cl, CL_MEM_READ_WRITE, (rows ? rows : 1) * sizeof(float), NULL, &err);
  if (err == CL_SUCCESS && rows)
    err = clEnqueueFillBuffer(clattn_context_queue(ctx), lse, &nan, sizeof nan, 0,
                              rows * sizeof nan, 0, NULL, NULL);
  if (err == CL_SUCCESS)
    cq = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (B + 1) * sizeof(int), cu_q,
                        &err);
  if (err == CL_SUCCESS)
    ck = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (B + 1) * sizeof(int), cu_kv,
                        &err);
  clattn_status st = CLATTN_ERR_OPENCL;
  float *got_lse = calloc(rows ? rows : 1, sizeof(float));
  float *got_sinks = calloc(hq ? hq : 1, sizeof(float));
  if (err != CL_SUCCESS) goto done;
  clattn_args a = {0};
  a.q = t[0].view, a.k = t[1].view, a.v = t[2].view, a.o = t[3].view, a.d_o = t[4].view;
  a.dq = t[5].view, a.dk = t[6].view, a.dv = t[7].view, a.lse = lse;
  a.cu_seqlens_q = cq, a.cu_seqlens_kv = ck;
  check_set_args(&a, &x);
  st = clattn_forward_ex(ctx, p, &a, 0, NULL, NULL);
  if (st == CLATTN_OK && backward) st = clattn_backward_ex(ctx, p, &a, 0, NULL, NULL);
  cl_command_queue queue = clattn_context_queue(ctx);
  for (int i = 3; i < 8 && st == CLATTN_OK; i++)
    if (i != 4 && check_read(queue, t[i].buf, p->dtype, t[i].host, t[i].elems, 0, NULL))
      st = CLATTN_ERR_OPENCL;
  if (st == CLATTN_OK && rows &&
      clEnqueueReadBuffer(queue, lse, CL_TRUE, 0, rows * sizeof(float), got_lse, 0, NULL, NULL))
    st = CLATTN_ERR_OPENCL;
  if (st == CLATTN_OK && x.d_sinks_buf && hq &&
      clEnqueueReadBuffer(queue, x.d_sinks_buf, CL_TRUE, 0, hq * sizeof(float), got_sinks, 0, NULL,
                          NULL))
    st = CLATTN_ERR_OPENCL;
  if (st != CLATTN_OK) goto done;
  if (sp.repeat > 0) {
    double *ms = calloc((size_t)sp.repeat, sizeof *ms);
    for (int i = 0; i < sp.warmup + sp.repeat && st == CLATTN_OK; i++) {
      double t1 = timed(ctx, p, &a, backward, &st);
      if (i >= sp.warmup) ms[i - sp.warmup] = t1;
    }
    if (st == CLATTN_OK) {
      for (int i = 1; i < sp.repeat; i++) /* insertion sort: a few runs */
        for (int j = i; j > 0 && ms[j - 1] > ms[j]; j--) {
          double x = ms[j];
          ms[j] = ms[j - 1], ms[j - 1] = x;
        }
      r->median_ms = ms[sp.repeat / 2];
    }
    free(ms);
    if (st != CLATTN_OK) goto done;
  }
  if (sp.skip_check) {
    r->pass = 1;
    goto done;
  }
  double nerr_o = 0, nerr_l = 0, nerr[3] = {0}, nerr_s = 0;
  double *ref_sinks = calloc(hq ? hq : 1, sizeof(double));
  float *naive_sinks = calloc(hq ? hq : 1, sizeof(float));
  for (size_t b = 0; b < B; b++) {
    clattn_problem e = entry(p, cu_q, cu_kv, b);
    size_t n = e.seqlen_q, m = e.seqlen_kv, big = (n > m ? n : m) * (d > dv ? d : dv) * hq + 1;
    ref_extras rx = check_ref_extras(&x);
    if (rx.alibi && (p->flags & CLATTN_ALIBI_PER_BATCH)) rx.alibi += b * hq;
    ref_view vq = rows_of(&t[0], cu_q[b]), vk = rows_of(&t[1], cu_kv[b]),
             vv = rows_of(&t[2], cu_kv[b]), vg = rows_of(&t[4], cu_q[b]);
    double *r64 = malloc(big * sizeof *r64), *l64 = malloc((hq * n + 1) * sizeof *l64);
    float *r32 = malloc(big * sizeof *r32), *l32 = malloc((hq * n + 1) * sizeof *l32);
    ref_forward_ex_f64(&e, &rx, vq, vk, vv, r64, l64);
    ref_forward_ex_f32(&e, &rx, vq, vk, vv, r32, l32);
    fold(&t[3], cu_q[b], hq, n, dv, r64, r32, &r->err_o, &nerr_o);
    for (size_t h = 0; h < hq; h++)
      for (size_t i = 0; i < n; i++) {
        double g = got_lse[h * tq + (size_t)cu_q[b] + i], ref = l64[h * n + i];
        r->err_lse = fmax(r->err_lse, g == ref ? 0 : isfinite(g) ? fabs(g - ref) : INFINITY);
        if (isfinite(l32[h * n + i])) nerr_l = fmax(nerr_l, fabs(l32[h * n + i] - ref));
      }
    if (backward) {
      double *g64[3], *s64 = calloc(hq ? hq : 1, sizeof(double));
      float *g32[3], *s32 = calloc(hq ? hq : 1, sizeof(float));
      size_t gn[3] = {hq * n * d, hkv * m * d, hkv * m * dv};
      for (int g = 0; g < 3; g++)
        g64[g] = malloc((gn[g] + 1) * sizeof(double)), g32[g] = malloc((gn[g] + 1) * sizeof(float));
      ref_backward_ex_f64(&e, &rx, vq, vk, vv, vg, g64[0], g64[1], g64[2], s64);
      ref_backward_ex_f32(&e, &rx, vq, vk, vv, vg, g32[0], g32[1], g32[2], s32);
      fold(&t[5], cu_q[b], hq, n, d, g64[0], g32[0], &r->err[0], &nerr[0]);
      fold(&t[6], cu_kv[b], hkv, m, d, g64[1], g32[1], &r->err[1], &nerr[1]);
      fold(&t[7], cu_kv[b], hkv, m, dv, g64[2], g32[2], &r->err[2], &nerr[2]);
      for (size_t h = 0; h < hq; h++) ref_sinks[h] += s64[h], naive_sinks[h] += s32[h];
      for (int g = 0; g < 3; g++) free(g64[g]), free(g32[g]);
      free(s64), free(s32);
    }
    free(r64), free(l64), free(r32), free(l32);
  }
  double floor = ref_tolerance_floor(p->dtype);
  r->tol_o = 2 * nerr_o + floor, r->tol_lse = 2 * nerr_l + floor;
  r->pass = r->err_o <= r->tol_o && r->err_lse <= r->tol_lse;
  for (int g = 0; backward && g < 3; g++) {
    r->tol[g] = 3 * nerr[g] + floor;
    r->pass = r->pass && r->err[g] <= r->tol[g];
  }
  if (backward && x.d_sinks_buf) {
    for (size_t h = 0; h < hq; h++) {
      r->err_sinks =
          fmax(r->err_sinks, isfinite(got_sinks[h]) ? fabs(got_sinks[h] - ref_sinks[h]) : INFINITY);
      nerr_s = fmax(nerr_s, fabs((double)naive_sinks[h] - ref_sinks[h]));
    }
    r->tol_sinks = 3 * nerr_s + floor;
    r->pass = r->pass && r->err_sinks <= r->tol_sinks;
  }
  free(ref_sinks), free(naive_sinks);
done:
  check_release_extras(&x);
  for (int i = 0; i < 8; i++) {
    if (t[i].buf) clReleaseMemObject(t[i].buf);
    free(t[i].host);
  }
  cl_mem m[3] = {lse, cq, ck};
  for (int i = 0; i < 3; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  free(cu_q), free(cu_kv), free(got_lse), free(got_sinks);
  r->status = st;
  check_finish(st, &r->pass);
  return st;
}
