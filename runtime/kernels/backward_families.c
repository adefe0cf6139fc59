/* The backward families' models (registry.c's entries backward_rows, backward_mma): local
 * memory, legality, the heuristic's ranking, -D defines and the argument binding they share.
 * backward_rows (cl/backward.cl): bwd_dkdv has a work-item per key, BKV of them, and stages BQ
 * query rows; bwd_dq a work-item per query row, BQ of them, staging BKV keys. backward_mma
 * (cl/backward_mma.cl, NVIDIA tensor cores): a warp per 16 keys of bwd_dkdv and per 16 rows of
 * bwd_dq; the blocks they stage are set by local memory (clattn__bwd_mma_stage). */
#include "families.h"

#include <stdio.h>

enum { MIN_BLOCK = 4, MAX_BLOCK = 256, MMA_MAX_DIM = 128 };

/* cl/backward_mma.cl: local rows of a head dim padded to 16 columns and then to 20 mod 32 floats
 * (QS, GS, KS, VS there). */
static size_t mma_row(unsigned dim) {
  size_t n = (dim + 15) / 16 * 16;
  return n + (20 + 32 - n % 32) % 32;
}

/* backward_mma with staged blocks of sb rows (bwd_dkdv: rows of Q and dO with their LSE and D;
 * bwd_dq: keys of K and V), and emulated, the scratch of the larger kernel's warps. */
static size_t mma_bytes(const clattn__device *dev, const clattn__class *k, const clattn__config *c,
                        unsigned sb) {
  size_t bytes = (size_t)sb * (mma_row(k->d) + mma_row(k->dv) + 2) * sizeof(float);
  if (dev->mma_emulated)
    bytes += (c->bq > c->bkv ? c->bq : c->bkv) / 16 * CLATTN__MMA_SCRATCH * sizeof(float);
  return bytes;
}

/* The largest of 64, 32 and 16 staged rows that fits the local memory the device reports, else
 * the most it allows (clattn__local_fit): a config keeps the kernel it was measured with where
 * NVIDIA allows more than it reports; 0 when none fits. */
static unsigned mma_stage(const clattn__device *dev, const clattn__class *k,
                          const clattn__config *c) {
  for (int pass = 0; pass < 2; pass++)
    for (unsigned sb = 64; sb >= 16; sb /= 2)
      if (mma_bytes(dev, k, c, sb) <= clattn__local_fit(dev, pass)) return sb;
  return 0;
}

size_t clattn__bwd_rows_local(const clattn__device *dev, const clattn__class *k,
                              const clattn__config *c) {
  /* The two kernels are separate: the larger of the two counts. */
  size_t dkdv = (size_t)c->bq * (k->d + k->dv + 2), dq = (size_t)c->bkv * (k->d + k->dv);
  return (dkdv > dq ? dkdv : dq) * sizeof(float);
}

size_t clattn__bwd_mma_local(const clattn__device *dev, const clattn__class *k,
                             const clattn__config *c) {
  unsigned sb = mma_stage(dev, k, c);
  return mma_bytes(dev, k, c, sb ? sb : 16);
}

void clattn__bwd_rows_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = c->bkv, wg[1] = c->bq;
}

void clattn__bwd_mma_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = (size_t)c->bkv * 2, wg[1] = (size_t)c->bq * 2; /* a warp of 32 per 16 keys or rows */
}

static int pow2(unsigned v) {
  return v && !(v & (v - 1));
}

int clattn__backward_check(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c, char *why,
                           size_t why_len) {
  if (!pow2(c->bq) || !pow2(c->bkv) || c->bq > MAX_BLOCK || c->bkv > MAX_BLOCK) {
    snprintf(why, why_len,
             "backward blocks BQ=%u BKV=%u: must be powers of two of at most %u, and the kernel "
             "backward_rows or backward_mma",
             c->bq, c->bkv, MAX_BLOCK);
    return 0;
  }
  if (f->tensor_cores && !dev->tensor_cores) {
    snprintf(why, why_len, "%s needs NVIDIA tensor cores (compute capability 8.0+)", f->name);
    return 0;
  }
  if (f->tensor_cores && (c->bq % 16 || c->bkv % 16 || k->d > MMA_MAX_DIM || k->dv > MMA_MAX_DIM)) {
    snprintf(why, why_len,
             "%s BQ=%u BKV=%u: blocks must be multiples of 16 and head dims %u/%u at most %u",
             f->name, c->bq, c->bkv, k->d, k->dv, MMA_MAX_DIM);
    return 0;
  }
  size_t most =
      dev->max_work_group < dev->max_item_size[0] ? dev->max_work_group : dev->max_item_size[0];
  size_t wg[2];
  f->work_groups(c, wg);
  if (wg[0] > most || wg[1] > most) {
    snprintf(why, why_len, "backward BQ=%u BKV=%u: work-groups of at most %zu work-items", c->bq,
             c->bkv, most);
    return 0;
  }
  size_t bytes = f->local_bytes(dev, k, c);
  if (bytes > dev->local_mem) {
    snprintf(why, why_len,
             "backward BQ=%u BKV=%u: needs %.1f KiB local memory, device has %.1f KiB", c->bq,
             c->bkv, bytes / 1024.0, dev->local_mem / 1024.0);
    return 0;
  }
  return 1;
}

