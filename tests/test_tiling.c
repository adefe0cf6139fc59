/* The local-memory model: byte formula, legality, the heuristic's choice on synthetic devices
 * (a 48 KiB GPU like the H200, a 512 KiB device), and the built kernel's use of local memory. */
#include "common.h"
#include "families.h"
#include "ops.h"
#include "plan.h"
#include "tune.h"

#include <stdio.h>
#include <string.h>

static clattn__device gpu(cl_ulong local_kib) {
  clattn__device d;
  memset(&d, 0, sizeof d);
  d.type = CL_DEVICE_TYPE_GPU;
  d.local_mem = local_kib * 1024;
  d.max_work_group = 1024;
  d.max_item_size[0] = 1024;
  d.compute_units = 132;
  return d;
}

Test(tiling, local_bytes_formula) {
  clattn__class k = {64, 32, 0};
  clattn__config c = {16, 32, 4, 1, 1};
  /* Qs + Ss: (16+1)*(64+32) floats; Ks: 32*(64+1); Vs: 32*(32+1). */
  size_t want = ((16 + 1) * (64 + 32) + 32 * 65 + 32 * 33) * 4;
  cr_assert_eq(clattn__config_local_bytes(NULL, &k, &c), want);
  c.stage = 0; /* K/V read from global memory: no Ks, Vs */
  cr_assert_eq(clattn__config_local_bytes(NULL, &k, &c), (size_t)(17 * 96 * 4));
  cr_assert_eq(clattn__config_work_group(&c), (size_t)64);
}

Test(tiling, legality_names_what_does_not_fit) {
  clattn__device d = gpu(48);
  clattn__class k = {128, 128, 0};
  clattn__config big = {128, 128, 1, 1, 0};
  char why[160];
  cr_assert_not(clattn__config_legal(&d, &k, &big, why, sizeof why));
  cr_assert(strstr(why, "BQ=128") && strstr(why, "device has 48.0 KiB"), "why: %s", why);
  clattn__config wide = {64, 8, 32, 0, 0}; /* 2048 work-items */
  cr_assert_not(clattn__config_legal(&d, &k, &wide, why, sizeof why));
  cr_assert(strstr(why, "work-group"), "why: %s", why);
}

Test(tiling, ranked_configs_are_all_legal) {
  unsigned dims[] = {1, 59, 64, 128, 256};
  cl_ulong kibs[] = {16, 48, 512};
  for (size_t a = 0; a < 5; a++)
    for (size_t b = 0; b < 3; b++) {
      clattn__device d = gpu(kibs[b]);
      clattn__class k = {dims[a], dims[a], 0};
      clattn__config out[400];
      size_t n = clattn__configs_ranked(&d, &k, out, 400);
      cr_assert_gt(n, 0, "no config for d=%u on %llu KiB", dims[a], (unsigned long long)kibs[b]);
      for (size_t i = 0; i < n; i++) {
        cr_assert_leq(clattn__config_local_bytes(NULL, &k, &out[i]), d.local_mem);
        cr_assert_leq(clattn__config_work_group(&out[i]), d.max_work_group);
      }
    }
}

/* The point of the model: a device with less local memory gets smaller tiles. */
Test(tiling, h200_48k_and_512k_pick_different_tiles) {
  clattn__device small = gpu(48), large = gpu(512);
  unsigned dims[] = {64, 128, 256};
  for (size_t i = 0; i < 3; i++) {
    clattn__class k = {dims[i], dims[i], 0};
    clattn__config a, b;
    cr_assert_eq(clattn__configs_ranked(&small, &k, &a, 1), 1);
    cr_assert_eq(clattn__configs_ranked(&large, &k, &b, 1), 1);
    size_t ba = clattn__config_local_bytes(NULL, &k, &a),
           bb = clattn__config_local_bytes(NULL, &k, &b);
    cr_log_info("d=%u: 48 KiB -> BQ=%u BKV=%u TPR=%u (%zu B); 512 KiB -> BQ=%u BKV=%u TPR=%u "
                "(%zu B)",
                dims[i], a.bq, a.bkv, a.tpr, ba, b.bq, b.bkv, b.tpr, bb);
    cr_assert_leq(ba, (size_t)48 * 1024);
    cr_assert(a.bq != b.bq || a.bkv != b.bkv, "d=%u: same tiles on 48 KiB and 512 KiB", dims[i]);
    cr_assert_lt(ba, bb, "the 512 KiB device should use more local memory");
  }
}

