/* `clattn bench`'s options. */
#ifndef CLATTN_BENCH_ARGS_H
#define CLATTN_BENCH_ARGS_H

#include "args.h"
#include "bench.h"

typedef struct bench_opts {
  size_list seqlens, dims, batches, heads;
  int causal[2], ncausal;
  size_t tokens, hidden; /* when set: batch = max(1, tokens / N), heads = hidden / d */
  int warmup, repeat;
  int want[COLS];
  int named; /* --columns was given: a named column that cannot run here is a failure */
  int csv, json, bandwidth, backward, force;
  clattn_config forced;
  clattn_dtype dtype;     /* --dtype: the storage of every row */
  clattn_problem variant; /* --window, --softcap: flags and fields added to every row */
  int alibi, sinks;       /* --alibi, --sinks: the call's arrays (tools/check.c's values) */
  int padded, varlen;     /* --seqlens-kv, --varlen: bench_lengths's lengths per batch entry */
  /* --kv-cache (bench_kv.c): decode over a cache; --seqlen is its context, --seqlen-q the
   * query rows per sequence, --heads-kv the KV heads (0: --heads). */
  int kv_cache, hnd, cache_dtype; /* kv_cache 1 contiguous, 2 paged; cache_dtype -1: --dtype's */
  size_t page_size, rows, heads_kv;
  const char *plot;
} bench_opts;

/* 0: run; 1: --help was printed; -1: a usage error (a message was printed). Either way
 * bench_opts_free(o) releases the lists. */
int bench_parse(int argc, char **argv, bench_opts *o);
/* `clattn bench --kv-cache`'s sweep and table (bench_kv.c); a CLI_* status. */
struct clattn_context;
int bench_kv(struct clattn_context *ctx, const bench_opts *o);
void bench_opts_free(bench_opts *o);

#endif
