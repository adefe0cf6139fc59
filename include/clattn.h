/* clattn — exact, fused (FlashAttention-style) attention on any OpenCL device.
 *
 * This header and clattn_plan.h (configs, overrides, explain and tuning; included at the end
 * of this one) are the whole public API. The library computes
 *     O = softmax(scale · Q Kᵀ [+ causal mask]) · V
 * on OpenCL buffers the caller owns, with kernels JIT-compiled for the device in hand and
 * tiled to fit its local memory, so the N×N score matrix never reaches global memory.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 * - Every function returns a clattn_status: 0 is success, negative is failure. On failure the
 *   detail (what was wrong, the OpenCL error name, a build log) is available from
 *   clattn_last_error() for the calling thread. Bad input never aborts, never writes outside
 *   the caller's buffers, and leaves the context usable.
 * - Structs are zero-initialised by the caller and passed by pointer; zero means "default" in
 *   the fields documented so. Fields are only ever added, so code written against an earlier
 *   header keeps compiling. A struct that grows changes the library's soname, so a program
 *   built against another header does not load it: until 1.0 the soname carries the minor
 *   version (libclattn.so.0.3 for 0.3.x); clattn_version() says which library is loaded.
 * - A kernel variant that the device's compiler rejects (say, a driver that refuses inline
 *   PTX) is passed over for the next one that builds, with a line in
 *   clattn_context_diagnostics(); only an override, or every variant failing, gives
 *   CLATTN_ERR_BUILD.
 * - A context may be used from several threads; calls on it are serialised internally.
 * - Calls are asynchronous like OpenCL: they enqueue work, flush the queue and return.
 */
#ifndef CLATTN_H
#define CLATTN_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(CLATTN_BUILDING)
#define CLATTN_API __declspec(dllexport)
#elif defined(_WIN32)
#define CLATTN_API
#elif defined(__GNUC__)
#define CLATTN_API __attribute__((visibility("default")))
#else
#define CLATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header (CMake checks it against the project's version at configure
 * time); clattn_version() is the version of the library loaded. */
#define CLATTN_VERSION_MAJOR 0
#define CLATTN_VERSION_MINOR 4
#define CLATTN_VERSION_PATCH 0

/* One list generates the enum and clattn_status_string(), so they never drift apart. */
#define CLATTN_STATUS_MAP(X)                                                                       \
  X(OK, 0, "success")                                                                              \
  X(ERR_INVALID_ARGUMENT, -1, "invalid argument (pointer, shape, stride or buffer size)")          \
  X(ERR_UNSUPPORTED, -2, "valid request that this device or runtime cannot run")                   \
  X(ERR_OUT_OF_RESOURCES, -3, "out of device, host or local memory")                               \
  X(ERR_BUILD, -4, "kernel compilation failed")                                                    \
  X(ERR_OPENCL, -5, "an OpenCL call failed")                                                       \
  X(ERR_IO, -6, "tuning database or cache file error")                                             \
  X(ERR_NO_DEVICE, -7, "no OpenCL device found")

typedef enum clattn_status {
#define CLATTN_STATUS_ENUM_(name, value, text) CLATTN_##name = value,
  CLATTN_STATUS_MAP(CLATTN_STATUS_ENUM_)
#undef CLATTN_STATUS_ENUM_
} clattn_status;

typedef struct clattn_context clattn_context; /* opaque */

/* Element types. CLATTN_I8 is a KV cache's alone (clattn_kv_cache): int8 values with an fp32
 * scale per (token, KV head); a problem's dtype is one of the other three. */
typedef enum clattn_dtype {
  CLATTN_F32 = 0,
  CLATTN_F16 = 1,
  CLATTN_BF16 = 2,
  CLATTN_I8 = 3
} clattn_dtype;

