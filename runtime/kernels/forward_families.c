/* The forward families' models (registry.c's entries forward_rows, forward_tiles, forward_mma):
 * local memory, legality, the heuristic's cost, -D defines and reasons, and the argument binding
 * they share. Each byte formula mirrors the __local arrays of its cl/ file; keep them in step. */
#include "families.h"

#include <math.h>
#include <stdio.h>

static unsigned round8(unsigned n) {
  return (n + 7) / 8 * 8;
}

static unsigned ilog2(unsigned x) {
  unsigned r = 0;
  while (x > 1) x >>= 1, r++;
  return r;
}

static unsigned udiff(unsigned a, unsigned b) {
  return a > b ? a - b : b - a;
}

int clattn__fam_is_cpu(const clattn__device *dev) {
  return (dev->type & CL_DEVICE_TYPE_CPU) || dev->local_mem_emulated;
}

static unsigned vec_of(const clattn__config *c) {
  return c->vec ? c->vec : 1;
}

static unsigned rm_of(const clattn__config *c) {
  return c->rm ? c->rm : 1;
}

/* ---- forward_rows (cl/forward.cl): Qs and Ss transposed, K/V staged or read from global ---- */

size_t clattn__rows_local(const clattn__device *dev, const clattn__class *k,
                          const clattn__config *c) {
  size_t floats = (size_t)(c->bq + c->pad) * (k->d + c->bkv);
  if (c->stage) floats += (size_t)c->bkv * (k->d + c->pad) + (size_t)c->bkv * (k->dv + c->pad);
  return floats * sizeof(float);
}

void clattn__rows_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = (size_t)c->bq * c->tpr;
}

/* Lower is better. GPUs: a work-group of about 128, at most 16 output accumulators per
 * work-item (more spills registers at large head dims), the largest K/V tile that fits (fewer
 * passes over the online-softmax bookkeeping), padded rows against bank conflicts. CPUs (PoCL
 * runs a work-group as loops over its work-items): ranked after forward_tiles' likely configs,
 * one row per work-item, no staging copy (local memory is ordinary memory there). Vector loads
 * rank just after the same config with scalar loads: the heuristic keeps what has been
 * measured, the tuner tries both. GPU costs start at 100, below which forward_mma_half ranks
 * on tensor cores in half storage. */
unsigned clattn__rows_cost(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c) {
  unsigned wg = (unsigned)(c->bq * c->tpr), dvp = (k->dv + c->tpr - 1) / c->tpr, s = 0;
  if (clattn__fam_is_cpu(dev)) {
    s += 50 + 40 * ilog2(c->tpr) + 4 * udiff(ilog2(c->bq), 6) + 4 * udiff(ilog2(c->bkv), 6);
    s += (c->stage ? 2 : 0) + (c->pad ? 1 : 0);
  } else {
    s += 100 + 10 * udiff(ilog2(wg), 7);
    if (dvp > 16) s += 20 * (dvp / 16);
    if (c->tpr > k->dv) s += 50; /* idle work-items */
    s += 3 * (7 - ilog2(c->bkv)) + (c->stage ? 0 : 100) + (c->pad ? 0 : 1);
  }
  return s + (vec_of(c) > 1 ? 1 : 0);
}

void clattn__rows_defines(const clattn__family *f, const clattn__device *dev,
                          const clattn__class *k, const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTPR=%u -DSTAGE_KV=%u -DPAD=%u "
           "-DCAUSAL=%u -DVEC=%u",
           k->d, k->dv, c->bq, c->bkv, c->tpr, c->stage, c->pad, k->causal, vec_of(c));
}

void clattn__rows_reason(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                         const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "%s heuristic: %.1f of %.1f KiB local memory, %zu work-items, %u keys per tile, "
           "%u output columns per work-item%s",
           clattn__fam_is_cpu(dev) ? "CPU" : "GPU", clattn__rows_local(dev, k, c) / 1024.0,
           dev->local_mem / 1024.0, (size_t)c->bq * c->tpr, c->bkv, (k->dv + c->tpr - 1) / c->tpr,
           c->stage ? ", K/V staged in local memory" : "");
}

