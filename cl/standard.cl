/* Kernels of the standard (unfused) path: the row softmax between the two CLBlast GEMMs, and the
 * output of a call with no keys.
 *
 * The kernels that touch the caller's tensors (empty_rows, bwd_rowdot, pack_rows, store_rows)
 * read and write them in the storage type stor_t (cl/common.cl, -DDTYPE); the workspace is
 * always fp32, since CLBlast's SGEMM computes there.
 *
 * softmax_rows: one work-group of WG work-items per row of the score workspace S (already scaled
 * by the GEMM), in place: P = exp(S - max) / sum over the keys the row sees, 0 elsewhere, and
 * LSE = max + log(sum). With CPI > 0 each work-item keeps its CPI columns in registers, so S is
 * read once and P written once (the traffic model's round trip); CPI = 0 (rows longer than
 * WG * 64 with WG at its largest) reads the row twice: an online max/sum pass, then the write pass.
 * Defines: WG (a power of two), CPI, CAUSAL, and the variants MASK, SOFTCAP, ALIBI and SINKS
 * (cl/common.cl; the cap, slopes and sinks in natural units here, applied to S as read; a sink
 * joins the row's max and sum as one more term). */

#if SOFTCAP
#define CAP(x) (softcap * cap_tanh((x) / softcap))
#else
#define CAP(x) (x)
#endif

#define LOG2E 1.4426950408889634f

/* Row i's score of key j as the softmax sees it: capped, then ALiBi's bias (its `slope`). */
#define SCORE(x, i, j) (CAP(x) ALIBI_PLUS(slope, i, j))
/* The sink's term of a row whose max is m (none for a sink of -inf, or without SINKS). */
#if SINKS
#define SINK_TERM(sink, m) ((sink) == -INFINITY ? 0.0f : exp2(((sink) - (m)) * LOG2E))
#endif

