/* Fused attention forward, FlashAttention-2 loop order, fp32 storage and accumulation.
 *
 * One work-group owns BQ query rows of one (batch, head). It keeps the (pre-scaled) query tile
 * in local memory, streams K/V tiles of BKV keys, and keeps for each row a running max m and
 * sum l (online softmax), so the scores S and probabilities P never reach global memory.
 * TPR work-items share a query row: each computes the scores of keys t, t+TPR, ... and owns
 * output columns t, t+TPR, ...; the row's scores meet in local memory (Ss), where every
 * work-item of the row reads them all, in the same order, so m and l agree bit for bit across
 * the row without a reduction.
 *
 * Parameters (-D): D, DV head dims; BQ, BKV tile sizes; TPR work-items per row; STAGE_KV
 * (1: K/V tiles copied to local memory, 0: read straight from global memory, which suits CPUs
 * whose local memory is ordinary memory); PAD floats appended to each local row; CAUSAL; the
 * variants MASK and SOFTCAP (cl/common.cl).
 * runtime/kernels/forward_families.c mirrors the local-memory formula below; keep the two in
 * step.
 *
 * Scores are kept in the log2 domain: the query tile is multiplied by scale·log2(e) on load so
 * the softmax uses exp2; LSE converts back: lse = (m + log2 l)·ln 2.
 */


#define WG (BQ * TPR)
#define DVP ((DV + TPR - 1) / TPR) /* output columns per work-item */
#define KPT ((BKV + TPR - 1) / TPR) /* keys per work-item and tile */
#define QS (D + PAD)   /* row stride of the K tile */
#define VS (DV + PAD)  /* row stride of the V tile */
#define BQP (BQ + PAD) /* Qs and Ss are stored transposed, [column][row]: the work-items of a
                          tile read consecutive words */

