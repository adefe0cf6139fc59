/* Fused attention forward on NVIDIA tensor cores in half storage ("forward_mma_half"): fp16 or
 * bf16 Q, K, V and O (DTYPE 1 or 2), mma.sync m16n8k16 with fp32 accumulators through inline
 * PTX (cl/mma_half.cl). fp32 storage stays forward_mma's (3xTF32).
 *
 * FlashAttention-2's loop order and register use, each warp owning 16 RM query rows (RM m16
 * tiles, 1 or 2: two tiles share each B fragment read, halving local-memory reads per MMA, as
 * FlashAttention-2's 32 rows a warp, at the cost of twice the accumulator registers):
 *   - Q's A fragments stay in registers for the whole key loop: Q as stored (exact), packed in
 *     pairs; S is scaled by scale * log2 e in fp32 after its MMAs, as FlashAttention-2 does.
 *     (Raw maxima with the scale folded into the exponential's FMA measured no faster on an
 *     H100 without a mask and 9-12% slower causal: docs/BENCHMARKS.md, stop 32.)
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
 * converts back: (m + log2 l) ln 2.
 *
 * PAD appends 8 16-bit values (4 words) to each local row: a row is then an odd multiple of 4
 * words, so the 8 rows x 4 words of one fragment read fall in 32 distinct banks. STAGES 2-4
 * without PAD swizzle the rows' 16-byte chunks instead (SWZ, cl/mma_half.cl's swz_at; head dims
 * multiples of 64), which saves the pad's 6% of local memory: 64-key tiles of K and V and Q's
 * 64 rows then fit 48 KiB exactly at d = 128.
 *
 * Masks (the tile's end, causal, a window) are applied only on the tiles where some key is hidden
 * from some row of the warp; the others skip the per-score tests.
 *
 * Parameters (-D): D, DV head dims; BQ query rows per work-group (16 RM per warp); RM; BKV keys per
 * tile (a multiple of 16, P V's k-step); PAD (0 or 1); CAUSAL (bottom-right aligned; key blocks
 * no row of the work-group sees are skipped); REVERSE (causal blocks longest first, 1 by
 * default); LAZY (rescale only when a row's maximum rose by more than 2^LAZY, 8 by default; 0:
 * at every rise); the variants MASK (key blocks outside the work-group's rows' ranges skipped, and a
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
 * copy through registers into the same layout. STAGES 3 and 4 (the same conditions) keep one stage
 * of K and one of V in FlashAttention-2's order: V(j) is copied while S(j) = Q K(j)^T is computed,
 * K(j + 1) while O += P V(j) is, two barriers a tile as STAGE 2, in half its local memory, so key
 * tiles can be twice as long. STAGE 4 also keeps Q in local memory and reads its A fragments a
 * k-step at a time by ldmatrix (FlashAttention-2's own choice at d = 128), which frees the Q
 * registers (RM KT 4 of them) for the longer tiles' scores. */

#if DTYPE != 1 && DTYPE != 2
#error "forward_mma_half computes fp16 and bf16 storage (DTYPE 1 or 2); fp32 is forward_mma's"
#endif
#if BKV % 16 || BQ % 16
#error "BQ and BKV must be multiples of 16"
#endif
#ifndef REVERSE
#define REVERSE 1
#endif
#ifndef LAZY
#define LAZY 8 /* log2 of how far a row's maximum may rise before the rescale; 0: at every rise */
#endif
#ifndef STAGE
#define STAGE 1
#endif
#if STAGE < 1 || STAGE > 4
#error "STAGE must be 1 (registers), 2 (two stages), 3 or 4 (one stage, staggered)"
#endif
#if STAGE >= 2 && (D % 16 || DV % 16 || (!PAD && (D % 64 || DV % 64)))
#error "STAGES 2-4 need D and DV multiples of 16, and of 64 unpadded (PAD 0: swizzled, SWZ)"
#endif
#if SWZ && (STAGE < 2 || PAD)
#error "SWZ (cl/mma_half.cl) is the unpadded layout of STAGES 2-4"
#endif