/* Tree reductions across the work-group; every work-item gets the result. */
static float group_max(__local float *red, float x) {
  const uint t = get_local_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  red[t] = x;
  for (uint s = WG / 2; s > 0; s >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < s) red[t] = fmax(red[t], red[t + s]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return red[0];
}

static float group_sum(__local float *red, float x) {
  const uint t = get_local_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  red[t] = x;
  for (uint s = WG / 2; s > 0; s >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < s) red[t] += red[t + s];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return red[0];
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
softmax_rows(__global float *s, __global float *lse, const uint seqlen_q, const uint seqlen_kv,
             const ulong row_base, const ulong lse_base, const int write_lse VARIANT_ARGS) {
  __local float red[WG];
  const ulong r = row_base + get_group_id(0); /* row of the workspace */
  const uint t = get_local_id(0), i = (uint)(r % seqlen_q);
  __global float *row = s + r * seqlen_kv;
  SEQ_BEGIN((lse_base + r) / seqlen_q / kv_heads);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
#if ALIBI || SINKS
  const ulong bh = (lse_base + r) / seqlen_q; /* (batch, head) of the row */
#endif
#if ALIBI
  const float slope = ALIBI_SLOPE(bh);
#endif
#if SINKS
  const float sink = sinks[bh % sink_heads] * sink_unit;
#endif
  uint visible = seqlen_kv;
#if CAUSAL
  /* Bottom-right aligned: query i sees keys j <= i + seqlen_kv - seqlen_q. */
  const long lim = (long)i + (long)seqlen_kv - (long)seqlen_q + 1;
  visible = lim <= 0 ? 0u : (uint)min(lim, (long)seqlen_kv);
#endif
  uint first = 0;
#if MASK
  first = mask_key(i, mask_lo, seqlen_kv), visible = mask_key(i, mask_hi, seqlen_kv);
#endif
  float m, l;
#if CPI
  float x[CPI];
  m = -INFINITY;
  for (uint c = 0; c < CPI; c++) {
    const uint j = t + c * WG;
    x[c] = j >= first && j < visible ? SCORE(row[j], i, j) : -INFINITY;
    m = fmax(m, x[c]);
  }
  m = group_max(red, m);
#if SINKS
  m = fmax(m, sink);
#endif
  l = 0.0f;
  /* A row that sees no key keeps m = -inf: its p are 0, never exp(-inf - -inf). */
  for (uint c = 0; c < CPI; c++) {
    x[c] = t + c * WG >= first && t + c * WG < visible ? exp2((x[c] - m) * LOG2E) : 0.0f;
    l += x[c];
  }
  l = group_sum(red, l);
#if SINKS
  l += SINK_TERM(sink, m);
#endif
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (uint c = 0; c < CPI; c++) {
    const uint j = t + c * WG;
    if (j < kv_write_end) row[j] = x[c] * inv; /* zeros past a padded entry's keys */
  }
#else
  float mt = -INFINITY, lt = 0.0f;
  for (uint j = first + t; j < visible; j += WG) {
    const float v = SCORE(row[j], i, j);
    if (v > mt) {
      lt = lt * exp2((mt - v) * LOG2E) + 1.0f;
      mt = v;
    } else {
      lt += exp2((v - mt) * LOG2E);
    }
  }
  m = group_max(red, mt);
#if SINKS
  m = fmax(m, sink);
#endif
  l = group_sum(red, mt == -INFINITY ? 0.0f : lt * exp2((mt - m) * LOG2E));
#if SINKS
  l += SINK_TERM(sink, m);
#endif
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (uint j = t; j < kv_write_end; j += WG)
    row[j] = j >= first && j < visible ? exp2((SCORE(row[j], i, j) - m) * LOG2E) * inv : 0.0f;
#endif
  if (write_lse && t == 0) lse[lse_base + r] = l > 0.0f ? m + log(l) : -INFINITY;
}
#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif

/* seqlen_kv = 0: every row sees no key, so O = 0 and LSE = -inf (with SINKS, the head's sink).
 * One work-item per (row, column) of the strided output view; base counts work-groups
 * (clattn__std_launch). */
__kernel void empty_rows(__global stor_t *o, const ulong o_off, const ulong o_sb, const ulong o_ss,
                         const ulong o_sh, __global float *lse, const int write_lse,
                         const uint heads, const uint seqlen_q, const uint dv,
                         const ulong base VARIANT_ARGS) {
  const ulong g = base * get_local_size(0) + get_global_id(0);
  const uint c = (uint)(g % dv);
  const ulong r = g / dv;
  const uint i = (uint)(r % seqlen_q);
  const ulong bh = r / seqlen_q;
  const uint h = (uint)(bh % heads);
  const ulong b = bh / heads;
  STS(o + o_off + b * o_sb + (ulong)i * o_ss + h * o_sh + c, 0.0f);
#if SINKS
  if (write_lse && c == 0) lse[r] = sinks[h] * sink_unit;
#else
  if (write_lse && c == 0) lse[r] = -INFINITY;
#endif
}

/* The standard path's backward, one work-item per element of a workspace of rows x seqlen_kv
 * (rows counted from row_base, the chunk's first): bwd_probs turns S into P = exp(S - LSE), 0
 * where masked or where the row saw no key (LSE = -inf); bwd_dscores turns dP (ds_off elements
 * after P in the same workspace) into dS = P (dP - D) (with SOFTCAP times 1 - t^2, t recovered
 * from P and the row's LSE as (log P + LSE) / cap: where P underflows to 0, dS is 0 anyway);
 * bwd_rowdot (below) computes D = rowsum(dO o O) per row of the strided views, a row a
 * work-item. base counts work-groups, as clattn__std_launch passes it: launches after the first
 * start base work-groups in (base * 64 elements here, base * 64 rows in bwd_rowdot). */
__kernel void bwd_probs(__global float *s, __global const float *lse, const uint seqlen_q,
                        const uint seqlen_kv, const ulong row_base, const ulong n,
                        const ulong base VARIANT_ARGS) {
  const ulong g = base * get_local_size(0) + get_global_id(0);
  if (g >= n) return;
  const uint j = (uint)(g % seqlen_kv);
  const ulong r = g / seqlen_kv;
  const float l = lse[row_base + r];
#if ALIBI
  const float slope = ALIBI_SLOPE((row_base + r) / seqlen_q);
#endif
  SEQ_BEGIN((row_base + r) / seqlen_q / kv_heads);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  bool ok = l != -INFINITY;
#if SEQLENS
  ok = ok && j < seqlen_kv;
#endif
#if CAUSAL
  ok = ok && (long)j <= (long)(r % seqlen_q) + (long)seqlen_kv - (long)seqlen_q;
#endif
#if MASK
  const uint i = (uint)(r % seqlen_q);
  ok = ok && j >= mask_key(i, mask_lo, seqlen_kv) && j < mask_key(i, mask_hi, seqlen_kv);
#endif
  s[g] = ok ? exp(SCORE(s[g], r % seqlen_q, j) - l) : 0.0f;
}
#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif

__kernel void bwd_dscores(__global float *ws, const ulong ds_off, __global const float *drow,
                          const uint seqlen_kv, const ulong row_base, const ulong n,
                          const ulong base, __global const float *lse,
                          const uint seqlen_q VARIANT_ARGS) {
  const ulong g = base * get_local_size(0) + get_global_id(0);
  if (g >= n) return;
  float dt = 1.0f;
#if SOFTCAP
  /* The capped score cap t is log P + LSE, less ALiBi's bias. */
  const float p = ws[g];
  const ulong gr = row_base + g / seqlen_kv;
  float x = p > 0.0f ? log(p) + lse[gr] : 0.0f;
#if ALIBI
  const uint j = (uint)(g % seqlen_kv);
  SEQ_BEGIN(gr / seqlen_q / kv_heads);
#if SEQLENS /* this entry's lengths from here on (cl/common.cl) */
#define seqlen_q seqlen_q_b
#define seqlen_kv seqlen_kv_b
#define mask_lo mask_lo_b
#define mask_hi mask_hi_b
#endif
  if (p > 0.0f) x -= ALIBI_BIAS(ALIBI_SLOPE(gr / seqlen_q), gr % seqlen_q, j);
#if SEQLENS
#undef seqlen_q
#undef seqlen_kv
#undef mask_lo
#undef mask_hi
#endif
#endif
  const float t = x / softcap;
  dt = 1.0f - t * t;
#endif
  ws[ds_off + g] = ws[g] * (ws[ds_off + g] - drow[row_base + g / seqlen_kv]) * dt;
}

/* bwd_rowdot: a warp of 32 work-items owns 32 rows (a work-group of 64, two warps). For each 32
 * columns it loads the 32 rows' columns a row at a time (32 contiguous elements a load) into a
 * padded 32 x 33 tile of local memory, then each work-item sums its own row's columns in column
 * order by fma: the same D as a sum over the row in order, which the standard path's dS = P (dP
 * - D) is sensitive to where P is uniform (tests/test_standard.c's broadcast keys failed its
 * tolerance with a tree's order). Before, one work-item a row read 16-bit columns a row apart a
 * load (0.30 ms on an H100 where the bytes take 0.05), and then 32 a row summed by their first
 * work-item alone (0.34 ms): both were bound by a single chain of dependent loads and fmas a
 * row per warp, not by memory (docs/BENCHMARKS.md). */
#define RD_PAD 33 /* a row of the tile: lane l reads word l * 33 + k, bank (l + k) % 32 */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void
bwd_rowdot(__global const stor_t *o, const ulong o_off, const ulong o_sb, const ulong o_ss,
           const ulong o_sh, __global const stor_t *d_o, const ulong g_off, const ulong g_sb,
           const ulong g_ss, const ulong g_sh, __global float *drow, const uint heads_q,
           const uint seqlen_q, const uint dv, const ulong n, const uint h_inner,
           const ulong base) {
  __local float lo[2 * 32 * RD_PAD], lg[2 * 32 * RD_PAD];
  __local ulong rob[64], rgb[64];
  const uint lid = get_local_id(0), lane = lid % 32, w = lid / 32;
  /* Work-item x takes the x-th row in the views' order: heads inner where a head's rows are
   * closer than a position's (bshd), so that the rows read at once are one stretch of memory.
   * In D's own order ([batch][head][position]) a bshd view's rows read at once were one head's,
   * 256 bytes of every 4 KB, and the kernel took 0.30 ms where the bytes take 0.05 on an H100. */
  const ulong x = (base + get_group_id(0)) * 64 + lid;
  ulong r = n; /* this work-item's row of D, n for none */
  if (x < n) {
    const ulong bn = h_inner ? x / heads_q : x % seqlen_q + x / ((ulong)seqlen_q * heads_q) * seqlen_q;
    const uint h = h_inner ? (uint)(x % heads_q) : (uint)(x / seqlen_q % heads_q);
    const uint i = (uint)(bn % seqlen_q);
    const ulong b = bn / seqlen_q;
    r = (b * heads_q + h) * seqlen_q + i;
    rob[lid] = o_off + b * o_sb + (ulong)i * o_ss + h * o_sh;
    rgb[lid] = g_off + b * g_sb + (ulong)i * g_ss + h * g_sh;
  }
  const ulong x0 = x - lane; /* the warp's first */
  __local float *to = lo + w * 32 * RD_PAD, *tg = lg + w * 32 * RD_PAD;
  float acc = 0.0f;
  for (uint c0 = 0; c0 < dv; c0 += 32) { /* uniform over the work-group: barriers inside */
    barrier(CLK_LOCAL_MEM_FENCE);        /* rob, rgb written; the last chunk's sums done */
    const uint c = c0 + lane;
    /* Every load of the 32 rows issued before any is stored: the loads' latency is paid once a
     * chunk, not once a row (which, not the bytes, is what bound this kernel before). */
    float xo[32], xg[32];
#pragma unroll
    for (uint k = 0; k < 32; k++) {
      const bool in = x0 + k < n && c < dv;
      const uint at = 32 * w + k;
      xo[k] = in ? LDS(o + rob[at] + c) : 0.0f;
      xg[k] = in ? LDS(d_o + rgb[at] + c) : 0.0f;
    }
#pragma unroll
    for (uint k = 0; k < 32; k++) to[k * RD_PAD + lane] = xo[k], tg[k * RD_PAD + lane] = xg[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint m = dv - c0 < 32 ? dv - c0 : 32;
    for (uint k = 0; k < m; k++) acc = fma(to[lane * RD_PAD + k], tg[lane * RD_PAD + k], acc);
  }
  if (r < n) drow[r] = acc;
}

/* With SINKS: each row's sum of P dP over its keys, the chunk's P matrices and its dP ds_off
 * elements after them, into pdp[pdp_off + row_base + r] (for bwd_sinks). One work-item per row;
 * base counts work-groups. */
__kernel void bwd_pdp(__global const float *ws, const ulong ds_off, __global float *pdp,
                      const ulong pdp_off, const uint seqlen_kv, const ulong row_base,
                      const ulong rows, const ulong base) {
  const ulong r = base * get_local_size(0) + get_global_id(0);
  if (r >= rows) return;
  const ulong at = r * seqlen_kv;
  float acc = 0.0f;
  /* Unrolled so that eight keys' loads are in flight at once (the sum's order is kept): a loop
   * of one load a trip pays a memory latency a key (bwd_rowdot's lesson, docs/BENCHMARKS.md). */
#pragma unroll 8
  for (uint j = 0; j < seqlen_kv; j++) acc = fma(ws[at + j], ws[ds_off + at + j], acc);
  pdp[pdp_off + row_base + r] = acc;
}

/* d_sinks[h] = -sum over the batch and the rows of head h of P_sink D, P_sink = exp(sink - LSE)
 * the sink's probability (its value is 0, so dS of the sink is P_sink (0 - D)), over the rows'
 * LSE and D (bwd_rowdot's). One work-group of WG per head, each work-item a fixed stride of rows,
 * then a tree: the same sum run to run. D is the rows' sum of P dP (PDP_ARG of cl/common.cl, from
 * pdp_off on), not bwd_rowdot's from the stored O. Rows with LSE = -inf (only where the sink is
 * -inf too) add nothing. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
bwd_sinks(__global const float *lse, __global const float *pdp, __global const float *sinks,
          __global float *d_sinks, const uint heads_q, const uint seqlen_q, const ulong batch,
          const ulong pdp_off) {
  __local float red[WG];
  const uint h = get_group_id(0), t = get_local_id(0);
  const float sink = sinks[h];
  float acc = 0.0f;
  for (ulong b = 0; b < batch; b++) {
    const ulong base = (b * heads_q + h) * seqlen_q;
    for (uint i = t; i < seqlen_q; i += WG) {
      const float l = lse[base + i];
      const float pd = pdp[pdp_off + base + i];
      /* pd = 0 also marks varlen's rows in no sequence, whose LSE was never written */
      if (l != -INFINITY && pd != 0.0f) acc = fma(exp(sink - l), pd, acc);
    }
  }
  acc = group_sum(red, acc);
  if (t == 0) d_sinks[h] = -acc;
}

