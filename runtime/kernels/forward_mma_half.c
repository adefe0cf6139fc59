/* The model of the forward_mma_half family (registry.c's entry; cl/forward_mma_half.cl): NVIDIA
 * tensor cores in half storage, mma.sync m16n8k16 f16/bf16 with fp32 accumulators, a warp per 16
 * or 32 query rows. Its local-memory formula mirrors the kernel's __local arrays; keep them in
 * step. Legality, accepting a public config and binding are the forward's (forward_families.c). */
#include "families.h"

#include <stdio.h>

/* The kernel's words of 16-bit pairs: K, a row of DP (+ 8 padded) values per key; V^T, a row of
 * BKV (+ 8 padded) values per output column of DVP. Stage 2: two stages of K and of V, a row of
 * D (+ 8) and DV (+ 8) values per key (unpadded: swizzled); stage 3 one of each; stage 4 also Q,
 * a row of D (+ 8) values per query row. */
size_t clattn__mma_half_local(const clattn__device *dev, const clattn__class *k,
                              const clattn__config *c) {
  size_t dp = (k->d + 15) / 16 * 16, dvp = (k->dv + 7) / 8 * 8, pad = c->pad ? 8 : 0;
  size_t kv = (size_t)c->bkv * (dp + pad + dvp + pad) * 2;
  if (c->stage == 2) return 2 * kv;
  if (c->stage == 3) return kv;
  if (c->stage == 4) return kv + (size_t)c->bq * (dp + pad) * 2;
  return ((size_t)c->bkv * (dp + pad) + dvp * (c->bkv + pad)) * 2;
}

/* Its own rules first (key tiles of P V's 16-key k-step, one staging, pairs loaded, not a
 * vector width), then the forward's (tensor cores, warps of 16 rows, local memory). */
int clattn__mma_half_check(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c, char *why,
                           size_t why_len) {
  if (c->bkv % 16) {
    snprintf(why, why_len, "%s BKV=%u: must be a multiple of 16 (P V's k-step)", f->name, c->bkv);
    return 0;
  }
  if (c->stage < 1 || c->stage > 4 || (c->vec && c->vec != 1)) {
    snprintf(why, why_len,
             "%s stage_kv %u, vector width %u: its tiles are staged through registers (stage_kv "
             "1), copied in two stages (2) or in one, staggered (3; 4 with Q in local memory), "
             "vector width 1",
             f->name, c->stage, c->vec);
    return 0;
  }
  unsigned rm = c->rm ? c->rm : 1;
  if ((rm != 1 && rm != 2) || c->bq % (16 * rm)) {
    snprintf(why, why_len,
             "%s BQ=%u rows_per_item=%u: a warp takes 1 or 2 m16 tiles of 16 rows "
             "(rows_per_item), BQ a multiple of 16 x rows_per_item",
             f->name, c->bq, rm);
    return 0;
  }
  if (c->stage >= 2 && (k->d % 16 || k->dv % 16 || (!c->pad && (k->d % 64 || k->dv % 64)))) {
    snprintf(why, why_len,
             "%s stage_kv %u at head dims %u, %u%s: its copies and ldmatrix take rows of whole "
             "16-value chunks (head dims multiples of 16), and unpadded rows are swizzled in "
             "groups of 8 chunks (multiples of 64)",
             f->name, c->stage, k->d, k->dv, c->pad ? "" : ", unpadded");
    return 0;
  }
  return clattn__forward_check(f, dev, k, c, why, why_len);
}

/* How many halvings or doublings lie between x and want (powers of two). */
static unsigned steps(unsigned x, unsigned want) {
  unsigned n = 0;
  while (x > want) x /= 2, n++;
  while (x && x < want) x *= 2, n++;
  return n;
}