#ifndef RM
#define RM 1
#endif
#if RM != 1 && RM != 2
#error "RM (m16 tiles per warp) must be 1 or 2"
#endif
#if BQ % (16 * RM)
#error "BQ must be a multiple of 16 RM (a warp's rows)"
#endif
#define WARPS (BQ / (16 * RM))
#define WG (WARPS * 32)
#define DP ((D + 15) / 16 * 16) /* S's k dimension, padded */
#define DVP ((DV + 7) / 8 * 8)
#define KT (DP / 16) /* k-steps of S = Q K^T */
#define NT (BKV / 8) /* 8-key tiles of S */
#define KK (BKV / 16) /* k-steps of P V */
#define VT (DVP / 8) /* 8-column tiles of O */
#define KS ((DP + 8 * PAD) / 2) /* words per key row of K */
#define VS ((BKV + 8 * PAD) / 2) /* words per column row of V^T */
#define VR ((DVP + 8 * PAD) / 2)  /* STAGES 2-4: words per key row of V */

#if STAGE >= 2
#define ISSUE_K(st, kv0, nk)                                                                       \
  issue_rows(Kw2 + (st) * (BKV * KS), KS, kb, kbase, k_ss, D / 8, kv0, nk, fast, lid, BKV, WG)
#define ISSUE_V(st, kv0, nk)                                                                       \
  issue_rows(Vw2 + (st) * (BKV * VR), VR, vb, vbase, v_ss, DV / 8, kv0, nk, fast, lid, BKV, WG)
#define ISSUE_TILE(st, kv0, nk) ISSUE_K(st, kv0, nk), ISSUE_V(st, kv0, nk)
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
#if STAGE >= 2
  /* Two stages (STAGE 2) or one (3, 4) of K[key][column pair] and V[key][column pair], 16-byte
   * rows; STAGE 4: Q[row][column pair] too. */
  __local uint Kw2[(STAGE == 2 ? 2 : 1) * BKV * KS] __attribute__((aligned(16)));
  __local uint Vw2[(STAGE == 2 ? 2 : 1) * BKV * VR] __attribute__((aligned(16)));
#if STAGE == 4
  __local uint Qw[BQ * KS] __attribute__((aligned(16)));
#endif
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
  /* This warp's rows r0 .. r0 + 16 RM - 1: RM m16 tiles, each of which takes the same B
   * fragments (one ldmatrix feeds RM MMAs). This lane's rows: row[t][0] and row[t][1] of tile t. */
  const uint q0 = qb * BQ, r0 = q0 + warp * (16 * RM);
  uint row[RM][2];
  UNROLL for (uint t = 0; t < RM; t++) row[t][0] = r0 + 16 * t + gq, row[t][1] = row[t][0] + 8;
  const bool live = SKIP_NONE || r0 < seqlen_q; /* the same for the whole warp */

  const ulong qbase = q_off + QB(q) + h * q_sh;
  const ulong kbase = k_off + KB(k) + (h / group) * k_sh;
  const ulong vbase = v_off + KB(v) + (h / group) * v_sh;
  /* K and V as their 16-bit words, copied to local memory unchanged. */
  __global const ushort *kb = (__global const ushort *)k, *vb = (__global const ushort *)v;

#if STAGE != 4
  /* Q's A fragments: register r of tile t's k-step kt is row[t][r & 1], columns
   * 16 kt + 2 tq + 8 (r >> 1) and the next. (STAGE 4 reads them from local memory instead, a
   * k-step at a time: FlashAttention-2's d = 128 order, which frees the registers for 64-key
   * tiles.) */
  uint qa[RM][KT][4];
  UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint kt = 0; kt < KT; kt++) UNROLL for (uint r = 0; r < 4; r++) {
    const uint rw = row[t][r & 1], c = kt * 16 + 2 * tq + 8 * (r >> 1);
    const __global stor_t *qr = q + qbase + (ulong)rw * q_ss;
    const bool seen = rw < seqlen_q;
    const float x0 = seen && c < D ? LDS(qr + c) : 0.0f;
    const float x1 = seen && c + 1 < D ? LDS(qr + c + 1) : 0.0f;
    qa[t][kt][r] = PACK2(x0, x1);
  }
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
  uint kv_lo, w_first, w_end, first[RM][2], end[RM][2];
  mask_split_keys(q0, min(q0 + BQ, seqlen_q), seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
  mask_rows_keys(r0, min(r0 + 16 * RM, seqlen_q), seqlen_kv, mask_lo, mask_hi, &w_first, &w_end);
  /* The keys every row of the warp sees, [w_in_lo, w_in_hi): a tile inside them needs no mask.
   * (A window made every tile an edge: a window of 4096 at N = 32768 ran 2.8x faster than full
   * causal in fp16 where it does 4.3x less work; docs/BENCHMARKS.md.) */
  const uint w_in_lo = mask_key(r0 + 16 * RM - 1, mask_lo, seqlen_kv);
  const uint w_in_hi = mask_key(r0, mask_hi, seqlen_kv);
  UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint hr = 0; hr < 2; hr++) {
    first[t][hr] = mask_key(row[t][hr], mask_lo, seqlen_kv);
    end[t][hr] = mask_key(row[t][hr], mask_hi, seqlen_kv);
  }
