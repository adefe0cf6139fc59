/* Double-precision reference and naive fp32 attention on the host. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  size_t b, hq, hkv, nq, nkv, d, dv;
  double scale;
  int causal;
} dims;

static dims dims_of(const clattn_problem *p) {
  dims s = {p->batch,
            p->heads_q,
            p->heads_kv ? p->heads_kv : p->heads_q,
            p->seqlen_q,
            p->seqlen_kv,
            p->head_dim,
            p->head_dim_v ? p->head_dim_v : p->head_dim,
            p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)p->head_dim),
            (p->flags & CLATTN_CAUSAL) != 0};
  return s;
}

static const float *at(ref_view t, size_t b, size_t s, size_t h) {
  return t.data + t.offset + b * t.stride_batch + s * t.stride_seq + h * t.stride_head;
}

/* Keys visible to row i: [0, visible(i)). Causal is bottom-right aligned. */
static size_t visible(const dims *s, size_t i) {
  if (!s->causal) return s->nkv;
  long long n = (long long)i + (long long)s->nkv - (long long)s->nq + 1;
  return n <= 0 ? 0 : (size_t)n; /* never more than nkv, since i < nq */
}

void ref_forward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, double *o,
                     double *lse) {
  dims s = dims_of(p);
  double *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  for (size_t b = 0; b < s.b; b++)
    for (size_t h = 0; h < s.hq; h++) {
      size_t hk = h / (s.hq / s.hkv);
      for (size_t i = 0; i < s.nq; i++) {
        size_t n = visible(&s, i), row = (b * s.hq + h) * s.nq + i;
        const float *qi = at(q, b, i, h);
        double mx = -INFINITY, sum = 0.0;
        for (size_t j = 0; j < n; j++) {
          const float *kj = at(k, b, j, hk);
          double dot = 0.0;
          for (size_t c = 0; c < s.d; c++) dot += (double)qi[c] * kj[c];
          sc[j] = dot * s.scale;
          if (sc[j] > mx) mx = sc[j];
        }
        for (size_t j = 0; j < n; j++) sum += (sc[j] = exp(sc[j] - mx));
        double *oi = o + row * s.dv;
        for (size_t c = 0; c < s.dv; c++) oi[c] = 0.0;
        for (size_t j = 0; j < n; j++) {
          const float *vj = at(v, b, j, hk);
          for (size_t c = 0; c < s.dv; c++) oi[c] += sc[j] / sum * vj[c];
        }
        if (lse) lse[row] = n ? mx + log(sum) : -INFINITY;
      }
    }
  free(sc);
}

void ref_forward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, float *o,
                     float *lse) {
  dims s = dims_of(p);
  float *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc), scale = (float)s.scale;
  for (size_t b = 0; b < s.b; b++)
    for (size_t h = 0; h < s.hq; h++) {
      size_t hk = h / (s.hq / s.hkv);
      for (size_t i = 0; i < s.nq; i++) {
        size_t n = visible(&s, i), row = (b * s.hq + h) * s.nq + i;
        const float *qi = at(q, b, i, h);
        float mx = -INFINITY, sum = 0.0f;
        for (size_t j = 0; j < n; j++) {
          const float *kj = at(k, b, j, hk);
          float dot = 0.0f;
          for (size_t c = 0; c < s.d; c++) dot += qi[c] * kj[c];
          sc[j] = dot * scale;
          if (sc[j] > mx) mx = sc[j];
        }
        for (size_t j = 0; j < n; j++) sum += (sc[j] = expf(sc[j] - mx));
        float *oi = o + row * s.dv;
        for (size_t c = 0; c < s.dv; c++) oi[c] = 0.0f;
        for (size_t j = 0; j < n; j++) {
          const float *vj = at(v, b, j, hk);
          for (size_t c = 0; c < s.dv; c++) oi[c] += sc[j] / sum * vj[c];
        }
        if (lse) lse[row] = n ? mx + logf(sum) : -INFINITY;
      }
    }
  free(sc);
}
