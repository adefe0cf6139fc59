/* Merges the partial results of a call whose keys were split into ranges (flash-decoding):
 * range s gave each row O_s, normalised over its keys, and LSE_s. Then
 * O = sum_s exp(LSE_s - M) O_s / sum_s exp(LSE_s - M) and LSE = M + log sum_s exp(LSE_s - M),
 * with M the largest LSE_s; a row no range saw (M = -inf) gets O = 0 and LSE = -inf.
 * Rows are [batch][head][query], packed. The partials are fp32 in every storage type; O is stored
 * in the call's (cl/common.cl's DTYPE).
 *
 * A work-group of MW work-items a row (runtime/ops/split.c launches one per row). A decode
 * step's merge has few rows (batch 1 x 32 heads: 32) and up to 64 ranges, so a work-item per
 * output element, walking its ranges, paid a memory round trip every few ranges with a few warps
 * on the whole GPU: 10-17 us a launch on an H100, a fifth of batch 1's decode at 32k keys
 * (docs/BENCHMARKS.md, stop 40). Here the ranges' LSEs come in one load a work-item, their
 * weights are made once in local memory, and the columns' loads are spread over G groups of
 * work-items, each a share of the ranges, eight loads in flight at a time, the groups' sums
 * added in local memory in a fixed order (the result is the same run to run). */
#ifndef MW
#define MW 256 /* work-items a row: runtime/ops/split.c's merge_wg, passed as -DMW */
#endif
#define MERGE_MAX_SPLITS 128 /* runtime/ops/split.c's most ranges (MAX_SPLITS_FORCED) */

__kernel __attribute__((reqd_work_group_size(MW, 1, 1))) void
merge_splits(__global const float *part, const ulong lse_off, const uint splits, const ulong rows,
             const uint dv, __global stor_t *o, const ulong o_off, const ulong o_sb, const ulong o_ss,
             const ulong o_sh, const uint heads, const uint seqlen_q, __global float *lse,
             const int write_lse, const ulong base) {
  __local float w[MERGE_MAX_SPLITS], red[MW];
  const ulong r = base + get_group_id(0);
  const uint lid = get_local_id(0), ns = min(splits, (uint)MERGE_MAX_SPLITS);
  for (uint s = lid; s < ns; s += MW) w[s] = part[lse_off + s * rows + r];
  barrier(CLK_LOCAL_MEM_FENCE);
  float m = -INFINITY;
  for (uint s = 0; s < ns; s++) m = fmax(m, w[s]); /* the same address across the work-group */
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = lid; s < ns; s += MW) w[s] = m == -INFINITY ? 0.0f : exp(w[s] - m);
  barrier(CLK_LOCAL_MEM_FENCE);
  float sum = 0.0f;
  for (uint s = 0; s < ns; s++) sum += w[s];
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;

  /* CL column lanes (dv rounded up to a warp, at most MW), G = MW / CL groups of ranges. */
  const uint cl = min((uint)MW, (dv + 31) / 32 * 32), g_n = MW / cl;
  const uint lane = lid % cl, g = lid / cl;
  const uint i = (uint)(r % seqlen_q);
  const ulong bh = r / seqlen_q;
  const uint h = (uint)(bh % heads);
  const ulong b = bh / heads;
  for (uint c0 = 0; c0 < dv; c0 += cl) { /* uniform over the work-group: barriers inside */
    const uint c = c0 + lane;
    float acc = 0.0f;
    if (g < g_n && c < dv) {
#pragma unroll 8
      for (uint s = g; s < ns; s += g_n) acc += w[s] * part[(s * rows + r) * dv + c];
    }
    red[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (g == 0 && c < dv) {
      for (uint k = 1; k < g_n; k++) acc += red[k * cl + lane];
      STS(o + o_off + b * o_sb + (ulong)i * o_ss + h * o_sh + c, acc * inv);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (write_lse && lid == 0) lse[r] = sum > 0.0f ? m + log(sum) : -INFINITY;
}
