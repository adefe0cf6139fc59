/* Attention over a KV cache (issue 18): the `decode` family. A few query rows per sequence
 * against many keys is memory-bound, so the query heads of one KV group are computed together
 * and each K/V element is read once per group, not once per query head.
 *
 * One work-group owns BQ packed rows of one (batch entry, KV head) and one key split: packed
 * row p is query row i = p / group of query head kvh * group + p % group, so a group's heads
 * for a row are neighbours and a tile's rows span few query rows (the causal and window ranges
 * of a tile stay narrow). K and V tiles of BKV keys are staged in local memory as floats
 * (dequantised there from int8; K transposed), the scores S [BQ][BKV] meet in local memory, each row's online
 * softmax state (m, l) lives there too, and each work-item accumulates a slice of O [BQ][DV] in
 * registers.
 *
 * Work-items: WG = BKV * TPR. For S, work-item lid computes key lid % BKV for rows lid / BKV,
 * + TPR, ...; for P V, it owns columns lid % CW, + CW, ... of rows lid / CW, + RGS, ...
 *
 * Parameters (-D): D, DV; BQ, BKV, TPR, PAD, VEC as the other forward families; CAUSAL and the
 * variants of cl/common.cl (MASK, SOFTCAP, ALIBI, SINKS, KVLENS); and the cache's:
 *   KVCACHE  1: k and v are a cache's (the lengths come as KVLENS's seqlens_kv);
 *   PAGED    1: keys are found through block_table (page_shift = log2 page_size), pages
 *               outside [0, num_pages) read as no keys;
 *   KV8      1: K and V are int8 with an fp32 scale per (token, KV head): scale index
 *               slot * sc_sb + token * heads_kv + kvh, slot the page (paged) or the entry.
 * runtime/kernels/decode_family.c mirrors the local-memory formula below; keep the two in step.
 * Scores are in the log2 domain, as cl/forward.cl's.
 */

#ifndef KVCACHE
#define KVCACHE 0
#endif
#ifndef PAGED
#define PAGED 0
#endif
#ifndef KV8
#define KV8 0
#endif

#define WG (BKV * TPR)
#define KT (BKV + PAD) /* K is staged transposed, [dim][key]: a work-item per key reads along */
#define VS (DV + PAD)
#define SS (BKV + PAD)
#define NSR ((BQ + TPR - 1) / TPR) /* S rows per work-item */
#define CW (WG < DV ? WG : DV)     /* P V: work-items along the columns */
#define RGS (WG / CW)              /* P V: row groups */
#define NCOL ((DV + CW - 1) / CW)
#define NROW ((BQ + RGS - 1) / RGS)

#if KV8
typedef char kv_t;
#if VEC == 4
#define KVLOAD(p) convert_float4(vload4(0, p))
#elif VEC == 2
#define KVLOAD(p) convert_float2(vload2(0, p))
#else
#define KVLOAD(p) ((float)*(p))
#endif
#define SCALE_ARGS , __global const float *k_scale, __global const float *v_scale, ulong sc_sb
#else
typedef stor_t kv_t;
#define KVLOAD(p) VLOAD(p)
#define SCALE_ARGS
#endif
#if PAGED
#define PAGE_ARGS , __global const int *block_table, uint max_pages, uint num_pages, uint page_shift
#else
#define PAGE_ARGS
#endif
#define CACHE_ARGS PAGE_ARGS SCALE_ARGS

