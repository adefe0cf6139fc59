/* Fused attention forward on NVIDIA tensor cores ("forward_mma"), through inline PTX.
 *
 * FlashAttention-2's loop order, with each warp owning 16 query rows: S = Q K^T and O += P V
 * are mma.sync m16n8k8 TF32 instructions in the 3xTF32 split (x = hi + lo, both TF32;
 * a b = a_lo b_hi + a_hi b_lo + a_hi b_hi, the lo*lo term dropped), which keeps products at
 * about fp32 accuracy. Q stays in registers (its hi and lo parts, scaled by scale * log2 e),
 * K and V tiles pass through local memory. The row max and row sum are reduced across the four
 * lanes that share a row with warp shuffles. P leaves the S accumulators in their C-fragment
 * layout and is used as the A operand of P V directly, with the keys of each 8-key step
 * permuted (A column t takes key 2t, column t + 4 key 2t + 1) and V read in the same order.
 *
 * The runtime builds this variant only for NVIDIA devices of compute capability 8.0 or more
 * (runtime/device.c); the portable kernels stay the default everywhere else.
 *
 * Parameters (-D): D, DV head dims; BQ query rows per work-group (16 per warp); BKV keys per
 * tile (a multiple of 8); PAD floats appended to each local row (4 makes the fragment reads
 * free of bank conflicts); CAUSAL; VEC, the width of the global loads that fill the tiles.
 * runtime/tiling.c mirrors the local-memory formula; keep the two in step. */

#define WARPS (BQ / 16)
#define WG (WARPS * 32)
#define DP ((D + 7) / 8 * 8) /* head dims padded to the k-step of 8 */
#define DVP ((DV + 7) / 8 * 8)
#define KS (DP + PAD)  /* Ks: [key][column] */
#define VS (DVP + PAD) /* Vs: [key][column] */
#define KT (DP / 8)    /* k-steps of S = Q K^T */
#define NT (BKV / 8)   /* 8-key tiles of S; k-steps of P V */
#define VT (DVP / 8)   /* 8-column tiles of O */

static inline uint tf32(float x) {
  uint r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

#define SPLIT(x, hi, lo)                                                                           \
  do {                                                                                             \
    const float x_ = (x);                                                                          \
    hi = tf32(x_);                                                                                 \
    lo = tf32(x_ - as_float(hi));                                                                  \
  } while (0)

/* c += a b for one m16n8k8 TF32 fragment triple. */
#define MMA(c, a0, a1, a2, a3, b0, b1)                                                             \
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "                \
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                            \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                    \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))

/* c += a b in 3xTF32, the small terms first. Tensor cores add into their accumulator with
 * truncation, so a long chain of MMAs on one accumulator drifts (it failed the fp32 standard at
 * N = 1024 on the H200); each step's three MMAs start from zero and are added to c in fp32 with
 * round-to-nearest, as Ootomo and Yokota recover fp32 accuracy from tensor cores (2022). */
#define MMA3(c, ah, al, bh0, bh1, bl0, bl1)                                                        \
  do {                                                                                             \
    float t_[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                                        \
    MMA(t_, al[0], al[1], al[2], al[3], bh0, bh1);                                                 \
    MMA(t_, ah[0], ah[1], ah[2], ah[3], bl0, bl1);                                                 \
    MMA(t_, ah[0], ah[1], ah[2], ah[3], bh0, bh1);                                                 \
    c[0] += t_[0], c[1] += t_[1], c[2] += t_[2], c[3] += t_[3];                                    \
  } while (0)

static inline float shfl_xor(float v, uint lanes) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lanes));
  return r;
}

/* Max and sum over the four lanes of a quad (the lanes that share a row of a fragment). */
static inline float quad_max(float v) {
  v = fmax(v, shfl_xor(v, 1));
  return fmax(v, shfl_xor(v, 2));
}