/* ---- forward_tiles (cl/forward_tiles.cl): Qs, Ks, Vs, Ps, Red; register micro-tiles ---- */

size_t clattn__tiles_local(const clattn__device *dev, const clattn__class *k,
                           const clattn__config *c) {
  size_t bqp = c->bq + c->pad, bkvp = c->bkv + c->pad;
  size_t floats = (size_t)k->d * bqp + (size_t)k->d * bkvp + (size_t)c->bkv * (k->dv + c->pad) +
                  (size_t)c->bkv * bqp + (size_t)c->bq * c->tpr;
  return floats * sizeof(float);
}

void clattn__tiles_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = (size_t)(c->bq / rm_of(c)) * c->tpr;
}

/* CPUs (PoCL): one work-item per row over a 32-key block, each holding its scores and
 * accumulators in registers, measured 1.6-4.3x forward_rows' best heuristic config on PoCL for
 * head dims 32-256 (docs/BENCHMARKS.md). GPUs: ranked after forward_rows until measurements
 * (the tuner, built-in defaults) choose it; among its configs a work-group of about 128, a
 * micro-tile of 8 to 32 scores, at most 64 accumulators. */
unsigned clattn__tiles_cost(const clattn__family *f, const clattn__device *dev,
                            const clattn__class *k, const clattn__config *c) {
  unsigned rm = rm_of(c), s;
  if (clattn__fam_is_cpu(dev)) {
    s = 4 * udiff(ilog2(c->bq), 7) + 4 * udiff(ilog2(c->bkv), 5) + 40 * ilog2(c->tpr) +
        20 * ilog2(rm) + (c->pad ? 1 : 0);
  } else {
    unsigned wg = (c->bq / rm) * c->tpr, rn = c->bkv / c->tpr;
    unsigned acc = rm * ((k->dv + c->tpr - 1) / c->tpr);
    s = 1000 + 10 * udiff(ilog2(wg), 7);
    if (rm * rn < 8) s += 5 * (ilog2(8) - ilog2(rm * rn));
    if (rm * rn > 32) s += 5 * (ilog2(rm * rn) - ilog2(32)); /* registers */
    if (acc > 64) s += 20 * (acc / 64);
    s += c->pad ? 0 : 1;
  }
  return s + (vec_of(c) > 1 ? 1 : 0);
}

void clattn__tiles_defines(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTX=%u -DRM=%u -DPAD=%u -DCAUSAL=%u "
           "-DVEC=%u",
           k->d, k->dv, c->bq, c->bkv, c->tpr, rm_of(c), c->pad, k->causal, vec_of(c));
}

void clattn__tiles_reason(const clattn__family *f, const clattn__device *dev,
                          const clattn__class *k, const clattn__config *c, char *out, size_t len) {
  size_t wg;
  clattn__tiles_work_groups(c, &wg);
  snprintf(out, len,
           "forward_tiles: %.1f of %.1f KiB local memory, %zu work-items, each %u rows x %u "
           "keys of S and %u output columns",
           clattn__tiles_local(dev, k, c) / 1024.0, dev->local_mem / 1024.0, wg, rm_of(c),
           c->bkv / c->tpr, (k->dv + c->tpr - 1) / c->tpr);
}

unsigned clattn__tiles_min_block_q(const clattn__config *c) {
  return rm_of(c);
}

/* ---- forward_mma (cl/forward_mma.cl): NVIDIA tensor cores, a warp per 16 rows ---- */

size_t clattn__mma_local(const clattn__device *dev, const clattn__class *k,
                         const clattn__config *c) {
  unsigned dp = (k->d + 15) / 16 * 16, vt = round8(k->dv) / 8, ks = dp, vs = 8 * vt;
  if (c->pad) {
    ks = dp % 32 ? dp : dp + 16;
    vs = (8 * (vt % 8 ? vt : vt + 4) + 15) / 16 * 16 + 4;
  }
  /* stage 2: hi and lo parts (Ks2, Vs2 there) */
  return (size_t)c->bkv * (ks + vs) * (c->stage == 2 ? 2 : 1) * sizeof(float);
}

void clattn__mma_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = (size_t)c->bq * 2 / rm_of(c); /* a warp of 32 per 16 rows (forward_mma_half: 16 RM) */
}