#else
  /* This work-group's split of the keys: [kv_lo, kv_end). */
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

  /* m: each row's maximum (log2 domain); l: this lane's partial sums (the sink's term in one
   * lane of the quad). */
  float m[RM][2], l[RM][2];
  UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint hr = 0; hr < 2; hr++) {
    m[t][hr] = SINK_M(h, split);
    l[t][hr] = tq == 0 ? SINK_L(split) : 0.0f;
  }
#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif
  float acc[RM][VT][4];
  UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint vt = 0; vt < VT; vt++) UNROLL for (uint e = 0; e < 4; e++) acc[t][vt][e] = 0.0f;

#if STAGE >= 2
  /* 16-byte chunks wherever the views' offsets and strides (and the buffers) allow them. */
  const int fast = ((k_off | k_sb | k_ss | k_sh | v_off | v_sb | v_ss | v_sh) % 8) == 0 &&
                   ((size_t)kb % 16) == 0 && ((size_t)vb % 16) == 0;
#endif
#if STAGE == 2
  uint buf = 0;
  if (kv_lo < kv_end) ISSUE_TILE(0, kv_lo, min((uint)BKV, kv_end - kv_lo));
  CP_COMMIT();
#elif STAGE >= 3
  /* FlashAttention-2's order, one stage of each: K(0) now; V(j) while S(j) is computed, K(j + 1)
   * while P V(j) is. */
  __local const uint *Kt = Kw2, *Vt = Vw2;
  if (kv_lo < kv_end) ISSUE_K(0, kv_lo, min((uint)BKV, kv_end - kv_lo));
#if STAGE == 4
  {
    const int fq = ((q_off | q_sb | q_ss | q_sh) % 8) == 0 && ((size_t)q % 16) == 0;
    issue_rows(Qw, KS, (__global const ushort *)q, qbase, q_ss, D / 8, q0,
               q0 < seqlen_q ? min((uint)BQ, seqlen_q - q0) : 0u, fq, lid, BQ, WG);
  }
#endif
  CP_COMMIT();
#endif
  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
#if STAGE == 2
    /* The next tile's copies into the other stage, then this tile's awaited: its group is the
     * older of the two in flight. */
    __local const uint *Kt = Kw2 + buf * (BKV * KS), *Vt = Vw2 + buf * (BKV * VR);
    if (kv0 + BKV < kv_end) ISSUE_TILE(buf ^ 1, kv0 + BKV, min((uint)BKV, kv_end - kv0 - BKV));
    CP_COMMIT();
    CP_WAIT1();
    barrier(CLK_LOCAL_MEM_FENCE);
#elif STAGE >= 3
    /* K(j) has landed and every warp is done with V(j - 1): V(j) may come. */
    CP_WAIT0();
    barrier(CLK_LOCAL_MEM_FENCE);
    ISSUE_V(0, kv0, nk);
    CP_COMMIT();
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
    bool act = live && (!CAUSAL || SKIP_NONE || (long)kv0 <= (long)(r0 + 16 * RM - 1) + shift);
#if MASK
    act = act && (SKIP_NONE || (kv0 < w_end && kv0 + BKV > w_first));
#endif
    /* S = Q K^T: s[t][nt][e] is row[t][e >> 1], key nt * 8 + 2 tq + (e & 1). */
    float s[RM][NT][4];
    if (act) {
      UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint nt = 0; nt < NT; nt++) UNROLL for (uint e = 0; e < 4; e++) s[t][nt][e] = 0.0f;
#if STAGE >= 2
      UNROLL for (uint kt = 0; kt < KT; kt++) {
#if STAGE == 4
        uint qk[RM][4];
        UNROLL for (uint t = 0; t < RM; t++) frag_a_x4(Qw, KS, warp * (16 * RM) + 16 * t, kt, lane, qk[t]);
#define QA(t) qk[t]
#else
#define QA(t) qa[t][kt]
#endif
        UNROLL for (uint nt = 0; nt < NT; nt += 2) {
          uint r[4];
          frag_rows_x4(Kt, KS, nt * 8, kt, lane, r);
          UNROLL for (uint t = 0; t < RM; t++) {
            MMA16(s[t][nt], QA(t), r[0], r[1]);
            MMA16(s[t][nt + 1], QA(t), r[2], r[3]);
          }
        }
#undef QA
      }