Test(tiling, gpu_heuristic_stages_kv_and_limits_accumulators) {
  clattn__device d = gpu(48);
  clattn__class k = {128, 128, 0};
  clattn__config c;
  cr_assert_eq(clattn__configs_ranked(&d, &k, &c, 1), 1);
  cr_assert_eq(c.stage, 1, "GPUs have real local memory: stage K/V");
  cr_assert_leq((k.dv + c.tpr - 1) / c.tpr, 16, "at most 16 accumulators per work-item");
}

Test(tiling, tiny_local_memory_still_has_a_config) {
  clattn__device d = gpu(4); /* 4 KiB: only unstaged, small tiles fit */
  clattn__class k = {256, 256, 0};
  clattn__config c;
  cr_assert_eq(clattn__configs_ranked(&d, &k, &c, 1), 1);
  cr_assert_leq(clattn__config_local_bytes(NULL, &k, &c), (size_t)4096);
  cr_assert_eq(c.stage, 0);
}

/* On the real test device: the built kernel's local memory agrees with the model. */
Test(tiling, built_kernel_within_model_and_device) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 64, p.head_dim = 96;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_leq(info.local_mem_bytes, info.local_mem_available);
  cr_assert_gt(info.local_mem_bytes, 0);
  cr_assert_str_eq(info.origin, "heuristic");
  cr_assert(strstr(info.reason, "KiB local memory"), "reason: %s", info.reason);
  cr_assert_eq(info.work_group_size, (size_t)info.block_q * info.threads_per_row);
  double flops = 4.0 * 64 * 64 * 96;
  cr_assert_float_eq(info.flops, flops, 1e-6 * flops);
  p.flags = CLATTN_CAUSAL; /* 64x64 causal: 64*65/2 visible pairs */
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_float_eq(info.flops, 2.0 * 64 * 65 / 2 * 192, 1e-3);
  clattn_context_destroy(ctx);
}

/* When the built kernel needs more local memory than the model says (here an edited kernel
 * that hogs all of it when BQ >= 64), the planner steps down the ranked list to a config that
 * fits, says so, and computes the right result. */
Test(tiling, steps_down_when_the_built_kernel_does_not_fit) {
  clattn_context *probe = test_context(NULL);
  cl_ulong local = 0;
  clGetDeviceInfo(clattn_context_device(probe), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local,
                  NULL);
  clattn_context_destroy(probe);
  /* Both kernels end their __local declarations with a line containing "__local float"; the
   * hog goes right after the first, which is enough: it is a declaration block. */
  char dir[64], hog[256];
  snprintf(hog, sizeof hog,
           "#if BQ >= 64\n  __local volatile float hog[%llu];\n  hog[get_local_id(0)] = 0.0f;\n"
           "#endif\n",
           (unsigned long long)(local / 4));
  test_kernel_dir(dir, sizeof dir, "const uint lid = get_local_id(0);", hog, 0);
  clattn_context *ctx = test_context(dir);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = 70, p.seqlen_kv = 90, p.head_dim = 32;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_log_info("plan after step-down: BQ=%u BKV=%u (%s)", info.block_q, info.block_kv, info.reason);
  cr_assert_lt(info.block_q, 64, "a config with BQ >= 64 cannot fit");
  cr_assert(strstr(info.reason, "stepped down"), "reason: %s", info.reason);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
  test_kernel_dir_remove(dir);
}

