/* The planner, one for every pass: a class's config comes from an override, else the tuning
 * database (this device and driver, then fallbacks), else a built-in default, else the
 * registry's heuristic ranking; it is built and checked against the built kernels' limits,
 * stepping down the ranking when they do not fit. Plans are cached per context and class. */
#include "plan.h"
#include "tunedb.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many ranked configs to build when built kernels do not fit their work-group or local
 * memory (the compiler may use more registers or local memory than the model assumes). */
enum { MAX_ATTEMPTS = 8 };

void clattn__plan_release(clattn__plan *p) {
  for (unsigned i = 0; i < CLATTN__MAX_ENTRIES; i++)
    if (p->kernels[i]) clReleaseKernel(p->kernels[i]);
  memset(p->kernels, 0, sizeof p->kernels);
  memset(&p->memo, 0, sizeof p->memo);
}

/* What a family's built kernels turned out to allow; later candidates of the family that need
 * more are not built (step down). */
typedef struct {
  size_t max_wg[CLATTN__MAX_ENTRIES], max_bytes;
} limits;

static void limits_init(limits *l) {
  for (unsigned i = 0; i < CLATTN__MAX_ENTRIES; i++) l->max_wg[i] = SIZE_MAX;
  l->max_bytes = SIZE_MAX;
}

static int within(const clattn_context *ctx, const clattn__class *cls, const clattn__config *c,
                  const limits *l) {
  size_t wg[CLATTN__MAX_ENTRIES] = {0};
  clattn__family_of(c)->work_groups(c, wg);
  for (unsigned i = 0; i < CLATTN__MAX_ENTRIES; i++)
    if (wg[i] > l->max_wg[i]) return 0;
  return clattn__config_local_bytes(&ctx->device, cls, c) < l->max_bytes;
}

static void config_text(const clattn__config *c, char *out, size_t len) {
  clattn__config_describe(c, out, len);
}

/* Builds c into p and compares the kernels with the model; on a miss, lowers l (NULL allowed)
 * so that later candidates step down. */
static clattn_status build_checked(clattn_context *ctx, const clattn__sources *src,
                                   const clattn__class *cls, const clattn__config *c,
                                   clattn__plan *p, limits *l, char *why, size_t why_len) {
  clattn__built b;
  clattn_status st = clattn__config_build(ctx, src, cls, c, &b);
  if (st != CLATTN_OK) return st;
  size_t need[CLATTN__MAX_ENTRIES] = {0}, lmem = 0, pmem = 0;
  clattn__family_of(c)->work_groups(c, need);
  size_t model = clattn__config_local_bytes(&ctx->device, cls, c);
  char text[160];
  config_text(c, text, sizeof text);
  for (unsigned i = 0; i < b.count; i++) {
    lmem = b.local_mem[i] > lmem ? b.local_mem[i] : lmem;
    pmem = b.private_mem[i] > pmem ? b.private_mem[i] : pmem;
    if (need[i] > b.max_wg[i]) {
      snprintf(why, why_len, "%s: built kernel allows %zu work-items, needs %zu", text, b.max_wg[i],
               need[i]);
      if (l && b.max_wg[i] < l->max_wg[i]) l->max_wg[i] = b.max_wg[i];
      clattn__built_release(&b);
      return CLATTN_OK;
    }
  }
  if (lmem > ctx->device.local_mem) {
    snprintf(why, why_len, "%s: built kernel uses %zu bytes of local memory, device has %llu", text,
             lmem, (unsigned long long)ctx->device.local_mem);
    if (l && model < l->max_bytes) l->max_bytes = model;
    clattn__built_release(&b);
    return CLATTN_OK;
  }
  memcpy(p->kernels, b.kernels, sizeof p->kernels);
  memset(&p->memo, 0, sizeof p->memo); /* new kernels: no argument known */
  p->cfg = *c, p->local_mem = lmem, p->private_mem = pmem;
  return CLATTN_OK;
}

clattn_status clattn__plan_build(clattn_context *ctx, const clattn__sources *src,
                                 const clattn__class *cls, const clattn__config *c, clattn__plan *p,
                                 char *why, size_t why_len) {
  return build_checked(ctx, src, cls, c, p, NULL, why, why_len);
}

