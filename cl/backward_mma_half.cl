/* Attention backward on NVIDIA tensor cores in half storage ("backward_mma_half"): fp16 or bf16
 * Q, K, V, dO and gradients (DTYPE 1 or 2), every product an mma.sync m16n8k16 with fp32
 * accumulators (cl/mma_half.cl). fp32 storage stays backward_mma's (3xTF32). cl/backward.cl's
 * two kernels and arithmetic, FlashAttention-2's: P = exp(scale S - LSE), dS = P (dP - D) with
 * D = rowsum(dO o O) from bwd_rowdot; no atomics and a fixed order, so results are bitwise
 * identical run to run.
 *
 *   bwd_dkdv: a warp per 16 keys (BKV / 16 warps), whose K and V rows are A fragments held in
 *             registers. Per block of SQ query rows (Q and dO staged, with LSE and D):
 *             S^T = K Q^T and dP^T = V dO^T (16 keys x SQ rows), then dV += P^T dO and
 *             dK += dS^T Q, P^T and dS^T rounded to the type straight from the C fragments into
 *             A fragments (the layouts coincide, cl/mma_half.cl).
 *   bwd_dq:   a warp per 16 query rows (BQ / 16 warps), Q and dO rows in registers. Per tile of
 *             SK keys (K and V staged): S = Q K^T, dP = dO V^T, then dQ += dS K.
 *
 * The staged matrices are kept row-major as 16-bit values, two per 32-bit word. The first
 * products take them as B = M^T, whose register pairs run along a row (one aligned word); the
 * second take them as B = M, whose pairs run down a column (cl/mma_half.cl's pair_t). A row is
 * padded by 8 values to an odd multiple of 4 words, so the 8 rows x 4 words of a word read fall
 * in 32 distinct banks. P and dS are rounded as FlashAttention-2 rounds them; dP, D, LSE and
 * every sum stay fp32, and each gradient is rounded once, when it is stored.
 *
 * Defines: D, DV head dims (at most 128; padded with zeros to 16); BKV keys per bwd_dkdv
 * work-group and BQ rows per bwd_dq work-group (multiples of 16); SQ rows staged by bwd_dkdv and
 * SK keys by bwd_dq (multiples of 16, set by the runtime to fit local memory); CAUSAL
 * (bottom-right aligned); MMA_EMULATE (tests: every work-item reaches every MMA16, which the
 * loops below, uniform over the work-group, keep). runtime/kernels/backward_mma_half.c mirrors
 * the local-memory formula; keep the two in step. Correct first: issue 19 makes it fast. */

#if DTYPE != 1 && DTYPE != 2
#error "backward_mma_half computes fp16 and bf16 storage (DTYPE 1 or 2); fp32 is backward_mma's"
#endif
#if BQ % 16 || BKV % 16 || SQ % 16 || SK % 16 || SQ < 16 || SK < 16
#error "BQ, BKV, SQ and SK must be multiples of 16 (SQ and SK at least 16)"
#endif

// clang-format off: it does not know that UNROLL is a pragma
#define DP ((D + 15) / 16 * 16)
#define DVP ((DV + 15) / 16 * 16)
#define QW (DP / 2 + 4)  /* words per local row of Q or K */
#define GW (DVP / 2 + 4) /* words per local row of dO or V */
#define KT (DP / 16)     /* k-steps over D */
#define VK (DVP / 16)    /* k-steps over DV */
#define CT ((D + 7) / 8) /* 8-column tiles of dK and dQ */
#define CV ((DV + 7) / 8) /* 8-column tiles of dV */

/* The 32-bit word of columns c, c + 1 of a global row of 16-bit values at `at`: zero past n
 * columns, and all zero when !ok. */
static inline uint gpair(__global const ushort *m, ulong at, bool ok, uint c, uint n) {
  if (!ok || c >= n) return 0u;
  return c + 1 < n ? (uint)m[at + c] | (uint)m[at + c + 1] << 16 : (uint)m[at + c];
}

