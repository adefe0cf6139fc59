/* `clattn bench --kv-cache`: decode over a KV cache (issue 18) for each context length, batch
 * and head count of the sweep, every sequence full, timed as `clattn run --kv-cache --no-check`
 * times it (tools/check_kvcache.c: the cache filled on the device, copies rotated past the L2),
 * with the K/V bandwidth against a read-only streaming kernel's measured once in the same run,
 * the model's time (bytes over that bandwidth) and the host's cost per call. */
#include "bench_args.h"
#include "check.h"
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>

int bench_kv(clattn_context *ctx, const bench_opts *o) {
  static const char *const kinds[] = {"f32", "f16", "bf16", "i8"};
  double bytes = 0.0, stream = bench_read_bandwidth(ctx, &bytes);
  if (stream <= 0) return CLI_ERROR;
  printf("device: %s\n", clattn_context_device_summary(ctx));
  printf("cache: %s%s, %s; %zu query row%s per sequence; every sequence full\n",
         o->page_size ? "paged" : "contiguous", o->page_size ? (o->hnd ? " (HND)" : " (NHD)") : "",
         kinds[(o->cache_dtype < 0 ? (int)o->dtype : o->cache_dtype) % 4], o->rows,
         o->rows == 1 ? "" : "s");
  printf("streaming read: %.1f GB/s over %.0f MB (median of 15, OpenCL events); time: median of "
         "%d after %d\n\n",
         stream, bytes / 1e6, o->repeat, o->warmup);
  printf("%8s %4s %4s %4s %4s | %10s %7s | %10s %9s %7s | %10s %7s | %8s | %s\n", "context", "d",
         "B", "H", "Hkv", "ms", "spread", "K/V MB", "GB/s", "%read", "model ms", "ratio", "host us",
         "plan (BQ/BKV/TPR), key ranges");
  int rc = CLI_OK;
  for (size_t di = 0; di < o->dims.n; di++)
    for (size_t bi = 0; bi < o->batches.n; bi++)
      for (size_t hi = 0; hi < o->heads.n; hi++)
        for (size_t si = 0; si < o->seqlens.n; si++) {
          check_spec sp = {0};
          clattn_problem *p = &sp.problem;
          *p = o->variant;
          p->batch = o->batches.v[bi], p->heads_q = o->heads.v[hi];
          p->heads_kv = o->heads_kv ? o->heads_kv : p->heads_q;
          p->seqlen_q = o->rows, p->seqlen_kv = o->seqlens.v[si];
          p->head_dim = o->dims.v[di], p->dtype = o->dtype;
          p->flags |= o->causal[0] ? CLATTN_CAUSAL : 0;
          sp.skip_check = 1, sp.warmup = o->warmup, sp.repeat = o->repeat;
          size_t *full = malloc((p->batch ? p->batch : 1) * sizeof *full);
          for (size_t b = 0; full && b < p->batch; b++) full[b] = p->seqlen_kv;
          sp.lengths = full;
          check_kv kv = {0};
          kv.dtype = o->cache_dtype < 0 ? o->dtype : (clattn_dtype)o->cache_dtype;
          kv.page_size = o->page_size, kv.hnd = o->hnd;
          check_result r;
          double unused;
          clattn_status st =
              full ? check_kvcache_run(ctx, &sp, &kv, &r, &unused) : CLATTN_ERR_OUT_OF_RESOURCES;
          free(full);
          printf("%8zu %4zu %4zu %4zu %4zu |", p->seqlen_kv, p->head_dim, p->batch, p->heads_q,
                 p->heads_kv);
          if (st != CLATTN_OK) {
            printf(" failed: %s\n", clattn_last_error(ctx));
            rc = CLI_ERROR;
            continue;
          }
          double gbps = kv.bytes_read / (r.median_ms * 1e6), model = kv.bytes_read / (stream * 1e6);
          printf(" %10.4f %6.1f%% | %10.4g %9.1f %6.0f%% | %10.4f %7.2f | %8.1f | %s %u/%u/%u "
                 "vec %u, %u range%s\n",
                 r.median_ms, 50.0 * (r.max_ms - r.min_ms) / r.median_ms, kv.bytes_read / 1e6, gbps,
                 100.0 * gbps / stream, model, r.median_ms / model, kv.host_us, kv.plan.kernel,
                 kv.plan.block_q, kv.plan.block_kv, kv.plan.threads_per_row, kv.plan.vector_width,
                 kv.plan.kv_splits, kv.plan.kv_splits == 1 ? "" : "s");
        }
  return rc;
}
