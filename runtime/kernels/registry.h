/* The kernel registry (registry.c): every kernel family of the fused path is one entry, and
 * nothing outside the kernels layer knows a family by its name or its id. A family says what
 * it computes (its pass), what it supports (head dims, tensor cores), its config space and
 * legality (the local-memory formula, work-group limits), its cost for the heuristic's ranking,
 * the -D defines it is built with and how its arguments are bound (docs/DESIGN.md). */
#ifndef CLATTN_REGISTRY_H
#define CLATTN_REGISTRY_H

#include "core.h"

/* What a family computes. A problem class and a config belong to one pass. */
typedef enum clattn__pass { CLATTN__FORWARD = 0, CLATTN__BACKWARD = 1 } clattn__pass;
enum { CLATTN__PASSES = 2 };
const char *clattn__pass_name(clattn__pass pass); /* "forward", "backward" */

/* What a compiled kernel depends on besides its config: a problem class. */
typedef struct clattn__class {
  unsigned d, dv;
  unsigned causal;
  unsigned bucket;   /* sequence-length bucket (clattn__seqlen_bucket) that tiles are chosen per:
                        seqlen_q's, but a KV cache's context (seqlen_kv) for a cache class */
  unsigned pass;     /* clattn__pass */
  unsigned dtype;    /* clattn_dtype of the stored tensors */
  unsigned variants; /* CLATTN__VAR_* bits: the -D defines of the variants (cl/common.cl) */
  unsigned qbucket;  /* a cache class: seqlen_q's bucket, which its overrides are keyed by (set
                        from a problem, which has no cache); 0 for every other class */
} clattn__class;

/* The variants a class asks for (issue 17): a family computes those in its `variants`. The
 * tuning database and the built-in defaults are looked up without them (a variant's kernel is
 * the plain one with a mask or a cap), but for a KV cache's kind (the decode kernels' entries
 * are their own: plan/tunedb.c), and an entry whose family does not compute them is passed over
 * without a warning. */
enum {
  CLATTN__VAR_MASK = 1u << 0,    /* a key range per row: window, top-left causal (MASK) */
  CLATTN__VAR_SOFTCAP = 1u << 1, /* scores capped by tanh (SOFTCAP) */
  CLATTN__VAR_ALIBI = 1u << 2,   /* ALiBi's linear bias (ALIBI) */
  CLATTN__VAR_SINKS = 1u << 3,   /* a sink logit per head (SINKS) */
  CLATTN__VAR_KVLENS = 1u << 4,  /* a padded batch's key lengths (KVLENS) */
  CLATTN__VAR_VARLEN = 1u << 5,  /* packed variable-length sequences (VARLEN) */
  CLATTN__VAR_KVCACHE = 1u << 6, /* K and V from a KV cache (KVCACHE; issue 18) */
  CLATTN__VAR_PAGED = 1u << 7,   /* ... paged through a block table (PAGED) */
  CLATTN__VAR_KV8 = 1u << 8,     /* ... in int8 with fp32 scales (KV8) */
  CLATTN__VAR_CACHE = CLATTN__VAR_KVCACHE | CLATTN__VAR_PAGED | CLATTN__VAR_KV8,
  /* A backward class whose caller allows atomic sums (CLATTN_NONDETERMINISTIC): no define of
   * its own, but a family with atomic_dq builds its atomic kernels for it (clattn__dq_atomic). */
  CLATTN__VAR_ATOMIC = 1u << 9,
  CLATTN__VAR_ALL = (1u << 10) - 1
};
/* The first variant of `missing` in words ("a key range per row (...)" or "softcap"). */
const char *clattn__variant_name(unsigned missing);

/* A config of one family; the fields a family does not use are fixed by it (clattn__family's
 * fixed). They reach the kernels as -D defines. */
typedef struct clattn__config {
  unsigned bq;     /* query rows per work-group (backward: bwd_dq's block) */
  unsigned bkv;    /* keys per K/V tile (backward: bwd_dkdv's block) */
  unsigned tpr;    /* work-items per query row (forward_tiles: along the keys) */
  unsigned stage;  /* 1: K/V tiles staged in local memory (forward_mma 2: stored split) */
  unsigned pad;    /* padding of local-memory rows against bank conflicts */
  unsigned kernel; /* the family: a registry id (clattn__family_at), unique across passes */
  unsigned rm;     /* forward_tiles: query rows per work-item */
  unsigned vec;    /* vector width of the tile loads: 1, 2 or 4 */
} clattn__config;

/* One axis of a family's config space: a field and the values it takes, in the order the
 * enumeration visits them (the heuristic breaks cost ties by that order). */
enum {
  CLATTN__AX_BQ,
  CLATTN__AX_BKV,
  CLATTN__AX_TPR,
  CLATTN__AX_STAGE,
  CLATTN__AX_PAD,
  CLATTN__AX_RM,
  CLATTN__AX_VEC,
  CLATTN__AXES
};
typedef struct clattn__axis {
  unsigned field, n;
  unsigned values[12];
} clattn__axis;

