/* Bad input to the KV cache calls (clattn_kv_cache, clattn_forward_ex with args.kv_cache,
 * clattn_kv_append): each refused before anything is enqueued, with the status and a message
 * naming the member, the outputs and the cache left as they were, and the context usable. */
#include "common.h"
#include "core.h"

#include <math.h>
#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, NQ = 1, CAP = 32, D = 8, PS = 8, PAGES = 8 };

typedef struct fixture {
  clattn_context *ctx;
  clattn_problem p;
  clattn_kv_cache c;
  clattn_args a;
  cl_mem q, o, k, v, table, lens, kn, vn, scales;
} fixture;

/* A valid paged fp32 cache and a decode call over it; o and the cache start NaN. */
static fixture make(void) {
  fixture f;
  memset(&f, 0, sizeof f);
  f.ctx = test_context(NULL);
  clattn_problem p = {B, HQ, HKV, NQ, CAP, D};
  f.p = p;
  f.q = test_buffer(f.ctx, B * NQ * HQ * D, 0.5f), f.o = test_buffer(f.ctx, B * NQ * HQ * D, NAN);
  f.k = test_buffer(f.ctx, PAGES * PS * HKV * D, NAN);
  f.v = test_buffer(f.ctx, PAGES * PS * HKV * D, NAN);
  f.table = test_buffer(f.ctx, B * (CAP / PS), 0.0f); /* int32 0 is float 0.0f's bits */
  f.lens = test_buffer(f.ctx, B, 0.0f);
  f.kn = test_buffer(f.ctx, B * NQ * HKV * D, 1.0f),
  f.vn = test_buffer(f.ctx, B * NQ * HKV * D, 2.0f);
  f.scales = test_buffer(f.ctx, PAGES * PS * HKV, 1.0f);
  f.c.dtype = CLATTN_F32, f.c.page_size = PS, f.c.num_pages = PAGES, f.c.max_pages = CAP / PS;
  f.c.k = clattn_bshd(f.k, PS, HKV, D), f.c.v = clattn_bshd(f.v, PS, HKV, D);
  f.c.block_table = f.table, f.c.seqlens = f.lens;
  f.a.q = clattn_bshd(f.q, NQ, HQ, D), f.a.o = clattn_bshd(f.o, NQ, HQ, D);
  return f;
}

static void done_with(fixture *f) {
  cl_mem m[] = {f->q, f->o, f->k, f->v, f->table, f->lens, f->kn, f->vn, f->scales};
  clFinish(clattn_context_queue(f->ctx));
  for (size_t i = 0; i < sizeof m / sizeof *m; i++) clReleaseMemObject(m[i]);
  clattn_context_destroy(f->ctx);
}

/* o (forward) or the cache's K (append) must be untouched: still NaN. */
static void expect_untouched(fixture *f, cl_mem m) {
  float x[4];
  cr_assert_eq(
      clEnqueueReadBuffer(clattn_context_queue(f->ctx), m, CL_TRUE, 0, sizeof x, x, 0, NULL, NULL),
      CL_SUCCESS);
  for (int i = 0; i < 4; i++) cr_assert(isnan(x[i]), "element %d was written: %g", i, x[i]);
}

/* The forward (append: 0) or the append (1) is refused with st and a message containing
 * needle. */
static void expect_refused(fixture *f, int append, clattn_status st, const char *needle) {
  cl_event done = (cl_event)(uintptr_t)1;
  f->a.kv_cache = &f->c; /* the fixture was copied out of make() */
  clattn_status got =
      append
          ? clattn_kv_append(f->ctx, &f->p, &f->c,
                             &(clattn_tensor){f->kn, 0, NQ * HKV * D, HKV * D, D},
                             &(clattn_tensor){f->vn, 0, NQ * HKV * D, HKV * D, D}, 0, NULL, &done)
          : clattn_forward_ex(f->ctx, &f->p, &f->a, 0, NULL, &done);
  cr_assert_eq(got, st, "%s: got %d (%s)", needle, got, clattn_last_error(f->ctx));
  cr_assert_null(done);
  cr_assert(strstr(clattn_last_error(f->ctx), needle), "\"%s\" lacks \"%s\"",
            clattn_last_error(f->ctx), needle);
  expect_untouched(f, append ? f->k : f->o);
}

