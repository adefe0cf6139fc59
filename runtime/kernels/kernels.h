/* The kernels layer (docs/DESIGN.md): the kernel registry (registry.h), kernel sources
 * (embedded, or from $CLATTN_KERNEL_DIR) and the JIT with its per-context program cache
 * (sources.c, jit.c), the on-disk binary cache (bincache.c), parallel prebuilds (prebuild.c) and
 * the build of a family's config into kernels with their limits (build.c). Uses core only. */
#ifndef CLATTN_KERNELS_H
#define CLATTN_KERNELS_H

#include "core.h"
#include "registry.h"

/* Floats of local memory per warp that the emulated tensor-core kernels add (cl/mma.cl's
 * SCRATCH, under CLATTN_MMA_EMULATE); the local-memory models count it. */
#define CLATTN__MMA_SCRATCH 416 /* a plain number: it is pasted into build options */
#define CLATTN__STR_(x) #x
#define CLATTN__STR(x) CLATTN__STR_(x)
/* The build options of an emulated tensor-core kernel (CLATTN_MMA_EMULATE, tests on CPUs). Built
 * unoptimized: the emulation is for checking, not speed, and PoCL's optimizer spent 5-10x a test
 * case's run time on the emulated MMAs inlined with their barriers (cl/mma.cl already leaves the
 * fragment loops rolled; a half variants case: 47 s cold, 0.5 warm); LLVM 15's inliner (PoCL
 * 3.1's) also crashed on decode_mma's two groups of emulated MMAs. */
#define CLATTN__MMA_EMULATE_OPTIONS                                                                \
  " -DMMA_EMULATE=1 -DSCRATCH=" CLATTN__STR(CLATTN__MMA_SCRATCH) " -cl-opt-disable"

/* Kernel arguments set in order; the first failure is kept in err (args.c). With memo, a scalar
 * set to the value it already holds is skipped. */
typedef struct clattn__args {
  cl_kernel kernel;
  cl_uint next;
  cl_int err;
  clattn__argmemo *memo; /* NULL: every argument set */
} clattn__args;
/* A scalar argument (through the memo), a buffer argument (always set). */
void clattn__arg(clattn__args *a, size_t size, const void *value);
void clattn__arg_mem(clattn__args *a, const cl_mem *buffer);
/* clSetKernelArg through memo (NULL allowed): skipped where it holds this value, else set and
 * recorded. */
cl_int clattn__set_arg(cl_kernel k, clattn__argmemo *memo, cl_uint i, size_t size,
                       const void *value);
/* A view's offset and three strides, as four ulong arguments. */
void clattn__arg_view(clattn__args *a, const clattn_tensor *t);
/* The variants' values (cl/common.cl's VARIANT_ARGS), appended only when the shape has them, as
 * the class's defines say: mask_lo and mask_hi (long); the cap (float) times unit, the kernel's
 * score unit (the forward kernels' log2(e), 1 elsewhere); ALiBi's slopes, alibi_mod (ulong) and
 * unit; the sinks, heads_q (uint) and unit; seqlens_kv, kv_align (int) and heads_q; or varlen's
 * cu_seqlens_q, cu_seqlens_kv, total_q, total_kv (ulong) and kv_align. */
void clattn__arg_variants(clattn__args *a, const clattn__shape *s, double unit);
/* A KV cache's arguments (cl/decode_common.cl's and cl/kv_append.cl's PAGE_ARGS then SCALE_ARGS),
 * as the shape has them: paged, the block table, its columns, the pool's pages and log2 of the page
 * size; int8, the K and V scales and the scales per slot. */
void clattn__arg_cache(clattn__args *a, const clattn__shape *s);

/* ---- sources (sources.c) ---- */

/* The text of cl/<name>: from ctx->kernel_dir when set, else embedded. Caller frees *text. */
clattn_status clattn__kernel_source(clattn_context *ctx, const char *name, char **text);
/* The program texts of a pass's families (by registry id; other ids NULL), with their hashes
 * (the tuning database's key). */
typedef struct clattn__sources {
  char *text[CLATTN__MAX_FAMILIES];
  uint64_t hash[CLATTN__MAX_FAMILIES];
} clattn__sources;
clattn_status clattn__sources_load(clattn_context *ctx, clattn__pass pass, clattn__sources *out);
/* One family's program text (a helper's: clattn__family_for). Caller frees *text. */
clattn_status clattn__family_source(clattn_context *ctx, const clattn__family *f, char **text);
void clattn__sources_free(clattn__sources *s);

/* ---- JIT and the program cache (jit.c) ---- */

typedef struct clattn__program {
  uint64_t source_hash;
  char *options;
  cl_program program;
  struct clattn__program *next;
} clattn__program;

/* A built program for (source, options), from the context's cache, the disk cache or compiled
 * now. */
clattn_status clattn__build(clattn_context *ctx, const char *source, const char *options,
                            cl_program *out);
void clattn__program_cache_release(clattn_context *ctx);
int clattn__program_cached(const clattn_context *ctx, uint64_t source_hash, const char *options);
/* Takes ownership of prog (released on failure too). */
clattn_status clattn__program_cache_put(clattn_context *ctx, uint64_t source_hash,
                                        const char *options, cl_program prog);
size_t clattn__program_cache_size(const clattn_context *ctx);

/* ---- the on-disk binary cache (bincache.c) ---- */

/* A built program for (source, options) on this device from <cache_dir>/programs, or NULL; and
 * storing one there. Never fatal. */
cl_program clattn__bincache_load(clattn_context *ctx, uint64_t source_hash, const char *options);
void clattn__bincache_store(clattn_context *ctx, uint64_t source_hash, const char *options,
                            cl_program prog);
/* Parses a cache entry already in memory: a pointer into file to the program binary and its
 * length in *bin_len, or NULL when the entry is malformed, for another key, truncated or its
 * checksum is wrong. Never reads outside [file, file + file_len), whatever the bytes. */
const unsigned char *clattn__bincache_parse(const unsigned char *file, size_t file_len,
                                            const char *key, size_t *bin_len);

/* ---- prebuilds (prebuild.c) ---- */

/* Compiles the configs that are neither in the program cache nor on disk, several at once on
 * threads (OpenCL allows concurrent builds of different programs), and caches them; failures
 * are left for clattn__build to report. The tuner calls it for the candidates it will try
 * next, since compiling is most of a candidate's cost. */
void clattn__prebuild(clattn_context *ctx, const clattn__sources *src, const clattn__class *cls,
                      const clattn__config *cfgs, size_t n);

/* ---- a family's config built (build.c) ---- */

/* The kernels of a built config, one per entry point of its family, with what the driver says
 * of each. */
typedef struct clattn__built {
  unsigned count;
  cl_kernel kernels[CLATTN__MAX_ENTRIES];
  size_t max_wg[CLATTN__MAX_ENTRIES];      /* CL_KERNEL_WORK_GROUP_SIZE */
  size_t local_mem[CLATTN__MAX_ENTRIES];   /* CL_KERNEL_LOCAL_MEM_SIZE */
  size_t private_mem[CLATTN__MAX_ENTRIES]; /* CL_KERNEL_PRIVATE_MEM_SIZE (0 when unknown) */
} clattn__built;

/* Builds config c of class cls from the pass's sources src. CLATTN_ERR_BUILD when the compiler
 * rejects it (the message has the log). */
clattn_status clattn__config_build(clattn_context *ctx, const clattn__sources *src,
                                   const clattn__class *cls, const clattn__config *c,
                                   clattn__built *out);
void clattn__built_release(clattn__built *b);

#endif
