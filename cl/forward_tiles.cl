/* Fused attention forward, register-tiled: the second kernel variant ("forward_tiles").
 *
 * Same loop order and online softmax as forward.cl, but each work-item owns a micro-tile of
 * the scores: RM query rows x RN keys (RN = BKV / TX), computed from local-memory tiles of Q
 * and K with every loaded value used RM or RN times, instead of one row by one key. The
 * work-group is a TY x TX grid (TY = BQ / RM): the TX work-items of a row group share its
 * rows' max through local memory (Red), write their probabilities to local memory (Ps), and
 * each then owns output columns tx, tx + TX, ... of its RM rows for P V. Each work-item keeps
 * its own partial row sum; the partial sums meet once, at the end.
 *
 * Parameters (-D): D, DV head dims; BQ, BKV tile sizes; RM rows per work-item; TX work-items
 * along the keys (BKV % TX == 0, BQ % RM == 0); PAD floats appended to local rows; CAUSAL; the
 * variants MASK, SOFTCAP, ALIBI and SINKS (cl/common.cl).
 * runtime/kernels/forward_families.c mirrors the local-memory formula below; keep the two in
 * step.
 */


#define TY (BQ / RM)
#define WG (TY * TX)
#define RN (BKV / TX)               /* keys per work-item and tile */
#define DVP ((DV + TX - 1) / TX)    /* output columns per work-item */
#define BQP (BQ + PAD)              /* Qs, Ps: [column][row] */
#define BKVP (BKV + PAD)            /* Ks: [column][key] */
#define VS (DV + PAD)               /* Vs: [key][column] */

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
  __local float Ks[D * BKVP];
  __local float Vs[BKV * VS];
  __local float Ps[BKV * BQP];
  __local float Red[BQ * TX];
  const uint lid = get_local_id(0);
  const uint ty = lid / TX, tx = lid % TX;
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
  const uint q0 = qb * BQ, r0 = ty * RM; /* this work-item's rows: r0 .. r0 + RM - 1 */

  const ulong qbase = q_off + QB(q) + h * q_sh;
  const ulong kbase = k_off + KB(k) + (h / group) * k_sh;
  const ulong vbase = v_off + KB(v) + (h / group) * v_sh;

  for (uint i = lid; i < BQ * (D / VEC); i += WG) {
    const uint rr = i / (D / VEC), c = (i % (D / VEC)) * VEC;
    const floatv x = q0 + rr < seqlen_q ? VLOAD(q + qbase + (ulong)(q0 + rr) * q_ss + c) : 0.0f;
    for (uint e = 0; e < VEC; e++) Qs[(c + e) * BQP + rr] = VGET(x, e) * scale_log2;
  }

  uint kv_end = seqlen_kv;
  const long shift = (long)seqlen_kv - (long)seqlen_q;
#if CAUSAL
  const long block_end = (long)min(q0 + BQ, seqlen_q) + shift;
  kv_end = block_end <= 0 ? 0u : (uint)min(block_end, (long)seqlen_kv);
