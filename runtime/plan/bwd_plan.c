/* The backward kernels' configs (cl/backward.cl): their local-memory model and legality, the
 * heuristic's ranking, and the plan per problem class: an override, else the tuning database's
 * entry for the backward class, else the heuristic, built and checked against the built
 * kernels' limits (stepping down when they do not fit). */
#include "internal.h"
#include "tunedb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_BLOCK = 4, MAX_BLOCK = 256, MAX_ATTEMPTS = 8, MAX_RANKED = 64 };

static const char *const names[CLATTN__BWD_VARIANTS] = {"backward_rows", "backward_mma"};

/* cl/backward_mma.cl: local rows of a head dim padded to 16 columns and then to 20 mod 32 floats
 * (QS, GS, KS, VS there). */
enum { MMA_MAX_DIM = 128 };
static size_t mma_row(unsigned dim) {
  size_t n = (dim + 15) / 16 * 16;
  return n + (20 + 32 - n % 32) % 32;
}

const char *clattn__bwd_variant_name(unsigned variant) {
  return variant < CLATTN__BWD_VARIANTS ? names[variant] : "unknown";
}

int clattn__bwd_variant_of(const char *name) {
  for (int i = 0; i < CLATTN__BWD_VARIANTS; i++)
    if (!strcmp(name, names[i])) return i;
  return -1;
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

unsigned clattn__bwd_mma_stage(const clattn__device *dev, const clattn__class *k,
                               const clattn__config *c) {
  for (unsigned sb = 64; sb >= 16; sb /= 2)
    if (mma_bytes(dev, k, c, sb) <= dev->local_mem) return sb;
  return 0;
}

/* backward_rows: bwd_dkdv stages BQ rows of Q and dO with their LSE and D, bwd_dq BKV rows of K
 * and V; backward_mma: the staged blocks above. The two kernels are separate, so the larger of
 * the two counts. */
size_t clattn__bwd_local_bytes(const clattn__device *dev, const clattn__config *c,
                               const clattn__class *k) {
  if (c->variant == 1) {
    unsigned sb = clattn__bwd_mma_stage(dev, k, c);
    return mma_bytes(dev, k, c, sb ? sb : 16);
  }
  size_t dkdv = (size_t)c->bq * (k->d + k->dv + 2), dq = (size_t)c->bkv * (k->d + k->dv);
  return (dkdv > dq ? dkdv : dq) * sizeof(float);
}

void clattn__bwd_work_groups(const clattn__config *c, size_t *dkdv, size_t *dq) {
  unsigned per = c->variant == 1 ? 2 : 1; /* backward_mma: a warp of 32 per 16 keys or rows */
  *dkdv = (size_t)c->bkv * per, *dq = (size_t)c->bq * per;
}

static int pow2(unsigned v) {
  return v && !(v & (v - 1));
}

int clattn__bwd_config_legal(const clattn__device *dev, const clattn__class *k,
                             const clattn__config *c, char *why, size_t why_len) {
  if (c->variant >= CLATTN__BWD_VARIANTS || !pow2(c->bq) || !pow2(c->bkv) || c->bq > MAX_BLOCK ||
      c->bkv > MAX_BLOCK) {
    snprintf(why, why_len,
             "backward blocks BQ=%u BKV=%u: must be powers of two of at most %u, and the kernel "
             "backward_rows or backward_mma",
             c->bq, c->bkv, MAX_BLOCK);
    return 0;
  }
  if (c->variant == 1 && !dev->tensor_cores) {
    snprintf(why, why_len, "backward_mma needs NVIDIA tensor cores (compute capability 8.0+)");
    return 0;
  }
  if (c->variant == 1 && (c->bq % 16 || c->bkv % 16 || k->d > MMA_MAX_DIM || k->dv > MMA_MAX_DIM)) {
    snprintf(why, why_len,
             "backward_mma BQ=%u BKV=%u: blocks must be multiples of 16 and head dims %u/%u at "
             "most %u",
             c->bq, c->bkv, k->d, k->dv, MMA_MAX_DIM);
    return 0;
  }
  size_t most =
      dev->max_work_group < dev->max_item_size[0] ? dev->max_work_group : dev->max_item_size[0];
  size_t wg_kv, wg_q;
  clattn__bwd_work_groups(c, &wg_kv, &wg_q);
  if (wg_kv > most || wg_q > most) {
    snprintf(why, why_len, "backward BQ=%u BKV=%u: work-groups of at most %zu work-items", c->bq,
             c->bkv, most);
    return 0;
  }
  size_t bytes = clattn__bwd_local_bytes(dev, c, k);
  if (bytes > dev->local_mem) {
    snprintf(why, why_len,
             "backward BQ=%u BKV=%u: needs %.1f KiB local memory, device has %.1f KiB", c->bq,
             c->bkv, bytes / 1024.0, dev->local_mem / 1024.0);
    return 0;
  }
  return 1;
}

size_t clattn__bwd_config_space_size(void) {
  size_t n = 0;
  for (unsigned b = MIN_BLOCK; b <= MAX_BLOCK; b *= 2) n++;
  return n * n * CLATTN__BWD_VARIANTS;
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

/* A variant's default: the largest equal blocks of at most 64 (backward_mma: 128) that are legal,
 * down to one row and one key as the last resort (0 when none). */
static clattn__config variant_default(const clattn__device *dev, const clattn__class *k,
                                      unsigned variant) {
  char why[160];
  clattn__config c = {0};
  c.variant = variant;
  /* backward_mma: 8 warps per work-group, which the H200 ran 5-22% faster than 2 or 4 at
   * d = 64 and 128, N = 4096 (docs/BENCHMARKS.md). */
  unsigned start = variant == 1 ? 128 : 64;
  for (c.bq = c.bkv = start; c.bq >= 1; c.bq /= 2, c.bkv /= 2)
    if (clattn__bwd_config_legal(dev, k, &c, why, sizeof why)) return c;
  c.bq = c.bkv = 0;
  return c;
}

/* Appends the variant's legal configs, its default first, then the others nearest it first (in
 * steps of x2), larger blocks first. */
static size_t add_variant(const clattn__device *dev, const clattn__class *k, unsigned variant,
                          clattn__config *out, size_t n, size_t cap) {
  char why[160];
  clattn__config def = variant_default(dev, k, variant);
  if (!def.bq || n >= cap) return n;
  out[n++] = def;
  for (unsigned dist = 1; dist <= 2 * log2u(MAX_BLOCK); dist++)
    for (unsigned bq = MAX_BLOCK; bq >= MIN_BLOCK; bq /= 2)
      for (unsigned bkv = MAX_BLOCK; bkv >= MIN_BLOCK; bkv /= 2) {
        clattn__config c = {0};
        c.variant = variant, c.bq = bq, c.bkv = bkv;
        if (n < cap && steps(bq, def.bq) + steps(bkv, def.bkv) == dist &&
            clattn__bwd_config_legal(dev, k, &c, why, sizeof why))
          out[n++] = c;
      }
  return n;
}

size_t clattn__bwd_configs_ranked(const clattn__device *dev, const clattn__class *k,
                                  clattn__config *out, size_t cap) {
  /* Tensor cores first where there are some (a warp's MMA does the work of 1024 FMAs); then the
   * portable kernels, whose work-items hold head-dim-long private arrays whatever the blocks
   * (the blocks set how often a staged tile is reused and how many work-groups there are). */
  size_t n = add_variant(dev, k, 1, out, 0, cap);
  return add_variant(dev, k, 0, out, n, cap);
}

void clattn__bwd_plan_release(clattn__bwd_plan *p) {
  if (p->dkdv) clReleaseKernel(p->dkdv);
  if (p->dq) clReleaseKernel(p->dq);
  p->dkdv = p->dq = NULL;
}

static cl_int kernel_limits(clattn_context *ctx, cl_kernel k, size_t *wg, cl_ulong *lmem,
                            cl_ulong *pmem) {
  cl_int err =
      clGetKernelWorkGroupInfo(k, ctx->device_id, CL_KERNEL_WORK_GROUP_SIZE, sizeof *wg, wg, NULL);
  if (err == CL_SUCCESS)
    err = clGetKernelWorkGroupInfo(k, ctx->device_id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof *lmem, lmem,
                                   NULL);
  *pmem = 0; /* informative only: not every driver reports it */
  clGetKernelWorkGroupInfo(k, ctx->device_id, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof *pmem, pmem, NULL);
  return err;
}

clattn_status clattn__bwd_build(clattn_context *ctx, const clattn__sources *src,
                                const clattn__class *cls, const clattn__config *c,
                                clattn__bwd_plan *p, char *why, size_t why_len) {
  char options[512];
  unsigned sb = c->variant == 1 ? clattn__bwd_mma_stage(&ctx->device, cls, c) : 0;
  snprintf(options, sizeof options,
           "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DCAUSAL=%u -DSQ=%u -DSK=%u%s", cls->d,
           cls->dv, c->bq, c->bkv, cls->causal, sb, sb,
           c->variant == 1 && ctx->device.mma_emulated
               ? " -DMMA_EMULATE=1 -DSCRATCH=" CLATTN__STR(CLATTN__MMA_SCRATCH)
               : "");
  const char *extra = ctx->device.build_options; /* as the forward's: read at creation */
  size_t used = strlen(options);
  if (extra && extra[0]) snprintf(options + used, sizeof options - used, " %s", extra);
  cl_program prog;
  p->dkdv = p->dq = NULL;
  if (c->variant >= CLATTN__BWD_VARIANTS)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "unknown backward variant %u",
                        c->variant);
  clattn_status st = clattn__build(ctx, src->text[c->variant], options, &prog);
  if (st != CLATTN_OK) return st;
  cl_int e1, e2;
  p->dkdv = clCreateKernel(prog, "bwd_dkdv", &e1);
  p->dq = clCreateKernel(prog, "bwd_dq", &e2);
  if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) {
    clattn__bwd_plan_release(p);
    return clattn__fail_cl(ctx, e1 != CL_SUCCESS ? e1 : e2, "clCreateKernel(backward)");
  }
  size_t wg[2];
  cl_ulong lmem[2], pmem[2];
  cl_int err = kernel_limits(ctx, p->dkdv, &wg[0], &lmem[0], &pmem[0]);
  if (err == CL_SUCCESS) err = kernel_limits(ctx, p->dq, &wg[1], &lmem[1], &pmem[1]);
  if (err != CL_SUCCESS) {
    clattn__bwd_plan_release(p);
    return clattn__fail_cl(ctx, err, "clGetKernelWorkGroupInfo(backward)");
  }
  size_t need[2];
  clattn__bwd_work_groups(c, &need[0], &need[1]);
  if (wg[0] < need[0] || wg[1] < need[1]) {
    snprintf(why, why_len,
             "%s BQ=%u BKV=%u: the built kernels allow %zu and %zu work-items, need %zu and %zu",
             clattn__bwd_variant_name(c->variant), c->bq, c->bkv, wg[0], wg[1], need[0], need[1]);
    clattn__bwd_plan_release(p);
  } else if (lmem[0] > ctx->device.local_mem || lmem[1] > ctx->device.local_mem) {
    snprintf(why, why_len, "%s BQ=%u BKV=%u: the built kernels use %llu bytes of local memory",
             clattn__bwd_variant_name(c->variant), c->bq, c->bkv,
             (unsigned long long)(lmem[0] > lmem[1] ? lmem[0] : lmem[1]));
    clattn__bwd_plan_release(p);
  } else {
    p->cfg = *c;
    p->local_mem = (size_t)(lmem[0] > lmem[1] ? lmem[0] : lmem[1]);
    p->private_mem = (size_t)(pmem[0] > pmem[1] ? pmem[0] : pmem[1]);
  }
  return CLATTN_OK;
}

