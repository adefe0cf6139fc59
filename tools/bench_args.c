/* `clattn bench`'s options, parsed by getopt_long with strict values (args.c). */
#include "bench_args.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f, "usage: clattn bench [options]\n"
             "  --seqlen LIST      sequence lengths (512,1024,2048,4096)\n"
             "  --head-dim LIST    (64)\n"
             "  --causal off|on|both (off)\n"
             "  --batch LIST (1)  --heads LIST (8)\n"
             "  --tokens T --hidden W  batch = max(1, T/N) and heads = W/d per row, as\n"
             "                     FlashAttention's and ../shared/peers' benchmarks (16384, 2048)\n"
             "  --warmup W (2)  --repeat R (10)\n"
             "  --columns LIST     of fused,standard,host (all; host: CPUs, OpenBLAS, forward\n"
             "                     only, left out quietly where it does not apply unless named)\n"
             "  --csv | --json     machine-readable output instead of the table\n"
             "  --plot FILE.png    time and modelled traffic against N (gnuplot)\n"
             "  --config K/BQ/BKV/TPR/RM/STAGE/PAD[/VEC]  force the fused config (as clattn run)\n"
             "  --dtype f32|f16|bf16  storage of Q, K, V, O and the gradients (f32; the host\n"
             "                     column is fp32's alone)\n"
             "  --window L,R       a sliding window on every row (with --causal: R 0 or -1)\n"
             "  --softcap C        scores become C tanh(s / C) on every row\n"
             "  --alibi            ALiBi, BLOOM's slopes per head\n"
             "  --sinks            a sink logit per head (with --backward, its gradient too)\n"
             "  --nondeterministic the backward may sum dQ by atomics (faster)\n"
             "  --seqlens-kv       a padded batch: entry b of B keeps ceil(N (b + 1) / B) keys\n"
             "  --varlen           packed sequences (CLATTN_VARLEN) of those lengths, queries and\n"
             "                     keys; no standard column unless named (it has no varlen)\n"
             "                     (FLOPs and traffic count N: the lengths live on the device)\n"
             "  --kv-cache contiguous|paged  decode over a KV cache instead: --seqlen is the\n"
             "                     context, every sequence full; K/V bandwidth beside a\n"
             "                     streaming read's, the model's time, the host's cost\n"
             "  --seqlen-q R (1)  --heads-kv H (--heads)  --page-size P (16)\n"
             "  --kv-layout nhd|hnd  --cache-dtype f32|f16|bf16|i8 (--dtype's)\n"
             "  --backward         time forward + backward (FLOPs 3.5x the forward's; the host\n"
             "                     column and the traffic columns stay forward-only)\n"
             "  --bandwidth        also check the traffic model: a copy kernel's bandwidth beside\n"
             "                     the standard path's steps and the fused kernel\n"
             "  --device SPEC      like CLATTN_DEVICE\n"
             "exit codes: 0 every column ran, 1 fused and standard outputs differ by NaN,\n"
             "            2 usage error, 3 a column, the bandwidth check or the plot failed\n"
             "            (each named on stderr; the rest of the output is still written)\n");
}

