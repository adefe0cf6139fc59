/* `clattn explain`: what a problem would run (algorithm, config, where it came from), the
 * modelled global-memory traffic of the fused and standard plans beside FlashAttention's IO
 * bound, and which tiles around the config the device cannot take. */
#include "args.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

static void print_bytes(const char *label, double read, double write, double fused_total) {
  printf("  %-9s read %10.4g B, write %10.4g B, total %10.4g B", label, read, write, read + write);
  if (fused_total > 0 && strcmp(label, "fused:"))
    printf("  (%.1fx the fused plan)", (read + write) / fused_total);
  printf("\n");
}

static void print_illegal_tiles(clattn_context *ctx, const clattn_problem *p,
                                const clattn_plan_info *info) {
  printf("illegal tiles (same threads per row and staging):\n");
  int any = 0;
  for (unsigned bq = 1; bq <= 256; bq *= 2)
    for (unsigned bkv = 8; bkv <= 256; bkv *= 2) {
      clattn_config c = {"",
                         bq,
                         bkv,
                         info->threads_per_row,
                         info->stage_kv,
                         info->pad,
                         info->rows_per_item,
                         info->vector_width};
      snprintf(c.kernel, sizeof c.kernel, "%s", info->kernel);
      if (clattn_config_check(ctx, p, &c) != CLATTN_OK) {
        printf("  %s\n", clattn_last_error(ctx));
        any = 1;
      }
    }
  if (!any) printf("  none: every BQ 1..256 and BKV 8..256 fits\n");
}

static const struct option explain_options[] = {
    PROBLEM_OPTIONS, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

int cmd_explain(int argc, char **argv) {
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 8, p.seqlen_q = p.seqlen_kv = 1024, p.head_dim = 64;
  args a;
  args_init(&a, "explain", argc, argv, explain_options);
  int id, state = 0; /* 1: --help printed; -1: a usage error */
  while (!state && (id = args_next(&a)) != ARGS_END) {
    if (id == 'h') {
      printf("usage: clattn explain [problem options]\n%s", problem_flags_help);
      state = 1;
    } else if (id == ARGS_BAD || !args_problem(&a, id, &p)) {
      state = -1;
    }
  }
  if (state) return state > 0 ? CLI_OK : CLI_USAGE;
  clattn_context *ctx = NULL;
  if (clattn_context_create_default(NULL, &ctx) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(NULL));
    return CLI_ERROR;
  }
  clattn_plan_info info;
  int rc = CLI_OK;
  if (clattn_explain(ctx, &p, &info) != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n", clattn_last_error(ctx));
    rc = CLI_ERROR;
  } else {
    int fused = info.kernel[0] != 0;
    printf("device:    %s\n", clattn_context_device_summary(ctx));
    printf("database:  %s\n", clattn_context_tuning_db(ctx));
    printf("algorithm: %s\n", info.algorithm);
    if (fused) {
      char mask[96];
      args_mask_text(&p, mask, sizeof mask);
      printf("class:     head_dim %zu/%zu, %s, sequence-length bucket %u\n", p.head_dim,
             p.head_dim_v ? p.head_dim_v : p.head_dim, mask, info.seqlen_bucket);
      printf("config:    %s BQ=%u BKV=%u TPR=%u RM=%u stage_kv=%u pad=%u vec=%u, %zu "
             "work-items\n",
             info.kernel, info.block_q, info.block_kv, info.threads_per_row, info.rows_per_item,
             info.stage_kv, info.pad, info.vector_width, info.work_group_size);
      printf("origin:    %s\n", info.origin);
      printf("why:       %s\n", info.reason);
      printf("local:     %.1f of %.1f KiB\n", info.local_mem_bytes / 1024.0,
             info.local_mem_available / 1024.0);
      if (info.backward.kernel[0])
        printf("backward:  %s BQ=%u BKV=%u (%s)\n", info.backward.kernel, info.backward.block_q,
               info.backward.block_kv, info.backward_origin);
      else
        printf("backward:  none (no backward kernel computes this problem on this device)\n");
    }
    printf("flops:     %.4g (FlashAttention convention)\n", info.flops);
    printf("traffic:   global memory, modelled (LSE not counted)\n");
    double ft = info.fused_read_bytes + info.fused_write_bytes;
    if (fused) print_bytes("fused:", info.fused_read_bytes, info.fused_write_bytes, ft);
    print_bytes("standard:", info.standard_read_bytes, info.standard_write_bytes, ft);
    printf("  IO bound  %.4g B: N^2 d^2 / M with M = %.0f KiB of local memory (FlashAttention, "
           "no constant: an order of magnitude)\n",
           info.io_lower_bound_bytes, info.local_mem_available / 1024.0);
    if (info.standard_heads_per_chunk)
      printf("standard:  %zu of batch*heads per launch, %.4g B of global memory at once "
             "(backward: %.4g B; limit %.4g B)\n",
             info.standard_heads_per_chunk, (double)info.standard_workspace_bytes,
             (double)info.standard_backward_workspace_bytes, (double)info.workspace_limit);
    else
      printf("standard:  cannot run: one head needs more than the workspace limit (%.4g B) or "
             "the largest allocation\n",
             (double)info.workspace_limit);
    if (fused) print_illegal_tiles(ctx, &p, &info);
  }
  const char *diag = clattn_context_diagnostics(ctx);
  if (diag[0]) fprintf(stderr, "warnings:\n%s", diag);
  clattn_context_destroy(ctx);
  return rc;
}
