/* The kernel registry: one entry per kernel family of the fused path, and the functions that
 * answer for any of them (legality, ranking, build options). A family is known by its name here
 * and nowhere else; the rest of the runtime asks the registry (docs/DESIGN.md: adding a family
 * is a cl/ file, one entry below and its tests). */
#include "families.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The storage types of the families that take half precision too (cl/common.cl). */
#define HALF_TOO (1u << CLATTN_F32 | 1u << CLATTN_F16 | 1u << CLATTN_BF16)

/* The backward's block sizes; below 4 only as a device's last resort (backward_families.c). */
#define POW2_BLOCKS                                                                                \
  { 256, 128, 64, 32, 16, 8, 4, 2, 1 }

/* forward_naive (cl/forward_naive.cl), test-only: a work-item per query row, no local memory.
 * Its model is small enough to live beside its entry. */
static int naive_check(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                       const clattn__config *c, char *why, size_t why_len) {
  size_t most =
      dev->max_work_group < dev->max_item_size[0] ? dev->max_work_group : dev->max_item_size[0];
  if (!c->bq || c->bq > most) {
    snprintf(why, why_len, "%s BQ=%u: 1 to %zu rows (work-items) per work-group", f->name, c->bq,
             most);
    return 0;
  }
  return 1;
}

static size_t naive_local(const clattn__device *dev, const clattn__class *k,
                          const clattn__config *c) {
  return 0;
}

static void naive_work_groups(const clattn__config *c, size_t *wg) {
  wg[0] = c->bq;
}

static unsigned naive_cost(const clattn__family *f, const clattn__device *dev,
                           const clattn__class *k, const clattn__config *c) {
  return 0;
}

static void naive_defines(const clattn__family *f, const clattn__device *dev,
                          const clattn__class *k, const clattn__config *c, char *out, size_t len) {
  snprintf(out, len, "-cl-std=CL1.2 -DD=%u -DDV=%u -DBQ=%u -DCAUSAL=%u", k->d, k->dv, c->bq,
           k->causal);
}

static void naive_reason(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                         const clattn__config *c, char *out, size_t len) {
  snprintf(out, len, "%s (test-only): a work-item per row, %u rows per work-group", f->name, c->bq);
}

