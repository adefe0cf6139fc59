/* One checked (and optionally timed) run of clattn_forward on random data, against the host
 * references. Used by the tests and `clattn run`, through the public API only. */
#ifndef CLATTN_CHECK_H
#define CLATTN_CHECK_H

#include "reference.h"

/* One checked run: random N(0,1) data laid out as asked, forward on the device, compared with
 * the references under the rule max|out - ref| <= 2 * max|naive - ref| + 1e-6 (half storage:
 * the same-precision naive implementation, + 1e-4). */
typedef struct check_spec {
  clattn_problem problem;
  int bhsd;      /* 0: [B][S][H][D] views, 1: [B][H][S][D] */
  size_t offset; /* elements before each tensor's first element in its buffer */
  int with_lse;
  unsigned seed;
  int warmup, repeat;           /* timing runs after the checked one (0: none) */
  int skip_check;               /* time only (large problems) */
  clattn_context *compare_with; /* timed call by call in turn with the context (same device,
                                   same OpenCL context); results in cmp_* */
  int alibi;      /* ALiBi: BLOOM's slopes 2^(-8 (h + 1) / heads_q), with CLATTN_ALIBI_PER_BATCH in
                     the flags scaled by 1 + b / 2 for batch entry b (check_make_extras) */
  int sinks;      /* sinks: N(0, 1) logits + 1 per head (head 2, where there is one, -inf) */
  int seqlens_kv; /* a padded batch: entry b's key length seqlen_kv, 2/3 of it + 1, 0, -3 (out
                     of range: no keys) and seqlen_kv + 5 (likewise), by b % 5 */
  const size_t *lengths; /* when not NULL, batch lengths instead of the patterns: seqlens_kv's
                            key lengths, or varlen's (queries and keys alike) */
} check_spec;

typedef struct check_result {
  clattn_status status; /* of the clattn calls; message in clattn_last_error(ctx) */
  double err_o, naive_err_o, tol_o;
  double err_lse, naive_err_lse, tol_lse;
  int pass;                         /* status OK and both errors within tolerance */
  double median_ms, min_ms, max_ms; /* of the timing runs (OpenCL event profiling) */
  int timed_by_events;              /* 0: the queue has no profiling; wall clock was used */
  double cmp_median_ms, cmp_min_ms, cmp_max_ms; /* of compare_with */
} check_result;

/* One call's time in ms: check_call_begin before it (the wall clock and, by_events, a marker),
 * check_call_end after it on the call's done event (NULL: the call failed, -1). By the events
 * where by_events (a marker's end to the event's end where the call returned a marker, else the
 * kernel's start to end), else by the wall clock; both events released. */
typedef struct check_clock {
  double t0;
  cl_event start;
} check_clock;
check_clock check_call_begin(clattn_context *ctx, int by_events);
double check_call_end(check_clock *c, cl_event ev, int by_events);
/* One call of clattn_forward_ex, waited for; its time in ms from OpenCL events (by_events: the
 * queue has profiling) or the wall clock; < 0 on failure, with *st. */
double check_time_forward_ex(clattn_context *ctx, const clattn_problem *p, const clattn_args *a,
                             int by_events, clattn_status *st);
/* The same through clattn_forward's tensors. */
double check_time_forward(clattn_context *ctx, const clattn_problem *p, const clattn_tensor *q,
                          const clattn_tensor *k, const clattn_tensor *v, const clattn_tensor *o,
                          cl_mem lse, int by_events, clattn_status *st);

/* The variants' arrays of a checked run (sp->alibi, sp->sinks): host values (NULL: absent) and
 * device buffers, d_sinks (the backward's, started NaN) when asked for. */
typedef struct check_extras {
  float *alibi, *sinks;
  int *seqlens_kv;
  cl_mem alibi_buf, sinks_buf, d_sinks_buf, seqlens_buf;
} check_extras;
cl_int check_make_extras(clattn_context *ctx, const check_spec *sp, int d_sinks, check_extras *x);
void check_release_extras(check_extras *x);
/* The references' view of them, and clattn_args' members set from them. */
ref_extras check_ref_extras(const check_extras *x);
void check_set_args(clattn_args *a, const check_extras *x);

/* A tensor of a checked run: host copy, device buffer and its view. */
struct check_tensor;
typedef struct check_tensor {
  float *host;
  size_t elems; /* in the buffer, offset included */
  cl_mem buf;
  clattn_tensor view;
} check_tensor;
/* Bytes per element of a storage type; the 16-bit patterns of n floats (NULL for CLATTN_F32,
 * which needs none; caller frees); a blocking read of n elements of buf as floats. */
size_t check_elem_size(clattn_dtype t);
void *check_pack(clattn_dtype t, const float *x, size_t n);
cl_int check_read(cl_command_queue queue, cl_mem buf, clattn_dtype t, float *out, size_t n,
                  cl_uint num_wait, const cl_event *wait);
/* Random N(0,1) data [batch][seq][heads][dim] (or bhsd) after sp->offset elements, in the
 * problem's storage type (host copy: the stored values, as floats). */
cl_int check_make_tensor(cl_context cl, check_tensor *t, const check_spec *sp, size_t seq,
                         size_t heads, size_t dim, uint64_t *rng);
ref_view check_host_view(const check_tensor *t);

/* One checked run of clattn_backward (after clattn_forward for O and LSE): gradients against
 * the double reference under max|g - ref| <= 3 * max|naive - ref| + 1e-6 (half storage: the
 * same-precision naive, + 1e-4; tools/check_bwd.c). Timing, when sp->repeat > 0, is of the
 * backward call alone. */
