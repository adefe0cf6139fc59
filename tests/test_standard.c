/* The standard path beyond the shared shape list (test_forward.c built with TEST_STANDARD):
 * splitting over batch*heads under a small workspace limit, the out-of-memory message, the
 * automatic choice for head dims the fused kernels cannot run, queues and wait lists. */
#include "common.h"

#include <stdint.h>
#include <string.h>

static clattn_problem problem(size_t b, size_t h, size_t n, size_t d, unsigned flags) {
  clattn_problem p = {0};
  p.batch = b, p.heads_q = h, p.seqlen_q = p.seqlen_kv = n, p.head_dim = d, p.flags = flags;
  p.algorithm = CLATTN_ALGO_STANDARD;
  return p;
}

static void expect_pass(clattn_context *ctx, const clattn_problem *p, int bhsd, size_t offset) {
  check_spec sp = {0};
  sp.problem = *p, sp.bhsd = bhsd, sp.offset = offset, sp.with_lse = 1, sp.seed = 7;
  check_result r;
  cr_assert_eq(check_run(ctx, &sp, &r), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert(r.pass, "O error %g (tolerance %g), LSE error %g (tolerance %g)", r.err_o, r.tol_o,
            r.err_lse, r.tol_lse);
}

/* A limit that holds two heads' workspace and padded copies, but not three: six heads run in
 * three launches, each writing its own heads' O and LSE. */
Test(standard, chunks_over_batch_and_heads) {
  clattn_problem p = problem(2, 3, 100, 24, CLATTN_CAUSAL);
  p.heads_kv = 1; /* GQA offsets inside each chunk */
  clattn_context *probe = test_context(NULL);
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(probe, &p, &info), CLATTN_OK, "%s", clattn_last_error(probe));
  cr_assert_eq(info.standard_heads_per_chunk, 6);
  size_t per_head = info.standard_workspace_bytes / 6;
  /* The backward holds P and dS: at least a second 100 x 100 matrix per head. */
  cr_assert_geq(info.standard_backward_workspace_bytes,
                info.standard_workspace_bytes + 6 * 100 * 100 * sizeof(float));
  clattn_context_destroy(probe);

  clattn_context *ctx = test_context_limited(NULL, 2 * per_head + per_head / 2);
  clattn_standard_profile prof;
  cr_assert_eq(clattn_standard_profile_last(ctx, &prof), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(ctx), "no standard-path call"));
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_eq(info.standard_heads_per_chunk, 2);
  cr_assert_str_eq(info.algorithm, "standard");
  expect_pass(ctx, &p, 0, 5);
  expect_pass(ctx, &p, 1, 0);
  /* The step profile covers the three launches of the last call. */
  cr_assert_eq(clattn_standard_profile_last(ctx, &prof), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_eq(prof.launches, 3);
  cr_assert(prof.gemm_s_ms >= 0 && prof.softmax_ms > 0 && prof.gemm_o_ms >= 0);
  /* A later call with no keys runs no steps: no profile is left from the one before. */
  clattn_problem none = problem(1, 1, 8, 8, 0);
  none.seqlen_kv = 0;
  expect_pass(ctx, &none, 0, 0);
  cr_assert_eq(clattn_standard_profile_last(ctx, &prof), CLATTN_ERR_INVALID_ARGUMENT);
  clattn_context_destroy(ctx);
}

Test(standard, one_head_too_big_is_out_of_resources) {
  clattn_context *ctx = test_context_limited(NULL, 1 << 20);
  clattn_problem p = problem(1, 2, 1024, 8, 0); /* one head: 4 MiB of scores */
  size_t n = 1024 * 2 * 8;
  cl_mem q = test_buffer(ctx, n, 0.5f), o = test_buffer(ctx, n, 7.0f);
  clattn_tensor t = clattn_bshd(q, 1024, 2, 8), to = clattn_bshd(o, 1024, 2, 8);
  cl_event done = (cl_event)(uintptr_t)1;
  clattn_status st = clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 0, NULL, &done);
  const char *msg = clattn_last_error(ctx);
  cr_assert_eq(st, CLATTN_ERR_OUT_OF_RESOURCES, "%s", msg);
  cr_assert_null(done);
  cr_assert(strstr(msg, "4194304") && strstr(msg, "available: 1048576"),
            "the message should name the bytes needed and available: %s", msg);
  float first = 0;
  clEnqueueReadBuffer(clattn_context_queue(ctx), o, CL_TRUE, 0, sizeof first, &first, 0, NULL,
                      NULL);
  cr_assert_eq(first, 7.0f, "O was written by a failed call");
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_eq(info.standard_heads_per_chunk, 0);
  /* Auto still runs the fused path, which needs no workspace. */
  p.algorithm = CLATTN_ALGO_AUTO;
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 0, NULL, NULL), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  clReleaseMemObject(q), clReleaseMemObject(o);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

