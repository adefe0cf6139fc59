/* Internal interfaces of the runtime; not API. Non-static internal names start with clattn__. */
#ifndef CLATTN_INTERNAL_H
#define CLATTN_INTERNAL_H

#include "clattn.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

/* ---- device model (device.c) ---- */

typedef struct clattn__device {
  char name[256], vendor[256], driver[128], version[128];
  char platform_name[256], platform_version[256];
  cl_device_type type;
  cl_ulong local_mem;     /* CL_DEVICE_LOCAL_MEM_SIZE */
  int local_mem_emulated; /* CL_DEVICE_LOCAL_MEM_TYPE is CL_GLOBAL (CPUs) */
  cl_ulong global_mem;    /* CL_DEVICE_GLOBAL_MEM_SIZE */
  cl_ulong max_alloc;     /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  cl_uint compute_units;
  size_t max_work_group;   /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  size_t max_item_size[3]; /* CL_DEVICE_MAX_WORK_ITEM_SIZES */
  cl_uint mem_base_align_bits;
  int tensor_cores;      /* NVIDIA, compute capability 8.0+: the forward_mma variant can run */
  int mma_emulated;      /* CLATTN_MMA_EMULATE=1 on a device without: forward_mma emulated */
  char *extensions;      /* owned */
  char *build_options;   /* $CLATTN_BUILD_OPTIONS as read when the context was made, NULL when
                            unset; owned by the context (context.c), not by clattn__device_query */
  char fingerprint[768]; /* platform|version|vendor|name|driver|CUs|local mem */
} clattn__device;

/* Reads the model of dev once. On failure returns an OpenCL error code and fills why. */
cl_int clattn__device_query(cl_device_id dev, clattn__device *out, char *why, size_t why_len);
void clattn__device_release(clattn__device *d);
const char *clattn__cl_error_name(cl_int err);

/* ---- local-memory model (tiling.c) ---- */

/* What a compiled forward kernel depends on. */
typedef struct clattn__class {
  unsigned d, dv;
  unsigned causal;
  unsigned bucket;   /* sequence-length bucket of seqlen_q (clattn__seqlen_bucket) */
  unsigned backward; /* 1: the backward kernels' class (cl/backward.cl; bwd_plan.c) */
} clattn__class;

/* The smallest of 64, 256, 1024, 4096, 16384 that is >= n, else 65536: tiles that suit 100
 * query rows and tiles that suit 100 000 differ (work-groups to fill the device). */
unsigned clattn__seqlen_bucket(size_t n);

/* Tile parameters of the forward kernel; they reach cl/forward.cl as -D defines. */
typedef struct clattn__config {
  unsigned bq;      /* query rows per work-group */
  unsigned bkv;     /* keys per K/V tile */
  unsigned tpr;     /* work-items per query row: each owns bkv/tpr keys and dv/tpr columns of O */
  unsigned stage;   /* 1: K/V tiles staged in local memory; 0: read from global memory */
  unsigned pad;     /* floats of padding per local-memory row (bank conflicts) */
  unsigned variant; /* kernel variant: 0 forward_rows (cl/forward.cl), 1 forward_tiles
                       (cl/forward_tiles.cl, where tpr is the work-items along the keys),
                       2 forward_mma (cl/forward_mma.cl: NVIDIA tensor cores, 16 rows per
                       warp; pad != 0 means 4 floats) */
  unsigned rm;      /* forward_tiles: query rows per work-item (0 means 1) */
  unsigned vec;     /* vector width of the tile loads: 1, 2 or 4 (0 means 1) */
} clattn__config;

enum { CLATTN__VARIANTS = 3 };
/* Floats of local memory per warp that the emulated tensor-core kernels add (cl/mma.cl's
 * SCRATCH, under CLATTN_MMA_EMULATE); the local-memory models count it. */