/* Problem flags. */
enum {
  /* Bottom-right aligned causal mask (FlashAttention 2): query i sees key j iff
   * j <= i + seqlen_kv - seqlen_q. */
  CLATTN_CAUSAL = 1u << 0,
  /* Sliding window (FlashAttention's window_size): query i sees key j iff
   * -window_left <= j - (i + seqlen_kv - seqlen_q) <= window_right, -1 meaning unbounded on that
   * side (with CLATTN_CAUSAL_TOP_LEFT the diagonal is j = i); with a causal mask window_right is
   * 0 or -1 (both: none to the right). Key blocks no row of a work-group sees are skipped, so a
   * window of w keys costs O(N w). Computed forward and backward by every kernel family the
   * planner chooses from (tensor-core ones included) and the standard path, in every dtype; an
   * override of a family that does not compute it (the test-only forward_naive) is
   * CLATTN_ERR_UNSUPPORTED naming the variant. */
  CLATTN_WINDOW = 1u << 1,
  /* Causal aligned top-left (PyTorch SDPA's is_causal): query i sees key j iff j <= i. Not with
   * CLATTN_CAUSAL. Computed where CLATTN_WINDOW is. */
  CLATTN_CAUSAL_TOP_LEFT = 1u << 2,
  /* ALiBi's slopes (clattn_args.alibi_slopes) are [batch][heads_q], not [heads_q]. */
  CLATTN_ALIBI_PER_BATCH = 1u << 3,
  /* Variable-length sequences packed one after another (FlashAttention's varlen): batch is the
   * number of sequences, sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of
   * q and o ([total_q][heads][dim] views: their stride_batch is not used) and its keys rows
   * cu_seqlens_kv[b] .. cu_seqlens_kv[b + 1] of k and v ([total_kv][heads_kv][dim]); seqlen_q and
   * seqlen_kv are the longest; the LSE is fp32 [heads_q][total_q]; the masks and ALiBi hold per
   * sequence. clattn_args' cu_seqlens_q and cu_seqlens_kv (int32 [batch + 1]) live on the device
   * and are bounded there: a sequence whose query range is not within [0, total_q] and at most
   * seqlen_q rows writes nothing; one whose key range is not (likewise) sees no key (O = 0, LSE =
   * -inf, or the sink) and the backward leaves its rows of dk and dv unwritten; sequences whose
   * ranges overlap write the shared rows in no defined order. Fused kernels only so far (the
   * standard path: UNSUPPORTED); not with seqlens_kv; total_q and total_kv below 2^31. */
  CLATTN_VARLEN = 1u << 4,
  /* The backward may sum dQ over key blocks by atomic adds (FlashAttention-2's default): one
   * kernel computes dK, dV and dQ, recomputing S and dP once instead of twice (5 matrix products
   * where the deterministic backward does 7). Results then vary in their last bits run to run.
   * Taken by the tensor-core kernels in half storage (backward_mma_half) without sinks; every
   * other backward ignores it and stays deterministic. The forward ignores it. On an H100 the
   * forward + backward was 1.08-1.14x faster with it at N = 4096 (paired atomic adds, compute
   * capability 9.0+); with one add an element (older GPUs) it was 0.96x there. */
  CLATTN_NONDETERMINISTIC = 1u << 5
};

/* How a call computes attention. */
typedef enum clattn_algorithm {
  CLATTN_ALGO_AUTO = 0,    /* fused, unless the fused kernels cannot run the problem (a head dim
                              above 256): then standard */
  CLATTN_ALGO_FUSED = 1,   /* tiled kernels: S and P stay in local memory and registers */
  CLATTN_ALGO_STANDARD = 2 /* S = scale*Q*K^T in a global-memory workspace (CLBlast batched
                              GEMM), a row softmax in place, O = P*V (CLBlast): the baseline the
                              fused path is measured against. Head dims up to 16384. Needs an
                              in-order queue (CLBlast takes no wait lists) */
} clattn_algorithm;

/* The sizes of one attention call. Zero means the default in heads_kv (heads_q), head_dim_v
 * (head_dim) and scale (1/sqrt(head_dim)). batch, heads_q or seqlen_q = 0 is a valid empty
 * call; seqlen_kv = 0 is valid (every row sees no key: O = 0, LSE = -inf); head_dim = 0 is
 * CLATTN_ERR_INVALID_ARGUMENT. heads_q must be a multiple of heads_kv (GQA/MQA: query head h
 * reads K/V head h / (heads_q / heads_kv)). */
