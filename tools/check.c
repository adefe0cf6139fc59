/* One checked run of clattn_forward on random data, against the host references. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t check_elem_size(clattn_dtype t) {
  return t == CLATTN_F32 ? sizeof(float) : sizeof(uint16_t);
}

void *check_pack(clattn_dtype t, const float *x, size_t n) {
  if (t == CLATTN_F32) return NULL;
  uint16_t *bits = malloc((n ? n : 1) * sizeof *bits);
  for (size_t i = 0; bits && i < n; i++) bits[i] = ref_half_bits(t, x[i]);
  return bits;
}

cl_int check_read(cl_command_queue queue, cl_mem buf, clattn_dtype t, float *out, size_t n,
                  cl_uint num_wait, const cl_event *wait) {
  if (t == CLATTN_F32)
    return clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, n * sizeof(float), out, num_wait, wait,
                               NULL);
  uint16_t *bits = malloc((n ? n : 1) * sizeof *bits);
  if (!bits) return CL_OUT_OF_HOST_MEMORY;
  cl_int err =
      clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, n * sizeof *bits, bits, num_wait, wait, NULL);
  for (size_t i = 0; err == CL_SUCCESS && i < n; i++) out[i] = ref_half_value(t, bits[i]);
  free(bits);
  return err;
}

cl_int check_make_tensor(cl_context cl, check_tensor *t, const check_spec *sp, size_t seq,
                         size_t heads, size_t dim, uint64_t *rng) {
  size_t b = sp->problem.batch, packed = b * seq * heads * dim;
  clattn_dtype dt = sp->problem.dtype;
  t->elems = sp->offset + packed;
  t->host = malloc((t->elems ? t->elems : 1) * sizeof(float));
  if (!t->host) return CL_OUT_OF_HOST_MEMORY;
  ref_fill_normal(t->host, t->elems, rng);
  /* Half storage: the device gets the rounded values, and the references read the same. */
  for (size_t i = 0; dt != CLATTN_F32 && i < t->elems; i++) t->host[i] = ref_round(dt, t->host[i]);
  void *bits = check_pack(dt, t->host, t->elems);
  if (dt != CLATTN_F32 && !bits) return CL_OUT_OF_HOST_MEMORY;
  cl_int err;
  t->buf =
      clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                     (t->elems ? t->elems : 1) * check_elem_size(dt), bits ? bits : t->host, &err);
  free(bits);
  t->view = sp->bhsd ? clattn_bhsd(t->buf, seq, heads, dim) : clattn_bshd(t->buf, seq, heads, dim);
  t->view.offset = sp->offset;
  return err;
}

ref_view check_host_view(const check_tensor *t) {
  ref_view r = {t->host, t->view.offset, t->view.stride_batch, t->view.stride_seq,
                t->view.stride_head};
  return r;
}

cl_int check_make_extras(clattn_context *ctx, const check_spec *sp, int d_sinks, check_extras *x) {
  memset(x, 0, sizeof *x);
  const clattn_problem *p = &sp->problem;
  size_t hq = p->heads_q, nb = (p->flags & CLATTN_ALIBI_PER_BATCH) ? p->batch : 1;
  cl_context cl = clattn_context_cl_context(ctx);
  cl_int err = CL_SUCCESS;
  if (sp->alibi) {
    x->alibi = malloc((nb * hq ? nb * hq : 1) * sizeof(float));
    if (!x->alibi) return CL_OUT_OF_HOST_MEMORY;
    for (size_t b = 0; b < nb; b++)
      for (size_t h = 0; h < hq; h++)
        x->alibi[b * hq + h] = (float)(exp2(-8.0 * (h + 1) / hq) * (1.0 + 0.5 * b));
    x->alibi_buf = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                  (nb * hq ? nb * hq : 1) * sizeof(float), x->alibi, &err);
  }
  if (sp->sinks && err == CL_SUCCESS) {
    uint64_t rng = 0x51D5ull ^ ((uint64_t)sp->seed << 1 | 1);
    x->sinks = malloc((hq ? hq : 1) * sizeof(float));
    if (!x->sinks) return CL_OUT_OF_HOST_MEMORY;
    ref_fill_normal(x->sinks, hq, &rng);
    for (size_t h = 0; h < hq; h++) x->sinks[h] = h == 2 ? -INFINITY : x->sinks[h] + 1.0f;
    x->sinks_buf = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                  (hq ? hq : 1) * sizeof(float), x->sinks, &err);
    if (d_sinks && err == CL_SUCCESS)
      x->d_sinks_buf =
          clCreateBuffer(cl, CL_MEM_READ_WRITE, (hq ? hq : 1) * sizeof(float), NULL, &err);
    float nan = NAN;
    if (x->d_sinks_buf && err == CL_SUCCESS && hq)
      err = clEnqueueFillBuffer(clattn_context_queue(ctx), x->d_sinks_buf, &nan, sizeof nan, 0,
                                hq * sizeof nan, 0, NULL, NULL);
  }
  if (sp->seqlens_kv && err == CL_SUCCESS) {
    size_t nb = p->batch;
    long long n = (long long)p->seqlen_kv;
    x->seqlens_kv = malloc((nb ? nb : 1) * sizeof(int));
    if (!x->seqlens_kv) return CL_OUT_OF_HOST_MEMORY;
    const long long pattern[5] = {n, n * 2 / 3 + (n > 0), 0, -3, n + 5};
    for (size_t b = 0; b < nb; b++)
      x->seqlens_kv[b] = sp->lengths ? (int)sp->lengths[b] : (int)pattern[b % 5];
    x->seqlens_buf = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                    (nb ? nb : 1) * sizeof(int), x->seqlens_kv, &err);
  }
  return err;
}