Test(kvcache_errors, layout_rejected) {
  fixture f = make();
  f.c.page_size = 24;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "page_size 24: a power of two");
  f.c.page_size = 512;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "page_size 512");
  f.c.page_size = PS, f.c.max_pages = CAP / PS - 1;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "hold fewer than seqlen_kv 32");
  f.c.max_pages = CAP / PS, f.c.num_pages = 0;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "num_pages 0");
  f.c.num_pages = PAGES, f.c.block_table = NULL;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "block_table is NULL");
  f.c.block_table = f.table, f.c.seqlens = NULL;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.seqlens is NULL");
  f.c.seqlens = f.lens, f.c.page_size = 0; /* contiguous with paged members */
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "block_table is set but page_size is 0");
  f.c.page_size = PS, f.c.num_pages = PAGES + 1; /* the pool's views outside k's buffer */
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.k: the view needs");
  f.c.num_pages = PAGES;
  test_context_still_works(f.ctx);
  done_with(&f);
}

Test(kvcache_errors, dtypes_and_scales_rejected) {
  fixture f = make();
  f.c.dtype = CLATTN_F16;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT,
                 "the problem's dtype (CLATTN_F32) or CLATTN_I8");
  f.c.dtype = CLATTN_I8;
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.k_scale is NULL");
  f.c.k_scale = f.scales;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.v_scale is NULL");
  f.c.dtype = CLATTN_F32;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "scales are CLATTN_I8's");
  f.c.k_scale = NULL, f.p.dtype = CLATTN_I8;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "CLATTN_I8 is a KV cache's element type");
  f.p.dtype = CLATTN_F32;
  test_context_still_works(f.ctx);
  done_with(&f);
}

Test(kvcache_errors, call_members_rejected) {
  fixture f = make();
  f.a.k = clattn_bshd(f.k, CAP, HKV, D);
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "args.k is set with a kv_cache");
  f.a.k.buffer = NULL, f.a.seqlens_kv = f.lens;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "args.seqlens_kv is set with a kv_cache");
  f.a.seqlens_kv = NULL, f.a.o.buffer = f.k, f.a.kv_cache = &f.c; /* o over the cache */
  cl_event none = NULL;
  cr_assert_eq(clattn_forward_ex(f.ctx, &f.p, &f.a, 0, NULL, &none), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(f.ctx), "o overlaps kv_cache.k"), "%s",
            clattn_last_error(f.ctx));
  f.a.o.buffer = f.o;
  f.p.algorithm = CLATTN_ALGO_STANDARD;
  expect_refused(&f, 0, CLATTN_ERR_UNSUPPORTED, "decode kernels only, not the standard one");
  f.p.algorithm = CLATTN_ALGO_AUTO, f.p.flags = CLATTN_VARLEN, f.p.total_q = 2, f.p.total_kv = 2;
  expect_refused(&f, 1, CLATTN_ERR_UNSUPPORTED, "CLATTN_VARLEN in clattn_kv_append");
  f.p.flags = 0, f.p.total_q = f.p.total_kv = 0;
  f.a.d_o = f.a.o, f.a.dq = f.a.q, f.a.lse = f.lens;
  cr_assert_eq(clattn_backward_ex(f.ctx, &f.p, &f.a, 0, NULL, NULL), CLATTN_ERR_UNSUPPORTED);
  cr_assert(strstr(clattn_last_error(f.ctx), "a KV cache is for inference"));
  test_context_still_works(f.ctx);
  done_with(&f);
}

/* The cache's buffers' flags against the call's use: clattn_kv_append writes K and V (not
 * CL_MEM_READ_ONLY), the forward reads them and the block table (not CL_MEM_WRITE_ONLY). */
