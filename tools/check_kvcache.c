/* One checked run of a KV cache (clattn_kv_cache): filled by clattn_kv_append, read by
 * clattn_forward_ex, against the references on the cache's own (dequantised) contents. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The cache's buffers and their host copies. */
typedef struct cache {
  clattn_kv_cache c;
  size_t slots, per, nk, nv, ns; /* slots of per tokens; elements of k, v and each scale */
  int *table, *lens;
  size_t max_pages;
} cache;

static void cache_release(cache *x) {
  cl_mem m[6] = {x->c.k.buffer, x->c.v.buffer,    x->c.k_scale,
                 x->c.v_scale,  x->c.block_table, x->c.seqlens};
  for (int i = 0; i < 6; i++)
    if (m[i]) clReleaseMemObject(m[i]);
  free(x->table), free(x->lens);
}

static cl_mem nan_buffer(clattn_context *ctx, clattn_dtype t, size_t n, cl_int *err) {
  if (*err != CL_SUCCESS) return NULL;
  size_t es = t == CLATTN_I8 ? 1 : check_elem_size(t);
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, (n ? n : 1) * es,
                            NULL, err);
  float nan = NAN;
  uint16_t bits = t == CLATTN_F32 || t == CLATTN_I8 ? 0 : ref_half_bits(t, NAN);
  cl_char i8 = 0x55; /* int8 has no NaN: its scales do (unwritten rows dequantise to NaN) */
  const void *pat = t == CLATTN_F32 ? (void *)&nan : t == CLATTN_I8 ? (void *)&i8 : (void *)&bits;
  if (*err == CL_SUCCESS && n)
    *err = clEnqueueFillBuffer(clattn_context_queue(ctx), m, pat, es, 0, n * es, 0, NULL, NULL);
  return m;
}

static cl_mem int_buffer(clattn_context *ctx, const int *v, size_t n, cl_int *err) {
  if (*err != CL_SUCCESS) return NULL;
  return clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                        (n ? n : 1) * sizeof(int), (void *)v, err);
}

/* Lengths, pages (a shuffled pool with spare pages; entry 1's row out of the pool with
 * bad_pages) and the NaN-filled buffers. */