/* Where key `key` of entry b lives: its slot (the page, or the entry) and its row in the slot;
 * 0 when its page is outside the pool. */
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
#if PAGED
#define PAGE_PASS , block_table, max_pages, num_pages, page_shift
#else
#define PAGE_PASS
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_decode(__global const stor_t *q, __global const kv_t *k, __global const kv_t *v,
              __global stor_t *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
              ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb,
              ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh,
              uint heads_q, uint group, uint seqlen_q, uint seqlen_kv, uint num_tiles,
              ulong group_base, float scale_log2, int write_lse, uint num_splits,
              uint kv_per_split, ulong o_split, ulong lse_off,
              ulong lse_split OUT_ARG VARIANT_ARGS CACHE_ARGS) {
  __local float Qs[BQ * D];
  __local float Ks[D * KT];
  __local float Vs[BKV * VS];
  __local float Ss[BQ * SS];
  __local float Ms[BQ], Ls[BQ], As[BQ];
#if PAGED
  __local int Kok[BKV];
#endif
  const uint lid = get_local_id(0);
  const ulong g = group_base + get_group_id(0);
  const uint tile = (uint)(g % num_tiles);
  /* Work-groups run over tiles, then key splits, then KV heads, then the batch. */
  const ulong gs = g / num_tiles;
  const uint split = (uint)(gs % num_splits);
  const ulong bg = gs / num_splits;
  const uint heads_kv = heads_q / group;
  const uint kvh = (uint)(bg % heads_kv);
  const ulong b = bg / heads_kv;
  SEQ_BEGIN(b);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  const uint rows = seqlen_q * group, p0 = tile * BQ, pend = min(p0 + BQ, rows);
  const uint i_first = p0 / group, i_last = (pend - 1) / group;
  const ulong kbase = k_off + kvh * k_sh, vbase = v_off + kvh * v_sh;

  for (uint x = lid; x < BQ * (D / VEC); x += WG) {
    const uint r = x / (D / VEC), c = (x % (D / VEC)) * VEC, p = p0 + r;
    const ulong at = q_off + b * q_sb + (ulong)(kvh * group + p % group) * q_sh +
                     (ulong)(p / group) * q_ss + c;
    const floatv y = p < rows ? VLOAD(q + at) : 0.0f;
    for (uint e = 0; e < VEC; e++) Qs[r * D + c + e] = VGET(y, e) * scale_log2;
  }
  for (uint r = lid; r < BQ; r += WG) {
    Ms[r] = SINK_M(kvh * group + (p0 + r) % group, split);
    Ls[r] = SINK_L(split);
  }

  /* The keys some row of the tile sees, within this split: [kv_lo, kv_end). */
  uint kv_end = seqlen_kv;
#if CAUSAL
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const long tile_end = (long)i_last + 1 + shift;
  kv_end = tile_end <= 0 ? 0u : (uint)min(tile_end, (long)seqlen_kv);
#endif
#if MASK
  uint kv_lo;
  mask_split_keys(i_first, i_last + 1, seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
#else
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

  /* This work-item's S rows: their query row, head and visible keys. */
  const uint kj = lid % BKV, t = lid / BKV;
  uint qi[NSR];
#if ALIBI
  float slope[NSR];
#endif
#if MASK
  uint first[NSR], end[NSR];
#endif
  for (uint a = 0; a < NSR; a++) {
    const uint p = p0 + t + a * TPR;
    qi[a] = p / group;
#if ALIBI
    slope[a] = ALIBI_SLOPE(b * heads_q + kvh * group + p % group);
#endif
#if MASK
    first[a] = mask_key(qi[a], mask_lo, seqlen_kv), end[a] = mask_key(qi[a], mask_hi, seqlen_kv);
#endif
  }
  float acc[NROW][NCOL];
  for (uint a = 0; a < NROW; a++)
    for (uint e = 0; e < NCOL; e++) acc[a][e] = 0.0f;

  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed; also publishes Qs, Ms, Ls */
    for (uint x = lid; x < nk * (D / VEC); x += WG) {
      const uint j = x / (D / VEC), c = (x % (D / VEC)) * VEC;
      ulong slot;
      uint tok;
      const int ok = kv_where(b, kv0 + j PAGE_PASS, &slot, &tok);
      floatv y = ok ? KVLOAD(k + kbase + slot * k_sb + (ulong)tok * k_ss + c) : 0.0f;
#if KV8
      y *= ok ? k_scale[slot * sc_sb + (ulong)tok * heads_kv + kvh] : 0.0f;
#endif
      for (uint e = 0; e < VEC; e++) Ks[(c + e) * KT + j] = VGET(y, e);
    }
    for (uint x = lid; x < nk * (DV / VEC); x += WG) {
      const uint j = x / (DV / VEC), c = (x % (DV / VEC)) * VEC;
      ulong slot;
      uint tok;
      const int ok = kv_where(b, kv0 + j PAGE_PASS, &slot, &tok);
      floatv y = ok ? KVLOAD(v + vbase + slot * v_sb + (ulong)tok * v_ss + c) : 0.0f;
#if KV8
      y *= ok ? v_scale[slot * sc_sb + (ulong)tok * heads_kv + kvh] : 0.0f;
#endif
      for (uint e = 0; e < VEC; e++) Vs[j * VS + c + e] = VGET(y, e);
    }
#if PAGED
    for (uint j = lid; j < nk; j += WG) {
      ulong slot;
      uint tok;
      Kok[j] = kv_where(b, kv0 + j PAGE_PASS, &slot, &tok);
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);

    if (kj < nk) {
      const uint key = kv0 + kj;
      for (uint a = 0; a < NSR; a++) {
        const uint r = t + a * TPR;
        if (p0 + r < pend) { /* rows past the last compute nothing */
          float s = 0.0f;
          for (uint c = 0; c < D; c++) s = fma(Qs[r * D + c], Ks[c * KT + kj], s);
#if SOFTCAP
          s = softcap * tanh(s);
#endif
          ALIBI_ADD(s, slope[a], qi[a], key);
#if CAUSAL
          if ((long)key > (long)qi[a] + shift) s = -INFINITY;
#endif
#if MASK
          if (key < first[a] || key >= end[a]) s = -INFINITY;
#endif
#if PAGED
          if (!Kok[kj]) s = -INFINITY;
#endif
          Ss[r * SS + kj] = s;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* Each row's online softmax: S becomes P in place, As the factor for the old sums. */
    for (uint r = lid; p0 + r < pend; r += WG) {
      const float m = Ms[r];
      float mb = -INFINITY;
      for (uint j = 0; j < nk; j++) mb = fmax(mb, Ss[r * SS + j]);
      const float mn = fmax(m, mb);
      float alpha = 1.0f;
      if (mn == -INFINITY) { /* nothing seen yet: never exp2(-inf - -inf) */
        for (uint j = 0; j < nk; j++) Ss[r * SS + j] = 0.0f;
      } else {
        alpha = exp2(m - mn);
        float sum = 0.0f;
        for (uint j = 0; j < nk; j++) {
          const float pj = exp2(Ss[r * SS + j] - mn);
          Ss[r * SS + j] = pj;
          sum += pj;
        }
        Ls[r] = Ls[r] * alpha + sum;
        Ms[r] = mn;
      }
      As[r] = alpha;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    if (lid < CW * RGS)
      for (uint a = 0; a < NROW; a++) {
        const uint r = lid / CW + a * RGS;
        if (p0 + r < pend) {
          const float al = As[r];
          for (uint e = 0; e < NCOL; e++) acc[a][e] *= al;
          for (uint j = 0; j < nk; j++) {
            const float pj = Ss[r * SS + j];
            for (uint e = 0; e < NCOL; e++) {
              const uint c = lid % CW + e * CW;
              if (c < DV) acc[a][e] = fma(pj, Vs[j * VS + c], acc[a][e]);
            }
          }
        }
      }
  }
  barrier(CLK_LOCAL_MEM_FENCE); /* Ms and Ls final (and published when no tile ran) */

  if (lid < CW * RGS)
    for (uint a = 0; a < NROW; a++) {
      const uint r = lid / CW + a * RGS, p = p0 + r;
      if (r < BQ && p < rows) {
        const uint i = p / group, h = kvh * group + p % group;
        const float l = Ls[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
        const ulong obase = o_off + split * o_split + b * o_sb + h * o_sh + (ulong)i * o_ss;
        for (uint e = 0; e < NCOL; e++) {
          const uint c = lid % CW + e * CW;
          if (c < DV) STO(o, obase + c, acc[a][e] * inv);
        }
        if (write_lse && lid % CW == 0)
          lse[lse_off + split * lse_split + LSE_ROW(b, h) + i] =
              l > 0.0f ? (Ms[r] + log2(l)) * M_LN2_F : -INFINITY;
      }
    }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
