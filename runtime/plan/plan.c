/* Planning: the config for a problem class (heuristic from the local-memory model), built with
 * -D parameters, checked against the built kernel's limits, stepping down when it does not fit.
 * Plans are cached per context. */
#include "internal.h"
#include "tunedb.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many ranked configs to try when built kernels do not fit their work-group or local
 * memory (the compiler may use more registers or local memory than the model assumes). */
enum { MAX_ATTEMPTS = 8 };

void clattn__config_options(const clattn__device *dev, const clattn__class *cls,
                            const clattn__config *c, char *out, size_t len) {
  if (c->variant == 2)
    snprintf(out, len,
             "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DPAD=%u -DCAUSAL=%u -DVEC=%u "
             "-DKVSPLIT=%u%s",
             cls->d, cls->dv, c->bq, c->bkv, c->pad ? 1u : 0u, cls->causal, c->vec ? c->vec : 1,
             c->stage == 2 ? 1u : 0u,
             dev->mma_emulated ? " -DMMA_EMULATE=1 -DSCRATCH=" CLATTN__STR(CLATTN__MMA_SCRATCH)
                               : "");
  else if (c->variant == 1)
    snprintf(out, len,
             "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTX=%u -DRM=%u -DPAD=%u -DCAUSAL=%u "
             "-DVEC=%u",
             cls->d, cls->dv, c->bq, c->bkv, c->tpr, c->rm ? c->rm : 1, c->pad, cls->causal,
             c->vec ? c->vec : 1);
  else
    snprintf(out, len,
             "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DBKV=%u -DTPR=%u -DSTAGE_KV=%u -DPAD=%u "
             "-DCAUSAL=%u -DVEC=%u",
             cls->d, cls->dv, c->bq, c->bkv, c->tpr, c->stage, c->pad, cls->causal,
             c->vec ? c->vec : 1);
  /* Extra options for experiments ($CLATTN_BUILD_OPTIONS, e.g. -cl-nv-verbose) are part of the
   * options, hence of every cache key. */
  const char *extra = dev->build_options; /* read once, when the context was made */
  size_t used = strlen(out);
  if (extra && extra[0] && used < len) snprintf(out + used, len - used, " %s", extra);
}

/* Builds c and checks the kernel's limits. *kernel is NULL when it does not fit: then why says
 * what did not, and *max_wg / *max_bytes are lowered so that later candidates step down. */
clattn_status clattn__build_config(clattn_context *ctx, const clattn__sources *src,
                                   const clattn__class *cls, const clattn__config *c,
                                   cl_kernel *kernel, size_t *local_mem, size_t *max_wg,
                                   size_t *max_bytes, char *why, size_t why_len) {
  char options[512];
  clattn__config_options(&ctx->device, cls, c, options, sizeof options);
  cl_program prog;
  *kernel = NULL;
  if (c->variant >= CLATTN__VARIANTS)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "unknown kernel variant %u", c->variant);
  clattn_status st = clattn__build(ctx, src->text[c->variant], options, &prog);
  if (st != CLATTN_OK) return st;
  cl_int err;
  cl_kernel kern = clCreateKernel(prog, "clattn_forward", &err);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateKernel(clattn_forward)");
  size_t wg_max = 0;
  cl_ulong lmem = 0;
  err = clGetKernelWorkGroupInfo(kern, ctx->device_id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg_max,
                                 &wg_max, NULL);
  if (err == CL_SUCCESS)
    err = clGetKernelWorkGroupInfo(kern, ctx->device_id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem,
                                   &lmem, NULL);
  if (err != CL_SUCCESS) {
    clReleaseKernel(kern);
    return clattn__fail_cl(ctx, err, "clGetKernelWorkGroupInfo");
  }
  size_t wg = clattn__config_work_group(c), model = clattn__config_local_bytes(c, cls);
  if (wg > wg_max) {
    snprintf(why, why_len, "BQ=%u BKV=%u TPR=%u: built kernel allows %zu work-items, needs %zu",
             c->bq, c->bkv, c->tpr, wg_max, wg);
    if (wg_max < *max_wg) *max_wg = wg_max;
    clReleaseKernel(kern);
  } else if (lmem > ctx->device.local_mem) {
    snprintf(why, why_len,
             "BQ=%u BKV=%u TPR=%u: built kernel uses %llu bytes of local memory, device has %llu",
             c->bq, c->bkv, c->tpr, (unsigned long long)lmem,
             (unsigned long long)ctx->device.local_mem);
    if (model < *max_bytes) *max_bytes = model;
    clReleaseKernel(kern);
  } else {
    *kernel = kern;
    *local_mem = (size_t)lmem;
  }
  return CLATTN_OK;
}

