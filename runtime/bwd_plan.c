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

static const char *const names[CLATTN__BWD_VARIANTS] = {"backward_rows"};

const char *clattn__bwd_variant_name(unsigned variant) {
  return variant < CLATTN__BWD_VARIANTS ? names[variant] : "unknown";
}

int clattn__bwd_variant_of(const char *name) {
  for (int i = 0; i < CLATTN__BWD_VARIANTS; i++)
    if (!strcmp(name, names[i])) return i;
  return -1;
}

/* bwd_dkdv stages BQ rows of Q and dO with their LSE and D; bwd_dq stages BKV rows of K and V.
 * The two are separate kernels, so the larger of the two counts. */
size_t clattn__bwd_local_bytes(const clattn__config *c, const clattn__class *k) {
  size_t dkdv = (size_t)c->bq * (k->d + k->dv + 2), dq = (size_t)c->bkv * (k->d + k->dv);
  return (dkdv > dq ? dkdv : dq) * sizeof(float);
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
             "backward_rows",
             c->bq, c->bkv, MAX_BLOCK);
    return 0;
  }
  size_t most =
      dev->max_work_group < dev->max_item_size[0] ? dev->max_work_group : dev->max_item_size[0];
  if (c->bq > most || c->bkv > most) {
    snprintf(why, why_len, "backward BQ=%u BKV=%u: work-groups of at most %zu work-items", c->bq,
             c->bkv, most);
    return 0;
  }
  size_t bytes = clattn__bwd_local_bytes(c, k);
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

size_t clattn__bwd_configs_ranked(const clattn__device *dev, const clattn__class *k,
                                  clattn__config *out, size_t cap) {
  /* The default: the largest equal blocks of 64 rows or fewer that are legal (a work-item's
   * private arrays are of head-dim length whatever the blocks; the blocks set how often a
   * staged tile is reused and how many work-groups there are). */
  char why[160];
  clattn__config def = {0};
  def.bq = def.bkv = 64;
  while (def.bq > MIN_BLOCK && !clattn__bwd_config_legal(dev, k, &def, why, sizeof why))
    def.bq /= 2, def.bkv /= 2;
  size_t n = 0;
  if (!clattn__bwd_config_legal(dev, k, &def, why, sizeof why)) {
    def.bq = def.bkv = 1; /* the last resort: one row and one key per work-group */
    if (!clattn__bwd_config_legal(dev, k, &def, why, sizeof why)) return 0;
    if (cap) out[n++] = def;
    return n;
  }
  if (cap) out[n++] = def;
  /* Then the others, nearest the default first (in steps of x2), larger blocks first. */
  for (unsigned dist = 1; dist <= 2 * log2u(MAX_BLOCK); dist++)
    for (unsigned bq = MAX_BLOCK; bq >= MIN_BLOCK; bq /= 2)
      for (unsigned bkv = MAX_BLOCK; bkv >= MIN_BLOCK; bkv /= 2) {
        clattn__config c = {0};
        c.bq = bq, c.bkv = bkv;
        if (steps(bq, def.bq) + steps(bkv, def.bkv) != dist ||
            !clattn__bwd_config_legal(dev, k, &c, why, sizeof why) || n >= cap)
          continue;
        out[n++] = c;
      }
  return n;
}

