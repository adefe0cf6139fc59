/* A test-only forward family (runtime/kernels/registry.c, "forward_naive"): the plainest exact
 * attention there is, one work-item per query row, no local memory, keys read one at a time
 * from global memory with an online softmax. It exists to show that a kernel family is added
 * with a file here, one registry entry and its tests (docs/DESIGN.md), and it runs only when an
 * override asks for it.
 *
 * Parameters (-D): D, DV head dims; BQ rows (work-items) per work-group; CAUSAL (bottom-right
 * aligned). The arguments are every forward family's (clattn_forward in forward.cl), key splits
 * included. Scores are in the log2 domain, as in forward.cl.
 */

__kernel __attribute__((reqd_work_group_size(BQ, 1, 1))) void
clattn_forward(__global const float *q, __global const float *k, __global const float *v,
               __global float *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
               ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off,
               ulong v_sb, ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss,
               ulong o_sh, uint heads_q, uint group, uint seqlen_q, uint seqlen_kv,
               uint num_qblocks, ulong group_base, float scale_log2, int write_lse,
               uint num_splits, uint kv_per_split, ulong o_split, ulong lse_off,
               ulong lse_split) {
  const ulong g = group_base + get_group_id(0);
  const uint qb = (uint)(g % num_qblocks);
  const ulong gs = g / num_qblocks; /* query blocks, then key splits, then heads */
  const uint split = (uint)(gs % num_splits);
  const ulong bh = gs / num_splits;
  const uint h = (uint)(bh % heads_q);
  const ulong b = bh / heads_q;
  const uint row = qb * BQ + get_local_id(0);
  if (row >= seqlen_q) return;

  const ulong qrow = q_off + b * q_sb + h * q_sh + (ulong)row * q_ss;
  const ulong kbase = k_off + b * k_sb + (h / group) * k_sh;
  const ulong vbase = v_off + b * v_sb + (h / group) * v_sh;
  uint kv_end = seqlen_kv;
#if CAUSAL
  const long last = (long)row + (long)seqlen_kv - (long)seqlen_q; /* key j visible iff j <= last */
  kv_end = last < 0 ? 0u : (uint)min(last + 1, (long)seqlen_kv);
#endif
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);

  float m = -INFINITY, l = 0.0f, acc[DV];
  for (uint c = 0; c < DV; c++) acc[c] = 0.0f;
  for (uint j = kv_lo; j < kv_end; j++) {
    float s = 0.0f;
    for (uint c = 0; c < D; c++) s = fma(q[qrow + c], k[kbase + (ulong)j * k_ss + c], s);
    s *= scale_log2;
    const float mn = fmax(m, s), alpha = exp2(m - mn), p = exp2(s - mn);
    l = l * alpha + p;
    for (uint c = 0; c < DV; c++) acc[c] = fma(p, v[vbase + (ulong)j * v_ss + c], acc[c] * alpha);
    m = mn;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const ulong orow = o_off + split * o_split + b * o_sb + h * o_sh + (ulong)row * o_ss;
  for (uint c = 0; c < DV; c++) o[orow + c] = acc[c] * inv;
  if (write_lse)
    lse[lse_off + split * lse_split + (b * heads_q + h) * seqlen_q + row] =
        l > 0.0f ? (m + log2(l)) * M_LN2_F : -INFINITY;
}