/* A kernel variant the device's compiler rejects (a driver that refuses forward_mma's inline
 * PTX, say) is a reason to use another variant, not to fail: a warning, with the start of the
 * build log. */
static void build_failed_warn(clattn_context *ctx, const clattn__config *c, const char *what) {
  clattn__warn(ctx, "%s: kernel %s does not build on this device; trying another (%.300s)", what,
               clattn__variant_name(c->variant), clattn__last_error_locked(ctx));
}

/* The heuristic's ranked configs, built in order; after a built kernel exceeds a limit, only
 * candidates below it are built (step down). A variant that fails to build is passed over. */
static clattn_status heuristic_pick(clattn_context *ctx, const clattn__sources *source,
                                    const clattn__class *cls, clattn__plan *p,
                                    const clattn__config *ranked, size_t n);

static clattn_status heuristic_plan(clattn_context *ctx, const clattn__sources *source,
                                    const clattn__class *cls, clattn__plan *p) {
  /* All of them: when a variant does not build, the next one's may rank far below. */
  clattn__config *ranked = malloc(clattn__config_space_size() * sizeof *ranked);
  if (!ranked) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  size_t n = clattn__configs_ranked(&ctx->device, cls, ranked, clattn__config_space_size());
  clattn_status st = heuristic_pick(ctx, source, cls, p, ranked, n);
  free(ranked);
  return st;
}

static clattn_status heuristic_pick(clattn_context *ctx, const clattn__sources *source,
                                    const clattn__class *cls, clattn__plan *p,
                                    const clattn__config *ranked, size_t n) {
  if (n == 0)
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "no tile config of head_dim %u / %u fits this device's %llu bytes of local "
                        "memory and %zu work-items",
                        cls->d, cls->dv, (unsigned long long)ctx->device.local_mem,
                        ctx->device.max_work_group);
  char why[MAX_ATTEMPTS][160];
  size_t tried = 0, max_wg = SIZE_MAX, max_bytes = SIZE_MAX;
  clattn_status st = CLATTN_OK;
  unsigned unbuildable = 0; /* variants, as bits */
  char *build_error = NULL; /* the last build failure's message, with its log */
  for (size_t i = 0; i < n && tried < MAX_ATTEMPTS && !p->kernel; i++) {
    if (clattn__config_work_group(&ranked[i]) > max_wg ||
        clattn__config_local_bytes(&ranked[i], cls) >= max_bytes ||
        (unbuildable >> ranked[i].variant & 1u))
      continue;
    st = clattn__build_config(ctx, source, cls, &ranked[i], &p->kernel, &p->kernel_local_mem,
                              &max_wg, &max_bytes, why[tried], sizeof why[tried]);
    if (st == CLATTN_ERR_BUILD) {
      free(build_error);
      build_error = strdup(clattn__last_error_locked(ctx));
      build_failed_warn(ctx, &ranked[i], "heuristic");
      unbuildable |= 1u << ranked[i].variant;
      continue;
    }
    if (st != CLATTN_OK) {
      free(build_error);
      return st;
    }
    p->cfg = ranked[i];
    tried++;
  }
  /* Every variant that could run here failed to build: the last failure, with its build log. */
  if (!p->kernel && !tried && unbuildable) {
    st = clattn__fail(ctx, CLATTN_ERR_BUILD, "%s", build_error ? build_error : "build failed");
    free(build_error);
    return st;
  }
  if (!p->kernel) {
    st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                      "none of the %zu tile configs tried fits the built kernel's limits:", tried);
    for (size_t j = 0; j < tried; j++) {
      clattn__append_error(ctx, "\n  ");
      clattn__append_error(ctx, why[j]);
    }
    /* The variant that did not build may be the one that would have fitted: say so here, not
     * only in the diagnostics. */
    if (build_error) {
      char line[400];
      snprintf(line, sizeof line, "\n  and a kernel variant failed to build: %.300s", build_error);
      clattn__append_error(ctx, line);
    }
    free(build_error);
    return st;
  }
  free(build_error);
  snprintf(p->origin, sizeof p->origin, "heuristic");
  clattn__config_reason(&ctx->device, cls, &p->cfg, p->reason, sizeof p->reason);
  if (tried > 1) {
    size_t len = strlen(p->reason);
    snprintf(p->reason + len, sizeof p->reason - len, "; stepped down from %s", why[0]);
  }
  return CLATTN_OK;
}