enum {
  OPT_TOKENS = OPT_COMMAND,
  OPT_HIDDEN,
  OPT_WARMUP,
  OPT_REPEAT,
  OPT_COLUMNS,
  OPT_CSV,
  OPT_JSON,
  OPT_CONFIG,
  OPT_BACKWARD,
  OPT_BANDWIDTH,
  OPT_PLOT,
  OPT_ALIBI,
  OPT_SINKS,
  OPT_SEQLENS_KV,
  OPT_VARLEN,
  OPT_KV_CACHE,
  OPT_PAGE_SIZE,
  OPT_KV_LAYOUT,
  OPT_CACHE_DTYPE
};
static const struct option bench_options[] = {
    {"seqlen", required_argument, NULL, OPT_SEQLEN},
    {"head-dim", required_argument, NULL, OPT_HEAD_DIM},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"heads", required_argument, NULL, OPT_HEADS},
    {"causal", required_argument, NULL, OPT_CAUSAL},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"tokens", required_argument, NULL, OPT_TOKENS},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"columns", required_argument, NULL, OPT_COLUMNS},
    {"csv", no_argument, NULL, OPT_CSV},
    {"json", no_argument, NULL, OPT_JSON},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"backward", no_argument, NULL, OPT_BACKWARD},
    {"bandwidth", no_argument, NULL, OPT_BANDWIDTH},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"window", required_argument, NULL, OPT_WINDOW},
    {"softcap", required_argument, NULL, OPT_SOFTCAP},
    {"nondeterministic", no_argument, NULL, OPT_NONDETERMINISTIC},
    {"alibi", no_argument, NULL, OPT_ALIBI},
    {"sinks", no_argument, NULL, OPT_SINKS},
    {"seqlens-kv", no_argument, NULL, OPT_SEQLENS_KV},
    {"varlen", no_argument, NULL, OPT_VARLEN},
    {"kv-cache", required_argument, NULL, OPT_KV_CACHE},
    {"page-size", required_argument, NULL, OPT_PAGE_SIZE},
    {"kv-layout", required_argument, NULL, OPT_KV_LAYOUT},
    {"cache-dtype", required_argument, NULL, OPT_CACHE_DTYPE},
    {"seqlen-q", required_argument, NULL, OPT_SEQLEN_Q},
    {"heads-kv", required_argument, NULL, OPT_HEADS_KV},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};
static const char *const causal_names[] = {"off", "on", "both"};
static const char *const cache_kinds[] = {"contiguous", "paged"},
                         *const kv_layouts[] = {"nhd", "hnd"},
                         *const cache_types[] = {"f32", "f16", "bf16", "i8"};
static const size_t def_seq[] = {512, 1024, 2048, 4096}, def_dim[] = {64}, def_batch[] = {1},
                    def_heads[] = {8};

void bench_opts_free(bench_opts *o) {
  size_list_free(&o->seqlens), size_list_free(&o->dims);
  size_list_free(&o->batches), size_list_free(&o->heads);
}