#else
      UNROLL for (uint kt = 0; kt < KT; kt++) UNROLL for (uint nt = 0; nt < NT; nt++) {
        const uint at = (nt * 8 + gq) * KS + kt * 8 + tq;
        const uint b0 = Kw[at], b1 = Kw[at + 4];
        UNROLL for (uint t = 0; t < RM; t++) MMA16(s[t][nt], qa[t][kt], b0, b1);
      }
#endif
      /* Scores to the log2 domain (softcap, ALiBi), then the mask, only where some key of the
       * tile is hidden from some row of the warp (the tile's end, the diagonal, a window):
       * elsewhere every score counts. The test is the same for the whole warp. */
      bool edge = nk < BKV; /* emulated too: the mask has no barrier to reach */
#if MASK
      edge = edge || kv0 < w_in_lo || kv0 + BKV > w_in_hi;
#endif
#if CAUSAL
      edge = edge || (long)(kv0 + BKV - 1) > (long)r0 + shift;
#endif
      UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint nt = 0; nt < NT; nt++) UNROLL for (uint e = 0; e < 4; e++) {
#if SOFTCAP
        s[t][nt][e] = softcap * cap_tanh(s[t][nt][e] * scale_log2);
#else
        s[t][nt][e] *= scale_log2;
#endif
        ALIBI_ADD(s[t][nt][e], slope, row[t][e >> 1], kv0 + nt * 8 + 2 * tq + (e & 1));
      }
      if (edge) {
        UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint nt = 0; nt < NT; nt++) UNROLL for (uint e = 0; e < 4; e++) {
          const uint j = nt * 8 + 2 * tq + (e & 1);
          bool ok = j < nk;
#if CAUSAL
          ok = ok && (long)(kv0 + j) <= (long)row[t][e >> 1] + shift;
#endif
#if MASK
          ok = ok && kv0 + j >= first[t][e >> 1] && kv0 + j < end[t][e >> 1];
#endif
          s[t][nt][e] = ok ? s[t][nt][e] : -INFINITY;
        }
      }
      UNROLL for (uint t = 0; t < RM; t++) {
        float mx0 = -INFINITY, mx1 = -INFINITY;
        UNROLL for (uint nt = 0; nt < NT; nt++) {
          mx0 = fmax(mx0, fmax(s[t][nt][0], s[t][nt][1]));
          mx1 = fmax(mx1, fmax(s[t][nt][2], s[t][nt][3]));
        }
        const float mn0 = fmax(m[t][0], quad_max(mx0 SCR_ARGS));
        const float mn1 = fmax(m[t][1], quad_max(mx1 SCR_ARGS));
        /* The rescale by a new maximum only when some row of the warp rose by more than LAZY
         * (log2 units): otherwise every row keeps its old m, P up to 2^LAZY, and the exp2s and
         * acc's multiplications are skipped for the tile (FlashAttention-4's lazy rescale).
         * Exact: O = acc / l and LSE = m + log2 l take the same m as acc and l. */
#if LAZY
        const int grow = warp_any(mn0 > m[t][0] + LAZY || mn1 > m[t][1] + LAZY SCR_ARGS);
#else
        const int grow = 1;
#endif
        float a0 = 1.0f, a1 = 1.0f;
        if (grow) {
          /* A row that has seen no key yet (mn = -inf) subtracts 0, not -inf (FlashAttention-2's
           * rule): its scores are -inf, so P and the rescale are exp2(-inf) = 0, never NaN. */
          a0 = exp2(m[t][0] - (mn0 == -INFINITY ? 0.0f : mn0));
          a1 = exp2(m[t][1] - (mn1 == -INFINITY ? 0.0f : mn1));
          m[t][0] = mn0, m[t][1] = mn1;
        }
        const float mu0 = m[t][0] == -INFINITY ? 0.0f : m[t][0];
        const float mu1 = m[t][1] == -INFINITY ? 0.0f : m[t][1];
        float sum0 = 0.0f, sum1 = 0.0f;
        /* P in the storage type, as P V's A fragments: k-step kk takes 8-key tiles 2 kk (a[0],
         * a[1]) and 2 kk + 1 (a[2], a[3]), each C fragment's (c0, c1) and (c2, c3) a register.
         * s holds them meanwhile (s[t][nt][0] the pair of c0, c1): no second array of P. */
        UNROLL for (uint nt = 0; nt < NT; nt++) {
          const float p0 = exp2(s[t][nt][0] - mu0), p1 = exp2(s[t][nt][1] - mu0);
          const float p2 = exp2(s[t][nt][2] - mu1), p3 = exp2(s[t][nt][3] - mu1);
          sum0 += p0 + p1, sum1 += p2 + p3;
          s[t][nt][0] = as_float(PACK2(p0, p1));
          s[t][nt][1] = as_float(PACK2(p2, p3));
        }
        l[t][0] = l[t][0] * a0 + sum0, l[t][1] = l[t][1] * a1 + sum1;
        if (grow) {
          UNROLL for (uint vt = 0; vt < VT; vt++) {
            acc[t][vt][0] *= a0, acc[t][vt][1] *= a0;
            acc[t][vt][2] *= a1, acc[t][vt][3] *= a1;
          }
        }
      }
