/* The decode family's model (registry.c's entry `decode`, cl/decode.cl): attention over a KV
 * cache with a KV group's query heads packed into one tile (issue 18). Its byte formula mirrors
 * the kernel's __local arrays; keep them in step. */
#include "families.h"

#include <math.h>
#include <stdio.h>

static unsigned wg_of(const clattn__config *c) {
  return c->bkv * c->tpr;
}

size_t clattn__decode_local(const clattn__device *dev, const clattn__class *k,
                            const clattn__config *c) {
  size_t floats = (size_t)c->bq * k->d + (size_t)k->d * (c->bkv + c->pad) +
                  (size_t)c->bkv * (k->dv + c->pad) + (size_t)c->bq * (c->bkv + c->pad) +
                  3 * (size_t)c->bq;
  size_t ints = k->variants & CLATTN__VAR_PAGED ? c->bkv : 0;
  return (floats + ints) * sizeof(float);
}

void clattn__decode_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = wg_of(c);
}

int clattn__decode_check(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                         const clattn__config *c, char *why, size_t why_len) {
  if (c->tpr > c->bq) {
    snprintf(why, why_len, "%s: TPR=%u row groups for BQ=%u rows: at most one per row", f->name,
             c->tpr, c->bq);
    return 0;
  }
  return clattn__forward_check(f, dev, k, c, why, why_len);
}

static unsigned ilog2(unsigned x) {
  unsigned r = 0;
  while (x > 1) x >>= 1, r++;
  return r;
}

static unsigned udiff(unsigned a, unsigned b) {
  return a > b ? a - b : b - a;
}

/* The one family of a cache class. For plain classes it ranks after every other family (the
 * heuristic never picks it; the tuner reaches it last, and may find it faster for a few query
 * rows against many keys with GQA). 16 packed rows fit a GQA group of 4 to 16 heads times 1 to
 * 4 query rows; GPUs: a work-group of about 128 and at most 32 accumulators per work-item; CPUs:
 * 64-key tiles, one row group. Unmeasured: the tuner and the H200's figures are to set these. */
unsigned clattn__decode_cost(const clattn__family *f, const clattn__device *dev,
                             const clattn__class *k, const clattn__config *c) {
  unsigned wg = wg_of(c), cw = wg < k->dv ? wg : k->dv, rgs = wg / cw;
  unsigned acc = ((c->bq + rgs - 1) / rgs) * ((k->dv + cw - 1) / cw);
  unsigned s = 10 * udiff(ilog2(c->bq), 4) + (c->pad ? 0 : 1) + (c->vec > 1 ? 0 : 2);
  if (!(k->variants & CLATTN__VAR_KVCACHE)) s += 100000; /* after the measured families */
  if (clattn__fam_is_cpu(dev)) return s + 4 * udiff(ilog2(c->bkv), 6) + 8 * ilog2(c->tpr);
  s += 6 * udiff(ilog2(wg), 7) + 2 * udiff(ilog2(c->bkv), 6);
  if (acc > 32) s += 10 * (acc / 32);
  return s;
}

void clattn__decode_defines(const clattn__family *f, const clattn__device *dev,
                            const clattn__class *k, const clattn__config *c, char *out,
                            size_t len) {
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTPR=%u -DPAD=%u -DCAUSAL=%u -DVEC=%u",
           k->d, k->dv, c->bq, c->bkv, c->tpr, c->pad, k->causal, c->vec ? c->vec : 1);
}

void clattn__decode_reason(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "decode: a KV group's query heads packed %u rows to a tile, read once per group; "
           "%.1f of %.1f KiB local memory, %u work-items, %u-key tiles",
           c->bq, clattn__decode_local(dev, k, c) / 1024.0, dev->local_mem / 1024.0, wg_of(c),
           c->bkv);
}

unsigned clattn__decode_min_block_q(const clattn__config *c) {
  return c->bq; /* its grid is refined by splitting the keys, never by smaller tiles */
}

static size_t tiles_of(const clattn__config *c, const clattn__shape *s) {
  size_t rows = s->seqlen_q * (s->heads_kv ? s->heads_q / s->heads_kv : 1);
  return (rows + c->bq - 1) / c->bq;
}

size_t clattn__decode_row_groups(const clattn__config *c, const clattn__shape *s) {
  return tiles_of(c, s) * s->batch * s->heads_kv;
}

/* The forward's arguments (tiles of packed rows), the variants', then the cache's
 * (cl/decode.cl's CACHE_ARGS): the block table, its columns, the pool's pages and log2 of the
 * page size; the int8 scales and the scales per slot. */
unsigned clattn__decode_bind(const clattn__family *f, const clattn__config *c,
                             const cl_kernel *kernels, const clattn__bound *b, clattn__launch *out,
                             cl_int *err) {
  const clattn__shape *s = b->s;
  size_t tiles = tiles_of(c, s);
  clattn__args a = clattn__forward_args(b, kernels[0], (cl_uint)tiles, &out[0].base_arg);
  clattn__arg_cache(&a, s);
  *err = a.err;
  out[0].kernel = kernels[0];
  out[0].groups = tiles * (b->split ? b->split->count : 1) * s->heads_kv * s->batch;
  f->work_groups(c, &out[0].wg);
  return 1;
}
