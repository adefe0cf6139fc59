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
 * The loads of CC elements (16 bytes at VEC = 4) are cl/decode_load.cl's; the arguments, the
 * work-group's place and its keys cl/decode_common.cl's (shared with cl/decode_mma.cl).
 *
 * Parameters (-D): D, DV; BQ (packed rows per tile), BKV (keys per block), TPR (work-items per
 * key), RM (rows per work-item in P V), STAGE (1 to 3, above and at fetch_k), VEC, PACKED and
 * PTX_CVT (cl/decode_load.cl); CAUSAL and the variants of cl/common.cl (MASK, SOFTCAP, ALIBI,
 * SINKS, KVLENS); KVCACHE, PAGED and KV8 (cl/decode_common.cl).
 * runtime/kernels/decode_family.c mirrors the local-memory formula below; keep the two in step.
 * Scores are in the log2 domain, as cl/forward.cl's.
 */

#define WG (BKV * TPR)
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
clattn_decode(DECODE_ARGS) {
  /* Rows of whole chunks, 16-byte aligned: a chunk of Q is read in float4s (CC % 4 == 0). */
  __local float Qs[BQ * QD] __attribute__((aligned(16)));
  __local float U[SU];           /* the scores of a block, then the merge's states */
  __local long Ko[BKV], Vo[BKV]; /* a block's K and V rows (element offsets), -1: no key */
#if KV8
  __local float Ksc[BKV], Vsc[BKV];
#endif
  __local float Rm[BQ]; /* ALiBi's slope of each row */
  __local int last;     /* SPLIT_MERGE_TAIL's answer */
  const uint lid = get_local_id(0);
  const uint heads_kv = heads_q / group;
  uint tile, split, kvh;
  ulong b;
  decode_place(group_base + get_group_id(0), num_tiles, num_splits, heads_kv, &tile, &split, &kvh,
               &b);
  SEQ_BEGIN(b);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  /* This tile's first packed row and rows, and the keys some row of it sees within this split:
   * [kv_lo, kv_end). */
  uint p0, nr, kv_lo, kv_end;
  decode_tile(tile, BQ, group, seqlen_q, seqlen_kv, TILE_MASK(mask_lo, mask_hi), split,
              kv_per_split, &p0, &nr, &kv_lo, &kv_end);
#if CAUSAL
  const long shift = (long)seqlen_kv - (long)seqlen_q; /* row i sees keys j <= i + shift */
#endif
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
  SPLIT_MERGE_TAIL(last);
}

#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
