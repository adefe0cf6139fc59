/* Merges the partial results of a call whose keys were split into ranges (flash-decoding):
 * range s gave each row O_s, normalised over its keys, and LSE_s. Then
 * O = sum_s exp(LSE_s - M) O_s / sum_s exp(LSE_s - M) and LSE = M + log sum_s exp(LSE_s - M),
 * with M the largest LSE_s; a row no range saw (M = -inf) gets O = 0 and LSE = -inf.
 * One work-item per (row, column) of the output; rows are [batch][head][query], packed. The
 * partials are fp32 in every storage type; O is stored in the call's (cl/common.cl's DTYPE). */
__kernel void merge_splits(__global const float *part, const ulong lse_off, const uint splits,
                           const ulong rows, const uint dv, __global stor_t *o, const ulong o_off,
                           const ulong o_sb, const ulong o_ss, const ulong o_sh, const uint heads,
                           const uint seqlen_q, __global float *lse, const int write_lse,
                           const ulong base) {
  const ulong g = base + get_global_id(0);
  const uint c = (uint)(g % dv);
  const ulong r = g / dv;
  /* Unrolled by 8 so that eight ranges' loads are in flight at once: the loop's loads are
   * independent, and a loop of one load a trip pays a memory latency a range (bwd_rowdot, a
   * loop of that kind, ran 3.3x faster with its loads issued together, docs/BENCHMARKS.md).
   * The sums keep their order. */
  float m = -INFINITY;
#pragma unroll 8
  for (uint s = 0; s < splits; s++) m = fmax(m, part[lse_off + s * rows + r]);
  float sum = 0.0f, acc = 0.0f;
  if (m != -INFINITY) {
#pragma unroll 8
    for (uint s = 0; s < splits; s++) {
      const float w = exp(part[lse_off + s * rows + r] - m);
      sum += w;
      acc += w * part[(s * rows + r) * dv + c];
    }
  }
  const uint i = (uint)(r % seqlen_q);
  const ulong bh = r / seqlen_q;
  const uint h = (uint)(bh % heads);
  const ulong b = bh / heads;
  STS(o + o_off + b * o_sb + (ulong)i * o_ss + h * o_sh + c, sum > 0.0f ? acc / sum : 0.0f);
  if (write_lse && c == 0) lse[r] = sum > 0.0f ? m + log(sum) : -INFINITY;
}