typedef struct check_bwd_result {
  clattn_status status;
  double err[3], naive_err[3], tol[3];          /* dq, dk, dv */
  double err_sinks, naive_err_sinks, tol_sinks; /* d_sinks, with sp->sinks */
  int pass;
  double median_ms, min_ms, max_ms;
} check_bwd_result;
clattn_status check_backward_run(clattn_context *ctx, const check_spec *sp, check_bwd_result *r);

/* Packed variable-length sequences (CLATTN_VARLEN; tools/check_varlen.c). The lengths of the
 * problem's batch of sequences by b % 4: the longest (seqlen_q by seqlen_kv), seqlen_q / 2 + 1 by
 * seqlen_kv / 3 + 1, no queries by seqlen_kv / 2 keys, one query by no keys (or lengths[b] for
 * both, capped at the maxima); cu_q and cu_kv get batch + 1 offsets. */
void check_varlen_lengths(const clattn_problem *p, const size_t *lengths, int *cu_q, int *cu_kv);
typedef struct check_varlen_result {
  clattn_status status;
  double err_o, tol_o, err_lse, tol_lse; /* forward */
  double err[3], tol[3];                 /* dq, dk, dv (backward) */
  double err_sinks, tol_sinks;           /* with sp->sinks and backward */
  int pass;
  double median_ms; /* of sp->repeat timed calls of the forward (or backward) after sp->warmup */
} check_varlen_result;
/* One run on random data, the problem's batch being its sequences (seqlen_q, seqlen_kv: the
 * longest; CLATTN_VARLEN and the totals set here), layout and offset as sp's, ALiBi and sinks as
 * asked: every output (O, LSE, and with backward dQ, dK, dV, d_sinks) starts NaN, the forward
 * (and backward) runs, and each sequence's rows are compared with the references of that
 * sequence alone under DESIGN.md's rule (not with sp->skip_check); then sp->repeat timed calls
 * of the pass (OpenCL events, from a marker before each to its end). */
clattn_status check_varlen_run(clattn_context *ctx, const check_spec *sp, int backward,
                               check_varlen_result *r);

/* Set by the tests under CLATTN_TEST_FAIL_FAST (the no-kernel selftests, tests/common.c): once
 * a check run of the process has failed, later ones run nothing and pass, so that a case fails
 * by its own assertion on the first failure without computing the rest of its shapes. */
extern int check_fail_fast;
/* The end of a check run: pass is 0 where the call failed; a failure is remembered. */
void check_finish(clattn_status st, int *pass);
/* Whether a check run is to be skipped (check_fail_fast, after a failure): it then passes. */
int check_skipped(void);

/* Returns CLATTN_OK when everything ran (whether or not the result passed). */
clattn_status check_run(clattn_context *ctx, const check_spec *spec, check_result *out);
/* O (o->host: the device's output read back) and LSE (NULL: not asked for) of a forward against
 * the references on the host views, under DESIGN.md's rule: r's errors, tolerances and pass. */
void check_forward_errors(const clattn_problem *p, const ref_extras *rx, ref_view vq, ref_view vk,
                          ref_view vv, const check_tensor *o, const float *lse, check_result *r);

/* A KV cache (clattn_kv_cache; tools/check_kvcache.c): the problem's seqlen_kv is its capacity,
 * seqlen_q the query rows per sequence. */
typedef struct check_kv {
  clattn_dtype dtype; /* the cache's: the problem's or CLATTN_I8 */
  size_t page_size;   /* 0: contiguous */
  int hnd;            /* paged: [page][head][token][dim] instead of [page][token][head][dim] */
  size_t first;       /* the first append's rows (the second brings the rest up to capacity) */
  int bad_pages;      /* entry 1's block-table row out of the pool (read as no keys) */
  /* Written by the run: the K/V bytes (and int8 scales) a forward must read, the keys some row
   * of each entry sees (the whole length without a window); the cache's copies the timed calls
   * rotated through, so that together they exceed twice the device's last-level cache. */
  double bytes_read;
  int copies;
  double host_us; /* median wall-clock time of clattn_forward_ex's return on an idle queue, not
                     waited for */
  /* With repeats: the median device time of a decode step's append (tools/check_append.c) and
   * the bytes it moves (the new rows read, the cache's rows and int8 scales written). */
  double append_us, append_bytes;
  /* int8, checked: O against the exact result on the rows before quantisation, max |diff| /
   * max |ref| and mean |diff| / mean |ref|. */
  double q8_max_rel, q8_mean_rel;
  clattn_plan_info plan; /* clattn_explain_ex of the forward call */
} check_kv;
/* One run: random K and V written into the cache by two clattn_kv_append calls (at length 0,
 * then at kv->first: across pages), each entry's length then set (sp->lengths, else the
 * capacity, 2/3 of it + 1, 0, 1, -3 and capacity + 5 by b % 6: out of range is no keys), the
 * cache read back (dequantised) for the references, and a forward over it with O and LSE
 * starting NaN, checked under DESIGN.md's rule; appends' values are checked against the rows
 * they were given (exact, or int8 within half a quantum) in *append_err (0: right). Then, with
 * sp->repeat, sp->warmup and sp->repeat timed forwards (OpenCL events; not with skip_check:
 * the check always runs), rotating through copies of the cache. */
clattn_status check_kvcache_run(clattn_context *ctx, const check_spec *sp, check_kv *kv,
                                check_result *r, double *append_err);
/* The append of a decode step (seqlen_q new rows a sequence, at each entry's length in lens less
 * those rows: entries shorter than that, or out of range, append nothing; the lengths restored
 * after) into cache c, sp->warmup then sp->repeat times, timed
 * by its OpenCL event: kv->append_us and kv->append_bytes. */
clattn_status check_time_append(clattn_context *ctx, const check_spec *sp, const clattn_kv_cache *c,
                                const int *lens, check_kv *kv);

#endif
