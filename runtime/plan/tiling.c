/* Local-memory model of the forward kernel: which tile configs are legal on a device, and
 * which one the heuristic tries first. The byte formula mirrors the __local arrays of
 * cl/forward.cl; keep the two in step. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

static unsigned rows_per_item(const clattn__config *c) {
  return c->variant == 1 && c->rm ? c->rm : 1;
}

static unsigned round8(unsigned n) {
  return (n + 7) / 8 * 8;
}

size_t clattn__config_local_bytes(const clattn__config *c, const clattn__class *k) {
  if (c->variant == 2) { /* cl/forward_mma.cl: Ks, Vs (KS, VS there) */
    unsigned dp = (k->d + 15) / 16 * 16, vt = round8(k->dv) / 8, ks = dp, vs = 8 * vt;
    if (c->pad) {
      ks = dp % 32 ? dp : dp + 16;
      vs = (8 * (vt % 8 ? vt : vt + 4) + 15) / 16 * 16 + 4;
    }
    /* stage 2: hi and lo parts (Ks2, Vs2 there) */
    return (size_t)c->bkv * (ks + vs) * (c->stage == 2 ? 2 : 1) * sizeof(float);
  }
  if (c->variant == 1) { /* cl/forward_tiles.cl: Qs, Ks, Vs, Ps, Red */
    size_t bqp = c->bq + c->pad, bkvp = c->bkv + c->pad;
    size_t floats = (size_t)k->d * bqp + (size_t)k->d * bkvp + (size_t)c->bkv * (k->dv + c->pad) +
                    (size_t)c->bkv * bqp + (size_t)c->bq * c->tpr;
    return floats * sizeof(float);
  }
  size_t floats = (size_t)(c->bq + c->pad) * (k->d + c->bkv); /* Qs and Ss, transposed */
  if (c->stage)
    floats += (size_t)c->bkv * (k->d + c->pad) + (size_t)c->bkv * (k->dv + c->pad); /* Ks, Vs */
  return floats * sizeof(float);
}

unsigned clattn__seqlen_bucket(size_t n) {
  unsigned b = 64;
  while (b < 65536 && b < n) b *= 4;
  return b;
}

size_t clattn__config_work_group(const clattn__config *c) {
  if (c->variant == 2) return (size_t)c->bq * 2; /* a warp of 32 per 16 rows */
  return (size_t)(c->bq / rows_per_item(c)) * c->tpr;
}