static cl_int cache_make(clattn_context *ctx, const check_spec *sp, const check_kv *kv,
                         uint64_t *rng, cache *x) {
  memset(x, 0, sizeof *x);
  const clattn_problem *p = &sp->problem;
  size_t B = p->batch, hkv = p->heads_kv ? p->heads_kv : p->heads_q, cap = p->seqlen_kv;
  size_t d = p->head_dim, dv = p->head_dim_v ? p->head_dim_v : d, ps = kv->page_size;
  x->lens = malloc((B ? B : 1) * sizeof(int));
  if (!x->lens) return CL_OUT_OF_HOST_MEMORY;
  const long long pattern[6] = {(long long)cap,    (long long)cap * 2 / 3 + 1, 0, 1, -3,
                                (long long)cap + 5};
  for (size_t b = 0; b < B; b++) {
    x->lens[b] = (int)(sp->lengths ? (long long)sp->lengths[b] : pattern[b % 6]);
  }
  x->c.dtype = kv->dtype, x->c.page_size = ps;
  if (ps) {
    x->max_pages = (cap + ps - 1) / ps;
    x->max_pages += !x->max_pages;
    size_t used = 0;
    for (size_t b = 0; b < B; b++) {
      long long n = x->lens[b];
      used += n >= 0 && n <= (long long)cap ? ((size_t)n + ps - 1) / ps : x->max_pages;
    }
    x->slots = used + 3, x->per = ps;
    size_t *perm = malloc(x->slots * sizeof *perm);
    x->table = malloc((B * x->max_pages ? B * x->max_pages : 1) * sizeof(int));
    if (!perm || !x->table) return free(perm), CL_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < x->slots; i++) perm[i] = i;
    /* CLATTN_PAGE_ORDER=sequential (an experiment): pages in pool order, to tell what a shuffled
     * pool's scattered reads cost from what the kernels' table reads do. */
    const char *order = getenv("CLATTN_PAGE_ORDER");
    const int shuffle = !(order && !strcmp(order, "sequential"));
    for (size_t i = x->slots; shuffle && i > 1; i--) { /* Fisher-Yates on the test's generator */
      *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
      size_t j = *rng % i, t = perm[i - 1];
      perm[i - 1] = perm[j], perm[j] = t;
    }
    size_t next = 0;
    for (size_t b = 0; b < B; b++) {
      long long n = x->lens[b];
      size_t mine = n >= 0 && n <= (long long)cap ? ((size_t)n + ps - 1) / ps : x->max_pages;
      for (size_t i = 0; i < x->max_pages; i++)
        x->table[b * x->max_pages + i] = i < mine ? (int)perm[next++] : -1;
      if (kv->bad_pages && b == 1)
        for (size_t i = 0; i < x->max_pages; i++)
          x->table[b * x->max_pages + i] = i % 2 ? -5 : (int)(x->slots + i);
    }
    free(perm);
    x->c.num_pages = x->slots, x->c.max_pages = x->max_pages;
  } else {
    x->slots = B, x->per = cap;
  }
  x->nk = x->slots * x->per * hkv * d, x->nv = x->slots * x->per * hkv * dv;
  x->ns = x->slots * x->per * hkv;
  cl_int err = CL_SUCCESS;
  clattn_dtype et = kv->dtype;
  x->c.k.buffer = nan_buffer(ctx, et, x->nk, &err);
  x->c.v.buffer = nan_buffer(ctx, et, x->nv, &err);
  /* Views: [slot][token][head][dim], or paged HND [slot][head][token][dim]. */
  size_t dims[2] = {d, dv};
  clattn_tensor *views[2] = {&x->c.k, &x->c.v};
  for (int i = 0; i < 2; i++) {
    views[i]->offset = 0, views[i]->stride_batch = x->per * hkv * dims[i];
    views[i]->stride_seq = kv->hnd && ps ? dims[i] : hkv * dims[i];
    views[i]->stride_head = kv->hnd && ps ? x->per * dims[i] : dims[i];
  }
  if (et == CLATTN_I8) {
    x->c.k_scale = nan_buffer(ctx, CLATTN_F32, x->ns, &err);
    x->c.v_scale = nan_buffer(ctx, CLATTN_F32, x->ns, &err);
  }
  if (ps) x->c.block_table = int_buffer(ctx, x->table, B * x->max_pages, &err);
  int *zeros = calloc(B ? B : 1, sizeof(int));
  x->c.seqlens = zeros ? int_buffer(ctx, zeros, B, &err) : NULL;
  free(zeros);
  return zeros ? err : CL_OUT_OF_HOST_MEMORY;
}

/* Entry b's key j in the pool: its slot and token, or 0 when its page is outside it. */
static int where(const cache *x, size_t b, size_t j, size_t *slot, size_t *tok) {
  if (!x->c.page_size) return *slot = b, *tok = j, 1;
  int pg = x->table[b * x->max_pages + j / x->c.page_size];
  *slot = pg >= 0 && (size_t)pg < x->slots ? (size_t)pg : 0, *tok = j % x->c.page_size;
  return pg >= 0 && (size_t)pg < x->slots;
}

/* The cache's contents as dense host tensors [batch][capacity][heads_kv][dim] (a page outside
 * the pool: 0), and the largest error of the appended rows against their sources src (exact;
 * int8: beyond half a quantum, and the scale against max|x| / 127). */
