/* Attention over a KV cache (issue 18): the `decode` family. A few query rows per sequence
 * against many keys is memory-bound, so the kernel is built to keep the device's loads in
 * flight: the query heads of one KV group are computed together (each K/V byte is read once per
 * group), every load is 16 bytes wide where the views allow it, and a block of keys costs three
 * barriers.
 *
 * One work-group owns BQ packed rows of one (batch entry, KV head) and one key split: packed
 * row p is query row i = p / group of query head kvh * group + p % group. It walks its keys in
 * blocks of BKV:
 *   scores: TPR work-items per key, each loading every TPR-th 16-byte chunk of the key's K row
 *     straight from global memory into registers (the row's chunks side by side across the
 *     TPR work-items, so a warp's loads cover whole sectors) and dotting it with the tile's
 *     rows of Q (local memory, pre-scaled); a second step adds the TPR partial sums and
 *     applies the int8 scale, the masks and the variants;
 *   P V: a work-item owns a chunk of CC output columns of RM rows and every nsub-th key of
 *     the block; it keeps its own online softmax (m, l) for those keys and rows, loading the V
 *     chunks it needs straight from global memory: after the score steps (STAGE 1), or the
 *     first VU of them at the block's start, with K's (STAGE 2: one memory round trip per block
 *     instead of two, for VU chunks more of registers held across the score steps).
 * After the last block the nsub partial states of each (rows, chunk) are merged in local memory
 * by halves, and the first writes O (or its split's partial O) and the LSE.
 *
 * CC, the elements of one load: 16 bytes at VEC = 4 (fp32 4, fp16/bf16 8, int8 16), half or a
 * quarter of that at VEC = 2 or 1. Views whose offsets and strides are multiples of CC elements
 * load through aligned vectors; others, and a head dim's last partial chunk, element by element.
 *
 * Parameters (-D): D, DV; BQ (packed rows per tile), BKV (keys per block), TPR (work-items per
 * key), RM (rows per work-item in P V), VEC, STAGE (1 or 2, above), PACKED and PTX_CVT (below);
 * CAUSAL and the variants of cl/common.cl (MASK, SOFTCAP, ALIBI, SINKS, KVLENS); and the cache's:
 *   KVCACHE  1: k and v are a cache's (the lengths come as KVLENS's seqlens_kv);
 *   PAGED    1: keys are found through block_table (page_shift = log2 page_size), pages
 *               outside [0, num_pages) read as no keys;
 *   KV8      1: K and V are int8 with an fp32 scale per (token, KV head): scale index
 *               slot * sc_sb + token * heads_kv + kvh, slot the page (paged) or the entry.
 * runtime/kernels/decode_family.c mirrors the local-memory formula below; keep the two in step.
 * Scores are in the log2 domain, as cl/forward.cl's.
 */

#ifndef KVCACHE
#define KVCACHE 0
#endif
#ifndef PAGED
#define PAGED 0
#endif
#ifndef KV8
#define KV8 0
#endif

/* UNROLL: full unrolling of the loops over private arrays, so that their indices are constants
 * and the arrays stay in registers on a GPU (UNROLL_LOOPS=1, decode_family.c); a CPU keeps them
 * in memory anyway, and PoCL's compile time grows with the unrolled code. */
#if UNROLL_LOOPS
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

#define WG (BKV * TPR)
#if KV8
#define CC (4 * VEC)
#elif DTYPE != 0
#define CC (2 * VEC)
#else
#define CC VEC
#endif
#define NCHK ((D + CC - 1) / CC)     /* chunks of a K row */
#define NCHV ((DV + CC - 1) / CC)    /* chunks of a V row */
#define CPK ((NCHK + TPR - 1) / TPR) /* K chunks per work-item */
#define QD (NCHK * CC) /* Q's local row: whole chunks, the columns past D zero */
#define VU 4                         /* V chunks a P V work-item loads at once */
/* P V's chunks, a power of two (the merge halves work-items); its work-groups hold NCHP * (BQ /
 * RM) work-items at least (decode_family.c's check). */
