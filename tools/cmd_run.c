/* `clattn run`: one problem on random data, checked against the host reference, timed. */
#include "commands.h"
#include "args.h"
#include "check.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: clattn run [options]\n%s"
      "  --layout bshd|bhsd (bshd)\n"
      "  --offset E         elements before each tensor in its buffer (0)\n"
      "  --lse              also write and check the log-sum-exp\n"
      "  --backward         check (and time) the backward pass: dq, dk, dv against the\n"
      "                     double-precision reference (3x the naive error in the storage's\n"
      "                     precision + 1e-6, half: + 1e-4)\n"
      "  --warmup W (3)  --repeat R (10)  --seed S (1)\n"
      "  --no-check         skip the host reference (large problems)\n"
      "  --config K/BQ/BKV/TPR/RM/STAGE/PAD[/VEC]  force a config (an override), e.g.\n"
      "                     forward_tiles/32/16/4/2/1/1 or forward_rows/64/64/1/1/0/1;\n"
      "                     the backward's as K/BQ/BKV, e.g. backward_mma/32/32\n"
      "  --alibi            ALiBi with BLOOM's slopes 2^(-8 (h + 1) / heads)\n"
      "  --alibi-per-batch  ALiBi slopes per batch entry and head (the above times 1 + b/2)\n"
      "  --sinks            an attention sink per head (N(0,1) + 1 logits; head 2: -inf);\n"
      "                     with --backward its gradient is checked too\n"
      "  --seqlens-kv       a padded batch: entry b's keys seqlen_kv, 2/3 of it + 1, 0, -3\n"
      "                     and seqlen_kv + 5 (the last two out of range: no keys), by b %% 5\n"
      "  --varlen           packed sequences (CLATTN_VARLEN), batch of them, the longest\n"
      "                     seqlen-q by seqlen-kv, then by b %% 4: q/2+1 by kv/3+1, 0 by kv/2,\n"
      "                     1 by 0; checked per sequence (with --backward, the gradients)\n"
      "  --lengths L,...    the batch entries' lengths for --seqlens-kv (keys) or --varlen\n"
      "                     (queries and keys), instead of the patterns\n"
      "  --kv-cache contiguous|paged  a KV cache filled by clattn_kv_append (twice, across\n"
      "                     pages) and read by the forward (--seqlen-q rows a sequence, 1\n"
      "                     unless given: decode), checked and\n"
      "                     timed with its bandwidth beside a streaming read's; every sequence\n"
      "                     full unless --lengths\n"
      "  --context N        the cache's capacity per sequence (seqlen_kv)\n"
      "  --page-size P      paged: tokens per page, a power of two 1..256 (16)\n"
      "  --kv-layout nhd|hnd  paged: [page][token][head][dim] or [page][head][token][dim]\n"
      "  --cache-dtype f32|f16|bf16|i8  the cache's elements (the problem's dtype)\n"
      "  --compare          also time what a context without the tuning database gets\n"
      "                     (built-in default, else heuristic), call by call in turn\n"
      "                     with this one, and print the ratio\n",
      problem_flags_help);
}

