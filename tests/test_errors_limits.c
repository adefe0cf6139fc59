/* Failure paths at the limits of what the host can check: sizes whose grids would overflow (a
 * varlen batch is bounded by nothing but its cu_seqlens), scales and caps that overflow once
 * the kernels take them in log2 units, and buffers whose OpenCL flags forbid what the call does
 * with them (writing a CL_MEM_READ_ONLY buffer or reading a CL_MEM_WRITE_ONLY one is undefined
 * behaviour). Each refusal names what is wrong, writes nothing and leaves the context usable;
 * the same flags where the call's use allows them, and an empty backward with the variants'
 * members, are accepted. */
#include "common.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { B = 1, H = 4, N = 16, D = 8, ELEMS = B * N * H * D };

typedef struct {
  clattn_context *ctx;
  clattn_problem p;
  clattn_args a;
  cl_mem q, k, v, o, lse, d_o, dq, dk, dv;
} fixture;

static cl_mem buffer_with(clattn_context *ctx, cl_mem_flags flags, size_t n, float value) {
  cl_int err;
  cl_mem m = clCreateBuffer(clattn_context_cl_context(ctx), flags, n * sizeof(float), NULL, &err);
  cr_assert_eq(err, CL_SUCCESS);
  /* A host command may fill any buffer: the flags restrict kernels only. */
  cr_assert_eq(clEnqueueFillBuffer(clattn_context_queue(ctx), m, &value, sizeof value, 0,
                                   n * sizeof(float), 0, NULL, NULL),
               CL_SUCCESS);
  cr_assert_eq(clFinish(clattn_context_queue(ctx)), CL_SUCCESS);
  return m;
}

/* A valid problem (B=1, H=4, N=16, d=8), packed bshd tensors; outputs start at 7. */
static fixture make(void) {
  fixture f;
  memset(&f, 0, sizeof f);
  f.ctx = test_context(NULL);
  f.p.batch = B, f.p.heads_q = H, f.p.seqlen_q = f.p.seqlen_kv = N, f.p.head_dim = D;
  cl_mem *m[] = {&f.q, &f.k, &f.v, &f.o, &f.d_o, &f.dq, &f.dk, &f.dv};
  clattn_tensor *t[] = {&f.a.q, &f.a.k, &f.a.v, &f.a.o, &f.a.d_o, &f.a.dq, &f.a.dk, &f.a.dv};
  const float fill[] = {0.5f, 0.25f, 1.0f, 7.0f, 0.5f, 7.0f, 7.0f, 7.0f};
  for (int i = 0; i < 8; i++) {
    *m[i] = test_buffer(f.ctx, ELEMS, fill[i]);
    *t[i] = clattn_bshd(*m[i], N, H, D);
  }
  /* K, V and dO vary, so that dQ depends on O and LSE (with uniform ones it is 0 whatever). */
  static float ramp[3][ELEMS];
  cl_mem varied[3] = {f.k, f.v, f.d_o};
  cl_command_queue queue = clattn_context_queue(f.ctx);
  for (int t = 0; t < 3; t++) {
    for (int i = 0; i < ELEMS; i++) ramp[t][i] = (float)sin(0.37 * i + t);
    cr_assert_eq(
        clEnqueueWriteBuffer(queue, varied[t], CL_TRUE, 0, sizeof ramp[t], ramp[t], 0, NULL, NULL),
        CL_SUCCESS);
  }
  f.lse = f.a.lse = test_buffer(f.ctx, B * H * N, 7.0f);
  return f;
}

static void done_with(fixture *f) {
  cl_mem m[] = {f->q, f->k, f->v, f->o, f->d_o, f->dq, f->dk, f->dv, f->lse};
  for (int i = 0; i < 9; i++) clReleaseMemObject(m[i]);
  clattn_context_destroy(f->ctx);
}

static float first_of(clattn_context *ctx, cl_mem m) {
  float x = 0;
  cr_assert_eq(
      clEnqueueReadBuffer(clattn_context_queue(ctx), m, CL_TRUE, 0, sizeof x, &x, 0, NULL, NULL),
      CL_SUCCESS);
  return x;
}

