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
 *   bwd_dq:   (cl/backward_mma_half_dq.cl) a warp per 16 query rows (BQ / 16 warps), Q and dO
 *             rows in registers. Per tile of SK keys (K and V staged): S = Q K^T, dP = dO V^T,
 *             then dQ += dS K.
 *
 * The staged matrices are kept row-major as 16-bit values, two per 32-bit word. The first
 * products take them as B = M^T, whose register pairs run along a row; the second take them as
 * B = M, whose pairs run down a column. Both read their B fragments by ldmatrix, two 8-wide tiles
 * at once (cl/mma_half.cl's frag_rows_x4, frag_cols_x4 with .trans); an odd last tile reads its
 * words one by one (pair_t down a column). A row is padded by 8 values to an odd multiple of 4
 * words (16-byte aligned), so the 8 rows x 4 words of a fragment read fall in 32 distinct banks.
 * P and dS are rounded as FlashAttention-2 rounds them; dP, D, LSE and every sum stay fp32, and
 * each gradient is rounded once, when it is stored.
 *
 * DQ_ATOMIC 1 (a caller's CLATTN_NONDETERMINISTIC): FlashAttention-2's five products instead of
 * seven. bwd_dkdv also stages its K block in local memory (its S^T = K Q^T reads K's A fragments
 * there, so K is not held in registers) and writes each block's dS^T there; its warps then share
 * the block's dQ = dS K (16 rows x 16 columns a unit) and add it to an fp32 accumulator in the
 * row workspace (acc, zeroed by the host) by atomic adds, a block later: at the top of the next
 * block's trip, while its copies fly, before the barrier after which dS^T is written again (two
 * barriers a block, not three). bwd_dq then only scales and rounds the accumulator into dq. The
 * sums' order varies run to run, and so may dQ's last bits.
 *
 * Staging (cl/forward_mma_half.cl's STAGE 2): a matrix whose head dim is a multiple of 16 is
 * copied in 16-byte chunks, by cp.async where its view is 16-byte aligned (a uniform runtime
 * flag), else through registers into the same layout; other head dims go by 16-bit pairs,
 * zero-padded to 16. With NBUF 2 the blocks (bwd_dkdv: Q, dO, with LSE and D; bwd_dq: K, V) are
 * double-buffered: block i + 1's copies are in flight while block i computes (LSE and D wait in
 * registers until the compute is done). NBUF 1: one stage, copied and awaited before each block.
 *
 * Defines: D, DV head dims (at most 128; padded with zeros to 16); BKV keys per bwd_dkdv
 * work-group and BQ rows per bwd_dq work-group (multiples of 16); SQ rows staged by bwd_dkdv and
 * SK keys by bwd_dq (multiples of 16), NBUF stages (1 or 2, 2 by default), set by the runtime to
 * fit local memory; CAUSAL (bottom-right aligned); MMA_EMULATE (tests: every work-item reaches
 * every MMA16, which the loops below, uniform over the work-group, keep; the copies and fragment
 * reads are then plain). runtime/kernels/backward_mma_half.c mirrors the local-memory formula;
 * keep the two in step. */

#if DTYPE != 1 && DTYPE != 2
#error "backward_mma_half computes fp16 and bf16 storage (DTYPE 1 or 2); fp32 is backward_mma's"
#endif
#if BQ % 16 || BKV % 16 || SQ % 16 || SK % 16 || SQ < 16 || SK < 16
#error "BQ, BKV, SQ and SK must be multiples of 16 (SQ and SK at least 16)"
#endif
#ifndef NBUF
#define NBUF 2
#endif
#if NBUF != 1 && NBUF != 2
#error "NBUF (stages of the staged blocks) must be 1 or 2"
#endif
/* CP_WAIT0 (every copy issued, awaited) is cl/mma_half.cl's. */

/* One element of a block's S^T and dP^T (bwd_dkdv) or S and dP (bwd_dq): P = exp2 of the score
 * in the log2 domain (after the softcap and ALiBi, al_) less the row's log2 LSE l_, in place of
 * the score, and dS = P (dP - D) dt in place of dP; SINK_ (a statement of p_ and dp_) before dS.
 * V_: whether the row sees the key, written out only on the blocks where some key is hidden from
 * some row (edge blocks); elsewhere 1, so the others skip the tests. A row to leave out (past
 * the rows, or one that saw no key: LSE -inf) has l_ = +inf, whose P is exp2(-inf) = 0 with no
 * test (its scores are finite). */
#if SOFTCAP /* P of the capped score, dS times 1 - t^2 (cl/common.cl) */
#define P_DS(s_, dp_, l_, dr_, al_, V_, SINK_)                                                     \
  {                                                                                                \
    float dt_; /* set for masked elements too: 0 * dt must stay 0 */                               \
    const float cs_ = cap_score(s_, scale, softcap, &dt_);                                         \
    const float p_ = (V_) ? exp2((cs_ al_) * M_LOG2E_F - (l_)) : 0.0f;                             \
    SINK_;                                                                                         \
    s_ = p_, dp_ = p_ * (dp_ - (dr_)) * dt_;                                                       \
  }
#else
#define P_DS(s_, dp_, l_, dr_, al_, V_, SINK_)                                                     \
  {                                                                                                \
    const float p_ = (V_) ? exp2(s_ * sl2 al_ - (l_)) : 0.0f;                                      \
    SINK_;                                                                                         \
    s_ = p_, dp_ = p_ * (dp_ - (dr_));                                                             \
  }
#endif
/* ALiBi's term of a fragment element in P_DS's units (natural with the softcap, else log2). */
#if SOFTCAP
#define AL_(sign, n, e) ALIBI_FRAG(slope, ald, sign, n, e)
#else
#define AL_(sign, n, e) ALIBI_FRAG(slope2, ald, sign, n, e)
#endif
/* The visibility tests of edge blocks: i a row, j a key (1 where the class has no such test). */
#if CAUSAL
#define SEES_CAUSAL(i, j) ((long)(j) <= (long)(i) + shift)
#else
#define SEES_CAUSAL(i, j) 1
#endif
#if MASK
#define MASK_SEES_(i, j) MASK_SEES(i, j)
#define DQ_WINDOW(e, j) ((j) >= ((e >> 1) ? fb : fa) && (j) < ((e >> 1) ? eb : ea))
#else
#define MASK_SEES_(i, j) 1
#define DQ_WINDOW(e, j) 1
#endif
#if SEQLENS
#define SEES_LEN(j) ((j) < seqlen_kv) /* keys past the entry's length: P = 0 */
#else
#define SEES_LEN(j) 1
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

/* ROWS global rows of n columns from r0 (nrows of them real, the rest zero) into local words of
 * row stride W, padded with zeros to PADC columns (even). n a multiple of 16: 16-byte chunks, by
 * cp.async where the view is 16-byte aligned (fast, uniform), else through registers (to be
 * committed and awaited, cl/mma_half.cl); otherwise 16-bit pairs. */
static inline void stage_rows(__local uint *Mw, uint W, uint ROWS, uint PADC,
                              __global const ushort *m, ulong base, ulong ss, uint r0, uint nrows,
                              uint n, int fast, uint lid, uint wg) {
  if (n % 16 == 0) { /* n == PADC */
    for (uint i = lid; i < ROWS * (n / 8); i += wg) {
      const uint r = i / (n / 8), c = i % (n / 8);
      const bool in = r < nrows;
      __global const ushort *src = m + base + (ulong)(r0 + (in ? r : 0)) * ss + 8 * c;
      __local uint *dst = Mw + r * W + 4 * c;
      if (fast) {
        cp16(dst, (__global const uint *)src, in);
      } else {
        UNROLL for (uint e = 0; e < 4; e++) dst[e] = in ? src[2 * e] | (uint)src[2 * e + 1] << 16 : 0u;
      }
    }
  } else {
    for (uint i = lid; i < ROWS * (PADC / 2); i += wg) {
      const uint r = i / (PADC / 2), w = i % (PADC / 2);
      const bool in = r < nrows;
      Mw[r * W + w] = gpair(m, base + (ulong)(r0 + (in ? r : 0)) * ss, in, 2 * w, n);
    }
  }
}

/* acc[t] += A (N 8-wide tiles of the local rows of M, word stride W, taken as M^T: B's pairs
 * lie along M's rows) for KS k-steps of a: two tiles per ldmatrix, an odd last one by words. */
#define PRODUCT_T(acc, N, a, KS, Mw, W)                                                            \
  UNROLL for (uint t_ = 0; t_ < (N); t_++)                                                        \
    UNROLL for (uint e_ = 0; e_ < 4; e_++) acc[t_][e_] = 0.0f;                                     \
  UNROLL for (uint k_ = 0; k_ < (KS); k_++) {                                                      \
    UNROLL for (uint t_ = 0; t_ + 1 < (N); t_ += 2) {                                              \
      uint b_[4];                                                                                  \
      frag_rows_x4(Mw, W, t_ * 8, k_, lane, b_);                                                   \
      MMA16(acc[t_], a[k_], b_[0], b_[1]);                                                         \
      MMA16(acc[t_ + 1], a[k_], b_[2], b_[3]);                                                     \
    }                                                                                              \
    if ((N) % 2) {                                                                                 \
      const uint at_ = (((N) - 1) * 8 + gq) * (W) + k_ * 8 + tq;                                   \
      MMA16(acc[(N) - 1], a[k_], (Mw)[at_], (Mw)[at_ + 4]);                                        \
    }                                                                                              \
  }

/* out[c] += A (KS k-steps of 16 local rows) x M's rows (words of stride W), for C 8-column
 * tiles: B's pairs lie down M's columns. Two tiles per ldmatrix.trans, an odd last one by
 * 16-bit reads. */
#define PRODUCT_N(out, C, a, KS, Mw, W)                                                            \
  UNROLL for (uint k_ = 0; k_ < (KS); k_++) {                                                      \
    UNROLL for (uint c_ = 0; c_ + 1 < (C); c_ += 2) {                                              \
      uint b_[4];                                                                                  \
      frag_cols_x4(Mw, W, k_ * 16, c_ * 8, lane, b_);                                              \
      MMA16(out[c_], a[k_], b_[0], b_[1]);                                                         \
      MMA16(out[c_ + 1], a[k_], b_[2], b_[3]);                                                     \
    }                                                                                              \
    if ((C) % 2) {                                                                                 \
      __local const ushort *h_ = (__local const ushort *)(Mw);                                     \
      const uint r_ = k_ * 16 + 2 * tq, col_ = ((C) - 1) * 8 + gq;                                 \
      MMA16(out[(C) - 1], a[k_], pair_t(h_, 2 * (W), r_, col_), pair_t(h_, 2 * (W), r_ + 8, col_)); \
    }                                                                                              \
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
#define LR ((SQ + 2 * BKV - 1) / (2 * BKV)) /* LSE and D values a work-item stages per block */
/* bwd_dkdv: block (hh_, q0_)'s Q and dO rows into stage s_ (copies issued), its LSE and D rows
 * into registers nl, nd (STORE_LD puts them into a stage). */
#define ISSUE_Q(hh_, q0_, s_)                                                                      \
  {                                                                                                \
    const uint h_ = hk * group + (hh_), n_ = min((uint)SQ, seqlen_q - (q0_));                      \
    stage_rows(Qw + (s_) * (SQ * QW), QW, SQ, DP, qg, q_off + QB(q) + h_ * q_sh, q_ss, q0_, n_, D, \
               fast, lid, 2 * BKV);                                                                \
    stage_rows(Gw + (s_) * (SQ * GW), GW, SQ, DVP, gg, g_off + QB(g) + h_ * g_sh, g_ss, q0_, n_,   \
               DV, fast, lid, 2 * BKV);                                                            \
    const ulong rb_ = LSE_ROW(b, h_) + (q0_);                                                      \
    UNROLL for (uint i_ = 0; i_ < LR; i_++) {                                                      \
      const uint r_ = lid + i_ * 2 * BKV;                                                          \
      const float l_ = r_ < n_ ? lse[rb_ + r_] : -INFINITY;                                        \
      nl[i_] = l_ == -INFINITY ? INFINITY : l_ * M_LOG2E_F; /* +inf: P = 0 (P_DS) */               \
      nd[i_] = r_ < n_ ? drow[rb_ + r_] : 0.0f;                                                    \
    }                                                                                              \
  }
#define STORE_LD(s_)                                                                               \
  UNROLL for (uint i_ = 0; i_ < LR; i_++) {                                                        \
    const uint r_ = lid + i_ * 2 * BKV;                                                            \
    if (r_ < SQ) Ls[(s_) * SQ + r_] = nl[i_], Ds[(s_) * SQ + r_] = nd[i_];                         \
  }

__kernel __attribute__((reqd_work_group_size(2 * BKV, 1, 1))) void
bwd_dkdv(__global const stor_t *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
         __global const stor_t *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
         __global const stor_t *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
         __global const stor_t *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
         __global const float *lse, __global const float *drow, __global stor_t *dk,
         ulong dk_off, ulong dk_sb, ulong dk_ss, ulong dk_sh, __global stor_t *dv, ulong dv_off,
         ulong dv_sb, ulong dv_ss, ulong dv_sh, uint heads_q, uint heads_kv, uint seqlen_q,
         uint seqlen_kv, uint num_kblocks, float scale, ulong group_base VARIANT_ARGS DQ_ARG) {
  __local uint Qw[NBUF * SQ * QW] __attribute__((aligned(16)));
#if DQ_ATOMIC
  __local uint Kl[BKV * QW] __attribute__((aligned(16)));
  __local uint Sw[BKV * DSW] __attribute__((aligned(16)));
#if DQ_RED == 3
  __local float Dq[SQ * D] __attribute__((aligned(16)));
#endif
#endif
  __local uint Gw[NBUF * SQ * GW] __attribute__((aligned(16)));
  __local float Ls[NBUF * SQ], Ds[NBUF * SQ];
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

  uint va[VK][4]; /* this warp's 16 keys as A fragments (K's in local memory with DQ_ATOMIC) */
#if !DQ_ATOMIC
  uint ka[KT][4];
  LOAD_A(ka, KT, kg, kr + (ulong)(oka ? ja : 0) * k_ss, oka, kr + (ulong)(okb ? jb : 0) * k_ss,
         okb, D);
#endif
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
  /* 16-byte copies wherever the views' offsets and strides (and the buffers) allow them. */
  const int fast = ((q_off | q_sb | q_ss | q_sh | g_off | g_sb | g_ss | g_sh) % 8) == 0 &&
                   ((size_t)qg % 16) == 0 && ((size_t)gg % 16) == 0;
  /* Blocks (hh, q0) run over the group's heads, then the query blocks from q_first. */
  const bool any = q_first < q_stop;
  uint hh = 0, q0 = q_first, buf = 0;
  float nl[LR], nd[LR];
#if DQ_ATOMIC
  uint ph = 0, pq = 0; /* the block whose dQ is pending (its dS^T in Sw), from the second trip */
  bool pend = false;
  if (any) { /* the block's keys, in the first group of copies */
    const int kfast = ((k_off | k_sb | k_ss | k_sh) % 8) == 0 && ((size_t)kg % 16) == 0;
    const uint nk = kb * BKV < seqlen_kv ? min((uint)BKV, seqlen_kv - kb * BKV) : 0u;
    stage_rows(Kl, QW, BKV, DP, kg, kr, k_ss, kb * BKV, nk, D, kfast, lid, 2 * BKV);
  }
#endif
#if NBUF == 2
  if (any) {
    ISSUE_Q(0, q_first, 0);
    STORE_LD(0);
  }
  CP_COMMIT();
#endif
  while (any && hh < group) {
    uint nh = hh, nq = q0 + SQ; /* the next block */
    if (nq >= q_stop) nh++, nq = q_first;
#if NBUF == 2 /* its copies into the other stage; this block's, the older group, awaited */
    if (nh < group) ISSUE_Q(nh, nq, buf ^ 1);
    CP_COMMIT();
    DQ_PENDING(); /* while the copies fly */
    CP_WAIT1();
#else
    ISSUE_Q(hh, q0, 0);
    STORE_LD(0);
    CP_COMMIT(); /* wait_group waits for committed groups only */
    DQ_PENDING();
    CP_WAIT0();
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint h = hk * group + hh;
#if ALIBI /* in natural units, and in the log2 domain of the unscaled branch */
    const float slope = ALIBI_SLOPE(b * heads_q + h), slope2 = slope * M_LOG2E_F;
#endif
    __local const uint *Qt = Qw + buf * (SQ * QW), *Gt = Gw + buf * (SQ * GW);
    __local const float *Lt = Ls + buf * SQ, *Dt = Ds + buf * SQ;
    {
      /* S^T and dP^T: C element e is key gq + 8 (e >> 1), row n * 8 + 2 tq + (e & 1). */
      float s[NQ][4], dp[NQ][4];
#if ALIBI /* a lane's two keys' distances (cl/common.cl) */
      ALIBI_KEY_BASES(ald, ja, jb, q0 + 2 * tq);
#endif
#if DQ_ATOMIC
      uint ka[KT][4];
      UNROLL for (uint t = 0; t < KT; t++) frag_a_x4(Kl, QW, warp * 16, t, lane, ka[t]);
#endif
      PRODUCT_T(s, NQ, ka, KT, Qt, QW);
      PRODUCT_T(dp, NQ, va, VK, Gt, GW);
      /* An edge block: the warp's last key past the block's first row's diagonal, keys past the
       * entry's length, or a window. */
      bool edge = SEQLENS && kb * BKV + warp * 16 + 16 > seqlen_kv;
#if MASK /* a window: unless every row of the block sees every key of the warp */
      edge = edge || kb * BKV + warp * 16 < mask_key(q0 + SQ - 1, mask_lo, seqlen_kv) ||
             kb * BKV + warp * 16 + 16 > mask_key(q0, mask_hi, seqlen_kv);
#endif
#if CAUSAL
      edge = edge || (long)(kb * BKV + warp * 16 + 15) > (long)q0 + shift;
#endif
#define DKDV_J ((e >> 1) ? jb : ja)
#define DKDV_ELEMENTS(V_)                                                                          \
  UNROLL for (uint n = 0; n < NQ; n++) UNROLL for (uint e = 0; e < 4; e++) {                       \
    const uint r = n * 8 + 2 * tq + (e & 1);                                                       \
    P_DS(s[n][e], dp[n][e], Lt[r], Dt[r], AL_(-1, n, e), V_, (void)0);                             \
  }
      if (edge) {
        DKDV_ELEMENTS(SEES_LEN(DKDV_J) && SEES_CAUSAL(q0 + r, DKDV_J) && MASK_SEES_(q0 + r, DKDV_J))
      } else {
        DKDV_ELEMENTS(1)
      }
#undef DKDV_ELEMENTS
#undef DKDV_J
      uint pa[KQ][4];
      TO_A(pa, s, KQ);
      PRODUCT_N(dva, CV, pa, KQ, Gt, GW); /* dV += P^T dO */
      TO_A(pa, dp, KQ);
#if DQ_ATOMIC /* dS^T's words as they lie in pa: keys gq and gq + 8, rows n * 8 + 2 tq, + 1 */
      /* Keys past the entry's length (not masked outside edge blocks: their dK and dV rows are
       * never stored) get 0: their dS = -P D may round to infinity, times K's zeros NaN. */
      __local uint *St = Sw + (warp * 16 + gq) * DSW + tq;
      UNROLL for (uint n = 0; n < NQ; n++) {
        St[n * 4] = oka ? pa[n / 2][2 * (n % 2)] : 0u;
        St[8 * DSW + n * 4] = okb ? pa[n / 2][2 * (n % 2) + 1] : 0u;
      }
#endif
      PRODUCT_N(dka, CT, pa, KQ, Qt, QW); /* dK += dS^T Q (times scale on the way out) */
    }
#if DQ_ATOMIC /* this block's dQ is the next trip's (or the loop's end's), past the barrier below */
    ph = h, pq = q0, pend = true;
#endif
#if NBUF == 2
    if (nh < group) STORE_LD(buf ^ 1);
#endif
    barrier(CLK_LOCAL_MEM_FENCE); /* this stage is consumed before it is refilled */
    buf ^= NBUF - 1, hh = nh, q0 = nq;
  }
  DQ_PENDING(); /* the last block's (every warp's dS^T written before the loop's last barrier) */
  DQ_BULK_WAIT(); /* Dq is read before the work-group ends (DQ_RED 3) */
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

// clang-format on

/* bwd_dkdv's entry lengths end with it (cl/backward_mma_half_dq.cl defines its own). */
#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