typedef struct clattn_problem {
  size_t batch;
  size_t heads_q;
  size_t heads_kv;
  size_t seqlen_q;
  size_t seqlen_kv;
  size_t head_dim;    /* of Q and K, 1..256 */
  size_t head_dim_v;  /* of V and O, 1..256 */
  clattn_dtype dtype; /* storage of q, k, v, o (and the gradients): CLATTN_F32, or CLATTN_F16 /
                         CLATTN_BF16 (16-bit elements; offsets and strides still count
                         elements), forward and backward, fused (split keys included) and
                         standard; accumulation and LSE are always fp32 */
  float scale;
  unsigned flags;             /* CLATTN_CAUSAL, CLATTN_WINDOW, CLATTN_CAUSAL_TOP_LEFT */
  clattn_algorithm algorithm; /* CLATTN_ALGO_AUTO (0) by default */
  /* The variants (zero: off). With CLATTN_WINDOW, the keys a row sees left and right of its
   * diagonal (-1: unbounded; (0, 0) the diagonal alone); without it both must be 0. */
  int64_t window_left, window_right;
  float softcap; /* > 0: a score s = scale q.k becomes softcap * tanh(s / softcap) before the
                    mask and the softmax (Gemma 2), forward and backward; computed where
                    CLATTN_WINDOW is. Finite, and at least |scale| / 2^32 (INVALID_ARGUMENT) */
  /* With CLATTN_VARLEN, the packed rows of q and o (total_q) and of k and v (total_kv); without
   * it both must be 0. */
  size_t total_q, total_kv;
} clattn_problem;

/* A strided 4-D view [batch][seq][head][dim] of a buffer; the dim axis is contiguous. Offset and
 * strides are in elements and may be any values for which every element lies inside the buffer
 * (checked against CL_MEM_SIZE). Inputs may overlap themselves (a stride of 0 broadcasts); no two
 * elements of an output (o, dq, dk, dv) may share an address (INVALID_ARGUMENT, naming it). Both
 * algorithms accept the same views. */
typedef struct clattn_tensor {
  cl_mem buffer;
  size_t offset;
  size_t stride_batch, stride_seq, stride_head;
} clattn_tensor;

/* Packed views: [B][S][H][D] (FlashAttention's layout) and [B][H][S][D] (PyTorch's). */
CLATTN_API clattn_tensor clattn_bshd(cl_mem buf, size_t seqlen, size_t heads, size_t dim);
CLATTN_API clattn_tensor clattn_bhsd(cl_mem buf, size_t seqlen, size_t heads, size_t dim);

/* Options of a context. NULL options, or a NULL field, take the default, read from the
 * environment once at context creation. */
typedef struct clattn_options {
  const char *cache_dir;  /* NULL: $CLATTN_CACHE_DIR or $XDG_CACHE_HOME/clattn
                             (~/.cache/clattn); "": no disk cache */
  const char *tuning_db;  /* NULL: $CLATTN_TUNING_DB or <cache_dir>/tuning.json */
  const char *kernel_dir; /* NULL: $CLATTN_KERNEL_DIR or the sources embedded in the library */
  size_t workspace_limit; /* bytes of global memory the standard path may hold at once (its
                             S/P workspace plus what CLBlast allocates); 0: $CLATTN_WORKSPACE_LIMIT
                             or half the device's global memory. Larger problems are split over
                             batch*heads; one head that needs more fails with
                             CLATTN_ERR_OUT_OF_RESOURCES */
} clattn_options;

/* Create a context on the caller's OpenCL objects. The context retains them and releases them
 * on destroy. queue may be NULL: the context then makes an in-order queue with profiling
 * enabled. The strings of options are copied. *out is NULL on failure.
 * Errors: INVALID_ARGUMENT (NULL context, device or out; queue of another context/device),
 * OPENCL, OUT_OF_RESOURCES. Thread safe. */
CLATTN_API clattn_status clattn_context_create(cl_context cl_ctx, cl_device_id device,
                                               cl_command_queue queue,
                                               const clattn_options *options, clattn_context **out);

/* Create a context on a device chosen by $CLATTN_DEVICE ("P:D" platform and device indices, or
 * a substring of the device name), else the first GPU, else the first device of any type.
 * Errors: NO_DEVICE (none, or $CLATTN_DEVICE matches none), OPENCL, OUT_OF_RESOURCES. */
CLATTN_API clattn_status clattn_context_create_default(const clattn_options *options,
                                                       clattn_context **out);

/* Waits for nothing; the caller finishes its queue first. NULL is a no-op. */
CLATTN_API void clattn_context_destroy(clattn_context *ctx);

/* The context's OpenCL objects; owned by the context (retain them to keep them longer). */
CLATTN_API cl_context clattn_context_cl_context(const clattn_context *ctx);
CLATTN_API cl_command_queue clattn_context_queue(const clattn_context *ctx);
CLATTN_API cl_device_id clattn_context_device(const clattn_context *ctx);

