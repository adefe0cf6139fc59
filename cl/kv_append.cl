/* Appends new tokens to a KV cache (clattn_kv_append, issue 18): a work-item per (entry, new
 * token, KV head) copies that token's K and V rows to position seqlens[b] + i of the entry,
 * through the block table when PAGED, quantised to int8 with one fp32 scale per row when KV8
 * (scale = max|x| / 127, values x / scale rounded to nearest even and saturated). A length out
 * of [0, seqlen_kv], a position at or past seqlen_kv and a page outside [0, num_pages) write
 * nothing. Built with cl/common.cl's DTYPE (the new rows' storage, and the cache's unless KV8),
 * after cl/decode_common.cl (kv_t, PAGE_ARGS, SCALE_ARGS writable by -DSCALE_QUAL=, kv_where). */

/* One row of n elements from src to dst; with KV8 its scale to *scale. */
static inline void put_row(__global const stor_t *src, __global kv_t *dst, uint n
#if KV8
                           ,
                           __global float *scale
#endif
) {
#if KV8
  float mx = 0.0f;
  for (uint c = 0; c < n; c++) mx = fmax(mx, fabs(LDS(src + c)));
  const float sc = mx / 127.0f;
  for (uint c = 0; c < n; c++) dst[c] = sc > 0.0f ? convert_char_sat_rte(LDS(src + c) / sc) : 0;
  *scale = sc;
#else
  for (uint c = 0; c < n; c++) STS(dst + c, LDS(src + c)); /* exact: the same type */
#endif
}

__kernel void kv_append(__global const stor_t *kn, __global const stor_t *vn, __global kv_t *k,
                        __global kv_t *v, ulong kn_off, ulong kn_sb, ulong kn_ss, ulong kn_sh,
                        ulong vn_off, ulong vn_sb, ulong vn_ss, ulong vn_sh, ulong k_off,
                        ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb, ulong v_ss,
                        ulong v_sh, __global const int *seqlens, uint heads_kv, uint seqlen_new,
                        uint seqlen_kv, uint d, uint dv, ulong base PAGE_ARGS SCALE_ARGS) {
  const ulong gid = base + get_global_id(0);
  const uint h = (uint)(gid % heads_kv);
  const ulong bi = gid / heads_kv;
  const uint i = (uint)(bi % seqlen_new);
  const ulong b = bi / seqlen_new;
  const int len = seqlens[b];
  if (len < 0 || (uint)len > seqlen_kv) return;
  const ulong pos = (ulong)len + i;
  if (pos >= seqlen_kv) return;
  ulong slot;
  uint tok;
  if (!kv_where(b, (uint)pos PAGE_PASS, &slot, &tok)) return; /* a page outside the pool */
  __global const stor_t *ks = kn + kn_off + b * kn_sb + (ulong)i * kn_ss + h * kn_sh;
  __global const stor_t *vs = vn + vn_off + b * vn_sb + (ulong)i * vn_ss + h * vn_sh;
  __global kv_t *kd = k + k_off + slot * k_sb + (ulong)tok * k_ss + h * k_sh;
  __global kv_t *vd = v + v_off + slot * v_sb + (ulong)tok * v_ss + h * v_sh;
#if KV8
  const ulong at = slot * sc_sb + (ulong)tok * heads_kv + h;
  put_row(ks, kd, d, k_scale + at);
  put_row(vs, vd, dv, v_scale + at);
#else
  put_row(ks, kd, d);
  put_row(vs, vd, dv);
#endif
}
