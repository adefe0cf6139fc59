/* Tensor-core primitives in half precision, for the kernels that use mma.sync m16n8k16 with f16
 * or bf16 operands and fp32 accumulators (cl/forward_mma_half.cl, cl/backward_mma_half.cl). The
 * runtime puts this text after cl/common.cl (stor_t, DTYPE: 1 f16, 2 bf16) and cl/mma.cl
 * (UNROLL, the shuffles and quad reductions, the emulation's SCR arguments), which this file
 * uses.
 *
 * Fragments of m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
 * type"), for lane (gq, tq) = (lane / 4, lane % 4). A 32-bit register holds two 16-bit values,
 * the lower-indexed element in its low half:
 *   A (16 x 16, row-major): a[0] row gq, columns 2 tq and 2 tq + 1; a[1] row gq + 8, the same
 *     columns; a[2] row gq, columns 2 tq + 8 and 2 tq + 9; a[3] row gq + 8, those columns.
 *   B (16 x 8, "col": a register runs along k): b0 rows 2 tq and 2 tq + 1 of column gq; b1 rows
 *     2 tq + 8 and 2 tq + 9 of column gq.
 *   C, D (16 x 8, fp32): c[e] row gq + 8 (e >> 1), column 2 tq + (e & 1), as m16n8k8's.
 * So the C fragments of two adjacent 8-column tiles hold exactly an A fragment of 16 columns:
 * tile 0's c0, c1 are a[0], its c2, c3 a[1], tile 1's a[2], a[3]. That is why FlashAttention-2
 * can use P, computed in S's accumulators, as the A operand of P V with no shuffle.
 *
 * MMA16(c, a, b0, b1): c += a b. PACK2(lo, hi): two floats rounded to the storage type (to
 * nearest even) and packed, lo in the low half. With MMA_EMULATE both are emulated (local
 * memory and barriers, the 16-bit values widened by integer arithmetic, since PoCL has no
 * cl_khr_fp16): every work-item of the work-group must then reach each MMA16. */

#if DTYPE != 1 && DTYPE != 2
#error "cl/mma_half.cl: half storage only (DTYPE 1, fp16, or 2, bf16)"
#endif

#ifdef MMA_EMULATE
/* Per warp: A (16 x 16) and B (16 x 8) as floats, then cl/mma.cl's 32 floats of shuffles at
 * 384, where its mma3_emu keeps them too. */
#if SCRATCH < 256 + 128 + 32
#error "SCRATCH (runtime/kernels/kernels.h's CLATTN__MMA_SCRATCH) is below what mma16_emu uses"
#endif

#if DTYPE == 1
/* fp16 bits to float: exact (normal and subnormal values, infinities, NaN). */
static inline float h2f(uint h) {
  const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) return as_float(sign | as_uint((float)m * 0x1p-24f)); /* subnormal or zero */
  return as_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* float to fp16 bits, rounded to nearest even, as vstore_half_rte (cvt.rn.f16 on the GPU). */
static inline uint f2h(float f) {
  const uint x = as_uint(f), sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu;
  uint m = x & 0x7fffffu;
  if (e == 0xffu) return sign | 0x7c00u | (m ? 0x200u | (m >> 13) : 0u);
  const int exp = (int)e - 112;             /* the half's biased exponent */
  if (exp >= 31) return sign | 0x7c00u;     /* overflow: infinity */
  if (exp <= 0) {                           /* a subnormal half, or zero */
    if (exp < -10) return sign;
    m |= 0x800000u;
    const uint shift = (uint)(14 - exp), h = m >> shift, rem = m & ((1u << shift) - 1u);
    const uint mid = 1u << (shift - 1u);
    return sign | (h + (rem > mid || (rem == mid && (h & 1u))));
  }
  const uint h = ((uint)exp << 10) | (m >> 13), rem = m & 0x1fffu;
  return sign | (h + (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))); /* a carry is right */
}
#else
static inline float h2f(uint h) {
  return as_float(h << 16);
}

static inline uint f2h(float f) {
  return bf16_round(f); /* cl/common.cl */
}
#endif

static inline uint pack2(float lo, float hi) {
  return f2h(lo) | f2h(hi) << 16;
}

/* c += a b for one m16n8k16 fragment triple, in the layouts above: the warp's fragments meet
 * in local memory as a 16 x 16 and a 16 x 8 matrix of floats, each lane then forms its four
 * C elements. The products of 16-bit values are exact in fp32; the 16 of each element are
 * summed in fp32, then added to it. */
