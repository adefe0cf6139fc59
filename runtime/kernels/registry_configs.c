/* What the kernel registry answers about a config of any family (registry.h): whether it
 * computes a class and is legal on a device, its build options, local memory and work-groups,
 * the ranked config space the planner and the tuner search, and its description in words. Apart
 * from registry.c, which holds the table of families and finds them by id, name or role: these
 * functions reach the table only through those lookups. */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The families the planner and the tuner search for a pass. */
static int searched(const clattn__family *f, unsigned pass) {
  return f->role == CLATTN__ROLE_PLANNED && f->pass == pass && !f->explicit_only;
}

const char *clattn__variant_name(unsigned missing) {
  return missing & CLATTN__VAR_MASK ? "a key range per row (CLATTN_WINDOW, CLATTN_CAUSAL_TOP_LEFT)"
         : missing & CLATTN__VAR_SOFTCAP ? "softcap"
         : missing & CLATTN__VAR_ALIBI   ? "ALiBi (alibi_slopes)"
         : missing & CLATTN__VAR_SINKS   ? "attention sinks (sinks)"
         : missing & CLATTN__VAR_KVLENS  ? "per-sequence key lengths (seqlens_kv)"
         : missing & CLATTN__VAR_VARLEN  ? "variable-length sequences (CLATTN_VARLEN)"
         : missing & CLATTN__VAR_KVCACHE ? "a KV cache (kv_cache)"
         : missing & CLATTN__VAR_PAGED   ? "a paged KV cache"
         : missing & CLATTN__VAR_KV8     ? "an int8 KV cache"
                                         : "atomic sums (CLATTN_NONDETERMINISTIC)";
}

int clattn__config_computes(const clattn__class *k, const clattn__config *c, char *why,
                            size_t why_len) {
  const clattn__family *f = clattn__family_of(c);
  unsigned missing = f ? k->variants & ~f->variants : 0;
  if (missing) {
    snprintf(why, why_len, "%s does not compute %s yet", f->name, clattn__variant_name(missing));
    return 0;
  }
  return 1;
}

int clattn__config_legal(const clattn__device *dev, const clattn__class *k, const clattn__config *c,
                         char *why, size_t why_len) {
  const clattn__family *f = clattn__family_of(c);
  if (!f || f->role != CLATTN__ROLE_PLANNED) {
    snprintf(why, why_len, "unknown kernel family (id %u)", c->kernel);
    return 0;
  }
  if (f->pass != k->pass) {
    snprintf(why, why_len, "%s is a %s kernel, not a %s one", f->name, clattn__pass_name(f->pass),
             clattn__pass_name((clattn__pass)k->pass));
    return 0;
  }
  unsigned dtypes = f->dtypes ? f->dtypes : 1u << CLATTN_F32;
  if (!(dtypes >> k->dtype & 1u)) {
    snprintf(why, why_len, "%s does not compute %s storage yet", f->name,
             clattn__dtype_name((clattn_dtype)k->dtype));
    return 0;
  }
  if (!clattn__config_computes(k, c, why, why_len)) return 0;
  if (!f->check(f, dev, k, c, why, why_len)) return 0;
  if (k->d > f->max_dim || k->dv > f->max_dim) {
    snprintf(why, why_len, "%s: head dims %u/%u, it computes at most %u", f->name, k->d, k->dv,
             f->max_dim);
    return 0;
  }
  return 1;
}

size_t clattn__config_local_bytes(const clattn__device *dev, const clattn__class *k,
                                  const clattn__config *c) {
  const clattn__family *f = clattn__family_of(c);
  return f ? f->local_bytes(dev, k, c) : 0;
}

size_t clattn__config_row_groups(const clattn__config *c, const clattn__shape *s) {
  const clattn__family *f = clattn__family_of(c);
  if (f && f->row_groups) return f->row_groups(c, s);
  return (s->seqlen_q + c->bq - 1) / c->bq * s->batch * s->heads_q;
}

size_t clattn__config_work_group(const clattn__config *c) {
  const clattn__family *f = clattn__family_of(c);
  size_t wg[CLATTN__MAX_ENTRIES] = {0};
  if (f) f->work_groups(c, wg);
  return wg[0];
}

/* The softcap's tanh by tanh.approx.f32 for half storage on NVIDIA (cl/common.cl's CAP_FAST
 * 2): one MUFU operation a score where ex2.approx and rcp.approx (CAP_FAST 1) took two. On an
 * H100 the fp16 softcap cost 1.05-1.08x plain against 1.13-1.20x, and the half rule's checks held
 * (docs/BENCHMARKS.md, stop 37); its error, up to cap x 2^-11 in a logit, is fp16's own rounding
 * of S at |s| = cap. fp32 storage keeps the accurate tanh (CAP_FAST 2 failed its rule). */
const char *clattn__cap_tanh_define(const clattn__device *dev, clattn_dtype dtype) {
  return dtype != CLATTN_F32 && dev->tensor_cores && !dev->mma_emulated ? " -DCAP_FAST=2" : "";
}