#define NCHP                                                                                       \
  (NCHV <= 1    ? 1                                                                                \
   : NCHV <= 2  ? 2                                                                                \
   : NCHV <= 4  ? 4                                                                                \
   : NCHV <= 8  ? 8                                                                                \
   : NCHV <= 16 ? 16                                                                               \
   : NCHV <= 32 ? 32                                                                               \
   : NCHV <= 64 ? 64                                                                               \
                : 128)
#define SPART (TPR * BQ * BKV)          /* the score partials (S itself when TPR = 1) */
#define SMERGE (WG / 2 * RM * (CC + 2)) /* the merge: half the key lanes' states */
#define SU (SPART > SMERGE ? SPART : SMERGE)
#ifndef STAGE
#define STAGE 1
#endif

#if KV8
typedef char kv_t;
#define SCALE_ARGS , __global const float *k_scale, __global const float *v_scale, ulong sc_sb
#else
typedef stor_t kv_t;
#define SCALE_ARGS
#endif
#if PAGED
#define PAGE_ARGS , __global const int *block_table, uint max_pages, uint num_pages, uint page_shift
#else
#define PAGE_ARGS
#endif
#define CACHE_ARGS PAGE_ARGS SCALE_ARGS

/* A chunk as loaded: VEC 32-bit words (16 bytes at VEC = 4) of EPW elements each, unpacked to
 * float only where an element is used, so that a chunk in flight holds VEC registers, not CC
 * (fp16: half as many, int8: a quarter): PACKED 1, GPUs (decode_family.c). On a CPU registers
 * cost nothing and PoCL unpacks element by element (15% slower), so its chunks are CC floats,
 * converted as they are loaded (PACKED 0). */
#define EPW (CC / VEC)
#ifndef PTX_CVT
#define PTX_CVT 0
#endif
#ifndef PACKED
#define PACKED 1
#endif
#if PACKED
typedef uint cw_t; /* a loaded chunk: CW of these */
#define CW VEC
#else
typedef float cw_t;
#define CW CC
#endif

/* The VEC 32-bit words of a chunk at p, aligned to the whole chunk: one vector load. */
static inline void load_words(__global const kv_t *p, uint *w) {
#if VEC == 4
  const uint4 u = *(__global const uint4 *)p;
  w[0] = u.s0, w[1] = u.s1, w[2] = u.s2, w[3] = u.s3;
#elif VEC == 2
  const uint2 u = *(__global const uint2 *)p;
  w[0] = u.s0, w[1] = u.s1;
#else
  w[0] = *(__global const uint *)p;
#endif
}

#if !PACKED
/* A CPU's build (PACKED 0): elements [0, n) of a chunk (n <= CC) at p converted to floats in x
 * as they are loaded, the rest zero; al: p is aligned to the whole chunk and n == CC. */
static inline void load_raw(__global const kv_t *p, uint n, int al, float *x) {
  if (al) {
#if KV8
#if VEC == 4
    const float16 y = convert_float16(as_char16(*(__global const uint4 *)p));
    UNROLL
    for (uint e = 0; e < 16; e++) x[e] = y[e];
#elif VEC == 2
    const float8 y = convert_float8(as_char8(*(__global const uint2 *)p));
    UNROLL
    for (uint e = 0; e < 8; e++) x[e] = y[e];
#else
    const float4 y = convert_float4(as_char4(*(__global const uint *)p));
    UNROLL
    for (uint e = 0; e < 4; e++) x[e] = y[e];
#endif
#elif DTYPE == 1
#if VEC == 4
    const float8 y = vloada_half8(0, p);
#elif VEC == 2
    const float4 y = vloada_half4(0, p);
#else
    const float2 y = vloada_half2(0, p);
#endif
    UNROLL
    for (uint e = 0; e < CC; e++) x[e] = y[e];
#else /* bf16: each word's halves shifted into floats; fp32: the words are the floats */
    uint w[VEC];
    load_words(p, w);
    UNROLL
    for (uint e = 0; e < VEC; e++)
#if DTYPE == 2
      x[2 * e] = as_float(w[e] << 16), x[2 * e + 1] = as_float(w[e] & 0xffff0000u);
#else
      x[e] = as_float(w[e]);
#endif
#endif
  } else {
    UNROLL
    for (uint e = 0; e < CC; e++)
#if KV8
      x[e] = e < n ? (float)p[e] : 0.0f;
#else
      x[e] = e < n ? LDS(p + e) : 0.0f;
#endif
  }
}

