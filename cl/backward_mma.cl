/* Attention backward on NVIDIA tensor cores ("backward_mma"): cl/backward.cl's two kernels and
 * arithmetic (P = exp(scale S - LSE), dS = P (dP - D), no atomics, a fixed order everywhere, so
 * results are bitwise identical run to run), with every product an mma.sync m16n8k8 in the
 * 3xTF32 split (cl/mma.cl) and chains flushed to fp32 every FLUSH_K k-steps.
 *
 *   bwd_dkdv: a warp per 16 keys (BKV / 16 warps). Per block of SQ query rows (staged in local
 *             memory with their LSE and D): S^T = K Q^T and dP^T = V dO^T (16 keys x SQ rows),
 *             then dV += P^T dO and dK += dS^T Q, with P^T and dS^T taken from the C fragments
 *             as A fragments (rows of each 8-row step permuted: A column t is row 2t, column
 *             t + 4 row 2t + 1, and dO, Q read in that order).
 *   bwd_dq:   a warp per 16 query rows (BQ / 16 warps). Per tile of SK keys (staged): S = Q K^T,
 *             dP = dO V^T, then dQ += dS K the same way.
 *
 * A warp's own rows (K and V in bwd_dkdv, Q and dO in bwd_dq) are the A operands of the first
 * products; they are read from global memory (the L1 cache keeps them between blocks) 16 bytes
 * at a time: lane tq takes columns 4 tq .. 4 tq + 3 of each 16-column block, k-step h of the
 * pair using column 4 tq + 2 h as k = tq and the next as k = tq + 4. The staged operand is read
 * in the same order, one 16-byte read per lane for two k-steps. Local rows are padded to 20 mod
 * 32 floats: those reads, and the column reads of the second products (rows 2 tq and 2 tq + 1),
 * then meet few bank conflicts.
 *
 * Defines: D, DV head dims (at most 128); BKV keys per bwd_dkdv work-group and BQ query rows per
 * bwd_dq work-group (multiples of 16: a warp per 16); SQ query rows staged at a time by bwd_dkdv
 * and SK keys by bwd_dq (multiples of 16, chosen by the runtime to fit local memory); the
 * variants MASK, SOFTCAP, ALIBI and SINKS (cl/common.cl, as cl/backward.cl); CAUSAL
 * (bottom-right aligned); MMA_EMULATE (tests). runtime/bwd_plan.c mirrors the local-memory
 * formula; keep the two in step. */

// clang-format off: it does not know that UNROLL is a pragma
/* Chains of at most FLUSH_K k-steps before their sum joins the fp32 accumulator. */
#ifndef FLUSH_K
#define FLUSH_K 4
#endif

#define DP ((D + 15) / 16 * 16)
#define DVP ((DV + 15) / 16 * 16)
#define ROWPAD(n) ((n) + (20 + 32 - (n) % 32) % 32)
#define QS ROWPAD(DP) /* Q and K rows in local memory */
#define GS ROWPAD(DVP) /* dO and V rows */
#define KT (DP / 8)   /* k-steps over D; 8-column tiles of dK and dQ */
#define VT (DVP / 8)  /* k-steps over DV; 8-column tiles of dV */

/* 16 bytes of row `row` of a global matrix from column c, zero past n columns or when !ok. */
static inline float4 load4(__global const float *m, ulong at, bool ok, uint c, uint n) {
  if (!ok || c >= n) return (float4)(0.0f);
  if (c + 3 < n) return vload4(0, m + at + c);
  return (float4)(m[at + c], c + 1 < n ? m[at + c + 1] : 0.0f, c + 2 < n ? m[at + c + 2] : 0.0f,
                  0.0f);
}

/* A fragments of k-steps 2 kp and 2 kp + 1 from the 16 bytes of this lane's two rows. */
#define A_PAIR(xa, xb, hi, lo)                                                                     \
  do {                                                                                             \
    SPLIT((xa).s0, hi[0][0], lo[0][0]);                                                            \
    SPLIT((xb).s0, hi[0][1], lo[0][1]);                                                            \
    SPLIT((xa).s1, hi[0][2], lo[0][2]);                                                            \
    SPLIT((xb).s1, hi[0][3], lo[0][3]);                                                            \
    SPLIT((xa).s2, hi[1][0], lo[1][0]);                                                            \
    SPLIT((xb).s2, hi[1][1], lo[1][1]);                                                            \
    SPLIT((xa).s3, hi[1][2], lo[1][2]);                                                            \
    SPLIT((xb).s3, hi[1][3], lo[1][3]);                                                            \
  } while (0)