#if STAGE_KV
#define KAT(j, c) Ks[(j)*QS + (c)]
#define VAT(j, c) Vs[(j)*VS + (c)]
#else
#define KAT(j, c) LDS(k + kbase + (ulong)(kv0 + (j)) * k_ss + (c))
#define VAT(j, c) LDS(v + vbase + (ulong)(kv0 + (j)) * v_ss + (c))
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_forward(__global const stor_t *q, __global const stor_t *k, __global const stor_t *v,
               __global stor_t *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
               ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off,
               ulong v_sb, ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss,
               ulong o_sh, uint heads_q, uint group, uint seqlen_q, uint seqlen_kv,
               uint num_qblocks, ulong group_base, float scale_log2, int write_lse,
               uint num_splits, uint kv_per_split, ulong o_split, ulong lse_off,
               ulong lse_split OUT_ARG VARIANT_ARGS) {
  __local float Qs[D * BQP];
  __local float Ss[BKV * BQP];
#if STAGE_KV
  __local float Ks[BKV * QS];
  __local float Vs[BKV * VS];
#endif
  const uint lid = get_local_id(0);
  const uint r = lid / TPR, t = lid % TPR;
  const ulong g = group_base + get_group_id(0);
  const uint qb = (uint)(g % num_qblocks);
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
  const uint q0 = qb * BQ;
  const uint row = q0 + r;

  const ulong qbase = q_off + QB(q) + h * q_sh;
  const ulong kbase = k_off + KB(k) + (h / group) * k_sh;
  const ulong vbase = v_off + KB(v) + (h / group) * v_sh;

#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif

  for (uint i = lid; i < BQ * (D / VEC); i += WG) {
    const uint rr = i / (D / VEC), c = (i % (D / VEC)) * VEC;
    const floatv x = q0 + rr < seqlen_q ? VLOAD(q + qbase + (ulong)(q0 + rr) * q_ss + c) : 0.0f;
    for (uint e = 0; e < VEC; e++) Qs[(c + e) * BQP + rr] = VGET(x, e) * scale_log2;
  }

  /* Keys [0, kv_end) are visible to some row of this block; later blocks are skipped whole. */
  uint kv_end = seqlen_kv;
#if CAUSAL
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const long block_end = (long)min(q0 + BQ, seqlen_q) + shift;
  kv_end = block_end <= 0 ? 0u : (uint)min(block_end, (long)seqlen_kv);
  const long row_last = (long)row + shift; /* key j visible iff j <= row_last */
#endif
#if MASK
  /* This work-group's split of the keys that some row of the block sees: those before and
   * after are skipped whole, so a window of w keys costs O(w) per row. */
  uint kv_lo;
  mask_split_keys(q0, min(q0 + BQ, seqlen_q), seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
  const uint row_first = mask_key(row, mask_lo, seqlen_kv), row_end = mask_key(row, mask_hi, seqlen_kv);
#else
  /* This work-group's split of the keys: [kv_lo, kv_end). */
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

  float m = SINK_M(h, split), l = SINK_L(split);
  float acc[DVP];
  for (uint u = 0; u < DVP; u++) acc[u] = 0.0f;

  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    /* The previous tile's Ss (and Ks/Vs) are fully consumed; also publishes Qs. */
    barrier(CLK_LOCAL_MEM_FENCE);
#if STAGE_KV
    for (uint i = lid; i < nk * (D / VEC); i += WG) {
      const uint j = i / (D / VEC), c = (i % (D / VEC)) * VEC;
      const floatv x = VLOAD(k + kbase + (ulong)(kv0 + j) * k_ss + c);
      for (uint e = 0; e < VEC; e++) Ks[j * QS + c + e] = VGET(x, e);
    }
    for (uint i = lid; i < nk * (DV / VEC); i += WG) {
      const uint j = i / (DV / VEC), c = (i % (DV / VEC)) * VEC;
      const floatv x = VLOAD(v + vbase + (ulong)(kv0 + j) * v_ss + c);
      for (uint e = 0; e < VEC; e++) Vs[j * VS + c + e] = VGET(x, e);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (uint u = 0; u < KPT; u++) {
      const uint j = t + u * TPR;
      if (j < nk) {
        float s = 0.0f;
        for (uint c = 0; c < D; c++) s = fma(Qs[c * BQP + r], KAT(j, c), s);
#if SOFTCAP
        s = softcap * cap_tanh(s);
#endif
        ALIBI_ADD(s, slope, row, kv0 + j);
#if CAUSAL
        if ((long)(kv0 + j) > row_last) s = -INFINITY;
#endif
#if MASK
        if (kv0 + j < row_first || kv0 + j >= row_end) s = -INFINITY;
#endif
        Ss[j * BQP + r] = s;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    float mb = -INFINITY;
    for (uint j = 0; j < nk; j++) mb = fmax(mb, Ss[j * BQP + r]);
    const float mn = fmax(m, mb);
    /* While no key has been seen (mn = -inf) nothing changes: never exp2(-inf - -inf). */
    if (mn != -INFINITY) {
      const float alpha = exp2(m - mn);
      l *= alpha;
      for (uint u = 0; u < DVP; u++) acc[u] *= alpha;
      for (uint j = 0; j < nk; j++) {
        const float p = exp2(Ss[j * BQP + r] - mn);
        l += p;
        for (uint u = 0; u < DVP; u++) {
          const uint c = t + u * TPR;
          if (c < DV) acc[u] = fma(p, VAT(j, c), acc[u]);
        }
      }
      m = mn;
    }
  }

  if (row < seqlen_q) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const ulong obase = o_off + split * o_split + QB(o) + h * o_sh + (ulong)row * o_ss;
    for (uint u = 0; u < DVP; u++) {
      const uint c = t + u * TPR;
      if (c < DV) STO(o, obase + c, acc[u] * inv);
    }
    if (write_lse && t == 0)
      lse[lse_off + split * lse_split + LSE_ROW(b, h) + row] = l > 0.0f ? (m + log2(l)) * M_LN2_F : -INFINITY;
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
