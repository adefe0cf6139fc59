/* The forward tuner's problems for a KV cache class (issue 18): the bench's K and V rows laid out
 * as a cache the decode kernels read, every sequence full. Contiguous: [batch][seqlen_kv][heads]
 * [dim]. Paged: the same rows padded to whole pages, read through an identity block table (page
 * b * max_pages + m is sequence b's m-th), which is [page][token][head][dim] (NHD). int8: each
 * (token, head) row quantised as clattn_kv_append does (scale = max|x| / 127, rounded to nearest
 * even), and the host's copy replaced by the dequantised values the kernels read, so the
 * references check what the device computes. */
#include "tune.h"

#include <math.h>
#include <stdlib.h>

size_t clattn__tune_kv_rows(const clattn__shape *s) {
  if (!s->kv_paged) return s->seqlen_kv;
  size_t pages = (s->seqlen_kv + s->page_size - 1) / s->page_size;
  return (pages ? pages : 1) * s->page_size;
}

clattn_status clattn__tune_kv_upload_i8(clattn_context *ctx, float *host, size_t rows, size_t dim,
                                        cl_mem *data, cl_mem *scales) {
  size_t n = rows * dim;
  signed char *q = malloc(n ? n : 1);
  float *sc = malloc((rows ? rows : 1) * sizeof(float));
  cl_int err = q && sc ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (size_t r = 0; err == CL_SUCCESS && r < rows; r++) {
    float mx = 0.0f, *x = host + r * dim;
    for (size_t c = 0; c < dim; c++) mx = fmaxf(mx, fabsf(x[c]));
    sc[r] = mx / 127.0f;
    for (size_t c = 0; c < dim; c++) {
      float v = sc[r] > 0.0f ? rintf(x[c] / sc[r]) : 0.0f;
      v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
      q[r * dim + c] = (signed char)v;
      x[c] = v * sc[r];
    }
  }
  if (err == CL_SUCCESS)
    *data = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n ? n : 1, q, &err);
  if (err == CL_SUCCESS)
    *scales = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                             (rows ? rows : 1) * sizeof(float), sc, &err);
  free(q), free(sc);
  return err == CL_SUCCESS ? CLATTN_OK : clattn__fail_cl(ctx, err, "clCreateBuffer (tuning cache)");
}

clattn_status clattn__tune_kv_attach(clattn_context *ctx, clattn__shape *s, clattn_tensor *k,
                                     clattn_tensor *v, cl_mem extra[4]) {
  size_t rows = clattn__tune_kv_rows(s), per = s->kv_paged ? s->page_size : rows;
  size_t max_pages = rows / per, n = s->batch * max_pages;
  int *lens = malloc((s->batch ? s->batch : 1) * sizeof(int));
  int *table = malloc((n ? n : 1) * sizeof(int));
  cl_int err = lens && table ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  for (size_t b = 0; lens && b < s->batch; b++) lens[b] = (int)s->seqlen_kv;
  for (size_t i = 0; table && i < n; i++) table[i] = (int)i;
  if (err == CL_SUCCESS)
    extra[0] = clCreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              (s->batch ? s->batch : 1) * sizeof(int), lens, &err);
  if (err == CL_SUCCESS && s->kv_paged)
    extra[1] = clCreateBuffer(ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              (n ? n : 1) * sizeof(int), table, &err);
  free(lens), free(table);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateBuffer (tuning cache)");
  s->seqlens_kv = extra[0], s->block_table = extra[1];
  s->k_scale = extra[2], s->v_scale = extra[3];
  s->sc_sb = per * s->heads_kv;
  if (s->kv_paged) { /* the views of the pages: one page's tokens per "batch entry" */
    s->num_pages = n, s->max_pages = max_pages;
    k->stride_batch = per * k->stride_seq, v->stride_batch = per * v->stride_seq;
  }
  return CLATTN_OK;
}

clattn_status clattn__tune_kv_class(clattn_context *ctx, const clattn_kv_cache *c,
                                    clattn__pass pass, clattn__shape *s) {
  if (pass == CLATTN__BACKWARD)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "options.kv_cache with options.backward: a cache has no backward");
  if (c->dtype != s->dtype && c->dtype != CLATTN_I8)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "options.kv_cache->dtype %d: a cache holds the problem's dtype (%s) or "
                        "CLATTN_I8",
                        (int)c->dtype, clattn__dtype_name(s->dtype));
  if (c->page_size > 256 || (c->page_size & (c->page_size - 1)))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "options.kv_cache->page_size %zu: a power of two from 1 to 256 (0: "
                        "contiguous)",
                        c->page_size);
  s->kv_cache = 1, s->kv_paged = c->page_size != 0, s->kv_i8 = c->dtype == CLATTN_I8;
  s->page_size = c->page_size;
  return CLATTN_OK;
}