#define CLATTN__MMA_SCRATCH 416 /* a plain number: it is pasted into build options */
#define CLATTN__STR_(x) #x
#define CLATTN__STR(x) CLATTN__STR_(x)
/* "forward_rows", "forward_tiles" or "forward_mma"; and back (-1 when unknown). */
const char *clattn__variant_name(unsigned variant);
int clattn__variant_of(const char *name);

size_t clattn__config_local_bytes(const clattn__config *c, const clattn__class *k);
size_t clattn__config_work_group(const clattn__config *c);
/* 1 when c is legal on dev for class k; otherwise 0 and why says what does not fit. */
int clattn__config_legal(const clattn__device *dev, const clattn__class *k, const clattn__config *c,
                         char *why, size_t why_len);
/* Legal configs, best first by the heuristic; returns how many were written (≤ cap). The first
 * one is the heuristic default. */
size_t clattn__configs_ranked(const clattn__device *dev, const clattn__class *k,
                              clattn__config *out, size_t cap);
/* How many configs the search space has, legal or not. */
size_t clattn__config_space_size(void);
/* One line saying why the heuristic picked c on dev. */
void clattn__config_reason(const clattn__device *dev, const clattn__class *k,
                           const clattn__config *c, char *out, size_t len);

/* ---- the backward kernels' configs and plans (bwd_plan.c) ---- */

/* A backward config is a clattn__config of which variant, bq and bkv are used (the rest is
 * zero): variant 0 backward_rows (cl/backward.cl: bwd_dkdv has a work-item per key, bkv of them,
 * and stages bq query rows; bwd_dq has a work-item per query row, bq of them, and stages bkv
 * keys), 1 backward_mma (cl/backward_mma.cl, NVIDIA tensor cores: a warp per 16 keys of bwd_dkdv,
 * bkv keys, and per 16 rows of bwd_dq, bq rows; the blocks they stage are set by local memory,
 * clattn__bwd_mma_stage). */
enum { CLATTN__BWD_VARIANTS = 2 };
const char *clattn__bwd_variant_name(unsigned variant);
int clattn__bwd_variant_of(const char *name);
size_t clattn__bwd_local_bytes(const clattn__device *dev, const clattn__config *c,
                               const clattn__class *k);
/* backward_mma's staged blocks (query rows in bwd_dkdv, keys in bwd_dq): the largest of 64, 32
 * and 16 that fits the device's local memory; 0 when none does. */
unsigned clattn__bwd_mma_stage(const clattn__device *dev, const clattn__class *k,
                               const clattn__config *c);
/* Work-items per work-group of bwd_dkdv and of bwd_dq. */
void clattn__bwd_work_groups(const clattn__config *c, size_t *dkdv, size_t *dq);
int clattn__bwd_config_legal(const clattn__device *dev, const clattn__class *k,
                             const clattn__config *c, char *why, size_t why_len);
/* Legal backward configs, the heuristic's default first; how many were written (<= cap). */
size_t clattn__bwd_configs_ranked(const clattn__device *dev, const clattn__class *k,
                                  clattn__config *out, size_t cap);
size_t clattn__bwd_config_space_size(void);

typedef struct clattn__bwd_plan {
  clattn__class cls;
  clattn__config cfg;
  cl_kernel dkdv, dq;
  size_t local_mem, private_mem; /* of the built kernels, the larger of the two */
  char origin[16];
  char reason[200];
  struct clattn__bwd_plan *next;
} clattn__bwd_plan;

struct clattn__sources;
/* Builds config c (of the backward sources src, clattn__bwd_sources_load) into p's kernels;
 * p->dkdv is NULL when the built kernels exceed a limit of the device (why says which). */
clattn_status clattn__bwd_build(clattn_context *ctx, const struct clattn__sources *src,
                                const clattn__class *cls, const clattn__config *c,
                                clattn__bwd_plan *p, char *why, size_t why_len);
void clattn__bwd_plan_release(clattn__bwd_plan *p);
/* The class's plan: override, tuning database, heuristic; built on first use and cached. */
clattn_status clattn__bwd_plan_get(clattn_context *ctx, const clattn__class *cls,
                                   const clattn__bwd_plan **out);
