/* Double-precision reference and naive fp32 attention on the host. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- half storage: rounding to nearest even, as the kernels store (cl/common.cl) ---- */

static uint16_t f16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xffu) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u | (m >> 13) : 0u));
  int exp = (int)e - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow: infinity */
  if (exp <= 0) {                                   /* a subnormal half, or zero */
    if (exp < -10) return (uint16_t)sign;
    m |= 0x800000u;
    unsigned shift = (unsigned)(14 - exp);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry rounds up the exponent */
  return (uint16_t)(sign | h);
}

static float f16_value(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0x1fu)
    x = sign | 0x7f800000u | (m << 13);
  else if (e == 0)
    return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
  else
    x = sign | ((e - 15u + 127u) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t ref_half_bits(clattn_dtype t, float x) {
  return t == CLATTN_BF16 ? bf16_bits(x) : f16_bits(x);
}

float ref_half_value(clattn_dtype t, uint16_t bits) {
  return t == CLATTN_BF16 ? bf16_value(bits) : f16_value(bits);
}

double ref_tolerance_floor(clattn_dtype t) {
  return t == CLATTN_F32 ? 1e-6 : 1e-4;
}

float ref_round(clattn_dtype t, float x) {
  return t == CLATTN_F32 ? x : ref_half_value(t, ref_half_bits(t, x));
}

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
  const clattn_problem *p; /* its mask and softcap */
  clattn_dtype dtype;
  const ref_extras *x; /* ALiBi and sinks, or NULL */
} dims;

double ref_slope(const clattn_problem *p, const ref_extras *x, size_t b, size_t h) {
  if (!x || !x->alibi) return 0.0;
  return x->alibi[(p->flags & CLATTN_ALIBI_PER_BATCH) ? b * p->heads_q + h : h];
}

clattn_problem ref_entry(const clattn_problem *p, const ref_extras *x, size_t b) {
  clattn_problem e = *p;
  if (x && x->seqlens_kv) {
    int n = x->seqlens_kv[b];
    e.seqlen_kv = n >= 0 && (size_t)n <= p->seqlen_kv ? (size_t)n : 0;
  }
  return e;
}

/* ALiBi's bias of key j in row i for a slope, in double. */
static double bias_of(const dims *s, double slope, size_t i, size_t j) {
  double d = (double)j - (double)i - ((double)s->nkv - (double)s->nq);
  return -slope * fabs(d);
}

/* Head h's sink logit, -inf without sinks. */
static double sink_of(const dims *s, size_t h) {
  return s->x && s->x->sinks ? (double)s->x->sinks[h] : -INFINITY;
}

void ref_keys(const clattn_problem *p, size_t i, size_t *lo, size_t *hi) {
  long long nq = (long long)p->seqlen_q, nkv = (long long)p->seqlen_kv;
  int top_left = (p->flags & CLATTN_CAUSAL_TOP_LEFT) != 0;
  long long diag = top_left ? (long long)i : (long long)i + nkv - nq; /* the row's own key */
  long long first = 0, end = nkv;
  if ((p->flags & CLATTN_CAUSAL) || top_left) end = diag + 1 < end ? diag + 1 : end;
  if (p->flags & CLATTN_WINDOW) { /* windows beyond any length are unbounded (no overflow) */
    long long big = nq + nkv + 1;
    long long left = p->window_left < big ? p->window_left : big;
    long long right = p->window_right < big ? p->window_right : big;
    if (left >= 0 && diag - left > first) first = diag - left;
    if (right >= 0 && diag + right + 1 < end) end = diag + right + 1;
  }
  if (end < 0) end = 0;
  if (first > end) first = end;
  *lo = (size_t)first, *hi = (size_t)end;
}

double ref_cap(const clattn_problem *p, double s) {
  return p->softcap > 0.0f ? p->softcap * tanh(s / p->softcap) : s;
}

static float cap_f32(const clattn_problem *p, float s) {
  return p->softcap > 0.0f ? p->softcap * tanhf(s / p->softcap) : s;
}

