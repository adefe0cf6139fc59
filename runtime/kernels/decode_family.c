/* The decode family's model (registry.c's entry `decode`, cl/decode.cl): attention over a KV
 * cache with a KV group's query heads packed into one tile (issue 18). Its byte formula mirrors
 * the kernel's __local arrays; keep them in step. */
#include "families.h"

#include <math.h>
#include <stdio.h>

static unsigned wg_of(const clattn__config *c) {
  return c->bkv * c->tpr;
}

/* cl/decode.cl's CC: the elements of one load (16 bytes at vector width 4). */
static unsigned chunk_of(const clattn__class *k, const clattn__config *c) {
  unsigned vec = c->vec ? c->vec : 1;
  if (k->variants & CLATTN__VAR_KV8) return 4 * vec;
  return k->dtype == CLATTN_F32 ? vec : 2 * vec;
}

static unsigned pow2_at_least(unsigned x) {
  unsigned p = 1;
  while (p < x) p *= 2;
  return p;
}

/* NCHP: P V's column chunks, a power of two. */
static unsigned chunks_v(const clattn__class *k, const clattn__config *c) {
  unsigned cc = chunk_of(k, c);
  return pow2_at_least((k->dv + cc - 1) / cc);
}

size_t clattn__decode_local(const clattn__device *dev, const clattn__class *k,
                            const clattn__config *c) {
  size_t cc = chunk_of(k, c), rm = c->rm ? c->rm : 1, qd = (k->d + cc - 1) / cc * cc;
  size_t part = (size_t)c->tpr * c->bq * c->bkv, merge = wg_of(c) / 2 * rm * (cc + 2);
  size_t floats = (size_t)c->bq * qd + (part > merge ? part : merge) + c->bq; /* Qs, U, Rm */
  if (k->variants & CLATTN__VAR_KV8) floats += 2 * (size_t)c->bkv;            /* the scales */
  return floats * sizeof(float) + 2 * (size_t)c->bkv * sizeof(cl_long);       /* the row offsets */
}

void clattn__decode_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = wg_of(c);
}

