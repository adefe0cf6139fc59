/* The tuner's backward problems: random Q, K, V and dO on the device in bhsd layout, O and LSE
 * from the context's forward plan, D = rowsum(dO o O) in a buffer of the instance's own (so
 * two instances can coexist), and for a checked instance the double-precision reference
 * gradients with DESIGN.md's tolerance (3x the naive fp32 loop's error, plus 1e-6). */
#include "internal.h"
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { Q, K, V, O, DO, DQ, DK, DV, TENSORS };

struct clattn__bwd_bench {
  clattn_context *ctx;
  cl_command_queue queue;
  clattn__shape s;
  clattn_tensor t[TENSORS];
  size_t elems[TENSORS];
  cl_mem lse, drow;
  float *host[TENSORS]; /* Q, K, V, dO (inputs); dQ, dK, dV (read back) */
  double *ref[3];       /* dQ, dK, dV; NULL without a reference */
  double tol[3];
};

static clattn_problem problem_of(const clattn__shape *s) {
  clattn_problem p = {0};
  p.batch = s->batch, p.heads_q = s->heads_q, p.heads_kv = s->heads_kv;
  p.seqlen_q = s->seqlen_q, p.seqlen_kv = s->seqlen_kv;
  p.head_dim = s->d, p.head_dim_v = s->dv, p.scale = s->scale;
  p.flags = s->causal ? CLATTN_CAUSAL : 0;
  return p;
}

static ref_view host_view(const clattn__bwd_bench *b, int i) {
  ref_view v = {b->host[i], 0, b->t[i].stride_batch, b->t[i].stride_seq, b->t[i].stride_head};
  return v;
}

/* The reference gradients and, from the naive fp32 loop's error against them, the tolerances. */
static clattn_status reference(clattn__bwd_bench *b) {
  clattn_problem p = problem_of(&b->s);
  float *naive[3] = {NULL, NULL, NULL};
  for (int g = 0; g < 3; g++) {
    size_t n = b->elems[DQ + g] ? b->elems[DQ + g] : 1;
    b->ref[g] = malloc(n * sizeof(double));
    naive[g] = malloc(n * sizeof(float));
  }
  clattn_status st = CLATTN_OK;
  if (!b->ref[0] || !b->ref[1] || !b->ref[2] || !naive[0] || !naive[1] || !naive[2]) {
    st = clattn__fail(b->ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  } else {
    ref_view q = host_view(b, Q), k = host_view(b, K), v = host_view(b, V), g = host_view(b, DO);
    ref_backward_f64(&p, q, k, v, g, b->ref[0], b->ref[1], b->ref[2]);
    ref_backward_f32(&p, q, k, v, g, naive[0], naive[1], naive[2]);
    for (int i = 0; i < 3; i++) {
      double e = 0;
      for (size_t j = 0; j < b->elems[DQ + i]; j++) e = fmax(e, fabs(naive[i][j] - b->ref[i][j]));
      b->tol[i] = 3 * e + 1e-6;
    }
  }
  for (int g = 0; g < 3; g++) free(naive[g]);
  return st;
}

clattn_status clattn__bwd_bench_new(clattn_context *ctx, cl_command_queue queue,
                                    const clattn__shape *s, int with_reference,
                                    clattn__bwd_bench **out) {
  clattn__bwd_bench *b = calloc(1, sizeof *b);
  *out = b;
  if (!b) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  b->ctx = ctx, b->queue = queue, b->s = *s;
  size_t seq[TENSORS] = {s->seqlen_q, s->seqlen_kv, s->seqlen_kv, s->seqlen_q,
                         s->seqlen_q, s->seqlen_q,  s->seqlen_kv, s->seqlen_kv};
  size_t heads[TENSORS] = {s->heads_q, s->heads_kv, s->heads_kv, s->heads_q,
                           s->heads_q, s->heads_q,  s->heads_kv, s->heads_kv};
  size_t dims[TENSORS] = {s->d, s->d, s->dv, s->dv, s->dv, s->d, s->d, s->dv};
  uint64_t rng = 0x3C6EF372FE94F82Bull;
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < TENSORS; i++) {
    size_t n;
    if (__builtin_mul_overflow(s->batch * heads[i], seq[i], &n) ||
        __builtin_mul_overflow(n, dims[i], &n) || n > SIZE_MAX / 8)
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "tuning problem too large");
    b->elems[i] = n;
    b->t[i] = clattn_bhsd(NULL, seq[i], heads[i], dims[i]);
    int input = i == Q || i == K || i == V || i == DO, output = i >= DQ;
    if (input || output) {
      b->host[i] = malloc((n ? n : 1) * sizeof(float));
      if (!b->host[i]) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
      if (input) ref_fill_normal(b->host[i], n, &rng);
    }
    b->t[i].buffer = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | (input ? CL_MEM_COPY_HOST_PTR : 0),
                                    (n ? n : 1) * sizeof(float), input ? b->host[i] : NULL, &err);
    if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateBuffer (tuning data)");
  }
  size_t rows = s->batch * s->heads_q * s->seqlen_q, bytes = (rows ? rows : 1) * sizeof(float);
  b->lse = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err == CL_SUCCESS) b->drow = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateBuffer (tuning rows)");
  /* O and LSE from the forward; D through the context's workspace into this instance's own. */
  const clattn__plan *fp;
  clattn_status st = clattn__plan_for_grid(ctx, s, &fp);
  if (st == CLATTN_OK)
    st = clattn__enqueue_forward(ctx, ctx->queue, ctx->queue_in_order, s, fp, NULL, &b->t[Q],
                                 &b->t[K], &b->t[V], &b->t[O], b->lse, 0, NULL, NULL);
  if (st == CLATTN_OK && rows) st = clattn__bwd_rowsum(ctx, s, &b->t[O], &b->t[DO]);
  if (st == CLATTN_OK && rows) {
    err = clEnqueueCopyBuffer(ctx->queue, ctx->bwd_ws, b->drow, 0, 0, rows * sizeof(float), 0, NULL,
                              NULL);
    if (err == CL_SUCCESS) err = clFinish(ctx->queue);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "preparing the backward's inputs");
  }
  if (st == CLATTN_OK && with_reference) st = reference(b);
  return st;
}