/* Describes the context's device in one line: name, vendor, driver, local and global memory.
 * Owned by the context. */
CLATTN_API const char *clattn_context_device_summary(const clattn_context *ctx);

/* The library's version, "MAJOR.MINOR.PATCH" (e.g. "0.4.0"): a static string, never NULL.
 * Thread safe. A program (or a ctypes binding) compares it with the version it was written
 * for; until 1.0 a different minor version has a different soname and struct layouts. */
CLATTN_API const char *clattn_version(void);
/* The same as one number, MAJOR * 1000000 + MINOR * 1000 + PATCH (0.4.0 is 4000). */
CLATTN_API unsigned clattn_version_number(void);

/* A static string naming the status. Never NULL. */
CLATTN_API const char *clattn_status_string(clattn_status status);

/* The message of the last failed call on ctx by the calling thread; "" when that thread has
 * made no failing call on ctx (a new thread reads "", whatever thread ran before it). Owned by
 * the library; valid in the calling thread until its next failing call on ctx, until ctx is
 * destroyed or until the thread exits (each thread's slot is freed at its exit or at destroy,
 * whichever comes last). clattn_last_error(NULL) is the calling thread's last failure of a call
 * that had no context (a failed create). Never NULL. Thread safe: each thread reads its own.
 * The slots are freed by a thread-exit hook in the library, so a process must not unload
 * libclattn (dlclose) while threads that failed a call on a context still run. */
CLATTN_API const char *clattn_last_error(const clattn_context *ctx);

/* Enqueue O = attention(Q, K, V). lse is NULL or an fp32 buffer [batch][heads_q][seqlen_q],
 * packed from offset 0, that receives the natural-log sum-exp of the scaled scores of each row
 * (-inf for a row that sees no key). o must not overlap q, k, v or lse. The call waits for the
 * num_wait events of wait; *done (when done is not NULL) receives an event the caller releases,
 * and is NULL on error, when nothing is left enqueued.
 * Errors: INVALID_ARGUMENT (NULL pointer, zero head_dim, heads_q not a multiple of heads_kv, a
 * view outside its buffer, overlapping output, size overflow, an unknown algorithm, a scale or
 * softcap whose product with log2 e overflows fp32, an output in a CL_MEM_READ_ONLY buffer or an
 * input in a CL_MEM_WRITE_ONLY one: the backward reads o and lse, the forward writes them, and
 * the standard algorithm's GEMMs read their outputs too, so there none may be CL_MEM_WRITE_ONLY),
 * UNSUPPORTED (a batch or sequence length of 2^31 or more, batch x heads_q x the longer sequence
 * above 2^48; head_dim > 256 with CLATTN_ALGO_FUSED; the standard algorithm on an
 * out-of-order queue or, in CLATTN_F32 storage, with element indices of 2^31 and above, which
 * CLBlast cannot address: half views reach it as fp32 copies),
 * BUILD, OPENCL, OUT_OF_RESOURCES (the standard path's workspace for one head does not fit: the
 * message names the bytes needed and available). Thread safe. */
CLATTN_API clattn_status clattn_forward(clattn_context *ctx, const clattn_problem *problem,
                                        const clattn_tensor *q, const clattn_tensor *k,
                                        const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                        cl_uint num_wait, const cl_event *wait, cl_event *done);

/* Enqueue the gradients dq, dk, dv of attention for the upstream gradient d_o, given the
 * forward call's inputs, its output o and its lse (required). The pass recomputes S and P from
 * q, k and lse instead of storing them (FlashAttention-2's backward). dq is a view like q, d_o
 * like o, dk and dv like k and v (GQA/MQA: summed over the query heads of each group). The
 * outputs are overwritten (not accumulated into) and must not overlap any input or each other.
 * Rows whose lse is -inf (they saw no key) contribute nothing.
 * Deterministic: every output element is computed by one work-item (for the tensor-core
 * kernels, in one lane's MMA accumulators) in a fixed order, without atomics, so results are
 * bitwise identical run to run on a device; unless problem->flags has CLATTN_NONDETERMINISTIC,
 * which lets the half-precision tensor-core kernels add dQ up by atomics (faster; it permits them,
 * never requires them: where their kernels or their accumulator do not fit, the two kernels run).
 * Needs an in-order queue. problem->algorithm chooses the fused kernels or the standard path
 * (P and dS in a global-memory workspace, CLBlast GEMMs; split over batch*heads like the
 * forward's, OUT_OF_RESOURCES when one head's two N^2 matrices do not fit).
 * Errors: as clattn_forward's, plus INVALID_ARGUMENT for a NULL or too small lse, a d_o, dq, dk
 * or dv view outside its buffer, or overlapping outputs. Thread safe. */
