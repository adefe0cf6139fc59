/* backward_mma_half's second kernel, bwd_dq: a warp per 16 query rows (BQ / 16 warps), Q and
 * dO rows in registers; per tile of SK keys (K and V staged), S = Q K^T, dP = dO V^T, then
 * dQ += dS K. The program joins this file after cl/backward_mma_half.cl, whose header, staging
 * and product macros it uses. */

// clang-format off: it does not know that UNROLL is a pragma
#define WARPS_Q (BQ / 16)
#define NK (SK / 8)  /* 8-key tiles of a staged key block */
#define KK (SK / 16) /* its k-steps */

/* One kernel for both forms: with DQ_ATOMIC, bwd_dkdv has summed dQ into acc (fp32, a row of D
 * per LSE row), which is scaled and rounded into dq, BQ rows of one head a work-group; without,
 * dQ = dS K over the staged key tiles. cmake/broken_kernels.cmake finds a kernel by its literal
 * `__kernel` (the no-kernels selftest), so the signature is written out, once. */
__kernel __attribute__((reqd_work_group_size(2 * BQ, 1, 1))) void
bwd_dq(__global const stor_t *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
       __global const stor_t *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
       __global const stor_t *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
       __global const stor_t *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
       __global const float *lse, __global const float *drow, __global stor_t *dq, ulong dq_off,
       ulong dq_sb, ulong dq_ss, ulong dq_sh, uint heads_q, uint heads_kv, uint seqlen_q,
       uint seqlen_kv, uint num_qblocks, float scale,
       ulong group_base VARIANT_ARGS PDP_ARG DQ_ARG) {
  const ulong gid = group_base + get_group_id(0);
  const uint qb = (uint)(gid % num_qblocks);
  const ulong bh = gid / num_qblocks;
  const uint h = (uint)(bh % heads_q);
  const ulong b = bh / heads_q;
  SEQ_BEGIN(b);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
#if DQ_ATOMIC /* rows past the entry's get nothing, as below */
  const ulong from = acc_off + LSE_ROW(b, h) * D, o = dq_off + QB(dq) + h * dq_sh;
  for (uint i = get_local_id(0); i < BQ * D; i += 2 * BQ) {
    const uint r = qb * BQ + i / D, c = i % D;
    if (r < seqlen_q) STS(dq + o + (ulong)r * dq_ss + c, acc[from + (ulong)r * D + c] * scale);
  }
#else
  __local uint Kw[NBUF * SK * QW] __attribute__((aligned(16)));
  __local uint Vw[NBUF * SK * GW] __attribute__((aligned(16)));
  const uint lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
  const uint gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scratch[WARPS_Q * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#endif
  __global const ushort *qg = (__global const ushort *)q, *kg = (__global const ushort *)k;
  __global const ushort *vg = (__global const ushort *)v, *gg = (__global const ushort *)d_o;
  const uint hk = h / (heads_q / heads_kv);
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const float sl2 = scale * M_LOG2E_F;
  const uint ra = qb * BQ + warp * 16 + gq, rb = ra + 8; /* this lane's two rows */
  const bool oka = ra < seqlen_q, okb = rb < seqlen_q;
  const ulong rbase = LSE_ROW(b, h);
  /* log2 LSEs; +inf for a row past the rows or one that saw no key: P = 0 (P_DS). */
  const float la0 = oka ? lse[rbase + ra] : -INFINITY, lb0 = okb ? lse[rbase + rb] : -INFINITY;
  const float la = la0 == -INFINITY ? INFINITY : la0 * M_LOG2E_F;
  const float lb = lb0 == -INFINITY ? INFINITY : lb0 * M_LOG2E_F;
#if ALIBI /* in natural units, and in the log2 domain of the unscaled branch */
  const float slope = ALIBI_SLOPE(bh), slope2 = slope * M_LOG2E_F;
#endif
  const float da = oka ? drow[rbase + ra] : 0.0f, db = okb ? drow[rbase + rb] : 0.0f;
  const ulong qr = q_off + QB(q) + h * q_sh, gr = g_off + QB(g) + h * g_sh;

  uint qa[KT][4], ga[VK][4]; /* this warp's 16 rows of Q and dO as A fragments */
  LOAD_A(qa, KT, qg, qr + (ulong)(oka ? ra : 0) * q_ss, oka, qr + (ulong)(okb ? rb : 0) * q_ss,
         okb, D);
  LOAD_A(ga, VK, gg, gr + (ulong)(oka ? ra : 0) * g_ss, oka, gr + (ulong)(okb ? rb : 0) * g_ss,
         okb, DV);
  float dqa[CT][4];
  float pd0 = 0.0f, pd1 = 0.0f; /* SINKS: this lane's part of its rows' sums of P dP */
  UNROLL for (uint c = 0; c < CT; c++) UNROLL for (uint e = 0; e < 4; e++) dqa[c][e] = 0.0f;

  uint kv_end = seqlen_kv;
#if CAUSAL
  const long block_end = (long)min(qb * BQ + BQ, seqlen_q) + shift;
  kv_end = block_end <= 0 ? 0u : (uint)min(block_end, (long)seqlen_kv);
#endif
  uint kv_first = 0;
#if MASK
  /* The keys some row of this block sees (cl/backward.cl). */
  mask_rows_keys(qb * BQ, min(qb * BQ + BQ, seqlen_q), seqlen_kv, mask_lo, mask_hi, &kv_first,
                 &kv_end);
  const uint fa = mask_key(ra, mask_lo, seqlen_kv), ea = mask_key(ra, mask_hi, seqlen_kv);
  const uint fb = mask_key(rb, mask_lo, seqlen_kv), eb = mask_key(rb, mask_hi, seqlen_kv);
#endif
  const ulong kb0 = k_off + KB(k) + hk * k_sh, vb0 = v_off + KB(v) + hk * v_sh;
  /* 16-byte copies wherever the views' offsets and strides (and the buffers) allow them. */
  const int fast = ((k_off | k_sb | k_ss | k_sh | v_off | v_sb | v_ss | v_sh) % 8) == 0 &&
                   ((size_t)kg % 16) == 0 && ((size_t)vg % 16) == 0;
  /* Keys kv0_ .. of K and V into stage s_ (copies issued). */
#define ISSUE_KV(kv0_, s_)                                                                         \
  {                                                                                                \
    const uint n_ = min((uint)SK, kv_end - (kv0_));                                                \
    stage_rows(Kw + (s_) * (SK * QW), QW, SK, DP, kg, kb0, k_ss, kv0_, n_, D, fast, lid, 2 * BQ);  \
    stage_rows(Vw + (s_) * (SK * GW), GW, SK, DVP, vg, vb0, v_ss, kv0_, n_, DV, fast, lid, 2 * BQ); \
  }
  uint buf = 0;
#if NBUF == 2
  if (kv_first < kv_end) ISSUE_KV(kv_first, 0);
  CP_COMMIT();
#endif
  for (uint kv0 = kv_first; kv0 < kv_end; kv0 += SK) {
    const uint nk = min((uint)SK, kv_end - kv0);
#if NBUF == 2 /* the next tile's copies into the other stage; this tile's, the older, awaited */
    if (kv0 + SK < kv_end) ISSUE_KV(kv0 + SK, buf ^ 1);
    CP_COMMIT();
    CP_WAIT1();
#else
    ISSUE_KV(kv0, 0);
    CP_COMMIT(); /* wait_group waits for committed groups only */
    CP_WAIT0();
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    __local const uint *Kt = Kw + buf * (SK * QW), *Vt = Vw + buf * (SK * GW);

    /* S and dP: C element e is row gq + 8 (e >> 1), key n * 8 + 2 tq + (e & 1). */
    float s[NK][4], dp[NK][4];
#if ALIBI /* a lane's two rows' distances (cl/common.cl) */
    ALIBI_ROW_BASES(ald, ra, rb, kv0 + 2 * tq);
#endif
    PRODUCT_T(s, NK, qa, KT, Kt, QW);
    PRODUCT_T(dp, NK, ga, VK, Vt, GW);
    /* An edge tile: a partial one, the warp's last row's diagonal before the tile's last key,
     * or a window. */
    bool edge = nk < SK;
#if MASK /* a window: unless every row of the warp sees every key of the tile */
    edge = edge || kv0 < mask_key(qb * BQ + warp * 16 + 15, mask_lo, seqlen_kv) ||
           kv0 + SK > mask_key(qb * BQ + warp * 16, mask_hi, seqlen_kv);
#endif
#if CAUSAL
    edge = edge || (long)(kv0 + SK - 1) > (long)(qb * BQ + warp * 16) + shift;
#endif
#if SINKS
#define DQ_SINK (e >> 1) ? (pd1 += p_ * dp[n][e]) : (pd0 += p_ * dp[n][e])
#else
#define DQ_SINK (void)0
#endif
#define DQ_ROW ((e >> 1) ? rb : ra)
#define DQ_ELEMENTS(V_)                                                                            \
  UNROLL for (uint n = 0; n < NK; n++) UNROLL for (uint e = 0; e < 4; e++) {                       \
    const uint j = n * 8 + 2 * tq + (e & 1);                                                       \
    P_DS(s[n][e], dp[n][e], (e >> 1) ? lb : la, (e >> 1) ? db : da, AL_(1, n, e), V_, DQ_SINK);    \
  }
    if (edge) {
      DQ_ELEMENTS(j < nk && SEES_CAUSAL(DQ_ROW, kv0 + j) && DQ_WINDOW(e, kv0 + j))
    } else {
      DQ_ELEMENTS(1)
    }
#undef DQ_ELEMENTS
#undef DQ_ROW
#undef DQ_SINK
    uint dsa[KK][4];
    TO_A(dsa, dp, KK);
    PRODUCT_N(dqa, CT, dsa, KK, Kt, QW); /* dQ += dS K */
    barrier(CLK_LOCAL_MEM_FENCE); /* this stage is consumed before it is refilled */
    buf ^= NBUF - 1;
  }
#if SINKS /* the rows' sums of P dP meet across the quad */
  pd0 = quad_sum(pd0 SCR_ARGS), pd1 = quad_sum(pd1 SCR_ARGS);
  if (tq == 0 && oka) pdp[pdp_off + rbase + ra] = pd0;
  if (tq == 0 && okb) pdp[pdp_off + rbase + rb] = pd1;
#endif
  UNROLL for (uint e = 0; e < 4; e++) {
    const uint row = (e >> 1) ? rb : ra, cc = 2 * tq + (e & 1);
    if (row >= seqlen_q) continue;
    const ulong o = dq_off + QB(dq) + (ulong)row * dq_ss + h * dq_sh;
    UNROLL for (uint c = 0; c < CT; c++)
      if (c * 8 + cc < D) STS(dq + o + c * 8 + cc, dqa[c][e] * scale);
  }
#endif /* DQ_ATOMIC */
}
// clang-format on

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
