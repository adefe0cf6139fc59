/* Attention over a KV cache on tensor cores (issue 18): the `decode_mma` family, fp16 or bf16
 * queries over fp16, bf16 or int8 caches through mma.sync m16n8k16 (cl/mma_half.cl; emulated
 * elsewhere, for tests). On the
 * H200 the CUDA-core kernel (cl/decode.cl) spends about 75 warp instructions per key of a GQA
 * group, bound by its issue and its barriers rather than by memory (docs/BENCHMARKS.md); here a
 * key costs about a dozen, the fp16 words go to the tensor cores as loaded (no conversions), and
 * a work-group is one warp with no barrier in its loop, so that many warps per SM keep their
 * loads in flight independently. Key splits (runtime/ops/split.c) give the parallelism.
 *
 * One warp owns BQ (up to 16; fewer where a GPU's plan tightens the tile to its rows) packed
 * rows of one (batch entry, KV head) and one key split: packed row p is query row p / group of
 * query head kvh * group + p % group, as in cl/decode.cl. It walks its keys in blocks of BKV
 * (16, 32 or 64), 16 at a time, every load of a block issued before its first step (STAGE 1), or
 * each step's loads issued before the previous step's math (STAGE 2, BKV 32: two steps'
 * registers rotating):
 *   S = Q K^T as two n8 tiles of keys and D / 16 k-steps. Lane (gq, tq) loads keys gq and 8 + gq
 *     of the step, its 16-byte chunks tq, tq + 4, ... (a quad reads 64 contiguous bytes), and
 *     hands the words to the mma as its B fragments as loaded: the k-step's columns are a
 *     permutation of the head dim, the same for Q's A fragments (held in registers for the whole
 *     walk), so the dot products are unchanged. Chunk i of lane tq holds columns 8 (4 i + tq) ..
 *     + 7: k-step 2 i + h takes its halves 4 h .. 4 h + 3 (k indices 2 tq, 2 tq + 1 and 2 tq + 8,
 *     2 tq + 9).
 *   The online softmax per row on the C fragments (a quad shares a row: two shuffles for its max;
 *     l stays a per-lane partial sum until the end), O rescaled only where the max grew.
 *   O += P V: P's A fragment is S's C fragments packed (FlashAttention-2), k indexing the step's
 *     16 keys. Lane (gq, tq) loads the V rows of keys 2 tq, 2 tq + 1, 8 + 2 tq, 9 + 2 tq (its S
 *     elements' keys, so it also knows which of them exist) at its DV / 8 columns gq DV / 8 ..,
 *     and pairs two keys' halves into each B register: O's n8 tile nt, column n is the head
 *     dim's column n DV / 8 + nt.
 * Masked keys, keys past the split and keys of pages outside the pool score -inf and load no
 * V (zero). Rows past the tile's are zero in Q, and BQ <= 8 leaves rows 8-15 out of every
 * fragment (zero registers).
 *
 * An int8 cache (KV8): a 16-byte chunk holds 16 columns, four k-steps' worth (a word each); its
 * values go to the mma exactly (|x| <= 127 is exact in fp16 and bf16): K's scale multiplies S's
 * column, and V's multiplies P's column (P' = p s_v / vmax VREF, rounded once as P is, vmax
 * the largest scale seen so far; l sums p alone, and O is scaled back at the end), so no element
 * of V is scaled. The lane of a key's S elements loads its two scales. With fp16 queries a pair
 * of values becomes an fp16 pair in two instructions (K: a byte permute puts the two bytes,
 * biased by 128, under the exponent of 1024, and one f16x2 subtraction takes 1152 off) or three
 * (V, whose pair is two keys' bytes: the permute, a mask, the subtraction), not by integer to
 * float conversions (a quarter-rate instruction) and a pack: dequantising took about three
 * quarters of a step's instructions (docs/BENCHMARKS.md: the int8 cache no faster than fp16),
 * and the permute made the int8 cache 5-10% faster on the H100 than shifts and masks.
 *
 * Parameters (-D): D (a multiple of 32; 64 with KV8), DV (of 16; 32 with KV8), both at most 128;
 * BQ; BKV; STAGE; CAUSAL and the variants of cl/common.cl (MASK, SOFTCAP, ALIBI, SINKS,
 * KVLENS); KVCACHE, PAGED and KV8 (cl/decode_common.cl, which has the arguments, shared with
 * cl/decode.cl).
 * Scores are in the log2 domain; Q is used as stored and S scaled after the mma. */