#else
/* Elements [0, n) of a chunk (n <= CC) at p into w, the rest zero; al: p is aligned to the
 * whole chunk and n == CC. */
static inline void load_raw(__global const kv_t *p, uint n, int al, uint *w) {
  if (al) {
    load_words(p, w);
  } else {
    UNROLL
    for (uint i = 0; i < VEC; i++) w[i] = 0u;
    UNROLL
    for (uint e = 0; e < CC; e++) {
      if (e >= n) break;
#if KV8
      const uint bits = (uint)((__global const uchar *)p)[e];
#elif DTYPE != 0
      const uint bits = (uint)((__global const ushort *)p)[e];
#else
      const uint bits = as_uint(p[e]);
#endif
      w[e / EPW] |= bits << (32 / EPW * (e % EPW));
    }
  }
}

#endif

/* Element e of a loaded chunk as float (e a constant once the loops are unrolled). */
static inline float unpack(const cw_t *w, uint e) {
#if !PACKED
  return w[e];
#elif KV8
  return (float)((int)(w[e / 4] << (24 - 8 * (e % 4))) >> 24);
#elif DTYPE == 1
#if PTX_CVT /* NVIDIA: the half's 16 bits converted in place, no private memory */
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((ushort)(w[e / 2] >> (16 * (e % 2)))));
  return f;
#else
  return vload_half(e, (const __private half *)w);
#endif
#elif DTYPE == 2
  return as_float(e % 2 ? w[e / 2] & 0xffff0000u : w[e / 2] << 16);
#else
  return as_float(w[e]);
#endif
}

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
#if PAGED
#define PAGE_PASS , block_table, max_pages, num_pages, page_shift
#else
#define PAGE_PASS
#endif

#if STAGE == 2
/* STAGE 2: the V chunks of keys j0 + u nsub (u < VU, j0 = sub) of the block at kv0, found
 * through the block table as K's are; vo[u] -1 where there is no key. */
static inline void load_v(__global const kv_t *v, ulong b, uint kv0, uint sub, uint nsub, uint nk,
                          ulong vbase, ulong v_sb, ulong v_ss, uint c0, uint ncol,
                          int val PAGE_ARGS, long *vo, cw_t (*y)[CW]) {
  UNROLL
  for (uint u = 0; u < VU; u++) {
    const uint j = sub + u * nsub;
    ulong slot;
    uint tok;
    vo[u] = -1;
    if (j < nk && kv_where(b, kv0 + j PAGE_PASS, &slot, &tok)) {
      vo[u] = (long)(vbase + slot * v_sb + (ulong)tok * v_ss);
      load_raw(v + vo[u] + c0, ncol, val && ncol == CC, y[u]);
    }
  }
}
#endif

#if KV8
#define SCALE_PASS , k_scale, v_scale, sc_sb, heads_kv, kvh
#define SCALE_PARAMS                                                                               \
  , __global const float *k_scale, __global const float *v_scale, ulong sc_sb, uint heads_kv,      \
      uint kvh, float *ksc, float *vsc
#else
#define SCALE_PASS
#define SCALE_PARAMS
#endif

/* This work-item's part of the block at kv0 (keys before kv_end): its key kv0 + kj's K and V
 * rows (element offsets; -1 and -1 where there is no key, *vk -1 also where its page is
 * outside the pool), its int8 scales, and its K chunks kt, kt + TPR, ... loaded into x, every
 * load issued before any is used. */
