/* Host references for checking clattn's results: attention in double precision (the reference)
 * and the straightforward fp32 loop (the "naive" implementation the tolerance rule of
 * docs/DESIGN is relative to), plus a helper that runs one problem on random data on a device
 * and compares. Used by the tests and by `clattn run`; only clattn's public API is used. */
#ifndef CLATTN_REFERENCE_H
#define CLATTN_REFERENCE_H

#include "clattn.h"

/* A strided host view with clattn_tensor's meaning. */
typedef struct ref_view {
  const float *data;
  size_t offset, stride_batch, stride_seq, stride_head;
} ref_view;

/* o: packed [batch][heads_q][seqlen_q][head_dim_v]; lse: packed [batch][heads_q][seqlen_q] or
 * NULL. Defaults of the problem (heads_kv, head_dim_v, scale) are applied here. */
void ref_forward_f64(const clattn_problem *p, ref_view q, ref_view k, ref_view v, double *o,
                     double *lse);
void ref_forward_f32(const clattn_problem *p, ref_view q, ref_view k, ref_view v, float *o,
                     float *lse);

/* One checked run: random N(0,1) data laid out as asked, forward on the device, compared with
 * the references under the rule max|out - ref| <= 2 * max|naive - ref| + 1e-6. */
typedef struct check_spec {
  clattn_problem problem;
  int bhsd;      /* 0: [B][S][H][D] views, 1: [B][H][S][D] */
  size_t offset; /* elements before each tensor's first element in its buffer */
  int with_lse;
  unsigned seed;
  int warmup, repeat; /* timing runs after the checked one (0: none) */
  int skip_check;     /* time only (large problems) */
} check_spec;

typedef struct check_result {
  clattn_status status; /* of the clattn calls; message in clattn_last_error(ctx) */
  double err_o, naive_err_o, tol_o;
  double err_lse, naive_err_lse, tol_lse;
  int pass;                         /* status OK and both errors within tolerance */
  double median_ms, min_ms, max_ms; /* of the timing runs (OpenCL event profiling) */
  int timed_by_events;              /* 0: the queue has no profiling; wall clock was used */
} check_result;

/* Returns CLATTN_OK when everything ran (whether or not the result passed). */
clattn_status check_run(clattn_context *ctx, const check_spec *spec, check_result *out);

#endif