/* A chosen config (override, database, built-in): legal on this device and fits once built,
 * or a warning says why it was passed over. */
static clattn_status try_chosen(clattn_context *ctx, const clattn__sources *source,
                                const clattn__class *cls, const clattn__config *cfg,
                                const char *origin, const char *what, clattn__plan *p) {
  char why[160];
  size_t max_wg = SIZE_MAX, max_bytes = SIZE_MAX;
  if (!clattn__config_legal(&ctx->device, cls, cfg, why, sizeof why)) {
    clattn__warn(ctx, "%s for head_dim %u/%u%s no longer fits this device (%s); ignored", what,
                 cls->d, cls->dv, cls->causal ? " causal" : "", why);
    return CLATTN_OK;
  }
  clattn_status st = clattn__build_config(ctx, source, cls, cfg, &p->kernel, &p->kernel_local_mem,
                                          &max_wg, &max_bytes, why, sizeof why);
  /* An override is run as given or fails; a database entry or built-in gives way. */
  if (st == CLATTN_ERR_BUILD && strcmp(origin, "override")) {
    build_failed_warn(ctx, cfg, what);
    return CLATTN_OK;
  }
  if (st != CLATTN_OK) return st;
  if (!p->kernel) {
    clattn__warn(ctx, "%s for head_dim %u/%u: %s; ignored", what, cls->d, cls->dv, why);
    return CLATTN_OK;
  }
  p->cfg = *cfg;
  snprintf(p->origin, sizeof p->origin, "%s", origin);
  snprintf(p->reason, sizeof p->reason, "%s: %.1f of %.1f KiB local memory, %zu work-items", what,
           clattn__config_local_bytes(cfg, cls) / 1024.0, ctx->device.local_mem / 1024.0,
           clattn__config_work_group(cfg));
  return CLATTN_OK;
}

static const char *match_name(clattn__match m) {
  return m == CLATTN__MATCH_EXACT    ? "tuning database entry for this device and driver"
         : m == CLATTN__MATCH_DEVICE ? "tuning database entry for this device, another driver"
                                     : "tuning database entry for another device of this vendor";
}

clattn_status clattn__plan_get(clattn_context *ctx, const clattn__class *cls,
                               const clattn__plan **out) {
  for (clattn__plan *p = ctx->plans; p; p = p->next)
    if (!p->derived && memcmp(&p->cls, cls, sizeof *cls) == 0) {
      *out = p;
      return CLATTN_OK;
    }
  clattn__sources sources, *source = &sources;
  clattn_status st = clattn__sources_load(ctx, &sources);
  if (st != CLATTN_OK) return st;
  clattn__plan *p = calloc(1, sizeof *p);
  if (!p) {
    clattn__sources_free(&sources);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  p->cls = *cls;
  const clattn__config *forced = clattn__override_find(ctx, cls);
  if (forced) {
    st = try_chosen(ctx, source, cls, forced, "override", "override", p);
    if (st == CLATTN_OK && !p->kernel)
      st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "the override does not fit: %s",
                        clattn__diagnostics_last(ctx));
  }
  if (st == CLATTN_OK && !p->kernel) {
    clattn__match level;
    const clattn__db_entry *e =
        clattn__db_lookup(clattn__context_db(ctx), &ctx->device, sources.hash, cls, &level);
    if (e)
      st = try_chosen(ctx, source, cls, &e->cfg,
                      level == CLATTN__MATCH_EXACT && e->cls.bucket == cls->bucket ? "tuned"
                                                                                   : "fallback",
                      match_name(level), p);
  }
  if (st == CLATTN_OK && !p->kernel) {
    const clattn__config *b = clattn__builtin_find(&ctx->device, cls);
    if (b) st = try_chosen(ctx, source, cls, b, "built-in", "built-in default", p);
  }
  if (st == CLATTN_OK && !p->kernel) st = heuristic_plan(ctx, source, cls, p);
  clattn__sources_free(&sources);
  if (st != CLATTN_OK) {
    if (p->kernel) clReleaseKernel(p->kernel);
    free(p);
    return st;
  }
  p->next = ctx->plans;
  ctx->plans = p;
  *out = p;
  return CLATTN_OK;
}

