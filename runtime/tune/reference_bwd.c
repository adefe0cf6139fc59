/* Gradients of attention on the host, in double (the reference) and in plain fp32 (the naive
 * implementation DESIGN.md's gradient tolerance is relative to): dS = P o (dP - D) with
 * D = rowsum(dO o O), dQ = scale dS K, dK = scale dS^T Q (summed over the query heads of a
 * GQA group), dV = P^T dO. O and P are recomputed here in the same precision; half storage has
 * its own naive backward (backward_half). */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float *at(ref_view t, size_t b, size_t s, size_t h) {
  return t.data + t.offset + b * t.stride_batch + s * t.stride_seq + h * t.stride_head;
}

/* ALiBi's bias of key j in row i. */
static double bias_of(const clattn_problem *p, double slope, size_t i, size_t j) {
  return -slope * fabs((double)j - (double)i - ((double)p->seqlen_kv - (double)p->seqlen_q));
}

/* One body for both precisions: T is the arithmetic type, EXP and TANH its functions. With a
 * softcap c the score is c t, t = tanh(scale q.k / c), and dS gains the factor 1 - t^2 (dt);
 * ALiBi's bias follows; a sink joins the softmax without a value, its gradient -P_sink D. */
#define REF_BACKWARD(NAME, T, EXP, TANH)                                                           \
  void NAME(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k, ref_view v,      \
            ref_view d_o, T *dq, T *dk, T *dv, T *d_sinks) {                                       \
    size_t B = p->batch, HQ = p->heads_q, HKV = p->heads_kv ? p->heads_kv : HQ;                    \
    size_t NQ = p->seqlen_q, NKV = p->seqlen_kv, D = p->head_dim;                                  \
    size_t DV = p->head_dim_v ? p->head_dim_v : D, G = HQ / HKV;                                   \
    T scale = p->scale != 0.0f ? (T)p->scale : (T)(1.0 / sqrt((double)D));                         \
    memset(dq, 0, B *HQ *NQ *D * sizeof(T));                                                       \
    memset(dk, 0, B *HKV *NKV *D * sizeof(T));                                                     \
    memset(dv, 0, B *HKV *NKV *DV * sizeof(T));                                                    \
    T *pr = malloc((NKV ? NKV : 1) * sizeof(T)), *o = malloc(DV * sizeof(T));                      \
    T *dt = malloc((NKV ? NKV : 1) * sizeof(T)), cap = (T)p->softcap;                              \
    if (d_sinks)                                                                                   \
      for (size_t h = 0; h < HQ; h++) d_sinks[h] = 0;                                              \
    for (size_t b = 0; b < B; b++)                                                                 \
      for (size_t h = 0; h < HQ; h++)                                                              \
        for (size_t i = 0; i < NQ; i++) {                                                          \
          size_t hk = h / G, j0, n;                                                                \
          clattn_problem pb = ref_entry(p, x, b); /* a padded entry's own keys */                  \
          ref_keys(&pb, i, &j0, &n);                                                               \
          if (n == j0) continue; /* a row that sees no key contributes nothing */                  \
          const float *qi = at(q, b, i, h), *gi = at(d_o, b, i, h);                                \
          T slope = (T)ref_slope(p, x, b, h);                                                      \
          T sink = x && x->sinks ? (T)x->sinks[h] : (T)-INFINITY;                                  \
          T mx = -INFINITY, sum = 0;                                                               \
          for (size_t j = j0; j < n; j++) {                                                        \
            const float *kj = at(k, b, j, hk);                                                     \
            T dot = 0;                                                                             \
            for (size_t c = 0; c < D; c++) dot += (T)qi[c] * (T)kj[c];                             \
            pr[j] = dot * scale, dt[j] = 1;                                                        \
            if (cap > 0) {                                                                         \
              T t = TANH(pr[j] / cap);                                                             \
              pr[j] = cap * t, dt[j] = 1 - t * t;                                                  \
            }                                                                                      \
            pr[j] += (T)bias_of(&pb, slope, i, j);                                                 \
            if (pr[j] > mx) mx = pr[j];                                                            \
          }                                                                                        \
          if (sink > mx) mx = sink;                                                                \
          for (size_t j = j0; j < n; j++) sum += (pr[j] = EXP(pr[j] - mx));                        \
          T psink = sink > (T)-INFINITY ? EXP(sink - mx) : 0;                                      \
          sum += psink, psink /= sum;                                                              \
          for (size_t j = j0; j < n; j++) pr[j] /= sum;                                            \
          for (size_t c = 0; c < DV; c++) o[c] = 0;                                                \
          for (size_t j = j0; j < n; j++)                                                          \
            for (size_t c = 0; c < DV; c++) o[c] += pr[j] * (T)at(v, b, j, hk)[c];                 \
          T Di = 0;                                                                                \
          for (size_t c = 0; c < DV; c++) Di += (T)gi[c] * o[c];                                   \
          if (d_sinks) d_sinks[h] -= psink * Di;                                                   \
          T *dqi = dq + ((b * HQ + h) * NQ + i) * D;                                               \
          for (size_t j = j0; j < n; j++) {                                                        \
            const float *kj = at(k, b, j, hk), *vj = at(v, b, j, hk);                              \
            T dp = 0;                                                                              \
            for (size_t c = 0; c < DV; c++) dp += (T)gi[c] * (T)vj[c];                             \
            T ds = pr[j] * (dp - Di) * dt[j];                                                      \
            T *dkj = dk + ((b * HKV + hk) * NKV + j) * D;                                          \
            T *dvj = dv + ((b * HKV + hk) * NKV + j) * DV;                                         \
            for (size_t c = 0; c < D; c++) {                                                       \
              dqi[c] += scale * ds * (T)kj[c];                                                     \
              dkj[c] += scale * ds * (T)qi[c];                                                     \
            }                                                                                      \
            for (size_t c = 0; c < DV; c++) dvj[c] += pr[j] * (T)gi[c];                            \
          }                                                                                        \
        }                                                                                          \
    free(pr);                                                                                      \
    free(o);                                                                                       \
    free(dt);                                                                                      \
  }

