/* clattn — plans: the tile configs of the kernels and overrides of them, what a problem would
 * get and why (explain), the standard path's profile, and the autotuner with its database.
 *
 * Part of the public API: include <clattn.h>, which includes this header after its own
 * declarations; the conventions stated there hold here too. */
#ifndef CLATTN_PLAN_API_H
#define CLATTN_PLAN_API_H

#include "clattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tile config of the forward or the backward kernels (what the tuner varies). */
typedef struct clattn_config {
  char kernel[32];          /* kernel variant: "forward_rows" (one query row per work-item,
                               or a few sharing it), "forward_tiles" (register-tiled: each
                               work-item owns rows_per_item rows x block_kv/threads_per_row keys
                               of S), "forward_mma" (NVIDIA tensor cores, compute capability
                               8.0+: a warp per 16 query rows, block_q a multiple of 16,
                               block_kv of 8, threads_per_row 1; rows_per_item unused, pad != 0
                               pads the local rows against bank conflicts; fp32 storage only)
                               or "forward_mma_half" (the same in CLATTN_F16 and CLATTN_BF16
                               storage only, mma.sync f16/bf16 with fp32 accumulation: block_kv
                               a multiple of 16, stage_kv 1, or 2 for K/V tiles copied in two
                               stages (head dims multiples of 16; pad 1, or 0 for rows swizzled
                               instead, head dims multiples of 64), 3 in one stage each
                               (V copied during S, K during P V), 4 the same with Q in local
                               memory, rows_per_item 1 or 2
                               m16 tiles of 16 rows a warp (block_q a multiple of 16 of them),
                               vector_width 1), or "decode"
                               (calls over a KV cache, the only kernel of theirs: block_q
                               packed rows, a KV group's heads x query rows, up to 16;
                               block_kv keys per block; threads_per_row work-items per key;
                               rows_per_item rows per work-item in P V; vector_width 4:
                               16-byte loads; stage_kv 2: V loaded with K, 1: after the
                               scores, 3: after the scores, with the next block's K), or
                               "decode_mma" (the same calls on NVIDIA tensor cores, fp16 or
                               bf16 queries over fp16, bf16 or int8 caches: block_q 8 or 16,
                               block_kv 16 or 32, threads_per_row 1; stage_kv 1: a block's
                               loads issued at its start, 2 (block_kv 32): each 16 keys' loads
                               issued during the previous 16's math);
                               "" means forward_rows. For clattn_backward's
                               kernels: "backward_rows" (a work-item per key or query row),
                               "backward_mma" (NVIDIA tensor cores, a warp per 16 keys or
                               rows, blocks multiples of 16, head dims up to 128; the blocks
                               it stages follow from local memory; fp32 storage only) or
                               "backward_mma_half" (the same in CLATTN_F16 and CLATTN_BF16
                               storage only), of which only block_q and block_kv count */
  unsigned block_q;         /* query rows per work-group */
  unsigned block_kv;        /* keys per K/V tile */
  unsigned threads_per_row; /* work-items sharing one query row (forward_tiles: along the keys) */
  unsigned stage_kv;        /* 1: K/V tiles staged in local memory; 2 (forward_mma): staged
                               split into their TF32 parts, each value split once per work-group
                               rather than once per warp, in twice the local memory; decode:
                               when V is loaded (above), 2 with K, else after the scores */
  unsigned pad;             /* floats of padding per local-memory row */
  unsigned rows_per_item;   /* forward_tiles: query rows per work-item; 0 means 1 */
  unsigned vector_width;    /* of the loads that fill the tiles: 1, 2 or 4, dividing both head
                               dims; 0 means 1 */
} clattn_config;

/* Use cfg, instead of the tuning database or the heuristic, for problems of this problem's
 * class (head dims, causal, the variants it has, sequence-length bucket of seqlen_q; calls over a
 * KV cache of this problem included, whatever their context) on ctx: a
 * forward kernel's config for clattn_forward, a "backward_rows" config (block_q, block_kv: powers
 * of two up to 256) for clattn_backward's fused kernels; cfg NULL removes both overrides of the
 * class. For experiments and tuning by hand. Errors: INVALID_ARGUMENT (an unknown kernel, or a
 * config that exceeds the device's local memory or work-group limits, with the numbers),
 * UNSUPPORTED (a kernel that does not compute the problem's window, softcap or CLATTN_VARLEN,
 * named). The override serves the class's calls with ALiBi, sinks or seqlens_kv too, which a
 * problem cannot name: a kernel that does not compute those fails those calls (UNSUPPORTED).
 * Thread safe. */
CLATTN_API clattn_status clattn_override_config(clattn_context *ctx, const clattn_problem *problem,
                                                const clattn_config *cfg);

/* CLATTN_OK when cfg is legal for the problem's class on ctx's device; otherwise
 * CLATTN_ERR_INVALID_ARGUMENT with why (e.g. "BQ=128 BKV=64: needs 66.0 KiB local memory, device
 * has 48.0 KiB") in clattn_last_error. Compiles nothing. Thread safe. */