static dims dims_of(const clattn_problem *p, const ref_extras *x) {
  dims s = {p->batch,
            p->heads_q,
            p->heads_kv ? p->heads_kv : p->heads_q,
            p->seqlen_q,
            p->seqlen_kv,
            p->head_dim,
            p->head_dim_v ? p->head_dim_v : p->head_dim,
            p->scale != 0.0f ? p->scale : 1.0 / sqrt((double)p->head_dim),
            p,
            p->dtype,
            x};
  return s;
}

static const float *at(ref_view t, size_t b, size_t s, size_t h) {
  return t.data + t.offset + b * t.stride_batch + s * t.stride_seq + h * t.stride_head;
}

/* One query row: o_row gets dv values; *lse the row's log-sum-exp (-inf when it sees no key).
 * sc is scratch of seqlen_kv values. */
static void row_f64(const dims *s, ref_view q, ref_view k, ref_view v, size_t b, size_t h, size_t i,
                    double *sc, double *oi, double *lse) {
  size_t hk = h / (s->hq / s->hkv), j0, n;
  ref_keys(s->p, i, &j0, &n);
  const float *qi = at(q, b, i, h);
  double mx = -INFINITY, sum = 0.0, slope = ref_slope(s->p, s->x, b, h), sink = sink_of(s, h);
  for (size_t j = j0; j < n; j++) {
    const float *kj = at(k, b, j, hk);
    double dot = 0.0;
    for (size_t c = 0; c < s->d; c++) dot += (double)qi[c] * kj[c];
    sc[j] = ref_cap(s->p, dot * s->scale) + bias_of(s, slope, i, j);
    if (sc[j] > mx) mx = sc[j];
  }
  if (sink > mx) mx = sink;
  for (size_t j = j0; j < n; j++) sum += (sc[j] = exp(sc[j] - mx));
  if (sink > -INFINITY) sum += exp(sink - mx);
  for (size_t c = 0; c < s->dv; c++) oi[c] = 0.0;
  for (size_t j = j0; j < n; j++) {
    const float *vj = at(v, b, j, hk);
    for (size_t c = 0; c < s->dv; c++) oi[c] += sc[j] / sum * vj[c];
  }
  if (lse) *lse = sum > 0.0 ? mx + log(sum) : -INFINITY;
}

static void row_f32(const dims *s, ref_view q, ref_view k, ref_view v, size_t b, size_t h, size_t i,
                    float *sc, float *oi, float *lse) {
  size_t hk = h / (s->hq / s->hkv), j0, n;
  ref_keys(s->p, i, &j0, &n);
  const float *qi = at(q, b, i, h);
  float mx = -INFINITY, sum = 0.0f, scale = (float)s->scale;
  float slope = (float)ref_slope(s->p, s->x, b, h), sink = (float)sink_of(s, h);
  for (size_t j = j0; j < n; j++) {
    const float *kj = at(k, b, j, hk);
    float dot = 0.0f;
    for (size_t c = 0; c < s->d; c++) dot += qi[c] * kj[c];
    sc[j] = cap_f32(s->p, dot * scale) + (float)bias_of(s, slope, i, j);
    if (sc[j] > mx) mx = sc[j];
  }
  if (sink > mx) mx = sink;
  for (size_t j = j0; j < n; j++) sum += (sc[j] = expf(sc[j] - mx));
  if (sink > -INFINITY) sum += expf(sink - mx);
  for (size_t c = 0; c < s->dv; c++) oi[c] = 0.0f;
  for (size_t j = j0; j < n; j++) {
    const float *vj = at(v, b, j, hk);
    for (size_t c = 0; c < s->dv; c++) oi[c] += sc[j] / sum * vj[c];
  }
  if (lse) *lse = sum > 0.0f ? mx + logf(sum) : -INFINITY;
}

/* The naive implementation in half storage (the baseline of the half-precision rule): S =
 * (scale Q) K^T rounded to the type, the softmax in fp32, P rounded, O = P V rounded, every
 * product accumulated in fp32. The LSE is the fp32 softmax's. */