/* Keys split into ranges computed by separate work-groups (flash-decoding), each writing its
 * partial O and LSE into a workspace that a merge kernel combines (ops/split.c). */
typedef struct clattn__split {
  unsigned count;        /* ranges; 1: none */
  unsigned kv_per_split; /* keys per range, a multiple of the config's key tile */
  cl_ulong o_split;      /* elements between the ranges' partial outputs */
  cl_ulong lse_off;      /* where the partial LSEs start in the lse buffer */
  cl_ulong lse_split;    /* elements between the ranges' partial LSEs */
  /* The merge fused into the family's kernel (a merge_in_kernel family where ops/split.c
   * allows it): the ranges' counts, the caller's O and LSE (NULL: none). merge_count NULL:
   * cl/merge.cl merges. */
  cl_mem merge_count;
  const clattn_tensor *merge_o;
  cl_mem merge_lse;
} clattn__split;

/* The tensors and buffers of one call of a pass, for its family's bind function. */
typedef struct clattn__bound {
  const clattn__shape *s;
  const clattn_tensor *q, *k, *v, *o; /* o: the forward's output */
  const clattn_tensor *d_o, *dq, *dk, *dv;
  cl_mem lse, drow;           /* drow: the backward's D = rowsum(dO o O) */
  const clattn__split *split; /* forward: NULL, or key ranges */
  clattn__argmemo *memo;      /* the plan's, for its first entry (clattn__enqueue_plan) */
} clattn__bound;

/* A grid to enqueue: groups work-groups of wg work-items (wg 0: one work-item per group and the
 * driver's local size); the argument base_arg takes the first group of each launch. */
typedef struct clattn__launch {
  cl_kernel kernel;
  cl_uint base_arg;
  size_t groups, wg;
  clattn__argmemo *memo; /* the kernel's, where its bind kept one (base_arg goes through it) */
} clattn__launch;

enum { CLATTN__MAX_FAMILIES = 16, CLATTN__MAX_ENTRIES = 2 };

/* What a family is for: planned (a config space the planner and the tuner search, a pass's
 * kernels), or one of the helper programs built with fixed options (the split keys' merge, the
 * standard path's element kernels), which have no config and are looked up by role. */
typedef enum clattn__role {
  CLATTN__ROLE_PLANNED = 0,
  CLATTN__ROLE_MERGE,
  CLATTN__ROLE_STANDARD,
  CLATTN__ROLE_KV_APPEND
} clattn__role;
#define CLATTN__NO_FAMILY (~0u)
#define CLATTN__UNRANKED (~0u)

typedef struct clattn__family clattn__family;
/* Each hook gets its own entry (f), so that a family's code never looks itself up. */
struct clattn__family {
  const char *name; /* public: clattn_config.kernel, the tuning database, explain */
  clattn__role role;
  clattn__pass pass;
  const char *files[7];   /* cl/ files of its program, joined in order (NULL-terminated) */
  const char *entries[3]; /* its kernel functions (NULL-terminated), launched in order */
  unsigned tensor_cores;  /* needs NVIDIA tensor cores (or their emulation) */
  unsigned dtypes;        /* storage types it computes, as bits 1 << clattn_dtype (0: fp32) */
  unsigned variants;      /* the CLATTN__VAR_* it computes */
  unsigned max_dim;       /* the largest head dim it computes */
  unsigned explicit_only; /* never ranked or tuned: runs only as an override (test families) */
  unsigned atomic_dq;     /* a backward that adds dQ up by atomics for CLATTN__VAR_ATOMIC */
  clattn__axis axes[CLATTN__AXES]; /* its space, outermost axis first */
  unsigned naxes;
  clattn__config fixed; /* the fields no axis sets */
  /* Its own rules (tile divisibility, local memory, work-group limits): 1 when c is legal on dev
   * for class k, else 0 and why. */
  int (*check)(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
               const clattn__config *c, char *why, size_t why_len);
  /* Local memory the model counts (explain, step down) and work-items per work-group of each
   * entry point. */
  size_t (*local_bytes)(const clattn__device *dev, const clattn__class *k, const clattn__config *c);
  void (*work_groups)(const clattn__config *c, size_t *wg);
  /* Lower ranks first in the heuristic (all families of a pass are ranked together);
   * CLATTN__UNRANKED leaves a legal config out of the ranking (still legal as an override). */
  unsigned (*cost)(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                   const clattn__config *c);
  /* Its -D defines (the build options before $CLATTN_BUILD_OPTIONS). */
  void (*defines)(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                  const clattn__config *c, char *out, size_t len);
  /* One line saying why the heuristic's pick suits dev. */
  void (*reason)(const clattn__family *f, const clattn__device *dev, const clattn__class *k,
                 const clattn__config *c, char *out, size_t len);
  /* The smallest query block a config of it can take (finer grids for small problems). */
  unsigned (*min_block_q)(const clattn__config *c);
  /* The public config's fields as this family's (defaults applied): 0 and why when it cannot
   * take them. */
  int (*accept)(const clattn__family *f, const clattn_config *in, clattn__config *out, char *why,
                size_t why_len);
  /* Work-groups per key range for shape s (NULL: a query block of bq rows per query head, the
   * other forward families'); split keys and finer grids count them. */
  size_t (*row_groups)(const clattn__config *c, const clattn__shape *s);
  /* Work-groups per compute unit that split keys aim for (0: one): a memory-bound family needs
   * several resident per unit to keep enough loads in flight. */
  unsigned split_fill;
  /* The fewest keys a key range holds (0: two tiles): below it, a range's fixed costs (its
   * partial O written, merged) outweigh the loads it adds in flight. */
  unsigned split_min_keys;
  /* 1: its kernel can merge its own key ranges (cl/decode_common.cl's MERGE_ARGS): the last
   * work-group of a tile's ranges combines them, instead of a merge_splits launch. */
  unsigned merge_in_kernel;
  /* 1: a call's plan on a GPU takes the smallest query block that keeps its work-groups
   * (plan/grid.c): the tiles of a few rows lose their idle ones. */
  unsigned tight_rows;
  /* Sets its kernels' arguments for a call: the launches, in order (how many are written; a
   * launch with no groups is left out); the first OpenCL error in *err. */
  unsigned (*bind)(const clattn__family *f, const clattn__config *c, const cl_kernel *kernels,
                   const clattn__bound *b, clattn__launch *out, cl_int *err);
};