/* The tensor-core variant is legal only where the device has them, and says why elsewhere. */
Test(tiling, mma_needs_tensor_cores) {
  clattn__device dev = {0};
  dev.local_mem = 48 * 1024, dev.max_work_group = 1024, dev.max_item_size[0] = 1024;
  clattn__class k = {128, 128, 0, 4096};
  clattn__config c = {64, 32, 1, 1, 1, 2, 1, 1};
  char why[200];
  cr_assert_not(clattn__config_legal(&dev, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "compute capability 8.0"), "%s", why);
  dev.tensor_cores = 1;
  cr_assert(clattn__config_legal(&dev, &k, &c, why, sizeof why), "%s", why);
  /* Ks: 32 keys x (128 + 16) floats; Vs: 32 x (8 x (16 + 4) + 4), cl/forward_mma.cl's pads. */
  cr_assert_eq(clattn__config_local_bytes(NULL, &k, &c), 32 * (144 + 164) * 4);
  cr_assert_eq(clattn__config_work_group(&c), 128);
  c.bq = 24;
  cr_assert_not(clattn__config_legal(&dev, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "multiple of 16"), "%s", why);
  /* With tensor cores the variant is in the ranking (after the portable ones, until measured
   * there); odd head dims pad to 16 (K) and 8 (V). */
  clattn__class odd = {59, 59, 1, 1024};
  static clattn__config all[8192];
  size_t n = clattn__configs_ranked(&dev, &odd, all, 8192);
  cr_assert_neq(all[0].kernel, 2);
  size_t i = 0;
  while (i < n && all[i].kernel != 2) i++;
  cr_assert_lt(i, n, "forward_mma is not in the ranking");
  cr_assert_eq(all[i].stage, 2, "tiles stored split rank first where they fit");
  cr_assert_eq(clattn__config_local_bytes(NULL, &odd, &all[i]),
               (size_t)all[i].bkv * (all[i].pad ? 80 + 100 : 64 + 64) * 4 * 2);
  /* Split, K and V take twice the local memory: 32-key tiles at d = 128 no longer fit. */
  c.bq = 64, c.stage = 2;
  cr_assert_eq(clattn__config_local_bytes(NULL, &k, &c), 2 * 32 * (144 + 164) * 4);
  cr_assert_not(clattn__config_legal(&dev, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "local memory"), "%s", why);
  c.bkv = 16;
  cr_assert(clattn__config_legal(&dev, &k, &c, why, sizeof why), "%s", why);
  cr_assert_eq(clattn__config_work_group(&c), 128);
  /* A warp per 16 rows, no other way: refused, never launched with a wrong work-group. */
  c.tpr = 2;
  cr_assert_not(clattn__config_legal(&dev, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "threads_per_row 2"), "%s", why);
}

/* A problem too small to fill the device's compute units gets finer query blocks of the same
 * config (PoCL here has 2): results stay right, and explain says why. */
Test(tiling, small_grids_get_finer_query_blocks) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 100, p.head_dim = 16;
  clattn_config big = {"forward_tiles", 128, 32, 1, 1, 0, 1, 1};
  clattn_plan_info info;
  /* Without an override: the heuristic's or built-in block of 128 rows gives 1 work-group. */
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  unsigned units = 0;
  clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                  NULL);
  if (units > 1 && info.block_q >= 100)
    cr_assert_fail("block_q %u leaves units idle", info.block_q);
  if (units > 1) cr_assert(strstr(info.reason, "fill"), "%s", info.reason);
  test_forward_shape(&p, 0, 0, 1, NULL);
  /* Enough heads to fill the device: the block stays. */
  p.heads_q = 4 * units;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_null(strstr(info.reason, "fill"), "%s", info.reason);
  /* An override is kept as given. */
  p.heads_q = 1;
  cr_assert_eq(clattn_override_config(ctx, &p, &big), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_eq(info.block_q, 128);
  /* One query row cannot be split: no smaller block is made for nothing. */
  cr_assert_eq(clattn_override_config(ctx, &p, NULL), CLATTN_OK);
  p.seqlen_q = 1;
  clattn_plan_info whole;
  cr_assert_eq(clattn_explain(ctx, &p, &whole), CLATTN_OK);
  cr_assert_null(strstr(whole.reason, "fill"), "%s", whole.reason);
  clattn_context_destroy(ctx);
}

/* Only an override runs it: the heuristic's ranking and the tuner's space leave it out, and
 * its name is a family's the API accepts. */