static inline void fetch_k(__global const kv_t *k, ulong b, uint kv0, uint kv_end, uint kj,
                           uint kt, ulong kbase, ulong k_sb, ulong k_ss, ulong vbase, ulong v_sb,
                           ulong v_ss, int kal PAGE_ARGS SCALE_PARAMS, long *ko, long *vk,
                           cw_t (*x)[CW]) {
  ulong slot;
  uint tok;
  *ko = -1, *vk = -1;
  if (kv0 + kj >= kv_end || !kv_where(b, kv0 + kj PAGE_PASS, &slot, &tok)) return;
  *ko = (long)(kbase + slot * k_sb + (ulong)tok * k_ss);
  *vk = (long)(vbase + slot * v_sb + (ulong)tok * v_ss);
#if KV8
  const ulong si = slot * sc_sb + (ulong)tok * heads_kv + kvh;
  *ksc = k_scale[si], *vsc = v_scale[si];
#endif
  UNROLL
  for (uint u = 0; u < CPK; u++) {
    const uint c = (kt + u * TPR) * CC;
    if (c < D) load_raw(k + *ko + c, min((uint)CC, D - c), kal && c + CC <= D, x[u]);
  }
}

/* Merges online-softmax state (m2, l2, a2) into (m, l, a). */
static inline void merge_state(float *m, float *l, float *a, float m2, float l2,
                               __local const float *a2) {
  const float mn = fmax(*m, m2);
  if (mn == -INFINITY) return; /* neither has seen a key */
  const float f1 = exp2(*m - mn), f2 = exp2(m2 - mn);
  *l = *l * f1 + l2 * f2;
  UNROLL
  for (uint e = 0; e < CC; e++) a[e] = a[e] * f1 + a2[e] * f2;
  *m = mn;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
clattn_decode(__global const stor_t *q, __global const kv_t *k, __global const kv_t *v,
              __global stor_t *o, __global float *lse, ulong q_off, ulong q_sb, ulong q_ss,
              ulong q_sh, ulong k_off, ulong k_sb, ulong k_ss, ulong k_sh, ulong v_off, ulong v_sb,
              ulong v_ss, ulong v_sh, ulong o_off, ulong o_sb, ulong o_ss, ulong o_sh, uint heads_q,
              uint group, uint seqlen_q, uint seqlen_kv, uint num_tiles, ulong group_base,
              float scale_log2, int write_lse, uint num_splits, uint kv_per_split, ulong o_split,
              ulong lse_off, ulong lse_split OUT_ARG VARIANT_ARGS CACHE_ARGS) {
  /* Rows of whole chunks, 16-byte aligned: a chunk of Q is read in float4s (CC % 4 == 0). */
  __local float Qs[BQ * QD] __attribute__((aligned(16)));
  __local float U[SU];           /* the scores of a block, then the merge's states */
  __local long Ko[BKV], Vo[BKV]; /* a block's K and V rows (element offsets), -1: no key */
#if KV8
  __local float Ksc[BKV], Vsc[BKV];
#endif
  __local float Rm[BQ]; /* ALiBi's slope of each row */
  const uint lid = get_local_id(0);
  const ulong g = group_base + get_group_id(0);
  const uint tile = (uint)(g % num_tiles);
  /* Work-groups run over tiles, then key splits, then KV heads, then the batch. */
  const ulong gs = g / num_tiles;
  const uint split = (uint)(gs % num_splits);
  const ulong bg = gs / num_splits;
  const uint heads_kv = heads_q / group;
  const uint kvh = (uint)(bg % heads_kv);
  const ulong b = bg / heads_kv;
  SEQ_BEGIN(b);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  const uint rows = seqlen_q * group, p0 = tile * BQ, pend = min(p0 + BQ, rows);
  const uint nr = pend > p0 ? pend - p0 : 0u; /* this tile's rows */
  const uint i_first = p0 / group, i_last = nr ? (pend - 1) / group : i_first;
  const ulong kbase = k_off + kvh * k_sh, vbase = v_off + kvh * v_sh;
  /* 16-byte loads need every row to start on a whole chunk. */
  const int kal = ((k_off | k_sb | k_ss | k_sh) % CC) == 0;
  const int val = ((v_off | v_sb | v_ss | v_sh) % CC) == 0;

  for (uint x = lid; x < BQ * QD; x += WG) {
    const uint r = x / QD, c = x % QD, p = p0 + r;
    const ulong at =
        q_off + b * q_sb + (ulong)(kvh * group + p % group) * q_sh + (ulong)(p / group) * q_ss + c;
    Qs[x] = r < nr && c < D ? LDS(q + at) * scale_log2 : 0.0f;
  }
#if ALIBI
  for (uint r = lid; r < BQ; r += WG)
    Rm[r] = ALIBI_SLOPE(b * heads_q + kvh * group + (p0 + r) % group);
#endif

  /* The keys some row of the tile sees, within this split: [kv_lo, kv_end). */
  uint kv_end = nr ? seqlen_kv : 0u;
#if CAUSAL
  const long shift = (long)seqlen_kv - (long)seqlen_q;
  const long tile_end = (long)i_last + 1 + shift;
  kv_end = tile_end <= 0 ? 0u : (uint)min(tile_end, (long)kv_end);
#endif
#if MASK
  uint kv_lo;
  mask_split_keys(i_first, i_last + 1, seqlen_kv, mask_lo, mask_hi, split * kv_per_split,
                  kv_per_split, &kv_lo, &kv_end);
  if (!nr) kv_end = kv_lo;
#else
  const uint kv_lo = min(split * kv_per_split, kv_end);
  kv_end = min(kv_end, kv_lo + kv_per_split);
#endif

  /* P V's mapping: RG row groups of RM rows (as many as the tile's rows need, a power of two),
   * NCHP chunks, nsub key lanes. */
  const uint need = (nr + RM - 1) / RM;
  const uint rg_n = need <= 1 ? 1u : need <= 2 ? 2u : need <= 4 ? 4u : need <= 8 ? 8u : 16u;
  const uint nsub = WG / (NCHP * rg_n);
  const uint ch = lid % NCHP, rg = (lid / NCHP) % rg_n, sub = lid / (NCHP * rg_n);
  const uint c0 = ch * CC, ncol = ch < NCHV ? min((uint)CC, DV - c0) : 0u;
  float m[RM], l[RM], acc[RM][CC];
  UNROLL
  for (uint i = 0; i < RM; i++) {
    const uint r = rg * RM + i;
    m[i] = sub == 0 && r < nr ? SINK_M(kvh * group + (p0 + r) % group, split) : -INFINITY;
    l[i] = sub == 0 && r < nr ? SINK_L(split) : 0.0f;
    UNROLL
    for (uint e = 0; e < CC; e++) acc[i][e] = 0.0f;
  }

  /* The scores' mapping: key kj of the block, chunks kt, kt + TPR, ... This work-item's key
   * of a block: its K row (ko, -1: no key), its V row and int8 scales (published by the key's
   * first work-item), its K chunks (x). STAGE 3 fetches the next block's during this block's
   * P V, so that K's round trip overlaps V's; STAGE 1 and 2 at the block's start. */
  const uint kj = lid / TPR, kt = lid % TPR;
  long ko = -1, vk = -1;
#if KV8
  float ksc = 0.0f, vsc = 0.0f;
#define KSC_PASS , &ksc, &vsc
#else
#define KSC_PASS
#endif
  cw_t x[CPK][CW];
#define FETCH_K(at)                                                                                \
  fetch_k(k, b, (at), kv_end, kj, kt, kbase, k_sb, k_ss, vbase, v_sb, v_ss, kal PAGE_PASS          \
              SCALE_PASS KSC_PASS,                                                                 \
          &ko, &vk, x)
#if STAGE == 3
  if (kv_lo < kv_end) FETCH_K(kv_lo);
#endif
  for (uint kv0 = kv_lo; kv0 < kv_end; kv0 += BKV) {
    const uint nk = min((uint)BKV, kv_end - kv0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous block is consumed; publishes Qs and Rm */
#if STAGE != 3
    FETCH_K(kv0);
#endif
    if (kt == 0) {
      Ko[kj] = ko, Vo[kj] = vk;
#if KV8
      Ksc[kj] = ksc, Vsc[kj] = vsc;
#endif
    }
    /* P V's V chunks: keys j0 + u nsub; STAGE 2 loads the first VU here, with K's. */
    cw_t y[VU][CW];
    long vo[VU];
#if STAGE == 2
    if (ncol) load_v(v, b, kv0, sub, nsub, nk, vbase, v_sb, v_ss, c0, ncol, val PAGE_PASS, vo, y);
#endif
    float s[BQ];
    UNROLL
    for (uint r = 0; r < BQ; r++) s[r] = 0.0f;
    if (ko >= 0) {
      UNROLL
      for (uint u = 0; u < CPK; u++) {
        const uint c = (kt + u * TPR) * CC;
        if (c >= D) continue;
#if CC % 4 == 0
        UNROLL
        for (uint e = 0; e < CC; e += 4) { /* 4 elements unpacked, then every row's FMAs */
          const float4 xv = (float4)(unpack(x[u], e), unpack(x[u], e + 1), unpack(x[u], e + 2),
                                     unpack(x[u], e + 3));
          UNROLL
          for (uint r = 0; r < BQ; r++) {
            if (r >= nr) continue;
            /* Q's columns past D are zero, as the chunk's elements there */
            const float4 qv = *(__local const float4 *)(Qs + r * QD + c + e);
            s[r] = fma(qv.s0, xv.s0, s[r]);
            s[r] = fma(qv.s1, xv.s1, s[r]);
            s[r] = fma(qv.s2, xv.s2, s[r]);
            s[r] = fma(qv.s3, xv.s3, s[r]);
          }
        }
#else
        UNROLL
        for (uint e = 0; e < CC; e++) {
          const float xe = unpack(x[u], e);
          UNROLL
          for (uint r = 0; r < BQ; r++)
            if (r < nr) s[r] = fma(Qs[r * QD + c + e], xe, s[r]);
        }
#endif
      }
    }
    UNROLL
    for (uint r = 0; r < BQ; r++) U[(kt * BQ + r) * BKV + kj] = s[r];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* The scores summed (TPR > 1) and masked: U[r * BKV + j] is row r's score of key j. */
    for (uint x = lid; x < BQ * BKV; x += WG) {
      const uint r = x / BKV, j = x % BKV, key = kv0 + j, p = p0 + r, qi = p / group;
      float t = U[x];
      UNROLL
      for (uint w = 1; w < TPR; w++) t += U[(w * BQ + r) * BKV + j];
#if KV8 /* K's scale, written by the key's first work-item before the barrier */
      t *= Ksc[j];
#endif
#if SOFTCAP
      t = softcap * cap_tanh(t);
#endif
      ALIBI_ADD(t, Rm[r], qi, key);
      int seen = j < nk && r < nr && Ko[j] >= 0;
#if CAUSAL
      seen = seen && (long)key <= (long)qi + shift;
#endif
#if MASK
      seen =
          seen && key >= mask_key(qi, mask_lo, seqlen_kv) && key < mask_key(qi, mask_hi, seqlen_kv);
#endif
      U[x] = seen ? t : -INFINITY;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

#if STAGE == 3
    if (kv0 + BKV < kv_end) FETCH_K(kv0 + BKV);
#endif
    /* P V: this work-item's keys sub, sub + nsub, ... of the block, rows rg * RM + i. */
    float mb[RM];
    UNROLL
    for (uint i = 0; i < RM; i++) mb[i] = -INFINITY;
    for (uint j = sub; j < nk; j += nsub) {
      UNROLL
      for (uint i = 0; i < RM; i++)
        if (rg * RM + i < nr) mb[i] = fmax(mb[i], U[(rg * RM + i) * BKV + j]);
    }
    UNROLL
    for (uint i = 0; i < RM; i++) {
      const float mn = fmax(m[i], mb[i]);
      const float al = mn == -INFINITY ? 1.0f : exp2(m[i] - mn);
      l[i] *= al;
      UNROLL
      for (uint e = 0; e < CC; e++) acc[i][e] *= al;
      m[i] = mn;
    }
    if (ncol)
      for (uint j0 = sub; j0 < nk; j0 += VU * nsub) {
        /* VU keys' V chunks loaded before any is used, so that they are in flight together
         * (STAGE 2: the first VU were loaded with K). */
#if STAGE == 2
        if (j0 != sub)
#endif
          UNROLL
          for (uint u = 0; u < VU; u++) {
            const uint j = j0 + u * nsub;
            vo[u] = j < nk ? Vo[j] : -1;
            if (vo[u] >= 0) load_raw(v + vo[u] + c0, ncol, val && ncol == CC, y[u]);
          }
        UNROLL
        for (uint u = 0; u < VU; u++) {
          const uint j = j0 + u * nsub;
          if (vo[u] < 0) continue;
#if KV8
          const float vs = Vsc[j];
#else
          const float vs = 1.0f;
#endif
          float pv[RM]; /* each row's P of the key (times V's int8 scale) */
          UNROLL
          for (uint i = 0; i < RM; i++) {
            const uint r = rg * RM + i;
            const float pj = r < nr && m[i] != -INFINITY ? exp2(U[r * BKV + j] - m[i]) : 0.0f;
            l[i] += pj;
            pv[i] = pj * vs;
          }
          UNROLL
          for (uint e = 0; e < CC; e++) { /* an element unpacked once, then every row's FMA */
            const float ye = unpack(y[u], e);
            UNROLL
            for (uint i = 0; i < RM; i++) acc[i][e] = fma(pv[i], ye, acc[i][e]);
          }
        }
      }
  }

  /* The key lanes' states merged by halves: lanes [h, 2h) hand theirs to [0, h). */
  for (uint h = nsub; h > 1;) {
    h /= 2;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sub >= h && sub < 2 * h) {
      UNROLL
      for (uint i = 0; i < RM; i++) {
        __local float *st =
            U + (((sub - h) * rg_n + rg) * RM + i) * (NCHP * (CC + 2)) + ch * (CC + 2);
        st[0] = m[i], st[1] = l[i];
        UNROLL
        for (uint e = 0; e < CC; e++) st[2 + e] = acc[i][e];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sub < h) {
      UNROLL
      for (uint i = 0; i < RM; i++) {
        __local const float *st =
            U + ((sub * rg_n + rg) * RM + i) * (NCHP * (CC + 2)) + ch * (CC + 2);
        merge_state(&m[i], &l[i], acc[i], st[0], st[1], st + 2);
      }
    }
  }

  if (sub == 0) {
    UNROLL
    for (uint i = 0; i < RM; i++) {
      const uint r = rg * RM + i, p = p0 + r;
      if (r < nr) {
        const uint qi = p / group, h = kvh * group + p % group;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        const ulong obase = o_off + split * o_split + b * o_sb + h * o_sh + (ulong)qi * o_ss + c0;
        UNROLL
        for (uint e = 0; e < CC; e++)
          if (e < ncol) STO(o, obase + e, acc[i][e] * inv);
        if (write_lse && ch == 0)
          lse[lse_off + split * lse_split + LSE_ROW(b, h) + qi] =
              l[i] > 0.0f ? (m[i] + log2(l[i])) * M_LN2_F : -INFINITY;
      }
    }
  }
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
