/* Fused attention forward on NVIDIA tensor cores in half storage ("forward_mma_half"): fp16 or
 * bf16 Q, K, V and O (DTYPE 1 or 2), mma.sync m16n8k16 with fp32 accumulators through inline
 * PTX (cl/mma_half.cl). fp32 storage stays forward_mma's (3xTF32).
 *
 * FlashAttention-2's loop order and register use, each warp owning 16 query rows:
 *   - Q's A fragments stay in registers for the whole key loop: Q as stored (exact), packed in
 *     pairs; S is scaled by scale * log2 e in fp32 after its MMAs, as FlashAttention-2 does
 *     (with RAW_MAX, below, after its row maxima).
 *     (Scaling Q before rounding it to the type added an error the naive reference does not
 *     have where scale is a power of two: bf16 at d = 64 failed the LSE rule on the H200.)
 *   - K and V tiles pass through local memory as 16-bit values, in pairs per 32-bit word, so
 *     that each B fragment register is one 32-bit read. K is stored as it comes, a row per key
 *     (S = Q K^T takes K^T as B: b0 holds head-dim columns 2 tq, 2 tq + 1 of key gq, adjacent in
 *     K's row). V is stored transposed, a row per output column (P V takes V as B: b0 holds
 *     keys 2 tq, 2 tq + 1 of column gq, adjacent only in V^T's row).
 *   - S accumulates in fp32 C fragments; the online softmax (row max and sum across the four
 *     lanes of a row, by shuffles) is fp32; P is rounded to the storage type straight from S's
 *     C fragments into P V's A fragments (the layouts coincide, cl/mma_half.cl), and O
 *     accumulates in fp32, is normalised in fp32 and stored rounded (STS).
 * Head dims are padded with zeros: D to 16 (S's k-steps), DV to 8 (O's tiles); keys past the
 * tile's end are zero in K and V and -inf in S. Scores are in the log2 domain (exp2), LSE
 * converts back: (m + log2 l) ln 2 (m scale log2 e for raw maxima).
 *
 * PAD appends 8 16-bit values (4 words) to each local row: a row is then an odd multiple of 4
 * words, so the 8 rows x 4 words of one fragment read fall in 32 distinct banks.
 *
 * Parameters (-D): D, DV head dims; BQ query rows per work-group (16 per warp); BKV keys per
 * tile (a multiple of 16, P V's k-step); PAD (0 or 1); CAUSAL (bottom-right aligned; key blocks
 * no row of the work-group sees are skipped); REVERSE (causal blocks longest first, 1 by
 * default); the variants MASK (key blocks outside the work-group's rows' ranges skipped, and a
 * warp's own likewise), SOFTCAP (cl/common.cl; S's fp32 scale is then scale / cap), ALIBI and SINKS. The arguments are cl/forward.cl's, the split ranges and o_f32 included (cl/common.cl's
 * OUT_ARG, STO: a split call's partial O in fp32, for the merge). With MMA_EMULATE
 * (CLATTN_MMA_EMULATE=1) the MMAs and shuffles are emulated, so this runs on PoCL for tests.
 * runtime/kernels/forward_mma_half.c mirrors the local-memory formula; keep the two in step.
 *
 * STAGE 1 stages each tile through registers (16-bit pairs, V transposed on the way) between two
 * barriers. STAGE 2 (D and DV multiples of 16, PAD) double-buffers the tiles: tile t + 1's
 * copies (cp.async, 16 bytes each, straight from global to local memory) are in flight while
 * tile t is computed, V is stored as it comes (a row per key) and its B fragments are read
 * transposed by ldmatrix.trans, K's by ldmatrix (cl/mma_half.cl); views not 16-byte aligned
 * copy through registers into the same layout. */

#if DTYPE != 1 && DTYPE != 2
#error "forward_mma_half computes fp16 and bf16 storage (DTYPE 1 or 2); fp32 is forward_mma's"
#endif
#if BKV % 16 || BQ % 16
#error "BQ and BKV must be multiples of 16"
#endif
#ifndef REVERSE
#define REVERSE 1
#endif
#ifndef STAGE
#define STAGE 1
#endif
#if STAGE == 2 && (D % 16 || DV % 16 || !PAD)
#error "STAGE 2 needs D and DV multiples of 16 and PAD"
#endif