Test(tiling, test_only_family_is_never_planned) {
  clattn_context *ctx = test_context(NULL);
  unsigned id = clattn__family_find("forward_naive");
  cr_assert_neq(id, CLATTN__NO_FAMILY);
  cr_assert(clattn__family_at(id)->explicit_only);
  cr_assert_null(strstr(clattn__family_names(), "forward_naive"), "%s", clattn__family_names());
  clattn__class cls = {64, 64, 1, 1024, CLATTN__FORWARD};
  size_t cap = clattn__config_space_size(CLATTN__FORWARD);
  clattn__config *all = malloc(cap * sizeof *all);
  size_t n = clattn__configs_ranked(&ctx->device, &cls, all, cap);
  cr_assert_gt(n, 0);
  for (size_t i = 0; i < n; i++) cr_assert_neq(all[i].kernel, id, "ranked at %zu", i);
  free(all);
  clattn_problem p = {1, 2, 0, 64, 64, 64, 0, CLATTN_F32, 0.0f, CLATTN_CAUSAL, CLATTN_ALGO_FUSED};
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_neq(info.kernel, "forward_naive");
  clattn_context_destroy(ctx);
}

/* The backward's last resort: where local memory holds no 4-row block (3 KiB at d = 128), the
 * largest equal blocks that fit, below the searched sizes, are still its default (the tuner's
 * space never offers them otherwise). */
Test(tiling, backward_default_below_the_searched_blocks) {
  clattn__device dev = gpu(3);
  clattn__class k = {128, 128, 0, 1024, CLATTN__BACKWARD};
  clattn__config all[256];
  size_t n = clattn__configs_ranked(&dev, &k, all, 256);
  cr_assert_eq(n, 1, "only the last resort is ranked: %zu", n);
  cr_assert_str_eq(clattn__family_of(&all[0])->name, "backward_rows");
  cr_assert_eq(all[0].bq, 2);
  cr_assert_eq(all[0].bkv, 2);
  /* With room for 4-row blocks, nothing below them is ranked. */
  dev = gpu(48);
  n = clattn__configs_ranked(&dev, &k, all, 256);
  for (size_t i = 0; i < n; i++) cr_assert(all[i].bq >= 4 && all[i].bkv >= 4, "rank %zu", i);
}

/* forward_mma_half: legal only with tensor cores (or their emulation) and only for half
 * classes, where it ranks first on real tensor cores (below forward_rows' GPU costs) and last
 * when emulated; its local memory is cl/forward_mma_half.cl's arrays. */