/* A fragments (KS k-steps) of this lane's two global rows at ra, rb (ok when oka, okb) over n
 * columns: register r of k-step t is row a or b by r & 1, columns 16 t + 2 tq + 8 (r >> 1). */
#define LOAD_A(x, KS, m, ra, oka, rb, okb, n)                                                      \
  UNROLL for (uint t_ = 0; t_ < (KS); t_++) UNROLL for (uint r_ = 0; r_ < 4; r_++) {               \
    const uint c_ = t_ * 16 + 2 * tq + 8 * (r_ >> 1);                                              \
    x[t_][r_] = (r_ & 1) ? gpair(m, rb, okb, c_, n) : gpair(m, ra, oka, c_, n);                    \
  }

/* ROWS global rows from r0 (nrows of them real, the rest zero) into local words of row stride
 * W, over n columns padded with zeros to PADC (even). */
#define STAGE(Mw, W, ROWS, PADC, m, base, ss, r0, nrows, n, lid, wg)                               \
  for (uint i_ = (lid); i_ < (ROWS) * ((PADC) / 2); i_ += (wg)) {                                  \
    const uint r_ = i_ / ((PADC) / 2), w_ = i_ % ((PADC) / 2);                                     \
    const bool in_ = r_ < (nrows);                                                                 \
    const ulong at_ = (base) + (ulong)((r0) + (in_ ? r_ : 0)) * (ss);                              \
    (Mw)[r_ * (W) + w_] = gpair(m, at_, in_, 2 * w_, n);                                           \
  }

/* acc[t] += A (N 8-wide tiles of the local rows of M, word stride W, taken as M^T: B's pairs
 * lie along M's rows) for KS k-steps of a. */
#define PRODUCT_T(acc, N, a, KS, Mw, W)                                                            \
  UNROLL for (uint t_ = 0; t_ < (N); t_++)                                                        \
    UNROLL for (uint e_ = 0; e_ < 4; e_++) acc[t_][e_] = 0.0f;                                     \
  UNROLL for (uint k_ = 0; k_ < (KS); k_++) UNROLL for (uint t_ = 0; t_ < (N); t_++) {             \
    const uint at_ = (t_ * 8 + gq) * (W) + k_ * 8 + tq;                                            \
    MMA16(acc[t_], a[k_], (Mw)[at_], (Mw)[at_ + 4]);                                               \
  }

/* out[c] += A (KS k-steps of 16 local rows) x M's rows (16-bit values, stride MS), for C
 * 8-column tiles: B's pairs lie down M's columns. */
#define PRODUCT_N(out, C, a, KS, Ms, MS)                                                           \
  UNROLL for (uint k_ = 0; k_ < (KS); k_++) UNROLL for (uint c_ = 0; c_ < (C); c_++) {             \
    const uint r_ = k_ * 16 + 2 * tq, col_ = c_ * 8 + gq;                                          \
    MMA16(out[c_], a[k_], pair_t(Ms, MS, r_, col_), pair_t(Ms, MS, r_ + 8, col_));                 \
  }

/* C fragments of 2 KS 8-wide tiles, rounded to the type, as the A fragments of KS k-steps. */
#define TO_A(a, x, KS)                                                                             \
  UNROLL for (uint t_ = 0; t_ < 2 * (KS); t_++) {                                                  \
    a[t_ / 2][2 * (t_ % 2)] = PACK2(x[t_][0], x[t_][1]);                                           \
    a[t_ / 2][2 * (t_ % 2) + 1] = PACK2(x[t_][2], x[t_][3]);                                       \
  }

#define WARPS_KV (BKV / 16)
#define NQ (SQ / 8)  /* 8-row tiles of a staged query block */
#define KQ (SQ / 16) /* its k-steps */

