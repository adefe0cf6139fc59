/* What the two readers of a KV cache share (issue 18): cl/decode.cl (CUDA cores) and
 * cl/decode_mma.cl (tensor cores) take the same arguments, place a work-group the same way and
 * walk the same keys; only how they load and multiply differs. The writer, cl/kv_append.cl,
 * takes the cache's types, arguments and kv_where. Joined after cl/common.cl.
 *
 * The cache's parameters (-D):
 *   KVCACHE  1: k and v are a cache's (the lengths come as KVLENS's seqlens_kv);
 *   PAGED    1: keys are found through block_table (page_shift = log2 page_size), pages
 *               outside [0, num_pages) read as no keys;
 *   KV8      1: K and V are int8 with an fp32 scale per (token, KV head): scale index
 *               slot * sc_sb + token * heads_kv + kvh, slot the page (paged) or the entry.
 * runtime/kernels/decode_family.c binds the arguments (DECODE_ARGS) in this order. */

#ifndef KVCACHE
#define KVCACHE 0
#endif
#ifndef PAGED
#define PAGED 0
#endif
#ifndef KV8
#define KV8 0
#endif

/* SCALE_QUAL: the scales' qualifier, const but for cl/kv_append.cl, which writes them (its
 * build passes -DSCALE_QUAL=, empty). */
#ifndef SCALE_QUAL
#define SCALE_QUAL const
#endif
#if KV8
typedef char kv_t;
#define SCALE_ARGS                                                                                 \
  , __global SCALE_QUAL float *k_scale, __global SCALE_QUAL float *v_scale, ulong sc_sb
#else
typedef stor_t kv_t;
#define SCALE_ARGS
#endif
#if PAGED
#define PAGE_ARGS , __global const int *block_table, uint max_pages, uint num_pages, uint page_shift
#define PAGE_PASS , block_table, max_pages, num_pages, page_shift
#else
#define PAGE_ARGS
#define PAGE_PASS
#endif

/* A decode kernel's arguments: the tensors and their views (element offsets and strides per
 * batch entry, row and head), the problem's sizes, the work-groups' first index (group_base:
 * launches split by the host), the key splits and where their partial O and LSE go, then the
 * variants' and the cache's. */
#define DECODE_ARGS                                                                                \
  __global const stor_t *q, __global const kv_t *k, __global const kv_t *v, __global stor_t *o,    \
      __global float *lse, ulong q_off, ulong q_sb, ulong q_ss, ulong q_sh, ulong k_off,           \
      ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb, ulong v_ss, ulong v_sh,         \
      ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh, uint heads_q, uint group, uint seqlen_q,    \
      uint seqlen_kv, uint num_tiles, ulong group_base, float scale_log2, int write_lse,           \
      uint num_splits, uint kv_per_split, ulong o_split, ulong lse_off,                            \
      ulong lse_split OUT_ARG VARIANT_ARGS PAGE_ARGS SCALE_ARGS

/* Work-group g's place: work-groups run over tiles, then key splits, then KV heads, then the
 * batch. */
static inline void decode_place(ulong g, uint num_tiles, uint num_splits, uint heads_kv,
                                uint *tile, uint *split, uint *kvh, ulong *b) {
  const ulong gs = g / num_tiles, bg = gs / num_splits;
  *tile = (uint)(g % num_tiles);
  *split = (uint)(gs % num_splits);
  *kvh = (uint)(bg % heads_kv);
  *b = bg / heads_kv;
}

/* Tile `tile` of bq packed rows (packed row p: query row p / group of head kvh * group + p %
 * group): its first packed row *p0 and its rows *nr (0 past the entry's), and the keys some row
 * of it sees within key split `split` of `per` keys: [*kv_lo, *kv_end) (empty without rows). lo
 * and hi: the entry's window bounds (MASK, cl/common.cl), else unused. */
static inline void decode_tile(uint tile, uint bq, uint group, uint seqlen_q, uint seqlen_kv,
                               long lo, long hi, uint split, uint per, uint *p0, uint *nr,
                               uint *kv_lo, uint *kv_end) {
  const uint rows = seqlen_q * group, first = tile * bq, pend = min(first + bq, rows);
  const uint n = pend > first ? pend - first : 0u;
  const uint i_first = first / group, i_last = n ? (pend - 1) / group : i_first;
  uint end = n ? seqlen_kv : 0u;
  *p0 = first, *nr = n;
#if CAUSAL
  const long tile_end = (long)i_last + 1 + ((long)seqlen_kv - (long)seqlen_q);
  end = tile_end <= 0 ? 0u : (uint)min(tile_end, (long)end);
#endif
#if MASK
  mask_split_keys(i_first, i_last + 1, seqlen_kv, lo, hi, split * per, per, kv_lo, kv_end);
  *kv_end = min(*kv_end, end); /* causal's bound too, and no keys without rows */
  *kv_lo = min(*kv_lo, *kv_end);
#else
  *kv_lo = min(split * per, end);
  *kv_end = min(end, *kv_lo + per);
#endif
}
#if MASK
#define TILE_MASK(lo, hi) (lo), (hi)
#else
#define TILE_MASK(lo, hi) 0, 0
#endif

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
