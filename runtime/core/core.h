/* The core layer (docs/DESIGN.md): errors and diagnostics (errors.c), the device model
 * (device.c), validation of problems and tensors (validate.c), hashing and device selection
 * (select.c), and the context's fields, which each layer owns a part of. It uses no other layer.
 * Internal, not API: non-static internal names start with clattn__. */
#ifndef CLATTN_CORE_H
#define CLATTN_CORE_H

#include "clattn.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The largest head dim of the fused kernels (every family's max_dim is at most this); the
 * standard path goes further (validate.c). */
#define CLATTN__MAX_FUSED_DIM 256
/* An unbounded side of a key range (validate.c's mask offsets): beyond any row or key index. */
#define CLATTN__UNBOUNDED ((int64_t)1 << 40)

/* ---- device model (device.c) ---- */

typedef struct clattn__device {
  char name[256], vendor[256], driver[128], version[128];
  char platform_name[256], platform_version[256];
  cl_device_type type;
  cl_ulong local_mem;          /* what a work-group may use: CL_DEVICE_LOCAL_MEM_SIZE, or more where
                                  the device is known to allow it (device.c) */
  cl_ulong local_mem_reported; /* CL_DEVICE_LOCAL_MEM_SIZE: the heuristic's ranking, the
                                  fingerprint and the tuning database's key keep to it */
  int local_mem_emulated;      /* CL_DEVICE_LOCAL_MEM_TYPE is CL_GLOBAL (CPUs) */
  cl_ulong global_mem;         /* CL_DEVICE_GLOBAL_MEM_SIZE */
  cl_ulong max_alloc;          /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  cl_uint compute_units;
  size_t max_work_group;   /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  size_t max_item_size[3]; /* CL_DEVICE_MAX_WORK_ITEM_SIZES */
  cl_uint mem_base_align_bits;
  int tensor_cores;      /* NVIDIA, compute capability 8.0+: the forward_mma variant can run */
  unsigned cc_major;     /* NVIDIA's compute capability, major; 0 elsewhere */
  int mma_emulated;      /* CLATTN_MMA_EMULATE=1 on a device without: forward_mma emulated */
  char *extensions;      /* owned */
  char *build_options;   /* $CLATTN_BUILD_OPTIONS as read when the context was made, NULL when
                            unset; owned by the context (context.c), not by clattn__device_query */
  char fingerprint[768]; /* platform|version|vendor|name|driver|CUs|local mem */
} clattn__device;

/* The local memory a kernel's build-time sizing (staged rows, stages) may fit: pass 0 the size
 * the device reports (what the configs were measured with), pass 1 what it allows (more on
 * NVIDIA, device.c). A size fitted to the first is the same kernel as before the larger limit. */
static inline cl_ulong clattn__local_fit(const clattn__device *d, int pass) {
  if (pass == 0 && d->local_mem_reported && d->local_mem_reported < d->local_mem)
    return d->local_mem_reported;
  return d->local_mem;
}

/* A fixed-size helper kernel's work-group (cl/merge.cl's MW, cl/kv_append.cl's AW, passed as
 * -D): want work-items, or the largest power of two the device allows where that is less (the
 * append's maxima go by a tree). */
static inline size_t clattn__helper_wg(const clattn__device *d, size_t want) {
  size_t most = d->max_work_group < d->max_item_size[0] ? d->max_work_group : d->max_item_size[0];
  size_t wg = want;
  while (wg > 1 && wg > most) wg /= 2;
  return wg;
}

/* Reads the model of dev once. On failure returns an OpenCL error code and fills why. */
cl_int clattn__device_query(cl_device_id dev, clattn__device *out, char *why, size_t why_len);
void clattn__device_release(clattn__device *d);
const char *clattn__cl_error_name(cl_int err);

/* ---- errors and diagnostics (errors.c) ---- */

/* One thread's last error on one context, and one version of the diagnostics text. */
typedef struct clattn__thread_error clattn__thread_error;
typedef struct clattn__diag clattn__diag;

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
/* At destroy: the error slots and diagnostics of ctx. */
void clattn__errors_release(clattn_context *ctx);

/* FNV-1a, 64-bit (select.c): the key of sources, programs and tuning entries. */
uint64_t clattn__hash(const void *data, size_t len, uint64_t seed);
/* The device $CLATTN_DEVICE names (select.c), else the first GPU, else the first device. */
clattn_status clattn__pick_device(cl_platform_id *platform, cl_device_id *device);

/* ---- validation (validate.c) ---- */