static cl_int read_back(clattn_context *ctx, const clattn_problem *p, const cache *x, int which,
                        const check_tensor *src, float *dense, double *err) {
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q, cap = p->seqlen_kv;
  size_t dim = which ? (p->head_dim_v ? p->head_dim_v : p->head_dim) : p->head_dim;
  size_t n = which ? x->nv : x->nk;
  const clattn_tensor *view = which ? &x->c.v : &x->c.k;
  cl_command_queue q = clattn_context_queue(ctx);
  float *raw = malloc((n ? n : 1) * sizeof(float)), *sc = NULL;
  cl_int e = raw ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  if (e == CL_SUCCESS && x->c.dtype == CLATTN_I8) {
    signed char *bytes = malloc(n ? n : 1);
    sc = malloc((x->ns ? x->ns : 1) * sizeof(float));
    e = bytes && sc ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
    if (e == CL_SUCCESS && n)
      e = clEnqueueReadBuffer(q, view->buffer, CL_TRUE, 0, n, bytes, 0, NULL, NULL);
    if (e == CL_SUCCESS && x->ns)
      e = clEnqueueReadBuffer(q, which ? x->c.v_scale : x->c.k_scale, CL_TRUE, 0,
                              x->ns * sizeof(float), sc, 0, NULL, NULL);
    for (size_t i = 0; e == CL_SUCCESS && i < n; i++) raw[i] = (float)bytes[i];
    free(bytes);
  } else if (e == CL_SUCCESS && n) {
    e = check_read(q, view->buffer, p->dtype, raw, n, 0, NULL);
  }
  for (size_t b = 0; e == CL_SUCCESS && b < p->batch; b++)
    for (size_t j = 0; j < cap; j++)
      for (size_t h = 0; h < hkv; h++) {
        size_t slot, tok, row = ((b * cap + j) * hkv + h) * dim;
        int ok = where(x, b, j, &slot, &tok);
        float s = sc ? sc[(slot * x->per + tok) * hkv + h] : 1.0f, mx = 0.0f;
        const float *in = src->host + src->view.offset + b * src->view.stride_batch +
                          j * src->view.stride_seq + h * src->view.stride_head;
        for (size_t c = 0; c < dim; c++) mx = fmaxf(mx, fabsf(in[c]));
        if (ok && sc) *err = fmax(*err, fabs(s - mx / 127.0f) / fmax(mx / 127.0f, 1e-30) > 1e-6);
        for (size_t c = 0; c < dim; c++) {
          float y = ok ? raw[slot * view->stride_batch + tok * view->stride_seq +
                             h * view->stride_head + c]
                       : 0.0f;
          dense[row + c] = sc ? y * s : y;
          double bound = sc ? s * (0.5 + 1e-4) : 0.0;
          double off = fabs((double)dense[row + c] - in[c]);
          if (ok && !(off <= bound)) *err = fmax(*err, isnan(off) ? INFINITY : off - bound);
        }
      }
  free(raw), free(sc);
  return e;
}

/* An int8 cache's cost in accuracy: the device's O against the double reference on the rows
 * before quantisation (the unquantised cache's exact result), max |diff| / max |ref| and
 * mean |diff| / mean |ref| over every element. */
static void quantisation_error(const clattn_problem *p, const ref_extras *rx, ref_view vq,
                               ref_view vk, ref_view vv, const check_tensor *o, check_kv *kv) {
  size_t dv = p->head_dim_v ? p->head_dim_v : p->head_dim, n = p->batch * p->heads_q * p->seqlen_q;
  double *ref = malloc((n * dv ? n * dv : 1) * sizeof *ref);
  double *lse = malloc((n ? n : 1) * sizeof *lse);
  double dmax = 0, rmax = 0, dsum = 0, rsum = 0;
  if (ref && lse) {
    ref_forward_ex_f64(p, rx, vq, vk, vv, ref, lse);
    size_t idx = 0;
    for (size_t b = 0; b < p->batch; b++)
      for (size_t h = 0; h < p->heads_q; h++)
        for (size_t i = 0; i < p->seqlen_q; i++)
          for (size_t c = 0; c < dv; c++, idx++) {
            double got = o->host[o->view.offset + b * o->view.stride_batch +
                                 i * o->view.stride_seq + h * o->view.stride_head + c];
            double e = fabs(got - ref[idx]), a = fabs(ref[idx]);
            dmax = fmax(dmax, e), rmax = fmax(rmax, a), dsum += e, rsum += a;
          }
  }
  kv->q8_max_rel = rmax > 0 ? dmax / rmax : 0.0;
  kv->q8_mean_rel = rsum > 0 ? dsum / rsum : 0.0;
  free(ref), free(lse);
}

