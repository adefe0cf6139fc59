/* Public API contract: status strings, tensor helpers, context creation on the caller's
 * objects and by $CLATTN_DEVICE, empty calls, events, per-thread errors, several threads. */
#include "common.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

Test(api, status_strings) {
  cr_assert(strstr(clattn_status_string(CLATTN_OK), "CLATTN_OK"));
  cr_assert(strstr(clattn_status_string(CLATTN_ERR_BUILD), "compilation"));
  cr_assert(strstr(clattn_status_string(CLATTN_ERR_NO_DEVICE), "NO_DEVICE"));
  cr_assert_not_null(clattn_status_string((clattn_status)-99));
}

Test(api, tensor_helpers) {
  clattn_tensor a = clattn_bshd(NULL, 10, 4, 8), b = clattn_bhsd(NULL, 10, 4, 8);
  cr_assert_eq(a.stride_batch, 320);
  cr_assert_eq(a.stride_seq, 32);
  cr_assert_eq(a.stride_head, 8);
  cr_assert_eq(b.stride_batch, 320);
  cr_assert_eq(b.stride_seq, 8);
  cr_assert_eq(b.stride_head, 80);
  cr_assert_eq(a.offset, 0);
}

Test(api, destroy_null_and_accessors) {
  clattn_context_destroy(NULL);
  cr_assert_null(clattn_context_queue(NULL));
  clattn_context *ctx = test_context(NULL);
  cr_assert_not_null(clattn_context_cl_context(ctx));
  cr_assert_not_null(clattn_context_device(ctx));
  cr_assert_not_null(clattn_context_queue(ctx));
  cr_assert(strstr(clattn_context_device_summary(ctx), "local memory"));
  cr_assert_str_eq(clattn_last_error(ctx), "");
  clattn_context_destroy(ctx);
}

Test(api, create_on_callers_objects) {
  clattn_context *base = test_context(NULL);
  cl_context cl = clattn_context_cl_context(base);
  cl_device_id dev = clattn_context_device(base);
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(cl, dev, 0, &err);
  cr_assert_eq(err, CL_SUCCESS);
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create(cl, dev, q, NULL, &ctx), CLATTN_OK, "%s",
               clattn_last_error(NULL));
  cr_assert_eq(clattn_context_queue(ctx), q);
  clReleaseCommandQueue(q); /* the clattn context holds its own reference */
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
  cr_assert_eq(clattn_context_create(NULL, dev, NULL, NULL, &ctx), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert_null(ctx);
  cr_assert(strstr(clattn_last_error(NULL), "cl_context is NULL"));
  cr_assert_eq(clattn_context_create(cl, dev, NULL, NULL, NULL), CLATTN_ERR_INVALID_ARGUMENT);
  clattn_context_destroy(base);
}

Test(api, out_of_order_queue) {
  clattn_context *base = test_context(NULL);
  cl_context cl = clattn_context_cl_context(base);
  cl_device_id dev = clattn_context_device(base);
  cl_command_queue q = test_out_of_order_queue(base);
  if (!q) {
    clattn_context_destroy(base);
    cr_skip_test("the device has no out-of-order queues");
  }
  clattn_context *ctx = NULL;
  cr_assert_eq(clattn_context_create(cl, dev, q, NULL, &ctx), CLATTN_OK);
  clReleaseCommandQueue(q);
  test_context_still_works(ctx); /* check_run reads back with blocking reads after the call */
  clattn_context_destroy(ctx);
  clattn_context_destroy(base);
}

Test(api, device_by_environment) {
  setenv("CLATTN_DEVICE", "no-such-device-anywhere", 1);
  clattn_context *ctx = (clattn_context *)1;
  cr_assert_eq(clattn_context_create_default(NULL, &ctx), CLATTN_ERR_NO_DEVICE);
  cr_assert_null(ctx);
  cr_assert(strstr(clattn_last_error(NULL), "no-such-device-anywhere"));
  setenv("CLATTN_DEVICE", "0:999", 1);
  cr_assert_eq(clattn_context_create_default(NULL, &ctx), CLATTN_ERR_NO_DEVICE);
  setenv("CLATTN_DEVICE", "0:0", 1);
  cr_assert_eq(clattn_context_create_default(NULL, &ctx), CLATTN_OK, "%s", clattn_last_error(NULL));
  clattn_context_destroy(ctx);
  unsetenv("CLATTN_DEVICE");
}