enum {
  OPT_LAYOUT = OPT_COMMAND,
  OPT_OFFSET,
  OPT_LSE,
  OPT_BACKWARD,
  OPT_NO_CHECK,
  OPT_WARMUP,
  OPT_REPEAT,
  OPT_SEED,
  OPT_CONFIG,
  OPT_COMPARE,
  OPT_ALIBI,
  OPT_ALIBI_PER_BATCH,
  OPT_SINKS,
  OPT_SEQLENS_KV,
  OPT_VARLEN,
  OPT_LENGTHS,
  OPT_KV_CACHE,
  OPT_CONTEXT,
  OPT_PAGE_SIZE,
  OPT_KV_LAYOUT,
  OPT_CACHE_DTYPE
};
static const struct option run_options[] = {
    PROBLEM_OPTIONS,
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"offset", required_argument, NULL, OPT_OFFSET},
    {"lse", no_argument, NULL, OPT_LSE},
    {"backward", no_argument, NULL, OPT_BACKWARD},
    {"no-check", no_argument, NULL, OPT_NO_CHECK},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"compare", no_argument, NULL, OPT_COMPARE},
    {"alibi", no_argument, NULL, OPT_ALIBI},
    {"alibi-per-batch", no_argument, NULL, OPT_ALIBI_PER_BATCH},
    {"sinks", no_argument, NULL, OPT_SINKS},
    {"seqlens-kv", no_argument, NULL, OPT_SEQLENS_KV},
    {"varlen", no_argument, NULL, OPT_VARLEN},
    {"lengths", required_argument, NULL, OPT_LENGTHS},
    {"kv-cache", required_argument, NULL, OPT_KV_CACHE},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"page-size", required_argument, NULL, OPT_PAGE_SIZE},
    {"kv-layout", required_argument, NULL, OPT_KV_LAYOUT},
    {"cache-dtype", required_argument, NULL, OPT_CACHE_DTYPE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};
static const char *const layouts[] = {"bshd", "bhsd"};

static const char *const cache_kinds[] = {"contiguous", "paged"},
                         *const kv_layouts[] = {"nhd", "hnd"},
                         *const cache_types[] = {"f32", "f16", "bf16", "i8"};

typedef struct {
  int kv_cache, cache_kind, cache_dtype; /* cache_dtype -1: the problem's */
  check_kv kv;
  int compare, force, backward, varlen;
  size_list lengths;
  clattn_config forced;
} run_opts;

/* 0: run; 1: --help was printed; -1: a usage error (a message was printed). */
static int parse(int argc, char **argv, check_spec *sp, run_opts *o) {
  args a;
  args_init(&a, "run", argc, argv, run_options);
  int id, state = 0;
  while (!state && (id = args_next(&a)) != ARGS_END) {
    size_t n = 0;
    int ok = 1;
    switch (id) {
    case ARGS_BAD:
      ok = 0;
      break;
    case 'h':
      usage(stdout);
      state = 1;
      break;
    case OPT_LSE:
      sp->with_lse = 1;
      break;
    case OPT_BACKWARD:
      o->backward = 1;
      break;
    case OPT_NO_CHECK:
      sp->skip_check = 1;
      break;
    case OPT_COMPARE:
      o->compare = 1;
      break;
    case OPT_ALIBI:
      sp->alibi = 1;
      break;
    case OPT_ALIBI_PER_BATCH:
      sp->alibi = 1, sp->problem.flags |= CLATTN_ALIBI_PER_BATCH;
      break;
    case OPT_SINKS:
      sp->sinks = 1;
      break;
    case OPT_SEQLENS_KV:
      sp->seqlens_kv = 1;
      break;
    case OPT_VARLEN:
      o->varlen = 1;
      break;
    case OPT_LENGTHS:
      size_list_free(&o->lengths);
      ok = args_size_list(&a, 0, INT32_MAX, &o->lengths);
      break;
    case OPT_KV_CACHE:
      ok = args_choice(&a, cache_kinds, 2, &o->cache_kind), o->kv_cache = 1;
      break;
    case OPT_CONTEXT:
      ok = args_size(&a, 1, INT32_MAX, &sp->problem.seqlen_kv);
      break;
    case OPT_PAGE_SIZE:
      if ((ok = args_size(&a, 1, 256, &n))) o->kv.page_size = n;
      break;
    case OPT_KV_LAYOUT:
      ok = args_choice(&a, kv_layouts, 2, &o->kv.hnd);
      break;
    case OPT_CACHE_DTYPE:
      ok = args_choice(&a, cache_types, 4, &o->cache_dtype);
      break;
    case OPT_CONFIG:
      ok = o->force = args_config(&a, &o->forced);
      break;
    case OPT_OFFSET:
      ok = args_size(&a, 0, SIZE_MAX, &sp->offset);
      break;
    case OPT_LAYOUT:
      ok = args_choice(&a, layouts, 2, &sp->bhsd);
      break;
    case OPT_WARMUP:
    case OPT_REPEAT:
      if ((ok = args_size(&a, 0, 100000, &n)))
        *(id == OPT_WARMUP ? &sp->warmup : &sp->repeat) = (int)n;
      break;
    case OPT_SEED:
      if ((ok = args_size(&a, 0, UINT_MAX, &n))) sp->seed = (unsigned)n;
      break;
    default:
      ok = args_problem(&a, id, &sp->problem);
      break;
    }
    if (!ok) state = -1;
  }
  return state;
}