static inline float quad_sum(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_forward(__global const float *q, __global const float *k, __global const float *v,
               __global float *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
               ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb,
               ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh,
               uint heads_q, uint group, uint seqlen_q, uint seqlen_kv, uint num_qblocks,
               ulong group_base, float scale_log2, int write_lse) {
  __local float Ks[BKV * KS];
  __local float Vs[BKV * VS];
  const uint lid = get_local_id(0);
  const uint warp = lid / 32, lane = lid % 32;
  const uint gq = lane / 4, tq = lane % 4; /* fragment row group and column within it */
  const ulong g = group_base + get_group_id(0);
  const uint qb = (uint)(g % num_qblocks);
  const ulong bh = g / num_qblocks;
  const uint h = (uint)(bh % heads_q);
  const ulong b = bh / heads_q;
  const uint q0 = qb * BQ, r0 = q0 + warp * 16;  /* this warp's rows r0 .. r0 + 15 */
  const uint row0 = r0 + gq, row1 = r0 + gq + 8; /* this lane's two rows */

  const ulong qbase = q_off + b * q_sb + h * q_sh;
  const ulong kbase = k_off + b * k_sb + (h / group) * k_sh;
  const ulong vbase = v_off + b * v_sb + (h / group) * v_sh;

  /* Q's A fragments: element e is row gq + 8 (e & 1), column tq + 4 (e >> 1) of each k-step. */
  uint qh[KT][4], ql[KT][4];
#pragma unroll
  for (uint kt = 0; kt < KT; kt++)
#pragma unroll
    for (uint e = 0; e < 4; e++) {
      const uint row = (e & 1) ? row1 : row0, col = kt * 8 + tq + (e >> 1) * 4;
      const float x =
          row < seqlen_q && col < D ? q[qbase + (ulong)row * q_ss + col] * scale_log2 : 0.0f;
      SPLIT(x, qh[kt][e], ql[kt][e]);
    }

  uint kv_end = seqlen_kv;
  const long shift = (long)seqlen_kv - (long)seqlen_q;
#if CAUSAL
  const long block_end = (long)min(q0 + BQ, seqlen_q) + shift;
  kv_end = block_end <= 0 ? 0u : (uint)min(block_end, (long)seqlen_kv);
#endif

  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* l: this lane's partial sums */
  float acc[VT][4];
#pragma unroll
  for (uint vt = 0; vt < VT; vt++)
#pragma unroll
    for (uint e = 0; e < 4; e++) acc[vt][e] = 0.0f;

  for (uint kv0 = 0; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */
    /* Keys past the tile and columns past the head dim are zero: the MMAs multiply them. */
    for (uint i = lid; i < BKV * (DP / VEC); i += WG) {
      const uint j = i / (DP / VEC), c = (i % (DP / VEC)) * VEC;
      const floatv x =
          j < nk && c < D ? VLOAD(k + kbase + (ulong)(kv0 + j) * k_ss + c) : (floatv)0.0f;
      for (uint e = 0; e < VEC; e++) Ks[j * KS + c + e] = VGET(x, e);
    }
    for (uint i = lid; i < BKV * (DVP / VEC); i += WG) {
      const uint j = i / (DVP / VEC), c = (i % (DVP / VEC)) * VEC;
      const floatv x =
          j < nk && c < DV ? VLOAD(v + vbase + (ulong)(kv0 + j) * v_ss + c) : (floatv)0.0f;
      for (uint e = 0; e < VEC; e++) Vs[j * VS + c + e] = VGET(x, e);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* S = Q K^T: C fragment element e is row gq + 8 (e >> 1), key 2 tq + (e & 1). */
    float s[NT][4];
#pragma unroll
    for (uint nt = 0; nt < NT; nt++) {
#pragma unroll
      for (uint e = 0; e < 4; e++) s[nt][e] = 0.0f;
#pragma unroll
      for (uint kt = 0; kt < KT; kt++) {
        uint bh0, bl0, bh1, bl1;
        const uint at = (nt * 8 + gq) * KS + kt * 8 + tq;
        SPLIT(Ks[at], bh0, bl0);
        SPLIT(Ks[at + 4], bh1, bl1);
        MMA3(s[nt], qh[kt], ql[kt], bh0, bh1, bl0, bl1);
      }
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (uint nt = 0; nt < NT; nt++)
#pragma unroll
      for (uint e = 0; e < 4; e++) {
        const uint j = nt * 8 + 2 * tq + (e & 1);
        bool ok = j < nk;
#if CAUSAL
        ok = ok && (long)(kv0 + j) <= (long)((e >> 1) ? row1 : row0) + shift;
#endif
        s[nt][e] = ok ? s[nt][e] : -INFINITY;
        if (e >> 1)
          mx1 = fmax(mx1, s[nt][e]);
        else
          mx0 = fmax(mx0, s[nt][e]);
      }
    const float mn0 = fmax(m0, quad_max(mx0)), mn1 = fmax(m1, quad_max(mx1));
    /* While a row has seen no key (mn = -inf) nothing changes: never exp2(-inf - -inf). */
    const float a0 = mn0 == -INFINITY ? 1.0f : exp2(m0 - mn0);
    const float a1 = mn1 == -INFINITY ? 1.0f : exp2(m1 - mn1);
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (uint nt = 0; nt < NT; nt++)
#pragma unroll
      for (uint e = 0; e < 4; e++) {
        const float mn = (e >> 1) ? mn1 : mn0;
        const float p = mn == -INFINITY ? 0.0f : exp2(s[nt][e] - mn);
        s[nt][e] = p;
        if (e >> 1)
          sum1 += p;
        else
          sum0 += p;
      }
    l0 = l0 * a0 + sum0, l1 = l1 * a1 + sum1;
    m0 = mn0, m1 = mn1;
#pragma unroll
    for (uint vt = 0; vt < VT; vt++) {
      acc[vt][0] *= a0, acc[vt][1] *= a0;
      acc[vt][2] *= a1, acc[vt][3] *= a1;
    }

/* O += P V, one 8-key step per S tile: A = (s0, s2, s1, s3) with the keys permuted. */
#pragma unroll
    for (uint nt = 0; nt < NT; nt++) {
      uint ph[4], pl[4];
      SPLIT(s[nt][0], ph[0], pl[0]);
      SPLIT(s[nt][2], ph[1], pl[1]);
      SPLIT(s[nt][1], ph[2], pl[2]);
      SPLIT(s[nt][3], ph[3], pl[3]);
      const uint key = nt * 8 + 2 * tq;
#pragma unroll
      for (uint vt = 0; vt < VT; vt++) {
        uint bh0, bl0, bh1, bl1;
        SPLIT(Vs[key * VS + vt * 8 + gq], bh0, bl0);
        SPLIT(Vs[(key + 1) * VS + vt * 8 + gq], bh1, bl1);
        MMA3(acc[vt], ph, pl, bh0, bh1, bl0, bl1);
      }
    }
  }

  /* The row sums meet across the quad; then O = acc / l, written two columns per lane. */
  l0 = quad_sum(l0), l1 = quad_sum(l1);
  const ulong obase = o_off + b * o_sb + h * o_sh;
#pragma unroll
  for (uint hr = 0; hr < 2; hr++) {
    const uint row = hr ? row1 : row0;
    const float l = hr ? l1 : l0, m = hr ? m1 : m0;
    if (row >= seqlen_q) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (uint vt = 0; vt < VT; vt++) {
      const uint c = vt * 8 + 2 * tq;
      if (c < DV) o[obase + (ulong)row * o_ss + c] = acc[vt][2 * hr] * inv;
      if (c + 1 < DV) o[obase + (ulong)row * o_ss + c + 1] = acc[vt][2 * hr + 1] * inv;
    }
    if (write_lse && tq == 0)
      lse[(b * heads_q + h) * seqlen_q + row] = l > 0.0f ? (m + log2(l)) * M_LN2_F : -INFINITY;
  }
}
