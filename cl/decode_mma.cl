/* Attention over a KV cache on tensor cores (issue 18): the `decode_mma` family, fp16 and bf16
 * caches through mma.sync m16n8k16 (cl/mma_half.cl; emulated elsewhere, for tests). On the
 * H200 the CUDA-core kernel (cl/decode.cl) spends about 75 warp instructions per key of a GQA
 * group, bound by its issue and its barriers rather than by memory (docs/BENCHMARKS.md); here a
 * key costs about a dozen, the fp16 words go to the tensor cores as loaded (no conversions), and
 * a work-group is one warp with no barrier in its loop, so that many warps per SM keep their
 * loads in flight independently. Key splits (runtime/ops/split.c) give the parallelism.
 *
 * One warp owns BQ (8 or 16) packed rows of one (batch entry, KV head) and one key split: packed
 * row p is query row p / group of query head kvh * group + p % group, as in cl/decode.cl. It
 * walks its keys 16 at a time:
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
 * Parameters (-D): D (a multiple of 32), DV (of 16), both at most 128; BQ; CAUSAL and the
 * variants of cl/common.cl (MASK, SOFTCAP, ALIBI, SINKS, KVLENS); KVCACHE and PAGED as in
 * cl/decode.cl (no KV8: int8 caches are cl/decode.cl's). The arguments are cl/decode.cl's.
 * Scores are in the log2 domain; Q is used as stored and S scaled after the mma. */

#ifndef KVCACHE
#define KVCACHE 0
#endif
#ifndef PAGED
#define PAGED 0
#endif
#if defined(KV8) && KV8
#error "decode_mma: fp16 and bf16 caches only (int8 is cl/decode.cl's)"
#endif
#if D % 32 || DV % 16 || D > 128 || DV > 128
#error "decode_mma: D a multiple of 32 and DV of 16, both at most 128"
#endif

#define NKC (D / 32)        /* 16-byte chunks of a key row a lane loads */
#define KS (D / 16)         /* k-steps of Q K^T */
#define NT (DV / 8)         /* n8 tiles of O; a lane's columns of a V row */
#define NVW (DV / 16)       /* 32-bit words of a V row a lane loads */
#define R16 (BQ > 8)        /* rows 8-15 of the fragments hold rows of the tile */
#define QW (D / 2)          /* 32-bit words of a Q row in local memory */
#define QROWS (R16 ? 16 : 8) /* Q's rows in local memory */

/* O's accumulators per n8 tile: rows gq and gq + 8 (4), or, with BQ <= 8 on the tensor cores,
 * rows gq only (2), the mma's rows 8-15 written to registers that die at once (MMA16_TOP):
 * 32 registers fewer at DV = 128. */
