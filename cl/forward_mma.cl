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
 * Local layouts are permuted so that each lane's B fragments are adjacent: one 16-byte read
 * gives a lane the K values of two k-steps (columns tq, tq + 4, tq + 8, tq + 12 of each
 * 16-column block sit together), and V's columns are stored by fragment row (column c at
 * (c % 8) * VTP + c / 8), so one read gives four 8-column tiles of O. The pads keep both reads
 * free of bank conflicts.
 *
 * Tensor cores truncate when they add into their accumulator, so a long chain of MMAs on one
 * accumulator drifts (a chain over all keys failed the fp32 standard at N = 1024 on the H200).
 * Products are chained in a temporary for FLUSH_S k-steps of S and FLUSH_O 8-key steps of
 * P V, then added to the fp32 accumulator with round-to-nearest, as Ootomo and Yokota recover
 * fp32 accuracy from tensor cores (2022).
 *
 * The runtime builds this variant only for NVIDIA devices of compute capability 8.0 or more
 * (runtime/device.c); the portable kernels stay the default everywhere else. With MMA_EMULATE
 * (CLATTN_MMA_EMULATE=1, for tests on any device) mma.sync, the shuffles and the TF32 rounding
 * are emulated with local memory and barriers, so that the fragment and layout logic here runs
 * on PoCL; it is slow and for tests only.
 *
 * Parameters (-D): D, DV head dims; BQ query rows per work-group (16 per warp); BKV keys per
 * tile (a multiple of 8); PAD (nonzero: pad the local rows as above); CAUSAL; the variants MASK
 * SOFTCAP, ALIBI and SINKS (cl/common.cl, as cl/forward.cl); VEC, the width of
 * the global loads that fill the tiles; FLUSH_S, FLUSH_O as above; PREFETCH (1: the next tile's
 * global loads are issued before this tile's MMAs, into registers); KVSPLIT (from the host's
 * stage_kv 2: the tiles stored split, see PUT); and for experiments VW (1: V read one value at
 * a time, fewer registers; slower at d = 128 on the H200) and REVERSE 0 (causal blocks in
 * order). Variants the H200 measured slower are gone; docs/BENCHMARKS.md names them (among
 * them two warps sharing 16 rows, and Q kept in local memory). The split arguments are forward.cl's
 * (keys cut into ranges merged by runtime/split.c). runtime/tiling.c mirrors the local-memory
 * formula; keep the two in step. */

/* Defaults from timings on the H200 (docs/BENCHMARKS.md): longer chains are faster, and the
 * prefetch pays where its registers are few (16 floats at d = 64 with 256 work-items, BKV = 32);
 * at d = 128 the kernel already spills. */
#ifndef FLUSH_S
#define FLUSH_S (D > 64 ? 4 : 2)
#endif
#ifndef FLUSH_O
#define FLUSH_O 4
#endif
#ifndef REVERSE /* causal blocks longest first: 2-3% faster on the H200 (commit 79ebd4c) */
#define REVERSE 1
#endif
#ifndef KVSPLIT
#define KVSPLIT 0
#endif
#ifndef SCHAINS /* 2: S's odd k-steps in chains of MMAs of their own, twice the chains */
#define SCHAINS 1
#endif
#if SCHAINS == 2
#define T2 u /* the chains of S's odd k-steps */
#else
#define T2 t
#endif

#define WARPS (BQ / 16)
#define WG (WARPS * 32)
#define DP ((D + 15) / 16 * 16) /* head dim of S padded to two k-steps of 8 */
#define DVP ((DV + 7) / 8 * 8)
#define KT (DP / 8)  /* k-steps of S = Q K^T */
#define NT (BKV / 8) /* 8-key tiles of S; k-steps of P V */
#define VT (DVP / 8) /* 8-column tiles of O */
#ifndef VW           /* 8-column tiles per V read: 4 (one 16-byte read) or 1, fewer registers */
#define VW (VT % 4 ? 1 : 4)
#endif
#if VW != 1 && (VW != 4 || VT % 4)
#error "VW must be 1, or 4 when the 8-column tiles of O are a multiple of 4"
#endif
#if PAD
#define KS (DP % 32 ? DP : DP + 16)     /* rows gq, gq + 1 in opposite bank halves */
#define VTP (VT % 8 == 0 ? VT + 4 : VT) /* VTP = 4 mod 8 when VT % 4 == 0 */
#define VS ((8 * VTP + 15) / 16 * 16 + 4)
#else
#define KS DP
#define VTP VT
#define VS (8 * VTP)
#endif