__kernel __attribute__((reqd_work_group_size(2 * BKV, 1, 1))) void
bwd_dkdv(__global const stor_t *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
         __global const stor_t *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
         __global const stor_t *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
         __global const stor_t *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
         __global const float *lse, __global const float *drow, __global stor_t *dk,
         ulong dk_off, ulong dk_sb, ulong dk_ss, ulong dk_sh, __global stor_t *dv, ulong dv_off,
         ulong dv_sb, ulong dv_ss, ulong dv_sh, uint heads_q, uint heads_kv, uint seqlen_q,
         uint seqlen_kv, uint num_kblocks, float scale, ulong group_base VARIANT_ARGS) {
  __local uint Qw[SQ * QW], Gw[SQ * GW];
  __local float Ls[SQ], Ds[SQ];
  __local const ushort *Qs = (__local const ushort *)Qw, *Gs = (__local const ushort *)Gw;
  const uint lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
  const uint gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scratch[WARPS_KV * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#endif
  __global const ushort *qg = (__global const ushort *)q, *kg = (__global const ushort *)k;
  __global const ushort *vg = (__global const ushort *)v, *gg = (__global const ushort *)d_o;
  const ulong gid = group_base + get_group_id(0);
  const uint kb = (uint)(gid % num_kblocks);
  const ulong bhk = gid / num_kblocks;
  const uint hk = (uint)(bhk % heads_kv);
  const ulong b = bhk / heads_kv;
  SEQ_BEGIN(b);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  const uint group = heads_q / heads_kv;
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const float sl2 = scale * M_LOG2E_F; /* scores in the log2 domain */
  const uint ja = kb * BKV + warp * 16 + gq, jb = ja + 8; /* this lane's two keys */
  const bool oka = ja < seqlen_kv, okb = jb < seqlen_kv;
  const ulong kr = k_off + KB(k) + hk * k_sh, vr = v_off + KB(v) + hk * v_sh;

  uint ka[KT][4], va[VK][4]; /* this warp's 16 keys as A fragments */
  LOAD_A(ka, KT, kg, kr + (ulong)(oka ? ja : 0) * k_ss, oka, kr + (ulong)(okb ? jb : 0) * k_ss,
         okb, D);
  LOAD_A(va, VK, vg, vr + (ulong)(oka ? ja : 0) * v_ss, oka, vr + (ulong)(okb ? jb : 0) * v_ss,
         okb, DV);
  float dka[CT][4], dva[CV][4];
  UNROLL for (uint c = 0; c < CT; c++) UNROLL for (uint e = 0; e < 4; e++) dka[c][e] = 0.0f;
  UNROLL for (uint c = 0; c < CV; c++) UNROLL for (uint e = 0; e < 4; e++) dva[c][e] = 0.0f;

  /* Rows before the first that sees this block's first key see none of it. */
  uint q_first = 0;
#if CAUSAL
  const long first = (long)(kb * BKV) - shift;
  q_first = first <= 0 ? 0u : (uint)min(first, (long)seqlen_q) / SQ * SQ;
#endif
  uint q_stop = seqlen_q;
#if MASK
  mask_keys_rows(kb * BKV, kb * BKV + BKV, seqlen_q, mask_lo, mask_hi, SQ, &q_first, &q_stop);
#endif
  for (uint hh = 0; hh < group; hh++) {
    const uint h = hk * group + hh;
    const ulong qbase = q_off + QB(q) + h * q_sh, gbase = g_off + QB(g) + h * g_sh;
    const ulong rbase = LSE_ROW(b, h);
#if ALIBI /* in natural units, and in the log2 domain of the unscaled branch */
    const float slope = ALIBI_SLOPE(b * heads_q + h), slope2 = slope * M_LOG2E_F;
#endif
    for (uint q0 = q_first; q0 < q_stop; q0 += SQ) {
      const uint nr = min((uint)SQ, seqlen_q - q0);
      barrier(CLK_LOCAL_MEM_FENCE);
      STAGE(Qw, QW, SQ, DP, qg, qbase, q_ss, q0, nr, D, lid, 2 * BKV);
      STAGE(Gw, GW, SQ, DVP, gg, gbase, g_ss, q0, nr, DV, lid, 2 * BKV);
      for (uint r = lid; r < SQ; r += 2 * BKV) {
        Ls[r] = r < nr ? lse[rbase + q0 + r] * M_LOG2E_F : -INFINITY;
        Ds[r] = r < nr ? drow[rbase + q0 + r] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);

      /* S^T and dP^T: C element e is key gq + 8 (e >> 1), row n * 8 + 2 tq + (e & 1). */
      float s[NQ][4], dp[NQ][4];
#if ALIBI /* a lane's two keys' distances (cl/common.cl) */
      ALIBI_KEY_BASES(ald, ja, jb, q0 + 2 * tq);
#endif
      PRODUCT_T(s, NQ, ka, KT, Qw, QW);
      PRODUCT_T(dp, NQ, va, VK, Gw, GW);
      UNROLL for (uint n = 0; n < NQ; n++) UNROLL for (uint e = 0; e < 4; e++) {
        const uint r = n * 8 + 2 * tq + (e & 1);
        bool ok = Ls[r] != -INFINITY; /* rows past the block and rows that saw no key */
#if SEQLENS
        ok = ok && ((e >> 1) ? jb : ja) < seqlen_kv; /* keys past the entry's length: P = 0 */
#endif
#if CAUSAL
        ok = ok && (long)((e >> 1) ? jb : ja) <= (long)(q0 + r) + shift;
#endif
#if MASK
        ok = ok && MASK_SEES(q0 + r, (e >> 1) ? jb : ja);
#endif
#if SOFTCAP /* P of the capped score, dS times 1 - t^2 (cl/common.cl) */
        float dt; /* set for masked elements too: 0 * dt must stay 0 */
        const float cs = cap_score(s[n][e], scale, softcap, &dt);
        const float p =
            ok ? exp2((cs ALIBI_FRAG(slope, ald, -1, n, e)) * M_LOG2E_F - Ls[r]) : 0.0f;
#else
        const float p =
            ok ? exp2(s[n][e] * sl2 ALIBI_FRAG(slope2, ald, -1, n, e) - Ls[r]) : 0.0f,
            dt = 1.0f;
#endif
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - Ds[r]) * dt;
      }
      uint pa[KQ][4];
      TO_A(pa, s, KQ);
      PRODUCT_N(dva, CV, pa, KQ, Gs, 2 * GW); /* dV += P^T dO */
      TO_A(pa, dp, KQ);
      PRODUCT_N(dka, CT, pa, KQ, Qs, 2 * QW); /* dK += dS^T Q (times scale on the way out) */
    }
  }
  /* C element e of a tile is key gq + 8 (e >> 1), column 2 tq + (e & 1). */
  UNROLL for (uint e = 0; e < 4; e++) {
    const uint j = (e >> 1) ? jb : ja, cc = 2 * tq + (e & 1);
    if (j >= kv_write_end) continue; /* keys past a padded entry's length get zeros */
    const ulong ko = dk_off + KB(dk) + (ulong)j * dk_ss + hk * dk_sh;
    const ulong vo = dv_off + KB(dv) + (ulong)j * dv_ss + hk * dv_sh;
    UNROLL for (uint c = 0; c < CT; c++)
      if (c * 8 + cc < D) STS(dk + ko + c * 8 + cc, dka[c][e] * scale);
    UNROLL for (uint c = 0; c < CV; c++)
      if (c * 8 + cc < DV) STS(dv + vo + c * 8 + cc, dva[c][e]);
  }
}

