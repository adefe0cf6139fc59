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

/* The merge of a tile's key ranges in the kernel (runtime/ops/split.c): merge_fused nonzero
 * when the call's keys are split and the last work-group of a tile's ranges to finish, counted
 * by merge_count (an int per (batch entry, KV head, tile), 0 between calls), combines their
 * partials into mo (the caller's O, its view) and mlse (merge_lse: the caller's LSE). */
#define MERGE_ARGS                                                                                 \
  , __global volatile int *merge_count, int merge_fused, __global stor_t *mo, ulong mo_off,        \
      ulong mo_sb, ulong mo_ss, ulong mo_sh, __global float *mlse, int merge_lse

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

/* SPLIT_FENCE orders a work-item's global stores before, and loads after, the count of a tile's
 * finished ranges: PTX's fence at GPU scope on NVIDIA (PTX_FENCE), whose OpenCL promises no
 * order between work-groups; mem_fence on a CPU, whose caches are coherent. The host allows the
 * kernel's merge only on those two (runtime/context.c's merge_fused). */
#if PTX_FENCE
#define SPLIT_FENCE() asm volatile("fence.acq_rel.gpu;" ::: "memory")
#else
#define SPLIT_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

/* Whether this work-group is the last of its tile's num_splits to finish, the same answer in
 * each of its work-items, called by all of them after their partial O and LSE are stored (the
 * CUDA cooperative groups' pattern: each store fenced, a barrier, then one atomic). The last
 * puts the count back to 0 for the next call; *flag carries the answer. */
static inline int split_last(__global volatile int *count, __local int *flag, uint num_splits) {
  SPLIT_FENCE(); /* release: this work-item's partials before the count */
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    SPLIT_FENCE(); /* cumulative: the work-group's stores, seen through the barrier */
    const int last = atomic_inc(count) == (int)num_splits - 1;
    if (last) {
      atomic_xchg(count, 0);
      SPLIT_FENCE(); /* acquire: the other ranges' partials after their counts */
    }
    *flag = last;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int last = *flag;
  if (last) SPLIT_FENCE();
  return last;
}

#ifdef BQ /* the readers' (cl/kv_append.cl has no tiles) */
/* The tile's merge, cl/merge.cl's arithmetic: per row O = sum_s w_s O_s / sum_s w_s and LSE = M +
 * log sum_s w_s, with w_s = exp(LSE_s - M), M the largest LSE_s (a row no range saw: O = 0, LSE
 * -inf), here in one pass as an online softmax over the ranges (M as it grows). The tile's rows
 * are rows[r] (r < nr <= BQ) of the ranges' packed [b][h][q] rows, whose partial O (fp32) sit at
 * part[o_off + s o_split + rows[r] o_ss + c] (the workspace's packed layout, runtime/ops/split.c)
 * and LSE at plse[l_off + s l_split + rows[r]]. A work-item takes 4 columns (1 where DV is odd to
 * 4) of every row and walks every range itself, the LSEs read by all (one address): no barrier,
 * and each range's loads for all rows are independent of the running sums, so they stay in
 * flight together (a merge is bound by memory latency: cl/merge.cl, docs/BENCHMARKS.md stop 40).
 * mo: the caller's O and its view; lse_out: the caller's LSE (NULL: none), whose rows are the same
 * [b][h][q] rows. MERGE_ROWS rows at a time. */
#define MERGE_VW (DV % 4 ? 1u : 4u)
/* Its loops over the rows unrolled (their sums in registers) on NVIDIA alone: PoCL's build of a
 * decode kernel took 8x as long with them (97 s against 12 for a test's few programs). */