/* On tensor cores, below every portable family's GPU cost (forward_rows' start at 100): this
 * is the family for half storage there, so a half class plans it before any measurement (the
 * built-in defaults are fp32 rows). Up to d = 128, one stage of K and V in FlashAttention-2's
 * order (stage 3) with four warps of two m16 tiles (128 rows) and 128-key tiles at d <= 64, 32
 * above: on an H100 1.04-1.14x two stages of the same rows, whose 128/64 and 128/32 were 1.06-
 * 1.41x four warps of one tile ("Stop 35", "Stop 32"); two stages next, then Q in local memory
 * (stage 4, within 3% of two stages). Larger head dims keep one tile a warp in two stages (two
 * tiles would double registers already spilling; stage 3 not timed there). Stage 1 (1.5-3.2x
 * slower than two stages): four warps of one tile and 64-key tiles, padded; fewer keys per
 * tile at large head dims. Emulated (tests on PoCL), ranked after everything, as forward_mma:
 * it runs there only as an override. */
unsigned clattn__mma_half_cost(const clattn__family *f, const clattn__device *dev,
                               const clattn__class *k, const clattn__config *c) {
  unsigned rm = c->rm > 1 ? c->rm : 1, small = k->d <= 128 && k->dv <= 128;
  unsigned two = c->stage >= 2 && small; /* two m16 tiles a warp */
  unsigned s = 10 * steps(c->bq / rm, 64) + (c->pad ? 0 : 5) + (rm == (two ? 2u : 1u) ? 0 : 3);
  if (c->stage == 3 && small)
    s += 10 * steps(c->bkv, k->d > 64 ? 32 : 128);
  else if (c->stage >= 2)
    s += 10 * steps(c->bkv, k->d > 64 ? 32 : 64) + (c->stage == 2 ? 2 : small ? 4 : 50);
  else
    s += 10 * steps(c->bkv, k->d > 128 ? 32 : 64) + 100;
  return (dev->mma_emulated ? 3000 : 0) + s;
}

/* On NVIDIA, fp32 denormals flushed (-cl-denorms-are-zero: ex2.approx and the fp32 arithmetic
 * of the softmax without their denormal fix-ups, as FlashAttention's --use_fast_math builds):
 * on an H100 the fp16 forward at N = 4096 ran 1.7-4.5% faster, and the half rule's checks held
 * (docs/BENCHMARKS.md, stop 37). A probability below 2^-126 of its row's largest then counts as
 * 0, far under the rule's tolerance. The backward's kernels keep denormals: there it was 1.5%
 * slower at d = 64 without a mask. */
void clattn__mma_half_defines(const clattn__family *f, const clattn__device *dev,
                              const clattn__class *k, const clattn__config *c, char *out,
                              size_t len) {
  snprintf(
      out, len,
      "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DRM=%u -DPAD=%u -DSTAGE=%u -DCAUSAL=%u%s%s",
      k->d, k->dv, c->bq, c->bkv, c->rm > 1 ? c->rm : 1u, c->pad ? 1u : 0u,
      c->stage ? c->stage : 1u, k->causal, c->stage >= 2 && !c->pad ? " -DSWZ=1" : "",
      dev->mma_emulated ? CLATTN__MMA_EMULATE_OPTIONS : " -cl-denorms-are-zero");
}

void clattn__mma_half_reason(const clattn__family *f, const clattn__device *dev,
                             const clattn__class *k, const clattn__config *c, char *out,
                             size_t len) {
  snprintf(out, len,
           "%s: tensor cores in half storage (mma.sync m16n8k16, fp32 accumulators), %.1f of "
           "%.1f KiB local memory, %u warps of %u rows, %u-key tiles%s",
           f->name, clattn__mma_half_local(dev, k, c) / 1024.0, dev->local_mem / 1024.0,
           c->bq / (16 * (c->rm > 1 ? c->rm : 1)), 16 * (c->rm > 1 ? c->rm : 1), c->bkv,
           c->stage == 2   ? " in two stages (cp.async, ldmatrix)"
           : c->stage == 3 ? " in one stage, V copied during S, K during P V (cp.async, ldmatrix)"
           : c->stage == 4 ? " in one stage, V copied during S, K during P V, Q in local memory "
                             "(cp.async, ldmatrix)"
                           : "");
}