/* The problem with its defaults applied, checked; sizes in elements. */
typedef struct clattn__shape {
  size_t batch, heads_q, heads_kv, seqlen_q, seqlen_kv, d, dv;
  float scale;
  unsigned causal; /* bottom-right CLATTN_CAUSAL alone (the kernels' CAUSAL) */
  /* The variants (issue 17; zero: off). mask: the keys of row i are [i + mask_lo, i + mask_hi)
   * within [0, seqlen_kv) (a window, CLATTN_CAUSAL_TOP_LEFT, or a causal mask with a window;
   * validate.c); softcap: the problem's cap, 0 when off. */
  int mask;
  int64_t mask_lo, mask_hi;
  float softcap;
  /* The variants' buffers from clattn_args (NULL: absent; clattn__check_variant_args): ALiBi's
   * slopes, alibi_mod the slope of (b, h) being alibi[(b heads_q + h) % alibi_mod]; the sinks
   * and, in a backward call, their gradient. */
  cl_mem alibi, sinks, d_sinks;
  int alibi_per_batch; /* CLATTN_ALIBI_PER_BATCH */
  /* A padded batch's key lengths (int32 [batch]), NULL when absent; kv_align: its masks keep
   * the bottom-right alignment (1) or the top-left one (0). */
  cl_mem seqlens_kv;
  int kv_align;
  /* CLATTN_VARLEN: packed sequences (cu_q, cu_kv from clattn_args; total_q, total_kv rows). The
   * views' extents: [vb][vq][heads][dim] for q and o, [vb][vkv][heads_kv][dim] for k and v
   * (vb = 1 and the totals with varlen, else batch and the lengths), and lse_rows LSE rows. */
  int varlen;
  int nondet; /* CLATTN_NONDETERMINISTIC: the backward may add dQ up by atomics */
  cl_mem cu_q, cu_kv;
  size_t total_q, total_kv, vb, vq, vkv, lse_rows;
  size_t alibi_mod;
  /* A KV cache (clattn_args.kv_cache, issue 18; core/kvcache.c): kv_cache set, the call's k and
   * v are the cache's views and seqlens_kv its lengths; kv_paged: page_size (a power of two),
   * num_pages, max_pages and block_table; kv_i8: int8 elements with k_scale, v_scale (sc_sb
   * scales per slot: a page's tokens, or an entry's seqlen_kv, times heads_kv). */
  int kv_cache, kv_paged, kv_i8;
  size_t page_size, num_pages, max_pages, sc_sb;
  cl_mem block_table, k_scale, v_scale;
  int empty;             /* nothing to compute: batch, heads_q or seqlen_q is 0 */
  clattn_algorithm algo; /* resolved: CLATTN_ALGO_FUSED or CLATTN_ALGO_STANDARD */
  clattn_dtype dtype;    /* storage of Q, K, V, O (and the gradients); LSE is always fp32 */
  size_t elem;           /* bytes per stored element */
} clattn__shape;

/* A buffer region: the root buffer (sub-buffers resolved) and a byte range [lo, hi); root NULL
 * when empty. */
typedef struct clattn__region {
  cl_mem root;
  size_t lo, hi;
} clattn__region;
/* validate.c's checks for the cache's (kvcache.c): every element of a [n0][n1][n2][dim] view
 * (an output: also not overlapping itself, nor CL_MEM_READ_ONLY; an input not CL_MEM_WRITE_ONLY),
 * or of an array of n 4-byte elements (NULL: absent, fine; access: CLATTN__READS, CLATTN__WRITES
 * or 0, as the call uses it), inside its buffer, with the byte range it spans; and whether two
 * ranges overlap. */
enum { CLATTN__READS = 1, CLATTN__WRITES = 2 };
clattn_status clattn__view_region(clattn_context *ctx, const char *name, const clattn_tensor *t,
                                  size_t n0, size_t n1, size_t n2, size_t dim, size_t elem,
                                  int output, clattn__region *r);
clattn_status clattn__array_region(clattn_context *ctx, const char *name, cl_mem m, size_t n,
                                   int access, clattn__region *r);
int clattn__regions_overlap(const clattn__region *a, const clattn__region *b);

/* A forward call over args->kv_cache (kvcache.c): args' k, v and seqlens_kv absent, no
 * CLATTN_VARLEN, q, o and lse checked as clattn_forward's, the variants' members, the cache
 * itself (clattn__check_kv_cache), and o and lse overlapping none of it; s gets the cache. */
clattn_status clattn__check_cache_forward(clattn_context *ctx, clattn__shape *s,
                                          const clattn_args *args);
/* The cache's members against s: dtype (the problem's or CLATTN_I8), layout (page size, pages,
 * block table), lengths, views and scales in their buffers; written (clattn_kv_append): its
 * views and scales are outputs, overlapping nothing else. Sets s's kv fields. regions (may be
 * NULL) get k, v, k_scale, v_scale, block_table, seqlens. */
clattn_status clattn__check_kv_cache(clattn_context *ctx, clattn__shape *s,
                                     const clattn_kv_cache *c, int written,
                                     clattn__region regions[6]);

/* args' variant members (a NULL: clattn_forward or clattn_backward, none), after the tensors'
 * checks: alibi_slopes, sinks and (backward) d_sinks checked against their sizes and the call's
 * outputs and set in s; cu_seqlens_* and seqlens_kv UNSUPPORTED, named. */
clattn_status clattn__check_variant_args(clattn_context *ctx, clattn__shape *s,
                                         const clattn_args *a, int backward);
clattn_status clattn__shape_from_problem(clattn_context *ctx, const clattn_problem *p,
                                         clattn__shape *out);