/* acc[n] += rows (A: this lane's two global rows at abase_a, abase_b, valid when oka, okb) x
 * local rows n*8 .. n*8 + 7 of M (row stride MS) transposed, over K columns (a multiple of 16
 * after padding, NCOL real ones), for N 8-row tiles of M. */
#define PRODUCT_T(acc, N, g, abase_a, oka, abase_b, okb, NCOL, KPAD, M, MS)                        \
  do {                                                                                             \
    float t_[N][4];                                                                                \
    UNROLL for (uint n_ = 0; n_ < (N); n_++)                                                       \
      UNROLL for (uint e_ = 0; e_ < 4; e_++) acc[n_][e_] = 0.0f, t_[n_][e_] = 0.0f;                \
    UNROLL for (uint kp_ = 0; kp_ < (KPAD) / 16; kp_++) {                                          \
      const uint c_ = kp_ * 16 + 4 * tq;                                                           \
      const float4 xa_ = load4(g, abase_a, oka, c_, NCOL), xb_ = load4(g, abase_b, okb, c_, NCOL); \
      uint ah_[2][4], al_[2][4];                                                                   \
      A_PAIR(xa_, xb_, ah_, al_);                                                                  \
      UNROLL for (uint n_ = 0; n_ < (N); n_++) {                                                   \
        const float4 y_ = *(__local const float4 *)((M) + (n_ * 8 + gq) * (MS) + c_);              \
        uint bh_[2][2], bl_[2][2];                                                                 \
        SPLIT(y_.s0, bh_[0][0], bl_[0][0]);                                                        \
        SPLIT(y_.s1, bh_[0][1], bl_[0][1]);                                                        \
        SPLIT(y_.s2, bh_[1][0], bl_[1][0]);                                                        \
        SPLIT(y_.s3, bh_[1][1], bl_[1][1]);                                                        \
        UNROLL for (uint h_ = 0; h_ < 2; h_++) /* one call site: the emulation compiles faster */  \
          MMA3(t_[n_], ah_[h_], al_[h_], bh_[h_][0], bh_[h_][1], bl_[h_][0], bl_[h_][1]);          \
        if ((2 * kp_ + 2) % FLUSH_K == 0 || kp_ + 1 == (KPAD) / 16) FLUSH(acc[n_], t_[n_]);        \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* out[c] += A (ah, al: N k-steps of 8 rows, permuted as above) x local rows of M (stride MS),
 * for C 8-column tiles: B element (k = tq, n = gq) of k-step n is M[n*8 + 2 tq][c*8 + gq]. */
#define PRODUCT_N(out, C, ah, al, N, M, MS)                                                        \
  do {                                                                                             \
    UNROLL for (uint c_ = 0; c_ < (C); c_++) {                                                     \
      float t_[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                                      \
      UNROLL for (uint n_ = 0; n_ < (N); n_++) {                                                   \
        const uint at_ = (n_ * 8 + 2 * tq) * (MS) + c_ * 8 + gq;                                   \
        uint bh0_, bl0_, bh1_, bl1_;                                                               \
        SPLIT((M)[at_], bh0_, bl0_);                                                               \
        SPLIT((M)[at_ + (MS)], bh1_, bl1_);                                                        \
        MMA3(t_, ah[n_], al[n_], bh0_, bh1_, bl0_, bl1_);                                          \
        if ((n_ + 1) % FLUSH_K == 0 || n_ + 1 == (N)) FLUSH(out[c_], t_);                          \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* Rows of a global matrix into local rows of stride MS, NCOL columns padded with zeros to PADC,
 * rows from nrows on zero; 16 bytes at a time (vload4 needs only float alignment). */
#define STAGE(M, MS, ROWS, PADC, g, base, ss, r0, nrows, NCOL, lid, wg)                            \
  do {                                                                                             \
    for (uint i_ = (lid); i_ < (ROWS) * ((PADC) / 4); i_ += (wg)) {                                \
      const uint r_ = i_ / ((PADC) / 4), c_ = i_ % ((PADC) / 4) * 4;                               \
      *(__local float4 *)((M) + r_ * (MS) + c_) =                                                  \
          load4(g, (base) + (ulong)((r0) + (r_ < (nrows) ? r_ : 0)) * (ss), r_ < (nrows), c_,      \
                NCOL);                                                                             \
    }                                                                                              \
  } while (0)

#define WARPS_KV (BKV / 16)
#define NQ (SQ / 8) /* 8-row tiles of a staged query block */

__kernel __attribute__((reqd_work_group_size(2 * BKV, 1, 1))) void
bwd_dkdv(__global const float *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
         __global const float *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
         __global const float *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
         __global const float *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
         __global const float *lse, __global const float *drow, __global float *dk,
         ulong dk_off, ulong dk_sb, ulong dk_ss, ulong dk_sh, __global float *dv, ulong dv_off,
         ulong dv_sb, ulong dv_ss, ulong dv_sh, uint heads_q, uint heads_kv, uint seqlen_q,
         uint seqlen_kv, uint num_kblocks, float scale, ulong group_base VARIANT_ARGS) {
  __local float4 Ql[SQ * QS / 4], Gl[SQ * GS / 4]; /* float4: the 16-byte reads */
  __local float Ls[SQ], Ds[SQ];
  __local float *Qs = (__local float *)Ql, *Gs = (__local float *)Gl;
  const uint lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
  const uint gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scratch[WARPS_KV * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#endif
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
  const uint ja = kb * BKV + warp * 16 + gq, jb = ja + 8; /* this lane's two keys */
  const bool oka = ja < seqlen_kv, okb = jb < seqlen_kv;
  const ulong ka = k_off + KB(k) + (ulong)(oka ? ja : 0) * k_ss + hk * k_sh;
  const ulong kbb = k_off + KB(k) + (ulong)(okb ? jb : 0) * k_ss + hk * k_sh;
  const ulong va = v_off + KB(v) + (ulong)(oka ? ja : 0) * v_ss + hk * v_sh;
  const ulong vb = v_off + KB(v) + (ulong)(okb ? jb : 0) * v_ss + hk * v_sh;

  float dka[KT][4], dva[VT][4];
  UNROLL for (uint c = 0; c < KT; c++)
    UNROLL for (uint e = 0; e < 4; e++) dka[c][e] = 0.0f;
  UNROLL for (uint c = 0; c < VT; c++)
    UNROLL for (uint e = 0; e < 4; e++) dva[c][e] = 0.0f;

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
#if ALIBI
    const float slope = ALIBI_SLOPE(b * heads_q + h);
#endif
    for (uint q0 = q_first; q0 < q_stop; q0 += SQ) {
      const uint nr = min((uint)SQ, seqlen_q - q0);
      barrier(CLK_LOCAL_MEM_FENCE);
      STAGE(Qs, QS, SQ, DP, q, qbase, q_ss, q0, nr, D, lid, 2 * BKV);
      STAGE(Gs, GS, SQ, DVP, d_o, gbase, g_ss, q0, nr, DV, lid, 2 * BKV);
      for (uint r = lid; r < SQ; r += 2 * BKV) {
        Ls[r] = r < nr ? lse[rbase + q0 + r] : -INFINITY;
        Ds[r] = r < nr ? drow[rbase + q0 + r] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);

      /* S^T and dP^T: C element e is key gq + 8 (e >> 1), row n*8 + 2 tq + (e & 1). */
      float s[NQ][4], dp[NQ][4];
      PRODUCT_T(s, NQ, k, ka, oka, kbb, okb, D, DP, Qs, QS);
      PRODUCT_T(dp, NQ, v, va, oka, vb, okb, DV, DVP, Gs, GS);
      /* P^T, split, for dV; dS^T kept in dp as floats until dV is done, then split into the
       * same registers for dK (fewer registers live at once). */
      uint ah[NQ][4], al[NQ][4];
#if ALIBI /* a lane's two keys' distances (cl/common.cl) */
      ALIBI_KEY_BASES(ald, ja, jb, q0 + 2 * tq);
#endif
      UNROLL for (uint n = 0; n < NQ; n++)
        UNROLL for (uint e = 0; e < 4; e++) {
          const uint r = n * 8 + 2 * tq + (e & 1), j = (e >> 1) ? jb : ja;
          bool ok = Ls[r] != -INFINITY; /* rows past the block and rows that saw no key */
#if SEQLENS
          ok = ok && j < seqlen_kv; /* keys past the entry's length: zero rows, P = 0 */
#endif
#if CAUSAL
          ok = ok && (long)j <= (long)(q0 + r) + shift;
#endif
#if MASK
          ok = ok && MASK_SEES(q0 + r, j);
#endif
#if SOFTCAP /* P of the capped score, dS times 1 - t^2 (cl/common.cl) */
          float dt; /* set for masked elements too: 0 * dt must stay 0 */
          const float cs = cap_score(s[n][e], scale, softcap, &dt);
          const float p = ok ? exp(cs ALIBI_FRAG(slope, ald, -1, n, e) - Ls[r]) : 0.0f;
#else
          const float p =
              ok ? exp(s[n][e] * scale ALIBI_FRAG(slope, ald, -1, n, e) - Ls[r]) : 0.0f,
                      dt = 1.0f;
#endif
          const uint a = (e >> 1) | ((e & 1) << 1);
          SPLIT(p, ah[n][a], al[n][a]);
          dp[n][e] = p * (dp[n][e] - Ds[r]) * dt;
        }
      PRODUCT_N(dva, VT, ah, al, NQ, Gs, GS);
      UNROLL for (uint n = 0; n < NQ; n++)
        UNROLL for (uint e = 0; e < 4; e++) SPLIT(dp[n][e], ah[n][(e >> 1) | ((e & 1) << 1)],
                                                  al[n][(e >> 1) | ((e & 1) << 1)]);
      PRODUCT_N(dka, KT, ah, al, NQ, Qs, QS);
    }
  }
  /* C element e of a tile is key gq + 8 (e >> 1), column 2 tq + (e & 1). */
  UNROLL for (uint e = 0; e < 4; e++) {
    const uint j = (e >> 1) ? jb : ja;
    if (j >= kv_write_end) continue; /* keys past a padded entry's length get zeros */
    const ulong ko = dk_off + KB(dk) + (ulong)j * dk_ss + hk * dk_sh;
    const ulong vo = dv_off + KB(dv) + (ulong)j * dv_ss + hk * dv_sh;
    UNROLL for (uint c = 0; c < KT; c++)
      if (c * 8 + 2 * tq + (e & 1) < D) dk[ko + c * 8 + 2 * tq + (e & 1)] = dka[c][e] * scale;
    UNROLL for (uint c = 0; c < VT; c++)
      if (c * 8 + 2 * tq + (e & 1) < DV) dv[vo + c * 8 + 2 * tq + (e & 1)] = dva[c][e];
  }
}

#define WARPS_Q (BQ / 16)
#define NK (SK / 8) /* 8-key tiles of a staged key block */

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif

__kernel __attribute__((reqd_work_group_size(2 * BQ, 1, 1))) void
bwd_dq(__global const float *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
       __global const float *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
       __global const float *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
       __global const float *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
       __global const float *lse, __global const float *drow, __global float *dq, ulong dq_off,
       ulong dq_sb, ulong dq_ss, ulong dq_sh, uint heads_q, uint heads_kv, uint seqlen_q,
       uint seqlen_kv, uint num_qblocks, float scale, ulong group_base VARIANT_ARGS PDP_ARG) {
  __local float4 Kl[SK * QS / 4], Vl[SK * GS / 4];
  __local float *Ks = (__local float *)Kl, *Vs = (__local float *)Vl;
  const uint lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
  const uint gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scratch[WARPS_Q * SCRATCH];
  __local float *scr = scratch + warp * SCRATCH;
#endif
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
  const uint ra = qb * BQ + warp * 16 + gq, rb = ra + 8; /* this lane's two rows */
  const bool oka = ra < seqlen_q, okb = rb < seqlen_q;
  const ulong rbase = LSE_ROW(b, h);
  const float la = oka ? lse[rbase + ra] : -INFINITY, lb = okb ? lse[rbase + rb] : -INFINITY;
#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif
  const float da = oka ? drow[rbase + ra] : 0.0f, db = okb ? drow[rbase + rb] : 0.0f;
  const ulong qa = q_off + QB(q) + (ulong)(oka ? ra : 0) * q_ss + h * q_sh;
  const ulong qbb = q_off + QB(q) + (ulong)(okb ? rb : 0) * q_ss + h * q_sh;
  const ulong ga = g_off + QB(g) + (ulong)(oka ? ra : 0) * g_ss + h * g_sh;
  const ulong gb = g_off + QB(g) + (ulong)(okb ? rb : 0) * g_ss + h * g_sh;

  float dqa[KT][4];
  float pd0 = 0.0f, pd1 = 0.0f; /* SINKS: this lane's part of its rows' sums of P dP */
  UNROLL for (uint c = 0; c < KT; c++)
    UNROLL for (uint e = 0; e < 4; e++) dqa[c][e] = 0.0f;

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
    STAGE(Ks, QS, SK, DP, k, kb0, k_ss, kv0, nk, D, lid, 2 * BQ);
    STAGE(Vs, GS, SK, DVP, v, vb0, v_ss, kv0, nk, DV, lid, 2 * BQ);
    barrier(CLK_LOCAL_MEM_FENCE);

    /* S and dP: C element e is row gq + 8 (e >> 1), key n*8 + 2 tq + (e & 1). */
    float s[NK][4], dp[NK][4];
    PRODUCT_T(s, NK, q, qa, oka, qbb, okb, D, DP, Ks, QS);
    PRODUCT_T(dp, NK, d_o, ga, oka, gb, okb, DV, DVP, Vs, GS);
    uint dh[NK][4], dl[NK][4];
#if ALIBI /* a lane's two rows' distances (cl/common.cl) */
    ALIBI_ROW_BASES(ald, ra, rb, kv0 + 2 * tq);
#endif
    UNROLL for (uint n = 0; n < NK; n++)
      UNROLL for (uint e = 0; e < 4; e++) {
        const uint j = n * 8 + 2 * tq + (e & 1), row = (e >> 1) ? rb : ra;
        const float l = (e >> 1) ? lb : la, dr = (e >> 1) ? db : da;
        bool ok = l != -INFINITY && j < nk;
#if CAUSAL
        ok = ok && (long)(kv0 + j) <= (long)row + shift;
#endif
#if MASK
        ok = ok && kv0 + j >= ((e >> 1) ? fb : fa) && kv0 + j < ((e >> 1) ? eb : ea);
#endif
#if SOFTCAP
        float dt;
        const float cs = cap_score(s[n][e], scale, softcap, &dt);
        const float p = ok ? exp(cs ALIBI_FRAG(slope, ald, 1, n, e) - l) : 0.0f;
#else
        const float p =
            ok ? exp(s[n][e] * scale ALIBI_FRAG(slope, ald, 1, n, e) - l) : 0.0f,
                    dt = 1.0f;
#endif
        const uint a = (e >> 1) | ((e & 1) << 1);
#if SINKS
        if (e >> 1)
          pd1 += p * dp[n][e];
        else
          pd0 += p * dp[n][e];
#endif
        SPLIT(p * (dp[n][e] - dr) * dt, dh[n][a], dl[n][a]);
      }
    PRODUCT_N(dqa, KT, dh, dl, NK, Ks, QS);
  }
#if SINKS /* the rows' sums of P dP meet across the quad */
  pd0 = quad_sum(pd0 SCR_ARGS), pd1 = quad_sum(pd1 SCR_ARGS);
  if (tq == 0 && oka) pdp[pdp_off + rbase + ra] = pd0;
  if (tq == 0 && okb) pdp[pdp_off + rbase + rb] = pd1;
#endif
  UNROLL for (uint e = 0; e < 4; e++) {
    const uint row = (e >> 1) ? rb : ra;
    if (row >= seqlen_q) continue;
    const ulong o = dq_off + QB(dq) + (ulong)row * dq_ss + h * dq_sh;
    UNROLL for (uint c = 0; c < KT; c++)
      if (c * 8 + 2 * tq + (e & 1) < D) dq[o + c * 8 + 2 * tq + (e & 1)] = dqa[c][e] * scale;
  }
}
// clang-format on

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