CLATTN_API clattn_status clattn_config_check(clattn_context *ctx, const clattn_problem *problem,
                                             const clattn_config *cfg);

/* Warnings of the context so far, one per line (a corrupt tuning database, an entry that no
 * longer fits the device, ...); each is reported once. "" when none. Owned by ctx. Thread safe,
 * also while calls on ctx run in other threads: the text returned is never changed or freed
 * until clattn_context_destroy(ctx), so it may be read for that long (a warning added later
 * appears in the text of a later call, not in this one). */
CLATTN_API const char *clattn_context_diagnostics(const clattn_context *ctx);

/* What a call with this problem would run, and why. */
typedef struct clattn_plan_info {
  char kernel[32];            /* kernel variant */
  unsigned block_q, block_kv; /* query rows and keys per tile */
  unsigned threads_per_row;   /* work-items sharing one query row */
  unsigned rows_per_item;     /* forward_tiles: query rows per work-item */
  unsigned vector_width;      /* of the tile loads */
  unsigned stage_kv; /* 1: K/V tiles staged in local memory; 2: staged split (forward_mma_half: 2
                        two stages, 3 one, staggered, 4 with Q in local memory) */
  unsigned pad;      /* floats of padding per local-memory row */
  size_t work_group_size;
  size_t local_mem_bytes, local_mem_available;
  char origin[16]; /* where the config came from: "override", "tuned" (database entry for this
                      device, driver and sequence-length bucket), "fallback" (database entry for
                      this device with another driver or bucket, or another device of the same
                      vendor and type), "built-in" (defaults shipped with the library),
                      "heuristic" (local-memory model) */
  unsigned seqlen_bucket; /* of the problem class: seqlen_q's, a KV cache call's seqlen_kv's */
  double flops;           /* FlashAttention convention; visible pairs only when causal */
  char reason[320];       /* why these tiles, in words */

  /* The global-memory traffic model (the HBM analogue), in bytes. Fused: Q and O once, K and V
   * once per query block (per work-group that stages them, per work-item that does not), LSE,
   * and with split keys the ranges' partial O and LSE written and read back.
   * Standard: Q, K and V once, S written and read, P written and read, O and LSE. */
  char algorithm[16];      /* what clattn_forward would run: "fused" or "standard" */
  double fused_read_bytes; /* 0 when the fused path cannot run the problem */
  double fused_write_bytes;
  double standard_read_bytes;
  double standard_write_bytes;
  double io_lower_bound_bytes;     /* FlashAttention's N^2 d^2 / M with M this device's local memory
                                      (floats): a bound without its constant, an order of magnitude */
  size_t standard_heads_per_chunk; /* batch*heads per standard-path launch; 0: one head does not
                                      fit the workspace limit */
  size_t standard_workspace_bytes; /* global memory the standard path holds at once: its S/P
                                      workspace plus CLBlast's temporary copies (budgeted) */
  size_t workspace_limit;          /* the context's limit on that */
  unsigned kv_splits; /* fused: the keys are split into this many ranges computed by separate
                         work-groups and merged by their LSE (flash-decoding), when the query
                         blocks alone would leave compute units idle; 1: no split */
  size_t standard_backward_workspace_bytes; /* the same for the standard path's backward, which
                                               holds P and dS (two matrices per head) at once */
  clattn_config backward;   /* the config clattn_backward's fused kernels would take (before they
                               are built: a config that turns out not to fit is stepped down) */
  char backward_origin[16]; /* "override", "tuned", "fallback" or "heuristic", as origin */
} clattn_plan_info;

/* Plan (and compile, so the work-group limits of the built kernel are known) without
 * enqueueing anything. When the fused path cannot run the problem the tile fields are zero and
 * the traffic fields still describe the standard plan. Errors: as clattn_forward's for the problem.
 * Thread safe. */
CLATTN_API clattn_status clattn_explain(clattn_context *ctx, const clattn_problem *problem,
                                        clattn_plan_info *out);
/* The plan clattn_forward_ex(ctx, problem, args) would run: args are checked as that call checks
 * them, and the call's own variants (ALiBi, sinks, seqlens_kv, cu_seqlens, a KV cache: the
 * decode kernels) reach the plan, which clattn_explain's problem alone cannot name. A cache
 * call's backward fields are empty (backward_origin "none"). Thread safe. */
CLATTN_API clattn_status clattn_explain_ex(clattn_context *ctx, const clattn_problem *problem,
                                           const clattn_args *args, clattn_plan_info *out);

/* Device time of each step of the last clattn_forward on ctx that ran the standard path, from
 * OpenCL profiling (markers around each step, summed over its launches over batch*heads). */
typedef struct clattn_standard_profile {
  double gemm_s_ms;  /* S = scale * Q K^T (CLBlast, with its padding copies) */
  double softmax_ms; /* the row softmax: reads S, writes P and LSE */
  double gemm_o_ms;  /* O = P V (CLBlast) */
  size_t launches;   /* chunks over batch*heads */
} clattn_standard_profile;

