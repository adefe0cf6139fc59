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
  return floats * sizeof(float) + 2 * (size_t)c->bkv * sizeof(cl_long)        /* the row offsets */
         + sizeof(cl_int); /* the merge's answer */
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
unsigned clattn__decode_regs(const clattn__class *k, const clattn__config *c, unsigned bq) {
  unsigned cc = chunk_of(k, c), rm = c->rm ? c->rm : 1, nchk = (k->d + cc - 1) / cc;
  unsigned words = ((nchk + c->tpr - 1) / c->tpr + 4) * (c->vec ? c->vec : 1);
  unsigned held = c->stage == 3 ? (nchk + c->tpr - 1) / c->tpr * (c->vec ? c->vec : 1) : 0;
  return 24 + 5 * bq + 3 * rm * cc / 2 + 3 * rm + words / 2 + (c->stage == 2 ? 12 : 0) + held;
}

/* P V's serial rounds of V loads a block: a work-item owns every nsub-th key of it, nsub = the
 * work-group over (column chunks x row groups of RM rows), and loads VU = 4 keys' chunks a
 * round; plus K's round at the block's start where V waits for it (stage 1; stage 2 takes V's
 * first round with K's, stage 3 the next block's K with V's). rows: the tile's. */
unsigned clattn__decode_rounds(const clattn__class *k, const clattn__config *c, unsigned rows) {
  unsigned rm = c->rm ? c->rm : 1, rg = pow2_at_least((rows + rm - 1) / rm);
  unsigned lanes = chunks_v(k, c) * rg, nsub = wg_of(c) > lanes ? wg_of(c) / lanes : 1;
  unsigned keys = (c->bkv + nsub - 1) / nsub, tv = (keys + 3) / 4;
  return c->stage == 1 ? 1 + tv : tv ? tv : 1;
}

/* The one family of a cache class where decode_mma is not legal (fp32 queries, head dims off its
 * multiples, GPUs without tensor cores). For plain classes it ranks after every other family
 * (the heuristic never picks it; the tuner reaches it last, and may find it faster for a few
 * query rows against many keys with GQA). 16 packed rows fit a GQA group of 4 to 16 heads times
 * 1 to 4 query rows (a call's plan tightens it to the rows its tiles have: plan/grid.c). CPUs:
 * one work-item per key, V after the scores (stage 1: nothing there waits on a load, and fewer
 * values live). GPUs: a block's time is mostly its serial memory round trips
 * (clattn__decode_rounds) while the SM's other work-groups' loads are in flight, so the cost ranks
 * by rounds per key held by an SM: rounds / (work-groups an SM holds x keys a block), the
 * work-groups from a build's registers (clattn__decode_regs, for a GQA 4 group's 4 rows) in 64K.
 * The H200 measured it so (docs/BENCHMARKS.md, fp16, batch 64, 8k keys): 4 rows per work-item in P
 * V (2 rounds, 128 registers, two work-groups) 1.14 ms, 2 rows (3 rounds, 84, two) 1.37, 1 row (5
 * rounds, 76, three) 1.87, where the cost of the time, which ranked by warps held, chose the last.
 * Then the bytes in flight at a block's start, 16-byte loads (narrower ones measured 1.4x slower at
 * equal rounds) and 256 work-items (64 keys of 4). */