static const clattn__family table[] = {
    /* The planned families: a pass's kernels, a config space to search. */
    {.name = "forward_rows",
     .pass = CLATTN__FORWARD,
     .files = {"common.cl", "forward.cl"},
     .entries = {"clattn_forward"},
     .dtypes = HALF_TOO,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .axes = {{CLATTN__AX_BQ, 8, {128, 64, 32, 16, 8, 4, 2, 1}},
              {CLATTN__AX_BKV, 5, {128, 64, 32, 16, 8}},
              {CLATTN__AX_TPR, 6, {1, 2, 4, 8, 16, 32}},
              {CLATTN__AX_STAGE, 2, {0, 1}},
              {CLATTN__AX_PAD, 2, {0, 1}},
              {CLATTN__AX_VEC, 2, {1, 4}}},
     .naxes = 6,
     .fixed = {.rm = 1},
     .check = clattn__forward_check,
     .local_bytes = clattn__rows_local,
     .work_groups = clattn__rows_work_groups,
     .cost = clattn__rows_cost,
     .defines = clattn__rows_defines,
     .reason = clattn__rows_reason,
     .min_block_q = clattn__one_row,
     .accept = clattn__forward_accept,
     .bind = clattn__forward_bind},
    {.name = "forward_tiles",
     .pass = CLATTN__FORWARD,
     .files = {"common.cl", "forward_tiles.cl"},
     .entries = {"clattn_forward"},
     .dtypes = HALF_TOO,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .axes = {{CLATTN__AX_BQ, 8, {128, 64, 32, 16, 8, 4, 2, 1}},
              {CLATTN__AX_BKV, 5, {128, 64, 32, 16, 8}},
              {CLATTN__AX_TPR, 6, {1, 2, 4, 8, 16, 32}},
              {CLATTN__AX_RM, 4, {1, 2, 4, 8}},
              {CLATTN__AX_PAD, 2, {0, 1}},
              {CLATTN__AX_VEC, 2, {1, 4}}},
     .naxes = 6,
     .fixed = {.stage = 1},
     .check = clattn__forward_check,
     .local_bytes = clattn__tiles_local,
     .work_groups = clattn__tiles_work_groups,
     .cost = clattn__tiles_cost,
     .defines = clattn__tiles_defines,
     .reason = clattn__tiles_reason,
     .min_block_q = clattn__tiles_min_block_q,
     .accept = clattn__forward_accept,
     .bind = clattn__forward_bind},
    {.name = "forward_mma",
     .pass = CLATTN__FORWARD,
     .files = {"common.cl", "mma.cl", "forward_mma.cl"},
     .entries = {"clattn_forward"},
     .tensor_cores = 1,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .axes = {{CLATTN__AX_BQ, 4, {16, 32, 64, 128}},
              {CLATTN__AX_BKV, 5, {8, 16, 32, 64, 128}},
              {CLATTN__AX_PAD, 2, {0, 1}},
              {CLATTN__AX_STAGE, 2, {1, 2}},
              {CLATTN__AX_VEC, 2, {1, 4}}},
     .naxes = 5,
     .fixed = {.tpr = 1, .stage = 1, .rm = 1},
     .check = clattn__forward_check,
     .local_bytes = clattn__mma_local,
     .work_groups = clattn__mma_work_groups,
     .cost = clattn__mma_cost,
     .defines = clattn__mma_defines,
     .reason = clattn__mma_reason,
     .min_block_q = clattn__mma_min_block_q,
     .accept = clattn__forward_accept,
     .bind = clattn__forward_bind},
    {.name = "backward_rows",
     .pass = CLATTN__BACKWARD,
     .files = {"common.cl", "backward.cl"},
     .entries = {"bwd_dkdv", "bwd_dq"},
     .dtypes = HALF_TOO,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .axes = {{CLATTN__AX_BQ, 9, POW2_BLOCKS}, {CLATTN__AX_BKV, 9, POW2_BLOCKS}},
     .naxes = 2,
     .check = clattn__backward_check,
     .local_bytes = clattn__bwd_rows_local,
     .work_groups = clattn__bwd_rows_work_groups,
     .cost = clattn__backward_cost,
     .defines = clattn__backward_defines,
     .reason = clattn__backward_reason,
     .min_block_q = clattn__one_row,
     .accept = clattn__backward_accept,
     .bind = clattn__backward_bind},
    {.name = "backward_mma",
     .pass = CLATTN__BACKWARD,
     .files = {"common.cl", "mma.cl", "backward_mma.cl"},
     .entries = {"bwd_dkdv", "bwd_dq"},
     .tensor_cores = 1,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = 128,
     .axes = {{CLATTN__AX_BQ, 9, POW2_BLOCKS}, {CLATTN__AX_BKV, 9, POW2_BLOCKS}},
     .naxes = 2,
     .check = clattn__backward_check,
     .local_bytes = clattn__bwd_mma_local,
     .work_groups = clattn__bwd_mma_work_groups,
     .cost = clattn__backward_cost,
     .defines = clattn__backward_defines,
     .reason = clattn__backward_reason,
     .min_block_q = clattn__one_row,
     .accept = clattn__backward_accept,
     .bind = clattn__backward_bind},
    /* Test-only: runs only as an override (tests/test_family.c). */
    {.name = "forward_naive",
     .pass = CLATTN__FORWARD,
     .files = {"forward_naive.cl"},
     .entries = {"clattn_forward"},
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .explicit_only = 1,
     .axes = {{CLATTN__AX_BQ, 4, {16, 32, 64, 128}}},
     .naxes = 1,
     .fixed = {.bkv = 1, .tpr = 1, .rm = 1, .vec = 1},
     .check = naive_check,
     .local_bytes = naive_local,
     .work_groups = naive_work_groups,
     .cost = naive_cost,
     .defines = naive_defines,
     .reason = naive_reason,
     .min_block_q = clattn__one_row,
     .accept = clattn__forward_accept,
     .bind = clattn__forward_bind},
    /* Tensor cores in half storage (fp32 is forward_mma's): ranked first where they are. */
    {.name = "forward_mma_half",
     .pass = CLATTN__FORWARD,
     .files = {"common.cl", "mma.cl", "mma_half.cl", "forward_mma_half.cl"},
     .entries = {"clattn_forward"},
     .tensor_cores = 1,
     .dtypes = 1u << CLATTN_F16 | 1u << CLATTN_BF16,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .axes = {{CLATTN__AX_BQ, 4, {64, 128, 32, 16}},
              {CLATTN__AX_BKV, 4, {64, 32, 128, 16}},
              {CLATTN__AX_PAD, 2, {1, 0}},
              {CLATTN__AX_STAGE, 2, {1, 2}}},
     .naxes = 4,
     .fixed = {.tpr = 1, .rm = 1, .vec = 1},
     .check = clattn__mma_half_check,
     .local_bytes = clattn__mma_half_local,
     .work_groups = clattn__mma_work_groups,
     .cost = clattn__mma_half_cost,
     .defines = clattn__mma_half_defines,
     .reason = clattn__mma_half_reason,
     .min_block_q = clattn__mma_min_block_q,
     .accept = clattn__forward_accept,
     .bind = clattn__forward_bind},
    /* The backward on tensor cores in half storage (fp32 is backward_mma's). */
    {.name = "backward_mma_half",
     .pass = CLATTN__BACKWARD,
     .files = {"common.cl", "mma.cl", "mma_half.cl", "backward_mma_half.cl"},
     .entries = {"bwd_dkdv", "bwd_dq"},
     .tensor_cores = 1,
     .dtypes = 1u << CLATTN_F16 | 1u << CLATTN_BF16,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_CACHE,
     .max_dim = 128,
     .axes = {{CLATTN__AX_BQ, 9, POW2_BLOCKS}, {CLATTN__AX_BKV, 9, POW2_BLOCKS}},
     .naxes = 2,
     .check = clattn__backward_check,
     .local_bytes = clattn__bwd_mma_half_local,
     .work_groups = clattn__bwd_mma_work_groups,
     .cost = clattn__backward_cost,
     .defines = clattn__bwd_mma_half_defines,
     .reason = clattn__backward_reason,
     .min_block_q = clattn__one_row,
     .accept = clattn__backward_accept,
     .bind = clattn__backward_bind},
    /* A KV cache's reader on tensor cores (half queries; fp16, bf16 and int8 caches): ranked
     * ahead of decode where the GPU has them (decode_mma_family.c). */
    {.name = "decode_mma",
     .pass = CLATTN__FORWARD,
     .files = {"common.cl", "mma.cl", "mma_half.cl", "decode_common.cl", "decode_mma.cl"},
     .entries = {"clattn_decode_mma"},
     .tensor_cores = 1,
     .dtypes = 1u << CLATTN_F16 | 1u << CLATTN_BF16,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_VARLEN,
     .max_dim = 128,
     .axes = {{CLATTN__AX_BQ, 2, {16, 8}},
              {CLATTN__AX_BKV, 2, {16, 32}},
              {CLATTN__AX_STAGE, 2, {1, 2}}},
     .naxes = 3,
     .fixed = {.tpr = 1, .rm = 1, .vec = 1, .pad = 0},
     .check = clattn__decode_mma_check,
     .local_bytes = clattn__decode_mma_local,
     .work_groups = clattn__decode_mma_work_groups,
     .cost = clattn__decode_mma_cost,
     .defines = clattn__decode_mma_defines,
     .reason = clattn__decode_mma_reason,
     .min_block_q = clattn__decode_min_block_q,
     .accept = clattn__forward_accept,
     .row_groups = clattn__decode_row_groups,
     /* An H100 at batch 8 with 4k and 32k keys (one row, fp16) was fastest at 16 ranges
      * (one wave of 8 a unit), at batch 1 with 4k keys at 32 (128 keys each), and 33 (the old
      * 16 a unit: two whole waves) read 2-3% slower than 16: docs/BENCHMARKS.md. */
     .split_fill = 8,
     .split_min_keys = 128,
     .tight_rows = 1,
     .bind = clattn__decode_bind},
    /* A KV cache's reader (issue 18): a KV group's query heads in one tile. Ranked first only
     * for cache classes, which decode_mma (above) computes too where it is legal. */
    {.name = "decode",
     .pass = CLATTN__FORWARD,
     .files = {"common.cl", "decode_common.cl", "decode_load.cl", "decode.cl"},
     .entries = {"clattn_decode"},
     .dtypes = HALF_TOO,
     .variants = CLATTN__VAR_ALL & ~CLATTN__VAR_VARLEN,
     .max_dim = CLATTN__MAX_FUSED_DIM,
     .axes = {{CLATTN__AX_BQ, 5, {16, 8, 4, 2, 1}},
              {CLATTN__AX_BKV, 4, {64, 128, 32, 256}},
              {CLATTN__AX_TPR, 4, {4, 2, 1, 8}},
              {CLATTN__AX_RM, 3, {4, 2, 1}},
              {CLATTN__AX_VEC, 3, {4, 2, 1}},
              {CLATTN__AX_STAGE, 3, {2, 1, 3}}},
     .naxes = 6,
     .fixed = {.pad = 0},
     .check = clattn__decode_check,
     .local_bytes = clattn__decode_local,
     .work_groups = clattn__decode_work_groups,
     .cost = clattn__decode_cost,
     .defines = clattn__decode_defines,
     .reason = clattn__decode_reason,
     .min_block_q = clattn__decode_min_block_q,
     .accept = clattn__forward_accept,
     .row_groups = clattn__decode_row_groups,
     .split_fill = 4,
     .tight_rows = 1,
     .bind = clattn__decode_bind},
    /* Helper programs, built with fixed options: no config, looked up by role. */
    {.name = "merge",
     .role = CLATTN__ROLE_MERGE,
     .files = {"common.cl", "merge.cl"},
     .entries = {"merge_splits"}},
    {.name = "standard", .role = CLATTN__ROLE_STANDARD, .files = {"common.cl", "standard.cl"}},
    {.name = "kv_append",
     .role = CLATTN__ROLE_KV_APPEND,
     .files = {"common.cl", "decode_common.cl", "kv_append.cl"},
     .entries = {"kv_append"}},
};