static unsigned log2u(unsigned v) {
  unsigned n = 0;
  while (v > 1) v /= 2, n++;
  return n;
}

static unsigned steps(unsigned a, unsigned b) {
  unsigned x = log2u(a), y = log2u(b);
  return x > y ? x - y : y - x;
}

/* A family's default: the largest equal blocks of at most 64 (backward_mma: 128, 8 warps per
 * work-group, which the H200 ran 5-22% faster than 2 or 4 at d = 64 and 128, N = 4096;
 * docs/BENCHMARKS.md) that are legal, down to one row and one key (0 when none). */
static clattn__config family_default(const clattn__family *f, const clattn__device *dev,
                                     const clattn__class *k, const clattn__config *like) {
  char why[160];
  clattn__config c = *like;
  unsigned start = f->tensor_cores ? 128 : 64;
  for (c.bq = c.bkv = start; c.bq >= 1; c.bq /= 2, c.bkv /= 2)
    if (f->check(f, dev, k, &c, why, sizeof why)) return c;
  c.bq = c.bkv = 0;
  return c;
}

/* Tensor cores first where there are some (a warp's MMA does the work of 1024 FMAs), then the
 * portable kernels, whose work-items hold head-dim-long private arrays whatever the blocks (the
 * blocks set how often a staged tile is reused and how many work-groups there are). Within a
 * family its default first, then the others nearest it (in steps of x2); ties go to larger
 * blocks, the order of the space's axes. Blocks below MIN_BLOCK are ranked only as the default
 * (the last resort of a device with little local memory). */
unsigned clattn__backward_cost(const clattn__family *f, const clattn__device *dev,
                               const clattn__class *k, const clattn__config *c) {
  clattn__config def = family_default(f, dev, k, c);
  if (!def.bq ||
      ((c->bq < MIN_BLOCK || c->bkv < MIN_BLOCK) && (c->bq != def.bq || c->bkv != def.bkv)))
    return CLATTN__UNRANKED;
  unsigned base = f->tensor_cores ? 0 : 100;
  return base + steps(c->bq, def.bq) + steps(c->bkv, def.bkv);
}

void clattn__backward_defines(const clattn__family *f, const clattn__device *dev,
                              const clattn__class *k, const clattn__config *c, char *out,
                              size_t len) {
  unsigned sb = f->tensor_cores ? mma_stage(dev, k, c) : 0;
  snprintf(out, len, "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DCAUSAL=%u -DSQ=%u -DSK=%u%s",
           k->d, k->dv, c->bq, c->bkv, k->causal, sb, sb,
           f->tensor_cores && dev->mma_emulated ? CLATTN__MMA_EMULATE_OPTIONS : "");
}

void clattn__backward_reason(const clattn__family *f, const clattn__device *dev,
                             const clattn__class *k, const clattn__config *c, char *out,
                             size_t len) {
  snprintf(out, len,
           "heuristic: %s, the largest equal blocks of at most %u that fit, %.1f of %.1f KiB "
           "local memory",
           f->name, f->tensor_cores ? 128 : 64, f->local_bytes(dev, k, c) / 1024.0,
           dev->local_mem / 1024.0);
}

/* Only the blocks mean something; the rest is fixed by the family. */
int clattn__backward_accept(const clattn__family *f, const clattn_config *in, clattn__config *out,
                            char *why, size_t why_len) {
  out->bq = in->block_q, out->bkv = in->block_kv;
  return 1;
}

/* The buffer, then its view's offset and strides. */
static void arg_tensor(clattn__args *a, const clattn_tensor *t) {
  clattn__arg_mem(a, &t->buffer);
  clattn__arg_view(a, t);
}