Test(tiling, mma_half_first_on_tensor_cores_in_half_only) {
  clattn__device d = gpu(48);
  unsigned id = clattn__family_find("forward_mma_half");
  cr_assert_neq(id, CLATTN__NO_FAMILY);
  clattn__class k = {59, 100, 1, 1024, CLATTN__FORWARD, CLATTN_F16};
  clattn__config c = {64, 64, 1, 1, 1, id, 1, 1}, first;
  char why[200];
  cr_assert_not(clattn__config_legal(&d, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "compute capability 8.0") && strstr(why, "f16/bf16"), "%s", why);
  cr_assert_eq(clattn__configs_ranked(&d, &k, &first, 1), 1);
  cr_assert_neq(first.kernel, id);
  d.tensor_cores = 1;
  cr_assert(clattn__config_legal(&d, &k, &c, why, sizeof why), "%s", why);
  /* K: 64 keys x (64 + 8) 16-bit values (D padded to 16); V^T: 104 columns x (64 + 8). */
  cr_assert_eq(clattn__config_local_bytes(NULL, &k, &c), (size_t)(64 * 72 + 104 * 72) * 2);
  cr_assert_eq(clattn__config_work_group(&c), 128);
  clattn_dtype halves[] = {CLATTN_F16, CLATTN_BF16};
  unsigned dims[] = {1, 64, 128, 256};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 4; i++) {
      clattn__class h = {dims[i], dims[i], 0, 4096, CLATTN__FORWARD, halves[t]};
      cr_assert_eq(clattn__configs_ranked(&d, &h, &first, 1), 1);
      cr_assert_eq(first.kernel, id, "d = %u, dtype %d: %u ranks first", dims[i], t, first.kernel);
      /* Up to d = 128, one stage in FlashAttention-2's order (stage 3: 128-key tiles to d = 64,
       * 32 past it) with four warps of two m16 tiles; at d = 256 two stages of 16 keys (two
       * stages of 32 exceed 48 KiB) and one tile a warp; d = 1 staged through registers, 64 keys,
       * four warps of one tile. */
      const unsigned want_bkv[] = {64, 128, 32, 16}, want_rm[] = {1, 2, 2, 1};
      const unsigned want_stage[] = {1, 3, 3, 2};
      cr_assert_eq(first.stage, want_stage[i], "d = %u", dims[i]);
      cr_assert_eq(first.rm, want_rm[i], "d = %u", dims[i]);
      cr_assert_eq(first.bq, 64 * want_rm[i], "d = %u", dims[i]);
      cr_assert_eq(first.bkv, want_bkv[i], "d = %u: %u keys", dims[i], first.bkv);
    }
  /* fp32 storage is forward_mma's. */
  k.dtype = CLATTN_F32;
  cr_assert_not(clattn__config_legal(&d, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "CLATTN_F32"), "%s", why);
  cr_assert_eq(clattn__configs_ranked(&d, &k, &first, 1), 1);
  cr_assert_neq(first.kernel, id);
  /* Its own rules: 16-key steps of P V, tiles staged as 16-bit pairs. */
  k.dtype = CLATTN_BF16;
  c.bkv = 8;
  cr_assert_not(clattn__config_legal(&d, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "multiple of 16"), "%s", why);
  c.bkv = 32, c.stage = 2;
  cr_assert_not(clattn__config_legal(&d, &k, &c, why, sizeof why));
  c.stage = 1, c.vec = 4;
  cr_assert_not(clattn__config_legal(&d, &k, &c, why, sizeof why));
  cr_assert(strstr(why, "vector width"), "%s", why);
  /* Emulated (tests on PoCL): legal, but ranked after the portable families. */
  d.mma_emulated = 1, c.vec = 1;
  cr_assert(clattn__config_legal(&d, &k, &c, why, sizeof why), "%s", why);
  cr_assert_eq(clattn__configs_ranked(&d, &k, &first, 1), 1);
  cr_assert_neq(first.kernel, id);
}

/* decode's GPU cost (runtime/kernels/decode_family.c) rests on two estimates; these hold them to
 * what was measured. A fp16 (or int8) cache class, d = 128, GQA 4's one row (a 4-row tile). */
static clattn__class decode_class(int kv8) {
  unsigned var = CLATTN__VAR_KVCACHE | CLATTN__VAR_KVLENS | (kv8 ? CLATTN__VAR_KV8 : 0u);
  clattn__class k = {128, 128, 0, clattn__seqlen_bucket(8192), CLATTN__FORWARD, CLATTN_F16, var};
  return k;
}
/* A row of the tables below: a decode config (4-row tiles) on a cache class, and a figure. */
typedef struct {
  int kv8;
  unsigned bkv, tpr, rm, stage, vec, want;
} decode_row;

/* f (one of the estimates) of the row's config on its class, for a 4-row tile. */
static unsigned decode_eval(const decode_row *r, unsigned (*f)(const clattn__class *,
                                                               const clattn__config *, unsigned)) {
  const clattn__class k = decode_class(r->kv8);
  const clattn__config c = {4,     r->bkv, r->tpr, r->stage, 0, clattn__family_find("decode"),
                            r->rm, r->vec};
  return f(&k, &c, 4);
}

/* P V's serial rounds a block: 1 + V's rounds with V after the scores (stage 1), V's alone when
 * one of its rounds rides with K's (stages 2 and 3). The H200's fp16 sweep (docs/BENCHMARKS.md:
 * 4, 2, 1 rows per work-item: 1.14, 1.37, 1.87 ms) is these rounds' order. */