/* The parameters' checks, sizes and loads are cl/decode_mma_load.cl's, which comes first. */

__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
clattn_decode_mma(DECODE_ARGS) {
  /* The tile's Q, two 16-bit values a word, in the fragment's rows: 8 (rows past BQ zero, since
   * lanes gq < 8 read them) or 16. */
  __local uint Qs[QROWS * QW];
  __local int last; /* SPLIT_MERGE_TAIL's answer */
  const uint lane = get_local_id(0), gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scr[SCRATCH];
#endif
  const uint heads_kv = heads_q / group;
  uint tile, split, kvh;
  ulong b;
  decode_place(group_base + get_group_id(0), num_tiles, num_splits, heads_kv, &tile, &split, &kvh,
               &b);
  SEQ_BEGIN(b);
#if SEQLENS
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  uint p0, nr, kv_lo, kv_end; /* the tile's rows and keys (cl/decode_common.cl) */
  decode_tile(tile, BQ, group, seqlen_q, seqlen_kv, TILE_MASK(mask_lo, mask_hi), split,
              kv_per_split, &p0, &nr, &kv_lo, &kv_end);
#if CAUSAL
  const long shift = (long)seqlen_kv - (long)seqlen_q; /* row i sees keys j <= i + shift */
#endif
  const ulong kbase = k_off + kvh * k_sh, vbase = v_off + kvh * v_sh;
  /* 16-byte loads need every row to start on a whole chunk (EPC elements). V: a lane's NT
   * columns start at gq NT: 16-byte loads where they are whole chunks (fp16 and bf16 at DV = 64
   * and 128, int8 at 128), else 32-bit words (NT elements are whole words: the host's check),
   * both on the views' alignment. */
  const int kal = ((k_off | k_sb | k_ss | k_sh) % EPC) == 0;
#if VWL % 4 == 0
  const int val = ((v_off | v_sb | v_ss | v_sh) % EPC) == 0;
#else
  const int val = ((v_off | v_sb | v_ss | v_sh) % (EPC / 4)) == 0;
#endif
  __global const ushort *q16 = (__global const ushort *)q;

  for (uint x = lane; x < QROWS * QW; x += 32) {
    const uint r = x / QW, c = 2 * (x % QW), p = p0 + r;
    const ulong at =
        q_off + b * q_sb + (ulong)(kvh * group + p % group) * q_sh + (ulong)(p / group) * q_ss + c;
    Qs[x] = r < nr ? (uint)q16[at] | (uint)q16[at + 1] << 16 : 0u;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Q's A fragments in the permuted columns: k-step ks = SPC i + j, k indices 2 tq, 2 tq + 1
   * at column EPC (4 i + tq) + 4 j (where lane tq's chunk i puts them), and 2 tq + 8, 2 tq + 9
   * two columns on. */
  uint qa[KS][4];
  UNROLL
  for (uint ks = 0; ks < KS; ks++) {
    const uint w = (EPC * (4 * (ks / SPC) + tq) + 4 * (ks % SPC)) / 2;
    qa[ks][0] = Qs[gq * QW + w], qa[ks][2] = Qs[gq * QW + w + 1];
    qa[ks][1] = R16 ? Qs[(gq + 8) * QW + w] : 0u, qa[ks][3] = R16 ? Qs[(gq + 8) * QW + w + 1] : 0u;
  }

  /* This lane's two rows (fragment rows gq and gq + 8): query row, ALiBi slope, state. */
  uint qi[2];
  int live[2];
  float m[2], l[2], slope[2];
  UNROLL
  for (uint h = 0; h < 2; h++) {
    const uint r = gq + 8 * h, p = p0 + r;
    live[h] = r < nr && (h == 0 || R16);
    qi[h] = p / group;
    const uint head = kvh * group + p % group;
    m[h] = live[h] ? SINK_M(head, split) : -INFINITY;
    l[h] = live[h] && tq == 0 ? SINK_L(split) : 0.0f;
#if ALIBI
    slope[h] = live[h] ? ALIBI_SLOPE(b * heads_q + head) : 0.0f;
#else
    slope[h] = 0.0f;
#endif
  }
  float acc[NT][AW];
  UNROLL
  for (uint nt = 0; nt < NT; nt++) {
    UNROLL
    for (uint e = 0; e < AW; e++) acc[nt][e] = 0.0f;
  }
#if KV8
  float vmax = 0.0f, vr = 0.0f; /* the largest V scale seen, and VREF / vmax */
#endif

  /* Keys in steps of 16, each step's K and V words loaded into a step_t before its math: STAGE
   * 1, a block's SUBS steps loaded at its start; STAGE 2 (BKV 32), the next step's loads issued
   * before this step's math (two buffers rotating), so that the warp's loads stay in flight while
   * it computes. Loads past kv_end are zero and read nothing. */
  step_t st[SUBS];
#define LOAD_STEP(kb0, x)                                                                          \
  load_step(k, v, b, (kb0), kv_end, kbase, vbase, k_sb, k_ss, v_sb, v_ss, kal, val, gq,         \
            tq PAGE_PASS SCALE_PASS, (x))
#if STAGE == 2
  if (kv_lo < kv_end) LOAD_STEP(kv_lo, &st[0]);
#endif
  for (uint kb = kv_lo; kb < kv_end; kb += BKV) {
#if STAGE == 1
    UNROLL
    for (uint sb = 0; sb < SUBS; sb++) LOAD_STEP(kb + 16 * sb, &st[sb]);
#endif
    UNROLL
    for (uint sb = 0; sb < SUBS; sb++) {
      const uint kb0 = kb + 16 * sb;
#if STAGE == 2
      LOAD_STEP(kb0 + 16, &st[sb ^ 1]); /* its buffer's step was computed last */
#endif
      float s[2][4];
      UNROLL
      for (uint t = 0; t < 2; t++) {
        s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
        UNROLL
        for (uint ks = 0; ks < KS; ks++) {
#if KV8 /* word ks holds k-step ks's four int8 columns, exact in fp16 and bf16 */
          const uint w = st[sb].kw[t][ks];
          MMA16(s[t], qa[ks], KV8_KPAIR(w, 0), KV8_KPAIR(w, 1));
#else
          MMA16(s[t], qa[ks], st[sb].kw[t][2 * ks], st[sb].kw[t][2 * ks + 1]);
#endif
        }
      }
      /* Scores: scaled (the softcap's cap folded into scale_log2), capped, ALiBi, masked. Element
       * e of tile t: row gq + 8 (e >> 1), key kb0 + 8 t + 2 tq + (e & 1), this lane's V key
       * u = 2 t + (e & 1). */
      float mx[2] = {-INFINITY, -INFINITY};
      UNROLL
      for (uint t = 0; t < 2; t++) {
        UNROLL
        for (uint e = 0; e < 4; e++) {
          const uint h = e >> 1, u = 2 * t + (e & 1), key = kb0 + 8 * t + 2 * tq + (e & 1);
#if KV8
          float x = s[t][e] * (st[sb].ksc[u] * scale_log2);
#else
          float x = s[t][e] * scale_log2;
#endif
#if SOFTCAP
          x = softcap * cap_tanh(x);
#endif
          ALIBI_ADD(x, slope[h], qi[h], key);
          int seen = live[h] && st[sb].vis[u];
#if CAUSAL
          seen = seen && (long)key <= (long)qi[h] + shift;
#endif
#if MASK
          seen = seen && MASK_SEES(qi[h], key);
#endif
          s[t][e] = seen ? x : -INFINITY;
          mx[h] = fmax(mx[h], s[t][e]);
        }
      }
      UNROLL
      for (uint h = 0; h < 2; h++) {
        const float mn = fmax(m[h], quad_max(mx[h] SCR_ARGS));
        if (mn > m[h]) { /* the max grew: rescale (m = -inf: nothing to rescale yet) */
          const float al = m[h] == -INFINITY ? 0.0f : exp2(m[h] - mn);
          l[h] *= al;
          if (2 * h < AW) {
            UNROLL
            for (uint nt = 0; nt < NT; nt++) acc[nt][2 * h] *= al, acc[nt][2 * h + 1] *= al;
          }
          m[h] = mn;
        }
      }
      UNROLL
      for (uint t = 0; t < 2; t++) {
        UNROLL
        for (uint e = 0; e < 4; e++) {
          const uint h = e >> 1;
          const float p = m[h] == -INFINITY ? 0.0f : exp2(s[t][e] - m[h]);
          s[t][e] = p;
          l[h] += p;
        }
      }
#if KV8
      /* V's scale on P's column (key u = 2 t + (e & 1)), relative to vmax: every quad holds the
       * step's 16 keys (keys 2 tq, 2 tq + 1, 8 + 2 tq, 9 + 2 tq of its lanes), so the quad's
       * maximum is the warp's and the branch uniform; acc is rescaled where vmax grows (from 0:
       * acc is 0, no key with a scale having been seen). */
      const float vs = quad_max(fmax(fmax(st[sb].vsc[0], st[sb].vsc[1]),
                                     fmax(st[sb].vsc[2], st[sb].vsc[3])) SCR_ARGS);
      if (vs > vmax) {
        const float f = vmax / vs;
        UNROLL
        for (uint nt = 0; nt < NT; nt++) {
          UNROLL
          for (uint e = 0; e < AW; e++) acc[nt][e] *= f;
        }
        vmax = vs, vr = VREF / vs;
      }
      float vq[4];
      UNROLL
      for (uint u = 0; u < 4; u++) vq[u] = st[sb].vsc[u] * vr;
      const uint pa[4] = {PACK2(s[0][0] * vq[0], s[0][1] * vq[1]),
                          PACK2(s[0][2] * vq[0], s[0][3] * vq[1]),
                          PACK2(s[1][0] * vq[2], s[1][1] * vq[3]),
                          PACK2(s[1][2] * vq[2], s[1][3] * vq[3])};
#else
      const uint pa[4] = {PACK2(s[0][0], s[0][1]), PACK2(s[0][2], s[0][3]), PACK2(s[1][0], s[1][1]),
                          PACK2(s[1][2], s[1][3])};
#endif
      UNROLL
      for (uint nt = 0; nt < NT; nt++) {
        const uint w = nt / 2, hh = nt % 2;
#if KV8 /* x exactly (the scale is on P): byte nt % 4 of word nt / 4, keys u and u + 1 */
        const uint w4 = nt / 4, e = nt % 4;
        MMA_O(acc[nt], pa, KV8_VPAIR(st[sb].vw[0][w4], st[sb].vw[1][w4], e),
              KV8_VPAIR(st[sb].vw[2][w4], st[sb].vw[3][w4], e));
#else
        MMA_O(acc[nt], pa, pair_keys(st[sb].vw[0][w], st[sb].vw[1][w], hh),
              pair_keys(st[sb].vw[2][w], st[sb].vw[3][w], hh));
#endif
      }
    }
  }

  /* The quad's partial sums, then O (element e of tile nt: row gq + 8 (e >> 1), column
   * (2 tq + (e & 1)) DV / 8 + nt) and the LSE. */
  UNROLL
  for (uint h = 0; h < 2; h++) {
    const float lt = quad_sum(l[h] SCR_ARGS);
    if (live[h] && 2 * h < AW) {
      const uint p = p0 + gq + 8 * h, head = kvh * group + p % group;
#if KV8
      const float inv = lt > 0.0f ? vmax / (VREF * lt) : 0.0f; /* P' carried VREF / vmax */
#else
      const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
#endif
      const ulong obase = o_off + split * o_split + b * o_sb + head * o_sh + (ulong)qi[h] * o_ss;
      UNROLL
      for (uint nt = 0; nt < NT; nt++) {
        STO(o, obase + (2 * tq) * NT + nt, acc[nt][2 * h] * inv);
        STO(o, obase + (2 * tq + 1) * NT + nt, acc[nt][2 * h + 1] * inv);
      }
      if (write_lse && tq == 0)
        lse[lse_off + split * lse_split + LSE_ROW(b, head) + qi[h]] =
            lt > 0.0f ? (m[h] + log2(lt)) * M_LN2_F : -INFINITY;
    }
  }
  SPLIT_MERGE_TAIL(last);
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