Test(kvcache_errors, buffer_flags_rejected) {
  fixture f = make();
  cl_context cl = clattn_context_cl_context(f.ctx);
  const size_t bytes = PAGES * PS * HKV * D * sizeof(float);
  cl_int e1, e2;
  cl_mem ro = clCreateBuffer(cl, CL_MEM_READ_ONLY, bytes, NULL, &e1);
  cl_mem wo = clCreateBuffer(cl, CL_MEM_WRITE_ONLY, bytes, NULL, &e2);
  cr_assert(e1 == CL_SUCCESS && e2 == CL_SUCCESS);
  const clattn_kv_cache good = f.c;
  f.c.k = clattn_bshd(ro, PS, HKV, D);
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.k: the call writes it");
  f.c = good, f.c.v = clattn_bshd(wo, PS, HKV, D);
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.v: the call reads it");
  f.c = good, f.c.block_table = wo;
  expect_refused(&f, 0, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.block_table: the call reads it");
  f.c = good, f.c.v = clattn_bshd(wo, PS, HKV, D); /* append only writes V */
  cr_assert_eq(clattn_kv_append(f.ctx, &f.p, &f.c,
                                &(clattn_tensor){f.kn, 0, NQ * HKV * D, HKV * D, D},
                                &(clattn_tensor){f.vn, 0, NQ * HKV * D, HKV * D, D}, 0, NULL, NULL),
               CLATTN_OK, "%s", clattn_last_error(f.ctx));
  clReleaseMemObject(ro), clReleaseMemObject(wo);
  done_with(&f);
}

Test(kvcache_errors, append_overlaps_rejected) {
  fixture f = make();
  cr_assert_eq(clattn_kv_append(f.ctx, &f.p, NULL, &f.c.k, &f.c.v, 0, NULL, NULL),
               CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(f.ctx), "kv_cache is NULL"));
  clattn_tensor over = {f.k, 0, NQ * HKV * D, HKV * D, D}, vn = {f.vn, 0, NQ * HKV * D, HKV * D, D};
  cr_assert_eq(clattn_kv_append(f.ctx, &f.p, &f.c, &over, &vn, 0, NULL, NULL),
               CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(f.ctx), "k_new overlaps kv_cache.k"), "%s",
            clattn_last_error(f.ctx));
  f.c.v = f.c.k; /* both written into one region */
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.k overlaps kv_cache.v");
  f.c.v = clattn_bshd(f.v, PS, HKV, D), f.c.seqlens = f.k; /* an input over a written member */
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.k overlaps kv_cache.seqlens");
  f.c.seqlens = f.lens;
  /* The valid append then runs (and writes). */
  cr_assert_eq(clattn_kv_append(f.ctx, &f.p, &f.c,
                                &(clattn_tensor){f.kn, 0, NQ * HKV * D, HKV * D, D}, &vn, 0, NULL,
                                NULL),
               CLATTN_OK, "%s", clattn_last_error(f.ctx));
  test_context_still_works(f.ctx);
  done_with(&f);
}

/* K and V interleaved in one buffer, FlashInfer's [page][2][token][head][dim]: no element is
 * both, so an append takes it, writing the K rows and the V rows of its pages and nothing else.
 * A stride that lets them share elements is refused. */