/* A database entry for the backward class, with its origin, or NULL. */
static const clattn__db_entry *db_choice(clattn_context *ctx, const clattn__class *cls,
                                         const uint64_t *hash, char origin[16]) {
  clattn__match level;
  const clattn__db_entry *e =
      clattn__db_lookup(clattn__context_db(ctx), &ctx->device, hash, cls, &level);
  if (e) {
    int exact = level == CLATTN__MATCH_EXACT && e->cls.bucket == cls->bucket;
    snprintf(origin, 16, "%s", exact ? "tuned" : "fallback");
  }
  return e;
}

void clattn__bwd_config_choice(clattn_context *ctx, const clattn__class *cls, clattn__config *c,
                               char origin[16]) {
  char why[160];
  const clattn__config *forced = clattn__override_find(ctx, cls);
  if (forced) {
    *c = *forced;
    snprintf(origin, 16, "override");
    return;
  }
  clattn__sources src;
  if (clattn__bwd_sources_load(ctx, &src) == CLATTN_OK) {
    const clattn__db_entry *e = db_choice(ctx, cls, src.hash, origin);
    int legal = e && clattn__bwd_config_legal(&ctx->device, cls, &e->cfg, why, sizeof why);
    clattn__sources_free(&src);
    if (legal) {
      *c = e->cfg;
      return;
    }
  }
  memset(c, 0, sizeof *c);
  clattn__bwd_configs_ranked(&ctx->device, cls, c, 1);
  snprintf(origin, 16, "heuristic");
}

