/* Attention backward (FlashAttention-2's order, recomputing S and P from Q, K and the forward's
 * LSE instead of storing them), after D = rowsum(dO o O) (bwd_rowdot of cl/standard.cl, shared
 * with the standard path), in two kernels without atomics:
 *   bwd_dkdv:   one work-group per (key block, batch, K/V head); a work-item owns one key and
 *               accumulates its dK and dV over the query heads of its GQA group and their query
 *               blocks (staged in local memory), in a fixed order;
 *   bwd_dq:     one work-group per (query block, batch, head); a work-item owns one query row
 *               and accumulates its dQ over the key blocks (staged in local memory).
 * Every output element is written by one work-item after a loop of fixed order, so results are
 * bitwise identical run to run. With P = exp(S - LSE): dV += P dO, dP = dO V^T,
 * dS = P (dP - D), dK += scale dS Q, dQ += scale dS K. A row whose LSE is -inf saw no key and
 * contributes nothing (exp(S - LSE) is never evaluated for it).
 * Storage (cl/common.cl's DTYPE): Q, K, V, dO and the gradients in fp32, fp16 or bf16, widened
 * to fp32 on load; every sum is fp32 and each gradient is rounded once, when it is stored.
 * Defines: D, DV head dims; BQ, BKV block sizes (the work-group sizes of bwd_dq and bwd_dkdv);
 * CAUSAL (bottom-right aligned); the variants MASK, SOFTCAP, ALIBI and SINKS (cl/common.cl; the
 * cap and the slopes are in natural units here; a sink needs nothing: P comes from the LSE): with a cap, t = tanh(scale q.k / cap), P = exp(cap t - LSE) and dS gains the
 * factor 1 - t^2. */

/* P of a raw score s = q.k of row i and key j for a row of log-sum-exp l (ALiBi's bias by the
 * kernel's `slope`); dt, the factor dS gains (softcap). */
#if SOFTCAP
#define BWD_PROB(s, i, j, l, dt)                                                                   \
  exp(cap_score((s), scale, softcap, &(dt)) ALIBI_PLUS(slope, i, j) - (l))
#else
#define BWD_PROB(s, i, j, l, dt) ((dt) = 1.0f, exp((s) * scale ALIBI_PLUS(slope, i, j) - (l)))
#endif