/* A family the device's compiler rejects (a driver that refuses inline PTX, say) is a reason to
 * use another family, not to fail: a warning, with the start of the build log. */
static void build_failed_warn(clattn_context *ctx, const clattn__class *cls,
                              const clattn__config *c, const char *what) {
  clattn__warn(ctx, "%s%s: kernel %s does not build on this device; trying another (%.300s)",
               cls->pass == CLATTN__BACKWARD ? "backward " : "", what, clattn__family_of(c)->name,
               clattn__last_error_locked(ctx));
}

/* The device as the heuristic sees it: the local memory it reports. Past that (NVIDIA's larger
 * limits, device.c) only measured configs go: built-ins, the tuner's, an override. */
static clattn__device heuristic_device(const clattn_context *ctx) {
  clattn__device d = ctx->device;
  if (d.local_mem_reported < d.local_mem) d.local_mem = d.local_mem_reported;
  return d;
}

/* The heuristic's ranked configs, built in order; after a built kernel exceeds a limit, only
 * candidates of its family within the limit are built (step down). A family that fails to
 * build is passed over. */
static clattn_status heuristic(clattn_context *ctx, const clattn__sources *src,
                               const clattn__class *cls, clattn__plan *p) {
  size_t cap = clattn__config_space_size((clattn__pass)cls->pass);
  clattn__config *ranked = malloc(cap * sizeof *ranked + 1);
  if (!ranked) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  const clattn__device hd = heuristic_device(ctx);
  size_t n = clattn__configs_ranked(&hd, cls, ranked, cap);
  const char *pass = clattn__pass_name((clattn__pass)cls->pass);
  if (n == 0) {
    free(ranked);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                        "%s: no config of head_dim %u / %u fits this device's %llu bytes of local "
                        "memory and %zu work-items",
                        pass, cls->d, cls->dv, (unsigned long long)hd.local_mem,
                        ctx->device.max_work_group);
  }
  char why[MAX_ATTEMPTS][200];
  limits lim[CLATTN__MAX_FAMILIES];
  for (unsigned f = 0; f < CLATTN__MAX_FAMILIES; f++) limits_init(&lim[f]);
  size_t tried = 0;
  clattn_status st = CLATTN_OK;
  unsigned unbuildable = 0; /* families, as bits */
  char *build_error = NULL; /* the last build failure's message, with its log */
  for (size_t i = 0; i < n && tried < MAX_ATTEMPTS && !p->kernels[0]; i++) {
    unsigned fam = ranked[i].kernel;
    if ((unbuildable >> fam & 1u) || !within(ctx, cls, &ranked[i], &lim[fam])) continue;
    st = build_checked(ctx, src, cls, &ranked[i], p, &lim[fam], why[tried], sizeof why[tried]);
    if (st == CLATTN_ERR_BUILD) {
      free(build_error);
      build_error = strdup(clattn__last_error_locked(ctx));
      build_failed_warn(ctx, cls, &ranked[i], "heuristic");
      unbuildable |= 1u << fam;
      st = CLATTN_OK;
      continue;
    }
    if (st != CLATTN_OK) break;
    tried++;
  }
  free(ranked);
  if (st == CLATTN_OK && !p->kernels[0] && !tried && unbuildable) {
    /* Every family that could run here failed to build: the last failure, with its log. */
    st = clattn__fail(ctx, CLATTN_ERR_BUILD, "%s", build_error ? build_error : "build failed");
  } else if (st == CLATTN_OK && !p->kernels[0]) {
    st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES,
                      "%s: none of the %zu configs tried fits the built kernels' limits:", pass,
                      tried);
    for (size_t j = 0; j < tried; j++) {
      clattn__append_error(ctx, "\n  ");
      clattn__append_error(ctx, why[j]);
    }
    /* The family that did not build may be the one that would have fitted: say so here, not
     * only in the diagnostics. */
    if (build_error) {
      char line[400];
      snprintf(line, sizeof line, "\n  and a kernel family failed to build: %.300s", build_error);
      clattn__append_error(ctx, line);
    }
  }
  free(build_error);
  if (st != CLATTN_OK) return st;
  snprintf(p->origin, sizeof p->origin, "heuristic");
  clattn__config_reason(&ctx->device, cls, &p->cfg, p->reason, sizeof p->reason);
  if (tried > 1) {
    size_t len = strlen(p->reason);
    snprintf(p->reason + len, sizeof p->reason - len, "; stepped down from %s", why[0]);
  }
  return CLATTN_OK;
}