/* A chosen config (override, database): legal and fits once built, or a warning says why not. */
static clattn_status try_chosen(clattn_context *ctx, const clattn__sources *source,
                                const clattn__class *cls, const clattn__config *c,
                                const char *origin, clattn__bwd_plan *p) {
  char why[200];
  if (!clattn__bwd_config_legal(&ctx->device, cls, c, why, sizeof why)) {
    clattn__warn(ctx, "%s backward config for head_dim %u/%u no longer fits (%s); ignored", origin,
                 cls->d, cls->dv, why);
    return CLATTN_OK;
  }
  clattn_status st = clattn__bwd_build(ctx, source, cls, c, p, why, sizeof why);
  /* An override is run as given or fails; a database entry gives way (plan.c's rule). */
  if (st == CLATTN_ERR_BUILD && strcmp(origin, "override")) {
    clattn__warn(ctx,
                 "%s backward config: kernel %s does not build on this device; ignored (%.300s)",
                 origin, clattn__bwd_variant_name(c->variant), clattn__last_error_locked(ctx));
    return CLATTN_OK;
  }
  if (st == CLATTN_OK && !p->dkdv)
    clattn__warn(ctx, "%s backward config for head_dim %u/%u: %s; ignored", origin, cls->d, cls->dv,
                 why);
  if (st == CLATTN_OK && p->dkdv) {
    snprintf(p->origin, sizeof p->origin, "%s", origin);
    snprintf(p->reason, sizeof p->reason, "%s: %.1f of %.1f KiB local memory", origin,
             clattn__bwd_local_bytes(&ctx->device, c, cls) / 1024.0,
             ctx->device.local_mem / 1024.0);
  }
  return st;
}