unsigned clattn__decode_cost(const clattn__family *f, const clattn__device *dev,
                             const clattn__class *k, const clattn__config *c) {
  unsigned cc = chunk_of(k, c), rm = c->rm ? c->rm : 1, nchk = (k->d + cc - 1) / cc;
  unsigned s = 10 * udiff(ilog2(c->bq), 4), vec = ilog2(c->vec ? c->vec : 1);
  if (!(k->variants & CLATTN__VAR_KVCACHE)) s += 100000; /* after the measured families */
  if (clattn__fam_is_cpu(dev))
    return s + 4 * udiff(vec, 2) + 4 * udiff(ilog2(c->bkv), 6) + 8 * ilog2(c->tpr) +
           udiff(ilog2(rm), 2) + (c->stage != 1 ? 2 : 0);
  s += 4 * udiff(vec, 2); /* 16-byte loads, where the registers allow them (below) */
  s += 2 * udiff(ilog2(wg_of(c)), 8) + 2 * udiff(ilog2(c->bkv), 6);
  unsigned rows = c->bq < 4 ? c->bq : 4;
  unsigned regs = (clattn__decode_regs(k, c, rows) + 7) / 8 * 8, wg = wg_of(c);
  unsigned groups = 65536 / (regs * wg), most = 2048 / wg;
  if (groups > most) groups = most;
  if (!groups) return s + 1000; /* a work-group the registers cannot hold */
  /* 10 per round per 64-key block of a lone work-group */
  s += 640 * clattn__decode_rounds(k, c, rows) / (groups * c->bkv);
  size_t bytes = (size_t)cc * (k->variants & CLATTN__VAR_KV8 ? 1 : k->dtype ? 2 : 4);
  size_t flight =
      (size_t)groups * wg * (((nchk + c->tpr - 1) / c->tpr) + (c->stage == 2 ? 4u : 0u)) * bytes;
  s += flight < 16384 ? 6 : flight < 32768 ? 3 : 0;
  /* V loaded with K (stage 2) never won on the H200 (8-52% slower than stage 1 at the same
   * tiles), whatever its rounds; the next block's K with V (stage 3) won once (7%, fp16 at 128
   * registers either way) and lost where its registers grew (fp16 with 2 work-items a key, 160
   * against 128: 1.54x; int8, 184 against 128: 1.51x), more than the estimate says. */
  s += c->stage == 2 ? 8 : c->stage == 3 ? 4 : 0;
  if (clattn__decode_local(dev, k, c) > 32768) s += 5;
  return s;
}

void clattn__decode_defines(const clattn__family *f, const clattn__device *dev,
                            const clattn__class *k, const clattn__config *c, char *out,
                            size_t len) {
  const int gpu = !clattn__fam_is_cpu(dev); /* loops unrolled, loads packed */
  snprintf(out, len,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTPR=%u -DRM=%u -DCAUSAL=%u -DVEC=%u "
           "-DSTAGE=%u -DUNROLL_LOOPS=%d -DPACKED=%d -DPTX_CVT=%d -DPTX_FENCE=%d",
           k->d, k->dv, c->bq, c->bkv, c->tpr, c->rm ? c->rm : 1, k->causal, c->vec ? c->vec : 1,
           c->stage == 2 || c->stage == 3 ? c->stage : 1u, gpu, gpu,
           /* NVIDIA's fp16 unpacked by inline PTX (cl/decode.cl's unpack), and its fence
            * (cl/decode_common.cl's SPLIT_FENCE) */
           dev->tensor_cores && !dev->mma_emulated, dev->tensor_cores && !dev->mma_emulated);
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
 * (cl/decode_common.cl's DECODE_ARGS): the block table, its columns, the pool's pages and log2 of
 * the page size; the int8 scales and the scales per slot. */
unsigned clattn__decode_bind(const clattn__family *f, const clattn__config *c,
                             const cl_kernel *kernels, const clattn__bound *b, clattn__launch *out,
                             cl_int *err) {
  const clattn__shape *s = b->s;
  size_t tiles = tiles_of(c, s);
  clattn__args a = clattn__forward_args(b, kernels[0], (cl_uint)tiles, &out[0].base_arg);
  clattn__arg_cache(&a, s);
  /* cl/decode_common.cl's MERGE_ARGS: the fused merge's counts and the caller's O and LSE, or
   * (unused) the output's buffer and view. */
  const clattn__split *sp = b->split;
  cl_int fused = sp && sp->merge_count, to_lse = fused && sp->merge_lse;
  const clattn_tensor *mo = fused ? sp->merge_o : b->o;
  cl_mem count = fused ? sp->merge_count : b->o->buffer, mlse = to_lse ? sp->merge_lse : count;
  clattn__arg_mem(&a, &count);
  clattn__arg(&a, sizeof fused, &fused);
  clattn__arg_mem(&a, &mo->buffer);
  clattn__arg_view(&a, mo);
  clattn__arg_mem(&a, &mlse);
  clattn__arg(&a, sizeof to_lse, &to_lse);
  *err = a.err;
  out[0].kernel = kernels[0], out[0].memo = a.memo;
  out[0].groups = tiles * (b->split ? b->split->count : 1) * s->heads_kv * s->batch;
  f->work_groups(c, &out[0].wg);
  return 1;
}