void clattn__config_options(const clattn__device *dev, const clattn__class *cls,
                            const clattn__config *c, char *out, size_t len) {
  const clattn__family *f = clattn__family_of(c);
  if (f)
    f->defines(f, dev, cls, c, out, len);
  else if (len)
    out[0] = 0;
  /* The storage type (cl/common.cl's DTYPE); fp32, the default, adds nothing, so its options and
   * cache keys stay what they were. */
  size_t at = strlen(out);
  if (at < len) snprintf(out + at, len - at, "%s", clattn__dtype_define((clattn_dtype)cls->dtype));
  /* The variants (cl/common.cl), likewise absent from a plain class's options. */
  at = strlen(out);
  if (at < len)
    snprintf(out + at, len - at, "%s%s%s%s%s%s%s%s%s",
             cls->variants & CLATTN__VAR_MASK ? " -DMASK=1" : "",
             cls->variants & CLATTN__VAR_SOFTCAP ? " -DSOFTCAP=1" : "",
             cls->variants & CLATTN__VAR_ALIBI ? " -DALIBI=1" : "",
             cls->variants & CLATTN__VAR_SINKS ? " -DSINKS=1" : "",
             cls->variants & CLATTN__VAR_KVLENS ? " -DKVLENS=1" : "",
             cls->variants & CLATTN__VAR_VARLEN ? " -DVARLEN=1" : "",
             cls->variants & CLATTN__VAR_KVCACHE ? " -DKVCACHE=1" : "",
             cls->variants & CLATTN__VAR_PAGED ? " -DPAGED=1" : "",
             cls->variants & CLATTN__VAR_KV8 ? " -DKV8=1" : "");
  at = strlen(out);
  if (at < len && (cls->variants & CLATTN__VAR_SOFTCAP))
    snprintf(out + at, len - at, "%s", clattn__cap_tanh_define(dev, cls->dtype));
  /* Extra options for experiments ($CLATTN_BUILD_OPTIONS, e.g. -cl-nv-verbose) are part of the
   * options, hence of every cache key. */
  const char *extra = dev->build_options; /* read once, when the context was made */
  size_t used = strlen(out);
  if (extra && extra[0] && used < len) snprintf(out + used, len - used, " %s", extra);
}

static unsigned *field(clattn__config *c, unsigned axis) {
  unsigned *fields[CLATTN__AXES] = {&c->bq, &c->bkv, &c->tpr, &c->stage, &c->pad, &c->rm, &c->vec};
  return fields[axis];
}

static size_t family_space(const clattn__family *f) {
  size_t n = 1;
  for (unsigned a = 0; a < f->naxes; a++) n *= f->axes[a].n;
  return n;
}

/* The i-th config of f's space: the last axis varies fastest. */
static clattn__config family_config(unsigned id, size_t i) {
  const clattn__family *f = clattn__family_at(id);
  clattn__config c = f->fixed;
  c.kernel = id;
  for (unsigned a = f->naxes; a-- > 0;) {
    *field(&c, f->axes[a].field) = f->axes[a].values[i % f->axes[a].n];
    i /= f->axes[a].n;
  }
  return c;
}

size_t clattn__config_space_size(clattn__pass pass) {
  size_t n = 0;
  for (unsigned id = 0; id < clattn__families(); id++)
    if (searched(clattn__family_at(id), pass)) n += family_space(clattn__family_at(id));
  return n;
}

typedef struct {
  clattn__config cfg;
  unsigned cost, order;
} ranked;

static int by_cost(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

size_t clattn__configs_ranked(const clattn__device *dev, const clattn__class *k,
                              clattn__config *out, size_t cap) {
  ranked *all = malloc(clattn__config_space_size((clattn__pass)k->pass) * sizeof *all + 1);
  if (!all) return 0;
  size_t n = 0;
  char why[200];
  for (unsigned id = 0; id < clattn__families(); id++) {
    const clattn__family *f = clattn__family_at(id);
    if (!searched(f, k->pass)) continue;
    for (size_t i = 0, size = family_space(f); i < size; i++) {
      clattn__config c = family_config(id, i);
      if (!clattn__config_legal(dev, k, &c, why, sizeof why)) continue;
      unsigned cost = f->cost(f, dev, k, &c);
      if (cost == CLATTN__UNRANKED) continue;
      all[n].cfg = c, all[n].cost = cost, all[n].order = (unsigned)n;
      n++;
    }
  }
  qsort(all, n, sizeof *all, by_cost);
  size_t m = n < cap ? n : cap;
  for (size_t i = 0; i < m; i++) out[i] = all[i].cfg;
  free(all);
  return m;
}

void clattn__config_reason(const clattn__device *dev, const clattn__class *k,
                           const clattn__config *c, char *out, size_t len) {
  const clattn__family *f = clattn__family_of(c);
  if (f)
    f->reason(f, dev, k, c, out, len);
  else
    snprintf(out, len, "unknown kernel family");
}

void clattn__config_describe(const clattn__config *c, char *out, size_t len) {
  static const char *const names[CLATTN__AXES] = {"BQ", "BKV", "TPR", "stage", "pad", "RM", "vec"};
  const clattn__family *f = clattn__family_of(c);
  int used = snprintf(out, len, "%s", f ? f->name : "unknown");
  clattn__config copy = *c;
  for (unsigned a = 0; f && a < f->naxes && used > 0 && (size_t)used < len; a++)
    used += snprintf(out + used, len - used, " %s=%u", names[f->axes[a].field],
                     *field(&copy, f->axes[a].field));
}