static clattn_status heuristic(clattn_context *ctx, const clattn__sources *source,
                               const clattn__class *cls, clattn__bwd_plan *p) {
  clattn__config ranked[MAX_RANKED];
  size_t n = clattn__bwd_configs_ranked(&ctx->device, cls, ranked, MAX_RANKED);
  char why[200] = "";
  unsigned tried = 0, below = ~0u, variant = n ? ranked[0].variant : 0, unbuildable = 0;
  char *build_error = NULL; /* the last build failure's message, with its log */
  for (size_t i = 0; i < n && tried < MAX_ATTEMPTS && !p->dkdv; i++) {
    /* After built kernels did not fit, only configs of the variant whose blocks are all smaller,
     * or the next variant's (the portable one follows the tensor-core one). */
    unsigned most = ranked[i].bq > ranked[i].bkv ? ranked[i].bq : ranked[i].bkv;
    if (ranked[i].variant != variant) variant = ranked[i].variant, below = ~0u;
    if (most >= below || (unbuildable >> variant & 1u)) continue;
    clattn_status st = clattn__bwd_build(ctx, source, cls, &ranked[i], p, why, sizeof why);
    if (st == CLATTN_ERR_BUILD) { /* the variant does not build here: the next one */
      free(build_error);
      build_error = strdup(clattn__last_error_locked(ctx));
      clattn__warn(ctx,
                   "backward heuristic: kernel %s does not build on this device; trying "
                   "another (%.300s)",
                   clattn__bwd_variant_name(variant), build_error ? build_error : "");
      unbuildable |= 1u << variant;
      continue;
    }
    if (st != CLATTN_OK) {
      free(build_error);
      return st;
    }
    tried++, below = most;
  }
  if (!p->dkdv && !tried && unbuildable) {
    clattn_status st =
        clattn__fail(ctx, CLATTN_ERR_BUILD, "%s", build_error ? build_error : "build failed");
    free(build_error);
    return st;
  }
  free(build_error);
  if (!p->dkdv)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "backward: no block config for head dims %u/%u fits this device (%llu "
                        "bytes of local memory)%s%s",
                        cls->d, cls->dv, (unsigned long long)ctx->device.local_mem,
                        why[0] ? "; " : "", why);
  snprintf(p->origin, sizeof p->origin, "heuristic");
  snprintf(p->reason, sizeof p->reason,
           "heuristic: %s, the largest equal blocks of at most 64 (128 for backward_mma) that fit, "
           "%.1f of %.1f KiB "
           "local memory",
           clattn__bwd_variant_name(p->cfg.variant),
           clattn__bwd_local_bytes(&ctx->device, &p->cfg, cls) / 1024.0,
           ctx->device.local_mem / 1024.0);
  return CLATTN_OK;
}