CLATTN_API clattn_status clattn_backward(clattn_context *ctx, const clattn_problem *problem,
                                         const clattn_tensor *q, const clattn_tensor *k,
                                         const clattn_tensor *v, const clattn_tensor *o,
                                         const clattn_tensor *d_o, cl_mem lse,
                                         const clattn_tensor *dq, const clattn_tensor *dk,
                                         const clattn_tensor *dv, cl_uint num_wait,
                                         const cl_event *wait, cl_event *done);

/* Every tensor and buffer of one call of clattn_forward_ex or clattn_backward_ex. A member left
 * zero (a tensor whose buffer is NULL, a NULL cl_mem) is absent; each pass reads its own
 * members and ignores the other pass's. ALiBi and the sinks are computed forward and backward,
 * in every dtype, by every kernel family the planner chooses from and the standard path (their
 * buffers are checked against their sizes, and must not overlap an output: INVALID_ARGUMENT).
 * The order of a score: s = scale q.k, then the softcap, then ALiBi's bias; the softmax then
 * runs over the visible keys plus the sink. seqlens_kv (int32 [batch]) gives a padded batch's
 * key lengths: entry b's rows see its keys [0, seqlens_kv[b]) (the masks and ALiBi aligned to
 * that length; an entry below 0 or above seqlen_kv has none), and the backward writes zeros to
 * dK and dV past it. The fused kernels never read keys past an entry's length; the standard path
 * multiplies them by 0, so they must be finite there. cu_seqlens_q and cu_seqlens_kv: with
 * CLATTN_VARLEN (see there), required both, and refused (INVALID_ARGUMENT) without it. */
typedef struct clattn_args {
  clattn_tensor q, k, v; /* inputs of both passes */
  clattn_tensor o;       /* forward: written; backward: read (D = rowsum(dO o O)) */
  cl_mem lse;            /* fp32 [batch][heads_q][seqlen_q]: forward optional, backward required */
  clattn_tensor d_o, dq, dk, dv; /* backward */
  /* fp32 ALiBi slopes, [heads_q] or with CLATTN_ALIBI_PER_BATCH [batch][heads_q]: key j's score
   * in row i gains -slope |i + seqlen_kv - seqlen_q - j| (BLOOM, MPT); no gradient. */
  cl_mem alibi_slopes;
  /* fp32 [heads_q] attention-sink logits (gpt-oss; not scaled): each joins every row of its
   * head's softmax as a key with no value, so O shrinks by it and the LSE includes it (a row
   * that sees no key: O = 0, LSE = the sink). -inf is no sink; NaN or +inf give NaN rows. */
  cl_mem sinks;
  /* backward, optional with sinks: fp32 [heads_q], written with the sinks' gradient, summed over
   * the batch and the rows: -sum exp(sink - LSE) rowsum(dO o O). */
  cl_mem d_sinks;
  cl_mem cu_seqlens_q, cu_seqlens_kv; /* int32 [batch + 1]: CLATTN_VARLEN's sequences */
  cl_mem seqlens_kv;                  /* int32 [batch]: a padded batch's key lengths */
  /* forward only: K and V read from this KV cache instead of k and v (which must then be
   * absent, as seqlens_kv: the cache has its own lengths); NULL: none. See clattn_kv_cache. */
  const struct clattn_kv_cache *kv_cache;
} clattn_args;

/* clattn_forward with every tensor in args: q, k, v, o and lse as clattn_forward's, and the
 * variants' members. clattn_forward is this call with the variant members absent; the two share
 * one implementation (an absent tensor is reported as its NULL buffer). Errors: as
 * clattn_forward's, INVALID_ARGUMENT for a NULL args or a variant member that is malformed
 * (after the tensors' checks), UNSUPPORTED for CLATTN_VARLEN on the standard path. Thread
 * safe. */
CLATTN_API clattn_status clattn_forward_ex(clattn_context *ctx, const clattn_problem *problem,
                                           const clattn_args *args, cl_uint num_wait,
                                           const cl_event *wait, cl_event *done);