/* batch, heads or seqlen_q = 0: OK, nothing computed, and a marker event when asked for. */
Test(api, empty_calls) {
  clattn_context *ctx = test_context(NULL);
  clattn_tensor t = {0};
  clattn_problem p = {0};
  p.heads_q = 2, p.seqlen_q = 5, p.seqlen_kv = 5, p.head_dim = 16; /* batch 0 */
  cl_event done = NULL;
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &t, NULL, 0, NULL, &done), CLATTN_OK, "%s",
               clattn_last_error(ctx));
  cr_assert_not_null(done);
  cr_assert_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  clReleaseEvent(done);
  p.batch = 3, p.seqlen_q = 0;
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &t, NULL, 0, NULL, NULL), CLATTN_OK);
  p.head_dim = 0; /* still invalid when empty */
  cr_assert_eq(clattn_forward(ctx, &p, &t, &t, &t, &t, NULL, 0, NULL, NULL),
               CLATTN_ERR_INVALID_ARGUMENT);
  clattn_context_destroy(ctx);
}

/* The caller's wait list gates the kernel, and done signals its completion. */
Test(api, events_chain) {
  clattn_context *ctx = test_context(NULL);
  cl_int err;
  cl_event gate = clCreateUserEvent(clattn_context_cl_context(ctx), &err);
  cr_assert_eq(err, CL_SUCCESS);
  size_t n = 2 * 8 * 16;
  cl_mem q = test_buffer(ctx, n, 0.1f), o = test_buffer(ctx, n, -1.0f);
  clattn_tensor tq = clattn_bshd(q, 8, 2, 16), to = clattn_bshd(o, 8, 2, 16);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 8, p.head_dim = 16;
  cl_event done = NULL;
  cr_assert_eq(clattn_forward(ctx, &p, &tq, &tq, &tq, &to, NULL, 1, &gate, &done), CLATTN_OK);
  cl_int status = 0;
  clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
  cr_assert_neq(status, CL_COMPLETE, "ran before its wait list completed");
  clSetUserEventStatus(gate, CL_COMPLETE);
  cr_assert_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  float out[2 * 8 * 16];
  clEnqueueReadBuffer(clattn_context_queue(ctx), o, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
  for (size_t i = 0; i < n; i++) cr_assert_float_eq(out[i], 0.1f, 1e-6f); /* V is constant */
  clReleaseEvent(done);
  clReleaseEvent(gate);
  clReleaseMemObject(q);
  clReleaseMemObject(o);
  clattn_context_destroy(ctx);
}

typedef struct {
  clattn_context *ctx;
  int fail;
  int ok;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  clattn_problem p = {0};
  p.head_dim = w->fail ? 0 : 8;
  p.batch = 1, p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 4;
  clattn_tensor t = {0};
  for (int i = 0; i < 50; i++) {
    if (w->fail) {
      clattn_forward(w->ctx, &p, &t, &t, &t, &t, NULL, 0, NULL, NULL);
    } else {
      clattn_plan_info info;
      if (clattn_explain(w->ctx, &p, &info) != CLATTN_OK) return NULL;
    }
  }
  /* Each thread sees its own last error. */
  const char *msg = clattn_last_error(w->ctx);
  w->ok = w->fail ? strstr(msg, "head_dim is 0") != NULL : msg[0] == 0;
  return NULL;
}

Test(api, threads_share_a_context_with_their_own_errors) {
  clattn_context *ctx = test_context(NULL);
  worker w[4] = {{ctx, 1, 0}, {ctx, 0, 0}, {ctx, 1, 0}, {ctx, 0, 0}};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, work, &w[i]);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) cr_assert(w[i].ok, "thread %d saw the wrong last error", i);
  test_context_still_works(ctx);
  clattn_context_destroy(ctx);
}