/* Without the check: the cache filled with 0.5 (int8: 64 at scale 1/128) on the device. */
static cl_int fill_plain(clattn_context *ctx, const cache *x) {
  cl_command_queue q = clattn_context_queue(ctx);
  clattn_dtype t = x->c.dtype;
  float half_one = 0.5f, scale = 1.0f / 128;
  uint16_t bits = t == CLATTN_F16 || t == CLATTN_BF16 ? ref_half_bits(t, 0.5f) : 0;
  cl_char i8 = 64;
  size_t es = t == CLATTN_I8 ? 1 : check_elem_size(t);
  const void *pat = t == CLATTN_F32 ? (void *)&half_one : t == CLATTN_I8 ? (void *)&i8 : &bits;
  cl_int e = CL_SUCCESS;
  if (x->nk) e = clEnqueueFillBuffer(q, x->c.k.buffer, pat, es, 0, x->nk * es, 0, NULL, NULL);
  if (e == CL_SUCCESS && x->nv)
    e = clEnqueueFillBuffer(q, x->c.v.buffer, pat, es, 0, x->nv * es, 0, NULL, NULL);
  for (int i = 0; i < 2 && e == CL_SUCCESS && x->c.k_scale && x->ns; i++)
    e = clEnqueueFillBuffer(q, i ? x->c.v_scale : x->c.k_scale, &scale, sizeof scale, 0,
                            x->ns * sizeof scale, 0, NULL, NULL);
  return e;
}