/* Waits for the last standard-path call on ctx and reads its step times. Errors:
 * INVALID_ARGUMENT (no standard-path call yet, or the queue has no CL_QUEUE_PROFILING_ENABLE),
 * OPENCL. Thread safe. */
CLATTN_API clattn_status clattn_standard_profile_last(clattn_context *ctx,
                                                      clattn_standard_profile *out);

/* ---- Tuning ---- */

/* Reported after each candidate of a tuning run. */
typedef struct clattn_tune_progress {
  unsigned tried;   /* candidates finished so far (measured, disqualified or not fitting) */
  unsigned planned; /* candidates the run expects to finish within its budget */
  double elapsed_s, budget_s;
  clattn_config candidate;      /* the one just finished */
  size_t candidate_local_mem;   /* its local memory, bytes */
  size_t candidate_private_mem; /* CL_KERNEL_PRIVATE_MEM_SIZE of its kernel (spills show here
                                   on drivers that report them); 0 when not built */
  double candidate_ms;          /* its median time; < 0 when disqualified or not fitting */
  const char *note;             /* why it was disqualified or did not fit; "" otherwise */
  clattn_config best;           /* the best so far */
  double best_ms;               /* < 0 while there is none */
} clattn_tune_progress;

typedef struct clattn_tune_options {
  double budget_seconds;   /* wall-clock bound of the whole run; 0: 60 */
  unsigned max_candidates; /* 0: no limit besides the budget */
  int dry_run;             /* 1: measure but do not write the tuning database */
  void (*progress)(void *user, const clattn_tune_progress *p); /* may be NULL */
  void *user;
  int backward; /* 1: tune clattn_backward's fused kernels (kernel "backward_rows": block_q
                   query rows, block_kv keys per work-group) for the problem's class instead of
                   the forward's; candidates are checked against the double reference gradients
                   on a small problem of the same class */
  /* Not NULL: tune the decode kernels of forward calls over caches like this one (only its dtype
   * and page_size are read: the tuner lays out its own cache of the problem's sizes, every
   * sequence full); the result is stored as that cache class's entry, apart from the plain
   * class's. */
  const struct clattn_kv_cache *kv_cache;
  int keep_tuned; /* 1: a class the tuning database already holds an entry of this device and
                     driver for (this sequence-length bucket, this pass, this cache kind) is not
                     tuned again: the result's best is that entry and kept is 1 (how an
                     interrupted `clattn tune` resumes, cache classes included) */
} clattn_tune_options;

typedef struct clattn_tune_result {
  clattn_config best, heuristic, runner_up;
  double best_ms, best_min_ms, best_spread; /* median, minimum, (max - min) / median */
  double heuristic_ms;                      /* the heuristic's config, timed beside the best */
  double runner_up_ms, margin;              /* margin = runner_up_ms / best_ms - 1; 0: none */
  size_t local_mem_bytes, local_mem_available, private_mem_bytes; /* of the best */
  unsigned space;                                                 /* configs in the search space */
  unsigned pruned;        /* of those, illegal on this device before any compile */
  unsigned tried;         /* compiled and run */
  unsigned disqualified;  /* wrong results (NaN/Inf or outside the tolerance) */
  unsigned did_not_fit;   /* built kernel exceeded a work-group or local-memory limit */
  unsigned seqlen_bucket; /* seqlen_q's; with options.kv_cache seqlen_kv's (the context) */
  double elapsed_s;
  int saved;         /* 1: written to the tuning database */
  int kept;          /* 1: options.keep_tuned found the class tuned; best is its entry and
                        nothing was measured */
  char report[1024]; /* disqualified candidates and why, one per line (truncated) */
} clattn_tune_result;

/* Finds the fastest config for the problem's class (head dims, causal, sequence-length bucket)
 * by measurement on random data of the problem's sizes: every candidate's outputs are filled with
 * NaN, then checked against a double-precision host reference on every row of a small problem
 * of the class and on sampled rows of the timed one, before it can win; candidates are
 * timed with OpenCL event profiling (warm-up, repeats until the spread is small), and the best
 * few are timed again interleaved with the heuristic's config. The winner is written to the
 * tuning database (unless dry_run) and used by later calls of this context; other processes
 * read it at their next context creation. options may be NULL. Errors: as clattn_forward's,
 * IO (database not writable; the result is still filled and used in this context),
 * UNSUPPORTED (no candidate passed; a problem with a window, CLATTN_CAUSAL_TOP_LEFT, a softcap
 * or CLATTN_VARLEN, which takes its plain class's entry), INVALID_ARGUMENT for
 * CLATTN_ALIBI_PER_BATCH (a tuning problem has no slopes). Thread safe; the context is busy for the
 * whole run. */
CLATTN_API clattn_status clattn_tune(clattn_context *ctx, const clattn_problem *problem,
                                     const clattn_tune_options *options, clattn_tune_result *out);

/* The tuning database file of the context ("" when none). Owned by ctx. */
CLATTN_API const char *clattn_context_tuning_db(const clattn_context *ctx);

#ifdef __cplusplus
}
#endif
#endif /* CLATTN_PLAN_API_H */