/* The config clattn__bwd_plan_get would choose and where it comes from, without building. */
void clattn__bwd_config_choice(clattn_context *ctx, const clattn__class *cls, clattn__config *c,
                               char origin[16]);
struct clattn__shape;
/* Enqueues bwd_dkdv and bwd_dq on queue for checked tensors, with D = rowsum(dO o O) in drow;
 * first and last (NULL allowed) get the events of the first and last launch. */
clattn_status clattn__bwd_enqueue(clattn_context *ctx, cl_command_queue queue,
                                  const struct clattn__shape *s, const clattn__bwd_plan *p,
                                  const clattn_tensor *q, const clattn_tensor *k,
                                  const clattn_tensor *v, const clattn_tensor *d_o, cl_mem lse,
                                  cl_mem drow, const clattn_tensor *dq, const clattn_tensor *dk,
                                  const clattn_tensor *dv, cl_event *first, cl_event *last);

/* (The tuner's problems, forward and backward: tune_bench.h.) */

/* ---- JIT (jit.c) ---- */

typedef struct clattn__program {
  uint64_t source_hash;
  char *options;
  cl_program program;
  struct clattn__program *next;
} clattn__program;

uint64_t clattn__hash(const void *data, size_t len, uint64_t seed);
/* The text of cl/<name>: from ctx->kernel_dir when set, else embedded. Caller frees *text. */
clattn_status clattn__kernel_source(clattn_context *ctx, const char *name, char **text);
/* A built program for (source, options), from the context's cache or compiled now. */
/* The kernel sources of every variant, with their hashes (the tuning database's key). */
struct clattn__sources {
  char *text[CLATTN__VARIANTS];
  uint64_t hash[CLATTN__VARIANTS];
};
typedef struct clattn__sources clattn__sources;
clattn_status clattn__sources_load(clattn_context *ctx, clattn__sources *out);
/* The same for the backward variants (text[0 .. CLATTN__BWD_VARIANTS - 1]). */
clattn_status clattn__bwd_sources_load(clattn_context *ctx, clattn__sources *out);
void clattn__sources_free(clattn__sources *s);
clattn_status clattn__build(clattn_context *ctx, const char *source, const char *options,
                            cl_program *out);
void clattn__program_cache_release(clattn_context *ctx);
int clattn__program_cached(const clattn_context *ctx, uint64_t source_hash, const char *options);
/* Takes ownership of prog (released on failure too). */
clattn_status clattn__program_cache_put(clattn_context *ctx, uint64_t source_hash,
                                        const char *options, cl_program prog);
/* Compiles the configs that are neither in the program cache nor on disk, several at once on
 * threads (OpenCL allows concurrent builds of different programs), and caches them; failures
 * are left for clattn__build to report. The tuner calls it for the candidates it will try
 * next, since compiling is most of a candidate's cost. */
void clattn__prebuild(clattn_context *ctx, const struct clattn__sources *src,
                      const clattn__class *cls, const clattn__config *cfgs, size_t n);
void clattn__config_options(const clattn__device *dev, const clattn__class *cls,
                            const clattn__config *c, char *out, size_t len);
/* The on-disk binary cache (bincache.c): a built program for (source, options) on this device
 * from <cache_dir>/programs, or NULL; and storing one there. Never fatal. */
cl_program clattn__bincache_load(clattn_context *ctx, uint64_t source_hash, const char *options);
void clattn__bincache_store(clattn_context *ctx, uint64_t source_hash, const char *options,
                            cl_program prog);
/* Parses a cache entry already in memory: a pointer into file to the program binary and its
 * length in *bin_len, or NULL when the entry is malformed, for another key, truncated or its
 * checksum is wrong. Never reads outside [file, file + file_len), whatever the bytes. */