/* A chosen config (override, database, built-in): legal on this device and fits once built,
 * or a warning says why it was passed over. An override is run as given or fails. */
static clattn_status try_chosen(clattn_context *ctx, const clattn__sources *src,
                                const clattn__class *cls, const clattn__config *cfg,
                                const char *origin, const char *what, clattn__plan *p) {
  char why[200];
  const char *pass = cls->pass == CLATTN__BACKWARD ? " (backward)" : "";
  /* A database entry or built-in measured for the plain class whose family lacks the class's
   * variants is passed over quietly; an override of such a family is refused. */
  if (!clattn__config_computes(cls, cfg, why, sizeof why))
    return strcmp(origin, "override")
               ? CLATTN_OK
               : clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED, "override%s: %s", pass, why);
  if (!clattn__config_legal(&ctx->device, cls, cfg, why, sizeof why)) {
    /* An override is checked against the problem's class when it is set; a call over a KV cache
     * has the cache's rules too (an int8 cache's head dims for decode_mma), which it may break:
     * that call is refused as unsupported, naming the rule. */
    clattn__class plain = *cls;
    plain.variants &= ~(unsigned)CLATTN__VAR_CACHE;
    char plain_why[200];
    if (!strcmp(origin, "override") && (cls->variants & CLATTN__VAR_CACHE) &&
        clattn__config_legal(&ctx->device, &plain, cfg, plain_why, sizeof plain_why))
      return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                          "override%s cannot run this call over its KV cache: %s", pass, why);
    clattn__warn(ctx, "%s%s for head_dim %u/%u%s no longer fits this device (%s); ignored", what,
                 pass, cls->d, cls->dv, cls->causal ? " causal" : "", why);
    return CLATTN_OK;
  }
  clattn_status st = build_checked(ctx, src, cls, cfg, p, NULL, why, sizeof why);
  if (st == CLATTN_ERR_BUILD && strcmp(origin, "override")) {
    build_failed_warn(ctx, cls, cfg, what);
    return CLATTN_OK;
  }
  if (st != CLATTN_OK) return st;
  if (!p->kernels[0]) {
    clattn__warn(ctx, "%s%s for head_dim %u/%u: %s; ignored", what, pass, cls->d, cls->dv, why);
    return CLATTN_OK;
  }
  snprintf(p->origin, sizeof p->origin, "%s", origin);
  snprintf(p->reason, sizeof p->reason, "%s: %.1f of %.1f KiB local memory, %zu work-items", what,
           clattn__config_local_bytes(&ctx->device, cls, cfg) / 1024.0,
           ctx->device.local_mem / 1024.0, clattn__config_work_group(cfg));
  return CLATTN_OK;
}

static const char *match_name(clattn__match m) {
  return m == CLATTN__MATCH_EXACT    ? "tuning database entry for this device and driver"
         : m == CLATTN__MATCH_DEVICE ? "tuning database entry for this device, another driver"
                                     : "tuning database entry for another device of this vendor";
}

/* The database's entry for the class, its origin and what it is, or NULL. */
static const clattn__db_entry *db_choice(clattn_context *ctx, const clattn__class *cls,
                                         const clattn__sources *src, char origin[16],
                                         const char **what) {
  clattn__match level;
  const clattn__db_entry *e =
      clattn__db_lookup(clattn__context_db(ctx), &ctx->device, src->hash, cls, &level);
  if (e) {
    snprintf(origin, 16, "%s", clattn__db_exact(e, level, cls) ? "tuned" : "fallback");
    *what = match_name(level);
  }
  return e;
}