/* Where logical column c of K and of V sits in its local row. */
#define KCOL(c) (((c) & ~15u) + 4 * ((c)&3u) + 2 * (((c) >> 3) & 1u) + (((c) >> 2) & 1u))
#define VCOL(c) (((c) % 8) * VTP + (c) / 8)

/* Each work-item's share of a tile's global loads, in VEC-wide pieces. */
#define KPIECES (BKV * (DP / VEC))
#define VPIECES (BKV * (DVP / VEC))
#define KPER ((KPIECES + WG - 1) / WG)
#define VPER ((VPIECES + WG - 1) / WG)
#ifndef PREFETCH
#define PREFETCH ((KPER + VPER) * VEC <= 16)
#endif

/* Loads keys kv0_ .. kv0_ + nk_ - 1 into kr, vr; keys past them and columns past the head dims
 * are zero, since the MMAs multiply them. */
#define FETCH(kv0_, nk_)                                                                           \
  do {                                                                                             \
    for (uint r_ = 0; r_ < KPER; r_++) {                                                           \
      const uint i_ = lid + r_ * WG, j_ = i_ / (DP / VEC), c_ = (i_ % (DP / VEC)) * VEC;           \
      kr[r_] = i_ < KPIECES && j_ < (nk_) && c_ < D                                                \
                   ? VLOAD(k + kbase + (ulong)((kv0_) + j_) * k_ss + c_)                           \
                   : (floatv)0.0f;                                                                 \
    }                                                                                              \
    for (uint r_ = 0; r_ < VPER; r_++) {                                                           \
      const uint i_ = lid + r_ * WG, j_ = i_ / (DVP / VEC), c_ = (i_ % (DVP / VEC)) * VEC;         \
      vr[r_] = i_ < VPIECES && j_ < (nk_) && c_ < DV                                               \
                   ? VLOAD(v + vbase + (ulong)((kv0_) + j_) * v_ss + c_)                           \
                   : (floatv)0.0f;                                                                 \
    }                                                                                              \
  } while (0)

/* With KVSPLIT the tiles are stored split, hi in Ks, Vs and lo in Ks2, Vs2 (the bits of TF32
 * values), so that each value is split once rather than once per warp. */
#if KVSPLIT
#define PUT(hi_, lo_, at_, x_)                                                                     \
  do {                                                                                             \
    uint h_, l_;                                                                                   \
    SPLIT(x_, h_, l_);                                                                             \
    hi_[at_] = as_float(h_), lo_[at_] = as_float(l_);                                              \
  } while (0)
#else
#define PUT(hi_, lo_, at_, x_) (hi_[at_] = (x_))
#endif

#define STORE()                                                                                    \
  do {                                                                                             \
    for (uint r_ = 0; r_ < KPER; r_++) {                                                           \
      const uint i_ = lid + r_ * WG, j_ = i_ / (DP / VEC), c_ = (i_ % (DP / VEC)) * VEC;           \
      if (i_ < KPIECES)                                                                            \
        for (uint e_ = 0; e_ < VEC; e_++) PUT(Ks, Ks2, j_ *KS + KCOL(c_ + e_), VGET(kr[r_], e_));  \
    }                                                                                              \
    for (uint r_ = 0; r_ < VPER; r_++) {                                                           \
      const uint i_ = lid + r_ * WG, j_ = i_ / (DVP / VEC), c_ = (i_ % (DVP / VEC)) * VEC;         \
      if (i_ < VPIECES)                                                                            \
        for (uint e_ = 0; e_ < VEC; e_++) PUT(Vs, Vs2, j_ *VS + VCOL(c_ + e_), VGET(vr[r_], e_));  \
    }                                                                                              \
  } while (0)

