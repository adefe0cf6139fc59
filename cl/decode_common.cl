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
#ifndef PTX_FENCE /* 1: NVIDIA's inline PTX (membar.gl around the split merge's count) */
#define PTX_FENCE 0
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

/* Split keys merged inside the launch (runtime/ops/split.c; cl/merge.cl's rule, which the other
 * families run as a second kernel): merge & 1 says this call's keys are split. Once a work-group
 * has written its range's partial O and LSE it counts itself in on its tile's counter
 * (merge_count[(b heads_kv + kvh) num_tiles + tile], tagged with the call's epoch); the last of
 * the num_splits to arrive merges every range of the tile into O (mo and its view) and, when
 * merge & 2, the LSE (mlse). One launch a call instead of two: on
 * NVIDIA an enqueue is about 13 us, most of a decode call's host cost (docs/BENCHMARKS.md). */
#define MERGE_ARGS                                                                                 \
  , __global uint *merge_count, __global stor_t *mo, ulong mo_off, ulong mo_sb, ulong mo_ss,      \
      ulong mo_sh, __global float *mlse, int merge, uint epoch

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
      ulong lse_split OUT_ARG VARIANT_ARGS PAGE_ARGS SCALE_ARGS MERGE_ARGS

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

/* Whether this work-group is the last of its tile's ranges to finish (MERGE_ARGS), the same
 * answer for all its work-items (*last: a __local of the kernel's). The fence before the count
 * publishes this work-group's partial stores device-wide (CUDA's threadFenceReduction order);
 * the one after it orders the merge's loads after every other range's stores. A counter holds
 * the call's epoch (1 to 2^24 - 1, a new one each call) above the arrivals (8 bits, splits <=
 * MERGE_SPLITS): one left by another call, even one that never finished, counts as 0, so
 * nothing has to set the counters back. */
