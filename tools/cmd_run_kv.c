/* `clattn run --kv-cache`: a KV cache filled by clattn_kv_append, a forward over it checked
 * against the reference on its contents (tools/check_kvcache.c), then timed, with the K/V
 * bandwidth beside a read-only streaming kernel's measured in the same run, and the traffic
 * model's time (bytes over that bandwidth) beside the measured one. */
#include "bench.h"
#include "check.h"
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const kv_types[] = {"f32", "f16", "bf16", "i8"};

int cmd_run_kv(clattn_context *ctx, check_spec *sp, check_kv *kv) {
  const clattn_problem *p = &sp->problem;
  size_t *full = NULL;
  if (!sp->lengths) { /* every sequence full unless --lengths says otherwise */
    full = malloc((p->batch ? p->batch : 1) * sizeof *full);
    if (!full) return CLI_ERROR;
    for (size_t b = 0; b < p->batch; b++) full[b] = p->seqlen_kv;
    sp->lengths = full;
  }
  printf("cache:   %s%s, %s, capacity %zu per sequence, lengths %zu",
         kv->page_size ? "paged" : "contiguous",
         kv->page_size ? (kv->hnd ? " (HND)" : " (NHD)") : "", kv_types[kv->dtype % 4],
         p->seqlen_kv, p->batch ? sp->lengths[0] : 0);
  for (size_t b = 1; b < p->batch && b < 8; b++) printf(",%zu", sp->lengths[b]);
  printf("%s", p->batch > 8 ? ",...\n" : "\n");
  if (kv->page_size) printf("pages:   %zu tokens each\n", kv->page_size);
  check_result r;
  double append_err = 0.0;
  clattn_status st = check_kvcache_run(ctx, sp, kv, &r, &append_err);
  free(full);
  sp->lengths = NULL;
  if (st != CLATTN_OK) {
    fprintf(stderr, "clattn: %s\n  %s\n", clattn_status_string(st), clattn_last_error(ctx));
    return CLI_ERROR;
  }
  int pass = r.pass && append_err == 0.0;
  const clattn_plan_info *pl = &kv->plan;
  printf("plan:    %s BQ=%u BKV=%u TPR=%u RM=%u stage_kv=%u pad=%u vec=%u, %zu work-items, "
         "local memory %.1f of %.1f KiB (%s); %u key range%s\n",
         pl->kernel, pl->block_q, pl->block_kv, pl->threads_per_row, pl->rows_per_item,
         pl->stage_kv, pl->pad, pl->vector_width, pl->work_group_size, pl->local_mem_bytes / 1024.0,
         pl->local_mem_available / 1024.0, pl->origin, pl->kv_splits,
         pl->kv_splits == 1 ? "" : "s");
  if (!sp->skip_check && kv->dtype == CLATTN_I8)
    printf("int8:    O against the unquantised cache's exact result: max |diff| / max |O| = "
           "%.3g, mean |diff| / mean |O| = %.3g\n",
           kv->q8_max_rel, kv->q8_mean_rel);
  if (!sp->skip_check) {
    printf("check:   appends %s; max|o - ref| = %.3g (tolerance %.3g), max|lse - ref| = %.3g "
           "(%.3g) -> %s\n",
           append_err == 0.0 ? "exact" : "WRONG", r.err_o, r.tol_o, r.err_lse, r.tol_lse,
           pass ? "PASS" : "FAIL");
  }
  if (sp->repeat > 0) {
    double gbps = r.median_ms > 0 ? kv->bytes_read / (r.median_ms * 1e6) : 0.0, bytes = 0.0;
    printf("time:    median %.4f ms (min %.4f, max %.4f; %d runs after %d warm-up, %s), "
           "rotating %d cop%s of the cache\n",
           r.median_ms, r.min_ms, r.max_ms, sp->repeat, sp->warmup,
           r.timed_by_events ? "OpenCL events" : "wall clock", kv->copies,
           kv->copies == 1 ? "y" : "ies");
    printf("host:    %.1f us per call (median wall clock around clattn_forward_ex on an idle "
           "queue, not waited for)\n",
           kv->host_us);
    double stream = bench_read_bandwidth(ctx, &bytes);
    printf("traffic: %.4g MB of K/V read: %.1f GB/s", kv->bytes_read / 1e6, gbps);
    if (stream > 0)
      printf(" = %.0f%% of a streaming read's %.1f GB/s (%.0f MB, same run); the model's time "
             "%.4f ms (measured / model %.2f)\n",
             100.0 * gbps / stream, stream, bytes / 1e6, kv->bytes_read / (stream * 1e6),
             r.median_ms / (kv->bytes_read / (stream * 1e6)));
    else
      printf("; the streaming read failed\n");
    if (stream <= 0) return CLI_ERROR;
    /* A decode step's append: memory-bound, so against a copy kernel (bytes read + written). */
    double cbytes = 0.0, copy = bench_copy_bandwidth(ctx, &cbytes);
    double agbps = kv->append_us > 0 ? kv->append_bytes / (kv->append_us * 1e3) : 0.0;
    printf("append:  median %.2f us a call of %zu new row%s a sequence (%s): %.4g MB "
           "moved, %.1f GB/s",
           kv->append_us, sp->problem.seqlen_q, sp->problem.seqlen_q == 1 ? "" : "s",
           r.timed_by_events ? "OpenCL events" : "wall clock", kv->append_bytes / 1e6, agbps);
    if (copy > 0)
      printf(" = %.1f%% of a copy's %.1f GB/s (%.0f MB, same run)\n", 100.0 * agbps / copy, copy,
             cbytes / 1e6);
    else
      printf("; the copy failed\n");
    if (copy <= 0) return CLI_ERROR;
  }
  return pass ? CLI_OK : CLI_CHECK_FAILED;
}