#endif
#if MASK
  /* The split's keys that some row of this block sees (forward.cl); each row's own. */
  uint kv_lo, row_first[RM], row_end[RM];
  mask_split_keys(q0, min(q0 + BQ, seqlen_q), seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
  for (uint i = 0; i < RM; i++)
    row_first[i] = mask_key(q0 + r0 + i, mask_lo, seqlen_kv),
    row_end[i] = mask_key(q0 + r0 + i, mask_hi, seqlen_kv);
#else
  /* This work-group's split of the keys: [kv_lo, kv_end). */
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif
  float m[RM], lpart[RM], acc[RM][DVP], s[RM][RN];
  for (uint i = 0; i < RM; i++) {
    m[i] = SINK_M(h, split), lpart[i] = tx == 0 ? SINK_L(split) : 0.0f;
    for (uint u = 0; u < DVP; u++) acc[i][u] = 0.0f;
  }

  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's Ks, Vs, Ps, Red are consumed */
    for (uint i = lid; i < nk * (D / VEC); i += WG) {
      const uint j = i / (D / VEC), c = (i % (D / VEC)) * VEC;
      const floatv x = VLOAD(k + kbase + (ulong)(kv0 + j) * k_ss + c);
      for (uint e = 0; e < VEC; e++) Ks[(c + e) * BKVP + j] = VGET(x, e);
    }
    for (uint i = lid; i < nk * (DV / VEC); i += WG) {
      const uint j = i / (DV / VEC), c = (i % (DV / VEC)) * VEC;
      const floatv x = VLOAD(v + vbase + (ulong)(kv0 + j) * v_ss + c);
      for (uint e = 0; e < VEC; e++) Vs[j * VS + c + e] = VGET(x, e);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    for (uint i = 0; i < RM; i++)
      for (uint n = 0; n < RN; n++) s[i][n] = 0.0f;
    for (uint c = 0; c < D; c++) {
      float qv[RM], kv[RN];
      for (uint i = 0; i < RM; i++) qv[i] = Qs[c * BQP + r0 + i];
      for (uint n = 0; n < RN; n++) kv[n] = Ks[c * BKVP + tx + TX * n];
      for (uint i = 0; i < RM; i++)
        for (uint n = 0; n < RN; n++) s[i][n] = fma(qv[i], kv[n], s[i][n]);
    }
    /* Mask keys past the tile (their Ks are stale) and, when causal, after the diagonal. */
    for (uint i = 0; i < RM; i++) {
      float pm = -INFINITY;
      for (uint n = 0; n < RN; n++) {
        const uint j = tx + TX * n;
        bool ok = j < nk;
#if CAUSAL
        ok = ok && (long)(kv0 + j) <= (long)(q0 + r0 + i) + shift;
#endif
#if MASK
        ok = ok && kv0 + j >= row_first[i] && kv0 + j < row_end[i];
#endif
#if SOFTCAP
        s[i][n] = softcap * cap_tanh(s[i][n]);
#endif
        ALIBI_ADD(s[i][n], slope, q0 + r0 + i, kv0 + j);
        s[i][n] = ok ? s[i][n] : -INFINITY;
        pm = fmax(pm, s[i][n]);
      }
      Red[(r0 + i) * TX + tx] = pm;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint i = 0; i < RM; i++) {
      float mb = -INFINITY;
      for (uint t = 0; t < TX; t++) mb = fmax(mb, Red[(r0 + i) * TX + t]);
      const float mn = fmax(m[i], mb);
      /* While a row has seen no key (mn = -inf) nothing changes: never exp2(-inf - -inf). */
      const float alpha = mn == -INFINITY ? 1.0f : exp2(m[i] - mn);
      float sum = 0.0f;
      for (uint n = 0; n < RN; n++) {
        const float p = mn == -INFINITY ? 0.0f : exp2(s[i][n] - mn);
        sum += p;
        Ps[(tx + TX * n) * BQP + r0 + i] = p;
      }
      lpart[i] = lpart[i] * alpha + sum;
      for (uint u = 0; u < DVP; u++) acc[i][u] *= alpha;
      m[i] = mn;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint j = 0; j < nk; j++) {
      float pv[RM];
      for (uint i = 0; i < RM; i++) pv[i] = Ps[j * BQP + r0 + i];
      for (uint u = 0; u < DVP; u++) {
        const uint c = tx + TX * u;
        const float vv = c < DV ? Vs[j * VS + c] : 0.0f;
        for (uint i = 0; i < RM; i++) acc[i][u] = fma(pv[i], vv, acc[i][u]);
      }
    }
  }

  /* The row sums: the TX partial sums of each row meet in Red, summed in the same order by
   * every work-item of the row. */
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint i = 0; i < RM; i++) Red[(r0 + i) * TX + tx] = lpart[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint i = 0; i < RM; i++) {
    const uint row = q0 + r0 + i;
    float l = 0.0f;
    for (uint t = 0; t < TX; t++) l += Red[(r0 + i) * TX + t];
    if (row < seqlen_q) {
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const ulong obase = o_off + split * o_split + QB(o) + h * o_sh + (ulong)row * o_ss;
      for (uint u = 0; u < DVP; u++) {
        const uint c = tx + TX * u;
        if (c < DV) STO(o, obase + c, acc[i][u] * inv);
      }
      if (write_lse && tx == 0)
        lse[lse_off + split * lse_split + LSE_ROW(b, h) + row] = l > 0.0f ? (m[i] + log2(l)) * M_LN2_F : -INFINITY;
    }
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
