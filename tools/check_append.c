/* The time of a decode step's append (clattn_kv_append of seqlen_q new rows a sequence, each
 * entry at its length less those rows), for `clattn run --kv-cache`: the bytes it moves against
 * a copy kernel's bandwidth, as the guide quotes memory-bound work. Timed as the forwards are
 * (check_call_begin, check_call_end: events where the queue profiles, else the wall clock). */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

/* new rows [B][seqlen_q][heads_kv][dim] of ones (a scale to compute for int8, not zeros'). */
static cl_mem ones(clattn_context *ctx, clattn_dtype t, size_t n, cl_int *err) {
  if (*err != CL_SUCCESS) return NULL;
  size_t es = check_elem_size(t);
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, (n ? n : 1) * es,
                            NULL, err);
  float one = 1.0f;
  uint16_t bits = t == CLATTN_F32 ? 0 : ref_half_bits(t, 1.0f);
  if (*err == CL_SUCCESS && n)
    *err = clEnqueueFillBuffer(clattn_context_queue(ctx), m, t == CLATTN_F32 ? (void *)&one : &bits,
                               es, 0, n * es, 0, NULL, NULL);
  return m;
}

static int cmp_us(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

clattn_status check_time_append(clattn_context *ctx, const check_spec *sp, const clattn_kv_cache *c,
                                const int *lens, check_kv *kv) {
  const clattn_problem *p = &sp->problem;
  size_t B = p->batch, nq = p->seqlen_q, cap = p->seqlen_kv;
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q, d = p->head_dim;
  size_t dv = p->head_dim_v ? p->head_dim_v : d, es = check_elem_size(p->dtype);
  size_t ces = c->dtype == CLATTN_I8 ? 1 : es;
  kv->append_us = 0.0, kv->append_bytes = 0.0;
  if (!B || !nq || sp->repeat <= 0) return CLATTN_OK;
  cl_command_queue q = clattn_context_queue(ctx);
  cl_int err = CL_SUCCESS;
  cl_mem kn = ones(ctx, p->dtype, B * nq * hkv * d, &err);
  cl_mem vn = ones(ctx, p->dtype, B * nq * hkv * dv, &err);
  int *at = malloc(B * sizeof *at);
  double *us = malloc((size_t)sp->repeat * sizeof *us);
  if (!at || !us) err = CL_OUT_OF_HOST_MEMORY;
  /* Each entry of at least nq rows rewrites its last nq (pages the forward read: a paged entry
   * has none past its length); the others append nothing and count no bytes. */
  size_t rows = 0;
  for (size_t b = 0; err == CL_SUCCESS && b < B; b++) {
    const long long n = lens[b];
    at[b] = n >= (long long)nq && n <= (long long)cap ? (int)(n - (long long)nq) : -1;
    if (at[b] >= 0) rows += nq;
  }
  if (err == CL_SUCCESS)
    err = clEnqueueWriteBuffer(q, c->seqlens, CL_TRUE, 0, B * sizeof(int), at, 0, NULL, NULL);
  clattn_status st = err == CL_SUCCESS ? CLATTN_OK : CLATTN_ERR_OPENCL;
  clattn_tensor k = {kn, 0, nq * hkv * d, hkv * d, d}, v = {vn, 0, nq * hkv * dv, hkv * dv, dv};
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
  const int by_events = (props & CL_QUEUE_PROFILING_ENABLE) != 0; /* else the wall clock */
  for (int i = 0; i < sp->warmup + sp->repeat && st == CLATTN_OK; i++) {
    cl_event done = NULL;
    check_clock clock = check_call_begin(ctx, by_events);
    st = clattn_kv_append(ctx, p, c, &k, &v, 0, NULL, &done);
    const double ms = check_call_end(&clock, st == CLATTN_OK ? done : NULL, by_events);
    if (st == CLATTN_OK && i >= sp->warmup) us[i - sp->warmup] = ms * 1e3;
  }
  /* The lengths the forward read, back. */
  if (clEnqueueWriteBuffer(q, c->seqlens, CL_TRUE, 0, B * sizeof(int), lens, 0, NULL, NULL) !=
          CL_SUCCESS &&
      st == CLATTN_OK)
    st = CLATTN_ERR_OPENCL;
  if (st == CLATTN_OK) {
    qsort(us, (size_t)sp->repeat, sizeof *us, cmp_us);
    kv->append_us = us[sp->repeat / 2];
    /* Read the new rows, write the cache's (and int8's two scales a row). */
    kv->append_bytes =
        (double)rows * (double)hkv *
        ((double)(d + dv) * (double)(es + ces) + (c->dtype == CLATTN_I8 ? 8.0 : 0.0));
  }
  if (st != CLATTN_OK)
    fprintf(stderr, "clattn: timing the append failed: %s\n", clattn_last_error(ctx));
  free(at), free(us);
  if (kn) clReleaseMemObject(kn);
  if (vn) clReleaseMemObject(vn);
  return st;
}
