/* The one launch helper: a grid in launches of bounded size, chained by events where the queue
 * does not order them, and a plan's launches as its family binds them, for the forward and the
 * backward (the calls, split.c and the tuner enqueue through these). */
#include "ops.h"

#include <string.h>

#define GROUPS_PER_LAUNCH ((size_t)1 << 20)

clattn_status clattn__launch_grid(clattn_context *ctx, cl_command_queue queue, int in_order,
                                  const clattn__launch *l, size_t per_launch, cl_uint num_wait,
                                  const cl_event *wait, cl_event *first, cl_event *last) {
  size_t piece = per_launch ? per_launch : GROUPS_PER_LAUNCH;
  cl_event prev = NULL;
  if (first) *first = NULL;
  if (last) *last = NULL;
  for (size_t start = 0; start < l->groups; start += piece) {
    size_t n = l->groups - start < piece ? l->groups - start : piece;
    size_t global = n * (l->wg ? l->wg : 1);
    cl_ulong base = start;
    cl_uint nw = start ? (in_order ? 0 : 1) : num_wait;
    const cl_event *w = start ? (in_order ? NULL : &prev) : (num_wait ? wait : NULL);
    int want = (first && !start) || last || !in_order; /* events only where someone reads them */
    cl_event ev = NULL;
    cl_int err = clattn__set_arg(l->kernel, l->memo, l->base_arg, sizeof base, &base);
    if (err == CL_SUCCESS)
      err = clEnqueueNDRangeKernel(queue, l->kernel, 1, NULL, &global, l->wg ? &l->wg : NULL, nw, w,
                                   want ? &ev : NULL);
    if (prev) clReleaseEvent(prev);
    prev = NULL;
    if (err != CL_SUCCESS) {
      if (first && *first) clReleaseEvent(*first), *first = NULL;
      return clattn__fail_cl(ctx, err, "clEnqueueNDRangeKernel");
    }
    if (first && !start && ev) clRetainEvent(ev), *first = ev;
    prev = ev;
  }
  if (last)
    *last = prev;
  else if (prev)
    clReleaseEvent(prev);
  return CLATTN_OK;
}

clattn_status clattn__enqueue_plan(clattn_context *ctx, cl_command_queue queue, int in_order,
                                   const clattn__plan *p, const clattn__bound *b, cl_uint num_wait,
                                   const cl_event *wait, cl_event *first, cl_event *last) {
  clattn__launch l[CLATTN__MAX_ENTRIES];
  cl_int err = CL_SUCCESS;
  memset(l, 0, sizeof l);
  const clattn__family *f = clattn__family_of(&p->cfg);
  clattn__bound bound = *b; /* with the plan's memo for its first entry */
  bound.memo = (clattn__argmemo *)&p->memo;
  unsigned n = f->bind(f, &p->cfg, p->kernels, &bound, l, &err);
  if (first) *first = NULL;
  if (last) *last = NULL;
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clSetKernelArg");
  clattn_status st = CLATTN_OK;
  cl_event prev = NULL; /* the previous launch's last event, when the queue does not order */
  for (unsigned i = 0; st == CLATTN_OK && i < n; i++) {
    cl_event ev_first = NULL, ev_last = NULL;
    cl_uint nw = i ? (in_order || !prev ? 0 : 1) : num_wait;
    const cl_event *w = i ? (nw ? &prev : NULL) : wait;
    st = clattn__launch_grid(ctx, queue, in_order, &l[i], 0, nw, w,
                             first && !*first ? &ev_first : NULL,
                             last || !in_order ? &ev_last : NULL);
    if (prev) clReleaseEvent(prev);
    prev = ev_last;
    if (ev_first) *first = ev_first;
  }
  if (st == CLATTN_OK && last)
    *last = prev;
  else if (prev)
    clReleaseEvent(prev);
  if (st != CLATTN_OK && first && *first) clReleaseEvent(*first), *first = NULL;
  return st;
}

clattn_status clattn__enqueue_forward(clattn_context *ctx, cl_command_queue queue, int in_order,
                                      const clattn__shape *s, const clattn__plan *p,
                                      const clattn__split *split, const clattn_tensor *q,
                                      const clattn_tensor *k, const clattn_tensor *v,
                                      const clattn_tensor *o, cl_mem lse, cl_uint num_wait,
                                      const cl_event *wait, cl_event *done) {
  size_t nqb = (s->seqlen_q + p->cfg.bq - 1) / p->cfg.bq, groups;
  if (__builtin_mul_overflow(nqb, split ? split->count : 1, &groups) ||
      __builtin_mul_overflow(groups, s->heads_q, &groups) ||
      __builtin_mul_overflow(groups, s->batch, &groups))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "batch * heads * query blocks overflows");
  clattn__bound b = {.s = s, .q = q, .k = k, .v = v, .o = o, .lse = lse, .split = split};
  clattn_status st = clattn__enqueue_plan(ctx, queue, in_order, p, &b, num_wait, wait, NULL, done);
  if (!split) clFlush(queue); /* a split call flushes once, after its merge (split.c) */
  return st;
}

clattn_status clattn__bwd_enqueue(clattn_context *ctx, cl_command_queue queue,
                                  const clattn__shape *s, const clattn__plan *p,
                                  const clattn_tensor *q, const clattn_tensor *k,
                                  const clattn_tensor *v, const clattn_tensor *d_o, cl_mem lse,
                                  cl_mem drow, const clattn_tensor *dq, const clattn_tensor *dk,
                                  const clattn_tensor *dv, cl_event *first, cl_event *last) {
  clattn__bound b = {.s = s,
                     .q = q,
                     .k = k,
                     .v = v,
                     .d_o = d_o,
                     .dq = dq,
                     .dk = dk,
                     .dv = dv,
                     .lse = lse,
                     .drow = drow};
  /* In order: bwd_dq runs after bwd_dkdv on the queue (the two share nothing but inputs). */
  return clattn__enqueue_plan(ctx, queue, 1, p, &b, 0, NULL, first, last);
}