#if PTX_FENCE
#define MERGE_UNROLL _Pragma("unroll")
#else
#define MERGE_UNROLL
#endif
#define MERGE_ROWS (BQ < 8 ? BQ : 8) /* rows merged at once: their sums live in registers */
#define MERGE_STEP (16 / MERGE_ROWS)   /* ranges whose loads are issued together */
static inline void split_merge_tile(__global const float *part, ulong o_off, ulong o_ss,
                                    ulong o_split, __global const float *plse, ulong l_off,
                                    ulong l_split, uint ns, uint nr, const ulong *rows,
                                    __global stor_t *mo, ulong mo_off, ulong mo_sb, ulong mo_ss,
                                    ulong mo_sh, uint heads_q, uint seqlen_q,
                                    __global float *lse_out) {
  const uint lid = get_local_id(0), wg = get_local_size(0);
  for (uint r0 = 0; r0 < nr; r0 += MERGE_ROWS) {
    for (uint c = MERGE_VW * lid; c < DV; c += MERGE_VW * wg) {
      float m[MERGE_ROWS], l[MERGE_ROWS];
      float4 acc[MERGE_ROWS];
      MERGE_UNROLL
      for (uint r = 0; r < MERGE_ROWS; r++) m[r] = -INFINITY, l[r] = 0.0f, acc[r] = (float4)(0.0f);
      for (uint s0 = 0; s0 < ns; s0 += MERGE_STEP) {
        /* Every load of MERGE_STEP ranges first, unconditional (a row past nr reads row nr - 1,
         * a range past ns range ns - 1; neither is summed), so that all are in flight at once. */
        float x[MERGE_STEP][MERGE_ROWS];
        float4 v[MERGE_STEP][MERGE_ROWS];
        MERGE_UNROLL
        for (uint u = 0; u < MERGE_STEP; u++) {
          const uint s = min(s0 + u, ns - 1);
          MERGE_UNROLL
          for (uint r = 0; r < MERGE_ROWS; r++) {
            const ulong row = rows[min(r0 + r, nr - 1)];
            const ulong at = o_off + s * o_split + row * o_ss + c;
            x[u][r] = plse[l_off + s * l_split + row];
            /* 16-byte aligned with 4 columns: the workspace's rows are DV floats from 0 */
            v[u][r] = MERGE_VW == 4 ? *(__global const float4 *)(part + at)
                                    : (float4)(part[at], 0.0f, 0.0f, 0.0f);
          }
        }
        MERGE_UNROLL
        for (uint u = 0; u < MERGE_STEP; u++) {
          MERGE_UNROLL
          for (uint r = 0; r < MERGE_ROWS; r++) {
            const float xr = s0 + u < ns ? x[u][r] : -INFINITY; /* weight 0 */
            const float mn = fmax(m[r], xr);
            const float a = m[r] == mn ? 1.0f : exp(m[r] - mn); /* -inf to finite: 0 */
            const float w = xr == -INFINITY ? 0.0f : exp(xr - mn);
            l[r] = l[r] * a + w, acc[r] = acc[r] * a + w * v[u][r], m[r] = mn;
          }
        }
      }
      MERGE_UNROLL
      for (uint r = 0; r < MERGE_ROWS; r++) {
        if (r0 + r < nr) {
          /* The row's place in the caller's O from its packed [b][h][q] index. */
          const ulong row = rows[r0 + r], bh = row / seqlen_q;
          __global stor_t *out = mo + mo_off + (bh / heads_q) * mo_sb + (bh % heads_q) * mo_sh +
                                 (row % seqlen_q) * mo_ss + c;
          const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
          STS(out, acc[r].x * inv);
          if (MERGE_VW == 4) {
            STS(out + 1, acc[r].y * inv);
            STS(out + 2, acc[r].z * inv);
            STS(out + 3, acc[r].w * inv);
          }
          if (lse_out && c == 0) lse_out[row] = l[r] > 0.0f ? m[r] + log(l[r]) : -INFINITY;
        }
      }
    }
  }
}

/* A decode kernel's end, in every work-item (barriers inside): with the merge fused, the last
 * work-group of the tile's ranges merges the tile's rows. Needs the kernel's names (b, kvh, tile,
 * p0, nr, ...) and a `__local int` of its own for the answer. */
#define SPLIT_MERGE_TAIL(flag_)                                                                    \
  if (merge_fused && num_splits > 1 &&                                                             \
      split_last(merge_count + ((b * heads_kv + kvh) * num_tiles + tile), &(flag_), num_splits)) { \
    ulong rows_[BQ];                                                                               \
    MERGE_UNROLL for (uint r_ = 0; r_ < BQ; r_++) {                                                \
      const uint p_ = p0 + r_;                                                                     \
      rows_[r_] = LSE_ROW(b, kvh * group + p_ % group) + p_ / group;                               \
    }                                                                                              \
    split_merge_tile((__global const float *)o, o_off, o_ss, o_split, lse, lse_off, lse_split,    \
                     num_splits, nr, rows_, mo, mo_off, mo_sb, mo_ss, mo_sh, heads_q, seqlen_q,    \
                     merge_lse ? mlse : (__global float *)0);                                      \
  }
#endif