/* Four warps (64 rows) and 32-key tiles, padded, ranked after the portable families until
 * measurements on the devices that have them make it a default (built-ins, the tuner, whose
 * correctness gate judges it). Tiles stored split where they fit: 6% faster at d = 64 on the
 * H200 (docs/BENCHMARKS.md). */
unsigned clattn__mma_cost(const clattn__family *f, const clattn__device *dev,
                          const clattn__class *k, const clattn__config *c) {
  return 3000 + 10 * udiff(ilog2(c->bq), 6) + 10 * udiff(ilog2(c->bkv), 5) + (c->pad ? 0 : 5) +
         (c->stage == 2 ? 0 : 2) + (vec_of(c) > 1 ? 1 : 0);
}

void clattn__mma_defines(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                         const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DPAD=%u -DCAUSAL=%u -DVEC=%u "
           "-DKVSPLIT=%u%s",
           k->d, k->dv, c->bq, c->bkv, c->pad ? 1u : 0u, k->causal, vec_of(c),
           c->stage == 2 ? 1u : 0u, dev->mma_emulated ? CLATTN__MMA_EMULATE_OPTIONS : "");
}

void clattn__mma_reason(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                        const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "forward_mma: tensor cores (3xTF32 mma.sync), %.1f of %.1f KiB local memory, %u "
           "warps of 16 rows, %u-key tiles%s",
           clattn__mma_local(dev, k, c) / 1024.0, dev->local_mem / 1024.0, c->bq / 16, c->bkv,
           c->stage == 2 ? " stored split into TF32 parts" : "");
}

unsigned clattn__mma_min_block_q(const clattn__config *c) {
  return 16 * rm_of(c);
}

/* ---- what the forward families share ---- */

/* Rows per work-item are a config field of the families that search them (forward_tiles). */
static int has_axis(const clattn__family *f, unsigned field) {
  for (unsigned a = 0; a < f->naxes; a++)
    if (f->axes[a].field == field) return 1;
  return 0;
}

/* 1 when the family's axis of field lists value. */
static int axis_lists(const clattn__family *f, unsigned field, unsigned value) {
  for (unsigned a = 0; a < f->naxes; a++)
    for (unsigned i = 0; f->axes[a].field == field && i < f->axes[a].n; i++)
      if (f->axes[a].values[i] == value) return 1;
  return 0;
}

unsigned clattn__one_row(const clattn__config *c) {
  return 1;
}

/* The forward's rules, in the order their messages have always come: sizes, vector width, the
 * family's own, then local memory (with the emulated tensor cores' scratch) and work-group. */
int clattn__forward_check(const clattn__family *f, const clattn__device *dev,
                          const clattn__class *k, const clattn__config *c, char *why,
                          size_t why_len) {
  if (c->bq == 0 || c->bkv == 0 || c->tpr == 0) {
    snprintf(why, why_len, "tile sizes must be positive and the kernel variant known");
    return 0;
  }
  unsigned vec = vec_of(c);
  if ((vec != 1 && vec != 2 && vec != 4) || k->d % vec || k->dv % vec) {
    snprintf(why, why_len, "vector width %u: must be 1, 2 or 4 and divide head_dim %u and %u", vec,
             k->d, k->dv);
    return 0;
  }
  if (f->tensor_cores && !dev->tensor_cores) {
    snprintf(why, why_len,
             "%s needs an NVIDIA GPU of compute capability 8.0 or more (mma.sync %s through "
             "inline PTX)",
             f->name, !f->dtypes || (f->dtypes & 1u << CLATTN_F32) ? "TF32" : "f16/bf16");
    return 0;
  }
  if (f->tensor_cores && c->tpr != 1) {
    snprintf(why, why_len, "%s threads_per_row %u: must be 1 (a warp per 16 rows)", f->name,
             c->tpr);
    return 0;
  }
  if (f->tensor_cores && (c->bq % 16 || c->bkv % 8)) {
    snprintf(why, why_len,
             "%s BQ=%u BKV=%u: BQ must be a multiple of 16 (rows per warp) and BKV of 8", f->name,
             c->bq, c->bkv);
    return 0;
  }
  if (has_axis(f, CLATTN__AX_RM) && (c->bq % rm_of(c) || c->bkv % c->tpr)) {
    snprintf(why, why_len,
             "%s BQ=%u BKV=%u: BQ must be a multiple of the rows per work-item (%u) and BKV of "
             "the work-items along the keys (%u)",
             f->name, c->bq, c->bkv, rm_of(c), c->tpr);
    return 0;
  }
  size_t bytes = f->local_bytes(dev, k, c), wg;
  f->work_groups(c, &wg);
  /* Emulated, the tensor-core kernels also hold scratch per warp (cl/mma.cl). */
  if (f->tensor_cores && dev->mma_emulated)
    bytes += (size_t)c->bq / 16 * CLATTN__MMA_SCRATCH * sizeof(float);
  if (bytes > dev->local_mem) {
    snprintf(why, why_len, "BQ=%u BKV=%u: needs %.1f KiB local memory, device has %.1f KiB", c->bq,
             c->bkv, bytes / 1024.0, dev->local_mem / 1024.0);
    return 0;
  }
  if (wg > dev->max_work_group || wg > dev->max_item_size[0]) {
    snprintf(why, why_len, "work-group of %zu exceeds the device's limit of %zu", wg,
             dev->max_work_group < dev->max_item_size[0] ? dev->max_work_group
                                                         : dev->max_item_size[0]);
    return 0;
  }
  if (why_len) why[0] = 0;
  return 1;
}