void clattn__plans_forget(clattn_context *ctx, const clattn__class *cls) {
  for (clattn__bwd_plan **pp = &ctx->bwd_plans; *pp;) {
    clattn__bwd_plan *p = *pp;
    if (!cls || !memcmp(&p->cls, cls, sizeof *cls)) {
      *pp = p->next;
      clattn__bwd_plan_release(p);
      free(p);
    } else {
      pp = &p->next;
    }
  }
  for (clattn__plan **pp = &ctx->plans; *pp;) {
    clattn__plan *p = *pp;
    if (!cls || !memcmp(&p->cls, cls, sizeof *cls)) {
      *pp = p->next;
      clReleaseKernel(p->kernel);
      free(p);
    } else {
      pp = &p->next;
    }
  }
}

static size_t groups_of(const clattn__shape *s, unsigned bq) {
  return (s->seqlen_q + bq - 1) / bq * s->batch * s->heads_q;
}

/* The smallest query block of a variant: a warp's 16 rows (forward_mma), the rows per
 * work-item (forward_tiles), one row (forward_rows). */
static unsigned min_block_q(const clattn__config *c) {
  return c->variant == 2 ? 16 : c->variant == 1 && c->rm ? c->rm : 1;
}

clattn_status clattn__plan_for_grid(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan **out) {
  clattn__class cls = clattn__class_of(s);
  const clattn__plan *base;
  clattn_status st = clattn__plan_get(ctx, &cls, &base);
  *out = base;
  size_t units = ctx->device.compute_units;
  if (st != CLATTN_OK || !strcmp(base->origin, "override") || groups_of(s, base->cfg.bq) >= units)
    return st;
  /* Keys enough to split (clattn__split_count's rule): splitting them fills the device without
   * reading each K/V tile once more per extra query block, which finer blocks would. */
  if (ctx->queue_in_order && s->seqlen_kv >= 4 * (size_t)base->cfg.bkv) return CLATTN_OK;
  clattn__config c = base->cfg;
  char why[160];
  while (c.bq / 2 >= min_block_q(&base->cfg) && groups_of(s, c.bq) < units) {
    clattn__config half = c;
    half.bq /= 2;
    /* Only while it adds work-groups: rows beyond seqlen_q split into idle ones. */
    if (half.bq % min_block_q(&half) || groups_of(s, half.bq) <= groups_of(s, c.bq) ||
        !clattn__config_legal(&ctx->device, &cls, &half, why, sizeof why))
      break;
    c = half;
  }
  if (c.bq == base->cfg.bq) return CLATTN_OK;
  for (clattn__plan *p = ctx->plans; p; p = p->next)
    if (p->derived && !memcmp(&p->cls, &cls, sizeof cls) && !memcmp(&p->cfg, &c, sizeof c)) {
      *out = p;
      return CLATTN_OK;
    }
  clattn__sources sources;
  if ((st = clattn__sources_load(ctx, &sources)) != CLATTN_OK) return st;
  clattn__plan *p = calloc(1, sizeof *p);
  if (!p) {
    clattn__sources_free(&sources);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  size_t max_wg = SIZE_MAX, max_bytes = SIZE_MAX;
  st = clattn__build_config(ctx, &sources, &cls, &c, &p->kernel, &p->kernel_local_mem, &max_wg,
                            &max_bytes, why, sizeof why);
  clattn__sources_free(&sources);
  if (st != CLATTN_OK || !p->kernel) { /* keep the class's plan: it runs, if on fewer units */
    free(p);
    return st;
  }
  p->cls = cls, p->cfg = c, p->derived = 1;
  snprintf(p->origin, sizeof p->origin, "%s", base->origin);
  const char *colon = strchr(base->reason, ':');
  int what = colon ? (int)(colon - base->reason) : (int)strlen(base->reason);
  snprintf(p->reason, sizeof p->reason,
           "%.*s, with query blocks of %u rows instead of %u so that its %zu work-groups fill "
           "more of the %zu compute units: %.1f of %.1f KiB local memory, %zu work-items",
           what, base->reason, c.bq, base->cfg.bq, groups_of(s, c.bq), units,
           clattn__config_local_bytes(&c, &cls) / 1024.0, ctx->device.local_mem / 1024.0,
           clattn__config_work_group(&c));
  p->next = ctx->plans;
  ctx->plans = p;
  *out = p;
  return CLATTN_OK;
}
