/* The backward reference on single rows, for the sampled check of the tuner's timed backward
 * problem, whose full reference would take minutes at large N. A row of dQ needs only its own
 * query row, so it is computed from scratch (with its LSE and D, which check the forward's
 * inputs to the backward). A key row of dK and dV sums over every query row that sees the key:
 * recomputing each of those rows' LSE would cost as much as the full reference, so it takes the
 * LSE and D the candidates themselves were given (checked on the sampled query rows). Both come
 * in double (the reference) and in the naive loop of the problem's storage (DESIGN.md's tolerance
 * is relative to its error), from one body. */
#include "tune.h"

#include <math.h>
#include <string.h>

static const float *at(ref_view t, size_t b, size_t s, size_t h) {
  return t.data + t.offset + b * t.stride_batch + s * t.stride_seq + h * t.stride_head;
}

/* The naive rows in half storage round where the naive half backward does (reference_bwd.c:
 * S, P, dP and dS to the type, scale Q before its products, each gradient once at the end); HALF
 * is 0 for the reference and fp32 storage, whose loops stay the plain ones. R rounds. The D
 * returned, which checks the device's, is rowsum(dO o O) from O rounded to the type as the
 * forward stores it; the naive half gradients use rowsum(P o dP), as autograd would. */
static double keep(const clattn__shape *s, double x) {
  return x;
}

static float round_to(const clattn__shape *s, float x) {
  return ref_round(s->dtype, x);
}

#define BWD_ROW_DQ(NAME, T, EXP, LOG, HALF, R)                                                     \
  void NAME(const clattn__bwd_host *hs, size_t b, size_t hq, size_t i, T *scratch, T *dq, T *lse,  \
            T *drow) {                                                                             \
    const clattn__shape *s = &hs->s;                                                               \
    const int half = HALF;                                                                         \
    size_t hk = hq / (s->heads_q / s->heads_kv), n = clattn__tune_visible(s, i);                   \
    T scale = (T)s->scale, mx = -INFINITY, sum = 0, di = 0, dcheck = 0, *pr = scratch,             \
      *dps = scratch + s->seqlen_kv, *o = scratch + 2 * s->seqlen_kv;                              \
    const float *qi = at(hs->q, b, i, hq), *gi = at(hs->d_o, b, i, hq);                            \
    for (size_t j = 0; j < n; j++) {                                                               \
      const float *kj = at(hs->k, b, j, hk), *vj = at(hs->v, b, j, hk);                            \
      T dot = 0, dp = 0;                                                                           \
      for (size_t c = 0; c < s->d; c++)                                                            \
        dot += (half ? R(s, scale * (T)qi[c]) : (T)qi[c]) * (T)kj[c];                              \
      for (size_t c = 0; c < s->dv; c++) dp += (T)gi[c] * (T)vj[c];                                \
      pr[j] = half ? R(s, dot) : dot * scale;                                                      \
      dps[j] = R(s, dp);                                                                           \
      if (pr[j] > mx) mx = pr[j];                                                                  \
    }                                                                                              \
    for (size_t j = 0; j < n; j++) sum += (pr[j] = EXP(pr[j] - mx));                               \
    for (size_t j = 0; j < n; j++) pr[j] = R(s, pr[j] / sum);                                      \
    for (size_t c = 0; c < s->dv; c++) o[c] = 0;                                                   \
    for (size_t j = 0; j < n; j++)                                                                 \
      for (size_t c = 0; c < s->dv; c++) o[c] += pr[j] * (T)at(hs->v, b, j, hk)[c];                \
    for (size_t c = 0; c < s->dv; c++) dcheck += (T)gi[c] * R(s, o[c]);                            \
    if (half)                                                                                      \
      for (size_t j = 0; j < n; j++) di += pr[j] * dps[j];                                         \
    else                                                                                           \
      di = dcheck;                                                                                 \
    for (size_t c = 0; c < s->d; c++) dq[c] = 0;                                                   \
    for (size_t j = 0; j < n; j++) {                                                               \
      const float *kj = at(hs->k, b, j, hk);                                                       \
      T ds = R(s, pr[j] * (dps[j] - di));                                                          \
      for (size_t c = 0; c < s->d; c++) dq[c] += (half ? ds : scale * ds) * (T)kj[c];              \
    }                                                                                              \
    if (half)                                                                                      \
      for (size_t c = 0; c < s->d; c++) dq[c] = R(s, scale * dq[c]);                               \
    *lse = n ? mx + LOG(sum) : -INFINITY; /* a row that sees no key: O = 0, so D = 0 */            \
    *drow = dcheck;                                                                                \
  }

#define BWD_ROW_DKDV(NAME, T, EXP, HALF, R)                                                        \
  void NAME(const clattn__bwd_host *hs, const float *lse, const float *drow, size_t b, size_t hk,  \
            size_t j, T *dk, T *dv) {                                                              \
    const clattn__shape *s = &hs->s;                                                               \
    const int half = HALF;                                                                         \
    size_t group = s->heads_q / s->heads_kv;                                                       \
    T scale = (T)s->scale;                                                                         \
    const float *kj = at(hs->k, b, j, hk), *vj = at(hs->v, b, j, hk);                              \
    for (size_t c = 0; c < s->d; c++) dk[c] = 0;                                                   \
    for (size_t c = 0; c < s->dv; c++) dv[c] = 0;                                                  \
    for (size_t hq = hk * group; hq < (hk + 1) * group; hq++)                                      \
      for (size_t i = 0; i < s->seqlen_q; i++) {                                                   \
        if (j >= clattn__tune_visible(s, i)) continue; /* row i does not see key j */              \
        size_t r = (b * s->heads_q + hq) * s->seqlen_q + i;                                        \
        const float *qi = at(hs->q, b, i, hq), *gi = at(hs->d_o, b, i, hq);                        \
        T dot = 0, dp = 0;                                                                         \
        for (size_t c = 0; c < s->d; c++)                                                          \
          dot += (half ? R(s, scale * (T)qi[c]) : (T)qi[c]) * (T)kj[c];                            \
        for (size_t c = 0; c < s->dv; c++) dp += (T)gi[c] * (T)vj[c];                              \
        T p = R(s, EXP((half ? R(s, dot) : dot * scale) - (T)lse[r]));                             \
        T ds = R(s, p * (R(s, dp) - (T)drow[r]));                                                  \
        for (size_t c = 0; c < s->d; c++)                                                          \
          dk[c] += half ? ds * R(s, scale * (T)qi[c]) : scale * ds * (T)qi[c];                     \
        for (size_t c = 0; c < s->dv; c++) dv[c] += p * (T)gi[c];                                  \
      }                                                                                            \
    if (half) {                                                                                    \
      for (size_t c = 0; c < s->d; c++) dk[c] = R(s, dk[c]);                                       \
      for (size_t c = 0; c < s->dv; c++) dv[c] = R(s, dv[c]);                                      \
    }                                                                                              \
  }

BWD_ROW_DQ(clattn__bwd_row_dq_f64, double, exp, log, 0, keep)
BWD_ROW_DQ(clattn__bwd_row_dq_f32, float, expf, logf, s->dtype != CLATTN_F32, round_to)
BWD_ROW_DKDV(clattn__bwd_row_dkdv_f64, double, exp, 0, keep)
BWD_ROW_DKDV(clattn__bwd_row_dkdv_f32, float, expf, s->dtype != CLATTN_F32, round_to)