Test(kvcache_errors, interleaved_kv_appended) {
  fixture f = make();
  enum { ROW = PS * HKV * D, ALL = PAGES * 2 * ROW };
  cl_mem both = test_buffer(f.ctx, ALL, NAN);
  int table[B * (CAP / PS)];
  for (int i = 0; i < B * (CAP / PS); i++) table[i] = (i * 3) % PAGES; /* a permutation */
  cr_assert_eq(clEnqueueWriteBuffer(clattn_context_queue(f.ctx), f.table, CL_TRUE, 0, sizeof table,
                                    table, 0, NULL, NULL),
               CL_SUCCESS);
  clattn_tensor kv = {both, 0, 2 * ROW, HKV * D, D};
  f.c.k = kv, kv.offset = ROW, f.c.v = kv;
  clattn_tensor kn = {f.kn, 0, NQ * HKV * D, HKV * D, D}, vn = {f.vn, 0, NQ * HKV * D, HKV * D, D};
  /* Twice (the lengths unchanged: the same rows again), the second on the kernel the first
   * built, which the context keeps (ctx->append). */
  cl_kernel *slots = &f.ctx->append[0][0][0], kept = NULL;
  for (int call = 0; call < 2; call++) {
    cr_assert_eq(clattn_kv_append(f.ctx, &f.p, &f.c, &kn, &vn, 0, NULL, NULL), CLATTN_OK, "%s",
                 clattn_last_error(f.ctx));
    int built = 0;
    for (size_t i = 0; i < sizeof f.ctx->append / sizeof *slots; i++)
      if (slots[i]) built++, kept = call ? kept : slots[i];
    cr_assert_eq(built, 1, "%d append kernels kept after call %d", built, call);
    cr_assert_eq(f.ctx->append[CLATTN_F32][1][0], kept, "a new append kernel on call %d", call);
  }
  float *host = malloc(ALL * sizeof(float));
  cr_assert_eq(clEnqueueReadBuffer(clattn_context_queue(f.ctx), both, CL_TRUE, 0,
                                   ALL * sizeof(float), host, 0, NULL, NULL),
               CL_SUCCESS);
  /* Lengths 0: each entry's token 0, on its first page, gets k_new (1) and v_new (2). */
  for (size_t i = 0; i < ALL; i++) {
    size_t page = i / (2 * ROW), in = i % (2 * ROW), tok = in % ROW / (HKV * D);
    int first = (page == (size_t)table[0] || page == (size_t)table[CAP / PS]) && tok == 0;
    float want = first ? (in < ROW ? 1.0f : 2.0f) : NAN;
    cr_assert(first ? host[i] == want : isnan(host[i]), "element %zu: %g, want %g", i, host[i],
              want);
  }
  free(host);
  f.c.v.offset = ROW / 2; /* V's rows now start inside K's */
  expect_refused(&f, 1, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache.k overlaps kv_cache.v");
  clReleaseMemObject(both);
  done_with(&f);
}

/* clattn_explain_ex sees the call's cache: the decode kernels, no backward; without a cache it
 * is clattn_explain; bad args are refused as clattn_forward_ex refuses them. */
Test(kvcache_errors, explain_ex_names_decode) {
  fixture f = make();
  f.a.kv_cache = &f.c;
  clattn_plan_info info;
  cr_assert_eq(clattn_explain_ex(f.ctx, &f.p, &f.a, &info), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  cr_assert_str_eq(info.kernel, "decode");
  cr_assert_str_eq(info.origin, "heuristic");
  cr_assert_str_eq(info.backward_origin, "none");
  cr_assert_eq(info.work_group_size, (size_t)info.block_kv * info.threads_per_row);
  clattn_plan_info plain, dense;
  clattn_args a = {0};
  a.q = f.a.q, a.o = f.a.o, a.k = clattn_bshd(f.k, CAP, HKV, D),
  a.v = clattn_bshd(f.v, CAP, HKV, D);
  cr_assert_eq(clattn_explain_ex(f.ctx, &f.p, &a, &dense), CLATTN_OK, "%s",
               clattn_last_error(f.ctx));
  cr_assert_eq(clattn_explain(f.ctx, &f.p, &plain), CLATTN_OK);
  cr_assert_str_eq(dense.kernel, plain.kernel);
  cr_assert_str_neq(dense.kernel, "decode");
  cr_assert_eq(clattn_explain_ex(f.ctx, &f.p, NULL, &dense), CLATTN_ERR_INVALID_ARGUMENT);
  f.c.page_size = 3;
  cr_assert_eq(clattn_explain_ex(f.ctx, &f.p, &f.a, &dense), CLATTN_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(clattn_last_error(f.ctx), "page_size 3"));
  done_with(&f);
}