static int cmp_ms(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The K/V bytes a forward reads: of each entry, the keys some row sees (all of its length, but
 * for a window's left bound), in the cache's element type, with int8's two scales per token. */
static double bytes_read(const clattn_problem *p, const check_kv *kv, const int *lens) {
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q, d = p->head_dim;
  size_t dv = p->head_dim_v ? p->head_dim_v : d;
  double per = kv->dtype == CLATTN_I8 ? (double)(d + dv) + 8.0
                                      : (double)(d + dv) * check_elem_size(kv->dtype);
  double keys = 0.0;
  for (size_t b = 0; b < p->batch; b++) {
    long long n = lens[b], lo = 0;
    if (n < 0 || n > (long long)p->seqlen_kv) continue;
    if ((p->flags & CLATTN_WINDOW) && p->window_left >= 0)
      lo = n - (long long)p->seqlen_q - p->window_left;
    keys += (double)(n - (lo > 0 ? lo : 0));
  }
  return keys * (double)hkv * per;
}

/* sp->warmup, then sp->repeat timed forwards, call i reading copy i % copies of the cache: a
 * working set of at least twice the device's global-memory cache, so that the cache is read
 * from memory as a serving engine's would be, not from a warm L2. */
static clattn_status time_calls(clattn_context *ctx, const check_spec *sp, check_kv *kv,
                                const cache *x, const clattn_args *a, check_result *r) {
  cl_ulong l2 = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof l2, &l2,
                  NULL);
  size_t es = x->c.dtype == CLATTN_I8 ? 1 : check_elem_size(x->c.dtype);
  double bytes = (double)(x->nk + x->nv) * es + (x->c.k_scale ? 8.0 * x->ns : 0.0);
  int copies = bytes > 0 ? (int)(2.0 * (double)l2 / bytes) + 1 : 1;
  if (copies > 32) copies = 32;
  cache *c = calloc((size_t)copies, sizeof *c);
  cl_command_queue q = clattn_context_queue(ctx);
  cl_context cl = clattn_context_cl_context(ctx);
  cl_int err = c ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (int i = 0; i < copies && err == CL_SUCCESS; i++) {
    c[i] = *x;
    if (!i) continue;
    cl_mem *m[4] = {&c[i].c.k.buffer, &c[i].c.v.buffer, &c[i].c.k_scale, &c[i].c.v_scale};
    size_t n[4] = {x->nk * es, x->nv * es, x->ns * 4, x->ns * 4};
    for (int j = 0; j < 4 && err == CL_SUCCESS; j++) {
      cl_mem from = *m[j];
      *m[j] = NULL;
      if (!from || !n[j]) continue;
      *m[j] = clCreateBuffer(cl, CL_MEM_READ_WRITE, n[j], NULL, &err);
      if (err == CL_SUCCESS) err = clEnqueueCopyBuffer(q, from, *m[j], 0, 0, n[j], 0, NULL, NULL);
    }
  }
  if (err == CL_SUCCESS) err = clFinish(q);
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  r->timed_by_events = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  double *ms = calloc((size_t)sp->repeat, sizeof *ms);
  clattn_status st = err == CL_SUCCESS && ms ? CLATTN_OK : CLATTN_ERR_OPENCL;
  for (int i = 0; i < sp->warmup + sp->repeat && st == CLATTN_OK; i++) {
    clattn_args call = *a;
    call.kv_cache = &c[i % copies].c;
    double t = check_time_forward_ex(ctx, &sp->problem, &call, r->timed_by_events, &st);
    if (i >= sp->warmup) ms[i - sp->warmup] = t;
  }
  if (st == CLATTN_OK) {
    qsort(ms, (size_t)sp->repeat, sizeof *ms, cmp_ms);
    r->median_ms = ms[sp->repeat / 2], r->min_ms = ms[0], r->max_ms = ms[sp->repeat - 1];
  }
  /* The host's cost of a call (validation, planning, arguments, enqueue): the wall clock around
   * each call, not waited for, made on an idle queue (finished before it, outside the clock):
   * calls back to back fill the driver's queue, whose enqueues then wait for the device (an
   * H100's host column read 14-21 us that way, growing with the call's device time). */
  for (int i = 0; i < sp->repeat && st == CLATTN_OK; i++) {
    clattn_args call = *a;
    call.kv_cache = &c[i % copies].c;
    if (clFinish(q) != CL_SUCCESS) {
      st = CLATTN_ERR_OPENCL;
      break;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = clattn_forward_ex(ctx, &sp->problem, &call, 0, NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms[i] = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
  }
  if (clFinish(q) != CL_SUCCESS && st == CLATTN_OK) st = CLATTN_ERR_OPENCL;
  if (st == CLATTN_OK) {
    qsort(ms, (size_t)sp->repeat, sizeof *ms, cmp_ms);
    kv->host_us = ms[sp->repeat / 2];
  }
  for (int i = 1; c && i < copies; i++) {
    cl_mem m[4] = {c[i].c.k.buffer, c[i].c.v.buffer, c[i].c.k_scale, c[i].c.v_scale};
    for (int j = 0; j < 4; j++)
      if (m[j]) clReleaseMemObject(m[j]);
  }
  free(c), free(ms);
  kv->copies = copies;
  return st;
}

/* Two appends: rows [0, first) at length 0, then the rest up to the capacity at length first. */
static clattn_status append_all(clattn_context *ctx, const clattn_problem *p, const check_kv *kv,
                                cache *x, const check_tensor *k, const check_tensor *v) {
  size_t cap = p->seqlen_kv, first = kv->first < cap ? kv->first : cap, B = p->batch;
  size_t rows[2] = {first, cap - first};
  clattn_status st = CLATTN_OK;
  int *at = malloc((B ? B : 1) * sizeof(int));
  if (!at) return CLATTN_ERR_OUT_OF_RESOURCES;
  for (int step = 0; step < 2 && st == CLATTN_OK; step++) {
    for (size_t b = 0; b < B; b++) at[b] = step ? (int)first : 0;
    cl_int e = B ? clEnqueueWriteBuffer(clattn_context_queue(ctx), x->c.seqlens, CL_TRUE, 0,
                                        B * sizeof(int), at, 0, NULL, NULL)
                 : CL_SUCCESS;
    if (e != CL_SUCCESS) st = CLATTN_ERR_OPENCL;
    clattn_problem a = *p;
    a.seqlen_q = rows[step];
    clattn_tensor kn = k->view, vn = v->view;
    kn.offset += step * first * kn.stride_seq, vn.offset += step * first * vn.stride_seq;
    if (st == CLATTN_OK) st = clattn_kv_append(ctx, &a, &x->c, &kn, &vn, 0, NULL, NULL);
    if (st == CLATTN_OK && clFinish(clattn_context_queue(ctx)) != CL_SUCCESS)
      st = CLATTN_ERR_OPENCL;
  }
  free(at);
  return st;
}

clattn_status check_kvcache_run(clattn_context *ctx, const check_spec *sp, check_kv *kv,
                                check_result *r, double *append_err) {
  memset(r, 0, sizeof *r);
  *append_err = 0.0;
  if (check_skipped()) return r->pass = 1, CLATTN_OK;
  clattn_problem p = sp->problem;
  size_t hkv = p.heads_kv ? p.heads_kv : p.heads_q, cap = p.seqlen_kv, B = p.batch;
  size_t d = p.head_dim, dv = p.head_dim_v ? p.head_dim_v : d;
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)sp->seed << 1 | 1);
  cl_context cl = clattn_context_cl_context(ctx);
  cl_command_queue queue = clattn_context_queue(ctx);
  check_tensor t[4] = {{0}}; /* q, the new K rows, the new V rows, o */
  cache x;
  memset(&x, 0, sizeof x);
  cl_int err = check_make_tensor(cl, &t[0], sp, p.seqlen_q, p.heads_q, d, &rng);
  int check = !sp->skip_check; /* timing alone: no host copies of the cache (it may be large) */
  if (err == CL_SUCCESS && check) err = check_make_tensor(cl, &t[1], sp, cap, hkv, d, &rng);
  if (err == CL_SUCCESS && check) err = check_make_tensor(cl, &t[2], sp, cap, hkv, dv, &rng);
  if (err == CL_SUCCESS) err = check_make_tensor(cl, &t[3], sp, p.seqlen_q, p.heads_q, dv, &rng);
  float nan = NAN;
  uint16_t bits = p.dtype == CLATTN_F32 ? 0 : ref_half_bits(p.dtype, NAN);
  size_t es = check_elem_size(p.dtype), rows = B * p.heads_q * p.seqlen_q;
  if (err == CL_SUCCESS && t[3].elems)
    err = clEnqueueFillBuffer(queue, t[3].buf, p.dtype == CLATTN_F32 ? (void *)&nan : &bits, es, 0,
                              t[3].elems * es, 0, NULL, NULL);
  cl_mem lse = NULL;
  if (err == CL_SUCCESS)
    lse = clCreateBuffer(cl, CL_MEM_READ_WRITE, (rows ? rows : 1) * sizeof(float), NULL, &err);
  if (err == CL_SUCCESS && rows)
    err = clEnqueueFillBuffer(queue, lse, &nan, sizeof nan, 0, rows * sizeof nan, 0, NULL, NULL);
  check_extras ex = {0};
  check_spec plain = *sp;
  plain.seqlens_kv = 0; /* the cache has its own lengths */
  if (err == CL_SUCCESS) err = check_make_extras(ctx, &plain, 0, &ex);
  if (err == CL_SUCCESS) err = cache_make(ctx, sp, kv, &rng, &x);
  size_t nd = check ? B * cap * hkv : 0;
  float *kd = malloc((nd * d ? nd * d : 1) * sizeof(float));
  float *vd = malloc((nd * dv ? nd * dv : 1) * sizeof(float));
  float *lse_host = calloc(rows ? rows : 1, sizeof(float));
  int *ref_lens = malloc((B ? B : 1) * sizeof(int));
  clattn_status st = CLATTN_ERR_OPENCL;
  if (err != CL_SUCCESS || !kd || !vd || !lse_host || !ref_lens) goto done;
  if (!check && fill_plain(ctx, &x) != CL_SUCCESS) goto done;
  if (check && (st = append_all(ctx, &p, kv, &x, &t[1], &t[2])) != CLATTN_OK) goto done;
  st = CLATTN_ERR_OPENCL;
  if (B && clEnqueueWriteBuffer(queue, x.c.seqlens, CL_TRUE, 0, B * sizeof(int), x.lens, 0, NULL,
                                NULL) != CL_SUCCESS)
    goto done;
  if (check && (read_back(ctx, &p, &x, 0, &t[1], kd, append_err) != CL_SUCCESS ||
                read_back(ctx, &p, &x, 1, &t[2], vd, append_err) != CL_SUCCESS))
    goto done;
  clattn_args a = {0};
  a.q = t[0].view, a.o = t[3].view, a.lse = lse, a.kv_cache = &x.c;
  check_set_args(&a, &ex);
  cl_event ran = NULL;
  if ((st = clattn_explain_ex(ctx, &p, &a, &kv->plan)) != CLATTN_OK) goto done;
  if ((st = clattn_forward_ex(ctx, &p, &a, 0, NULL, &ran)) != CLATTN_OK) goto done;
  err = check_read(queue, t[3].buf, p.dtype, t[3].host, t[3].elems, ran ? 1 : 0, ran ? &ran : 0);
  if (err == CL_SUCCESS && rows)
    err =
        clEnqueueReadBuffer(queue, lse, CL_TRUE, 0, rows * sizeof(float), lse_host, 0, NULL, NULL);
  if (ran) clReleaseEvent(ran);
  st = err == CL_SUCCESS ? CLATTN_OK : CLATTN_ERR_OPENCL;
  if (st != CLATTN_OK) goto done;
  /* The references read the cache as the kernels should: an entry whose pages are all outside
   * the pool has no keys. */
  for (size_t b = 0; b < B; b++)
    ref_lens[b] = kv->bad_pages && kv->page_size && b == 1 ? 0 : x.lens[b];
  ref_extras rx = check_ref_extras(&ex);
  rx.seqlens_kv = ref_lens;
  ref_view vk = {kd, 0, cap * hkv * d, hkv * d, d}, vv = {vd, 0, cap * hkv * dv, hkv * dv, dv};
  if (!check) {
    r->pass = 1; /* timing alone */
  } else {
    check_forward_errors(&p, &rx, check_host_view(&t[0]), vk, vv, &t[3], lse_host, r);
    if (kv->dtype == CLATTN_I8)
      quantisation_error(&p, &rx, check_host_view(&t[0]), check_host_view(&t[1]),
                         check_host_view(&t[2]), &t[3], kv);
  }
  kv->bytes_read = bytes_read(&p, kv, ref_lens);
  if (sp->repeat > 0) st = time_calls(ctx, sp, kv, &x, &a, r);
  if (sp->repeat > 0 && st == CLATTN_OK) st = check_time_append(ctx, sp, &x.c, x.lens, kv);
done:
  free(kd), free(vd), free(lse_host), free(ref_lens);
  cache_release(&x);
  check_release_extras(&ex);
  for (int i = 0; i < 4; i++) {
    if (t[i].buf) clReleaseMemObject(t[i].buf);
    free(t[i].host);
  }
  if (lse) clReleaseMemObject(lse);
  r->status = st;
  check_finish(st, &r->pass);
  return st;
}
