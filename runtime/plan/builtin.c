/* Built-in defaults: tile configs measured by the project on devices it has run on, shipped
 * with the library and used when the tuning database has nothing for the device. Matched by
 * platform name and device type; each group names how it was measured (docs/BENCHMARKS.md).
 * Only configs that are legal on the device in hand are used (planner.c checks). */
#include "plan.h"

#include <string.h>

typedef struct {
  const char *platform; /* substring of the platform name */
  const char *device;   /* substring of the device name ("" for any), or several split by '|' */
  cl_device_type type;  /* the device must be of this type */
  unsigned pass, dtype, d, dv, causal, bucket; /* the class; dtype a clattn_dtype */
  clattn_config cfg; /* kernel, block_q, block_kv, threads_per_row, stage_kv, pad, rows_per_item,
                        vector_width: read as the API reads a config */
} builtin;

#define POCL "Portable Computing Language"
#define CPU CL_DEVICE_TYPE_CPU
#define GPU CL_DEVICE_TYPE_GPU
#define FWD CLATTN__FORWARD
#define BWD CLATTN__BACKWARD
#define F32 CLATTN_F32
#define F16 CLATTN_F16
#define BF16 CLATTN_BF16

static const builtin table[] = {
    /* PoCL 3.1 on a 2-core AMD EPYC (x86-64, AVX-512): `clattn tune --budget 120` over both
     * kernel variants, 2026-12-02, docs/BENCHMARKS.md. */
    {POCL, "", CPU, FWD, F32, 64, 64, 0, 1024, {"forward_tiles", 128, 32, 1, 1, 0, 1, 1}},
    {POCL, "", CPU, FWD, F32, 64, 64, 1, 1024, {"forward_tiles", 128, 64, 1, 1, 0, 1, 1}},
    {POCL, "", CPU, FWD, F32, 128, 128, 0, 1024, {"forward_tiles", 64, 64, 2, 1, 1, 1, 1}},
    {POCL, "", CPU, FWD, F32, 128, 128, 1, 1024, {"forward_tiles", 64, 128, 2, 1, 0, 1, 1}},
    /* Half storage, the same machine, 2026-12-04, commit e7e7573, otherwise idle: `clattn tune
     * --dtype T --head-dims 64,128 --causal-list 0,1 --seqlens 1024 --budget 150`: forward_tiles
     * 128-row blocks throughout; the margins over the runner-up are 1-7% (fp16 1.03-1.07x the
     * heuristic, bf16 1.0x without a mask and 1.21-1.22x causal). "Half storage on PoCL: tuned
     * built-ins", docs/BENCHMARKS.md. */
    // clang-format off
    {POCL, "", CPU, FWD, F16, 64, 64, 0, 1024, {"forward_tiles", 128, 32, 1, 1, 0, 1, 4}},
    {POCL, "", CPU, FWD, F16, 64, 64, 1, 1024, {"forward_tiles", 128, 64, 1, 1, 0, 1, 1}},
    {POCL, "", CPU, FWD, F16, 128, 128, 0, 1024, {"forward_tiles", 128, 32, 1, 1, 0, 1, 4}},
    {POCL, "", CPU, FWD, F16, 128, 128, 1, 1024, {"forward_tiles", 128, 64, 1, 1, 0, 1, 1}},
    {POCL, "", CPU, FWD, BF16, 64, 64, 0, 1024, {"forward_tiles", 128, 32, 1, 1, 0, 1, 1}},
    {POCL, "", CPU, FWD, BF16, 64, 64, 1, 1024, {"forward_tiles", 128, 64, 1, 1, 0, 1, 4}},
    {POCL, "", CPU, FWD, BF16, 128, 128, 0, 1024, {"forward_tiles", 128, 32, 1, 1, 0, 1, 1}},
    {POCL, "", CPU, FWD, BF16, 128, 128, 1, 1024, {"forward_tiles", 128, 32, 1, 1, 0, 2, 4}},
    // clang-format on
    /* NVIDIA H200, driver 580.159.04 (NVIDIA CUDA OpenCL 3.0): forward_mma (tensor cores,
     * 3xTF32) with 128-row blocks, padded rows, 16-byte loads and K/V tiles stored split into
     * TF32 parts: 32-key tiles at d = 64, 16-key tiles at d = 128 (32 do not fit split; 4.5%
     * faster than 32-key fp32 tiles). Against PyTorch's fp32 SDPA over N = 512..16384 in one
     * device call (`tools/gpu-bench.sh`, commit 74ea817): 1.11-1.24x at d = 64, 0.76-0.79x at
     * d = 128. DESIGN.md's shapes all passed there with these (2026-12-03, docs/BENCHMARKS.md).
     * Head dims above 128 spill registers in it and keep the heuristic's portable configs. */
    {"NVIDIA CUDA",
     "H200",
     GPU,
     FWD,
     F32,
     64,
     64,
     0,
     4096,
     {"forward_mma", 128, 32, 1, 2, 1, 1, 4}},
    {"NVIDIA CUDA",
     "H200",
     GPU,
     FWD,
     F32,
     64,
     64,
     1,
     4096,
     {"forward_mma", 128, 32, 1, 2, 1, 1, 4}},
    {"NVIDIA CUDA",
     "H200",
     GPU,
     FWD,
     F32,
     128,
     128,
     0,
     4096,
     {"forward_mma", 128, 16, 1, 2, 1, 1, 4}},
    {"NVIDIA CUDA",
     "H200",
     GPU,
     FWD,
     F32,
     128,
     128,
     1,
     4096,
     {"forward_mma", 128, 16, 1, 2, 1, 1, 4}},
    /* The H100 (driver 580.159.04): forward_mma in one stage, 128/32 at d = 64 and 128/16 at
     * d = 128, 3.1-4.7x the heuristic's forward_rows (`clattn run --dtype f32`, N = 4096, full
     * and causal; "Stop 40", docs/BENCHMARKS.md). The H200's split tiles (stage 2) are not yet
     * timed on it. */
    // clang-format off
    {"NVIDIA CUDA", "H100", GPU, FWD, F32, 64, 64, 0, 4096, {"forward_mma", 128, 32, 1, 1, 1, 1, 4}},
    {"NVIDIA CUDA", "H100", GPU, FWD, F32, 64, 64, 1, 4096, {"forward_mma", 128, 32, 1, 1, 1, 1, 4}},
    {"NVIDIA CUDA", "H100", GPU, FWD, F32, 128, 128, 0, 4096, {"forward_mma", 128, 16, 1, 1, 1, 1, 4}},
    {"NVIDIA CUDA", "H100", GPU, FWD, F32, 128, 128, 1, 4096, {"forward_mma", 128, 16, 1, 1, 1, 1, 4}},
    // clang-format on
    /* The backward on the H200: backward_mma with 128-query and 128-key blocks (eight warps per
     * work-group), the fastest of 32/32 to 128/128 at d = 64 and 128, N = 4096, causal and not:
     * 5-22% faster than the blocks of the time ("backward_mma's work-groups on the H200",
     * docs/BENCHMARKS.md, commit 424105d). The heuristic picks the same blocks there; the entry
     * keeps them if the heuristic's ranking changes. */
    {"NVIDIA CUDA",
     "H200",
     GPU,
     BWD,
     F32,
     64,
     64,
     0,
     4096,
     {"backward_mma", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA",
     "H200",
     GPU,
     BWD,
     F32,
     64,
     64,
     1,
     4096,
     {"backward_mma", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA",
     "H200",
     GPU,
     BWD,
     F32,
     128,
     128,
     0,
     4096,
     {"backward_mma", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA",
     "H200",
     GPU,
     BWD,
     F32,
     128,
     128,
     1,
     4096,
     {"backward_mma", 128, 128, 1, 1, 0, 1, 1}},
    /* Half storage on the H100 and H200 (driver 580.159.04). Forward: forward_mma_half with one
     * stage of K and V in FlashAttention-2's order (stage_kv 3: V copied during S, K during P V),
     * two m16 tiles a warp (rows_per_item 2), 128 rows (four warps) by 128 keys at d = 64 and by
     * 32 at d = 128: on an H100 at 59a84f1 ("Stop 35", docs/BENCHMARKS.md), 1.04-1.08x the two
     * stages of 128/64 at d = 64 and 1.09-1.14x those of 128/32 at d = 128 (254 registers and
     * no spills where two stages spilled 56-64 bytes), the fastest of six tiles per head dim;
     * before them two stages were the fastest of seven tiles at d = 64 and four at d = 128
     * ("Stop 32"). fp16 timed, bf16 the same kernels. Not yet timed on the H200 itself.
     * (The rows before them read stage and pad in each other's places: one stage, not two.)
     * At d = 128 since stop 41: 64 keys with Q in local memory (stage_kv 4, padded rows, 69 KiB:
     * FlashAttention-2's own tiles, legal since NVIDIA's OpenCL was found to run 226 KiB of
     * static local memory a work-group, 72bce91), on an H100 at 493bb50 ("Stop 41") 1.08x the
     * 32-key stage 3 without a mask and 1.13x causal, the fastest of five tiles.
     * Backward:
     * backward_mma_half 128/128 at d = 64 (tuned, 9c39a91: 12x and 10x backward_rows, the
     * heuristic of the time) and at d = 128 (timed, not tuned: the budget ran out on
     * backward_rows' 0.9 s; forward + backward 27.6 ms against 914 ms at N = 4096 in
     * `tools/gpu-half.sh time-bmma`). "Half storage on the H200, third slice",
     * docs/BENCHMARKS.md. */
    // clang-format off
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, F16, 64, 64, 0, 4096, {"forward_mma_half", 128, 128, 1, 3, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, F16, 64, 64, 1, 4096, {"forward_mma_half", 128, 128, 1, 3, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, F16, 128, 128, 0, 4096, {"forward_mma_half", 128, 64, 1, 4, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, F16, 128, 128, 1, 4096, {"forward_mma_half", 128, 64, 1, 4, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, BF16, 64, 64, 0, 4096, {"forward_mma_half", 128, 128, 1, 3, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, BF16, 64, 64, 1, 4096, {"forward_mma_half", 128, 128, 1, 3, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, BF16, 128, 128, 0, 4096, {"forward_mma_half", 128, 64, 1, 4, 1, 2, 1}},
    {"NVIDIA CUDA", "H100|H200", GPU, FWD, BF16, 128, 128, 1, 4096, {"forward_mma_half", 128, 64, 1, 4, 1, 2, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, F16, 64, 64, 0, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, F16, 64, 64, 1, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, F16, 128, 128, 0, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, F16, 128, 128, 1, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, BF16, 64, 64, 0, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, BF16, 64, 64, 1, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, BF16, 128, 128, 0, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    {"NVIDIA CUDA", "H200", GPU, BWD, BF16, 128, 128, 1, 4096, {"backward_mma_half", 128, 128, 1, 1, 0, 1, 1}},
    // clang-format on
    {0}, /* end */
};

/* Decode's built-ins (the family of KV cache classes): each for the cache kinds whose
 * CLATTN__VAR_CACHE bits it names (a class and an entry of other kinds never share a config, as
 * in the tuning database). */
typedef struct {
  unsigned cache;
  builtin b;
} cache_builtin;

static const cache_builtin cache_table[] = {
    {0, {0}}, /* end */
};

/* An empty want is the PoCL rows'. Compared in place, so no name is too long to match. */
int clattn__name_matches(const char *name, const char *want) {
  for (;;) {
    const char *bar = strchr(want, '|');
    const size_t n = bar ? (size_t)(bar - want) : strlen(want);
    if (!n) return 1;
    for (const char *at = name; *at; at++)
      if (!strncmp(at, want, n)) return 1;
    if (!bar) return 0;
    want = bar + 1;
  }
}

/* Whether b is for cls's device and class (its buckets aside). */
static int matches(const clattn__device *dev, const clattn__class *cls, const builtin *b) {
  return strstr(dev->platform_name, b->platform) && clattn__name_matches(dev->name, b->device) &&
         (dev->type & b->type) && b->pass == cls->pass && b->dtype == cls->dtype &&
         b->d == cls->d && b->dv == cls->dv && b->causal == cls->causal;
}

/* The better built-in for cls of best and b, both matching it: the class's own bucket, else the
 * largest bucket measured at or below it, else any. */
static const builtin *better(const builtin *best, const builtin *b, const clattn__class *cls) {
  if (!best || b->bucket == cls->bucket ||
      (best->bucket != cls->bucket && b->bucket <= cls->bucket && b->bucket > best->bucket))
    return b;
  return best;
}

int clattn__builtin_find(const clattn__device *dev, const clattn__class *cls, clattn__config *out) {
  const builtin *best = NULL;
  unsigned cache = cls->variants & CLATTN__VAR_CACHE;
  if (!cache) {
    for (const builtin *b = table; b->platform; b++)
      if (matches(dev, cls, b)) best = better(best, b, cls);
  } else {
    for (const cache_builtin *c = cache_table; c->b.platform; c++)
      if (c->cache == cache && matches(dev, cls, &c->b)) best = better(best, &c->b, cls);
  }
  char why[200];
  return best && clattn__config_from_public(&best->cfg, out, why, sizeof why);
}