const unsigned char *clattn__bincache_parse(const unsigned char *file, size_t file_len,
                                            const char *key, size_t *bin_len);
size_t clattn__program_cache_size(const clattn_context *ctx);

/* ---- context (context.c) ---- */

/* One thread's last error on one context, and one version of the diagnostics text (context.c). */
typedef struct clattn__thread_error clattn__thread_error;
typedef struct clattn__diag clattn__diag;

typedef struct clattn__plan {
  clattn__class cls;
  clattn__config cfg;
  cl_kernel kernel;
  size_t kernel_local_mem;
  char origin[16];
  char reason[320];
  int derived; /* a copy of the class's plan with finer query blocks (clattn__plan_for_grid) */
  struct clattn__plan *next;
} clattn__plan;

typedef struct clattn__override {
  clattn__class cls;
  clattn__config cfg;
  struct clattn__override *next;
} clattn__override;

struct clattn__db; /* tunedb.h */

struct clattn_context {
  cl_context cl;
  cl_device_id device_id;
  cl_command_queue queue;
  int queue_in_order;
  clattn__device device;
  char *cache_dir, *tuning_db, *kernel_dir; /* resolved at creation; NULL when unset */
  size_t workspace_limit; /* bytes the standard path may hold at once (resolved at creation) */
  char summary[512];
  int build_log; /* $CLATTN_BUILD_LOG was set at creation: print each build's log */
  /* A leaf lock (nothing else is taken while it is held) for the texts that threads read while
   * a call holds lock: the error slots' list and the diagnostics. */
  pthread_mutex_t text_lock;
  clattn__thread_error *errors; /* one slot per live thread that failed a call (text_lock) */
  clattn__diag *diag;   /* newest diagnostics version; older ones handed out live on (text_lock) */
  pthread_mutex_t lock; /* serialises calls; guards everything below */
  clattn__program *programs;
  clattn__plan *plans;
  clattn__override *overrides;
  struct clattn__db *db; /* the tuning database, read at the first plan; NULL until then */
  unsigned bincache_loaded, bincache_stored, bincache_rejected; /* on-disk cache counters */
  unsigned compiled;                                            /* programs compiled from source */
  cl_mem workspace;               /* the standard path's S/P workspace, grown on demand */
  size_t workspace_bytes;         /* its size */
  struct clattn__aux_kernel *aux; /* kernels of the standard path, by build options */
  cl_mem bwd_ws;                  /* the backward pass's rowsum(dO o O), grown on demand */
  size_t bwd_ws_bytes;
  struct clattn__bwd_plan *bwd_plans; /* compiled backward kernels, by problem class */
  cl_mem split_ws;                    /* partial outputs of split-key calls, grown on demand */
  size_t split_ws_bytes;
  cl_event *step_marks; /* markers around the last standard call's steps, 4 a chunk */
  size_t step_marks_count;
  size_t std_launch_groups; /* work-groups per enqueue of the standard path's element kernels;
                               0: GROUPS_PER_LAUNCH (tests make it small to check the pieces) */
};

/* Records a formatted message for the calling thread on ctx (ctx may be NULL) and returns
 * status. Any thread (the message is the calling thread's own). */
