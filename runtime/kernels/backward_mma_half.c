/* The model of the backward_mma_half family (registry.c's entry; cl/backward_mma_half.cl and
 * cl/backward_mma_half_dq.cl):
 * NVIDIA tensor cores in half storage, mma.sync m16n8k16 f16/bf16 with fp32 accumulators, a warp
 * per 16 keys of bwd_dkdv and per 16 rows of bwd_dq. Its local-memory formula mirrors the
 * kernels' __local arrays; keep them in step. Legality, ranking (tensor cores first: on the H200
 * it ran the backward 10-33x faster than backward_rows, docs/BENCHMARKS.md), accepting a public
 * config and binding are the backward's (backward_families.c). */
#include "families.h"

#include <stdio.h>

/* Words of 16-bit pairs per local row of a head dim: padded to 16 values, then 8 more (QW, GW in
 * the kernel). */
static size_t row_words(unsigned dim) {
  return (dim + 15) / 16 * 8 + 4;
}

/* Atomic dQ for a class of this family's (its rows' sums of P dP, which the sinks' gradient
 * needs, are bwd_dq's: sinks keep the two-kernel backward). */
static int atomic_of(const clattn__class *k) {
  return (k->variants & CLATTN__VAR_ATOMIC) && !(k->variants & CLATTN__VAR_SINKS);
}

size_t clattn__dq_acc_offset(size_t lse_rows) {
  return (lse_rows + 3) / 4 * 4;
}

int clattn__dq_atomic(const clattn__family *f, unsigned variants) {
  clattn__class k = {.variants = variants};
  return f && f->atomic_dq && atomic_of(&k);
}

/* The larger kernel's bytes with nbuf stages (NBUF) of sb rows (bwd_dkdv: Q, dO, LSE and D) or
 * keys (bwd_dq: K, V) staged, with the emulation's scratch for its warps. With atomic dQ,
 * bwd_dkdv also holds its BKV keys of K and their dS^T (sb / 2 + 4 words a key), and bwd_dq
 * stages nothing. */
static size_t half_bytes(const clattn__device *dev, const clattn__class *k, const clattn__config *c,
                         unsigned sb, unsigned nbuf, int atomic) {
  size_t rows = (size_t)nbuf * sb * (row_words(k->d) + row_words(k->dv)) * 4;
  size_t dkdv = rows + (size_t)nbuf * sb * 2 * sizeof(float), dq = atomic ? 0 : rows;
  if (atomic) dkdv += (size_t)c->bkv * (row_words(k->d) + sb / 2 + 4) * 4;
  if (dev->mma_emulated) {
    dkdv += (size_t)c->bkv / 16 * CLATTN__MMA_SCRATCH * sizeof(float);
    dq += (size_t)c->bq / 16 * CLATTN__MMA_SCRATCH * sizeof(float);
  }
  return dkdv > dq ? dkdv : dq;
}

/* 64 staged rows up to head dims of 64, 32 above (each lane holds two fp32 C fragments of the
 * staged block, S and dP, beside its head-dim-long accumulators), halved until they fit, in two
 * stages (the next block's copies in flight while one computes) where they fit, else one (48 KiB
 * holds two stages at head dims up to 128); 0 when not even 16 rows in one stage fit. Atomic dQ
 * has no kernels from before the raised limit to keep (clattn__local_fit): it takes the limit. */
static unsigned stage_rows(const clattn__device *dev, const clattn__class *k,
                           const clattn__config *c, unsigned *nbuf) {
  unsigned start = k->d > 64 || k->dv > 64 ? 32 : 64;
  int atomic = atomic_of(k);
  for (int pass = atomic; pass < 2; pass++) /* the reported size first (clattn__local_fit) */
    for (unsigned sb = start; sb >= 16; sb /= 2)
      for (*nbuf = 2; *nbuf >= 1; --*nbuf)
        if (half_bytes(dev, k, c, sb, *nbuf, atomic) <= clattn__local_fit(dev, pass)) return sb;
  *nbuf = 1;
  return 0;
}

size_t clattn__bwd_mma_half_local(const clattn__device *dev, const clattn__class *k,
                                  const clattn__config *c) {
  unsigned nbuf, sb = stage_rows(dev, k, c, &nbuf);
  return half_bytes(dev, k, c, sb ? sb : 16, nbuf, atomic_of(k));
}

void clattn__bwd_mma_half_defines(const clattn__family *f, const clattn__device *dev,
                                  const clattn__class *k, const clattn__config *c, char *out,
                                  size_t len) {
  unsigned nbuf, sb = stage_rows(dev, k, c, &nbuf);
  /* Atomic dQ by pairs of columns (red.global.add.v2.f32) on Hopper and later: on an H100
   * 1.08-1.14x the deterministic backward's forward + backward at N = 4096, where one add an
   * element was 0.96x ("Stop 41", docs/BENCHMARKS.md); sm_80 has only the scalar add. */
  const char *atomic = !atomic_of(k)                              ? ""
                       : dev->cc_major >= 9 && !dev->mma_emulated ? " -DDQ_ATOMIC=1 -DDQ_RED=2"
                                                                  : " -DDQ_ATOMIC=1";
  snprintf(
      out, len,
      "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DCAUSAL=%u -DSQ=%u -DSK=%u -DNBUF=%u%s%s",
      k->d, k->dv, c->bq, c->bkv, k->causal, sb, sb, nbuf, atomic,
      dev->mma_emulated ? CLATTN__MMA_EMULATE_OPTIONS : "");
}