__kernel __attribute__((reqd_work_group_size(BKV, 1, 1))) void
bwd_dkdv(__global const stor_t *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
         __global const stor_t *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
         __global const stor_t *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
         __global const stor_t *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
         __global const float *lse, __global const float *drow, __global stor_t *dk,
         ulong dk_off, ulong dk_sb, ulong dk_ss, ulong dk_sh, __global stor_t *dv, ulong dv_off,
         ulong dv_sb, ulong dv_ss, ulong dv_sh, uint heads_q, uint heads_kv, uint seqlen_q,
         uint seqlen_kv, uint num_kblocks, float scale, ulong group_base VARIANT_ARGS) {
  __local float Qs[BQ * D];
  __local float Gs[BQ * DV];
  __local float Ls[BQ], Ds[BQ];
  const uint lid = get_local_id(0);
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
  const uint j = kb * BKV + lid; /* this work-item's key */
  const bool key = j < seqlen_kv;
  const uint group = heads_q / heads_kv;
  const long shift = (long)seqlen_kv - (long)seqlen_q;

  float kj[D], vj[DV], dkj[D], dvj[DV];
  const ulong kbase = k_off + KB(k) + (ulong)(key ? j : 0) * k_ss + hk * k_sh;
  const ulong vbase = v_off + KB(v) + (ulong)(key ? j : 0) * v_ss + hk * v_sh;
  for (uint c = 0; c < D; c++) kj[c] = key ? LDS(k + kbase + c) : 0.0f, dkj[c] = 0.0f;
  for (uint c = 0; c < DV; c++) vj[c] = key ? LDS(v + vbase + c) : 0.0f, dvj[c] = 0.0f;

  /* Rows before the first that sees this block's first key see none of it. */
  uint q_first = 0;
#if CAUSAL
  const long first = (long)(kb * BKV) - shift;
  q_first = first <= 0 ? 0u : (uint)min(first, (long)seqlen_q) / BQ * BQ;
#endif
  uint q_stop = seqlen_q;
#if MASK
  /* The rows that see some key of the block; the other query blocks are skipped whole. */
  mask_keys_rows(kb * BKV, kb * BKV + BKV, seqlen_q, mask_lo, mask_hi, BQ, &q_first, &q_stop);
#endif
  for (uint hh = 0; hh < group; hh++) {
    const uint h = hk * group + hh;
    const ulong qbase = q_off + QB(q) + h * q_sh, gbase = g_off + QB(g) + h * g_sh;
    const ulong rbase = LSE_ROW(b, h);
#if ALIBI
    const float slope = ALIBI_SLOPE(b * heads_q + h);
#endif
    for (uint q0 = q_first; q0 < q_stop; q0 += BQ) {
      const uint nr = min((uint)BQ, seqlen_q - q0);
      barrier(CLK_LOCAL_MEM_FENCE);
      for (uint t = lid; t < BQ * D; t += BKV) {
        const uint r = t / D, c = t % D;
        Qs[t] = r < nr ? LDS(q + qbase + (ulong)(q0 + r) * q_ss + c) : 0.0f;
      }
      for (uint t = lid; t < BQ * DV; t += BKV) {
        const uint r = t / DV, c = t % DV;
        Gs[t] = r < nr ? LDS(d_o + gbase + (ulong)(q0 + r) * g_ss + c) : 0.0f;
      }
      for (uint r = lid; r < BQ; r += BKV) {
        Ls[r] = r < nr ? lse[rbase + q0 + r] : -INFINITY;
        Ds[r] = r < nr ? drow[rbase + q0 + r] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (!key) continue;
      for (uint r = 0; r < nr; r++) {
        if (Ls[r] == -INFINITY) continue;
#if CAUSAL
        if ((long)j > (long)(q0 + r) + shift) continue;
#endif
#if MASK
        if (!MASK_SEES(q0 + r, j)) continue;
#endif
        float s = 0.0f, dt;
        for (uint c = 0; c < D; c++) s = fma(Qs[r * D + c], kj[c], s);
        const float p = BWD_PROB(s, q0 + r, j, Ls[r], dt);
        float dp = 0.0f;
        for (uint c = 0; c < DV; c++) {
          dp = fma(Gs[r * DV + c], vj[c], dp);
          dvj[c] = fma(p, Gs[r * DV + c], dvj[c]);
        }
        const float ds = p * (dp - Ds[r]) * dt;
        for (uint c = 0; c < D; c++) dkj[c] = fma(ds, Qs[r * D + c], dkj[c]);
      }
    }
  }
  if (j < kv_write_end) { /* keys past a padded entry's length get zeros */
    const ulong kb_out = dk_off + KB(dk) + (ulong)j * dk_ss + hk * dk_sh;
    const ulong vb_out = dv_off + KB(dv) + (ulong)j * dv_ss + hk * dv_sh;
    for (uint c = 0; c < D; c++) STS(dk + kb_out + c, dkj[c] * scale);
    for (uint c = 0; c < DV; c++) STS(dv + vb_out + c, dvj[c]);
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif

__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void
bwd_dq(__global const stor_t *q, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh,
       __global const stor_t *k, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh,
       __global const stor_t *v, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,
       __global const stor_t *d_o, ulong g_off, ulong g_sb, ulong g_ss, ulong g_sh,
       __global const float *lse, __global const float *drow, __global stor_t *dq, ulong dq_off,
       ulong dq_sb, ulong dq_ss, ulong dq_sh, uint heads_q, uint heads_kv, uint seqlen_q,
       uint seqlen_kv, uint num_qblocks, float scale, ulong group_base VARIANT_ARGS PDP_ARG) {
  __local float Ks[BKV * D];
  __local float Vs[BKV * DV];
  const uint lid = get_local_id(0);
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
  const uint i = qb * BQ + lid; /* this work-item's query row */
  const bool row = i < seqlen_q;
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const ulong r = LSE_ROW(b, h) + (row ? i : 0);
#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif
  const float li = row ? lse[r] : -INFINITY, di = row ? drow[r] : 0.0f;

  float qi[D], gi[DV], dqi[D];
  const ulong qbase = q_off + QB(q) + (ulong)(row ? i : 0) * q_ss + h * q_sh;
  const ulong gbase = g_off + QB(g) + (ulong)(row ? i : 0) * g_ss + h * g_sh;
  for (uint c = 0; c < D; c++) qi[c] = row ? LDS(q + qbase + c) : 0.0f, dqi[c] = 0.0f;
  for (uint c = 0; c < DV; c++) gi[c] = row ? LDS(d_o + gbase + c) : 0.0f;

  uint kv_end = seqlen_kv;
#if CAUSAL
  const long block_end = (long)min(qb * BQ + BQ, seqlen_q) + shift;
  kv_end = block_end <= 0 ? 0u : (uint)min(block_end, (long)seqlen_kv);
#endif
  uint kv_first = 0;
#if MASK
  /* The keys some row of this block sees. */
  mask_rows_keys(qb * BQ, min(qb * BQ + BQ, seqlen_q), seqlen_kv, mask_lo, mask_hi, &kv_first,
                 &kv_end);
  const uint row_first = mask_key(i, mask_lo, seqlen_kv), row_end = mask_key(i, mask_hi, seqlen_kv);
#endif
  const ulong kb0 = k_off + KB(k) + hk * k_sh, vb0 = v_off + KB(v) + hk * v_sh;
  float pd = 0.0f; /* SINKS: the row's sum of P dP */
  for (uint kv0 = kv_first; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint t = lid; t < BKV * D; t += BQ) {
      const uint jj = t / D, c = t % D;
      Ks[t] = jj < nk ? LDS(k + kb0 + (ulong)(kv0 + jj) * k_ss + c) : 0.0f;
    }
    for (uint t = lid; t < BKV * DV; t += BQ) {
      const uint jj = t / DV, c = t % DV;
      Vs[t] = jj < nk ? LDS(v + vb0 + (ulong)(kv0 + jj) * v_ss + c) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (li == -INFINITY) continue;
    for (uint jj = 0; jj < nk; jj++) {
#if CAUSAL
      if ((long)(kv0 + jj) > (long)i + shift) break;
#endif
#if MASK
      if (kv0 + jj < row_first || kv0 + jj >= row_end) continue;
#endif
      float s = 0.0f, dt;
      for (uint c = 0; c < D; c++) s = fma(qi[c], Ks[jj * D + c], s);
      const float p = BWD_PROB(s, i, kv0 + jj, li, dt);
      float dp = 0.0f;
      for (uint c = 0; c < DV; c++) dp = fma(gi[c], Vs[jj * DV + c], dp);
      const float ds = p * (dp - di) * dt;
#if SINKS
      pd = fma(p, dp, pd);
#endif
      for (uint c = 0; c < D; c++) dqi[c] = fma(ds, Ks[jj * D + c], dqi[c]);
    }
  }
  if (row) {
    const ulong ob = dq_off + QB(dq) + (ulong)i * dq_ss + h * dq_sh;
    for (uint c = 0; c < D; c++) STS(dq + ob + c, dqi[c] * scale);
#if SINKS
    pdp[pdp_off + r] = pd;
#endif
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
