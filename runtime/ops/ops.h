/* The ops layer (docs/DESIGN.md): the calls that enqueue work — clattn_forward and
 * clattn_explain (forward.c), clattn_backward (backward.c), split keys and their merge
 * (split.c), the standard CLBlast path (standard*.c), overrides set through the API
 * (configure.c) — and the one launch helper they share (launch.c). Uses core, kernels, plan. */
#ifndef CLATTN_OPS_H
#define CLATTN_OPS_H

#include "plan.h"

/* ---- launches (launch.c) ---- */

/* Enqueues the grid l on queue in launches of at most per_launch groups (0: 2^20, far from the
 * 32-bit limits of drivers and the grid limits of GPUs), each given its first group in argument
 * l->base_arg. The wait list gates the first launch; each later one follows the previous
 * (implicitly on an in-order queue, by its event on an out-of-order one). *first and *last
 * (NULL allowed) get the first and the last launch's events (NULL when there were none). */
clattn_status clattn__launch_grid(clattn_context *ctx, cl_command_queue queue, int in_order,
                                  const clattn__launch *l, size_t per_launch, cl_uint num_wait,
                                  const cl_event *wait, cl_event *first, cl_event *last);
/* A plan's launches for a call, bound by its family and enqueued in order on queue (the wait
 * list gating the first); first and last as above, over all of them. */
clattn_status clattn__enqueue_plan(clattn_context *ctx, cl_command_queue queue, int in_order,
                                   const clattn__plan *p, const clattn__bound *b, cl_uint num_wait,
                                   const cl_event *wait, cl_event *first, cl_event *last);

/* ---- the forward (forward.c, split.c) ---- */

/* Enqueues the forward plan p for checked tensors (split NULL: no split, O and LSE written to o
 * and lse); done gets the last launch's event. */
clattn_status clattn__enqueue_forward(clattn_context *ctx, cl_command_queue queue, int in_order,
                                      const clattn__shape *s, const clattn__plan *p,
                                      const clattn__split *split, const clattn_tensor *q,
                                      const clattn_tensor *k, const clattn_tensor *v,
                                      const clattn_tensor *o, cl_mem lse, cl_uint num_wait,
                                      const cl_event *wait, cl_event *done);
/* How many key ranges a problem's plan should split into (1: none): only where the work-groups
 * of query blocks leave compute units idle, the keys are many, the plan is not an override and
 * the queue is in order (the workspace is reused call after call). */
unsigned clattn__split_count(const clattn_context *ctx, const clattn__shape *s,
                             const clattn__plan *p, unsigned *kv_per_split);
/* The split path: the kernel into the context's split workspace, then the merge into o, lse. */
clattn_status clattn__forward_split(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan *p, unsigned count, unsigned kv_per_split,
                                    const clattn_tensor *q, const clattn_tensor *k,
                                    const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                    cl_uint num_wait, const cl_event *wait, cl_event *done);
/* Whether a call of shape s split into count key ranges by plan p merges them in its own kernel
 * (a merge_in_kernel family where the context allows it, core.h's merge_fused, and a tile's rows
 * x ranges are few) rather than by merge_splits. */
int clattn__split_fused(const clattn_context *ctx, const clattn__shape *s, const clattn__plan *p,
                        unsigned count);
void clattn__split_release(clattn_context *ctx);
/* Releases the context's kv_append kernels (runtime/ops/kvcache.c). */
void clattn__kv_release(clattn_context *ctx);

/* ---- the backward (backward.c) ---- */

/* Enqueues the backward plan's kernels on queue (in order) for checked tensors, with D =
 * rowsum(dO o O) in drow; first and last (NULL allowed) get the events of the first and last
 * launch. */
clattn_status clattn__bwd_enqueue(clattn_context *ctx, cl_command_queue queue,
                                  const clattn__shape *s, const clattn__plan *p,
                                  const clattn_tensor *q, const clattn_tensor *k,
                                  const clattn_tensor *v, const clattn_tensor *d_o, cl_mem lse,
                                  cl_mem drow, const clattn_tensor *dq, const clattn_tensor *dk,
                                  const clattn_tensor *dv, cl_event *first, cl_event *last);
void clattn__backward_release(clattn_context *ctx);

/* ---- standard path (standard.c) ---- */

/* How the standard path splits a problem over batch*heads to fit global memory. */
typedef struct clattn__standard_plan {
  size_t head_workspace; /* bytes of one head's S/P matrix */
  size_t head_temp;      /* bytes CLBlast may allocate per head (padded copies), budgeted */
  size_t chunk;          /* heads per launch; 0: one head does not fit */
  size_t bytes;          /* held at once: chunk * (head_workspace + head_temp) */
  size_t limit;          /* what may be held: min(workspace limit, ...) */
} clattn__standard_plan;

/* matrices: N^2 matrices per head the call holds (forward 1: S/P; backward 2: P and dS). */
void clattn__standard_plan_of(const clattn_context *ctx, const clattn__shape *s, unsigned matrices,
                              clattn__standard_plan *out);
/* The same, with pack_bytes more per head in the workspace: packed copies of views CLBlast
 * cannot read in place (standard_pack.c). */
void clattn__standard_plan_packed(const clattn_context *ctx, const clattn__shape *s,
                                  unsigned matrices, size_t pack_bytes, clattn__standard_plan *out);
/* ctx->bwd_ws grown to at least bytes (its contents are then lost). */
clattn_status clattn__bwd_ws_reserve(clattn_context *ctx, size_t bytes);
/* D = rowsum(dO o O) per query row into ctx->bwd_ws (grown to fit), for both backward paths
 * (standard_bwd.c, with cl/standard.cl's bwd_rowdot). */