static void mma16_emu(float *c, const uint *a, uint b0, uint b1 SCR) {
  __local float *sa = scr, *sb = scr + 256;
  const uint gq = lane / 4, tq = lane % 4;
  for (uint r = 0; r < 4; r++) {
    const uint at = (gq + 8 * (r & 1)) * 16 + 2 * tq + 8 * (r >> 1);
    sa[at] = h2f(a[r] & 0xffffu), sa[at + 1] = h2f(a[r] >> 16);
  }
  sb[(2 * tq) * 8 + gq] = h2f(b0 & 0xffffu), sb[(2 * tq + 1) * 8 + gq] = h2f(b0 >> 16);
  sb[(2 * tq + 8) * 8 + gq] = h2f(b1 & 0xffffu), sb[(2 * tq + 9) * 8 + gq] = h2f(b1 >> 16);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint e = 0; e < 4; e++) {
    const uint row = gq + 8 * (e >> 1), col = 2 * tq + (e & 1);
    float x = 0.0f;
    for (uint k = 0; k < 16; k++) x += sa[row * 16 + k] * sb[k * 8 + col];
    c[e] += x;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#define MMA16(c, a, b0, b1) mma16_emu(c, a, b0, b1, scr, lane)
#define PACK2(lo, hi) pack2(lo, hi)

#else /* NVIDIA tensor cores, compute capability 8.0+ */
#if DTYPE == 1
#define MMA16_T "f16"
#else
#define MMA16_T "bf16"
#endif

/* c += a b. Not volatile: ptxas may schedule it. */
#define MMA16(c, a, b0, b1)                                                                        \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA16_T "." MMA16_T ".f32 {%0,%1,%2,%3}, "          \
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                                     \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                             \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

/* cvt.rn.{f16x2,bf16x2}.f32 d, a, b puts a in the upper half of d and b in the lower. */
static inline uint pack2(float lo, float hi) {
  uint r;
  asm("cvt.rn." MMA16_T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
#define PACK2(lo, hi) pack2(lo, hi)
#endif

/* A B-fragment register whose two k elements lie in one column of a local row-major matrix m of
 * 16-bit values (row stride ms): rows r and r + 1 of column c, r's in the low half. (Where they
 * lie in one row, the register is one aligned 32-bit word of m.) The odd last tile of
 * cl/backward_mma_half.cl's column products (frag_cols_x4's emulation has its own, half_pair,
 * which knows the swizzle). */
static inline uint pair_t(__local const ushort *m, uint ms, uint r, uint c) {
  return m[r * ms + c] | (uint)m[(r + 1) * ms + c] << 16;
}

/* SWZ 1 (cl/forward_mma_half.cl's unpadded stages; the host defines it): rows are stored
 * unpadded, each 16-byte chunk c of row r at chunk c ^ (r % 8), so that the 8 rows of one
 * ldmatrix matrix (the same logical chunk of 8 consecutive rows) fall in 8 distinct groups of 4
 * banks, as FlashAttention-2's swizzled layouts do; rows need at least 8 chunks (64 values).
 * swz_at: the word index of word w of row r, rows of ms words. */
#ifndef SWZ
#define SWZ 0
#endif
static inline uint swz_at(uint r, uint ms, uint w) {
#if SWZ
  return r * ms + (((w >> 2) ^ (r & 7u)) << 2) + (w & 3u);
#else
  return r * ms + w;
#endif
}

/* STAGE 2 of cl/forward_mma_half.cl and cl/backward_mma_half.cl's staging: tiles copied to local memory without passing through
 * registers (cp.async, 16 bytes a copy, in groups that can be waited for), and B fragments read
 * by ldmatrix, four 8 x 8 matrices of 16-bit values at once (.trans for V, stored as it comes,
 * a row per key). Emulated: plain copies (the wait is then nothing) and the fragments' words
 * read one by one. LDS_ADDR: a local pointer's value, its address in the shared window. */
#ifdef MMA_EMULATE
static inline void cp16(__local uint *dst, __global const uint *src, int n) {
  for (uint i = 0; i < 4; i++) dst[i] = n ? src[i] : 0u;
}
#define CP_COMMIT()
#define CP_WAIT1()
#define CP_WAIT0()
#else
#define LDS_ADDR(p) ((uint)(size_t)(p))
/* n: copy the 16 bytes at src (16-byte aligned), else write 16 zero bytes (src not read). */
static inline void cp16(__local uint *dst, __global const uint *src, int n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(LDS_ADDR(dst)), "l"(src),
               "r"(n ? 16 : 0)
               : "memory");
}
/* Closes the copies issued since the last commit into a group; waits until at most one group
 * (the newest) is still in flight. */
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT1() asm volatile("cp.async.wait_group 1;" ::: "memory")
/* Waits until every group is complete. */
#define CP_WAIT0() asm volatile("cp.async.wait_group 0;" ::: "memory")
#endif

/* cl/forward_mma_half.cl's stages (wg work-items, a constant there): rows kv0 .. kv0 + nk - 1 of
 * one tensor (K, V or Q: n 16-value chunks a row, row stride ss) into rows local rows of rs
 * words (zeros past nk), by cp.async where the views are 16-byte aligned (fast), else through
 * registers. */
static inline void issue_rows(__local uint *dst0, uint rs, __global const ushort *b, ulong base,
                              ulong ss, uint n, uint kv0, uint nk, int fast, uint lid, uint rows,
                              uint wg) {
  for (uint i = lid; i < rows * n; i += wg) {
    const uint j = i / n, c = i % n;
    __global const ushort *src = b + base + (ulong)(kv0 + j) * ss + 8 * c;
    __local uint *dst = dst0 + swz_at(j, rs, 4 * c); /* a whole chunk moves */
    if (fast) {
      cp16(dst, (__global const uint *)(j < nk ? src : b), j < nk);
    } else {
      UNROLL for (uint e = 0; e < 4; e++) dst[e] = j < nk ? src[2 * e] | (uint)src[2 * e + 1] << 16 : 0u;
    }
  }
}
/* An A fragment (16 rows r0 .. r0 + 15, k-step kc: columns 16 kc ..) of a row-major local matrix
 * m of 16-bit pairs, row stride ms words: cl/forward_mma_half.cl's Q in local memory (STAGE 4).
 * r[0] rows r0 .. + 7 and r[1] rows r0 + 8 .. of columns 16 kc .. + 7; r[2], r[3] the next 8. */
static inline void frag_a_x4(__local const uint *m, uint ms, uint r0, uint kc, uint lane,
                             uint *r) {
#ifdef MMA_EMULATE
  const uint gq = lane / 4, tq = lane % 4, w = kc * 8 + tq;
  r[0] = m[swz_at(r0 + gq, ms, w)], r[1] = m[swz_at(r0 + gq + 8, ms, w)];
  r[2] = m[swz_at(r0 + gq, ms, w + 4)], r[3] = m[swz_at(r0 + gq + 8, ms, w + 4)];
#else
  /* Lane l names row l % 8 of matrix l / 8: (rows 0-7, columns 0-7), (rows 8-15, 0-7), ... */
  const uint i = lane / 8;
  const __local uint *p = m + swz_at(r0 + (i & 1) * 8 + lane % 8, ms, kc * 8 + (i >> 1) * 4);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(LDS_ADDR(p))
               : "memory");
#endif
}

/* Two adjacent 8-row tiles' B fragments (rows r0 .. r0 + 15) of a row-major local matrix m of
 * 16-bit pairs, row stride ms words, k-step kc (columns 16 kc ..): S = Q K^T's K, a row per
 * key. r[0], r[1]: the first tile's b0, b1; r[2], r[3]: the second's. */
static inline void frag_rows_x4(__local const uint *m, uint ms, uint r0, uint kc, uint lane,
                                uint *r) {
#ifdef MMA_EMULATE
  const uint gq = lane / 4, tq = lane % 4, w = kc * 8 + tq;
  r[0] = m[swz_at(r0 + gq, ms, w)], r[1] = m[swz_at(r0 + gq, ms, w + 4)];
  r[2] = m[swz_at(r0 + gq + 8, ms, w)], r[3] = m[swz_at(r0 + gq + 8, ms, w + 4)];
#else
  /* Lane l names row l % 8 of matrix l / 8: matrices (tile 0, b0), (tile 0, b1), (tile 1, ...). */
  const uint i = lane / 8;
  const __local uint *p = m + swz_at(r0 + (i >> 1) * 8 + lane % 8, ms, kc * 8 + (i & 1) * 4);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(LDS_ADDR(p))
               : "memory");
#endif
}

