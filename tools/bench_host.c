/* The bench's host column (see bench_host.h). */
#include "bench_host.h"

#include <math.h>

#ifdef CLATTN_HAVE_OPENBLAS
#include <cblas.h>

int bench_host_available(void) {
  return 1;
}

void bench_host_forward(const clattn_problem *p, const float *q, const float *k, const float *v,
                        float *o, float *s) {
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q,
         dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
  size_t d = p->head_dim, nq = p->seqlen_q, nkv = p->seqlen_kv, group = p->heads_q / hkv;
  float scale = p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)d));
  long shift = (long)nkv - (long)nq;
  for (size_t b = 0; b < p->batch; b++)
    for (size_t h = 0; h < p->heads_q; h++) {
      const float *qh = q + b * nq * p->heads_q * d + h * d;
      const float *kh = k + b * nkv * hkv * d + (h / group) * d;
      const float *vh = v + b * nkv * hkv * dv + (h / group) * dv;
      float *oh = o + b * nq * p->heads_q * dv + h * dv;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nkv, (int)d, scale, qh,
                  (int)(p->heads_q * d), kh, (int)(hkv * d), 0.0f, s, (int)nkv);
      for (size_t i = 0; i < nq; i++) {
        float *row = s + i * nkv;
        long lim = p->flags & CLATTN_CAUSAL ? (long)i + shift + 1 : (long)nkv;
        size_t vis = lim <= 0 ? 0 : (size_t)lim < nkv ? (size_t)lim : nkv;
        float m = -INFINITY, l = 0.0f;
        for (size_t j = 0; j < vis; j++) m = fmaxf(m, row[j]);
        for (size_t j = 0; j < vis; j++) l += row[j] = expf(row[j] - m);
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (size_t j = 0; j < nkv; j++) row[j] = j < vis ? row[j] * inv : 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)dv, (int)nkv, 1.0f, s,
                  (int)nkv, vh, (int)(hkv * dv), 0.0f, oh, (int)(p->heads_q * dv));
    }
}
#else
int bench_host_available(void) {
  return 0;
}

void bench_host_forward(const clattn_problem *p, const float *q, const float *k, const float *v,
                        float *o, float *s) {
  (void)p, (void)q, (void)k, (void)v, (void)o, (void)s;
}
#endif