/* The standard path's packed copy of a view CLBlast cannot read in place: one whose row stride
 * is below the row's length (a broadcast's 0, overlapping rows), or any view in half storage,
 * which is widened here to the fp32 that SGEMM reads. The [rows][cols] matrix of each batch*heads
 * entry from `first` on, one after another from dst_off. group: query heads per head of the view
 * (K and V under GQA). One work-item per element; base counts work-groups. */
__kernel void pack_rows(__global float *dst, const ulong dst_off, __global const stor_t *src,
                        const ulong off, const ulong sb, const ulong ss, const ulong sh,
                        const uint heads_q, const uint group, const uint rows, const uint cols,
                        const ulong first, const ulong n, const ulong base) {
  const ulong g = base * get_local_size(0) + get_global_id(0);
  if (g >= n) return;
  const uint c = (uint)(g % cols);
  const ulong m = g / cols;
  const uint r = (uint)(m % rows);
  const ulong bh = first + m / rows;
  const ulong b = bh / heads_q;
  const uint h = (uint)(bh % heads_q) / group;
  dst[dst_off + g] = LDS(src + off + b * sb + (ulong)r * ss + h * sh + c);
}

/* The way out of the workspace for a half output (O, dQ, dK, dV): its GEMM wrote fp32
 * [rows][cols] matrices from src_off, entry e of the view (b * heads + h, heads: the view's own)
 * in matrix e % slots; each element is rounded to nearest even into the strided view. Entries
 * [first, first + n / (rows * cols)). One work-item per element; base counts work-groups. */
__kernel void store_rows(__global stor_t *dst, const ulong off, const ulong sb, const ulong ss,
                         const ulong sh, __global const float *src, const ulong src_off,
                         const uint heads, const uint rows, const uint cols, const ulong first,
                         const ulong slots, const ulong n, const ulong base) {
  const ulong g = base * get_local_size(0) + get_global_id(0);
  if (g >= n) return;
  const uint c = (uint)(g % cols);
  const ulong m = g / cols;
  const uint r = (uint)(m % rows);
  const ulong e = first + m / rows;
  const ulong b = e / heads;
  const uint h = (uint)(e % heads);
  const ulong mat = (ulong)rows * cols;
  STS(dst + off + b * sb + (ulong)r * ss + h * sh + c,
      src[src_off + (e % slots) * mat + (ulong)r * cols + c]);
}