#ifdef MMA_EMULATE
/* Value c of rows r and r + 1 of a local matrix of 16-bit pairs (rows of ms words, swz_at's
 * layout), r's in the low half: frag_cols_x4's emulated reads. */
static inline uint half_pair(__local const uint *m, uint ms, uint r, uint c) {
  const uint lo = m[swz_at(r, ms, c / 2)], hi = m[swz_at(r + 1, ms, c / 2)];
  return c & 1 ? (lo >> 16) | (hi & 0xffff0000u) : (lo & 0xffffu) | hi << 16;
}
#endif

/* Two adjacent 8-column tiles' B fragments of P V (columns c0 .. c0 + 15, c0 a multiple of 8)
 * for keys k0 .. k0 + 15 of V stored row-major (a row per key, row stride ms words). r[0], r[1]:
 * the first tile's b0, b1; r[2], r[3]: the second's. */
static inline void frag_cols_x4(__local const uint *m, uint ms, uint k0, uint c0, uint lane,
                                uint *r) {
#ifdef MMA_EMULATE
  const uint gq = lane / 4, tq = lane % 4;
  r[0] = half_pair(m, ms, k0 + 2 * tq, c0 + gq);
  r[1] = half_pair(m, ms, k0 + 8 + 2 * tq, c0 + gq);
  r[2] = half_pair(m, ms, k0 + 2 * tq, c0 + 8 + gq);
  r[3] = half_pair(m, ms, k0 + 8 + 2 * tq, c0 + 8 + gq);
#else
  /* Transposed: matrix l / 8's row l % 8 is key k0 + 8 (i & 1) + l % 8 at column c0 + 8 (i >> 1). */
  const uint i = lane / 8;
  const __local uint *p = m + swz_at(k0 + (i & 1) * 8 + lane % 8, ms, (c0 + (i >> 1) * 8) / 2);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(LDS_ADDR(p))
               : "memory");
#endif
}