clattn_status clattn__bwd_plan_get(clattn_context *ctx, const clattn__class *cls,
                                   const clattn__bwd_plan **out) {
  for (clattn__bwd_plan *p = ctx->bwd_plans; p; p = p->next)
    if (!memcmp(&p->cls, cls, sizeof *cls)) return *out = p, CLATTN_OK;
  char origin[16];
  clattn__sources sources, *source = &sources;
  clattn_status st = clattn__bwd_sources_load(ctx, &sources);
  clattn__bwd_plan *p = st == CLATTN_OK ? calloc(1, sizeof *p) : NULL;
  if (st == CLATTN_OK && !p) st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of memory");
  const clattn__config *forced = st == CLATTN_OK ? clattn__override_find(ctx, cls) : NULL;
  if (forced) {
    st = try_chosen(ctx, source, cls, forced, "override", p);
    if (st == CLATTN_OK && !p->dkdv)
      st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "the backward override does not fit: %s",
                        clattn__diagnostics_last(ctx));
  }
  if (st == CLATTN_OK && !p->dkdv) {
    const clattn__db_entry *e = db_choice(ctx, cls, sources.hash, origin);
    if (e) st = try_chosen(ctx, source, cls, &e->cfg, origin, p);
  }
  if (st == CLATTN_OK && !p->dkdv) st = heuristic(ctx, source, cls, p);
  clattn__sources_free(&sources);
  if (st != CLATTN_OK) {
    if (p) clattn__bwd_plan_release(p);
    free(p);
    return st;
  }
  p->cls = *cls;
  p->next = ctx->bwd_plans;
  ctx->bwd_plans = p;
  *out = p;
  return CLATTN_OK;
}