enum { COUNT = sizeof table / sizeof *table };
_Static_assert((int)COUNT <= (int)CLATTN__MAX_FAMILIES, "raise CLATTN__MAX_FAMILIES");

const char *clattn__pass_name(clattn__pass pass) {
  return pass == CLATTN__BACKWARD ? "backward" : "forward";
}

unsigned clattn__families(void) {
  return COUNT;
}

const clattn__family *clattn__family_at(unsigned id) {
  return id < COUNT ? &table[id] : NULL;
}

const clattn__family *clattn__family_of(const clattn__config *c) {
  const clattn__family *f = clattn__family_at(c->kernel);
  return f && f->role == CLATTN__ROLE_PLANNED ? f : NULL;
}

unsigned clattn__family_find(const char *name) {
  for (unsigned i = 0; i < COUNT; i++)
    if (table[i].role == CLATTN__ROLE_PLANNED && !strcmp(table[i].name, name)) return i;
  return CLATTN__NO_FAMILY;
}

const clattn__family *clattn__family_for(clattn__role role) {
  for (unsigned i = 0; i < COUNT; i++)
    if (table[i].role == role) return &table[i];
  return NULL;
}

/* The families the planner and the tuner search for a pass. */
static int searched(const clattn__family *f, unsigned pass) {
  return f->role == CLATTN__ROLE_PLANNED && f->pass == pass && !f->explicit_only;
}

static char names[512]; /* the same text for every caller: written once, on first use */
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void fill_names(void) {
  size_t used = 0;
  for (unsigned i = 0; i < COUNT; i++)
    if (table[i].role == CLATTN__ROLE_PLANNED && !table[i].explicit_only && used < sizeof names)
      used += snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", table[i].name);
}

const char *clattn__family_names(void) {
  pthread_once(&names_once, fill_names);
  return names;
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
                                         : "an int8 KV cache";
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
  /* The softcap's tanh from ex2.approx and rcp.approx for half storage on NVIDIA (cl/common.cl's
   * CAP_FAST): accurate to a few 1e-7 there, and 1.03-1.07x plain against the rational's 1.2x. */
  at = strlen(out);
  if (at < len && (cls->variants & CLATTN__VAR_SOFTCAP) && cls->dtype != CLATTN_F32 &&
      dev->tensor_cores && !dev->mma_emulated)
    snprintf(out + at, len - at, " -DCAP_FAST=1");
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
  const clattn__family *f = &table[id];
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
  for (unsigned id = 0; id < COUNT; id++)
    if (searched(&table[id], pass)) n += family_space(&table[id]);
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
  for (unsigned id = 0; id < COUNT; id++) {
    const clattn__family *f = &table[id];
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
