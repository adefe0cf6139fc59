/* One checked run of clattn_backward on random data, against the host gradient references. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* max |device - ref| and |naive - ref| over one gradient, gathered from its strided view. */
static void compare(const check_tensor *t, size_t batch, size_t heads, size_t seq, size_t dim,
                    const double *ref, const float *naive, double *err, double *nerr) {
  *err = 0, *nerr = 0;
  for (size_t b = 0; b < batch; b++)
    for (size_t h = 0; h < heads; h++)
      for (size_t i = 0; i < seq; i++)
        for (size_t c = 0; c < dim; c++) {
          size_t r = ((b * heads + h) * seq + i) * dim + c;
          double x = t->host[t->view.offset + b * t->view.stride_batch + i * t->view.stride_seq +
                             h * t->view.stride_head + c];
          *err = fmax(*err, isfinite(x) ? fabs(x - ref[r]) : INFINITY);
          *nerr = fmax(*nerr, fabs((double)naive[r] - ref[r]));
        }
}

/* A backward call timed from a marker before it to its done marker (OpenCL events). */
static double timed(clattn_context *ctx, const clattn_problem *p, check_tensor *t, cl_mem lse,
                    const check_extras *x, clattn_status *st) {
  cl_event start = NULL, done = NULL;
  clEnqueueMarkerWithWaitList(clattn_context_queue(ctx), 0, NULL, &start);
  clattn_args args = {0};
  args.q = t[0].view, args.k = t[1].view, args.v = t[2].view, args.o = t[3].view;
  args.d_o = t[4].view, args.lse = lse, args.dq = t[5].view, args.dk = t[6].view;
  args.dv = t[7].view;
  check_set_args(&args, x);
  *st = clattn_backward_ex(ctx, p, &args, 0, NULL, &done);
  double ms = -1.0;
  cl_ulong a = 0, b = 0;
  if (*st == CLATTN_OK && clWaitForEvents(1, &done) == CL_SUCCESS &&
      clGetEventProfilingInfo(start, CL_PROFILING_COMMAND_END, sizeof a, &a, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(done, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) == CL_SUCCESS)
    ms = b > a ? (b - a) / 1e6 : 0.0;
  if (start) clReleaseEvent(start);
  if (done) clReleaseEvent(done);
  return ms;
}

clattn_status check_backward_run(clattn_context *ctx, const check_spec *sp, check_bwd_result *r) {
  memset(r, 0, sizeof *r);
  if (check_skipped()) return r->pass = 1, CLATTN_OK;
  const clattn_problem *p = &sp->problem;
  size_t hkv = p->heads_kv ? p->heads_kv : p->heads_q, d = p->head_dim,
         dv = p->head_dim_v ? p->head_dim_v : d, B = p->batch;
  uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)sp->seed << 1 | 1);
  cl_context cl = clattn_context_cl_context(ctx);
  /* q k v o d_o dq dk dv */
  size_t seq[8] = {p->seqlen_q, p->seqlen_kv, p->seqlen_kv, p->seqlen_q,
                   p->seqlen_q, p->seqlen_q,  p->seqlen_kv, p->seqlen_kv};
  size_t heads[8] = {p->heads_q, hkv, hkv, p->heads_q, p->heads_q, p->heads_q, hkv, hkv};
  size_t dims[8] = {d, d, dv, dv, dv, d, d, dv};
  check_tensor t[8];
  memset(t, 0, sizeof t);
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < 8 && err == CL_SUCCESS; i++)
    err = check_make_tensor(cl, &t[i], sp, seq[i], heads[i], dims[i], &rng);
  size_t rows = B * p->heads_q * p->seqlen_q;
  cl_mem lse = err == CL_SUCCESS ? clCreateBuffer(cl, CL_MEM_READ_WRITE,
                                                  (rows ? rows : 1) * sizeof(float), NULL, &err)
                                 : NULL;
  /* The gradients start NaN in their storage, so an element the call leaves unwritten fails the
   * comparison instead of passing on what the buffer held. */
  float nan = NAN;
  uint16_t nan_bits = p->dtype == CLATTN_F32 ? 0 : ref_half_bits(p->dtype, NAN);
  size_t es = check_elem_size(p->dtype);
  for (int i = 5; i < 8 && err == CL_SUCCESS; i++)
    if (t[i].elems)
      err = clEnqueueFillBuffer(clattn_context_queue(ctx), t[i].buf,
                                p->dtype == CLATTN_F32 ? (void *)&nan : (void *)&nan_bits, es, 0,
                                t[i].elems * es, 0, NULL, NULL);
  check_extras x = {0};
  if (err == CL_SUCCESS) err = check_make_extras(ctx, sp, 1, &x);
  clattn_status st = CLATTN_ERR_OPENCL;
  if (err != CL_SUCCESS) goto done;
  clattn_args fa = {0};
  fa.q = t[0].view, fa.k = t[1].view, fa.v = t[2].view, fa.o = t[3].view, fa.lse = lse;
  check_set_args(&fa, &x);
  st = clattn_forward_ex(ctx, p, &fa, 0, NULL, NULL);
  if (st == CLATTN_OK) timed(ctx, p, t, lse, &x, &st);
  cl_command_queue queue = clattn_context_queue(ctx);
  /* The gradients in the problem's storage, widened to floats. */
  for (int i = 5; i < 8 && st == CLATTN_OK; i++)
    if (check_read(queue, t[i].buf, p->dtype, t[i].host, t[i].elems, 0, NULL) != CL_SUCCESS)
      st = CLATTN_ERR_OPENCL;
  size_t hq = p->heads_q;
  float *got_sinks = calloc(hq ? hq : 1, sizeof(float));
  if (st == CLATTN_OK && x.d_sinks_buf && hq &&
      clEnqueueReadBuffer(queue, x.d_sinks_buf, CL_TRUE, 0, hq * sizeof(float), got_sinks, 0, NULL,
                          NULL) != CL_SUCCESS)
    st = CLATTN_ERR_OPENCL;
  if (st != CLATTN_OK) {
    free(got_sinks);
    goto done;
  }
  if (!sp->skip_check) {
    size_t n[3];
    double *ref[3];
    float *naive[3];
    for (int g = 0; g < 3; g++) {
      n[g] = B * heads[5 + g] * seq[5 + g] * dims[5 + g];
      ref[g] = malloc((n[g] ? n[g] : 1) * sizeof(double));
      naive[g] = malloc((n[g] ? n[g] : 1) * sizeof(float));
    }
    ref_view vq = check_host_view(&t[0]), vk = check_host_view(&t[1]), vv = check_host_view(&t[2]),
             vg = check_host_view(&t[4]);
    ref_extras rx = check_ref_extras(&x);
    double *ref_sinks = calloc(hq ? hq : 1, sizeof(double));
    float *naive_sinks = calloc(hq ? hq : 1, sizeof(float));
    ref_backward_ex_f64(p, &rx, vq, vk, vv, vg, ref[0], ref[1], ref[2], ref_sinks);
    ref_backward_ex_f32(p, &rx, vq, vk, vv, vg, naive[0], naive[1], naive[2], naive_sinks);
    r->pass = 1;
    if (x.d_sinks_buf) { /* the sinks' gradient, by the gradients' rule */
      for (size_t h = 0; h < hq; h++) {
        double e = isfinite(got_sinks[h]) ? fabs(got_sinks[h] - ref_sinks[h]) : INFINITY;
        r->err_sinks = fmax(r->err_sinks, e);
        r->naive_err_sinks = fmax(r->naive_err_sinks, fabs((double)naive_sinks[h] - ref_sinks[h]));
      }
      r->tol_sinks = 3.0 * r->naive_err_sinks + ref_tolerance_floor(p->dtype);
      r->pass = r->err_sinks <= r->tol_sinks;
    }
    free(ref_sinks), free(naive_sinks);
    for (int g = 0; g < 3; g++) {
      compare(&t[5 + g], B, heads[5 + g], seq[5 + g], dims[5 + g], ref[g], naive[g], &r->err[g],
              &r->naive_err[g]);
      r->tol[g] = 3.0 * r->naive_err[g] + ref_tolerance_floor(p->dtype);
      r->pass = r->pass && r->err[g] <= r->tol[g];
      free(ref[g]), free(naive[g]);
    }
  } else {
    r->pass = 1;
  }
  free(got_sinks);
  if (sp->repeat > 0) {
    double *ms = calloc(sp->repeat, sizeof *ms);
    for (int i = 0; i < sp->warmup && st == CLATTN_OK; i++) timed(ctx, p, t, lse, &x, &st);
    for (int i = 0; i < sp->repeat && st == CLATTN_OK; i++) ms[i] = timed(ctx, p, t, lse, &x, &st);
    if (st == CLATTN_OK) {
      qsort(ms, sp->repeat, sizeof *ms, cmp_double);
      r->median_ms = ms[sp->repeat / 2], r->min_ms = ms[0], r->max_ms = ms[sp->repeat - 1];
    }
    free(ms);
  }
done:
  check_release_extras(&x);
  for (int i = 0; i < 8; i++) {
    if (t[i].buf) clReleaseMemObject(t[i].buf);
    free(t[i].host);
  }
  if (lse) clReleaseMemObject(lse);
  r->status = st;
  check_finish(st, &r->pass);
  return st;
}