int bench_parse(int argc, char **argv, bench_opts *o) {
  memset(o, 0, sizeof *o);
  o->causal[0] = 0, o->ncausal = 1, o->warmup = 2, o->repeat = 10;
  o->cache_dtype = -1, o->rows = 1;
  for (int c = 0; c < COLS; c++) o->want[c] = 1;
  int state = 0, id, k;
  if (!size_list_set(&o->seqlens, def_seq, 4) || !size_list_set(&o->dims, def_dim, 1) ||
      !size_list_set(&o->batches, def_batch, 1) || !size_list_set(&o->heads, def_heads, 1)) {
    fprintf(stderr, "clattn bench: out of memory\n");
    state = -1;
  }
  args a;
  args_init(&a, "bench", argc, argv, bench_options);
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
    case OPT_SEQLEN:
      ok = args_size_list(&a, 1, SIZE_MAX, &o->seqlens);
      break;
    case OPT_HEAD_DIM:
      ok = args_size_list(&a, 1, SIZE_MAX, &o->dims);
      break;
    case OPT_BATCH:
      ok = args_size_list(&a, 1, SIZE_MAX, &o->batches);
      break;
    case OPT_HEADS:
      ok = args_size_list(&a, 1, SIZE_MAX, &o->heads);
      break;
    case OPT_CAUSAL:
      if ((ok = args_choice(&a, causal_names, 3, &k)))
        o->causal[0] = k == 1, o->causal[1] = 1, o->ncausal = k == 2 ? 2 : 1;
      break;
    case OPT_TOKENS:
      ok = args_size(&a, 1, SIZE_MAX, &o->tokens);
      break;
    case OPT_HIDDEN:
      ok = args_size(&a, 1, SIZE_MAX, &o->hidden);
      break;
    case OPT_WARMUP:
    case OPT_REPEAT:
      if ((ok = args_size(&a, id == OPT_REPEAT, 10000, &n)))
        *(id == OPT_WARMUP ? &o->warmup : &o->repeat) = (int)n;
      break;
    case OPT_COLUMNS:
      ok = o->named = args_name_set(&a, bench_col_names, COLS, o->want);
      break;
    case OPT_CSV:
      o->csv = 1;
      break;
    case OPT_JSON:
      o->json = 1;
      break;
    case OPT_CONFIG:
      ok = o->force = args_config(&a, &o->forced);
      break;
    case OPT_BACKWARD:
      o->backward = 1;
      break;
    case OPT_BANDWIDTH:
      o->bandwidth = 1;
      break;
    case OPT_PLOT:
      o->plot = a.val;
      break;
    case OPT_DTYPE:
      if ((ok = args_choice(&a, args_dtypes, 3, &k))) o->dtype = (clattn_dtype)k;
      break;
    case OPT_DEVICE:
      setenv("CLATTN_DEVICE", a.val, 1);
      break;
    case OPT_WINDOW:
    case OPT_SOFTCAP:
    case OPT_NONDETERMINISTIC:
      ok = args_problem(&a, id, &o->variant);
      break;
    case OPT_ALIBI:
      o->alibi = 1;
      break;
    case OPT_SINKS:
      o->sinks = 1;
      break;
    case OPT_SEQLENS_KV:
      o->padded = 1;
      break;
    case OPT_VARLEN:
      o->varlen = 1;
      break;
    case OPT_KV_CACHE:
      if ((ok = args_choice(&a, cache_kinds, 2, &k))) o->kv_cache = 1 + k;
      break;
    case OPT_PAGE_SIZE:
      ok = args_size(&a, 1, 256, &o->page_size);
      break;
    case OPT_KV_LAYOUT:
      ok = args_choice(&a, kv_layouts, 2, &o->hnd);
      break;
    case OPT_CACHE_DTYPE:
      ok = args_choice(&a, cache_types, 4, &o->cache_dtype);
      break;
    case OPT_SEQLEN_Q:
      ok = args_size(&a, 1, INT32_MAX, &o->rows);
      break;
    case OPT_HEADS_KV:
      ok = args_size(&a, 1, SIZE_MAX, &o->heads_kv);
      break;
    default:
      ok = 0;
      break;
    }
    if (!ok) state = -1;
  }
  if (!state && (o->tokens != 0) != (o->hidden != 0)) {
    fprintf(stderr, "clattn bench: --tokens and --hidden go together\n");
    state = -1;
  }
  if (!state && o->kv_cache &&
      (o->padded || o->varlen || o->backward || o->ncausal > 1 || o->alibi || o->sinks ||
       o->tokens || o->force)) {
    fprintf(stderr, "clattn bench: --kv-cache takes none of --seqlens-kv, --varlen, --backward, "
                    "--causal both, --alibi, --sinks, --tokens, --config\n");
    state = -1;
  }
  if (!state && o->kv_cache == 1 && o->page_size) {
    fprintf(stderr, "clattn bench: --page-size goes with --kv-cache paged\n");
    state = -1;
  }
  if (o->kv_cache == 2 && !o->page_size) o->page_size = 16;
  if (!state && !o->kv_cache &&
      (o->page_size || o->hnd || o->cache_dtype >= 0 || o->rows != 1 || o->heads_kv)) {
    fprintf(stderr, "clattn bench: --page-size, --kv-layout, --cache-dtype, --seqlen-q and "
                    "--heads-kv go with --kv-cache\n");
    state = -1;
  }
  if (!state && o->padded && o->varlen) {
    fprintf(stderr, "clattn bench: --seqlens-kv and --varlen are two layouts: pick one\n");
    state = -1;
  }
  return state;
}