/* A public forward config as a family's: forward_rows stages K/V as asked; the families that
 * fix staging (forward_tiles, forward_mma) always stage them, forward_mma split when asked;
 * decode takes stage 2 (V loaded with K), 3 (the next block's K with V) or 1. Rows per work-item
 * mean something to forward_tiles, forward_mma_half (m16 tiles a warp) and decode only. */
int clattn__forward_accept(const clattn__family *f, const clattn_config *in, clattn__config *out,
                           char *why, size_t why_len) {
  int tiles = has_axis(f, CLATTN__AX_RM);
  if (!in->block_q || !in->block_kv || !in->threads_per_row || in->block_q > 4096 ||
      in->block_kv > 4096 || in->threads_per_row > 1024 || in->stage_kv > 4 || in->pad > 64 ||
      in->rows_per_item > 1024 || in->vector_width > 16) {
    snprintf(why, why_len,
             "config out of range: block_q %u, block_kv %u (1..4096), threads_per_row %u "
             "(1..1024), stage_kv %u (0..4), pad %u (0..64)",
             in->block_q, in->block_kv, in->threads_per_row, in->stage_kv, in->pad);
    return 0;
  }
  out->bq = in->block_q, out->bkv = in->block_kv, out->tpr = in->threads_per_row;
  out->stage = in->stage_kv, out->pad = in->pad;
  out->vec = in->vector_width ? in->vector_width : 1;
  out->rm = tiles && in->rows_per_item ? in->rows_per_item : 1;
  /* A family whose stage axis lists 2 or 3 (decode: V loaded with K; the next block's K loaded
   * with V) takes them, and 1 for anything else; the fixed-staging families take 2 on tensor
   * cores only. */
  int stage2 = axis_lists(f, CLATTN__AX_STAGE, 2), stage3 = axis_lists(f, CLATTN__AX_STAGE, 3);
  int stage4 = axis_lists(f, CLATTN__AX_STAGE, 4);
  if (in->stage_kv == 2 && !f->tensor_cores && !stage2) {
    snprintf(why, why_len,
             "stage_kv 2 is forward_mma's (tiles stored split into TF32 parts) and decode's (V "
             "loaded with K) alone");
    return 0;
  }
  if (in->stage_kv == 3 && !stage3) {
    snprintf(why, why_len,
             "stage_kv 3 is decode's (the next block's K loaded with V) and forward_mma_half's "
             "(one stage of K and V, staggered) alone");
    return 0;
  }
  if (in->stage_kv == 4 && !stage4) {
    snprintf(why, why_len,
             "stage_kv 4 is forward_mma_half's alone (one stage of K and V, staggered, Q in "
             "local memory)");
    return 0;
  }
  if (f->fixed.stage) out->stage = f->tensor_cores && in->stage_kv == 2 ? 2 : 1;
  if (stage2 && (out->stage < 2 || out->stage > 4)) out->stage = 1;
  return 1;
}