/* Off: clang-format does not know UNROLL is a pragma. */
// clang-format off
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_forward(__global const float *q, __global const float *k, __global const float *v,
               __global float *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
               ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb,
               ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh,
               uint heads_q, uint group, uint seqlen_q, uint seqlen_kv, uint num_qblocks,
               ulong group_base, float scale_log2, int write_lse, uint num_splits,
               uint kv_per_split, ulong o_split, ulong lse_off, ulong lse_split VARIANT_ARGS) {
  /* float4 arrays: the 16-byte fragment reads need 16-byte alignment. */
  __local float4 Kl[BKV * KS / 4];
  __local float4 Vl[BKV * VS / 4];
  __local float *Ks = (__local float *)Kl, *Vs = (__local float *)Vl;
#if KVSPLIT
  __local float4 Kl2[BKV * KS / 4];
  __local float4 Vl2[BKV * VS / 4];
  __local float *Ks2 = (__local float *)Kl2, *Vs2 = (__local float *)Vl2;
#endif
  const uint lid = get_local_id(0);
  const uint warp = lid / 32, lane = lid % 32;
#ifdef MMA_EMULATE
  __local float scratch[WARPS * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#endif
  const uint gq = lane / 4, tq = lane % 4; /* fragment row group and column within it */
  const ulong g = group_base + get_group_id(0);
#if CAUSAL && REVERSE
  /* The blocks that see the most keys first, so that the short ones fill the tail. */
  const uint qb = num_qblocks - 1 - (uint)(g % num_qblocks);
#else
  const uint qb = (uint)(g % num_qblocks);
#endif
  /* Work-groups run over query blocks, then key splits (flash-decoding), then heads. */
  const ulong gs = g / num_qblocks;
  const uint split = (uint)(gs % num_splits);
  const ulong bh = gs / num_splits;
  const uint h = (uint)(bh % heads_q);
  const ulong b = bh / heads_q;
  SEQ_BEGIN(b);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  const uint q0 = qb * BQ, r0 = q0 + warp * 16; /* this warp's rows r0 .. r0 + 15 */
  const uint row0 = r0 + gq, row1 = r0 + gq + 8; /* this lane's two rows */
#ifdef MMA_EMULATE
#define SKIP_NONE 1 /* every work-item must reach the emulation's barriers */
#else
#define SKIP_NONE 0
#endif
  const bool live = SKIP_NONE || r0 < seqlen_q; /* the same for the whole warp */

  const ulong qbase = q_off + QB(q) + h * q_sh;
  const ulong kbase = k_off + KB(k) + (h / group) * k_sh;
  const ulong vbase = v_off + KB(v) + (h / group) * v_sh;

  /* Q's A fragments: element e is row gq + 8 (e & 1), column tq + 4 (e >> 1) of each k-step. */
  uint qh[KT][4], ql[KT][4];
UNROLL
  for (uint kt = 0; kt < KT; kt++)
UNROLL
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
#if MASK
  /* The split's keys that some row of this block sees (cl/forward.cl); a warp's own rows see
   * [w_first, w_end) (empty for a warp past the rows), each of this lane's rows its own. */
  uint kv_lo, w_first, w_end;
  mask_split_keys(q0, min(q0 + BQ, seqlen_q), seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
  mask_rows_keys(r0, min(r0 + 16, seqlen_q), seqlen_kv, mask_lo, mask_hi, &w_first, &w_end);
  const uint first0 = mask_key(row0, mask_lo, seqlen_kv), end0 = mask_key(row0, mask_hi, seqlen_kv);
  const uint first1 = mask_key(row1, mask_lo, seqlen_kv), end1 = mask_key(row1, mask_hi, seqlen_kv);
#else
  /* This work-group's split of the keys: [kv_lo, kv_end). */
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

  /* l: this lane's partial sums (the sink's term in one lane of the quad) */
  float m0 = SINK_M(h, split), m1 = m0, l0 = tq == 0 ? SINK_L(split) : 0.0f, l1 = l0;
#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif
  float acc[VT][4];
UNROLL
  for (uint vt = 0; vt < VT; vt++)
UNROLL
    for (uint e = 0; e < 4; e++) acc[vt][e] = 0.0f;

  floatv kr[KPER], vr[VPER];
#if PREFETCH
  if (kv_lo < kv_end) FETCH(kv_lo, min((uint)BKV, kv_end - kv_lo));
#endif
  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */
#if !PREFETCH
    FETCH(kv0, nk);
#endif
    STORE();
    barrier(CLK_LOCAL_MEM_FENCE);
#if PREFETCH
    if (kv0 + BKV < kv_end) FETCH(kv0 + BKV, min((uint)BKV, kv_end - kv0 - BKV));
#endif

    /* A warp with no rows, or whose rows precede every key of the tile (causal), has nothing
     * to add: it only helps to fill the tiles. */
    bool act = live && (!CAUSAL || SKIP_NONE || (long)kv0 <= (long)(r0 + 15) + shift);
#if MASK
    act = act && (SKIP_NONE || (kv0 < w_end && kv0 + BKV > w_first));
#endif
    float s[NT][4];
    if (act) {
      /* S = Q K^T: C fragment element e is row gq + 8 (e >> 1), key 2 tq + (e & 1). The
       * k-steps run outermost, so that the NT chains of MMAs are independent and can overlap. */
      /* With SCHAINS 2 the odd k-steps chain in u, apart from the even ones in t. */
      float t[NT][4], u[NT][4];
UNROLL
      for (uint nt = 0; nt < NT; nt++)
UNROLL
        for (uint e = 0; e < 4; e++) s[nt][e] = 0.0f, t[nt][e] = 0.0f, u[nt][e] = 0.0f;
/* Q's fragments of k-steps 2 kp_ and 2 kp_ + 1 */
#define QFRAG(kp_)                                                                                 \
  uint ah[2][4], al[2][4];                                                                         \
  UNROLL for (uint hs = 0; hs < 2; hs++) UNROLL for (uint e = 0; e < 4; e++) ah[hs][e] = qh[2 * (kp_) + hs][e], al[hs][e] = ql[2 * (kp_) + hs][e]
/* K's b0, b1 of k-step 2 kp_, then of k-step 2 kp_ + 1, for key tile nt_: two k-steps of t */
#if KVSPLIT
#define KFRAG(nt_, kp_)                                                                            \
  const uint at = ((nt_) * 8 + gq) * KS + (kp_) * 16 + 4 * tq;                                     \
  const uint4 bh = as_uint4(*(__local const float4 *)(Ks + at));                                   \
  const uint4 bl = as_uint4(*(__local const float4 *)(Ks2 + at))
#else
#define KFRAG(nt_, kp_)                                                                            \
  const uint at = ((nt_) * 8 + gq) * KS + (kp_) * 16 + 4 * tq;                                     \
  const float4 kb = *(__local const float4 *)(Ks + at);                                            \
  uint4 bh, bl;                                                                                    \
  SPLIT(kb.s0, bh.s0, bl.s0);                                                                      \
  SPLIT(kb.s1, bh.s1, bl.s1);                                                                      \
  SPLIT(kb.s2, bh.s2, bl.s2);                                                                      \
  SPLIT(kb.s3, bh.s3, bl.s3)
#endif
#define KMMA(nt_)                                                                                  \
  MMA3(t[nt_], ah[0], al[0], bh.s0, bh.s1, bl.s0, bl.s1);                                          \
  MMA3(T2[nt_], ah[1], al[1], bh.s2, bh.s3, bl.s2, bl.s3)
/* Flushed per pair of k-steps (an odd FLUSH_S rounds up). */
#define FLUSH_AFTER(kp_) (((kp_) + 1) % ((FLUSH_S + 1) / 2) == 0 || 2 * (kp_) + 2 == KT)
UNROLL
      for (uint kp = 0; kp < KT / 2; kp++) {
        QFRAG(kp);
UNROLL
        for (uint nt = 0; nt < NT; nt++) {
          KFRAG(nt, kp);
          KMMA(nt);
        }
        if (FLUSH_AFTER(kp))
UNROLL
          for (uint nt = 0; nt < NT; nt++) {
            FLUSH(s[nt], t[nt]);
            if (SCHAINS == 2) FLUSH(s[nt], u[nt]);
          }
      }
      float mx0 = -INFINITY, mx1 = -INFINITY;
UNROLL
      for (uint nt = 0; nt < NT; nt++)
UNROLL
        for (uint e = 0; e < 4; e++) {
          const uint j = nt * 8 + 2 * tq + (e & 1);
          bool ok = j < nk;
#if CAUSAL
          ok = ok && (long)(kv0 + j) <= (long)((e >> 1) ? row1 : row0) + shift;
#endif
#if MASK
          ok = ok && kv0 + j >= ((e >> 1) ? first1 : first0) && kv0 + j < ((e >> 1) ? end1 : end0);
#endif
#if SOFTCAP
          s[nt][e] = softcap * cap_tanh(s[nt][e]);
#endif
          ALIBI_ADD(s[nt][e], slope, (e >> 1) ? row1 : row0, kv0 + j);
          s[nt][e] = ok ? s[nt][e] : -INFINITY;
          if (e >> 1)
            mx1 = fmax(mx1, s[nt][e]);
          else
            mx0 = fmax(mx0, s[nt][e]);
        }
      const float mn0 = fmax(m0, quad_max(mx0 SCR_ARGS)), mn1 = fmax(m1, quad_max(mx1 SCR_ARGS));
      /* While a row has seen no key (mn = -inf) nothing changes: never exp2(-inf - -inf). */
      const float a0 = mn0 == -INFINITY ? 1.0f : exp2(m0 - mn0);
      const float a1 = mn1 == -INFINITY ? 1.0f : exp2(m1 - mn1);
      float sum0 = 0.0f, sum1 = 0.0f;
      /* P as A fragments (s0, s2, s1, s3: the keys permuted), split once for every V tile. */
      uint ph[NT][4], pl[NT][4];
UNROLL
      for (uint nt = 0; nt < NT; nt++)
UNROLL
        for (uint e = 0; e < 4; e++) {
          const float mn = (e >> 1) ? mn1 : mn0;
          const float p = mn == -INFINITY ? 0.0f : exp2(s[nt][e] - mn);
          if (e >> 1)
            sum1 += p;
          else
            sum0 += p;
          const uint a = (e >> 1) | ((e & 1) << 1);
          SPLIT(p, ph[nt][a], pl[nt][a]);
        }
      l0 = l0 * a0 + sum0, l1 = l1 * a1 + sum1;
      m0 = mn0, m1 = mn1;
UNROLL
      for (uint vt = 0; vt < VT; vt++) {
        acc[vt][0] *= a0, acc[vt][1] *= a0;
        acc[vt][2] *= a1, acc[vt][3] *= a1;
      }

      /* O += P V, VW 8-column tiles at a time; b0, b1 are keys 2 tq and 2 tq + 1 of each step. */
UNROLL
      for (uint vc = 0; vc < VT / VW; vc++) {
        float t[VW][4];
UNROLL
        for (uint w = 0; w < VW; w++)
UNROLL
          for (uint e = 0; e < 4; e++) t[w][e] = 0.0f;
UNROLL
        for (uint nt = 0; nt < NT; nt++) {
          const uint at = (nt * 8 + 2 * tq) * VS + gq * VTP + vc * VW;
/* Keys 2 tq and 2 tq + 1 of V's VW tiles at `at` of array a_ into r0_, r1_. */
#if VW == 4
#define VREAD(a_, r0_, r1_)                                                                        \
  do {                                                                                             \
    const float4 x0_ = *(__local const float4 *)(a_ + at), x1_ = *(__local const float4 *)(a_ + at + VS); \
    r0_[0] = x0_.s0, r0_[1] = x0_.s1, r0_[2] = x0_.s2, r0_[3] = x0_.s3;                            \
    r1_[0] = x1_.s0, r1_[1] = x1_.s1, r1_[2] = x1_.s2, r1_[3] = x1_.s3;                            \
  } while (0)
#else
#define VREAD(a_, r0_, r1_) (r0_[0] = a_[at], r1_[0] = a_[at + VS])
#endif
          float b0[VW], b1[VW];
          VREAD(Vs, b0, b1);
#if KVSPLIT
          float c0[VW], c1[VW]; /* the lo parts */
          VREAD(Vs2, c0, c1);
#endif
UNROLL
          for (uint w = 0; w < VW; w++) {
            uint bh0, bl0, bh1, bl1;
#if KVSPLIT
            bh0 = as_uint(b0[w]), bl0 = as_uint(c0[w]), bh1 = as_uint(b1[w]), bl1 = as_uint(c1[w]);
#else
            SPLIT(b0[w], bh0, bl0);
            SPLIT(b1[w], bh1, bl1);
#endif
            MMA3(t[w], ph[nt], pl[nt], bh0, bh1, bl0, bl1);
            if ((nt + 1) % FLUSH_O == 0 || nt + 1 == NT) FLUSH(acc[vc * VW + w], t[w]);
          }
        }
      }
    }
  }

  /* The row sums meet across the quad; then O = acc / l, written two columns per lane. */
  l0 = quad_sum(l0 SCR_ARGS), l1 = quad_sum(l1 SCR_ARGS);
  const ulong obase = o_off + split * o_split + QB(o) + h * o_sh;
UNROLL
  for (uint hr = 0; hr < 2; hr++) {
    const uint row = hr ? row1 : row0;
    const float l = hr ? l1 : l0, m = hr ? m1 : m0;
    if (row >= seqlen_q) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
UNROLL
    for (uint vt = 0; vt < VT; vt++) {
      const uint c = vt * 8 + 2 * tq;
      if (c < DV) o[obase + (ulong)row * o_ss + c] = acc[vt][2 * hr] * inv;
      if (c + 1 < DV) o[obase + (ulong)row * o_ss + c + 1] = acc[vt][2 * hr + 1] * inv;
    }
    if (write_lse && tq == 0)
      lse[lse_off + split * lse_split + LSE_ROW(b, h) + row] = l > 0.0f ? (m + log2(l)) * M_LN2_F : -INFINITY;
  }
}
// clang-format on

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