/* How many families there are, and family id (NULL when out of range). */
unsigned clattn__families(void);
const clattn__family *clattn__family_at(unsigned id);
/* The family of a config (NULL when its id is no planned family's). */
const clattn__family *clattn__family_of(const clattn__config *c);
/* Whether family f's backward (backward_mma_half.c) adds dQ up by atomics for a class of these
 * variants: bwd_dkdv then takes the accumulator (acc, acc_off: after D in the row workspace,
 * lse_rows x d floats, zeroed before) and bwd_dq rounds it into dq. */
int clattn__dq_atomic(const clattn__family *f, unsigned variants);
/* Where the accumulator starts in the row workspace, in floats: after D's rows, 16-byte aligned
 * (cl/backward_mma_half_atomic.cl's paired and bulk adds). */
size_t clattn__dq_acc_offset(size_t lse_rows);

/* The id of the planned family named name, CLATTN__NO_FAMILY when none; and the list of the
 * names of the planned families that are not test-only, ", "-separated (for messages). */
unsigned clattn__family_find(const char *name);
const char *clattn__family_names(void);
/* The helper program of a role (not CLATTN__ROLE_PLANNED). */
const clattn__family *clattn__family_for(clattn__role role);

/* 1 when c's family computes k's variants (else 0 and why: the first it lacks). */
int clattn__config_computes(const clattn__class *k, const clattn__config *c, char *why,
                            size_t why_len);
/* 1 when c is a legal config of class k on dev (its family of k's pass, the family's rules). */
int clattn__config_legal(const clattn__device *dev, const clattn__class *k, const clattn__config *c,
                         char *why, size_t why_len);
size_t clattn__config_local_bytes(const clattn__device *dev, const clattn__class *k,
                                  const clattn__config *c);
/* Work-groups per key range of a forward config for shape s (clattn__family's row_groups). */
size_t clattn__config_row_groups(const clattn__config *c, const clattn__shape *s);
/* Work-items per work-group of the family's first entry point (forward: its only one). */
size_t clattn__config_work_group(const clattn__config *c);
/* The softcap's tanh for storage dtype on dev (cl/common.cl's CAP_FAST): " -DCAP_FAST=2" or
 * "", for every kernel that caps scores, the standard path's too, so that all agree. */
const char *clattn__cap_tanh_define(const clattn__device *dev, clattn_dtype dtype);
/* Build options: the family's defines, then $CLATTN_BUILD_OPTIONS (read at creation; part of
 * every cache key). */
void clattn__config_options(const clattn__device *dev, const clattn__class *cls,
                            const clattn__config *c, char *out, size_t len);
/* 1 for a CPU, or a device whose local memory is global memory: the families' models (and the
 * planner's tight rows) treat it as one. */
int clattn__fam_is_cpu(const clattn__device *dev);
/* Legal configs of the pass of k, best first by the heuristic (the first is its default); how
 * many were written (<= cap). Test-only families are left out. */
size_t clattn__configs_ranked(const clattn__device *dev, const clattn__class *k,
                              clattn__config *out, size_t cap);
/* How many configs the pass's space has, legal or not. */
size_t clattn__config_space_size(clattn__pass pass);
/* Why the heuristic picked c on dev, in one line. */
void clattn__config_reason(const clattn__device *dev, const clattn__class *k,
                           const clattn__config *c, char *out, size_t len);
/* The config's fields in one line ("forward_tiles BQ=... BKV=..."), for reports. */
void clattn__config_describe(const clattn__config *c, char *out, size_t len);

#endif