/* The call (forward or backward) fails with want and a message containing needle, writes
 * nothing to O or dQ, and the context still works. */
static void expect(fixture *f, int backward, clattn_status want, const char *needle) {
  cl_event done = (cl_event)(uintptr_t)1;
  clattn_status st = backward ? clattn_backward_ex(f->ctx, &f->p, &f->a, 0, NULL, &done)
                              : clattn_forward_ex(f->ctx, &f->p, &f->a, 0, NULL, &done);
  const char *msg = clattn_last_error(f->ctx);
  cr_assert_eq(st, want, "%s: got %s, want %s (%s)", backward ? "backward" : "forward",
               clattn_status_string(st), clattn_status_string(want), msg);
  cr_assert_null(done, "*done must be NULL on error");
  cr_assert(strstr(msg, needle), "message \"%s\" should mention \"%s\"", msg, needle);
  cr_assert_eq(first_of(f->ctx, f->o), 7.0f, "O was written by a failed call");
  cr_assert_eq(first_of(f->ctx, f->dq), 7.0f, "dQ was written by a failed call");
  test_context_still_works(f->ctx);
}

/* A batch past 2^31, and a varlen batch of SIZE_MAX sequences whose cu_seqlens hold two
 * entries (batch + 1 wrapped to 0 once, so they were never checked, and the grid overflowed). */
Test(errors_limits, huge_batch_rejected) {
  fixture f = make();
  f.p.batch = (size_t)1 << 31;
  expect(&f, 0, CLATTN_ERR_UNSUPPORTED, "batch");
  expect(&f, 1, CLATTN_ERR_UNSUPPORTED, "batch");
  f.p.batch = 1 << 20, f.p.seqlen_q = f.p.seqlen_kv = 1 << 30, f.p.heads_q = 1 << 10;
  expect(&f, 0, CLATTN_ERR_UNSUPPORTED, "2^48");
  f.p = (clattn_problem){.batch = SIZE_MAX,
                         .heads_q = 1,
                         .seqlen_q = N,
                         .seqlen_kv = N,
                         .head_dim = D,
                         .flags = CLATTN_VARLEN,
                         .total_q = N,
                         .total_kv = N};
  cl_mem cu = test_buffer(f.ctx, 2, 0.0f); /* int32 {0, 0}: two entries, as 4-byte floats */
  f.a.cu_seqlens_q = f.a.cu_seqlens_kv = cu;
  expect(&f, 0, CLATTN_ERR_UNSUPPORTED, "batch");
  expect(&f, 1, CLATTN_ERR_UNSUPPORTED, "batch");
  f.p.batch = 2; /* three entries needed, two given */
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_q");
  clReleaseMemObject(cu);
  done_with(&f);
}

/* scale x log2 e and softcap x log2 e are fp32 kernel arguments: past FLT_MAX / log2 e they
 * became inf, and a zero score inf x 0 = NaN (the fused path gave O = 0, LSE = -inf, the
 * standard path the right answer). */
Test(errors_limits, scale_and_softcap_overflow_rejected) {
  fixture f = make();
  f.p.scale = 2.4e38f;
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "scale");
  f.p.scale = -FLT_MAX;
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "scale");
  f.p.scale = 0.0f, f.p.softcap = 2.4e38f;
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "softcap");
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "softcap");
  done_with(&f);
}

/* Outputs in CL_MEM_READ_ONLY buffers and inputs in CL_MEM_WRITE_ONLY ones are refused; each
 * call's own use decides (the backward reads O and LSE, which the forward writes). */
