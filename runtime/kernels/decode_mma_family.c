/* The decode_mma family's model (registry.c's entry `decode_mma`, cl/decode_mma.cl): attention
 * over an fp16, bf16 or int8 KV cache (half queries) on tensor cores, a work-group of one warp per
 * (tile of a KV group's packed rows, KV head, key split) (issue 18). Its launch, tiles and
 * arguments are the decode family's (decode_family.c). */
#include "families.h"

#include <stdio.h>

#define QWORDS(k) ((k)->d / 2) /* a Q row's 32-bit words in local memory */

size_t clattn__decode_mma_local(const clattn__device *dev, const clattn__class *k,
                                const clattn__config *c) {
  size_t bytes = (size_t)(c->bq > 8 ? 16 : 8) * QWORDS(k) * sizeof(cl_uint) /* its QROWS */
                 + sizeof(cl_int); /* the merge's answer (cl/decode_common.cl's split_last) */
  if (dev->mma_emulated) bytes += CLATTN__MMA_SCRATCH * sizeof(float); /* one warp's */
  return bytes;
}

void clattn__decode_mma_work_groups(const clattn__config *c, size_t *wg) {
  (void)c;
  wg[0] = 32; /* one warp */
}

int clattn__decode_mma_check(const clattn__family *f, const clattn__device *dev,
                             const clattn__class *k, const clattn__config *c, char *why,
                             size_t why_len) {
  if (!dev->tensor_cores) {
    snprintf(why, why_len,
             "%s needs an NVIDIA GPU of compute capability 8.0 or more (mma.sync f16/bf16 "
             "through inline PTX)",
             f->name);
    return 0;
  }
  if (k->variants & CLATTN__VAR_KV8 && (k->d % 64 || k->dv % 32)) {
    snprintf(why, why_len,
             "%s: an int8 cache needs head_dim %u a multiple of 64 and head_dim_v %u of 32",
             f->name, k->d, k->dv);
    return 0;
  }
  if (k->d % 32 || k->dv % 16 || k->d > 128 || k->dv > 128) {
    snprintf(why, why_len,
             "%s: head_dim %u must be a multiple of 32 and head_dim_v %u of 16, both at most 128",
             f->name, k->d, k->dv);
    return 0;
  }
  if (!c->bq || c->bq > 16 || (c->bq & (c->bq - 1)) ||
      (c->bkv != 16 && c->bkv != 32 && c->bkv != 64) || c->tpr != 1) {
    snprintf(why, why_len,
             "%s BQ=%u BKV=%u TPR=%u: BQ a power of two up to 16 (one m16 fragment), BKV 16, "
             "32 or 64, TPR 1",
             f->name, c->bq, c->bkv, c->tpr);
    return 0;
  }
  /* (A problem's class before its call has no cache: the call's class decides.) */
  if (c->bkv == 64 && (k->variants & CLATTN__VAR_KVCACHE) && !(k->variants & CLATTN__VAR_KV8)) {
    snprintf(why, why_len,
             "%s BKV=64: for int8 caches only (four 16-key steps' loads at once; an fp16 or "
             "bf16 cache takes BKV 16 or 32)",
             f->name);
    return 0;
  }
  if (c->stage != 1 && (c->stage != 2 || c->bkv != 32)) {
    snprintf(why, why_len,
             "%s BKV=%u stage %u: stage 1 (a block's loads at its start), or 2 with BKV 32 (each "
             "16 keys' loads during the previous 16's math)",
             f->name, c->bkv, c->stage);
    return 0;
  }
  size_t bytes = clattn__decode_mma_local(dev, k, c);
  if (bytes > dev->local_mem) {
    snprintf(why, why_len, "%s BQ=%u: needs %.1f KiB local memory, device has %.1f KiB", f->name,
             c->bq, bytes / 1024.0, dev->local_mem / 1024.0);
    return 0;
  }
  if (why_len) why[0] = 0;
  return 1;
}

/* Ahead of decode wherever it is legal: about a dozen warp instructions a key of a GQA group
 * against decode's 75, no conversions, no barriers in its loop (cl/decode_mma.cl). Plain
 * classes: after every other family, as decode. The smallest tile that holds the rows is the
 * planner's (tight_rows); 16 first. */
unsigned clattn__decode_mma_cost(const clattn__family *f, const clattn__device *dev,
                                 const clattn__class *k, const clattn__config *c) {
  (void)f;
  unsigned s = c->bq == 16 ? 0 : c->bq == 8 ? 1 : 2;
  /* Two 16-key steps' loads at once (32-key blocks), and for int8 each step's loads issued
   * during the previous step's math (stage 2; for fp16 it only adds registers: 255 and 16 bytes
   * spilled). On an H100 forced at batch 64 without key ranges: fp16 32-key blocks 0.709 ms
   * against 0.764 for 16, int8 stage 2 0.602 against 0.735 for stage 1; through the planner at
   * batch 8 with 32k keys (17 ranges in both calls): fp16 0.475 against 0.487, int8 0.348
   * against 0.397 (docs/BENCHMARKS.md, c0ef1be, 8d23913, 8499235). */
  /* A paged fp16 or bf16 cache takes 16-key blocks: on an H100 at batch 8 with 32k keys, pages
   * of 16 and 64 read 89-90% of the stream with them against 72-73% with 32 (contiguous 92-93%
   * with either), where the 32-key blocks' loads wait on twice the block-table reads a step
   * (docs/BENCHMARKS.md, stop 37). int8 keeps 32 in two stages (16-key blocks, one stage: 57%
   * against 66%). */
  int paged16 = (k->variants & CLATTN__VAR_PAGED) && !(k->variants & CLATTN__VAR_KV8);
  s += (c->bkv == 32) == !paged16 ? 0 : 4;
  s += (c->stage == 2) == !(k->variants & CLATTN__VAR_KV8) ? 5 : 0;
  (void)dev;
  if (!(k->variants & CLATTN__VAR_KVCACHE)) s += 100000;
  return s;
}

void clattn__decode_mma_defines(const clattn__family *f, const clattn__device *dev,
                                const clattn__class *k, const clattn__config *c, char *out,
                                size_t len) {
  (void)f;
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DSTAGE=%u -DCAUSAL=%u -DPTX_FENCE=%d%s",
           k->d, k->dv, c->bq, c->bkv, c->stage, k->causal, !dev->mma_emulated,
           dev->mma_emulated ? CLATTN__MMA_EMULATE_OPTIONS : "");
}

void clattn__decode_mma_reason(const clattn__family *f, const clattn__device *dev,
                               const clattn__class *k, const clattn__config *c, char *out,
                               size_t len) {
  (void)f;
  snprintf(out, len,
           "decode_mma: a KV group's query heads packed %u rows to a warp's tile, Q K^T and P V "
           "on tensor cores (m16n8k16), %u-key blocks loaded straight into fragments%s; %.1f of "
           "%.1f KiB local memory, 32 work-items",
           c->bq, c->bkv,
           c->stage == 2 ? " (each 16 keys' loads during the previous 16's math)" : "",
           clattn__decode_mma_local(dev, k, c) / 1024.0, dev->local_mem / 1024.0);
}
