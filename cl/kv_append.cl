/* Appends new tokens to a KV cache (clattn_kv_append, issue 18): a work-group of AW work-items
 * per (entry, new token, KV head) copies that token's K and V rows to position seqlens[b] + i of
 * the entry, through the block table when PAGED, quantised to int8 with one fp32 scale per row
 * when KV8 (scale = max|x| / 127, values x / scale rounded to nearest even and saturated). A
 * length out of [0, seqlen_kv], a position at or past seqlen_kv and a page outside [0,
 * num_pages) write nothing. Built with cl/common.cl's DTYPE (the new rows' storage, and the
 * cache's unless KV8), after cl/decode_common.cl (kv_t, PAGE_ARGS, SCALE_ARGS writable by
 * -DSCALE_QUAL=, kv_where).
 *
 * A row's columns are spread over the work-group (adjacent work-items, adjacent columns: one
 * load of the warp reads 32 contiguous elements), so a column's load is in flight with every
 * other column's. A work-item a row walked its columns one load a trip: a decode step's append
 * (a row per entry and KV head, a few warps in all) then paid a memory latency a column. The
 * barriers are in the kernel's body: PoCL 3.1 wrote wrong rows with them inside a function
 * called twice (K's row, then V's). */

#ifndef AW
#define AW 64 /* work-items a row: runtime/ops/kvcache.c's append_wg, passed as -DAW */
#endif

#if KV8
/* The largest |x| of a row's columns lid, lid + AW, ... (0 where n = 0). */
static inline float row_max(__global const stor_t *src, uint n, uint lid) {
  float mx = 0.0f;
  for (uint c = lid; c < n; c += AW) mx = fmax(mx, fabs(LDS(src + c)));
  return mx;
}

/* Columns lid, lid + AW, ... of a row of n elements from src to dst as int8 at scale sc. */
static inline void put_row(__global const stor_t *src, __global kv_t *dst, uint n, uint lid,
                           float sc) {
  for (uint c = lid; c < n; c += AW)
    dst[c] = sc > 0.0f ? convert_char_sat_rte(LDS(src + c) / sc) : 0;
}
#else
/* A row of n elements from src to dst (exact: the same type), 16 bytes a work-item where both
 * rows are 16-byte aligned and n fills whole chunks (a prefill's append moved 2 bytes a load and
 * reached 44% of a copy's bandwidth on an H100, docs/BENCHMARKS.md stop 40), else columns lid,
 * lid + AW, ... one by one. */
static inline void put_row(__global const stor_t *src, __global kv_t *dst, uint n, uint lid) {
  const uint epc = 16 / sizeof(kv_t); /* elements a chunk */
  if (((size_t)src % 16) == 0 && ((size_t)dst % 16) == 0 && n % epc == 0) {
    for (uint c = lid; c < n / epc; c += AW)
      ((__global uint4 *)dst)[c] = ((__global const uint4 *)src)[c];
    return;
  }
  for (uint c = lid; c < n; c += AW) STS(dst + c, LDS(src + c));
}
#endif

__kernel __attribute__((reqd_work_group_size(AW, 1, 1))) void kv_append(
    __global const stor_t *kn, __global const stor_t *vn, __global kv_t *k,
                        __global kv_t *v, ulong kn_off, ulong kn_sb, ulong kn_ss, ulong kn_sh,
                        ulong vn_off, ulong vn_sb, ulong vn_ss, ulong vn_sh, ulong k_off,
                        ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb, ulong v_ss,
                        ulong v_sh, __global const int *seqlens, uint heads_kv, uint seqlen_new,
                        uint seqlen_kv, uint d, uint dv, ulong base PAGE_ARGS SCALE_ARGS) {
#if KV8
  __local float red[2 * AW];
#endif
  const ulong gid = base + get_group_id(0); /* the row */
  const uint lid = get_local_id(0);
  const uint h = (uint)(gid % heads_kv);
  const ulong bi = gid / heads_kv;
  const uint i = (uint)(bi % seqlen_new);
  const ulong b = bi / seqlen_new;
  /* The row's place: none for a length out of range, a position past the capacity or a page
   * outside the pool (the same for the whole work-group, which still reaches every barrier). */
  const int len = seqlens[b];
  const ulong pos = (ulong)(len < 0 ? 0 : len) + i;
  ulong slot = 0;
  uint tok = 0;
  const bool ok = len >= 0 && (uint)len <= seqlen_kv && pos < seqlen_kv &&
                  kv_where(b, (uint)pos PAGE_PASS, &slot, &tok);
  const uint nk = ok ? d : 0, nv = ok ? dv : 0;
  __global const stor_t *ks = kn + kn_off + b * kn_sb + (ulong)i * kn_ss + h * kn_sh;
  __global const stor_t *vs = vn + vn_off + b * vn_sb + (ulong)i * vn_ss + h * vn_sh;
  __global kv_t *kd = k + k_off + slot * k_sb + (ulong)tok * k_ss + h * k_sh;
  __global kv_t *vd = v + v_off + slot * v_sb + (ulong)tok * v_ss + h * v_sh;
#if KV8
  /* The rows' scales: max |x| / 127 by a tree over the work-group (max is exact in any order),
   * K's in red[0, AW) and V's in red[AW, 2 AW). */
  red[lid] = row_max(ks, nk, lid), red[AW + lid] = row_max(vs, nv, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint w = AW / 2; w > 0; w /= 2) {
    if (lid < w) {
      red[lid] = fmax(red[lid], red[lid + w]);
      red[AW + lid] = fmax(red[AW + lid], red[AW + lid + w]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float sk = red[0] / 127.0f, sv = red[AW] / 127.0f;
  put_row(ks, kd, nk, lid, sk);
  put_row(vs, vd, nv, lid, sv);
  if (ok && lid == 0) {
    const ulong at = slot * sc_sb + (ulong)tok * heads_kv + h;
    k_scale[at] = sk, v_scale[at] = sv;
  }
#else
  put_row(ks, kd, nk, lid);
  put_row(vs, vd, nv, lid);
#endif
}
