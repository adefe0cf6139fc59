/* Host references for checking clattn's results: attention in double precision (the reference)
 * and the straightforward fp32 loop (the "naive" implementation the tolerance rule of
 * DESIGN.md is relative to), plus a helper (tools/check.c) that runs one problem on random data
 * on a device and compares. The runtime's tuner (correctness gate), the tests and `clattn run`
 * use them; they need only clattn's public types. */
#ifndef CLATTN_REFERENCE_H
#define CLATTN_REFERENCE_H

#include "clattn.h"

#include <stdint.h>

/* Half storage (CLATTN_F16, CLATTN_BF16): a float's 16-bit pattern, rounded to nearest even
 * (NaN stays NaN), and back; ref_round rounds a float to the type (unchanged for CLATTN_F32).
 * The views below hold floats; half inputs are the rounded values. */
uint16_t ref_half_bits(clattn_dtype t, float x);
float ref_half_value(clattn_dtype t, uint16_t bits);
float ref_round(clattn_dtype t, float x);
/* The rule's constant: 1e-6 for fp32 storage, 1e-4 for half (FlashAttention's test rule). */
double ref_tolerance_floor(clattn_dtype t);

/* N(0, 1) samples from a seeded generator (state must not be 0). */
void ref_fill_normal(float *x, size_t n, uint64_t *state);

/* A strided host view with clattn_tensor's meaning. */
typedef struct ref_view {
  const float *data;
  size_t offset, stride_batch, stride_seq, stride_head;
} ref_view;

/* The keys row i sees, [*lo, *hi) (empty when *lo == *hi), under the problem's causal mask (either
 * alignment) and window; and a score through its softcap (unchanged when softcap is 0). Written
 * from clattn.h's definitions, apart from the runtime's own (core/validate.c). */
void ref_keys(const clattn_problem *p, size_t i, size_t *lo, size_t *hi);
double ref_cap(const clattn_problem *p, double s);

/* The variants whose values are arrays (clattn_args'): ALiBi's slopes ([heads_q], or
 * [batch][heads_q] with CLATTN_ALIBI_PER_BATCH in the problem's flags), the sinks' logits
 * ([heads_q]) and a padded batch's key lengths ([batch]); a NULL member is absent. ref_slope is
 * the slope of (b, h), 0 without ALiBi; ref_entry the problem of batch entry b alone as the
 * masks see it: seqlen_kv its key length (an entry out of [0, seqlen_kv] has none). */
typedef struct ref_extras {
  const float *alibi, *sinks;
  const int *seqlens_kv;
} ref_extras;
double ref_slope(const clattn_problem *p, const ref_extras *x, size_t b, size_t h);
clattn_problem ref_entry(const clattn_problem *p, const ref_extras *x, size_t b);

/* o: packed [batch][heads_q][seqlen_q][head_dim_v]; lse: packed [batch][heads_q][seqlen_q] or
 * NULL. Defaults of the problem (heads_kv, head_dim_v, scale) are applied here. */
void ref_forward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, double *o,
                     double *lse);
/* The same with ALiBi and sinks (x may be NULL). */
void ref_forward_ex_f64(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                        ref_view v, double *o, double *lse);
void ref_forward_ex_f32(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                        ref_view v, float *o, float *lse);
/* The naive implementation in the problem's storage: the fp32 loop for CLATTN_F32; for half
 * storage the same-precision one (S, P and O rounded to the type, fp32 sums). */
void ref_forward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, float *o,
                     float *lse);
/* One row (b, h, i) of the same: o_row gets head_dim_v values; lse may be NULL. The tuner's
 * correctness gate checks sampled rows with these. */
void ref_row_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                 size_t i, double *o_row, double *lse);
void ref_row_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, size_t b, size_t h,
                 size_t i, float *o_row, float *lse);

/* Gradients for the upstream gradient d_o (a view like O): dq packed [batch][heads_q][seqlen_q]
 * [head_dim], dk [batch][heads_kv][seqlen_kv][head_dim], dv [...][head_dim_v]
 * (runtime/reference_bwd.c). */
void ref_backward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, ref_view d_o,
                      double *dq, double *dk, double *dv);
void ref_backward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, ref_view d_o,
                      float *dq, float *dk, float *dv);
/* The same with ALiBi and sinks (x may be NULL); d_sinks, when not NULL, gets the sinks'
 * gradient [heads_q] (0 without sinks). */
void ref_backward_ex_f64(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                         ref_view v, ref_view d_o, double *dq, double *dk, double *dv,
                         double *d_sinks);
void ref_backward_ex_f32(const clattn_problem *p, const ref_extras *x, ref_view q, ref_view k,
                         ref_view v, ref_view d_o, float *dq, float *dk, float *dv, float *d_sinks);

#endif