/* A KV cache that an inference engine allocates and owns (FlashAttention's
 * flash_attn_with_kvcache, FlashInfer's and vLLM's paged caches), read by clattn_forward_ex
 * (args.kv_cache) for seqlen_q >= 1 query rows per sequence (decode, speculative verification,
 * chunked prefill) and written by clattn_kv_append. The problem's batch, heads_kv, head_dim and
 * head_dim_v describe it; seqlen_kv is the longest a sequence may grow to.
 * - Contiguous (page_size 0): k and v are ordinary views [batch][seqlen_kv][heads_kv][dim].
 * - Paged (page_size a power of two, 1..256): k and v view a pool of num_pages pages of
 *   page_size tokens, stride_batch stepping pages and stride_seq tokens within a page, so both
 *   FlashInfer's NHD ([page][token][head][dim]) and HND ([page][head][token][dim]) layouts are
 *   views; block_table (int32 [batch][max_pages]) lists each sequence's pages in order, and
 *   seqlen_kv may not exceed max_pages * page_size.
 *   Sequences may share pages for reading (a common prefix); an append's target rows must be
 *   each one sequence's own, or the writes race. K and V may interleave in one buffer (FlashInfer's
 *   [page][2][token][head][dim]) as long as no element is both.
 * - seqlens (int32 [batch], required): the tokens each sequence holds. Causal masks, windows and
 *   ALiBi align to each sequence's own length (bottom-right: query row i of seqlen_q sees keys up
 *   to i + seqlens[b] - seqlen_q). A length below 0 or above seqlen_kv, and a page number outside
 *   [0, num_pages), are read as no keys (the rows they affect get O = 0, LSE = -inf, or the
 *   sink); nothing outside the buffers is read or written.
 * - dtype: the problem's dtype, or CLATTN_I8 with k_scale and v_scale (fp32, one per token and KV
 *   head: [num_pages][page_size][heads_kv] paged, [batch][seqlen_kv][heads_kv] contiguous), x =
 *   value * scale; clattn_kv_append writes scale = max|x| / 127 and the values rounded to
 *   nearest even. Q and O are in the problem's dtype; arithmetic is fp32.
 * The fused path's `decode` kernels read caches (head dims up to 256; the standard path and the
 * backward refuse a cache, UNSUPPORTED), with GQA, the window, the softcap, ALiBi and sinks;
 * CLATTN_VARLEN is refused with a cache. */
typedef struct clattn_kv_cache {
  clattn_dtype dtype;
  size_t page_size; /* 0: contiguous */
  size_t num_pages; /* paged: pages in the pool k and v view */
  size_t max_pages; /* paged: block_table's columns */
  clattn_tensor k, v;
  cl_mem block_table;      /* paged: int32 [batch][max_pages] */
  cl_mem seqlens;          /* int32 [batch] */
  cl_mem k_scale, v_scale; /* CLATTN_I8: fp32 scales */
} clattn_kv_cache;

/* Appends seqlen_q new tokens per sequence (k_new, v_new: [batch][seqlen_q][heads_kv][dim]
 * views in the problem's dtype, the rows of the decode step that follows) to cache, at each
 * sequence's current length seqlens[b]: token i goes to position seqlens[b] + i, quantised on
 * the fly for CLATTN_I8. One kernel; it allocates no pages and changes no length (the caller
 * updates seqlens, as with FlashAttention's cache_seqlens). A position at or past seqlen_kv, a
 * length out of range or a page outside the pool is not written. Errors as clattn_forward's
 * (the problem and views checked before anything is enqueued). Thread safe. */
CLATTN_API clattn_status clattn_kv_append(clattn_context *ctx, const clattn_problem *problem,
                                          const clattn_kv_cache *cache, const clattn_tensor *k_new,
                                          const clattn_tensor *v_new, cl_uint num_wait,
                                          const cl_event *wait, cl_event *done);

/* clattn_backward with every tensor in args (q, k, v, o, d_o, lse, dq, dk, dv as
 * clattn_backward's, and the variants' members), as clattn_forward_ex is to clattn_forward. */
CLATTN_API clattn_status clattn_backward_ex(clattn_context *ctx, const clattn_problem *problem,
                                            const clattn_args *args, cl_uint num_wait,
                                            const cl_event *wait, cl_event *done);

#ifdef __cplusplus
}
#endif

/* Plans: configs and overrides, explain, the standard path's profile, tuning. */
#include "clattn_plan.h"

#endif /* CLATTN_H */
