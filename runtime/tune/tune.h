/* The tune layer (docs/DESIGN.md): the autotuner (tune.c), which walks the registry's space of
 * any pass, and its problems (tune_fwd.c, tune_bwd.c, tune_bwd_rows.c), checked against the
 * double-precision host reference (reference.c, reference_bwd.c). Uses every layer below.
 *
 * The tuner's problems: random inputs of one shape on
 * the device and what a candidate's outputs are checked against. Each tuner keeps two of a class:
 * a small one (a short sequence, at most 2 batches and 2 K/V heads, the head dims, causality and
 * GQA ratio of the class) checked on every row against the double-precision reference, and the
 * timed one, checked on sampled rows (its full reference would take minutes at large N). Before a
 * checked run every output is filled with NaN, so an element a candidate leaves unwritten can
 * never pass for the previous candidate's result. */
#ifndef CLATTN_TUNE_H
#define CLATTN_TUNE_H

#include "ops.h"
#include "reference.h"

/* The small problem of the class of s: its own sizes capped at 2 batches, 2 K/V heads (with
 * their query heads), 203 query rows and 211 keys (so blocks are partial). */
clattn__shape clattn__tune_small_shape(const clattn__shape *s);
/* The reference problem of a shape (the causal flag, the resolved scale). */
clattn_problem clattn__tune_problem_of(const clattn__shape *s);
/* Keys row i of a shape sees (causal: bottom-right aligned). */
size_t clattn__tune_visible(const clattn__shape *s, size_t i);
/* Fills n floats of buf with NaN on queue (not waited for); _as: n elements of storage t. */
cl_int clattn__tune_poison(cl_command_queue queue, cl_mem buf, size_t n);
cl_int clattn__tune_poison_as(cl_command_queue queue, cl_mem buf, clattn_dtype t, size_t n);
/* A tensor of n elements in storage t from host floats (half: rounded to the type, and host
 * rounded with them, so the references see what the device does). */
clattn_status clattn__tune_upload(clattn_context *ctx, clattn_dtype t, float *host, size_t n,
                                  cl_mem *out);
/* n elements of storage t read back (blocking) as floats. */
cl_int clattn__tune_read(cl_command_queue queue, cl_mem buf, clattn_dtype t, float *out, size_t n);

/* ---- a KV cache class's problems (tune_kv.c) ---- */

/* The rows per sequence the bench lays out for a cache shape: seqlen_kv, padded to whole pages
 * when paged. */
/* options.kv_cache: s becomes the class of decode calls over such a cache (the benches lay out
 * its buffers below); INVALID_ARGUMENT for a backward, a dtype or a page size it cannot be. */
clattn_status clattn__tune_kv_class(clattn_context *ctx, const clattn_kv_cache *c,
                                    clattn__pass pass, clattn__shape *s);
size_t clattn__tune_kv_rows(const clattn__shape *s);
/* An int8 cache's K or V: rows of dim values of host quantised onto the device with their
 * scales, and host dequantised in place (the other element types upload as any tensor). */
clattn_status clattn__tune_kv_upload_i8(clattn_context *ctx, float *host, size_t rows, size_t dim,
                                        cl_mem *data, cl_mem *scales);
/* The rest of the cache (lengths all seqlen_kv, an identity block table), into extra[0..1] and
 * the shape, whose scales are extra[2..3]; k and v become the pool's page views when paged. */
clattn_status clattn__tune_kv_attach(clattn_context *ctx, clattn__shape *s, clattn_tensor *k,
                                     clattn_tensor *v, cl_mem extra[4]);

/* ---- the forward's (tune_fwd.c) ---- */

typedef struct clattn__fwd_bench clattn__fwd_bench;
/* every_row: the reference of every row, else of sampled rows (the first and last rows of the
 * first and last heads, and rows spread over the rest). */
clattn_status clattn__fwd_bench_new(clattn_context *ctx, cl_command_queue queue,
                                    const clattn__shape *s, int every_row, clattn__fwd_bench **out);
/* One run of p (poison: O and LSE filled with NaN first), timed by its event: milliseconds,
 * < 0 on failure (the context's last error says why). */
double clattn__fwd_bench_run(clattn__fwd_bench *b, const clattn__plan *p, int poison);
/* After a poisoned run: "" when every element of O and LSE was written, is finite (LSE -inf
 * exactly for rows that see no key) and the checked rows are within DESIGN.md's tolerance. */
void clattn__fwd_bench_check(clattn__fwd_bench *b, char *why, size_t len);
void clattn__fwd_bench_free(clattn__fwd_bench *b);

/* ---- the backward's (tune_bwd.c) ---- */

/* Random Q, K, V, dO of a shape on the device, with O and LSE from the context's forward plan
 * (checked: every element written, and sampled rows against the double reference) and D; and
 * either (reference) the double reference gradients of every row, or those of sampled rows. */
typedef struct clattn__bwd_bench clattn__bwd_bench;
clattn_status clattn__bwd_bench_new(clattn_context *ctx, cl_command_queue queue,
                                    const clattn__shape *s, int reference, clattn__bwd_bench **out);
/* One run of p's kernels on queue (poison: dQ, dK and dV filled with NaN first), timed by its
 * events: milliseconds, < 0 on failure. */
double clattn__bwd_bench_run(clattn__bwd_bench *b, const clattn__plan *p, int poison);
/* After a poisoned run: "" when every gradient element was written and is finite and the
 * checked rows are within tolerance. */
void clattn__bwd_bench_check(clattn__bwd_bench *b, char *why, size_t len);
void clattn__bwd_bench_free(clattn__bwd_bench *b);

/* ---- the backward's sampled rows (tune_bwd_rows.c) ---- */

/* Views of Q, K, V and dO on the host, and the shape. */
typedef struct clattn__bwd_host {
  clattn__shape s;
  ref_view q, k, v, d_o;
} clattn__bwd_host;

/* Row (b, h, i) from scratch, in double and in the naive loop of the shape's storage (half: the
 * same-precision one): dq gets head_dim values; lse and drow the row's log-sum-exp and D. scratch
 * holds 2 seqlen_kv + head_dim_v values of the type. */
void clattn__bwd_row_dq_f64(const clattn__bwd_host *h, size_t b, size_t hq, size_t i,
                            double *scratch, double *dq, double *lse, double *drow);
void clattn__bwd_row_dq_f32(const clattn__bwd_host *h, size_t b, size_t hq, size_t i,
                            float *scratch, float *dq, float *lse, float *drow);
/* Key row (b, hk, j) of dK (head_dim values) and dV (head_dim_v), summed over the query heads of
 * the GQA group, from the given LSE and D of every query row ([batch][heads_q][seqlen_q]). */
void clattn__bwd_row_dkdv_f64(const clattn__bwd_host *h, const float *lse, const float *drow,
                              size_t b, size_t hk, size_t j, double *dk, double *dv);
void clattn__bwd_row_dkdv_f32(const clattn__bwd_host *h, const float *lse, const float *drow,
                              size_t b, size_t hk, size_t j, float *dk, float *dv);

#endif