/* The sinks' gradient into s->d_sinks (nothing without it), from the LSE and the rows' D that
 * clattn__bwd_rowsum left in ctx->bwd_ws (cl/standard.cl's bwd_sinks; zeros without rows). */
clattn_status clattn__bwd_sinks(clattn_context *ctx, const clattn__shape *s, cl_mem lse);
clattn_status clattn__bwd_rowsum(clattn_context *ctx, const clattn__shape *s,
                                 const clattn_tensor *o, const clattn_tensor *d_o);
/* The backward with no queries or no keys on the standard path (standard.c, beside the
 * forward's empty keys): zeros in dk and dv, or dq. */
clattn_status clattn__standard_backward_empty(clattn_context *ctx, const clattn__shape *s,
                                              const clattn_tensor *dq, const clattn_tensor *dk,
                                              const clattn_tensor *dv);
/* The standard path's backward (standard_bwd.c), for checked tensors with seqlen_q and seqlen_kv
 * both positive, on an in-order queue. */
clattn_status clattn__standard_backward(clattn_context *ctx, const clattn__shape *s,
                                        const clattn_tensor *q, const clattn_tensor *k,
                                        const clattn_tensor *v, const clattn_tensor *o,
                                        const clattn_tensor *d_o, cl_mem lse,
                                        const clattn_tensor *dq, const clattn_tensor *dk,
                                        const clattn_tensor *dv);
/* Enqueues the standard path for checked tensors. */
clattn_status clattn__standard_forward(clattn_context *ctx, const clattn__shape *s,
                                       const clattn_tensor *q, const clattn_tensor *k,
                                       const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                       cl_uint num_wait, const cl_event *wait, cl_event *done);
/* Pieces of the standard path shared by its forward and backward (standard.c): a batched GEMM
 * C = alpha op(A) op(B) + beta C (row-major; strided-batched when one stride covers the batch;
 * alphas and betas are count floats of scratch), a kernel of cl/standard.cl by name and build
 * options, the workspace grown to bytes, a launch of items work-groups of wg (the argument
 * base_arg takes the first group), and the check that CLBlast can address every view. */
clattn_status clattn__std_gemm(clattn_context *ctx, const char *what, int trans_a, int trans_b,
                               size_t m, size_t n, size_t k, float alpha, cl_mem a,
                               const size_t *ao, size_t lda, cl_mem b, const size_t *bo, size_t ldb,
                               float beta, cl_mem c, const size_t *co, size_t ldc, size_t count,
                               float *alphas, float *betas);
clattn_status clattn__std_kernel(clattn_context *ctx, const char *name, const char *options,
                                 cl_kernel *out);
/* The element kernels' options: work-group wg, cpi columns per work-item (softmax_rows), the
 * causal mask and the variants' defines (cl/standard.cl). */
void clattn__std_options(const clattn_context *ctx, const clattn__shape *s, size_t wg, unsigned cpi,
                         char *out, size_t len);
clattn_status clattn__std_workspace(clattn_context *ctx, size_t bytes);
clattn_status clattn__std_launch(clattn_context *ctx, cl_kernel k, cl_uint base_arg, size_t items,
                                 size_t wg);
clattn_status clattn__std_addressable(clattn_context *ctx, const clattn__shape *s,
                                      const clattn_tensor *q, const clattn_tensor *k,
                                      const clattn_tensor *v, const clattn_tensor *o);
/* A GEMM operand of the standard path (standard_pack.c): the [rows][cols] matrix of each
 * batch*heads entry of view t (group: query heads per head of t), read or written in place
 * (direct: CLBlast can take t's row stride as its leading dimension: one row, or stride_seq >=
 * cols), or through fp32 copies (packed) in the workspace from element pack_at, one per entry of
 * a chunk (slots of them): for inputs that are not direct, and for every operand in half
 * storage. A packed input is copied in before its GEMMs (clattn__std_operand_load); a packed
 * output is written there by its GEMMs and rounded into t after them
 * (clattn__std_operand_store). buf and ld are what CLBlast gets. */
typedef struct clattn__std_operand {
  const clattn_tensor *t;
  size_t rows, cols, group;
  int output, direct, packed;
  size_t pack_at, slots;
  cl_mem buf;
  size_t ld;
} clattn__std_operand;
void clattn__std_operand_init(clattn__std_operand *op, const clattn_tensor *t, size_t rows,
                              size_t cols, size_t group, clattn_dtype dtype, int output);
/* Bytes per batch*heads entry of the packed copies of n operands; their places in a workspace
 * of chunk entries, from element at on. */
size_t clattn__std_pack_bytes(const clattn__std_operand *ops, int n);
void clattn__std_operands_place(clattn__std_operand *ops, int n, size_t chunk, size_t at);
/* Element offsets of entries [first, first + count) into off; enqueues the packed copies of an
 * input first (op->buf becomes the workspace; for a packed output, the offsets are its slots). */
clattn_status clattn__std_operand_load(clattn_context *ctx, const clattn__shape *s,
                                       clattn__std_operand *op, size_t first, size_t count,
                                       size_t *off);
/* After the GEMMs of entries [first, first + count): a packed output's finished matrices rounded
 * into its view (under GQA, a K/V head whose last query head is in a later chunk waits for it);
 * nothing for any other operand. */
clattn_status clattn__std_operand_store(clattn_context *ctx, const clattn__shape *s,
                                        const clattn__std_operand *op, size_t first, size_t count);
/* UNSUPPORTED, naming it, when an output operand is not direct (validation rejects such outputs
 * as overlapping themselves first: a safety net before anything is enqueued). */
clattn_status clattn__std_outputs_direct(clattn_context *ctx, const clattn__std_operand *ops,
                                         const char *const *names, int n);
void clattn__std_kernels_release(clattn_context *ctx);
void clattn__standard_release(clattn_context *ctx);

#endif