static inline int decode_last_range(__global uint *count, uint splits, uint epoch, uint lid,
                                    __local int *last) {
#if PTX_FENCE
  asm volatile("membar.gl;" ::: "memory");
#endif
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
  if (lid == 0) {
    uint old = *(volatile __global uint *)count;
    for (;;) {
      const uint now = (old >> 8) == epoch ? old + 1u : (epoch << 8) | 1u;
      const uint got = atomic_cmpxchg(count, old, now);
      if (got == old) {
        *last = (now & 0xffu) == splits;
        break;
      }
      old = got;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int mine = *last;
#if PTX_FENCE
  asm volatile("membar.gl;" ::: "memory");
#endif
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  return mine;
}

/* The most ranges a merge takes (runtime/ops/split.c's MAX_SPLITS), and the kernels' __local
 * room for it: each row's weights, then each row's sum. */
#define MERGE_SPLITS 64
#define MERGE_LOCAL (BQ * MERGE_SPLITS + BQ)

/* The last range's work-group merges the tile's nr rows from p0 by cl/merge.cl's rule (weights
 * exp(LSE_s - max); a row no range saw gets O = 0 and LSE = -inf): the ranges' LSEs into W, each
 * row's weights and sum there, then O a work-item per (row, column) in turn, its loads of the
 * ranges independent. Merging a column at a time with the LSEs reloaded and the exponentials
 * redone per element made an H100's split decode 1.1-2.2x slower than two launches
 * (docs/BENCHMARKS.md). The partials (fp32: part, with the kernel's o view and o_split; plse
 * from lse_off, lse_split apart) are plain loads: other work-groups wrote them before their
 * fence and count, which this one read before its own fence (decode_last_range), PTX's release
 * and acquire patterns, which order even weak loads after the stores (NVIDIA's L1 holds no stale
 * line past them); MERGE_VOLATILE 1 reads them volatile instead (an experiment through
 * $CLATTN_BUILD_OPTIONS). Rows [b][head][query] as LSE_ROW has them without VARLEN: packed
 * sequences are never split (runtime/ops/split.c). */
#ifndef MERGE_VOLATILE
#define MERGE_VOLATILE 0
#endif
#if MERGE_VOLATILE
#define MERGE_QUAL volatile
#else
#define MERGE_QUAL
#endif
static inline void decode_merge_ranges(
    __global const float *part, ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh, ulong o_split,
    __global const float *plse, ulong lse_off, ulong lse_split, uint splits, uint p0, uint nr,
    uint group, uint kvh, ulong b, uint heads_q, uint seqlen_q, __global stor_t *mo, ulong mo_off,
    ulong mo_sb, ulong mo_ss, ulong mo_sh, __global float *mlse, int write_lse, uint dv,
    __local float *W, uint bq, uint lid, uint wg) {
  MERGE_QUAL __global const float *vp = part, *vl = plse;
  __local float *sums = W + bq * MERGE_SPLITS;
  for (uint x = lid; x < nr * splits; x += wg) {
    const uint r = x / splits, s = x % splits, p = p0 + r, h = kvh * group + p % group;
    W[r * MERGE_SPLITS + s] = vl[lse_off + s * lse_split + (b * heads_q + h) * seqlen_q + p / group];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint r = lid; r < nr; r += wg) { /* each row's largest LSE, into its sum's place */
    float mx = -INFINITY;
    for (uint s = 0; s < splits; s++) mx = fmax(mx, W[r * MERGE_SPLITS + s]);
    sums[r] = mx;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint x = lid; x < nr * splits; x += wg) {
    const uint r = x / splits, s = x % splits;
    const float mx = sums[r];
    W[r * MERGE_SPLITS + s] = mx == -INFINITY ? 0.0f : exp(W[r * MERGE_SPLITS + s] - mx);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint r = lid; r < nr; r += wg) {
    const float mx = sums[r];
    float sum = 0.0f;
    for (uint s = 0; s < splits; s++) sum += W[r * MERGE_SPLITS + s];
    const uint p = p0 + r, h = kvh * group + p % group;
    if (write_lse)
      mlse[(b * heads_q + h) * seqlen_q + p / group] = sum > 0.0f ? mx + log(sum) : -INFINITY;
    sums[r] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint x = lid; x < nr * dv; x += wg) {
    const uint r = x / dv, c = x % dv, p = p0 + r, qi = p / group, h = kvh * group + p % group;
    const ulong at = o_off + b * o_sb + h * o_sh + (ulong)qi * o_ss + c;
    __local const float *w = W + r * MERGE_SPLITS;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* four loads in flight */
    uint s = 0;
    for (; s + 4 <= splits; s += 4)
      for (uint u = 0; u < 4; u++) acc[u] += w[s + u] * vp[at + (s + u) * o_split];
    for (; s < splits; s++) acc[0] += w[s] * vp[at + s * o_split];
    const float o_rc = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    const float sum = sums[r];
    STS(mo + mo_off + b * mo_sb + h * mo_sh + (ulong)qi * mo_ss + c, sum > 0.0f ? o_rc / sum : 0.0f);
  }
}

/* A decode kernel's last step (its MERGE_ARGS and DECODE_ARGS in scope, seqlen_q the entry's;
 * last a __local int, W MERGE_LOCAL __local floats the kernel no longer uses): when the keys
 * are split, the tile's last range merges them. */
#define DECODE_MERGE(last, W, lid, wg)                                                             \
  do {                                                                                             \
    const ulong slot_ = (b * heads_kv + kvh) * num_tiles + tile;                                   \
    if ((merge & 1) && decode_last_range(merge_count + slot_, num_splits, epoch, (lid), (last)))   \
      decode_merge_ranges((__global const float *)o, o_off, o_sb, o_ss, o_sh, o_split, lse,        \
                          lse_off, lse_split, num_splits, p0, nr, group, kvh, b, heads_q,          \
                          seqlen_q, mo, mo_off, mo_sb, mo_ss, mo_sh, mlse, merge & 2, DV, (W), BQ, \
                          (lid), (wg));                                                            \
  } while (0)