/* README's recipe for a padded batch until variable lengths land: one call per sequence with
 * its own lengths, the views' offsets at its first row, the padded buffers' strides unchanged.
 * Each sequence matches the reference; O's padded rows keep their sentinel. */
Test(api, padded_batch_one_call_per_sequence) {
  enum { B = 3, S = 12, H = 2, D = 16 };
  const unsigned len[B] = {12, 5, 1};
  clattn_context *ctx = test_context(NULL);
  size_t n = (size_t)B * S * H * D;
  float *q = malloc(n * sizeof *q), *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
  float *o = malloc(n * sizeof *o);
  uint64_t rng = 7;
  ref_fill_normal(q, n, &rng), ref_fill_normal(k, n, &rng), ref_fill_normal(v, n, &rng);
  cl_context cl = clattn_context_cl_context(ctx);
  cl_command_queue queue = clattn_context_queue(ctx);
  cl_int err;
  cl_mem buf[3], ob = test_buffer(ctx, n, 12345.0f); /* the sentinel of padded rows */
  float *host[3] = {q, k, v};
  for (int t = 0; t < 3; t++) {
    buf[t] = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float), host[t],
                            &err);
    cr_assert_eq(err, CL_SUCCESS);
  }
  for (unsigned b = 0; b < B; b++) {
    clattn_problem p = {0};
    p.batch = 1, p.heads_q = H, p.seqlen_q = p.seqlen_kv = len[b], p.head_dim = D;
    clattn_tensor tq = clattn_bshd(buf[0], S, H, D), tk = clattn_bshd(buf[1], S, H, D);
    clattn_tensor tv = clattn_bshd(buf[2], S, H, D), to = clattn_bshd(ob, S, H, D);
    tq.offset = tk.offset = tv.offset = to.offset = (size_t)b * S * H * D;
    cr_assert_eq(clattn_forward(ctx, &p, &tq, &tk, &tv, &to, NULL, 0, NULL, NULL), CLATTN_OK, "%s",
                 clattn_last_error(ctx));
  }
  cr_assert_eq(clEnqueueReadBuffer(queue, ob, CL_TRUE, 0, n * sizeof(float), o, 0, NULL, NULL),
               CL_SUCCESS);
  for (unsigned b = 0; b < B; b++) {
    clattn_problem p = {0};
    p.batch = 1, p.heads_q = H, p.seqlen_q = p.seqlen_kv = len[b], p.head_dim = D;
    size_t off = (size_t)b * S * H * D;
    ref_view vq = {q, off, S * H * D, H * D, D}, vk = {k, off, S * H * D, H * D, D};
    ref_view vv = {v, off, S * H * D, H * D, D};
    double ref[H * S * D];
    float naive[H * S * D];
    ref_forward_f64(&p, vq, vk, vv, ref, NULL);
    ref_forward_f32(&p, vq, vk, vv, naive, NULL);
    double err_o = 0, err_naive = 0;
    for (unsigned i = 0; i < S; i++)
      for (unsigned h = 0; h < H; h++)
        for (unsigned d = 0; d < D; d++) {
          float got = o[off + ((size_t)i * H + h) * D + d];
          if (i >= len[b]) {
            cr_assert_eq(got, 12345.0f, "sequence %u: padded row %u was written", b, i);
            continue;
          }
          size_t r = ((size_t)h * len[b] + i) * D + d; /* the reference's [heads][seq][dim] */
          cr_assert(got == got, "sequence %u row %u: NaN", b, i);
          err_o = fmax(err_o, fabs(got - ref[r]));
          err_naive = fmax(err_naive, fabs(naive[r] - ref[r]));
        }
    cr_assert_leq(err_o, 2 * err_naive + 1e-6, "sequence %u: error %g, naive %g", b, err_o,
                  err_naive);
  }
  for (int t = 0; t < 3; t++) clReleaseMemObject(buf[t]);
  clReleaseMemObject(ob);
  free(q), free(k), free(v), free(o);
  clattn_context_destroy(ctx);
}