clattn_status clattn__bwd_source(clattn_context *ctx, char **text, uint64_t *hash) {
  clattn_status st = clattn__kernel_source(ctx, "backward.cl", text);
  if (st == CLATTN_OK) *hash = clattn__hash(*text, strlen(*text), 0);
  return st;
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

clattn_status clattn__bwd_build(clattn_context *ctx, const char *source, const clattn__class *cls,
                                const clattn__config *c, clattn__bwd_plan *p, char *why,
                                size_t why_len) {
  char options[256];
  snprintf(options, sizeof options, "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DCAUSAL=%u",
           cls->d, cls->dv, c->bq, c->bkv, cls->causal);
  cl_program prog;
  p->dkdv = p->dq = NULL;
  clattn_status st = clattn__build(ctx, source, options, &prog);
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
  if (wg[0] < c->bkv || wg[1] < c->bq) {
    snprintf(why, why_len,
             "backward BQ=%u BKV=%u: the built kernels allow %zu and %zu work-items, need %u "
             "and %u",
             c->bq, c->bkv, wg[0], wg[1], c->bkv, c->bq);
    clattn__bwd_plan_release(p);
  } else if (lmem[0] > ctx->device.local_mem || lmem[1] > ctx->device.local_mem) {
    snprintf(why, why_len,
             "backward BQ=%u BKV=%u: the built kernels use %llu bytes of local memory", c->bq,
             c->bkv, (unsigned long long)(lmem[0] > lmem[1] ? lmem[0] : lmem[1]));
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
                                         uint64_t hash, char origin[16]) {
  clattn__match level;
  const clattn__db_entry *e =
      clattn__db_lookup(clattn__context_db(ctx), &ctx->device, &hash, cls, &level);
  if (e) {
    int exact = level == CLATTN__MATCH_EXACT && e->cls.bucket == cls->bucket;
    snprintf(origin, 16, "%s", exact ? "tuned" : "fallback");
  }
  return e;
}

void clattn__bwd_config_choice(clattn_context *ctx, const clattn__class *cls, clattn__config *c,
                               char origin[16]) {
  char why[160], *text = NULL;
  uint64_t hash = 0;
  const clattn__config *forced = clattn__override_find(ctx, cls);
  if (forced) {
    *c = *forced;
    snprintf(origin, 16, "override");
    return;
  }
  if (clattn__bwd_source(ctx, &text, &hash) == CLATTN_OK) {
    const clattn__db_entry *e = db_choice(ctx, cls, hash, origin);
    if (e && clattn__bwd_config_legal(&ctx->device, cls, &e->cfg, why, sizeof why)) {
      free(text);
      *c = e->cfg;
      return;
    }
  }
  free(text);
  memset(c, 0, sizeof *c);
  clattn__bwd_configs_ranked(&ctx->device, cls, c, 1);
  snprintf(origin, 16, "heuristic");
}

/* A chosen config (override, database): legal and fits once built, or a warning says why not. */
static clattn_status try_chosen(clattn_context *ctx, const char *source, const clattn__class *cls,
                                const clattn__config *c, const char *origin, clattn__bwd_plan *p) {
  char why[200];
  if (!clattn__bwd_config_legal(&ctx->device, cls, c, why, sizeof why)) {
    clattn__warn(ctx, "%s backward config for head_dim %u/%u no longer fits (%s); ignored", origin,
                 cls->d, cls->dv, why);
    return CLATTN_OK;
  }
  clattn_status st = clattn__bwd_build(ctx, source, cls, c, p, why, sizeof why);
  if (st == CLATTN_OK && !p->dkdv)
    clattn__warn(ctx, "%s backward config for head_dim %u/%u: %s; ignored", origin, cls->d, cls->dv,
                 why);
  if (st == CLATTN_OK && p->dkdv) {
    snprintf(p->origin, sizeof p->origin, "%s", origin);
    snprintf(p->reason, sizeof p->reason, "%s: %.1f of %.1f KiB local memory", origin,
             clattn__bwd_local_bytes(c, cls) / 1024.0, ctx->device.local_mem / 1024.0);
  }
  return st;
}

static clattn_status heuristic(clattn_context *ctx, const char *source, const clattn__class *cls,
                               clattn__bwd_plan *p) {
  clattn__config ranked[MAX_RANKED];
  size_t n = clattn__bwd_configs_ranked(&ctx->device, cls, ranked, MAX_RANKED);
  char why[200] = "";
  unsigned tried = 0, below = ~0u;
  for (size_t i = 0; i < n && tried < MAX_ATTEMPTS && !p->dkdv; i++) {
    /* After the built kernels did not fit, only configs whose blocks are all smaller. */
    unsigned most = ranked[i].bq > ranked[i].bkv ? ranked[i].bq : ranked[i].bkv;
    if (most >= below) continue;
    clattn_status st = clattn__bwd_build(ctx, source, cls, &ranked[i], p, why, sizeof why);
    if (st != CLATTN_OK) return st;
    tried++, below = most;
  }
  if (!p->dkdv)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "backward: no block config for head dims %u/%u fits this device (%llu "
                        "bytes of local memory)%s%s",
                        cls->d, cls->dv, (unsigned long long)ctx->device.local_mem,
                        why[0] ? "; " : "", why);
  snprintf(p->origin, sizeof p->origin, "heuristic");
  snprintf(p->reason, sizeof p->reason,
           "heuristic: the largest equal blocks of at most 64 that fit, %.1f of %.1f KiB local "
           "memory",
           clattn__bwd_local_bytes(&p->cfg, cls) / 1024.0, ctx->device.local_mem / 1024.0);
  return CLATTN_OK;
}

clattn_status clattn__bwd_plan_get(clattn_context *ctx, const clattn__class *cls,
                                   const clattn__bwd_plan **out) {
  for (clattn__bwd_plan *p = ctx->bwd_plans; p; p = p->next)
    if (!memcmp(&p->cls, cls, sizeof *cls)) return *out = p, CLATTN_OK;
  char *source = NULL, origin[16];
  uint64_t hash;
  clattn_status st = clattn__bwd_source(ctx, &source, &hash);
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
    const clattn__db_entry *e = db_choice(ctx, cls, hash, origin);
    if (e) st = try_chosen(ctx, source, cls, &e->cfg, origin, p);
  }
  if (st == CLATTN_OK && !p->dkdv) st = heuristic(ctx, source, cls, p);
  free(source);
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
