/* The backward reference on single rows, for the sampled check of the tuner's timed backward
 * problem, whose full reference would take minutes at large N. A row of dQ needs only its own
 * query row, so it is computed from scratch (with its LSE and D, which check the forward's
 * inputs to the backward). A key row of dK and dV sums over every query row that sees the key:
 * recomputing each of those rows' LSE would cost as much as the full reference, so it takes the
 * LSE and D the candidates themselves were given (checked on the sampled query rows). Both come
 * in double (the reference) and in the naive fp32 loop (DESIGN.md's tolerance is relative to its
 * error), from one body. */
#include "tune.h"

#include <math.h>
#include <string.h>

static const float *at(ref_view t, size_t b, size_t s, size_t h) {
  return t.data + t.offset + b * t.stride_batch + s * t.stride_seq + h * t.stride_head;
}

#define BWD_ROW_DQ(NAME, T, EXP, LOG)                                                              \
  void NAME(const clattn__bwd_host *hs, size_t b, size_t hq, size_t i, T *scratch, T *dq, T *lse,  \
            T *drow) {                                                                             \
    const clattn__shape *s = &hs->s;                                                               \
    size_t hk = hq / (s->heads_q / s->heads_kv), n = clattn__tune_visible(s, i);                   \
    T scale = (T)s->scale, mx = -INFINITY, sum = 0, di = 0, *pr = scratch,                         \
      *o = scratch + s->seqlen_kv;                                                                 \
    const float *qi = at(hs->q, b, i, hq), *gi = at(hs->d_o, b, i, hq);                            \
    for (size_t j = 0; j < n; j++) {                                                               \
      const float *kj = at(hs->k, b, j, hk);                                                       \
      T dot = 0;                                                                                   \
      for (size_t c = 0; c < s->d; c++) dot += (T)qi[c] * (T)kj[c];                                \
      pr[j] = dot * scale;                                                                         \
      if (pr[j] > mx) mx = pr[j];                                                                  \
    }                                                                                              \
    for (size_t j = 0; j < n; j++) sum += (pr[j] = EXP(pr[j] - mx));                               \
    for (size_t j = 0; j < n; j++) pr[j] /= sum;                                                   \
    for (size_t c = 0; c < s->dv; c++) o[c] = 0;                                                   \
    for (size_t j = 0; j < n; j++)                                                                 \
      for (size_t c = 0; c < s->dv; c++) o[c] += pr[j] * (T)at(hs->v, b, j, hk)[c];                \
    for (size_t c = 0; c < s->dv; c++) di += (T)gi[c] * o[c];                                      \
    for (size_t c = 0; c < s->d; c++) dq[c] = 0;                                                   \
    for (size_t j = 0; j < n; j++) {                                                               \
      const float *kj = at(hs->k, b, j, hk), *vj = at(hs->v, b, j, hk);                            \
      T dp = 0;                                                                                    \
      for (size_t c = 0; c < s->dv; c++) dp += (T)gi[c] * (T)vj[c];                                \
      T ds = pr[j] * (dp - di);                                                                    \
      for (size_t c = 0; c < s->d; c++) dq[c] += scale * ds * (T)kj[c];                            \
    }                                                                                              \
    *lse = n ? mx + LOG(sum) : -INFINITY; /* a row that sees no key: O = 0, so D = 0 */            \
    *drow = di;                                                                                    \
  }

#define BWD_ROW_DKDV(NAME, T, EXP)                                                                 \
  void NAME(const clattn__bwd_host *hs, const float *lse, const float *drow, size_t b, size_t hk,  \
            size_t j, T *dk, T *dv) {                                                              \
    const clattn__shape *s = &hs->s;                                                               \
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
        for (size_t c = 0; c < s->d; c++) dot += (T)qi[c] * (T)kj[c];                              \
        for (size_t c = 0; c < s->dv; c++) dp += (T)gi[c] * (T)vj[c];                              \
        T p = EXP(dot * scale - (T)lse[r]), ds = p * (dp - (T)drow[r]);                            \
        for (size_t c = 0; c < s->d; c++) dk[c] += scale * ds * (T)qi[c];                          \
        for (size_t c = 0; c < s->dv; c++) dv[c] += p * (T)gi[c];                                  \
      }                                                                                            \
  }

BWD_ROW_DQ(clattn__bwd_row_dq_f64, double, exp, log)
BWD_ROW_DQ(clattn__bwd_row_dq_f32, float, expf, logf)
BWD_ROW_DKDV(clattn__bwd_row_dkdv_f64, double, exp)
BWD_ROW_DKDV(clattn__bwd_row_dkdv_f32, float, expf)