#define WARPS (BQ / 16)
#define WG (WARPS * 32)
#define DP ((D + 15) / 16 * 16) /* S's k dimension, padded */
#define DVP ((DV + 7) / 8 * 8)
#define KT (DP / 16) /* k-steps of S = Q K^T */
#define NT (BKV / 8) /* 8-key tiles of S */
#define KK (BKV / 16) /* k-steps of P V */
#define VT (DVP / 8) /* 8-column tiles of O */
#define KS ((DP + 8 * PAD) / 2) /* words per key row of K */
#define VS ((BKV + 8 * PAD) / 2) /* words per column row of V^T */
#define VR ((DVP + 8) / 2)        /* STAGE 2: words per key row of V */

/* RAW_MAX (FlashAttention-2's order, where no variant changes a score after its scaling): the
 * row maxima are taken on raw scores and P = exp2(s scale - m scale), one FMA before the
 * exponential; m is then raw, scaled where it is used. EXP2: the exponential of P and of the
 * rescale, NVIDIA's ex2.approx.ftz (native_exp2) on tensor cores, whose 2 ulp vanish in P's
 * rounding to 16 bits. -DFAST_EXP=0 keeps OpenCL's exp2 and scaled maxima (an experiment). */
#ifndef FAST_EXP
#define FAST_EXP 1
#endif
#if FAST_EXP && !SOFTCAP && !ALIBI && !SINKS
#define RAW_MAX 1
#else
#define RAW_MAX 0
#endif
#if FAST_EXP && !defined(MMA_EMULATE)
#define EXP2 native_exp2
#else
#define EXP2 exp2
#endif

#if STAGE == 2
/* Keys kv0 .. kv0 + nk - 1 of K and V, rows of 16-byte chunks, into one stage's buffers (zeros
 * past nk): by cp.async where the views are 16-byte aligned (fast), else through registers. */
static inline void issue_tile(__local uint *Kl, __local uint *Vl, __global const ushort *kb,
                              ulong kbase, ulong k_ss, __global const ushort *vb, ulong vbase,
                              ulong v_ss, uint kv0, uint nk, int fast, uint lid) {
  for (uint i = lid; i < BKV * (D / 8); i += WG) {
    const uint j = i / (D / 8), c = i % (D / 8);
    __global const ushort *src = kb + kbase + (ulong)(kv0 + j) * k_ss + 8 * c;
    __local uint *dst = Kl + j * KS + 4 * c;
    if (fast) {
      cp16(dst, (__global const uint *)(j < nk ? src : kb), j < nk);
    } else {
      UNROLL for (uint e = 0; e < 4; e++) dst[e] = j < nk ? src[2 * e] | (uint)src[2 * e + 1] << 16 : 0u;
    }
  }
  for (uint i = lid; i < BKV * (DV / 8); i += WG) {
    const uint j = i / (DV / 8), c = i % (DV / 8);
    __global const ushort *src = vb + vbase + (ulong)(kv0 + j) * v_ss + 8 * c;
    __local uint *dst = Vl + j * VR + 4 * c;
    if (fast) {
      cp16(dst, (__global const uint *)(j < nk ? src : vb), j < nk);
    } else {
      UNROLL for (uint e = 0; e < 4; e++) dst[e] = j < nk ? src[2 * e] | (uint)src[2 * e + 1] << 16 : 0u;
    }
  }
}
#endif