#define WARPS_Q (BQ / 16)
#define NK (SK / 8)  /* 8-key tiles of a staged key block */
#define KK (SK / 16) /* its k-steps */

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif

__kernel __attribute__((reqd_work_group_size(2 * BQ, 1, 1))) void
bwd_dq(__global const stor_t *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
       __global const stor_t *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
       __global const stor_t *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
       __global const stor_t *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
       __global const float *lse, __global const float *drow, __global stor_t *dq, ulong dq_off,
       ulong dq_sb, ulong dq_ss, ulong dq_sh, uint heads_q, uint heads_kv, uint seqlen_q,
       uint seqlen_kv, uint num_qblocks, float scale, ulong group_base VARIANT_ARGS PDP_ARG) {
  __local uint Kw[SK * QW], Vw[SK * GW];
  __local const ushort *Ks = (__local const ushort *)Kw;
  const uint lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
  const uint gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scratch[WARPS_Q * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#endif
  __global const ushort *qg = (__global const ushort *)q, *kg = (__global const ushort *)k;
  __global const ushort *vg = (__global const ushort *)v, *gg = (__global const ushort *)d_o;
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
  const uint hk = h / (heads_q / heads_kv);
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const float sl2 = scale * M_LOG2E_F;
  const uint ra = qb * BQ + warp * 16 + gq, rb = ra + 8; /* this lane's two rows */
  const bool oka = ra < seqlen_q, okb = rb < seqlen_q;
  const ulong rbase = LSE_ROW(b, h);
  const float la = oka ? lse[rbase + ra] * M_LOG2E_F : -INFINITY;
  const float lb = okb ? lse[rbase + rb] * M_LOG2E_F : -INFINITY;
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
  for (uint kv0 = kv_first; kv0 < kv_end; kv0 += SK) {
    const uint nk = min((uint)SK, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE);
    STAGE(Kw, QW, SK, DP, kg, kb0, k_ss, kv0, nk, D, lid, 2 * BQ);
    STAGE(Vw, GW, SK, DVP, vg, vb0, v_ss, kv0, nk, DV, lid, 2 * BQ);
    barrier(CLK_LOCAL_MEM_FENCE);

    /* S and dP: C element e is row gq + 8 (e >> 1), key n * 8 + 2 tq + (e & 1). */
    float s[NK][4], dp[NK][4];
#if ALIBI /* a lane's two rows' distances (cl/common.cl) */
    ALIBI_ROW_BASES(ald, ra, rb, kv0 + 2 * tq);
#endif
    PRODUCT_T(s, NK, qa, KT, Kw, QW);
    PRODUCT_T(dp, NK, ga, VK, Vw, GW);
    UNROLL for (uint n = 0; n < NK; n++) UNROLL for (uint e = 0; e < 4; e++) {
      const uint j = n * 8 + 2 * tq + (e & 1);
      const float l = (e >> 1) ? lb : la, dr = (e >> 1) ? db : da;
      bool ok = l != -INFINITY && j < nk;
#if CAUSAL
      ok = ok && (long)(kv0 + j) <= (long)((e >> 1) ? rb : ra) + shift;
#endif
#if MASK
      ok = ok && kv0 + j >= ((e >> 1) ? fb : fa) && kv0 + j < ((e >> 1) ? eb : ea);
#endif
#if SOFTCAP
      float dt;
      const float cs = cap_score(s[n][e], scale, softcap, &dt);
      const float p =
          ok ? exp2((cs ALIBI_FRAG(slope, ald, 1, n, e)) * M_LOG2E_F - l) : 0.0f;
#else
      const float p =
          ok ? exp2(s[n][e] * sl2 ALIBI_FRAG(slope2, ald, 1, n, e) - l) : 0.0f,
          dt = 1.0f;
#endif
#if SINKS
      if (e >> 1)
        pd1 += p * dp[n][e];
      else
        pd0 += p * dp[n][e];
#endif
      dp[n][e] = p * (dp[n][e] - dr) * dt;
    }
    uint dsa[KK][4];
    TO_A(dsa, dp, KK);
    PRODUCT_N(dqa, CT, dsa, KK, Ks, 2 * QW); /* dQ += dS K */
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
}
// clang-format on

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