clattn_status clattn__plan_get(clattn_context *ctx, const clattn__class *cls,
                               const clattn__plan **out) {
  for (clattn__plan *p = ctx->plans; p; p = p->next)
    if (!p->derived && memcmp(&p->cls, cls, sizeof *cls) == 0) {
      *out = p;
      return CLATTN_OK;
    }
  clattn__sources src;
  clattn_status st = clattn__sources_load(ctx, (clattn__pass)cls->pass, &src);
  if (st != CLATTN_OK) return st;
  clattn__plan *p = calloc(1, sizeof *p);
  if (!p) {
    clattn__sources_free(&src);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  p->cls = *cls;
  const clattn__config *forced = clattn__override_find(ctx, cls);
  if (forced) {
    st = try_chosen(ctx, &src, cls, forced, "override", "override", p);
    if (st == CLATTN_OK && !p->kernels[0])
      st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "the %s override does not fit: %s",
                        clattn__pass_name((clattn__pass)cls->pass), clattn__diagnostics_last(ctx));
  }
  if (st == CLATTN_OK && !p->kernels[0]) {
    char origin[16];
    const char *what = NULL;
    const clattn__db_entry *e = db_choice(ctx, cls, &src, origin, &what);
    if (e) st = try_chosen(ctx, &src, cls, &e->cfg, origin, what, p);
  }
  if (st == CLATTN_OK && !p->kernels[0]) {
    clattn__config b;
    if (clattn__builtin_find(&ctx->device, cls, &b))
      st = try_chosen(ctx, &src, cls, &b, "built-in", "built-in default", p);
  }
  if (st == CLATTN_OK && !p->kernels[0]) st = heuristic(ctx, &src, cls, p);
  clattn__sources_free(&src);
  if (st != CLATTN_OK) {
    clattn__plan_release(p);
    free(p);
    return st;
  }
  p->next = ctx->plans;
  ctx->plans = p;
  *out = p;
  return CLATTN_OK;
}

void clattn__plan_choice(clattn_context *ctx, const clattn__class *cls, clattn__config *c,
                         char origin[16]) {
  char why[200];
  const clattn__config *forced = clattn__override_find(ctx, cls);
  if (forced) {
    *c = *forced;
    snprintf(origin, 16, "override");
    return;
  }
  clattn__sources src;
  if (clattn__sources_load(ctx, (clattn__pass)cls->pass, &src) == CLATTN_OK) {
    const char *what;
    const clattn__db_entry *e = db_choice(ctx, cls, &src, origin, &what);
    int legal = e && clattn__config_legal(&ctx->device, cls, &e->cfg, why, sizeof why);
    clattn__sources_free(&src);
    if (legal) {
      *c = e->cfg;
      return;
    }
  }
  clattn__config b;
  if (clattn__builtin_find(&ctx->device, cls, &b) &&
      clattn__config_legal(&ctx->device, cls, &b, why, sizeof why)) {
    *c = b;
    snprintf(origin, 16, "built-in");
    return;
  }
  memset(c, 0, sizeof *c);
  c->kernel = CLATTN__NO_FAMILY; /* none fits: the public form names no kernel */
  const clattn__device hd = heuristic_device(ctx);
  snprintf(origin, 16, "%s", clattn__configs_ranked(&hd, cls, c, 1) ? "heuristic" : "none");
}

void clattn__plans_forget(clattn_context *ctx, const clattn__class *cls) {
  for (clattn__plan **pp = &ctx->plans; *pp;) {
    clattn__plan *p = *pp;
    /* Every variant of the class with it: they share its overrides (but CLATTN_VARLEN's) and
     * its database entries, and replanning one more than needed costs nothing but time. Cache
     * classes are compared by their overrides' key (seqlen_q's bucket), which an override from a
     * problem names, so a new entry for one context replans the cache's other contexts too. */
    clattn__class k = clattn__override_class(&p->cls),
                  c = clattn__override_class(cls ? cls : &p->cls);
    k.variants = c.variants = 0;
    if (!cls || !memcmp(&k, &c, sizeof k)) {
      *pp = p->next;
      clattn__plan_release(p);
      free(p);
    } else {
      pp = &p->next;
    }
  }
}