#if R16 || defined(MMA_EMULATE)
#define AW 4
#define MMA_O(c, a, b0, b1) MMA16(c, a, b0, b1)
#else
#define AW 2
#define MMA_O(c, a, b0, b1)                                                                        \
  do {                                                                                             \
    float j0_, j1_;                                                                                \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA16_T "." MMA16_T ".f32 {%0,%1,%2,%3}, "        \
        "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                                               \
        : "=f"(c[0]), "=f"(c[1]), "=f"(j0_), "=f"(j1_)                                             \
        : "r"(a[0]), "r"(0u), "r"(a[2]), "r"(0u), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),          \
          "f"(0.0f), "f"(0.0f));                                                                   \
  } while (0)
#endif

#if PAGED
#define PAGE_ARGS , __global const int *block_table, uint max_pages, uint num_pages, uint page_shift
#define PAGE_PASS , block_table, max_pages, num_pages, page_shift
#else
#define PAGE_ARGS
#define PAGE_PASS
#endif

/* Where key `key` of entry b lives, as cl/decode.cl's: its slot and its row in the slot; 0 when
 * its page is outside the pool. */
static inline int kv_where(ulong b, uint key PAGE_ARGS, ulong *slot, uint *tok) {
#if PAGED
  const int pg = block_table[b * max_pages + (key >> page_shift)];
  *tok = key & ((1u << page_shift) - 1u);
  *slot = pg >= 0 && (uint)pg < num_pages ? (ulong)pg : 0;
  return pg >= 0 && (uint)pg < num_pages;
#else
  *slot = b, *tok = key;
  return 1;
#endif
}

/* Word i of a 16-bit row at element offset `at` of x (two elements, the first in the low half):
 * one 32-bit load where al (the row aligned to two elements), else two 16-bit ones. The loads of
 * one row's words are adjacent, so the compiler may merge them. */
static inline uint row_word(__global const ushort *x, ulong at, int al, uint i) {
  return al ? *(__global const uint *)(x + at + 2 * i)
            : (uint)x[at + 2 * i] | (uint)x[at + 2 * i + 1] << 16;
}

/* Four words of a 16-bit row at element offset `at`, 8-element aligned where al: one 16-byte
 * load. */
static inline uint4 row_chunk(__global const ushort *x, ulong at, int al) {
  if (al) return *(__global const uint4 *)(x + at);
  return (uint4)(row_word(x, at, 0, 0), row_word(x, at, 0, 1), row_word(x, at, 0, 2),
                 row_word(x, at, 0, 3));
}

/* The B register of two keys' halves in one column: half h (0 low, 1 high) of a's word, key k
 * (low), and of b's, key k + 1 (high). */
static inline uint pair_keys(uint a, uint b, uint h) {
  return h ? (a >> 16) | (b & 0xffff0000u) : (a & 0xffffu) | (b << 16);
}

__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
clattn_decode_mma(__global const stor_t *q, __global const stor_t *k, __global const stor_t *v,
                  __global stor_t *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
                  ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off,
                  ulong v_sb, ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss,
                  ulong o_sh, uint heads_q, uint group, uint seqlen_q, uint seqlen_kv,
                  uint num_tiles, ulong group_base, float scale_log2, int write_lse,
                  uint num_splits, uint kv_per_split, ulong o_split, ulong lse_off,
                  ulong lse_split OUT_ARG VARIANT_ARGS PAGE_ARGS) {
  /* The tile's Q, two 16-bit values a word, in the fragment's rows: 8 (rows past BQ zero, since
   * lanes gq < 8 read them) or 16. */
  __local uint Qs[QROWS * QW];
  const uint lane = get_local_id(0), gq = lane / 4, tq = lane % 4;
#ifdef MMA_EMULATE
  __local float scr[SCRATCH];
#endif
  const ulong g = group_base + get_group_id(0);
  const uint tile = (uint)(g % num_tiles);
  const ulong gs = g / num_tiles;
  const uint split = (uint)(gs % num_splits);
  const ulong bg = gs / num_splits;
  const uint heads_kv = heads_q / group;
  const uint kvh = (uint)(bg % heads_kv);
  const ulong b = bg / heads_kv;
  SEQ_BEGIN(b);
#if SEQLENS
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  const uint rows = seqlen_q * group, p0 = tile * BQ, pend = min(p0 + BQ, rows);
  const uint nr = pend > p0 ? pend - p0 : 0u;
  const uint i_first = p0 / group, i_last = nr ? (pend - 1) / group : i_first;
  const ulong kbase = k_off + kvh * k_sh, vbase = v_off + kvh * v_sh;
  /* 16-byte loads need every row to start on 8 elements. */
  const int kal = ((k_off | k_sb | k_ss | k_sh) % 8) == 0;
  /* V: a lane's columns start at gq DV / 8, 8-element aligned where DV % 64 == 0, else
   * 2-element (words). */
#if NVW % 4 == 0
  const int val = ((v_off | v_sb | v_ss | v_sh) % 8) == 0;
#else
  const int val = ((v_off | v_sb | v_ss | v_sh) % 2) == 0;
#endif
  __global const ushort *q16 = (__global const ushort *)q, *k16 = (__global const ushort *)k,
                        *v16 = (__global const ushort *)v;

  for (uint x = lane; x < QROWS * QW; x += 32) {
    const uint r = x / QW, c = 2 * (x % QW), p = p0 + r;
    const ulong at =
        q_off + b * q_sb + (ulong)(kvh * group + p % group) * q_sh + (ulong)(p / group) * q_ss + c;
    Qs[x] = r < nr ? (uint)q16[at] | (uint)q16[at + 1] << 16 : 0u;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Q's A fragments in the permuted columns: k-step 2 i + h, k indices 2 tq, 2 tq + 1 at
   * column 8 (4 i + tq) + 4 h, and 2 tq + 8, 2 tq + 9 two columns on. */
  uint qa[KS][4];
  UNROLL
  for (uint ks = 0; ks < KS; ks++) {
    const uint w = (8 * (4 * (ks / 2) + tq) + 4 * (ks % 2)) / 2;
    qa[ks][0] = Qs[gq * QW + w], qa[ks][2] = Qs[gq * QW + w + 1];
    qa[ks][1] = R16 ? Qs[(gq + 8) * QW + w] : 0u, qa[ks][3] = R16 ? Qs[(gq + 8) * QW + w + 1] : 0u;
  }

  /* The keys some row of the tile sees, within this split: [kv_lo, kv_end) (cl/decode.cl's). */
  uint kv_end = nr ? seqlen_kv : 0u;
#if CAUSAL
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const long tile_end = (long)i_last + 1 + shift;
  kv_end = tile_end <= 0 ? 0u : (uint)min(tile_end, (long)kv_end);
#endif
#if MASK
  uint kv_lo;
  mask_split_keys(i_first, i_last + 1, seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
  if (!nr) kv_end = kv_lo;
#else
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

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

  for (uint kb0 = kv_lo; kb0 < kv_end; kb0 += 16) {
    /* K: keys kb0 + gq and kb0 + 8 + gq, chunks tq, tq + 4, ... V: keys kb0 + 2 tq (+ 1) and
     * kb0 + 8 + 2 tq (+ 1), this lane's columns. Every load issued before any is used. */
    uint kw[2][4 * NKC], vw[4][NVW];
    int vis[4]; /* whether the S elements' keys exist */
    UNROLL
    for (uint t = 0; t < 2; t++) {
      const uint key = kb0 + 8 * t + gq;
      ulong slot;
      uint tok;
      if (key < kv_end && kv_where(b, key PAGE_PASS, &slot, &tok)) {
        const ulong at = kbase + slot * k_sb + (ulong)tok * k_ss;
        UNROLL
        for (uint i = 0; i < NKC; i++) {
          const uint4 u4 = row_chunk(k16, at + 8 * (4 * i + tq), kal);
          kw[t][4 * i] = u4.s0, kw[t][4 * i + 1] = u4.s1, kw[t][4 * i + 2] = u4.s2,
                    kw[t][4 * i + 3] = u4.s3;
        }
      } else {
        UNROLL
        for (uint i = 0; i < 4 * NKC; i++) kw[t][i] = 0u;
      }
    }
    UNROLL
    for (uint u = 0; u < 4; u++) {
      const uint key = kb0 + 8 * (u / 2) + 2 * tq + u % 2;
      ulong slot;
      uint tok;
      vis[u] = key < kv_end && kv_where(b, key PAGE_PASS, &slot, &tok);
      if (vis[u]) {
        const ulong at = vbase + slot * v_sb + (ulong)tok * v_ss + gq * NT;
#if NVW % 4 == 0
        UNROLL
        for (uint i = 0; i < NVW; i += 4) {
          const uint4 u4 = row_chunk(v16, at + 2 * i, val);
          vw[u][i] = u4.s0, vw[u][i + 1] = u4.s1, vw[u][i + 2] = u4.s2, vw[u][i + 3] = u4.s3;
        }
#else
        UNROLL
        for (uint i = 0; i < NVW; i++) vw[u][i] = row_word(v16, at, val, i);
#endif
      } else {
        UNROLL
        for (uint i = 0; i < NVW; i++) vw[u][i] = 0u;
      }
    }

    float s[2][4];
    UNROLL
    for (uint t = 0; t < 2; t++) {
      s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
      UNROLL
      for (uint ks = 0; ks < KS; ks++)
        MMA16(s[t], qa[ks], kw[t][4 * (ks / 2) + 2 * (ks % 2)],
              kw[t][4 * (ks / 2) + 2 * (ks % 2) + 1]);
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
        float x = s[t][e] * scale_log2;
#if SOFTCAP
        x = softcap * cap_tanh(x);
#endif
        ALIBI_ADD(x, slope[h], qi[h], key);
        int seen = live[h] && vis[u];
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
    const uint pa[4] = {PACK2(s[0][0], s[0][1]), PACK2(s[0][2], s[0][3]), PACK2(s[1][0], s[1][1]),
                        PACK2(s[1][2], s[1][3])};
    UNROLL
    for (uint nt = 0; nt < NT; nt++) {
      const uint w = nt / 2, hh = nt % 2;
      MMA_O(acc[nt], pa, pair_keys(vw[0][w], vw[1][w], hh), pair_keys(vw[2][w], vw[3][w], hh));
    }
  }

  /* The quad's partial sums, then O (element e of tile nt: row gq + 8 (e >> 1), column
   * (2 tq + (e & 1)) DV / 8 + nt) and the LSE. */
  UNROLL
  for (uint h = 0; h < 2; h++) {
    const float lt = quad_sum(l[h] SCR_ARGS);
    if (live[h] && 2 * h < AW) {
      const uint p = p0 + gq + 8 * h, head = kvh * group + p % group;
      const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
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
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