// clang-format off
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_forward(__global const stor_t *q, __global const stor_t *k, __global const stor_t *v,
               __global stor_t *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
               ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb,
               ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh,
               uint heads_q, uint group, uint seqlen_q, uint seqlen_kv, uint num_qblocks,
               ulong group_base, float scale_log2, int write_lse, uint num_splits,
               uint kv_per_split, ulong o_split, ulong lse_off, ulong lse_split OUT_ARG
               VARIANT_ARGS) {
  // clang-format on
#if STAGE == 2
  /* Two stages of K[key][column pair] and V[key][column pair], 16-byte rows. */
  __local uint Kw2[2 * BKV * KS] __attribute__((aligned(16)));
  __local uint Vw2[2 * BKV * VR] __attribute__((aligned(16)));
#else
  /* Pairs of 16-bit values: K[key][column pair], V^T[column][key pair]. */
  __local uint Kw[BKV * KS];
  __local uint Vw[DVP * VS];
#endif
  const uint lid = get_local_id(0);
  const uint warp = lid / 32, lane = lid % 32;
#ifdef MMA_EMULATE
  __local float scratch[WARPS * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#define SKIP_NONE 1 /* every work-item must reach the emulation's barriers */
#else
#define SKIP_NONE 0
#endif
  const uint gq = lane / 4, tq = lane % 4; /* fragment row group and column pair within it */
  const ulong g = group_base + get_group_id(0);
#if CAUSAL && REVERSE
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
  const bool live = SKIP_NONE || r0 < seqlen_q;  /* the same for the whole warp */

  const ulong qbase = q_off + QB(q) + h * q_sh;
  const ulong kbase = k_off + KB(k) + (h / group) * k_sh;
  const ulong vbase = v_off + KB(v) + (h / group) * v_sh;
  /* K and V as their 16-bit words, copied to local memory unchanged. */
  __global const ushort *kb = (__global const ushort *)k, *vb = (__global const ushort *)v;

  /* Q's A fragments: register r of k-step kt is row gq + 8 (r & 1), columns
   * 16 kt + 2 tq + 8 (r >> 1) and the next. */
  uint qa[KT][4];
  UNROLL for (uint kt = 0; kt < KT; kt++) UNROLL for (uint r = 0; r < 4; r++) {
    const uint row = (r & 1) ? row1 : row0, c = kt * 16 + 2 * tq + 8 * (r >> 1);
    const __global stor_t *qr = q + qbase + (ulong)row * q_ss;
    const bool seen = row < seqlen_q;
    const float x0 = seen && c < D ? LDS(qr + c) : 0.0f;
    const float x1 = seen && c + 1 < D ? LDS(qr + c + 1) : 0.0f;
    qa[kt][r] = PACK2(x0, x1);
  }
#if RAW_MAX
  /* Raw maxima need a positive scale: a negative one (legal: finite is the rule) negates Q
   * instead, exactly (the sign bits of its 16-bit values), so S and the scale change sign. */
  const float sl2 = fabs(scale_log2);
  if (scale_log2 < 0.0f)
    UNROLL for (uint kt = 0; kt < KT; kt++) UNROLL for (uint r = 0; r < 4; r++) qa[kt][r] ^= 0x80008000u;
#endif

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
  UNROLL for (uint vt = 0; vt < VT; vt++) UNROLL for (uint e = 0; e < 4; e++) acc[vt][e] = 0.0f;

#if STAGE == 2
  /* 16-byte chunks wherever the views' offsets and strides (and the buffers) allow them. */
  const int fast = ((k_off | k_sb | k_ss | k_sh | v_off | v_sb | v_ss | v_sh) % 8) == 0 &&
                   ((size_t)kb % 16) == 0 && ((size_t)vb % 16) == 0;
  uint buf = 0;
  if (kv_lo < kv_end)
    issue_tile(Kw2, Vw2, kb, kbase, k_ss, vb, vbase, v_ss, kv_lo, min((uint)BKV, kv_end - kv_lo),
               fast, lid);
  CP_COMMIT();
#endif
  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
#if STAGE == 2
    /* The next tile's copies into the other stage, then this tile's awaited: its group is the
     * older of the two in flight. */
    __local const uint *Kt = Kw2 + buf * (BKV * KS), *Vt = Vw2 + buf * (BKV * VR);
    if (kv0 + BKV < kv_end)
      issue_tile(Kw2 + (buf ^ 1) * (BKV * KS), Vw2 + (buf ^ 1) * (BKV * VR), kb, kbase, k_ss, vb,
                 vbase, v_ss, kv0 + BKV, min((uint)BKV, kv_end - kv0 - BKV), fast, lid);
    CP_COMMIT();
    CP_WAIT1();
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed */
    /* K: word (j, c / 2) holds columns c, c + 1 of key j; zero past the keys and D. */
    for (uint i = lid; i < BKV * (DP / 2); i += WG) {
      const uint j = i / (DP / 2), c = 2 * (i % (DP / 2));
      const __global ushort *kr = kb + kbase + (ulong)(kv0 + j) * k_ss + c;
      uint w = 0;
      if (j < nk && c + 1 < D) {
        const ushort2 x = vload2(0, kr);
        w = x.s0 | (uint)x.s1 << 16;
      } else if (j < nk && c < D) {
        w = kr[0];
      }
      Kw[j * KS + c / 2] = w;
    }
    /* V^T: word (c, j / 2) holds keys j, j + 1 of column c; zero past the keys and DV. */
    for (uint i = lid; i < DVP * (BKV / 2); i += WG) {
      const uint c = i % DVP, j = 2 * (i / DVP);
      const __global ushort *vr = vb + vbase + (ulong)(kv0 + j) * v_ss + c;
      const uint lo = j < nk && c < DV ? vr[0] : 0u, hi = j + 1 < nk && c < DV ? vr[v_ss] : 0u;
      Vw[c * VS + j / 2] = lo | hi << 16;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    /* A warp with no rows, or whose rows precede every key of the tile (causal), has nothing
     * to add: it only helps to fill the tiles. */
    bool act = live && (!CAUSAL || SKIP_NONE || (long)kv0 <= (long)(r0 + 15) + shift);
#if MASK
    act = act && (SKIP_NONE || (kv0 < w_end && kv0 + BKV > w_first));
#endif
    if (act) {
      /* S = Q K^T: s[nt][e] is row gq + 8 (e >> 1), key nt * 8 + 2 tq + (e & 1). */
      float s[NT][4];
      UNROLL for (uint nt = 0; nt < NT; nt++) UNROLL for (uint e = 0; e < 4; e++) s[nt][e] = 0.0f;
#if STAGE == 2
      UNROLL for (uint kt = 0; kt < KT; kt++) UNROLL for (uint nt = 0; nt < NT; nt += 2) {
        uint r[4];
        frag_rows_x4(Kt, KS, nt * 8, kt, lane, r);
        MMA16(s[nt], qa[kt], r[0], r[1]);
        MMA16(s[nt + 1], qa[kt], r[2], r[3]);
      }
#else
      UNROLL for (uint kt = 0; kt < KT; kt++) UNROLL for (uint nt = 0; nt < NT; nt++) {
        const uint at = (nt * 8 + gq) * KS + kt * 8 + tq;
        MMA16(s[nt], qa[kt], Kw[at], Kw[at + 4]);
      }
#endif
      float mx0 = -INFINITY, mx1 = -INFINITY;
      UNROLL for (uint nt = 0; nt < NT; nt++) UNROLL for (uint e = 0; e < 4; e++) {
        const uint j = nt * 8 + 2 * tq + (e & 1);
        bool ok = j < nk;
#if CAUSAL
        ok = ok && (long)(kv0 + j) <= (long)((e >> 1) ? row1 : row0) + shift;
#endif
#if MASK
        ok = ok && kv0 + j >= ((e >> 1) ? first1 : first0) && kv0 + j < ((e >> 1) ? end1 : end0);
#endif
#if SOFTCAP
        s[nt][e] = softcap * cap_tanh(s[nt][e] * scale_log2);
#elif !RAW_MAX
        s[nt][e] *= scale_log2;
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
#if RAW_MAX
      const float a0 = mn0 == -INFINITY ? 1.0f : EXP2((m0 - mn0) * sl2);
      const float a1 = mn1 == -INFINITY ? 1.0f : EXP2((m1 - mn1) * sl2);
      const float ms0 = mn0 * sl2, ms1 = mn1 * sl2;
#else
      const float a0 = mn0 == -INFINITY ? 1.0f : EXP2(m0 - mn0);
      const float a1 = mn1 == -INFINITY ? 1.0f : EXP2(m1 - mn1);
#endif
      float sum0 = 0.0f, sum1 = 0.0f;
      /* P in the storage type, as P V's A fragments: k-step kk takes 8-key tiles 2 kk (a[0],
       * a[1]) and 2 kk + 1 (a[2], a[3]), each C fragment's (c0, c1) and (c2, c3) a register. */
      uint pa[KK][4];
      UNROLL for (uint nt = 0; nt < NT; nt++) {
        float p[4];
        UNROLL for (uint e = 0; e < 4; e++) {
          const float mn = (e >> 1) ? mn1 : mn0;
#if RAW_MAX
          p[e] = mn == -INFINITY ? 0.0f : EXP2(fma(s[nt][e], sl2, -((e >> 1) ? ms1 : ms0)));
#else
          p[e] = mn == -INFINITY ? 0.0f : EXP2(s[nt][e] - mn);
#endif
        }
        sum0 += p[0] + p[1], sum1 += p[2] + p[3];
        pa[nt / 2][2 * (nt % 2)] = PACK2(p[0], p[1]);
        pa[nt / 2][2 * (nt % 2) + 1] = PACK2(p[2], p[3]);
      }
      l0 = l0 * a0 + sum0, l1 = l1 * a1 + sum1;
      m0 = mn0, m1 = mn1;
      UNROLL for (uint vt = 0; vt < VT; vt++) {
        acc[vt][0] *= a0, acc[vt][1] *= a0;
        acc[vt][2] *= a1, acc[vt][3] *= a1;
      }
      /* O += P V: b0 holds keys 16 kk + 2 tq and the next of column vt * 8 + gq, b1 keys + 8. */
#if STAGE == 2
      UNROLL for (uint kk = 0; kk < KK; kk++) UNROLL for (uint vt = 0; vt < VT; vt += 2) {
        uint r[4];
        frag_cols_x4(Vt, VR, kk * 16, vt * 8, lane, r);
        MMA16(acc[vt], pa[kk], r[0], r[1]);
        MMA16(acc[vt + 1], pa[kk], r[2], r[3]);
      }
#else
      UNROLL for (uint kk = 0; kk < KK; kk++) UNROLL for (uint vt = 0; vt < VT; vt++) {
        const uint at = (vt * 8 + gq) * VS + kk * 8 + tq;
        MMA16(acc[vt], pa[kk], Vw[at], Vw[at + 4]);
      }
#endif
    }
#if STAGE == 2
    barrier(CLK_LOCAL_MEM_FENCE); /* this stage is consumed before the next tile refills it */
    buf ^= 1;
#endif
  }

  /* The row sums meet across the quad; then O = acc / l, two columns per lane and tile. */
  l0 = quad_sum(l0 SCR_ARGS), l1 = quad_sum(l1 SCR_ARGS);
  const ulong obase = o_off + split * o_split + QB(o) + h * o_sh;
  UNROLL for (uint hr = 0; hr < 2; hr++) {
    const uint row = hr ? row1 : row0;
    const float l = hr ? l1 : l0, m = hr ? m1 : m0;
    if (row >= seqlen_q) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const ulong at = obase + (ulong)row * o_ss;
    UNROLL for (uint vt = 0; vt < VT; vt++) {
      const uint c = vt * 8 + 2 * tq;
      if (c < DV) STO(o, at + c, acc[vt][2 * hr] * inv);
      if (c + 1 < DV) STO(o, at + c + 1, acc[vt][2 * hr + 1] * inv);
    }
#if RAW_MAX
    const float m2 = m * sl2; /* raw maxima in the log2 domain */
#else
    const float m2 = m;
#endif
    if (write_lse && tq == 0)
      lse[lse_off + split * lse_split + LSE_ROW(b, h) + row] =
          l > 0.0f ? (m2 + log2(l)) * M_LN2_F : -INFINITY;
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