Test(standard, auto_takes_standard_beyond_fused_head_dims) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = problem(1, 2, 37, 300, CLATTN_CAUSAL);
  p.algorithm = CLATTN_ALGO_AUTO;
  p.head_dim_v = 260;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK, "%s", clattn_last_error(ctx));
  cr_assert_str_eq(info.algorithm, "standard");
  cr_assert_eq(info.fused_read_bytes, 0.0);
  cr_assert_gt(info.standard_read_bytes, 0.0);
  expect_pass(ctx, &p, 0, 0);
  p.head_dim = 64, p.head_dim_v = 0;
  cr_assert_eq(clattn_explain(ctx, &p, &info), CLATTN_OK);
  cr_assert_str_eq(info.algorithm, "fused");
  clattn_context_destroy(ctx);
}

Test(standard, out_of_order_queue_is_rejected) {
  clattn_context *base = test_context(NULL);
  cl_int err;
  cl_command_queue ooo =
      clCreateCommandQueue(clattn_context_cl_context(base), clattn_context_device(base),
                           CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  if (err != CL_SUCCESS) {
    clattn_context_destroy(base);
    cr_skip_test("the device has no out-of-order queues");
  }
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create(clattn_context_cl_context(base), clattn_context_device(base),
                                     ooo, NULL, &ctx),
               CLATTN_OK);
  clattn_problem p = problem(1, 1, 16, 8, 0);
  cl_mem q = test_buffer(ctx, 128, 1.0f), o = test_buffer(ctx, 128, 0.0f);
  clattn_tensor t = clattn_bshd(q, 16, 1, 8), to = clattn_bshd(o, 16, 1, 8);
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 0, NULL, NULL),
               CLATTN_ERR_UNSUPPORTED);
  cr_assert(strstr(clattn_last_error(ctx), "in-order queue"), "%s", clattn_last_error(ctx));
  clReleaseMemObject(q), clReleaseMemObject(o);
  clattn_context_destroy(ctx);
  clReleaseCommandQueue(ooo);
  clattn_context_destroy(base);
}

/* The caller's wait list gates the GEMMs (CLBlast takes none: a barrier does). */
Test(standard, waits_for_the_callers_events) {
  clattn_context *ctx = test_context(NULL);
  clattn_problem p = problem(1, 1, 16, 8, 0);
  cl_mem q = test_buffer(ctx, 128, 1.0f), o = test_buffer(ctx, 128, 0.0f);
  clattn_tensor t = clattn_bshd(q, 16, 1, 8), to = clattn_bshd(o, 16, 1, 8);
  cl_int err;
  cl_event gate = clCreateUserEvent(clattn_context_cl_context(ctx), &err);
  cr_assert_eq(err, CL_SUCCESS);
  cl_event done = NULL;
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &to, NULL, 1, &gate, &done), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cl_int state = CL_QUEUED;
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
  cr_assert_neq(state, CL_COMPLETE, "the call finished before its wait list did");
  clSetUserEventStatus(gate, CL_COMPLETE);
  cr_assert_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  float out[128];
  clEnqueueReadBuffer(clattn_context_queue(ctx), o, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  for (int i = 0; i < 128; i++) cr_assert_float_eq(out[i], 1.0f, 1e-6f); /* V is all ones */
  clReleaseEvent(done), clReleaseEvent(gate);
  clReleaseMemObject(q), clReleaseMemObject(o);
  clattn_context_destroy(ctx);
}