static void row_half(const dims *s, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                     size_t i, float *sc, float *oi, float *lse) {
  size_t hk = h / (s->hq / s->hkv), j0, n;
  ref_keys(s->p, i, &j0, &n);
  const float *qi = at(q, b, i, h);
  float mx = -INFINITY, sum = 0.0f, scale = (float)s->scale;
  float slope = (float)ref_slope(s->p, s->x, b, h), sink = (float)sink_of(s, h);
  for (size_t j = j0; j < n; j++) {
    const float *kj = at(k, b, j, hk);
    float dot = 0.0f;
    for (size_t c = 0; c < s->d; c++) dot += ref_round(s->dtype, scale * qi[c]) * kj[c];
    sc[j] = ref_round(s->dtype, dot);
    /* a softcap on S as stored, rounded once more; ALiBi's fp32 bias promotes S to fp32 */
    if (s->p->softcap > 0.0f) sc[j] = ref_round(s->dtype, cap_f32(s->p, sc[j]));
    sc[j] += (float)bias_of(s, slope, i, j);
    if (sc[j] > mx) mx = sc[j];
  }
  if (sink > mx) mx = sink;
  for (size_t j = j0; j < n; j++) sum += (sc[j] = expf(sc[j] - mx));
  if (sink > -INFINITY) sum += expf(sink - mx);
  for (size_t j = j0; j < n; j++) sc[j] = ref_round(s->dtype, sc[j] / sum);
  for (size_t c = 0; c < s->dv; c++) oi[c] = 0.0f;
  for (size_t j = j0; j < n; j++) {
    const float *vj = at(v, b, j, hk);
    for (size_t c = 0; c < s->dv; c++) oi[c] += sc[j] * vj[c];
  }
  for (size_t c = 0; c < s->dv; c++) oi[c] = ref_round(s->dtype, oi[c]);
  if (lse) *lse = sum > 0.0f ? mx + logf(sum) : -INFINITY;
}

void ref_row_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                 size_t i, double *o_row, double *lse) {
  dims s = dims_of(p, NULL);
  double *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  if (sc) row_f64(&s, q, k, v, b, h, i, sc, o_row, lse);
  free(sc);
}

void ref_row_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                 size_t i, float *o_row, float *lse) {
  dims s = dims_of(p, NULL);
  float *sc = malloc((s.nkv ? s.nkv : 1) * sizeof *sc);
  if (sc && s.dtype == CLATTN_F32)
    row_f32(&s, q, k, v, b, h, i, sc, o_row, lse);
  else if (sc)
    row_half(&s, q, k, v, b, h, i, sc, o_row, lse);
  free(sc);
}

void ref_forward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, double *o,
                     double *lse) {
  ref_forward_ex_f64(p, NULL, q, k, v, o, lse);
}

void ref_forward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, float *o,
                     float *lse) {
  ref_forward_ex_f32(p, NULL, q, k, v, o, lse);
}

void ref_forward_ex_f64(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                        ref_view v, double *o, double *lse) {
  dims all = dims_of(p, x);
  double *sc = malloc((all.nkv ? all.nkv : 1) * sizeof *sc);
  for (size_t b = 0; b < all.b; b++) {
    clattn_problem pb = ref_entry(p, x, b);
    dims s = dims_of(&pb, x);
    for (size_t h = 0; h < s.hq; h++)
      for (size_t i = 0; i < s.nq; i++) {
        size_t row = (b * s.hq + h) * s.nq + i;
        row_f64(&s, q, k, v, b, h, i, sc, o + row * s.dv, lse ? lse + row : NULL);
      }
  }
  free(sc);
}

void ref_forward_ex_f32(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                        ref_view v, float *o, float *lse) {
  dims all = dims_of(p, x);
  float *sc = malloc((all.nkv ? all.nkv : 1) * sizeof *sc);
  for (size_t b = 0; b < all.b; b++) {
    clattn_problem pb = ref_entry(p, x, b);
    dims s = dims_of(&pb, x);
    for (size_t h = 0; h < s.hq; h++)
      for (size_t i = 0; i < s.nq; i++) {
        size_t row = (b * s.hq + h) * s.nq + i;
        if (s.dtype == CLATTN_F32)
          row_f32(&s, q, k, v, b, h, i, sc, o + row * s.dv, lse ? lse + row : NULL);
        else
          row_half(&s, q, k, v, b, h, i, sc, o + row * s.dv, lse ? lse + row : NULL);
      }
  }
  free(sc);
}