/* "CLATTN_F32", "CLATTN_F16" or "CLATTN_BF16". */
const char *clattn__dtype_name(clattn_dtype dtype);
/* The build option that selects cl/common.cl's storage type: "" for fp32 (whose options and
 * cache keys stay what they were), " -DDTYPE=1" or " -DDTYPE=2". */
const char *clattn__dtype_define(clattn_dtype dtype);
clattn_status clattn__check_forward_tensors(clattn_context *ctx, const clattn__shape *s,
                                            const clattn_tensor *q, const clattn_tensor *k,
                                            const clattn_tensor *v, const clattn_tensor *o,
                                            cl_mem lse);

/* The backward call's tensors: q, k, v, o, d_o and lse (required) as inputs, dq like q, dk and
 * dv like k and v as outputs, overlapping no input and no other output. */
clattn_status clattn__check_backward_tensors(clattn_context *ctx, const clattn__shape *s,
                                             const clattn_tensor *q, const clattn_tensor *k,
                                             const clattn_tensor *v, const clattn_tensor *o,
                                             const clattn_tensor *d_o, cl_mem lse,
                                             const clattn_tensor *dq, const clattn_tensor *dk,
                                             const clattn_tensor *dv);

/* ---- the context: its fields, each owned by the layer its comment names ---- */

/* What a kernel's scalar arguments were last set to (size 0: unknown), so that a call setting
 * the same values again skips clSetKernelArg: a decode call sets some 40 scalars, each an OpenCL
 * call, and a serving loop repeats them step after step. A plan keeps one for its first entry
 * (plan/plan.h); buffers are always set (clattn__arg_mem), since a released buffer's handle may
 * come back as another buffer's. */
enum { CLATTN__MEMO_ARGS = 64 };
typedef struct clattn__argmemo {
  cl_ulong val[CLATTN__MEMO_ARGS];
  unsigned char size[CLATTN__MEMO_ARGS];
} clattn__argmemo;

struct clattn_context {
  cl_context cl;
  cl_device_id device_id;
  cl_command_queue queue;
  int queue_in_order;
  clattn__device device;
  char *cache_dir, *tuning_db, *kernel_dir; /* resolved at creation; NULL when unset */
  unsigned force_splits;  /* $CLATTN_SPLITS: key ranges of split-key plans; 0 = planned */
  size_t workspace_limit; /* bytes the standard path may hold at once (resolved at creation) */
  char summary[512];
  int build_log; /* $CLATTN_BUILD_LOG was set at creation: print each build's log */
  /* A leaf lock (nothing else is taken while it is held) for the texts that threads read while
   * a call holds lock: the error slots' list and the diagnostics. */
  pthread_mutex_t text_lock;
  clattn__thread_error *errors; /* one slot per live thread that failed a call (text_lock) */
  clattn__diag *diag;   /* newest diagnostics version; older ones handed out live on (text_lock) */
  pthread_mutex_t lock; /* serialises calls; guards everything below */
  struct clattn__program *programs;   /* the kernels layer's program cache (jit.c) */
  struct clattn__plan *plans;         /* the plan layer's plans, every pass (planner.c) */
  struct clattn__override *overrides; /* configs set through the API (config.c) */
  struct clattn__db *db; /* the tuning database, read at the first plan; NULL until then */
  unsigned bincache_loaded, bincache_stored, bincache_rejected; /* on-disk cache counters */
  unsigned compiled;                                            /* programs compiled from source */
  cl_mem workspace;               /* the standard path's S/P workspace, grown on demand */
  size_t workspace_bytes;         /* its size */
  struct clattn__aux_kernel *aux; /* kernels of the standard path, by build options */
  cl_mem bwd_ws;                  /* the backward pass's rowsum(dO o O), grown on demand */
  size_t bwd_ws_bytes;
  cl_mem split_ws; /* partial outputs of split-key calls, grown on demand */
  size_t split_ws_bytes;
  cl_kernel merge[3]; /* the split-key merge per storage type, built on first use: building and
                         creating it on every call cost decode calls tens of microseconds */
  clattn__argmemo merge_memo[3]; /* their scalar arguments as last set (ops/split.c) */
  /* The merge inside a decode kernel (ops/split.c): 0 never, 1 where a tile's rows x ranges
   * are few, 2 always (context.c: where work-groups can be ordered, and $CLATTN_FUSED_MERGE);
   * the counts of finished key ranges, an int a tile, 0 between calls; dirty after a call that
   * may have left some counted (refilled before the next). */
  int merge_fused;
  cl_mem merge_count;
  size_t merge_count_n;
  int merge_count_dirty;
  cl_kernel append[3][2][2]; /* clattn_kv_append's kernel per storage type, paged and int8, built
                                on first use, for the same reason (runtime/ops/kvcache.c) */
  cl_event *step_marks;      /* markers around the last standard call's steps, 4 a chunk */
  size_t step_marks_count;
  size_t std_launch_groups; /* work-groups per enqueue of the standard path's element kernels;
                               0: GROUPS_PER_LAUNCH (tests make it small to check the pieces) */
};

/* mkdir -p of path's dirname, each folder private to the user (0700): core/files.c. */
void clattn__make_parents(const char *path);

#endif