REF_BACKWARD(ref_backward_ex_f64, double, exp, tanh)
static REF_BACKWARD(backward_fp32, float, expf, tanhf)

    /* The naive backward in half storage (the baseline of the half-precision gradient rule): what
     * autograd does through the naive half forward (FlashAttention's tests): S = (scale Q) K^T and
     * P = softmax(S) rounded as in the forward, dP = dO V^T rounded, D = rowsum(P o dP) in fp32,
     * dS = P o (dP - D) rounded; dQ = scale dS K, dK = dS^T (scale Q) and dV = P^T dO summed in
     * fp32 (over rows and the query heads of a GQA group) and rounded once. */
    static void backward_half(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                              ref_view v, ref_view d_o, float *dq, float *dk, float *dv,
                              float *d_sinks) {
  clattn_dtype t = p->dtype;
  size_t B = p->batch, HQ = p->heads_q, HKV = p->heads_kv ? p->heads_kv : HQ;
  size_t NQ = p->seqlen_q, NKV = p->seqlen_kv, D = p->head_dim;
  size_t DV = p->head_dim_v ? p->head_dim_v : D, G = HQ / HKV;
  float scale = p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)D));
  memset(dq, 0, B * HQ * NQ * D * sizeof(float));
  memset(dk, 0, B * HKV * NKV * D * sizeof(float));
  memset(dv, 0, B * HKV * NKV * DV * sizeof(float));
  float *pr = malloc((NKV ? NKV : 1) * sizeof(float)),
        *dp = malloc((NKV ? NKV : 1) * sizeof(float)),
        *dt = malloc((NKV ? NKV : 1) * sizeof(float));
  const float cap = p->softcap;
  float *qs = malloc(D * sizeof(float));
  if (d_sinks)
    for (size_t h = 0; h < HQ; h++) d_sinks[h] = 0.0f;
  for (size_t b = 0; pr && dp && dt && qs && b < B; b++)
    for (size_t h = 0; h < HQ; h++)
      for (size_t i = 0; i < NQ; i++) {
        size_t hk = h / G, j0, n;
        clattn_problem pb = ref_entry(p, x, b); /* a padded entry's own keys */
        ref_keys(&pb, i, &j0, &n);
        if (n == j0) continue;
        const float *qi = at(q, b, i, h), *gi = at(d_o, b, i, h);
        for (size_t c = 0; c < D; c++) qs[c] = ref_round(t, scale * qi[c]);
        float mx = -INFINITY, sum = 0.0f, Di = 0.0f, slope = (float)ref_slope(p, x, b, h);
        float sink = x && x->sinks ? x->sinks[h] : -INFINITY;
        for (size_t j = j0; j < n; j++) {
          const float *kj = at(k, b, j, hk), *vj = at(v, b, j, hk);
          float dot = 0.0f, g = 0.0f;
          for (size_t c = 0; c < D; c++) dot += qs[c] * kj[c];
          for (size_t c = 0; c < DV; c++) g += gi[c] * vj[c];
          pr[j] = ref_round(t, dot), dt[j] = 1.0f;
          if (cap > 0.0f) { /* the forward's softcap on S as stored, rounded once more */
            float th = tanhf(pr[j] / cap);
            pr[j] = ref_round(t, cap * th), dt[j] = 1.0f - th * th;
          }
          pr[j] += (float)bias_of(&pb, slope, i, j); /* ALiBi's fp32 bias, as the forward's */
          dp[j] = ref_round(t, g);
          if (pr[j] > mx) mx = pr[j];
        }
        if (sink > mx) mx = sink;
        for (size_t j = j0; j < n; j++) sum += (pr[j] = expf(pr[j] - mx));
        float psink = sink > -INFINITY ? expf(sink - mx) : 0.0f;
        sum += psink, psink = ref_round(t, psink / sum);
        for (size_t j = j0; j < n; j++) pr[j] = ref_round(t, pr[j] / sum), Di += pr[j] * dp[j];
        if (d_sinks) d_sinks[h] -= psink * Di;
        float *dqi = dq + ((b * HQ + h) * NQ + i) * D;
        for (size_t j = j0; j < n; j++) {
          const float *kj = at(k, b, j, hk), ds = ref_round(t, pr[j] * (dp[j] - Di) * dt[j]);
          float *dkj = dk + ((b * HKV + hk) * NKV + j) * D;
          float *dvj = dv + ((b * HKV + hk) * NKV + j) * DV;
          for (size_t c = 0; c < D; c++) dqi[c] += ds * kj[c], dkj[c] += ds * qs[c];
          for (size_t c = 0; c < DV; c++) dvj[c] += pr[j] * gi[c];
        }
        for (size_t c = 0; c < D; c++) dqi[c] = ref_round(t, scale * dqi[c]);
      }
  for (size_t x = 0; x < B * HKV * NKV * D; x++) dk[x] = ref_round(t, dk[x]);
  for (size_t x = 0; x < B * HKV * NKV * DV; x++) dv[x] = ref_round(t, dv[x]);
  free(pr);
  free(dp);
  free(dt);
  free(qs);
}

void ref_backward_ex_f32(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                         ref_view v, ref_view d_o, float *dq, float *dk, float *dv,
                         float *d_sinks) {
  if (p->dtype == CLATTN_F32)
    backward_fp32(p, x, q, k, v, d_o, dq, dk, dv, d_sinks);
  else
    backward_half(p, x, q, k, v, d_o, dq, dk, dv, d_sinks);
}

void ref_backward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, ref_view d_o,
                      double *dq, double *dk, double *dv) {
  ref_backward_ex_f64(p, NULL, q, k, v, d_o, dq, dk, dv, NULL);
}

void ref_backward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, ref_view d_o,
                      float *dq, float *dk, float *dv) {
  ref_backward_ex_f32(p, NULL, q, k, v, d_o, dq, dk, dv, NULL);
}