void check_release_extras(check_extras *x) {
  cl_mem m[4] = {x->alibi_buf, x->sinks_buf, x->d_sinks_buf, x->seqlens_buf};
  for (int i = 0; i < 4; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  free(x->alibi), free(x->sinks), free(x->seqlens_kv);
  memset(x, 0, sizeof *x);
}

ref_extras check_ref_extras(const check_extras *x) {
  ref_extras r = {x->alibi, x->sinks, x->seqlens_kv};
  return r;
}

void check_set_args(clattn_args *a, const check_extras *x) {
  a->alibi_slopes = x->alibi_buf, a->sinks = x->sinks_buf, a->d_sinks = x->d_sinks_buf;
  a->seqlens_kv = x->seqlens_buf;
}

static double max_err_f64(const double *ref, const float *x, size_t n) {
  double e = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (isinf(ref[i]) && ref[i] == x[i]) continue; /* -inf LSE of rows that see no key */
    double d = fabs((double)x[i] - ref[i]);
    if (!(d <= e)) e = d; /* NaN propagates as a failure */
  }
  return e;
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

double check_time_forward(clattn_context *ctx, const clattn_problem *p, const clattn_tensor *q,
                          const clattn_tensor *k, const clattn_tensor *v, const clattn_tensor *o,
                          cl_mem lse, int by_events, clattn_status *st) {
  clattn_args a = {0};
  a.q = *q, a.k = *k, a.v = *v, a.o = *o, a.lse = lse;
  return check_time_forward_ex(ctx, p, &a, by_events, st);
}

check_clock check_call_begin(clattn_context *ctx, int by_events) {
  check_clock c = {now_ms(), NULL};
  if (by_events) clEnqueueMarkerWithWaitList(clattn_context_queue(ctx), 0, NULL, &c.start);
  return c;
}

double check_call_end(check_clock *c, cl_event ev, int by_events) {
  if (!ev) {
    if (c->start) clReleaseEvent(c->start);
    return -1.0;
  }
  clWaitForEvents(1, &ev);
  double ms = now_ms() - c->t0;
  /* A call that enqueues several commands returns a marker: it is timed from the marker
   * enqueued before it; a single kernel by its own start and end. */
  cl_command_type type = 0;
  clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof type, &type, NULL);
  cl_event from = type == CL_COMMAND_MARKER && c->start ? c->start : ev;
  cl_ulong begin = 0, end = 0;
  if (by_events &&
      clGetEventProfilingInfo(
          from, type == CL_COMMAND_MARKER ? CL_PROFILING_COMMAND_END : CL_PROFILING_COMMAND_START,
          sizeof begin, &begin, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS &&
      end > begin)
    ms = (end - begin) / 1e6;
  if (c->start) clReleaseEvent(c->start);
  clReleaseEvent(ev);
  return ms;
}

double check_time_forward_ex(clattn_context *ctx, const clattn_problem *p, const clattn_args *a,
                             int by_events, clattn_status *st) {
  cl_event ev = NULL;
  check_clock c = check_call_begin(ctx, by_events);
  *st = clattn_forward_ex(ctx, p, a, 0, NULL, &ev);
  return check_call_end(&c, *st == CLATTN_OK ? ev : NULL, by_events);
}

/* The call's arguments: the tensors t (q, k, v, o), the LSE and the variants' arrays. */
static clattn_args args_of(const check_tensor *t, cl_mem lse, const check_extras *x) {
  clattn_args a = {0};
  a.q = t[0].view, a.k = t[1].view, a.v = t[2].view, a.o = t[3].view, a.lse = lse;
  check_set_args(&a, x);
  return a;
}

static double timed_call(clattn_context *ctx, const check_spec *sp, check_tensor *t, cl_mem lse,
                         const check_extras *x, int by_events, clattn_status *st) {
  clattn_args a = args_of(t, lse, x);
  return check_time_forward_ex(ctx, &sp->problem, &a, by_events, st);
}

static void summarize(double *ms, int n, double *median, double *min, double *max) {
  qsort(ms, n, sizeof *ms, cmp_double);
  *median = ms[n / 2], *min = ms[0], *max = ms[n - 1];
}

/* Warm-up, then sp->repeat timed calls; with sp->compare_with, the two contexts alternate call
 * by call, so drift in the machine's speed affects both alike. */
static clattn_status time_runs(clattn_context *ctx, const check_spec *sp, check_tensor *t,
                               cl_mem lse, const check_extras *x, check_result *r) {
  cl_command_queue queue = clattn_context_queue(ctx);
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  r->timed_by_events = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  clattn_context *other = sp->compare_with;
  clattn_status st = CLATTN_OK;
  for (int i = 0; i < sp->warmup && st == CLATTN_OK; i++) {
    timed_call(ctx, sp, t, lse, x, 0, &st);
    if (other && st == CLATTN_OK) timed_call(other, sp, t, lse, x, 0, &st);
  }
  double *ms = calloc(sp->repeat, sizeof *ms), *ms2 = calloc(sp->repeat, sizeof *ms2);
  for (int i = 0; i < sp->repeat && st == CLATTN_OK; i++) {
    ms[i] = timed_call(ctx, sp, t, lse, x, r->timed_by_events, &st);
    if (other && st == CLATTN_OK)
      ms2[i] = timed_call(other, sp, t, lse, x, r->timed_by_events, &st);
  }
  if (st == CLATTN_OK && sp->repeat > 0) {
    summarize(ms, sp->repeat, &r->median_ms, &r->min_ms, &r->max_ms);
    if (other) summarize(ms2, sp->repeat, &r->cmp_median_ms, &r->cmp_min_ms, &r->cmp_max_ms);
  }
  free(ms);
  free(ms2);
  return st;
}

void check_forward_errors(const clattn_problem *p, const ref_extras *rx, ref_view vq, ref_view vk,
                          ref_view vv, const check_tensor *o, const float *lse, check_result *r) {
  size_t dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  size_t rows = p->batch * p->heads_q * p->seqlen_q, n = rows * dv;
  double *o64 = malloc((n ? n : 1) * sizeof *o64), *l64 = malloc((rows ? rows : 1) * sizeof *l64);
  float *o32 = malloc((n ? n : 1) * sizeof *o32), *l32 = malloc((rows ? rows : 1) * sizeof *l32),
        *got = malloc((n ? n : 1) * sizeof *got);
  ref_forward_ex_f64(p, rx, vq, vk, vv, o64, l64);
  ref_forward_ex_f32(p, rx, vq, vk, vv, o32, l32);
  /* Gather the device's output from its strided view into the references' packed order. */
  size_t idx = 0;
  for (size_t b = 0; b < p->batch; b++)
    for (size_t h = 0; h < p->heads_q; h++)
      for (size_t i = 0; i < p->seqlen_q; i++, idx += dv)
        memcpy(got + idx,
               o->host + o->view.offset + b * o->view.stride_batch + i * o->view.stride_seq +
                   h * o->view.stride_head,
               dv * sizeof(float));
  r->err_o = max_err_f64(o64, got, n);
  r->naive_err_o = max_err_f64(o64, o32, n);
  r->tol_o = 2.0 * r->naive_err_o + ref_tolerance_floor(p->dtype);
  r->pass = r->err_o <= r->tol_o;
  if (lse) {
    r->err_lse = max_err_f64(l64, lse, rows);
    r->naive_err_lse = max_err_f64(l64, l32, rows);
    r->tol_lse = 2.0 * r->naive_err_lse + ref_tolerance_floor(p->dtype);
    r->pass = r->pass && r->err_lse <= r->tol_lse;
  }
  free(o64), free(l64), free(o32), free(l32), free(got);
}

int check_fail_fast;
static int failed_once; /* a check run of this process failed (Criterion forks each case) */

void check_finish(clattn_status st, int *pass) {
  if (st != CLATTN_OK) *pass = 0;
  if (!*pass) failed_once = 1;
}

int check_skipped(void) {
  return check_fail_fast && failed_once;
}

clattn_status check_run(clattn_context *ctx, const check_spec *sp, check_result *r) {
  memset(r, 0, sizeof *r);
  if (check_skipped()) return r->pass = 1, CLATTN_OK;
  const clattn_problem *p = &sp->problem;
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q,
         dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)sp->seed << 1 | 1);
  cl_context cl = clattn_context_cl_context(ctx);
  check_tensor t[4] = {{0}};
  cl_int err = check_make_tensor(cl, &t[0], sp, p->seqlen_q, p->heads_q, p->head_dim, &rng);
  if (err == CL_SUCCESS)
    err = check_make_tensor(cl, &t[1], sp, p->seqlen_kv, hkv, p->head_dim, &rng);
  if (err == CL_SUCCESS) err = check_make_tensor(cl, &t[2], sp, p->seqlen_kv, hkv, dv, &rng);
  if (err == CL_SUCCESS) err = check_make_tensor(cl, &t[3], sp, p->seqlen_q, p->heads_q, dv, &rng);
  size_t rows = p->batch * p->heads_q * p->seqlen_q;
  cl_mem lse = NULL;
  if (err == CL_SUCCESS && sp->with_lse)
    lse = clCreateBuffer(cl, CL_MEM_READ_WRITE, (rows ? rows : 1) * sizeof(float), NULL, &err);
  check_extras x = {0};
  if (err == CL_SUCCESS) err = check_make_extras(ctx, sp, 0, &x);
  clattn_status st = CLATTN_ERR_OPENCL;
  if (err != CL_SUCCESS) goto done;
  /* The reads wait for the call's event: the queue may be out of order. */
  cl_event ran = NULL;
  clattn_args a = args_of(t, lse, &x);
  st = clattn_forward_ex(ctx, p, &a, 0, NULL, &ran);
  if (st != CLATTN_OK) goto done;
  cl_command_queue queue = clattn_context_queue(ctx);
  float *lse_host = calloc(rows ? rows : 1, sizeof(float));
  err =
      check_read(queue, t[3].buf, p->dtype, t[3].host, t[3].elems, ran ? 1 : 0, ran ? &ran : NULL);
  if (err == CL_SUCCESS && lse && rows)
    err = clEnqueueReadBuffer(queue, lse, CL_TRUE, 0, rows * sizeof(float), lse_host, ran ? 1 : 0,
                              ran ? &ran : NULL, NULL);
  if (ran) clReleaseEvent(ran);
  if (err != CL_SUCCESS) {
    free(lse_host);
    st = CLATTN_ERR_OPENCL;
    goto done;
  }
  if (!sp->skip_check) {
    ref_extras rx = check_ref_extras(&x);
    check_forward_errors(p, &rx, check_host_view(&t[0]), check_host_view(&t[1]),
                         check_host_view(&t[2]), &t[3], lse ? lse_host : NULL, r);
  } else {
    r->pass = 1;
  }
  free(lse_host);
  if (sp->repeat > 0) st = time_runs(ctx, sp, t, lse, &x, r);
done:
  check_release_extras(&x);
  for (int i = 0; i < 4; i++) {
    if (t[i].buf) clReleaseMemObject(t[i].buf);
    free(t[i].host);
  }
  if (lse) clReleaseMemObject(lse);
  r->status = st;
  check_finish(st, &r->pass);
  return st;
}
