/* The kernel registry: one entry per kernel family of the fused path, and the lookups of a
 * family by id, name or role. A family is known by its name here and nowhere else; the rest of
 * the runtime asks the registry (docs/DESIGN.md: adding a family is a cl/ file, one entry below
 * and its tests). The functions that answer for a config of any family (legality, ranking,
 * build options) are in registry_configs.c. */
#include "families.h"

#include <stdio.h>
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
              {CLATTN__AX_BKV, 5, {64, 32, 128, 16, 48}},
              {CLATTN__AX_PAD, 2, {1, 0}},
              {CLATTN__AX_STAGE, 4, {1, 2, 3, 4}},
              {CLATTN__AX_RM, 2, {1, 2}}},
     .naxes = 5,
     .fixed = {.tpr = 1, .vec = 1},
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
     .files = {"common.cl", "mma.cl", "mma_half.cl", "backward_mma_half_atomic.cl",
               "backward_mma_half.cl", "backward_mma_half_dq.cl"},
     .entries = {"bwd_dkdv", "bwd_dq"},
     .tensor_cores = 1,
     .atomic_dq = 1,
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
     .files = {"common.cl", "mma.cl", "mma_half.cl", "decode_common.cl", "decode_mma_load.cl",
               "decode_mma.cl"},
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
     .merge_in_kernel = 1,
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
     .merge_in_kernel = 1,
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