double clattn__bwd_bench_run(clattn__bwd_bench *b, const clattn__bwd_plan *p) {
  cl_event first = NULL, last = NULL;
  clattn_status st =
      clattn__bwd_enqueue(b->ctx, b->queue, &b->s, p, &b->t[Q], &b->t[K], &b->t[V], &b->t[DO],
                          b->lse, b->drow, &b->t[DQ], &b->t[DK], &b->t[DV], &first, &last);
  double ms = -1.0;
  cl_ulong t0 = 0, t1 = 0;
  cl_int err = CL_SUCCESS;
  if (st == CLATTN_OK && first && last) {
    err = clWaitForEvents(1, &last);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    if (err == CL_SUCCESS)
      ms = t1 > t0 ? (double)(t1 - t0) * 1e-6 : 0.0;
    else
      clattn__fail_cl(b->ctx, err, "running the backward candidate"); /* for the tuner's note */
  }
  if (first) clReleaseEvent(first);
  if (last) clReleaseEvent(last);
  return ms;
}

void clattn__bwd_bench_check(clattn__bwd_bench *b, char *why, size_t len) {
  static const char *const names[3] = {"dq", "dk", "dv"};
  why[0] = 0;
  for (int g = 0; g < 3; g++) {
    size_t n = b->elems[DQ + g];
    cl_int err = n ? clEnqueueReadBuffer(b->queue, b->t[DQ + g].buffer, CL_TRUE, 0,
                                         n * sizeof(float), b->host[DQ + g], 0, NULL, NULL)
                   : CL_SUCCESS;
    if (err != CL_SUCCESS) {
      snprintf(why, len, "reading %s failed: %s", names[g], clattn__cl_error_name(err));
      return;
    }
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
      float x = b->host[DQ + g][i];
      if (!isfinite(x)) {
        snprintf(why, len, "non-finite %s at element %zu", names[g], i);
        return;
      }
      if (b->ref[g]) worst = fmax(worst, fabs(x - b->ref[g][i]));
    }
    if (b->ref[g] && !(worst <= b->tol[g])) {
      snprintf(why, len, "wrong result: max|%s - ref| %.3g (tolerance %.3g)", names[g], worst,
               b->tol[g]);
      return;
    }
  }
}

void clattn__bwd_bench_free(clattn__bwd_bench *b) {
  if (!b) return;
  for (int i = 0; i < TENSORS; i++) {
    if (b->t[i].buffer) clReleaseMemObject(b->t[i].buffer);
    free(b->host[i]);
  }
  if (b->lse) clReleaseMemObject(b->lse);
  if (b->drow) clReleaseMemObject(b->drow);
  for (int g = 0; g < 3; g++) free(b->ref[g]);
  free(b);
}