int clattn__config_legal(const clattn__device *dev, const clattn__class *k, const clattn__config *c,
                         char *why, size_t why_len) {
  if (c->bq == 0 || c->bkv == 0 || c->tpr == 0 || c->variant >= CLATTN__VARIANTS) {
    snprintf(why, why_len, "tile sizes must be positive and the kernel variant known");
    return 0;
  }
  unsigned vec = c->vec ? c->vec : 1;
  if ((vec != 1 && vec != 2 && vec != 4) || k->d % vec || k->dv % vec) {
    snprintf(why, why_len, "vector width %u: must be 1, 2 or 4 and divide head_dim %u and %u", vec,
             k->d, k->dv);
    return 0;
  }
  if (c->variant == 2 && !dev->tensor_cores) {
    snprintf(why, why_len,
             "forward_mma needs an NVIDIA GPU of compute capability 8.0 or more (mma.sync TF32 "
             "through inline PTX)");
    return 0;
  }
  if (c->variant == 2 && c->tpr != 1) {
    snprintf(why, why_len, "forward_mma threads_per_row %u: must be 1 (a warp per 16 rows)",
             c->tpr);
    return 0;
  }
  if (c->variant == 2 && (c->bq % 16 || c->bkv % 8)) {
    snprintf(why, why_len,
             "forward_mma BQ=%u BKV=%u: BQ must be a multiple of 16 (rows per warp) and BKV of 8",
             c->bq, c->bkv);
    return 0;
  }
  if (c->variant == 1 && (c->bq % rows_per_item(c) || c->bkv % c->tpr)) {
    snprintf(why, why_len,
             "forward_tiles BQ=%u BKV=%u: BQ must be a multiple of the rows per work-item (%u) "
             "and BKV of the work-items along the keys (%u)",
             c->bq, c->bkv, rows_per_item(c), c->tpr);
    return 0;
  }
  size_t bytes = clattn__config_local_bytes(c, k), wg = clattn__config_work_group(c);
  /* Emulated, forward_mma also holds scratch per warp (cl/mma.cl). */
  if (c->variant == 2 && dev->mma_emulated)
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

static unsigned ilog2(unsigned x) {
  unsigned r = 0;
  while (x > 1) x >>= 1, r++;
  return r;
}

static unsigned udiff(unsigned a, unsigned b) {
  return a > b ? a - b : b - a;
}

static int is_cpu(const clattn__device *dev) {
  return (dev->type & CL_DEVICE_TYPE_CPU) || dev->local_mem_emulated;
}

/* Lower is better. GPUs: a work-group of about 128, at most 16 output accumulators per
 * work-item (more spills registers at large head dims), the largest K/V tile that fits (fewer
 * passes over the online-softmax bookkeeping), padded rows against bank conflicts. CPUs
 * (PoCL runs a work-group as loops over its work-items): one row per work-item, tiles that
 * stay in the L2 cache, and no staging copy, since local memory is ordinary memory there. */
/* CPUs (PoCL): forward_tiles with one work-item per row over a 32-key block, each holding its
 * scores and accumulators in registers, measured 1.6-4.3x forward_rows' best heuristic config
 * on PoCL for head dims 32-256 (docs/BENCHMARKS.md). */
static unsigned cost_tiles_cpu(const clattn__config *c) {
  unsigned rm = c->rm ? c->rm : 1;
  return 4 * udiff(ilog2(c->bq), 7) + 4 * udiff(ilog2(c->bkv), 5) + 40 * ilog2(c->tpr) +
         20 * ilog2(rm) + (c->pad ? 1 : 0);
}

/* GPUs: the register-tiled variant is not yet preferred: it ranks after forward_rows until
 * measurements (the tuner, built-in defaults) choose it. Among its configs: a work-group of
 * about 128, a micro-tile of 8 to 32 scores, at most 64 accumulators. */
static unsigned cost_tiles(const clattn__class *k, const clattn__config *c) {
  unsigned wg = (unsigned)clattn__config_work_group(c), rm = rows_per_item(c);
  unsigned rn = c->bkv / c->tpr, acc = rm * ((k->dv + c->tpr - 1) / c->tpr);
  unsigned s = 1000 + 10 * udiff(ilog2(wg), 7);
  if (rm * rn < 8) s += 5 * (ilog2(8) - ilog2(rm * rn));
  if (rm * rn > 32) s += 5 * (ilog2(rm * rn) - ilog2(32)); /* registers */
  if (acc > 64) s += 20 * (acc / 64);
  return s + (c->pad ? 0 : 1);
}

/* Tensor cores: four warps (64 rows) and 32-key tiles, padded. Ranked after the portable
 * variants until measurements on the devices that have them (its accuracy included) make it a
 * default: the tuner seeds it and its correctness gate judges it. */
static unsigned cost_mma(const clattn__config *c) {
  /* Tiles stored split where they fit: 6% faster at d = 64 on the H200 (docs/BENCHMARKS.md). */
  return 3000 + 10 * udiff(ilog2(c->bq), 6) + 10 * udiff(ilog2(c->bkv), 5) + (c->pad ? 0 : 5) +
         (c->stage == 2 ? 0 : 2);
}

static unsigned cost_config(const clattn__device *dev, const clattn__class *k,
                            const clattn__config *c) {
  if (c->variant == 2) return cost_mma(c);
  if (c->variant == 1) return is_cpu(dev) ? cost_tiles_cpu(c) : cost_tiles(k, c);
  unsigned wg = (unsigned)clattn__config_work_group(c);
  unsigned dvp = (k->dv + c->tpr - 1) / c->tpr;
  unsigned s = 0;
  if (is_cpu(dev)) {
    s += 50; /* after forward_tiles' likely configs */
    s += 40 * ilog2(c->tpr);
    s += 4 * udiff(ilog2(c->bq), 6) + 4 * udiff(ilog2(c->bkv), 6);
    s += c->stage ? 2 : 0;
    s += c->pad ? 1 : 0;
  } else {
    s += 10 * udiff(ilog2(wg), 7);
    if (dvp > 16) s += 20 * (dvp / 16);
    if (c->tpr > k->dv) s += 50; /* idle work-items */
    s += 3 * (7 - ilog2(c->bkv));
    s += c->stage ? 0 : 100;
    s += c->pad ? 0 : 1;
  }
  return s;
}

/* Vector loads rank just after the same config with scalar loads: the heuristic keeps what has
 * been measured, the tuner tries both. */
static unsigned cost(const clattn__device *dev, const clattn__class *k, const clattn__config *c) {
  return cost_config(dev, k, c) + (c->vec > 1 ? 1 : 0);
}
typedef struct {
  clattn__config cfg;
  unsigned cost, order;
} ranked;

static int by_cost(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* The search space: forward_rows with every combination of these (and K/V staging and padding
 * on or off); forward_tiles with the tile sizes, work-items along the keys (tprs), rows per
 * work-item (rms) and padding. */
static const unsigned bqs[] = {128, 64, 32, 16, 8, 4, 2, 1}, bkvs[] = {128, 64, 32, 16, 8},
                      tprs[] = {1, 2, 4, 8, 16, 32}, rms[] = {1, 2, 4, 8}, vecs[] = {1, 4};
static const unsigned mma_bqs[] = {16, 32, 64, 128}, mma_bkvs[] = {8, 16, 32, 64, 128};
enum { ROWS_SPACE = 8 * 5 * 6 * 2 * 2 * 2, TILES_SPACE = 8 * 5 * 6 * 4 * 2 * 2 };
enum { MMA_SPACE = 4 * 5 * 2 * 2 * 2, SPACE = ROWS_SPACE + TILES_SPACE + MMA_SPACE };

size_t clattn__config_space_size(void) {
  return SPACE;
}

size_t clattn__configs_ranked(const clattn__device *dev, const clattn__class *k,
                              clattn__config *out, size_t cap) {
  enum { MAX = SPACE };
  ranked *all = malloc(MAX * sizeof *all);
  if (!all) return 0;
  size_t n = 0;
  char why[160];
  for (size_t a = 0; a < sizeof bqs / sizeof *bqs; a++)
    for (size_t b = 0; b < sizeof bkvs / sizeof *bkvs; b++)
      for (size_t t = 0; t < sizeof tprs / sizeof *tprs; t++)
        for (unsigned stage = 0; stage < 2; stage++)
          for (unsigned pad = 0; pad < 2; pad++)
            for (size_t v = 0; v < sizeof vecs / sizeof *vecs; v++) {
              clattn__config c = {bqs[a], bkvs[b], tprs[t], stage, pad, 0, 1, vecs[v]};
              if (!clattn__config_legal(dev, k, &c, why, sizeof why)) continue;
              all[n].cfg = c;
              all[n].cost = cost(dev, k, &c);
              all[n].order = (unsigned)n;
              n++;
            }
  for (size_t a = 0; a < sizeof bqs / sizeof *bqs; a++)
    for (size_t b = 0; b < sizeof bkvs / sizeof *bkvs; b++)
      for (size_t t = 0; t < sizeof tprs / sizeof *tprs; t++)
        for (size_t r = 0; r < sizeof rms / sizeof *rms; r++)
          for (unsigned pad = 0; pad < 2; pad++)
            for (size_t v = 0; v < sizeof vecs / sizeof *vecs; v++) {
              clattn__config c = {bqs[a], bkvs[b], tprs[t], 1, pad, 1, rms[r], vecs[v]};
              if (!clattn__config_legal(dev, k, &c, why, sizeof why)) continue;
              all[n].cfg = c;
              all[n].cost = cost(dev, k, &c);
              all[n].order = (unsigned)n;
              n++;
            }
  for (size_t a = 0; a < sizeof mma_bqs / sizeof *mma_bqs; a++)
    for (size_t b = 0; b < sizeof mma_bkvs / sizeof *mma_bkvs; b++)
      for (unsigned pad = 0; pad < 2; pad++)
        for (unsigned stage = 1; stage <= 2; stage++)
          for (size_t v = 0; v < sizeof vecs / sizeof *vecs; v++) {
            clattn__config c = {mma_bqs[a], mma_bkvs[b], 1, stage, pad, 2, 1, vecs[v]};
            if (!clattn__config_legal(dev, k, &c, why, sizeof why)) continue;
            all[n].cfg = c;
            all[n].cost = cost(dev, k, &c);
            all[n].order = (unsigned)n;
            n++;
          }
  qsort(all, n, sizeof *all, by_cost);
  size_t m = n < cap ? n : cap;
  for (size_t i = 0; i < m; i++) out[i] = all[i].cfg;
  free(all);
  return m;
}

void clattn__config_reason(const clattn__device *dev, const clattn__class *k,
                           const clattn__config *c, char *out, size_t len) {
  if (c->variant == 2) {
    snprintf(out, len,
             "forward_mma: tensor cores (3xTF32 mma.sync), %.1f of %.1f KiB local memory, %u "
             "warps of 16 rows, %u-key tiles%s",
             clattn__config_local_bytes(c, k) / 1024.0, dev->local_mem / 1024.0, c->bq / 16, c->bkv,
             c->stage == 2 ? " stored split into TF32 parts" : "");
    return;
  }
  if (c->variant == 1) {
    snprintf(out, len,
             "forward_tiles: %.1f of %.1f KiB local memory, %zu work-items, each %u rows x %u "
             "keys of S and %u output columns",
             clattn__config_local_bytes(c, k) / 1024.0, dev->local_mem / 1024.0,
             clattn__config_work_group(c), rows_per_item(c), c->bkv / c->tpr,
             (k->dv + c->tpr - 1) / c->tpr);
    return;
  }
  snprintf(out, len,
           "%s heuristic: %.1f of %.1f KiB local memory, %zu work-items, %u keys per tile, "
           "%u output columns per work-item%s",
           is_cpu(dev) ? "CPU" : "GPU", clattn__config_local_bytes(c, k) / 1024.0,
           dev->local_mem / 1024.0, clattn__config_work_group(c), c->bkv,
           (k->dv + c->tpr - 1) / c->tpr, c->stage ? ", K/V staged in local memory" : "");
}
