/* The global-memory traffic model (the HBM analogue) of the fused and the standard plans, and
 * the FLOPs of the FlashAttention convention. Bytes count what the kernels request from global
 * memory; caches may serve part of it, which the bandwidth check in docs/TRAFFIC.md measures. */
#include "plan.h"

/* i + off clamped to [0, n]: cl/common.cl's mask_key. */
static double clamp_key(double i, double off, double n) {
  double x = i + off;
  return x <= 0.0 ? 0.0 : x < n ? x : n;
}

/* The sum over rows i in [0, nq) of clamp_key(i, off, n): where i + off is below 0, inside
 * [0, n] and above n, each part a closed form (rows and keys are below 2^31: exact in double). */
static double clamp_sum(double nq, double off, double n) {
  double a = -off, b = n - off; /* rows below a give 0; from b on, n */
  a = a < 0.0 ? 0.0 : a > nq ? nq : a;
  b = b < a ? a : b > nq ? nq : b;
  /* rows [ceil(a), ceil(b)) give i + off */
  double lo = a == (double)(long long)a ? a : (double)(long long)a + 1.0;
  double hi = b == (double)(long long)b ? b : (double)(long long)b + 1.0;
  double mid = hi > lo ? (hi - lo) * ((lo + hi - 1.0) / 2.0 + off) : 0.0;
  return mid + (nq - hi) * n;
}

/* Keys [0, end) that some row of query block [q0, q1) sees: the kernels' kv_end; with a mask,
 * the keys between its first row's first and its last row's end. */
static double block_keys(const clattn__shape *s, size_t q0, size_t q1) {
  if (s->mask)
    return clamp_key((double)q1 - 1.0, (double)s->mask_hi, (double)s->seqlen_kv) -
           clamp_key((double)q0, (double)s->mask_lo, (double)s->seqlen_kv);
  if (!s->causal) return (double)s->seqlen_kv;
  double end = (double)q1 + (double)s->seqlen_kv - (double)s->seqlen_q;
  return end <= 0.0 ? 0.0 : end < (double)s->seqlen_kv ? end : (double)s->seqlen_kv;
}

double clattn__visible_pairs(const clattn__shape *s) {
  /* Row i sees [clamp(i + lo), clamp(i + hi)): both ends clamp to [0, nkv] alike, so the count
   * is the difference of two sums. */
  if (s->mask)
    return clamp_sum((double)s->seqlen_q, (double)s->mask_hi, (double)s->seqlen_kv) -
           clamp_sum((double)s->seqlen_q, (double)s->mask_lo, (double)s->seqlen_kv);
  if (!s->causal) return (double)s->seqlen_q * (double)s->seqlen_kv;
  /* Row i sees max(0, i + nkv - nq + 1) keys, never more than nkv: the sum of an integer range
   * ending at nkv. */
  double a = (double)s->seqlen_kv - (double)s->seqlen_q + 1.0;
  double lo = a > 1.0 ? a : 1.0, hi = (double)s->seqlen_kv;
  return hi >= lo && s->seqlen_q ? (lo + hi) * (hi - lo + 1.0) / 2.0 : 0.0;
}

double clattn__forward_flops(const clattn__shape *s) {
  return 2.0 * (double)s->batch * (double)s->heads_q * clattn__visible_pairs(s) *
         (double)(s->d + s->dv);
}

/* Bytes per stored element of Q, K, V and O; a shape made without it (tests) is fp32. LSE is
 * always fp32. */
static double elem(const clattn__shape *s) {
  return s->elem ? (double)s->elem : (double)sizeof(float);
}

clattn__bytes clattn__traffic_fused(const clattn__shape *s, const clattn__config *c, int lse) {
  const double f = elem(s), heads = (double)s->batch * (double)s->heads_q;
  const double rows = heads * (double)s->seqlen_q;
  clattn__bytes b = {rows * (double)s->d * f, rows * (double)s->dv * f};
  if (lse) b.write += rows * sizeof(float);
  /* K and V stream once per reader: the work-group when it stages them in local memory
   * (forward_tiles always does), each query row when forward_rows reads them directly. */
  size_t bq = c->bq ? c->bq : 1, step = c->stage ? bq : 1;
  double keys = 0.0;
  for (size_t q0 = 0; q0 < s->seqlen_q; q0 += bq) {
    size_t q1 = q0 + bq < s->seqlen_q ? q0 + bq : s->seqlen_q;
    keys += block_keys(s, q0, q1) * (double)((q1 - q0 + step - 1) / step);
  }
  b.read += heads * keys * (double)(s->d + s->dv) * f;
  return b;
}

clattn__bytes clattn__traffic_standard(const clattn__shape *s, int lse) {
  const double f = sizeof(float), e = elem(s), heads = (double)s->batch * (double)s->heads_q;
  const double rows = heads * (double)s->seqlen_q, score = rows * (double)s->seqlen_kv * f;
  /* Elements of the GEMMs' operands: Q, and K and V once per query head (GQA heads do not share
   * them), and O. */
  const double qkv = rows * (double)s->d + heads * (double)s->seqlen_kv * (double)(s->d + s->dv);
  const double out = rows * (double)s->dv;
  /* S is written by the first GEMM and read by the softmax, P written by it and read by the
   * second GEMM, which writes O. The softmax reads only the keys a causal row sees. */
  double visible = heads * clattn__visible_pairs(s) * f;
  clattn__bytes b;
  b.read = qkv * e + visible + score;
  b.write = score + score + out * e + (lse ? rows * f : 0.0);
  /* Half storage (standard_pack.c): pack_rows reads Q, K and V in their type and writes them as
   * fp32, which the GEMMs read; the second GEMM writes O as fp32, which store_rows reads and
   * writes rounded. */
  if (e != f) {
    b.read += qkv * f + out * f;
    b.write += qkv * f + out * f;
  }
  return b;
}

double clattn__io_lower_bound(const clattn__shape *s, double local_mem) {
  double m = local_mem / sizeof(float); /* floats of local memory */
  if (m <= 0.0) return 0.0;
  return (double)s->batch * (double)s->heads_q * clattn__visible_pairs(s) * (double)s->d *
         (double)s->dv / m * sizeof(float);
}