Test(tiling, decode_rounds_count_p_v_loads) {
  const decode_row t[] = {
      /* 256 work-items over 16 chunks of 8 columns x 4 / rm row groups: 16 / rm lanes of keys,
       * 64 of them in rounds of 4 keys */
      {0, 64, 4, 4, 1, 4, 2},
      {0, 64, 4, 2, 1, 4, 3},
      {0, 64, 4, 1, 1, 4, 5},
      {0, 64, 4, 4, 2, 4, 1},
      {0, 64, 4, 4, 3, 4, 1},
      {0, 64, 4, 1, 3, 4, 4},
      /* 128 work-items: half the lanes, twice the keys each */
      {0, 64, 2, 4, 1, 4, 3},
      {0, 64, 2, 1, 1, 4, 9},
      /* 4-column chunks (vec 2): 32 chunks */
      {0, 64, 4, 4, 1, 2, 3},
      /* int8's 16-column chunks: 8 */
      {1, 64, 4, 4, 1, 4, 2},
      {1, 64, 2, 2, 1, 4, 3},
      {1, 64, 4, 2, 1, 2, 3},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    const unsigned got = decode_eval(&t[i], clattn__decode_rounds);
    cr_expect_eq(got, t[i].want, "row %zu: %u rounds, want %u", i, got, t[i].want);
  }
}

/* The register estimate against ptxas's counts from NVIDIA's OpenCL compiler on the H200
 * (`-cl-nv-verbose`, docs/BENCHMARKS.md's sweeps at 17ea94b and d27adfb; the builds that spilled
 * left out, their counts being the compiler's cap rather than the demand): within 15%, but
 * where the compiler held a build to 128 registers (two work-groups of 256 an SM) that the
 * estimate puts higher, which the test names. */
Test(tiling, decode_regs_within_the_h200_counts) {
  const decode_row t[] = {
      {0, 64, 4, 1, 1, 4, 76},  {0, 64, 4, 2, 1, 4, 84},  {0, 64, 4, 4, 1, 4, 128},
      {0, 64, 4, 1, 1, 2, 72},  {0, 64, 4, 4, 1, 2, 80},  {0, 64, 4, 1, 2, 4, 86},
      {0, 64, 4, 2, 2, 4, 108}, {0, 64, 4, 4, 2, 4, 136}, {0, 64, 4, 1, 2, 2, 75},
      {0, 64, 4, 2, 2, 2, 86},  {0, 64, 4, 4, 2, 2, 114}, {0, 32, 4, 1, 1, 4, 72},
      {0, 32, 8, 1, 2, 4, 74},  {0, 64, 2, 4, 3, 4, 160}, {1, 64, 4, 2, 1, 2, 80},
      {1, 64, 4, 4, 3, 4, 184}, {1, 64, 2, 2, 1, 4, 127}, {1, 64, 4, 4, 1, 4, 128},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    const unsigned est = decode_eval(&t[i], clattn__decode_regs);
    const double err = ((double)est - t[i].want) / t[i].want;
    cr_log_info("%s 4/%u/%u/%u/%u vec %u: estimate %u, measured %u (%+.0f%%)",
                t[i].kv8 ? "int8" : "fp16", t[i].bkv, t[i].tpr, t[i].rm, t[i].stage, t[i].vec, est,
                t[i].want, 100 * err);
    if (t[i].want == 128 && est > 128) continue; /* held to two work-groups: est is the demand */
    cr_expect(err <= 0.15 && err >= -0.15, "row %zu: estimate %u against %u measured", i, est,
              t[i].want);
  }
}

/* The cost's picks on an H200-like GPU without tensor cores (decode_mma not legal): the fastest
 * decode configs measured there at d27adfb (fp16 4/64/2/4/1 vec 4, 0.935 ms; int8 4/64/2/2/1
 * vec 4, 0.822 ms), the tile tightened to 4 rows by the call. */
Test(tiling, decode_cost_picks_the_h200_fastest) {
  clattn__device d = gpu(48);
  for (int kv8 = 0; kv8 < 2; kv8++) {
    const clattn__class k = decode_class(kv8);
    clattn__config out[4096];
    const size_t n = clattn__configs_ranked(&d, &k, out, 4096);
    cr_assert_gt(n, 0);
    cr_expect_eq(out[0].kernel, clattn__family_find("decode"));
    char got[160];
    clattn__config_describe(&out[0], got, sizeof got);
    cr_expect(out[0].bkv == 64 && out[0].tpr == 2 && out[0].rm == (kv8 ? 2u : 4u) &&
                  out[0].stage == 1 && out[0].vec == 4,
              "%s: %s", kv8 ? "int8" : "fp16", got);
  }
}