/* bwd_dkdv then bwd_dq (both families' kernels take the same arguments): dK and dV are zero
 * where no query sees a key, and with no query rows bwd_dkdv (zeros) is all there is; dQ is zero
 * for rows that see no key. */
unsigned clattn__backward_bind(const clattn__family *f, const clattn__config *c,
                               const cl_kernel *kernels, const clattn__bound *b,
                               clattn__launch *out, cl_int *err) {
  const clattn__shape *s = b->s;
  size_t rows = s->batch * s->heads_q * s->seqlen_q, wg[2];
  cl_uint hq = (cl_uint)s->heads_q, hkv = (cl_uint)s->heads_kv, nq = (cl_uint)s->seqlen_q,
          nkv = (cl_uint)s->seqlen_kv;
  cl_float scale = s->scale;
  cl_ulong zero = 0, acc_off = clattn__dq_acc_offset(s->lse_rows); /* atomic dQ: after D */
  const int atomic = clattn__dq_atomic(f, (s->nondet ? CLATTN__VAR_ATOMIC : 0u) |
                                              (s->sinks ? CLATTN__VAR_SINKS : 0u));
  unsigned n = 0;
  f->work_groups(c, wg);
  *err = CL_SUCCESS;
  if (s->seqlen_kv) {
    size_t nkb = (s->seqlen_kv + c->bkv - 1) / c->bkv;
    cl_uint nb = (cl_uint)nkb;
    clattn__args a = {kernels[0], 0, CL_SUCCESS, NULL};
    arg_tensor(&a, b->q), arg_tensor(&a, b->k), arg_tensor(&a, b->v), arg_tensor(&a, b->d_o);
    cl_mem ws = rows ? b->drow : b->d_o->buffer; /* unread when there are no rows */
    cl_mem lse_or = rows ? b->lse : b->d_o->buffer;
    clattn__arg_mem(&a, &lse_or);
    clattn__arg_mem(&a, &ws);
    arg_tensor(&a, b->dk), arg_tensor(&a, b->dv);
    clattn__arg(&a, sizeof hq, &hq), clattn__arg(&a, sizeof hkv, &hkv);
    clattn__arg(&a, sizeof nq, &nq), clattn__arg(&a, sizeof nkv, &nkv);
    clattn__arg(&a, sizeof nb, &nb), clattn__arg(&a, sizeof scale, &scale);
    out[n].base_arg = a.next;
    clattn__arg(&a, sizeof zero, &zero);
    clattn__arg_variants(&a, s, 1.0);
    if (atomic) clattn__arg_mem(&a, &ws), clattn__arg(&a, sizeof acc_off, &acc_off);
    if (a.err != CL_SUCCESS) *err = a.err;
    out[n].kernel = kernels[0], out[n].groups = nkb * s->batch * s->heads_kv, out[n].wg = wg[0];
    n++;
  }
  if (rows) {
    size_t nqb = (s->seqlen_q + c->bq - 1) / c->bq;
    cl_uint nb = (cl_uint)nqb;
    clattn__args a = {kernels[1], 0, CL_SUCCESS, NULL};
    arg_tensor(&a, b->q), arg_tensor(&a, b->k), arg_tensor(&a, b->v), arg_tensor(&a, b->d_o);
    clattn__arg_mem(&a, &b->lse);
    clattn__arg_mem(&a, &b->drow);
    arg_tensor(&a, b->dq);
    clattn__arg(&a, sizeof hq, &hq), clattn__arg(&a, sizeof hkv, &hkv);
    clattn__arg(&a, sizeof nq, &nq), clattn__arg(&a, sizeof nkv, &nkv);
    clattn__arg(&a, sizeof nb, &nb), clattn__arg(&a, sizeof scale, &scale);
    out[n].base_arg = a.next;
    clattn__arg(&a, sizeof zero, &zero);
    clattn__arg_variants(&a, s, 1.0);
    if (s->sinks) { /* cl/common.cl's PDP_ARG: after D in the row workspace */
      cl_ulong pdp_off = s->lse_rows;
      clattn__arg_mem(&a, &b->drow);
      clattn__arg(&a, sizeof pdp_off, &pdp_off);
    }
    if (atomic) clattn__arg_mem(&a, &b->drow), clattn__arg(&a, sizeof acc_off, &acc_off);
    if (a.err != CL_SUCCESS && *err == CL_SUCCESS) *err = a.err;
    out[n].kernel = kernels[1], out[n].groups = nqb * s->batch * s->heads_q, out[n].wg = wg[1];
    n++;
  }
  return n;
}