int clattn__decode_check(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                         const clattn__config *c, char *why, size_t why_len) {
  unsigned rm = c->rm ? c->rm : 1, cc = chunk_of(k, c), nchk = (k->d + cc - 1) / cc;
  if (c->bq > 16 || rm > c->bq || c->bq % rm || (c->bq & (c->bq - 1)) || (rm & (rm - 1))) {
    snprintf(why, why_len,
             "%s BQ=%u rows_per_item=%u: powers of two, BQ at most 16 and a multiple of the rows "
             "per work-item",
             f->name, c->bq, rm);
    return 0;
  }
  if (c->tpr > nchk || (c->tpr & (c->tpr - 1)) || (c->bkv & (c->bkv - 1))) {
    snprintf(why, why_len,
             "%s BKV=%u TPR=%u: powers of two, at most one work-item per %u-element chunk of a "
             "%u-wide key",
             f->name, c->bkv, c->tpr, cc, k->d);
    return 0;
  }
  if (wg_of(c) < chunks_v(k, c) * (c->bq / rm)) {
    snprintf(why, why_len,
             "%s: a work-group of %u holds fewer than P V's %u column chunks x %u row groups",
             f->name, wg_of(c), chunks_v(k, c), c->bq / rm);
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

/* Registers per work-item of a GPU build, estimated: fitted (within about 15%) to ptxas's counts
 * for clang's sm_90 code of cl/decode.cl (tools/ptx-check.sh; d = 128, fp16, bf16, int8 and
 * fp32): about 24 of addresses and state, 5 per packed row (the scores, Q's reads), 1.5 per
 * accumulator of O and 3 per row of P V (m, l, P), half a register per loaded 32-bit word in
 * flight (K's chunks and VU = 4 V chunks: the loads stay packed until used), and about 12 more
 * for V loaded with K (stage 2); stage 3 holds K's next words across P V, a register each. bq: the
 * rows a call's tile has, not the class's block (a call tightens it: plan/grid.c). */
static unsigned decode_regs(const clattn__class *k, const clattn__config *c, unsigned bq) {
  unsigned cc = chunk_of(k, c), rm = c->rm ? c->rm : 1, nchk = (k->d + cc - 1) / cc;
  unsigned words = ((nchk + c->tpr - 1) / c->tpr + 4) * (c->vec ? c->vec : 1);
  unsigned held = c->stage == 3 ? (nchk + c->tpr - 1) / c->tpr * (c->vec ? c->vec : 1) : 0;
  return 24 + 5 * bq + 3 * rm * cc / 2 + 3 * rm + words / 2 + (c->stage == 2 ? 12 : 0) + held;
}

/* The one family of a cache class. For plain classes it ranks after every other family (the
 * heuristic never picks it; the tuner reaches it last, and may find it faster for a few query
 * rows against many keys with GQA). 16 packed rows fit a GQA group of 4 to 16 heads times 1 to
 * 4 query rows (a call's plan tightens it to the rows its tiles have: plan/grid.c). CPUs: one
 * work-item per key, V after the scores (stage 1: nothing there waits on a load, and fewer
 * values live). GPUs, by occupancy and loads in flight: a build's registers (decode_regs, for a
 * GQA 4 group's 4 rows) decide how many work-groups an SM of 64K registers holds; a kernel of
 * 160 registers (fp16, 16-byte loads, 4 rows per work-item) holds 8 warps, too few to keep the
 * memory busy through a block's barriers, and one of 80 holds 24 (ptxas's counts of clang's
 * code before the loads stayed packed; 106 and 72 since). Then the bytes those warps
 * have in flight at a block's start (K's, and V's first chunks at stage 2), and 256 work-items
 * (64 keys of 4). */
unsigned clattn__decode_cost(const clattn__family *f, const clattn__device *dev,
                             const clattn__class *k, const clattn__config *c) {
  unsigned cc = chunk_of(k, c), rm = c->rm ? c->rm : 1, nchk = (k->d + cc - 1) / cc;
  unsigned s = 10 * udiff(ilog2(c->bq), 4), vec = ilog2(c->vec ? c->vec : 1);
  if (!(k->variants & CLATTN__VAR_KVCACHE)) s += 100000; /* after the measured families */
  if (clattn__fam_is_cpu(dev))
    return s + 4 * udiff(vec, 2) + 4 * udiff(ilog2(c->bkv), 6) + 8 * ilog2(c->tpr) +
           udiff(ilog2(rm), 2) + (c->stage == 2 ? 2 : 0);
  s += udiff(vec, 2); /* 16-byte loads, where the registers allow them (below) */
  s += 6 * udiff(ilog2(wg_of(c)), 8) + 2 * udiff(ilog2(c->bkv), 6);
  unsigned regs = (decode_regs(k, c, c->bq < 4 ? c->bq : 4) + 7) / 8 * 8, wg = wg_of(c);
  unsigned groups = 65536 / (regs * wg), warps = (groups ? groups : 1) * wg / 32;
  if (warps > 64) warps = 64;
  s += warps >= 32 ? 0 : warps >= 24 ? 2 : warps >= 16 ? 5 : warps >= 8 ? 12 : 25;
  size_t bytes = (size_t)cc * (k->variants & CLATTN__VAR_KV8 ? 1 : k->dtype ? 2 : 4);
  size_t flight =
      (size_t)warps * 32 * (((nchk + c->tpr - 1) / c->tpr) + (c->stage == 2 ? 4u : 0u)) * bytes;
  s += flight < 16384 ? 6 : flight < 32768 ? 3 : 0;
  if (clattn__decode_local(dev, k, c) > 32768) s += 5;
  return s;
}

void clattn__decode_defines(const clattn__family *f, const clattn__device *dev,
                            const clattn__class *k, const clattn__config *c, char *out,
                            size_t len) {
  const int gpu = !clattn__fam_is_cpu(dev); /* loops unrolled, loads packed */
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTPR=%u -DRM=%u -DCAUSAL=%u -DVEC=%u "
           "-DSTAGE=%u -DUNROLL_LOOPS=%d -DPACKED=%d -DPTX_CVT=%d",
           k->d, k->dv, c->bq, c->bkv, c->tpr, c->rm ? c->rm : 1, k->causal, c->vec ? c->vec : 1,
           c->stage == 2 || c->stage == 3 ? c->stage : 1u, gpu, gpu,
           /* NVIDIA's fp16 unpacked by inline PTX (cl/decode.cl's unpack) */
           dev->tensor_cores && !dev->mma_emulated);
}

void clattn__decode_reason(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c, char *out, size_t len) {
  snprintf(out, len,
           "decode: a KV group's query heads packed %u rows to a tile, read once per group in "
           "%u-byte loads; %u-key blocks, %u work-items per key, V loaded %s; %.1f of %.1f KiB "
           "local memory, %u work-items",
           c->bq,
           chunk_of(k, c) * (k->variants & CLATTN__VAR_KV8 ? 1
                             : k->dtype                    ? 2
                                                           : 4),
           c->bkv, c->tpr,
           c->stage == 2   ? "with K"
           : c->stage == 3 ? "after the scores, the next block's K with it"
                           : "after the scores",
           clattn__decode_local(dev, k, c) / 1024.0, dev->local_mem / 1024.0, wg_of(c));
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
