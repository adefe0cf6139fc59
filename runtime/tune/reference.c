/* Double-precision reference and naive fp32 attention on the host. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>

static uint64_t next_u64(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

void ref_fill_normal(float *x, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i += 2) { /* Box-Muller */
    double u1 = ((next_u64(state) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (next_u64(state) >> 11) / 9007199254740992.0;
    double r = sqrt(-2.0 * log(u1));
    x[i] = (float)(r * cos(2 * M_PI * u2));
    if (i + 1 < n) x[i + 1] = (float)(r * sin(2 * M_PI * u2));
  }
}

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

/* One query row: o_row gets dv values; *lse the row's log-sum-exp (-inf when it sees no key).
 * sc is scratch of seqlen_kv values. */
static void row_f64(const dims *s, ref_view q, ref_view k, ref_view v, size_t b, size_t h, size_t i,
                    double *sc, double *oi, double *lse) {
  size_t hk = h / (s->hq / s->hkv), n = visible(s, i);
  const float *qi = at(q, b, i, h);
  double mx = -INFINITY, sum = 0.0;
  for (size_t j = 0; j < n; j++) {
    const float *kj = at(k, b, j, hk);
    double dot = 0.0;
    for (size_t c = 0; c < s->d; c++) dot += (double)qi[c] * kj[c];
    sc[j] = dot * s->scale;
    if (sc[j] > mx) mx = sc[j];
  }
  for (size_t j = 0; j < n; j++) sum += (sc[j] = exp(sc[j] - mx));
  for (size_t c = 0; c < s->dv; c++) oi[c] = 0.0;
  for (size_t j = 0; j < n; j++) {
    const float *vj = at(v, b, j, hk);
    for (size_t c = 0; c < s->dv; c++) oi[c] += sc[j] / sum * vj[c];
  }
  if (lse) *lse = n ? mx + log(sum) : -INFINITY;
}

static void row_f32(const dims *s, ref_view q, ref_view k, ref_view v, size_t b, size_t h, size_t i,
                    float *sc, float *oi, float *lse) {
  size_t hk = h / (s->hq / s->hkv), n = visible(s, i);
  const float *qi = at(q, b, i, h);
  float mx = -INFINITY, sum = 0.0f, scale = (float)s->scale;
  for (size_t j = 0; j < n; j++) {
    const float *kj = at(k, b, j, hk);
    float dot = 0.0f;
    for (size_t c = 0; c < s->d; c++) dot += qi[c] * kj[c];
    sc[j] = dot * scale;
    if (sc[j] > mx) mx = sc[j];
  }
  for (size_t j = 0; j < n; j++) sum += (sc[j] = expf(sc[j] - mx));
  for (size_t c = 0; c < s->dv; c++) oi[c] = 0.0f;
  for (size_t j = 0; j < n; j++) {
    const float *vj = at(v, b, j, hk);
    for (size_t c = 0; c < s->dv; c++) oi[c] += sc[j] / sum * vj[c];
  }
  if (lse) *lse = n ? mx + logf(sum) : -INFINITY;
}

void ref_row_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                 size_t i, double *o_row, double *lse) {
  dims s = dims_of(p);
  double *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  if (sc) row_f64(&s, q, k, v, b, h, i, sc, o_row, lse);
  free(sc);
}

void ref_row_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                 size_t i, float *o_row, float *lse) {
  dims s = dims_of(p);
  float *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  if (sc) row_f32(&s, q, k, v, b, h, i, sc, o_row, lse);
  free(sc);
}

void ref_forward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, double *o,
                     double *lse) {
  dims s = dims_of(p);
  double *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  for (size_t b = 0; b < s.b; b++)
    for (size_t h = 0; h < s.hq; h++)
      for (size_t i = 0; i < s.nq; i++) {
        size_t row = (b * s.hq + h) * s.nq + i;
        row_f64(&s, q, k, v, b, h, i, sc, o + row * s.dv, lse ? lse + row : NULL);
      }
  free(sc);
}

void ref_forward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, float *o,
                     float *lse) {
  dims s = dims_of(p);
  float *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  for (size_t b = 0; b < s.b; b++)
    for (size_t h = 0; h < s.hq; h++)
      for (size_t i = 0; i < s.nq; i++) {
        size_t row = (b * s.hq + h) * s.nq + i;
        row_f32(&s, q, k, v, b, h, i, sc, o + row * s.dv, lse ? lse + row : NULL);
      }
  free(sc);
}