/* On tensor cores the cost ranks decode_mma first with 32-key blocks, one stage for an fp16
 * cache and two (each step's loads during the previous step's math) for int8: the fastest an
 * H100 measured, forced at batch 64 (fp16 0.709 ms against 0.764 with 16-key blocks; int8 0.602
 * against 0.735 at stage 1) and through the planner at batch 8, 32k keys (fp16 0.475 against
 * 0.487; int8 0.348 against 0.397). A paged fp16 cache takes 16-key blocks (0.382 ms against
 * 0.479 at batch 8, 32k keys, pages of 16), a paged int8 one keeps 32 in two stages (0.270
 * against 0.314); docs/BENCHMARKS.md, stop 37. */
Test(tiling, decode_mma_cost_picks_the_h100_fastest) {
  clattn__device d = gpu(48);
  d.tensor_cores = 1;
  for (int paged = 0; paged < 2; paged++)
    for (int kv8 = 0; kv8 < 2; kv8++) {
      clattn__class k = decode_class(kv8);
      if (paged) k.variants |= CLATTN__VAR_PAGED;
      clattn__config out[4096];
      const size_t n = clattn__configs_ranked(&d, &k, out, 4096);
      cr_assert_gt(n, 0);
      char got[160];
      clattn__config_describe(&out[0], got, sizeof got);
      cr_expect(out[0].kernel == clattn__family_find("decode_mma") &&
                    out[0].bkv == (paged && !kv8 ? 16u : 32u) && out[0].stage == (kv8 ? 2u : 1u),
                "%s %s: %s", paged ? "paged" : "contiguous", kv8 ? "int8" : "fp16", got);
    }
}

/* decode_mma's rule on a 132-unit GPU (an H100's count): one wave of 8 work-groups per unit and
 * at least 128 keys a range, which an H100 measured fastest at batch 8 (4k and 32k keys: 16
 * ranges; 17 read at 70% of the stream, 16 at 93%) and batch 1 (4k keys: 32 ranges; 32k: the
 * most, 64, which it also read as fast as 96 or 128: one wave at 128); docs/BENCHMARKS.md. */
Test(tiling, decode_mma_split_count_on_132_units) {
  clattn_context *ctx = test_context(NULL);
  ctx->device.compute_units = 132;
  clattn__plan p;
  memset(&p, 0, sizeof p);
  p.cfg.kernel = clattn__family_find("decode_mma");
  p.cfg.bq = 4, p.cfg.bkv = 16;
  snprintf(p.origin, sizeof p.origin, "heuristic");
  const struct {
    size_t batch, keys;
    unsigned want;
  } t[] = {{8, 4096, 16}, {8, 32768, 16}, {1, 4096, 32}, {1, 32768, 64}, {64, 4096, 2}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    clattn__shape s;
    memset(&s, 0, sizeof s);
    s.batch = t[i].batch, s.heads_q = 32, s.heads_kv = 8, s.seqlen_q = 1, s.seqlen_kv = t[i].keys;
    s.d = s.dv = 128;
    unsigned per = 0, n = clattn__split_count(ctx, &s, &p, &per);
    cr_expect_eq(n, t[i].want, "batch %zu, %zu keys: %u ranges of %u", t[i].batch, t[i].keys, n,
                 per);
    cr_expect_geq((size_t)per * n, t[i].keys);
    cr_expect_lt((size_t)per * (n - 1), t[i].keys);
  }
  /* CLATTN_SPLITS's count past 64 holds for decode's families, and is capped at 64 for others */
  clattn__shape s;
  memset(&s, 0, sizeof s);
  s.batch = 8, s.heads_q = 32, s.heads_kv = 8, s.seqlen_q = 1, s.seqlen_kv = 32768; /* plan: 16 */
  s.d = s.dv = 128;
  ctx->force_splits = 128;
  unsigned per = 0;
  cr_expect_eq(clattn__split_count(ctx, &s, &p, &per), 128);
  p.cfg.kernel = clattn__family_find("forward_tiles"), p.cfg.bq = 16, p.cfg.bkv = 16;
  cr_expect_eq(clattn__split_count(ctx, &s, &p, &per), 64);
  clattn_context_destroy(ctx);
}