int cmd_run(int argc, char **argv) {
  check_spec sp = {0};
  clattn_problem *p = &sp.problem;
  /* seqlen_q SIZE_MAX until an option sets it: 1024, or one row over a KV cache (decode). */
  p->batch = 1, p->heads_q = 8, p->seqlen_q = SIZE_MAX, p->seqlen_kv = 1024, p->head_dim = 64;
  sp.warmup = 3, sp.repeat = 10, sp.seed = 1;
  run_opts o = {0};
  o.cache_dtype = -1;
  int parsed = parse(argc, argv, &sp, &o);
  if (p->seqlen_q == SIZE_MAX) p->seqlen_q = o.kv_cache ? 1 : 1024;
  if (!parsed && o.kv_cache && (o.varlen || sp.seqlens_kv || o.backward || o.compare)) {
    fprintf(stderr, "clattn run: --kv-cache takes none of --varlen, --seqlens-kv, --backward, "
                    "--compare\n");
    parsed = -1;
  }
  if (!parsed && o.lengths.n &&
      (o.lengths.n != p->batch || !(o.varlen || sp.seqlens_kv || o.kv_cache))) {
    fprintf(stderr,
            "clattn run: --lengths: one per batch entry (%zu), with --seqlens-kv, --varlen or "
            "--kv-cache\n",
            p->batch);
    parsed = -1;
  }
  if (parsed) {
    size_list_free(&o.lengths);
    return parsed > 0 ? CLI_OK : CLI_USAGE;
  }
  sp.lengths = o.lengths.v;
  int compare = o.compare, force = o.force, backward = o.backward;
  clattn_config forced = o.forced;

  clattn_context *ctx = NULL;
  if (clattn_context_create_default(NULL, &ctx) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(NULL));
    return CLI_ERROR;
  }
  int rc = CLI_ERROR;
  clattn_context *base = NULL; /* before the first goto out: destroyed there */
  printf("device:  %s\n", clattn_context_device_summary(ctx));
  char mask[96];
  args_mask_text(p, mask, sizeof mask);
  printf("problem: batch %zu, heads %zu/%zu, seqlen %zu x %zu, head_dim %zu/%zu, %s%s%s%s, %s%s\n",
         p->batch, p->heads_q, p->heads_kv ? p->heads_kv : p->heads_q, p->seqlen_q, p->seqlen_kv,
         p->head_dim, p->head_dim_v ? p->head_dim_v : p->head_dim, mask,
         !sp.alibi                           ? ""
         : p->flags & CLATTN_ALIBI_PER_BATCH ? ", ALiBi per batch and head"
                                             : ", ALiBi",
         sp.sinks ? ", sinks" : "", sp.seqlens_kv ? ", padded keys (seqlens_kv)" : "",
         sp.bhsd ? "bhsd" : "bshd", sp.offset ? ", offset" : "");
  if (o.kv_cache) { /* its plan is the decode family's: explain has no cache to plan for */
    o.kv.dtype = o.cache_dtype < 0 ? p->dtype : (clattn_dtype)o.cache_dtype;
    if (o.cache_kind == 1 && !o.kv.page_size) o.kv.page_size = 16;
    if (o.cache_kind == 0) o.kv.page_size = 0;
    o.kv.first = p->seqlen_kv / 2 + 1;
    /* An override of the problem's class serves its cache calls (plan/config.c). */
    if (force && clattn_override_config(ctx, p, &forced) != CLATTN_OK) {
      fprintf(stderr, "clattn: %s\n", clattn_last_error(ctx));
      goto out;
    }
    rc = cmd_run_kv(ctx, &sp, &o.kv);
    goto out;
  }
  clattn_plan_info info;
  if (force && clattn_override_config(ctx, p, &forced) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(ctx));
    goto out;
  }
  if (clattn_explain(ctx, p, &info) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(ctx));
    goto out;
  }
  if (!strcmp(info.algorithm, "standard"))
    printf("plan:    standard: CLBlast GEMM, softmax, GEMM; %zu of batch*heads per launch, "
           "%.1f MiB of global memory at once (limit %.1f MiB)\n",
           info.standard_heads_per_chunk, info.standard_workspace_bytes / 1048576.0,
           info.workspace_limit / 1048576.0);
  else
    printf("plan:    %s BQ=%u BKV=%u TPR=%u RM=%u stage_kv=%u pad=%u vec=%u, %zu work-items, local "
           "memory %.1f of %.1f KiB (%s)\n",
           info.kernel, info.block_q, info.block_kv, info.threads_per_row, info.rows_per_item,
           info.stage_kv, info.pad, info.vector_width, info.work_group_size,
           info.local_mem_bytes / 1024.0, info.local_mem_available / 1024.0, info.origin);
  if (!strcmp(info.algorithm, "fused")) printf("why:     %s\n", info.reason);
  if (compare) { /* the same device and queue, without the tuning database or overrides */
    clattn_options none = {NULL, "", NULL, 0};
    clattn_plan_info binfo;
    if (clattn_context_create(clattn_context_cl_context(ctx), clattn_context_device(ctx),
                              clattn_context_queue(ctx), &none, &base) != CLATTN_OK ||
        clattn_explain(base, p, &binfo) != CLATTN_OK) {
      fprintf(stderr, "clattn: %s\n", clattn_last_error(base));
      goto out;
    }
    printf("compare: %s BQ=%u BKV=%u TPR=%u RM=%u stage_kv=%u pad=%u vec=%u (%s)\n", binfo.kernel,
           binfo.block_q, binfo.block_kv, binfo.threads_per_row, binfo.rows_per_item,
           binfo.stage_kv, binfo.pad, binfo.vector_width, binfo.origin);
    sp.compare_with = base;
  }
  if (o.varlen) { /* checked only: its timing is clattn bench's to add */
    check_varlen_result vr;
    if (check_varlen_run(ctx, &sp, backward, &vr) != CLATTN_OK) {
      fprintf(stderr, "clattn: %s\n  %s\n", clattn_status_string(vr.status),
              clattn_last_error(ctx));
      goto out;
    }
    if (!sp.skip_check)
      printf(
          "check:   varlen: max|o - ref| = %.3g (tolerance %.3g), max|lse - ref| = %.3g (%.3g)\n",
          vr.err_o, vr.tol_o, vr.err_lse, vr.tol_lse);
    if (backward && !sp.skip_check)
      printf("check:   varlen: dq %.3g (%.3g), dk %.3g (%.3g), dv %.3g (%.3g)\n", vr.err[0],
             vr.tol[0], vr.err[1], vr.tol[1], vr.err[2], vr.tol[2]);
    if (backward && sp.sinks && !sp.skip_check)
      printf("check:   varlen: d_sinks %.3g (%.3g)\n", vr.err_sinks, vr.tol_sinks);
    if (!sp.skip_check) printf("check:   varlen -> %s\n", vr.pass ? "PASS" : "FAIL");
    if (sp.repeat > 0)
      printf("time:    %s median %.3f ms (%d runs after %d warm-up, OpenCL events)\n",
             backward ? "backward" : "forward", vr.median_ms, sp.repeat, sp.warmup);
    rc = vr.pass ? CLI_OK : CLI_CHECK_FAILED;
    goto out;
  }
  if (backward) {
    if (!strcmp(info.algorithm, "fused") && info.backward.kernel[0])
      printf("backward: %s BQ=%u BKV=%u (%s)\n", info.backward.kernel, info.backward.block_q,
             info.backward.block_kv, info.backward_origin);
    check_bwd_result br;
    if (check_backward_run(ctx, &sp, &br) != CLATTN_OK) {
      fprintf(stderr, "clattn: %s\n  %s\n", clattn_status_string(br.status),
              clattn_last_error(ctx));
      goto out;
    }
    const char *names[] = {"dq", "dk", "dv"};
    static const char *const naive[] = {"naive fp32", "naive fp16", "naive bf16"};
    if (!sp.skip_check)
      for (int g = 0; g < 3; g++)
        printf("check:   %s max|g - ref| = %.3g (tolerance %.3g = 3 x %s %.3g + %.0e)\n", names[g],
               br.err[g], br.tol[g], naive[sp.problem.dtype <= CLATTN_BF16 ? sp.problem.dtype : 0],
               br.naive_err[g], ref_tolerance_floor(sp.problem.dtype));
    if (!sp.skip_check && sp.sinks)
      printf("check:   d_sinks max|g - ref| = %.3g (tolerance %.3g = 3 x %s %.3g + %.0e)\n",
             br.err_sinks, br.tol_sinks,
             naive[sp.problem.dtype <= CLATTN_BF16 ? sp.problem.dtype : 0], br.naive_err_sinks,
             ref_tolerance_floor(sp.problem.dtype));
    if (!sp.skip_check) printf("check:   backward -> %s\n", br.pass ? "PASS" : "FAIL");
    if (sp.repeat > 0)
      printf("time:    backward median %.3f ms (min %.3f, max %.3f; %d runs after %d warm-up, "
             "OpenCL events); %.1f GFLOP/s (2.5 x forward FLOPs)\n",
             br.median_ms, br.min_ms, br.max_ms, sp.repeat, sp.warmup,
             br.median_ms > 0 ? 2.5 * info.flops / (br.median_ms * 1e6) : 0.0);
    rc = br.pass ? CLI_OK : CLI_CHECK_FAILED;
    goto out;
  }
  check_result r;
  if (check_run(ctx, &sp, &r) != CLATTN_OK) {
    const char *msg = clattn_last_error(ctx);
    fprintf(stderr, "clattn: %s%s\n", clattn_status_string(r.status), msg[0] ? "" : "");
    if (msg[0]) fprintf(stderr, "  %s\n", msg);
    goto out;
  }
  if (!sp.skip_check) {
    static const char *const naive[] = {"naive fp32", "naive fp16", "naive bf16"};
    printf("check:   max|o - ref| = %.3g (tolerance %.3g = 2 x %s %.3g + %.0e)", r.err_o, r.tol_o,
           naive[sp.problem.dtype <= CLATTN_BF16 ? sp.problem.dtype : 0], r.naive_err_o,
           ref_tolerance_floor(sp.problem.dtype));
    if (sp.with_lse) printf("; max|lse - ref| = %.3g (tolerance %.3g)", r.err_lse, r.tol_lse);
    printf(" -> %s\n", r.pass ? "PASS" : "FAIL");
  }
  if (sp.repeat > 0)
    printf("time:    median %.3f ms (min %.3f, max %.3f; %d runs after %d warm-up, %s); "
           "%.1f GFLOP/s\n",
           r.median_ms, r.min_ms, r.max_ms, sp.repeat, sp.warmup,
           r.timed_by_events ? "OpenCL events" : "wall clock",
           r.median_ms > 0 ? info.flops / (r.median_ms * 1e6) : 0.0);
  if (base && sp.repeat > 0)
    printf("compare: median %.3f ms (min %.3f, max %.3f) -> this plan is %.3fx the compared one "
           "(interleaved runs)\n",
           r.cmp_median_ms, r.cmp_min_ms, r.cmp_max_ms,
           r.median_ms > 0 ? r.cmp_median_ms / r.median_ms : 0.0);
  rc = r.pass ? CLI_OK : CLI_CHECK_FAILED;
out:
  size_list_free(&o.lengths);
  clattn_context_destroy(base);
  clattn_context_destroy(ctx);
  return rc;
}
