/* The plan layer (docs/DESIGN.md): problem classes (classes.c), public configs and overrides
 * (config.c), the tuning database (tunedb.c, tunedb.h) and the context's copy of it (db.c),
 * built-in defaults (builtin.c), the traffic model (traffic.c), and one planner for every pass
 * (planner.c, grid.c): override, tuning database, built-in, heuristic, stepping down after the
 * build. Uses core and kernels. */
#ifndef CLATTN_PLAN_H
#define CLATTN_PLAN_H

#include "kernels.h"

/* ---- problem classes (classes.c) ---- */

/* The smallest of 64, 256, 1024, 4096, 16384 that is >= n, else 65536: tiles that suit 100
 * query rows and tiles that suit 100 000 differ (work-groups to fill the device). */
unsigned clattn__seqlen_bucket(size_t n);
/* The class of a checked problem for a pass. */
clattn__class clattn__class_of(const clattn__shape *s, clattn__pass pass);

/* ---- plans (planner.c, grid.c) ---- */

/* A config built for a class: its family's kernels, what they use, and where it came from. */
typedef struct clattn__plan {
  clattn__class cls;
  clattn__config cfg;
  cl_kernel kernels[CLATTN__MAX_ENTRIES]; /* the family's entry points, in order */
  clattn__argmemo memo; /* kernels[0]'s scalar arguments as last set (a cache: mutable through
                           a const plan; reset whenever kernels are built or released) */
  size_t local_mem;     /* the largest of the built kernels' CL_KERNEL_LOCAL_MEM_SIZE */
  size_t private_mem;   /* the same of CL_KERNEL_PRIVATE_MEM_SIZE (0 when unknown) */
  char origin[16];      /* override, tuned, fallback, built-in or heuristic */
  char reason[320];
  int derived; /* a copy of the class's plan with finer query blocks (clattn__plan_for_grid) */
  struct clattn__plan *next;
} clattn__plan;

/* The class's plan: override, tuning database (exact, then fallbacks), built-in, heuristic;
 * built on first use (stepping down when the built kernels exceed the device's limits) and
 * cached. */
clattn_status clattn__plan_get(clattn_context *ctx, const clattn__class *cls,
                               const clattn__plan **out);
/* The config clattn__plan_get would choose and its origin, without building (the first legal of
 * override, database, built-in, heuristic). */
void clattn__plan_choice(clattn_context *ctx, const clattn__class *cls, clattn__config *c,
                         char origin[16]);
/* Builds config c of class cls (sources of its pass) into p, checked against the built kernels'
 * limits: p->kernels[0] is NULL when it does not fit, and why says which limit. */
clattn_status clattn__plan_build(clattn_context *ctx, const clattn__sources *src,
                                 const clattn__class *cls, const clattn__config *c, clattn__plan *p,
                                 char *why, size_t why_len);
void clattn__plan_release(clattn__plan *p);
/* Drops cached plans of class cls (all when NULL), after an override or a new tuning entry; with
 * them the plans of cls with any variant, which share its database entries (and but for
 * CLATTN_VARLEN its overrides). */
void clattn__plans_forget(clattn_context *ctx, const clattn__class *cls);
/* The forward class's plan, or, when its query blocks would leave compute units idle for this
 * problem (batch * heads * query blocks below the device's compute units) and the keys are too
 * few to split (clattn__split_count's rule), a plan of the same config with query blocks halved
 * until they fill the device or reach the family's minimum. Overrides are kept as given. */
clattn_status clattn__plan_for_grid(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan **out);

/* ---- configs from outside the heuristic (config.c, db.c, builtin.c) ---- */

typedef struct clattn__override {
  clattn__class cls;
  clattn__config cfg;
  struct clattn__override *next;
} clattn__override;

/* The class an override of cls is kept under: cls without ALiBi, the sinks and seqlens_kv, which
 * a clattn_problem cannot name (they are clattn_args buffers) and which every family computes. */
clattn__class clattn__override_class(const clattn__class *cls);
const clattn__config *clattn__override_find(const clattn_context *ctx, const clattn__class *cls);
/* Sets (cfg NULL: removes) the override of class cls; the caller forgets its plans. */
clattn_status clattn__override_set(clattn_context *ctx, const clattn__class *cls,
                                   const clattn__config *cfg);
void clattn__overrides_release(clattn_context *ctx);
/* A config in the public form, and back: 0 and why when the public one names no family or its
 * fields are out of range (legality is clattn__config_legal's). The pass is its family's. */
void clattn__config_to_public(const clattn__config *c, clattn_config *out);
int clattn__config_from_public(const clattn_config *in, clattn__config *out, char *why,
                               size_t why_len);
/* The context's tuning database, read (once) on first use; never NULL. */
const struct clattn__db *clattn__context_db(clattn_context *ctx);
/* Adds entries to the in-memory database after a tuning run wrote them. */
void clattn__context_db_put(clattn_context *ctx, const void *entry);
void clattn__context_db_release(clattn_context *ctx);
/* Defaults shipped with the library for devices measured by the project: 1 and *out when the
 * class has one on dev. */
int clattn__builtin_find(const clattn__device *dev, const clattn__class *cls, clattn__config *out);
/* Whether a device name holds one of the '|'-separated names in want, a built-in row's device
 * field (empty: any device). */
int clattn__name_matches(const char *name, const char *want);

/* ---- traffic model (traffic.c) ---- */

typedef struct clattn__bytes {
  double read, write;
} clattn__bytes;

/* (query, key) pairs a head computes: all of them, or the visible ones when causal. */
double clattn__visible_pairs(const clattn__shape *s);
double clattn__forward_flops(const clattn__shape *s);
/* Global-memory bytes of the fused kernel with config c (lse: the call writes LSE). */
clattn__bytes clattn__traffic_fused(const clattn__shape *s, const clattn__config *c, int lse);
/* Of the standard path: Q, K, V once per query head, S and P written and read, O and LSE. */
clattn__bytes clattn__traffic_standard(const clattn__shape *s, int lse);
/* FlashAttention's IO bound N^2 d^2 / M for local memory of local_mem bytes, in bytes. */
double clattn__io_lower_bound(const clattn__shape *s, double local_mem);

#endif
