/* Definitions shared by the kernels; the runtime puts this text before each kernel's source
 * (its registry entry's files, runtime/kernels/registry.c), so the kernel files stay standalone
 * readable OpenCL C otherwise. */

/* Vector width of the global loads that fill the tiles (VEC = 1, 2 or 4; D and DV are
 * multiples of it). vloadn needs only the element's alignment, so any offset and stride stays
 * correct; aligned views load faster. */
#ifndef VEC
#define VEC 1
#endif
/* Storage type of the tensors (-DDTYPE, the problem's clattn_dtype): 0 fp32, 1 fp16 through
 * vload_half / vstore_half (core OpenCL 1.2: no cl_khr_fp16 needed, the value is widened to
 * float on load), 2 bf16 as 16-bit words, widened by a shift and rounded to nearest even on
 * store, NaN kept NaN. Arithmetic is fp32 whatever the storage. LDS(p) loads one element as
 * float, STS(p, x) stores one. */
#ifndef DTYPE
#define DTYPE 0
#endif
#if DTYPE == 1
typedef half stor_t;
#define LDS(p) vload_half(0, p)
#define STS(p, x) vstore_half_rte((x), 0, p)
#elif DTYPE == 2
typedef ushort stor_t;
#define LDS(p) as_float((uint)(*(p)) << 16)
#define STS(p, x) (*(p) = bf16_round(x))
inline ushort bf16_round(float x) {
  const uint u = as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#else
typedef float stor_t;
#define LDS(p) (*(p))
#define STS(p, x) (*(p) = (x))
#endif

/* The forward kernels' output O (their last argument, OUT_ARG): in half storage an int o_f32
 * follows, nonzero when the call's keys are split (runtime/ops/split.c), so the ranges' partial
 * outputs are written as fp32 for the merge to combine, and only the merged O is rounded. fp32
 * storage has no such argument. STO(o, i, x) stores element i. */
#if DTYPE != 0
#define OUT_ARG , int o_f32
#define STO(p, i, x)                                                                               \
  do {                                                                                             \
    if (o_f32)                                                                                     \
      ((__global float *)(p))[i] = (x);                                                            \
    else                                                                                           \
      STS((p) + (i), (x));                                                                         \
  } while (0)
#else
#define OUT_ARG
#define STO(p, i, x) ((p)[i] = (x))
#endif

#if VEC == 4
typedef float4 floatv;
#if DTYPE == 1
#define VLOAD(p) vload_half4(0, p)
#elif DTYPE == 2
#define VLOAD(p) as_float4(convert_uint4(vload4(0, p)) << 16)
#else
#define VLOAD(p) vload4(0, p)
#endif
#define VGET(x, e) ((e) == 0 ? (x).s0 : (e) == 1 ? (x).s1 : (e) == 2 ? (x).s2 : (x).s3)
#elif VEC == 2
typedef float2 floatv;
#if DTYPE == 1
#define VLOAD(p) vload_half2(0, p)
#elif DTYPE == 2
#define VLOAD(p) as_float2(convert_uint2(vload2(0, p)) << 16)
#else
#define VLOAD(p) vload2(0, p)
#endif
#define VGET(x, e) ((e) == 0 ? (x).s0 : (x).s1)
#else
typedef float floatv;
#define VLOAD(p) LDS(p)
#define VGET(x, e) (x)
#endif

/* The variants (issue 17) that change which keys a row sees and how its scores are shaped, as
 * -D defines a plain problem leaves at 0, so its kernels keep their text and their speed. Their
 * values arrive as the kernels' last arguments, VARIANT_ARGS (after OUT_ARG), bound by the
 * runtime only when the define is set (runtime/kernels/forward_families.c, backward_families.c,
 * runtime/ops/standard*.c).
 * MASK: row i of a sequence sees keys j with i + mask_lo <= j < i + mask_hi, inside
 *   [0, seqlen_kv): a sliding window (FlashAttention's window_size) around the bottom-right or
 *   top-left diagonal, with or without a causal bound (runtime/core/validate.c turns the
 *   problem's flags and window into the two offsets; an unbounded side is +-2^40).
 * SOFTCAP: a score s = scale q.k becomes cap tanh(s / cap) before the softmax (Gemma 2). The
 *   argument is the cap in the kernel's score units: cap log2(e) in the forward kernels, whose
 *   query scale is then scale / cap (their scores live in the log2 domain), the cap itself in
 *   the others.
 * ALIBI: after the softcap, key j's score in row i gains -slope |i + seqlen_kv - seqlen_q - j|
 *   (BLOOM, MPT), the slope of (batch, head) bh = b heads_q + h at alibi[bh % alibi_mod]
 *   (alibi_mod: heads_q for one slope per head, batch heads_q for one per batch and head), times
 *   alibi_unit, the kernel's score unit (log2(e) in the forward kernels, 1 in the others).
 * SINKS: head h's logit sinks[h] (times sink_unit, as alibi_unit) joins every row's softmax as a
 *   key without a value (gpt-oss): the forward kernels start their online softmax from it (m =
 *   the logit, l = 1) in the split holding the first keys, so O is divided by it and the LSE
 *   includes it; the backward needs nothing more (P = exp(S - LSE) already has it), apart from
 *   the sinks' own gradient (cl/standard.cl's bwd_sinks). sink_heads is heads_q, for the kernels
 *   that see only bh. */
#ifndef MASK
#define MASK 0
#endif
#ifndef SOFTCAP
#define SOFTCAP 0
#endif
#if MASK
#define MASK_ARGS , long mask_lo, long mask_hi
#else
#define MASK_ARGS
#endif
#if SOFTCAP
#define SOFTCAP_ARGS , float softcap
#else
#define SOFTCAP_ARGS
#endif
#ifndef ALIBI
#define ALIBI 0
#endif
#ifndef SINKS
#define SINKS 0
#endif
#if ALIBI
#define ALIBI_ARGS , __global const float *alibi, ulong alibi_mod, float alibi_unit
/* The slope of (batch, head) bh in score units, and the bias it gives key j in row i. The
 * distance is taken in float, not 64-bit integers, in the kernels' inner loops: exact below 2^24,
 * and beyond that a bias of at least 2^24 slopes, whose exp is 0 at any slope ALiBi uses. */
#define ALIBI_SLOPE(bh) (alibi[(bh) % alibi_mod] * alibi_unit)
#define ALIBI_BIAS(slope, i, j)                                                                    \
  (-(slope) * fabs((float)(j) - ((float)(i) + (float)((int)seqlen_kv - (int)seqlen_q))))
#define ALIBI_ADD(x, slope, i, j) ((x) += ALIBI_BIAS(slope, i, j))
#define ALIBI_PLUS(slope, i, j) +ALIBI_BIAS(slope, i, j)
/* The bias of C fragment element e of n-tile n in the tensor-core backward kernels
 * (cl/backward_mma*.cl), from two distances j - i - (seqlen_kv - seqlen_q) per lane, fewer live
 * values than two conversions per element: a lane's two keys ja, jb against rows i0 + ...
 * (bwd_dkdv's S^T), or its two rows ra, rb against keys j0 + ... (bwd_dq's S), where the running
 * index is n * 8 + (e & 1) past i0 or j0 (which hold the lane's 2 tq), a constant once the loops
 * are unrolled: sign -1 where it is the row, +1 where the key. */
#define ALIBI_FRAG(slope, d, sign, n, e)                                                           \
  -(slope) * fabs((d)[(e) >> 1] + (sign) * (float)((n) * 8 + ((e) & 1)))
#define ALIBI_SHIFT ((float)((int)seqlen_kv - (int)seqlen_q))
#define ALIBI_KEY_BASES(d, ja, jb, i0)                                                             \
  const float d[2] = {(float)(ja) - ALIBI_SHIFT - (float)(i0),                                     \
                      (float)(jb) - ALIBI_SHIFT - (float)(i0)}
#define ALIBI_ROW_BASES(d, ra, rb, j0)                                                             \
  const float d[2] = {(float)(j0) - ALIBI_SHIFT - (float)(ra),                                     \
                      (float)(j0) - ALIBI_SHIFT - (float)(rb)}
#else
/* Nothing at all, not x + 0.0f, which a compiler must keep. */
#define ALIBI_ARGS
#define ALIBI_ADD(x, slope, i, j) ((void)0)
#define ALIBI_PLUS(slope, i, j)
#define ALIBI_FRAG(slope, d, sign, n, e)
#endif
#if SINKS
#define SINK_ARGS , __global const float *sinks, uint sink_heads, float sink_unit
/* The online softmax's starting state of a row of head h in key split `split`: the sink (its
 * logit, one term) in the first split, nothing seen (-inf, 0) in the others. A sink of -inf is
 * no sink. */
#define SINK_M(h, split) ((split) == 0 ? sinks[h] * sink_unit : -INFINITY)
#define SINK_L(split) ((split) == 0 ? 1.0f : 0.0f)
/* The backward's bwd_dq kernels also write each row's sum of P dP over its keys to
 * pdp[pdp_off + row] (after VARIANT_ARGS): rowsum(dO o O) before O was rounded to its storage,
 * which the sinks' gradient sums over every row of a head (cl/standard.cl's bwd_sinks); D from
 * a half O would carry its rounding into that sum. */
#define PDP_ARG , __global float *pdp, ulong pdp_off
#else
#define PDP_ARG
#define SINK_ARGS
#define SINK_M(h, split) (-INFINITY)
#define SINK_L(split) 0.0f
#endif
#ifndef KVLENS
#define KVLENS 0
#endif
#ifndef VARLEN
#define VARLEN 0
#endif
/* The lengths of each batch entry (SEQLENS), one of two ways:
 * KVLENS: a padded batch, entry b's keys [0, seqlens_kv[b]) of the seqlen_kv laid out.
 * VARLEN: packed sequences (FlashAttention's varlen): entry b's rows are cu_q[b] .. cu_q[b + 1]
 *   of q and o (total_q in all) and its keys cu_kv[b] .. cu_kv[b + 1] of k and v (total_kv);
 *   seqlen_q and seqlen_kv are the maxima, and the LSE is [heads_q][total_q].
 * Device values out of range are bounded here: a length below 0 or above the maximum (or a
 * range outside the tensors) counts as empty. An entry without keys has rows that see none
 * (O = 0, LSE = -inf or the sink); one without rows writes nothing (and its keys' gradients are
 * 0). The masks and ALiBi align to each entry's own lengths (kv_align 1: bottom-right, so a
 * bound shifts by the difference of the diagonals; 0: top-left). A kernel names its entry after
 * computing b: SEQ_BEGIN(b), then `#define seqlen_q seqlen_q_b` (and seqlen_kv, mask_lo, mask_hi
 * likewise) so that its code reads the entry's lengths; #undef them at its end. seq_q0 and
 * seq_kv0 are the entry's first rows (QB, KB: the row offsets of its views), kv_write_end how
 * far the backward writes dK and dV (a padded entry's zeros up to the laid-out length). */
#if KVLENS
#define SEQ_ARGS , __global const int *seqlens_kv, int kv_align, uint kv_heads
static inline uint kv_len(__global const int *lens, ulong b, uint all) {
  const int n = lens[b];
  return n >= 0 && (uint)n <= all ? (uint)n : 0u;
}
#define SEQ_LENGTHS(b)                                                                             \
  const uint seqlen_q_b = seqlen_q, seqlen_kv_b = kv_len(seqlens_kv, (b), seqlen_kv);              \
  const uint kv_write_end = seqlen_kv;                                                             \
  const ulong seq_q0 = 0, seq_kv0 = 0;
#elif VARLEN
#define SEQ_ARGS                                                                                   \
  , __global const int *cu_q, __global const int *cu_kv, ulong total_q, ulong total_kv, int kv_align
/* Whether [a, z) is a range of at most max rows of n. */
static inline bool seq_ok(int a, int z, ulong n, uint max) {
  return a >= 0 && z >= a && (ulong)z <= n && (uint)(z - a) <= max;
}
#define SEQ_LENGTHS(b)                                                                             \
  const int cq0_ = cu_q[b], cq1_ = cu_q[(b) + 1], ck0_ = cu_kv[b], ck1_ = cu_kv[(b) + 1];          \
  const bool qok_ = seq_ok(cq0_, cq1_, total_q, seqlen_q);                                         \
  const bool kok_ = seq_ok(ck0_, ck1_, total_kv, seqlen_kv);                                       \
  const uint seqlen_q_b = qok_ ? (uint)(cq1_ - cq0_) : 0u;                                         \
  const uint seqlen_kv_b = kok_ ? (uint)(ck1_ - ck0_) : 0u, kv_write_end = seqlen_kv_b;            \
  const ulong seq_q0 = qok_ ? (ulong)cq0_ : 0, seq_kv0 = kok_ ? (ulong)ck0_ : 0;
#endif
#if KVLENS || VARLEN
#define SEQLENS 1
#if MASK
#define SEQ_MASK                                                                                   \
  const long kv_shift_ = kv_align ? ((long)seqlen_kv_b - (long)seqlen_q_b) -                       \
                                        ((long)seqlen_kv - (long)seqlen_q)                         \
                                  : 0;                                                             \
  const long mask_lo_b = mask_lo + kv_shift_, mask_hi_b = mask_hi + kv_shift_;
#else
#define SEQ_MASK
#endif
#define SEQ_BEGIN(b) SEQ_LENGTHS(b) SEQ_MASK
#else
#define SEQLENS 0
#define SEQ_ARGS
#define SEQ_BEGIN(b)
#define kv_write_end seqlen_kv
#endif
/* The row offsets of entry b's views (q, o, d_o, dq: QB; k, v, dk, dv: KB), and the first LSE
 * (and D) row of (b, h). */
#if VARLEN
#define QB(x) (seq_q0 * x##_ss)
#define KB(x) (seq_kv0 * x##_ss)
#define LSE_ROW(b, h) ((ulong)(h) * total_q + seq_q0)
#else
#define QB(x) ((b) * x##_sb)
#define KB(x) ((b) * x##_sb)
#define LSE_ROW(b, h) (((ulong)(b) * heads_q + (h)) * seqlen_q)
#endif
#define VARIANT_ARGS MASK_ARGS SOFTCAP_ARGS ALIBI_ARGS SINK_ARGS SEQ_ARGS
/* The first key row i sees (i + off clamped to [0, n]), and one past its last (i + off, the
 * same): both grow with i, so a block of rows sees keys [mask_key(first row, lo),
 * mask_key(last row, hi)). */
static inline uint mask_key(long i, long off, uint n) {
  const long x = i + off;
  return x <= 0 ? 0u : (uint)min(x, (long)n);
}
#if MASK
/* The kernels' shared uses of the range (their own arguments mask_lo, mask_hi, seqlen_q,
 * seqlen_kv): whether row i sees key j; the keys rows [r0, r1) see, [*first, *end) (empty
 * when r0 >= r1); those within a forward split [s0, s0 + per), [*lo, *end); and the rows that
 * see some key of [k0, k1), [*first, *stop), first rounded down to a multiple of align (the
 * query blocks bwd_dkdv stages). */
#define MASK_SEES(i, j)                                                                            \
  ((j) >= mask_key((i), mask_lo, seqlen_kv) && (j) < mask_key((i), mask_hi, seqlen_kv))
static inline void mask_rows_keys(uint r0, uint r1, uint n, long lo, long hi, uint *first,
                                  uint *end) {
  *first = r0 < r1 ? mask_key(r0, lo, n) : 0u;
  *end = r0 < r1 ? mask_key(r1 - 1, hi, n) : 0u;
}
static inline void mask_split_keys(uint r0, uint r1, uint n, long lo, long hi, uint s0, uint per,
                                   uint *kv_lo, uint *kv_end) {
  uint first, end;
  mask_rows_keys(r0, r1, n, lo, hi, &first, &end);
  *kv_end = min(end, s0 + per);
  *kv_lo = min(max(s0, first), *kv_end);
}
static inline void mask_keys_rows(uint k0, uint k1, uint nq, long lo, long hi, uint align,
                                  uint *first, uint *stop) {
  /* Row i sees key j iff j - hi < i <= j - lo. */
  const long a = (long)k0 - hi + 1, z = (long)k1 - lo;
  *first = a <= 0 ? 0u : (uint)min(a, (long)nq) / align * align;
  *stop = z <= 0 ? 0u : (uint)min(z, (long)nq);
}
#endif
#if SOFTCAP
/* tanh for the softcap, the one every kernel uses (forward and backward must agree): x P(x^2) /
 * Q(x^2), degrees 4 and 4, fitted to tanh's relative error on [0, 9] (beyond 9 tanh is 1 in
 * fp32; x is clamped there). Within 3.4e-7 relative, about 4 ulp, inside OpenCL's 5 ulp for
 * tanh, and no exp: OpenCL's tanh (an exp and a division per score) made a capped forward 1.4-1.5x
 * plain on PoCL and about 1.2x on the H200 (docs/BENCHMARKS.md), where this costs 11 FMAs, a
 * reciprocal and two multiplications. NaN stays NaN. */
#ifndef CAP_FAST
#define CAP_FAST 0
#endif
#if CAP_FAST
/* The host sets CAP_FAST 2 for half storage on NVIDIA (runtime/kernels/registry_configs.c).
 * CAP_FAST 1 (an alternative, through CLATTN_BUILD_OPTIONS=-DCAP_FAST=1): native_exp2 and
 * native_recip, which are ex2.approx and rcp.approx there, tanh x = 1 - 2 / (e^2x + 1) in two
 * special-function instructions, absolute error a few 1e-7; a capped half forward cost
 * 1.13-1.20x plain on an H100 this way against 1.74-1.78x with the rational (stops 34 and 37,
 * docs/BENCHMARKS.md). Elsewhere native functions' accuracy is the implementation's, so the
 * rational stays. */
#if CAP_FAST == 2
/* NVIDIA only (inline PTX): the hardware's tanh.approx.f32, one special-function instruction,
 * FlashAttention's softcap tanh: 1.05-1.08x plain on an H100 (stop 37). Its relative error, up
 * to 2^-11, is a logit error of up to cap * 2^-11: the size of S's own rounding to fp16 at
 * |s| = cap, and the half rule's checks held; fp32 storage's failed it, so it keeps the
 * rational. */
static inline float cap_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#else
static inline float cap_tanh(float x) {
  return 1.0f - 2.0f * native_recip(native_exp2(x * 2.8853900817779268f) + 1.0f);
}
#endif
#else
static inline float cap_tanh(float x) {
  const float c = fmin(fmax(x, -9.0f), 9.0f), u = c * c;
  const float n = fma(fma(fma(fma(1.3442354784842792e-08f, u, 2.067963214358315e-05f), u,
                              3.500200342386961e-03f),
                          u, 0.13385020196437836f),
                      u, 1.0f);
  const float d = fma(fma(fma(fma(7.814576861164824e-07f, u, 3.292947367299348e-04f), u,
                              2.589487098157406e-02f),
                          u, 0.4671834111213684f),
                      u, 1.0f);
  /* 1 / d by the native reciprocal and one Newton step (d >= 1): within an ulp of a division,
   * whose correctly rounded sequence is long on NVIDIA (there the native division alone cut a
   * capped fp16 forward from 1.20x plain to 1.12x; fp32 cost 1.12-1.13x on the H200, stop 38).
   * Even a 12-bit reciprocal leaves the relative error at 3.4e-7, against 3.3e-7 by division. */
  const float r0 = native_recip(d), r = fma(r0, fma(-d, r0, 1.0f), r0);
  return x == x ? c * n * r : x;
}
#endif
/* The backward kernels' capped score of a raw one x = q.k, cap t with t = tanh(scale x / cap),
 * in natural units; *dt = 1 - t^2, the factor dS gains. */
static inline float cap_score(float x, float scale, float cap, float *dt) {
  const float t = cap_tanh(x * (scale / cap));
  *dt = 1.0f - t * t;
  return cap * t;
}
#endif