#if STAGE >= 3
    }
    /* V(j) has landed and every warp is done with K(j): K(j + 1) may come. (The if (act) block
     * is split around this barrier, which every work-item reaches.) */
    CP_WAIT0();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (kv0 + BKV < kv_end) ISSUE_K(0, kv0 + BKV, min((uint)BKV, kv_end - kv0 - BKV));
    CP_COMMIT();
    if (act) {
#endif
      /* O += P V: b0 holds keys 16 kk + 2 tq and the next of column vt * 8 + gq, b1 keys + 8;
       * P's A fragment of k-step kk is tiles 2 kk and 2 kk + 1's packed pairs. */
#define PA(t, kk)                                                                                  \
  {as_uint(s[t][2 * (kk)][0]), as_uint(s[t][2 * (kk)][1]), as_uint(s[t][2 * (kk) + 1][0]),        \
   as_uint(s[t][2 * (kk) + 1][1])}
#if STAGE >= 2
      UNROLL for (uint kk = 0; kk < KK; kk++) {
        uint pa[RM][4];
        UNROLL for (uint t = 0; t < RM; t++) {
          const uint x[4] = PA(t, kk);
          UNROLL for (uint e = 0; e < 4; e++) pa[t][e] = x[e];
        }
        UNROLL for (uint vt = 0; vt < VT; vt += 2) {
          uint r[4];
          frag_cols_x4(Vt, VR, kk * 16, vt * 8, lane, r);
          UNROLL for (uint t = 0; t < RM; t++) {
            MMA16(acc[t][vt], pa[t], r[0], r[1]);
            MMA16(acc[t][vt + 1], pa[t], r[2], r[3]);
          }
        }
      }
#else
      UNROLL for (uint kk = 0; kk < KK; kk++) {
        uint pa[RM][4];
        UNROLL for (uint t = 0; t < RM; t++) {
          const uint x[4] = PA(t, kk);
          UNROLL for (uint e = 0; e < 4; e++) pa[t][e] = x[e];
        }
        UNROLL for (uint vt = 0; vt < VT; vt++) {
          const uint at = (vt * 8 + gq) * VS + kk * 8 + tq;
          const uint b0 = Vw[at], b1 = Vw[at + 4];
          UNROLL for (uint t = 0; t < RM; t++) MMA16(acc[t][vt], pa[t], b0, b1);
        }
      }
#endif
#undef PA
    }
#if STAGE == 2
    barrier(CLK_LOCAL_MEM_FENCE); /* this stage is consumed before the next tile refills it */
    buf ^= 1;
#endif
  }
#if STAGE == 4
  CP_WAIT0(); /* Q's copies, where the loop had no keys to wait for */
#endif

  /* The row sums meet across the quad; then O = acc / l, two columns per lane and tile. */
  const ulong obase = o_off + split * o_split + QB(o) + h * o_sh;
  UNROLL for (uint t = 0; t < RM; t++) UNROLL for (uint hr = 0; hr < 2; hr++) {
    const uint rw = row[t][hr];
    const float lr = quad_sum(l[t][hr] SCR_ARGS), mr = m[t][hr];
    if (rw >= seqlen_q) continue;
    const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
    const ulong at = obase + (ulong)rw * o_ss;
    UNROLL for (uint vt = 0; vt < VT; vt++) {
      const uint c = vt * 8 + 2 * tq;
      if (c < DV) STO(o, at + c, acc[t][vt][2 * hr] * inv);
      if (c + 1 < DV) STO(o, at + c + 1, acc[t][vt][2 * hr + 1] * inv);
    }
    if (write_lse && tq == 0)
      lse[lse_off + split * lse_split + LSE_ROW(b, h) + rw] =
          lr > 0.0f ? (mr + log2(lr)) * M_LN2_F : -INFINITY;
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