Test(errors_limits, buffer_flags_against_use_rejected) {
  fixture f = make();
  cl_mem ro = buffer_with(f.ctx, CL_MEM_READ_ONLY, ELEMS, 7.0f);
  cl_mem wo = buffer_with(f.ctx, CL_MEM_WRITE_ONLY, ELEMS, 7.0f);
  cl_mem ro_lse = buffer_with(f.ctx, CL_MEM_READ_ONLY, B * H * N, 7.0f);
  clattn_args good = f.a;
  f.a.o = clattn_bshd(ro, N, H, D);
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT,
         "o: the call writes it, but its buffer is "
         "CL_MEM_READ_ONLY");
  f.a = good, f.a.lse = ro_lse;
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "lse: the call writes it");
  f.a = good, f.a.q = clattn_bshd(wo, N, H, D);
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT,
         "q: the call reads it, but its buffer is "
         "CL_MEM_WRITE_ONLY");
  f.a = good, f.a.dk = clattn_bshd(ro, N, H, D);
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "dk: the call writes it");
  f.a = good, f.a.d_o = clattn_bshd(wo, N, H, D);
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "d_o: the call reads it");
  f.a = good, f.a.sinks = wo;
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "sinks: the call reads it");
  f.a = good, f.a.o = clattn_bshd(wo, N, H, D); /* the backward reads O and LSE */
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "o: the call reads it");
  f.a = good, f.a.lse = wo;
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "lse: the call reads it");
  /* The standard path's GEMMs read their C: its outputs must be readable too. */
  f.a = good, f.a.o = clattn_bshd(wo, N, H, D), f.p.algorithm = CLATTN_ALGO_STANDARD;
  expect(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "o: the call reads it");
  f.a = good, f.a.dq = clattn_bshd(wo, N, H, D);
  expect(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "dq: the call reads it");
  f.p.algorithm = CLATTN_ALGO_AUTO;
  /* Allowed: the forward writes O into a write-only buffer; the backward reads O and LSE from
   * read-only ones (copied there by the host, which the flags allow). */
  f.a = good, f.a.o = clattn_bshd(wo, N, H, D);
  cr_assert_eq(clattn_forward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  cl_command_queue queue = clattn_context_queue(f.ctx);
  cr_assert_eq(clEnqueueCopyBuffer(queue, wo, ro, 0, 0, ELEMS * sizeof(float), 0, NULL, NULL),
               CL_SUCCESS);
  cr_assert_eq(
      clEnqueueCopyBuffer(queue, f.lse, ro_lse, 0, 0, B * H * N * sizeof(float), 0, NULL, NULL),
      CL_SUCCESS);
  f.a = good, f.a.o = clattn_bshd(ro, N, H, D), f.a.lse = ro_lse;
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  /* The same gradients as from the read-write originals. */
  static float dq_ro[ELEMS], dq_rw[ELEMS];
  cr_assert_eq(clEnqueueReadBuffer(queue, f.dq, CL_TRUE, 0, sizeof dq_ro, dq_ro, 0, NULL, NULL),
               CL_SUCCESS);
  f.a = good;
  cr_assert_eq(clEnqueueCopyBuffer(queue, wo, f.o, 0, 0, ELEMS * sizeof(float), 0, NULL, NULL),
               CL_SUCCESS);
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  cr_assert_eq(clEnqueueReadBuffer(queue, f.dq, CL_TRUE, 0, sizeof dq_rw, dq_rw, 0, NULL, NULL),
               CL_SUCCESS);
  cr_assert(!memcmp(dq_ro, dq_rw, sizeof dq_ro), "dQ from read-only O and LSE differs");
  cr_assert(dq_rw[1] != 0.0f && isfinite(dq_rw[1]), "dQ[1] = %g", (double)dq_rw[1]);
  clReleaseMemObject(ro), clReleaseMemObject(wo), clReleaseMemObject(ro_lse);
  done_with(&f);
}

/* No query heads: nothing to compute, with or without the variants' members (dk and dv have no
 * heads then: they were checked with heads_kv's and refused as NULL). */
Test(errors_limits, empty_backward_with_variants) {
  fixture f = make();
  f.p.heads_q = 0, f.p.heads_kv = 4;
  f.a.dk = f.a.dv = (clattn_tensor){0};
  cl_mem sinks = test_buffer(f.ctx, H, 0.0f), slopes = test_buffer(f.ctx, H, 0.5f);
  f.a.sinks = sinks;
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "sinks: %s",
               clattn_last_error(f.ctx));
  f.a.sinks = NULL, f.a.alibi_slopes = slopes;
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_OK, "alibi: %s",
               clattn_last_error(f.ctx));
  clReleaseMemObject(sinks), clReleaseMemObject(slopes);
  test_context_still_works(f.ctx);
  done_with(&f);
}