/* The forward kernels' arguments (cl/forward.cl's clattn_forward, shared by every forward
 * family, cl/decode.cl's too) up to the variants': buffers, views, sizes, the launch's first
 * group (its index in *base_arg), then the split ranges. tiles: the work-groups along the rows
 * of one (batch, head) or, for decode, one (batch, KV head). */
clattn__args clattn__forward_args(const clattn__bound *b, cl_kernel kernel, cl_uint tiles,
                                  cl_uint *base_arg) {
  const clattn__shape *s = b->s;
  cl_uint splits = b->split ? b->split->count : 1;
  cl_uint per_split = b->split ? b->split->kv_per_split : (cl_uint)s->seqlen_kv;
  cl_ulong o_split = b->split ? b->split->o_split : 0, lse_off = b->split ? b->split->lse_off : 0,
           lse_split = b->split ? b->split->lse_split : 0;
  clattn__args a = {kernel, 0, CL_SUCCESS, b->memo};
  cl_mem bufs[5] = {b->q->buffer, b->k->buffer, b->v->buffer, b->o->buffer, b->lse};
  for (int i = 0; i < 5; i++) clattn__arg_mem(&a, &bufs[i]);
  clattn__arg_view(&a, b->q);
  clattn__arg_view(&a, b->k);
  clattn__arg_view(&a, b->v);
  clattn__arg_view(&a, b->o);
  cl_uint heads = (cl_uint)s->heads_q, group = (cl_uint)(s->heads_q / s->heads_kv),
          nq = (cl_uint)s->seqlen_q, nkv = (cl_uint)s->seqlen_kv;
  /* With a softcap the scores are scale q.k / cap, capped by tanh and brought back to log2
   * units by the cap argument (cl/common.cl's SOFTCAP). */
  cl_float scale_log2 =
      (cl_float)(s->softcap > 0.0f ? (double)s->scale / s->softcap : s->scale * M_LOG2E);
  cl_int write_lse = b->lse != NULL;
  clattn__arg(&a, sizeof heads, &heads);
  clattn__arg(&a, sizeof group, &group);
  clattn__arg(&a, sizeof nq, &nq);
  clattn__arg(&a, sizeof nkv, &nkv);
  clattn__arg(&a, sizeof tiles, &tiles);
  *base_arg = a.next;
  cl_ulong base = 0;
  clattn__arg(&a, sizeof base, &base);
  clattn__arg(&a, sizeof scale_log2, &scale_log2);
  clattn__arg(&a, sizeof write_lse, &write_lse);
  clattn__arg(&a, sizeof splits, &splits);
  clattn__arg(&a, sizeof per_split, &per_split);
  clattn__arg(&a, sizeof o_split, &o_split);
  clattn__arg(&a, sizeof lse_off, &lse_off);
  clattn__arg(&a, sizeof lse_split, &lse_split);
  /* Half storage: cl/common.cl's OUT_ARG, the split's partials written as fp32. */
  cl_int o_f32 = b->split != NULL;
  if (s->dtype != CLATTN_F32) clattn__arg(&a, sizeof o_f32, &o_f32);
  clattn__arg_variants(&a, s, M_LOG2E);
  return a;
}

unsigned clattn__forward_bind(const clattn__family *f, const clattn__config *c,
                              const cl_kernel *kernels, const clattn__bound *b, clattn__launch *out,
                              cl_int *err) {
  const clattn__shape *s = b->s;
  size_t nqb = (s->seqlen_q + c->bq - 1) / c->bq;
  clattn__args a = clattn__forward_args(b, kernels[0], (cl_uint)nqb, &out[0].base_arg);
  *err = a.err;
  out[0].kernel = kernels[0], out[0].memo = a.memo;
  /* checked against overflow (ops) */
  out[0].groups = nqb * (b->split ? b->split->count : 1) * s->heads_q * s->batch;
  f->work_groups(c, &out[0].wg);
  return 1;
}