clattn_status clattn__fail(clattn_context *ctx, clattn_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like clattn__fail for an OpenCL error: the message names the call and the error. */
clattn_status clattn__fail_cl(clattn_context *ctx, cl_int err, const char *what);
/* Records a warning once (a repeated text is not added again). Any thread; takes text_lock. */
void clattn__warn(clattn_context *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last warning, "" when none; valid until ctx is destroyed. */
const char *clattn__diagnostics_last(const clattn_context *ctx);
/* This thread's last error message (the same as clattn_last_error; takes no lock). */
const char *clattn__last_error_locked(const clattn_context *ctx);
/* Appends text to the calling thread's message (for build logs). */
void clattn__append_error(clattn_context *ctx, const char *text);
/* How many error slots (one per thread that failed a call) ctx holds now (for tests). */
size_t clattn__error_slots(clattn_context *ctx);

/* ---- validation (validate.c) ---- */

/* The problem with its defaults applied, checked; sizes in elements. */
typedef struct clattn__shape {
  size_t batch, heads_q, heads_kv, seqlen_q, seqlen_kv, d, dv;
  float scale;
  unsigned causal;
  int empty;             /* nothing to compute: batch, heads_q or seqlen_q is 0 */
  clattn_algorithm algo; /* resolved: CLATTN_ALGO_FUSED or CLATTN_ALGO_STANDARD */
} clattn__shape;

clattn_status clattn__shape_from_problem(clattn_context *ctx, const clattn_problem *p,
                                         clattn__shape *out);
clattn_status clattn__check_forward_tensors(clattn_context *ctx, const clattn__shape *s,
                                            const clattn_tensor *q, const clattn_tensor *k,
                                            const clattn_tensor *v, const clattn_tensor *o,
                                            cl_mem lse);

/* The backward call's tensors: the forward checks (LSE required), d_o like o, dq like q, dk and
 * dv like k and v, the outputs overlapping no input and no other output. */
clattn_status clattn__check_backward_tensors(clattn_context *ctx, const clattn__shape *s,
                                             const clattn_tensor *q, const clattn_tensor *k,
                                             const clattn_tensor *v, const clattn_tensor *o,
                                             const clattn_tensor *d_o, cl_mem lse,
                                             const clattn_tensor *dq, const clattn_tensor *dk,
                                             const clattn_tensor *dv);

/* ---- planning (plan.c) ---- */

/* Builds config c for class cls and checks the built kernel's limits. *kernel is NULL when it
 * does not fit: then why says what did not, and *max_wg / *max_bytes are lowered. */
clattn_status clattn__build_config(clattn_context *ctx, const clattn__sources *src,
                                   const clattn__class *cls, const clattn__config *c,
                                   cl_kernel *kernel, size_t *local_mem, size_t *max_wg,
                                   size_t *max_bytes, char *why, size_t why_len);
/* Drops cached plans of class cls (all when NULL; forward or backward by cls->backward), after
 * an override or a new tuning entry. */
void clattn__plans_forget(clattn_context *ctx, const clattn__class *cls);

/* ---- configs from outside the heuristic (config.c, builtin.c) ---- */

const clattn__config *clattn__override_find(const clattn_context *ctx, const clattn__class *cls);
/* The context's tuning database, read (once) on first use; never NULL. */
const struct clattn__db *clattn__context_db(clattn_context *ctx);
/* Adds entries to the in-memory database after a tuning run wrote them. */
void clattn__context_db_put(clattn_context *ctx, const void *entry);
/* Defaults shipped with the library for devices measured by the project; NULL when none. */
const clattn__config *clattn__builtin_find(const clattn__device *dev, const clattn__class *cls);
void clattn__config_to_public(const clattn__config *c, clattn_config *out);
/* A backward config (kernel "backward_rows") in the public form, and whether a public config
 * names a backward kernel. */
void clattn__bwd_config_to_public(const clattn__config *c, clattn_config *out);
int clattn__config_is_backward(const clattn_config *in);
/* 0 and why when the public config is not a kernel variant with positive tiles (a backward
 * config's blocks are checked by clattn__bwd_config_legal). */
int clattn__config_from_public(const clattn_config *in, clattn__config *out, char *why,
                               size_t why_len);

/* The compiled kernel and config for the class, planned and built on first use. */
clattn_status clattn__plan_get(clattn_context *ctx, const clattn__class *cls,
                               const clattn__plan **out);
clattn__class clattn__class_of(const clattn__shape *s);
/* The class's plan, or, when its query blocks would leave compute units idle for this problem
 * (batch * heads * query blocks below the device's compute units) and the keys are too few to
 * split (clattn__split_count), a plan of the same config with query blocks halved until they
 * fill the device or reach the variant's minimum. Overrides are kept as given. */
clattn_status clattn__plan_for_grid(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan **out);
/* Kernel arguments set in order; the first failure is kept in err (forward.c). */
typedef struct clattn__args {
  cl_kernel kernel;
  cl_uint next;
  cl_int err;
} clattn__args;
void clattn__arg(clattn__args *a, size_t size, const void *value);
/* A view's offset and three strides, as four ulong arguments. */
void clattn__arg_view(clattn__args *a, const clattn_tensor *t);

/* Keys split into ranges computed by separate work-groups (flash-decoding), each writing its
 * partial O and LSE into a workspace that a merge kernel combines (split.c). */
typedef struct clattn__split {
  unsigned count;        /* ranges; 1: none */
  unsigned kv_per_split; /* keys per range, a multiple of the config's key tile */
  cl_ulong o_split;      /* elements between the ranges' partial outputs */
  cl_ulong lse_off;      /* where the partial LSEs start in the lse buffer */
  cl_ulong lse_split;    /* elements between the ranges' partial LSEs */
} clattn__split;

/* Sets the kernel's arguments and enqueues it on queue (in one or several launches). split NULL:
 * no split, O and LSE written to o and lse. */
clattn_status clattn__enqueue_forward(clattn_context *ctx, cl_command_queue queue, int in_order,
                                      const clattn__shape *s, const clattn__plan *p,
                                      const clattn__split *split, const clattn_tensor *q,
                                      const clattn_tensor *k, const clattn_tensor *v,
                                      const clattn_tensor *o, cl_mem lse, cl_uint num_wait,
                                      const cl_event *wait, cl_event *done);
/* How many key ranges a problem's plan should split into (1: none): only where the work-groups
 * of query blocks leave compute units idle, the keys are many, the plan is not an override and
 * the queue is in order (the workspace is reused call after call). */
unsigned clattn__split_count(const clattn_context *ctx, const clattn__shape *s,
                             const clattn__plan *p, unsigned *kv_per_split);
/* The split path: the kernel into the context's split workspace, then the merge into o, lse. */
clattn_status clattn__forward_split(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan *p, unsigned count, unsigned kv_per_split,
                                    const clattn_tensor *q, const clattn_tensor *k,
                                    const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                    cl_uint num_wait, const cl_event *wait, cl_event *done);

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

/* ---- standard path (standard.c) ---- */

/* How the standard path splits a problem over batch*heads to fit global memory. */
typedef struct clattn__standard_plan {
  size_t head_workspace; /* bytes of one head's S/P matrix */
  size_t head_temp;      /* bytes CLBlast may allocate per head (padded copies), budgeted */
  size_t chunk;          /* heads per launch; 0: one head does not fit */
  size_t bytes;          /* held at once: chunk * (head_workspace + head_temp) */
  size_t limit;          /* what may be held: min(workspace limit, ...) */
} clattn__standard_plan;

/* matrices: N^2 matrices per head the call holds (forward 1: S/P; backward 2: P and dS). */
void clattn__standard_plan_of(const clattn_context *ctx, const clattn__shape *s, unsigned matrices,
                              clattn__standard_plan *out);
/* The same, with pack_bytes more per head in the workspace: packed copies of views CLBlast
 * cannot read in place (standard_pack.c). */
void clattn__standard_plan_packed(const clattn_context *ctx, const clattn__shape *s,
                                  unsigned matrices, size_t pack_bytes, clattn__standard_plan *out);
/* D = rowsum(dO o O) per query row into ctx->bwd_ws (grown to fit), for both backward paths
 * (standard_bwd.c, with cl/standard.cl's bwd_rowdot). */
clattn_status clattn__bwd_rowsum(clattn_context *ctx, const clattn__shape *s,
                                 const clattn_tensor *o, const clattn_tensor *d_o);
/* The standard path's backward (standard_bwd.c), for checked tensors with seqlen_q and seqlen_kv
 * both positive, on an in-order queue. */
clattn_status clattn__standard_backward(clattn_context *ctx, const clattn__shape *s,
                                        const clattn_tensor *q, const clattn_tensor *k,
                                        const clattn_tensor *v, const clattn_tensor *o,
                                        const clattn_tensor *d_o, cl_mem lse,
                                        const clattn_tensor *dq, const clattn_tensor *dk,
                                        const clattn_tensor *dv);
/* Enqueues the standard path for checked tensors. */
clattn_status clattn__standard_forward(clattn_context *ctx, const clattn__shape *s,
                                       const clattn_tensor *q, const clattn_tensor *k,
                                       const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                       cl_uint num_wait, const cl_event *wait, cl_event *done);
/* Pieces of the standard path shared by its forward and backward (standard.c): a batched GEMM
 * C = alpha op(A) op(B) + beta C (row-major; strided-batched when one stride covers the batch;
 * alphas and betas are count floats of scratch), a kernel of cl/standard.cl by name and build
 * options, the workspace grown to bytes, a launch of items work-groups of wg (the argument
 * base_arg takes the first group), and the check that CLBlast can address every view. */
clattn_status clattn__std_gemm(clattn_context *ctx, const char *what, int trans_a, int trans_b,
                               size_t m, size_t n, size_t k, float alpha, cl_mem a,
                               const size_t *ao, size_t lda, cl_mem b, const size_t *bo, size_t ldb,
                               float beta, cl_mem c, const size_t *co, size_t ldc, size_t count,
                               float *alphas, float *betas);
clattn_status clattn__std_kernel(clattn_context *ctx, const char *name, const char *options,
                                 cl_kernel *out);
clattn_status clattn__std_workspace(clattn_context *ctx, size_t bytes);
clattn_status clattn__std_launch(clattn_context *ctx, cl_kernel k, cl_uint base_arg, size_t items,
                                 size_t wg);
clattn_status clattn__std_addressable(clattn_context *ctx, const clattn__shape *s,
                                      const clattn_tensor *q, const clattn_tensor *k,
                                      const clattn_tensor *v, const clattn_tensor *o);
/* A GEMM operand of the standard path (standard_pack.c): the [rows][cols] matrix of each
 * batch*heads entry of view t (group: query heads per head of t), read in place, or, when CLBlast
 * cannot take t's row stride as its leading dimension (rows > 1, stride_seq < cols), from packed
 * copies at element pack_at of the workspace. buf and ld are what CLBlast gets. */
typedef struct clattn__std_operand {
  const clattn_tensor *t;
  size_t rows, cols, group;
  int packed;
  size_t pack_at;
  cl_mem buf;
  size_t ld;
} clattn__std_operand;
void clattn__std_operand_init(clattn__std_operand *op, const clattn_tensor *t, size_t rows,
                              size_t cols, size_t group);
/* Bytes per batch*heads entry of the packed copies of n operands; their places in a workspace
 * of chunk entries, from element at on. */
size_t clattn__std_pack_bytes(const clattn__std_operand *ops, int n);
void clattn__std_operands_place(clattn__std_operand *ops, int n, size_t chunk, size_t at);
/* Element offsets of entries [first, first + count) into off; enqueues their packed copies
 * first when op is packed (op->buf becomes the workspace). */
clattn_status clattn__std_operand_load(clattn_context *ctx, const clattn__shape *s,
                                       clattn__std_operand *op, size_t first, size_t count,
                                       size_t *off);
/* UNSUPPORTED, naming it, when an output operand would need a packed copy (validation rejects
 * such outputs as overlapping themselves first: a safety net before anything is enqueued). */
clattn_status clattn__std_outputs_direct(clattn_context *ctx, const clattn__std_operand *ops,
                                         const char *const *names, int n);
void clattn__split_release(clattn_context *ctx);
void clattn__backward_release(clattn_context *ctx);
void clattn__standard_release(clattn_context *ctx);

#endif
