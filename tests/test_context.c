/* What a context fixes when it is made: the environment (CLATTN_BUILD_OPTIONS, CLATTN_BUILD_LOG)
 * is read then, once, so changing it later changes nothing for that context; and the library's
 * version is the one CMake built it as. */
#include "common.h"
#include "ops.h"
#include "tune.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An option every OpenCL compiler rejects, so a build that receives it fails at once. */
#define BAD_OPTION "-cl-clattn-no-such-option"

/* A forward of a tiny problem on ctx: its status; the message in msg. */
static clattn_status tiny_forward(clattn_context *ctx, char *msg, size_t len) {
  size_t n = 1 * 8 * 2 * 8;
  cl_mem q = test_buffer(ctx, n, 0.5f), k = test_buffer(ctx, n, 0.25f), v = test_buffer(ctx, n, 1);
  cl_mem o = test_buffer(ctx, n, 0);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 8, p.head_dim = 8;
  clattn_tensor tq = clattn_bshd(q, 8, 2, 8), tk = clattn_bshd(k, 8, 2, 8);
  clattn_tensor tv = clattn_bshd(v, 8, 2, 8), to = clattn_bshd(o, 8, 2, 8);
  clattn_status st = clattn_forward(ctx, &p, &tq, &tk, &tv, &to, NULL, 0, NULL, NULL);
  snprintf(msg, len, "%s", clattn_last_error(ctx));
  clFinish(clattn_context_queue(ctx));
  cl_mem m[] = {q, k, v, o};
  for (int i = 0; i < 4; i++) clReleaseMemObject(m[i]);
  return st;
}

/* The same for the backward (with LSE and gradients): only its build is of interest. */
static clattn_status tiny_backward(clattn_context *ctx, char *msg, size_t len) {
  size_t n = 1 * 8 * 2 * 8;
  cl_mem b[9];
  for (int i = 0; i < 9; i++) b[i] = test_buffer(ctx, i == 5 ? 2 * 8 : n, 0.5f);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = p.seqlen_kv = 8, p.head_dim = 8;
  clattn_tensor t[9];
  for (int i = 0; i < 9; i++) t[i] = clattn_bshd(b[i], 8, 2, 8);
  clattn_status st = clattn_backward(ctx, &p, &t[0], &t[1], &t[2], &t[3], &t[4], b[5], &t[6], &t[7],
                                     &t[8], 0, NULL, NULL);
  snprintf(msg, len, "%s", clattn_last_error(ctx));
  clFinish(clattn_context_queue(ctx));
  for (int i = 0; i < 9; i++) clReleaseMemObject(b[i]);
  return st;
}

/* The forward options of a config of ctx, as its builds get them. */
static void forward_options(clattn_context *ctx, char *out, size_t len) {
  clattn__class cls = {8, 8, 0, clattn__seqlen_bucket(8), 0};
  clattn__config c = {16, 16, 1, 1, 0, 0, 0, 1};
  clattn__config_options(&ctx->device, &cls, &c, out, len);
}

Test(context, build_options_read_at_creation) {
  setenv("CLATTN_BUILD_OPTIONS", BAD_OPTION, 1);
  clattn_context *with = test_context(NULL);
  unsetenv("CLATTN_BUILD_OPTIONS");
  clattn_context *without = test_context(NULL);
  setenv("CLATTN_BUILD_OPTIONS", BAD_OPTION, 1); /* after the fact: ignored by both */
  char opts[512], msg[4096];
  forward_options(with, opts, sizeof opts);
  cr_expect(strstr(opts, BAD_OPTION), "the options lack what the environment had: %s", opts);
  forward_options(without, opts, sizeof opts);
  cr_expect(!strstr(opts, BAD_OPTION), "the options took a later environment: %s", opts);
  unsetenv("CLATTN_BUILD_OPTIONS");
  /* The builds of the context made with the option get it, forward and backward. */
  clattn_status st = tiny_forward(with, msg, sizeof msg);
  cr_expect_eq(st, CLATTN_ERR_BUILD, "forward: %s (%s)", clattn_status_string(st), msg);
  cr_expect(strstr(msg, BAD_OPTION), "forward message: %s", msg);
  st = tiny_backward(with, msg, sizeof msg);
  cr_expect_eq(st, CLATTN_ERR_BUILD, "backward: %s (%s)", clattn_status_string(st), msg);
  cr_expect(strstr(msg, BAD_OPTION), "backward message: %s", msg);
  /* And the other one still builds and computes, with the variable set again. */
  setenv("CLATTN_BUILD_OPTIONS", BAD_OPTION, 1);
  test_context_still_works(without);
  unsetenv("CLATTN_BUILD_OPTIONS");
  clattn_context_destroy(with);
  clattn_context_destroy(without);
}

/* The softcap's fast tanh (cl/common.cl's CAP_FAST) is asked for half storage on tensor cores
 * that are not emulated (NVIDIA), and nowhere else; on PoCL, where the natives are exact, the
 * capped half forward built with it still passes the rule. */
Test(context, softcap_fast_tanh_only_for_half_on_nvidia) {
  clattn_context *ctx = test_context(NULL);
  clattn__device saved = ctx->device;
  clattn__class cls = {8, 8, 0, clattn__seqlen_bucket(8), 0, CLATTN_F16, CLATTN__VAR_SOFTCAP, 0};
  clattn__config c = {16, 16, 1, 1, 0, 0, 0, 1};
  char opts[1024];
  ctx->device.tensor_cores = 1, ctx->device.mma_emulated = 0;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(strstr(opts, "-DCAP_FAST=2"), "%s", opts);
  cls.dtype = CLATTN_F32;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "CAP_FAST"), "fp32: %s", opts);
  cls.dtype = CLATTN_BF16, cls.variants = CLATTN__VAR_MASK;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "CAP_FAST"), "no softcap: %s", opts);
  cls.variants = CLATTN__VAR_SOFTCAP, ctx->device.mma_emulated = 1;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "CAP_FAST"), "emulated: %s", opts);
  /* The standard path's kernels take the same tanh (a forward on one path and its backward on
   * the other agree). */
  clattn__shape s = {0};
  s.dtype = CLATTN_BF16, s.softcap = 5.0f;
  char std[192];
  ctx->device.mma_emulated = 0;
  clattn__std_options(ctx, &s, 64, 1, std, sizeof std);
  cr_expect(strstr(std, "-DCAP_FAST=2") && strstr(std, "-D SOFTCAP=1"), "standard: %s", std);
  s.dtype = CLATTN_F32;
  clattn__std_options(ctx, &s, 64, 1, std, sizeof std);
  cr_expect(!strstr(std, "CAP_FAST"), "standard fp32: %s", std);
  s.dtype = CLATTN_F16, ctx->device.mma_emulated = 1;
  clattn__std_options(ctx, &s, 64, 1, std, sizeof std);
  cr_expect(!strstr(std, "CAP_FAST"), "standard emulated: %s", std);
  ctx->device = saved;
  clattn_context_destroy(ctx);
  setenv("CLATTN_BUILD_OPTIONS", "-DCAP_FAST=1", 1);
  clattn_problem p = {0};
  p.batch = 1, p.heads_q = 2, p.seqlen_q = 37, p.seqlen_kv = 70, p.head_dim = 32;
  p.flags = CLATTN_CAUSAL, p.softcap = 5.0f, p.dtype = CLATTN_F16;
  test_forward_shape(&p, 0, 0, 1, NULL);
  unsetenv("CLATTN_BUILD_OPTIONS");
}

/* forward_mma_half flushes fp32 denormals on NVIDIA (-cl-denorms-are-zero: faster, within the
 * half rule there); emulated, and in the backward's kernels, denormals stay. */
Test(context, denormals_flushed_only_by_the_half_forward_on_nvidia) {
  clattn_context *ctx = test_context(NULL);
  clattn__device saved = ctx->device;
  clattn__class cls = {64, 64, 0, clattn__seqlen_bucket(64), 0, CLATTN_F16, 0, 0};
  clattn__config c = {64, 64, 1, 1, 1, (unsigned)clattn__family_find("forward_mma_half"), 1, 1};
  char opts[1024];
  ctx->device.tensor_cores = 1, ctx->device.mma_emulated = 0;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(strstr(opts, "-cl-denorms-are-zero"), "forward_mma_half: %s", opts);
  c.kernel = (unsigned)clattn__family_find("backward_mma_half");
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "denorms"), "backward_mma_half: %s", opts);
  c.kernel = (unsigned)clattn__family_find("forward_mma_half"), ctx->device.mma_emulated = 1;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "denorms"), "emulated: %s", opts);
  ctx->device = saved;
  clattn_context_destroy(ctx);
}

/* Atomic dQ (CLATTN_NONDETERMINISTIC: CLATTN__VAR_ATOMIC) builds backward_mma_half with
 * DQ_ATOMIC, adding by pairs (DQ_RED 2, red.global.add.v2.f32) from compute capability 9.0 on and
 * one element at a time before it and emulated; never with sinks or for a plain class. */
Test(context, atomic_dq_defines_by_compute_capability) {
  clattn_context *ctx = test_context(NULL);
  clattn__device saved = ctx->device;
  clattn__class cls = {
      128, 128, 1, clattn__seqlen_bucket(64), CLATTN__BACKWARD, CLATTN_F16, CLATTN__VAR_ATOMIC, 0};
  clattn__config c = {128, 128, 1, 1, 0, (unsigned)clattn__family_find("backward_mma_half"), 1, 1};
  char opts[1024];
  ctx->device.tensor_cores = 1, ctx->device.mma_emulated = 0, ctx->device.cc_major = 9;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(strstr(opts, "-DDQ_ATOMIC=1 -DDQ_RED=2"), "sm_90: %s", opts);
  ctx->device.cc_major = 8;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(strstr(opts, "-DDQ_ATOMIC=1") && !strstr(opts, "DQ_RED"), "sm_80: %s", opts);
  ctx->device.cc_major = 9, ctx->device.mma_emulated = 1;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(strstr(opts, "-DDQ_ATOMIC=1") && !strstr(opts, "DQ_RED"), "emulated: %s", opts);
  cls.variants |= CLATTN__VAR_SINKS;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "DQ_ATOMIC"), "sinks: %s", opts);
  cls.variants = 0;
  clattn__config_options(&ctx->device, &cls, &c, opts, sizeof opts);
  cr_expect(!strstr(opts, "DQ_ATOMIC"), "plain: %s", opts);
  ctx->device = saved;
  clattn_context_destroy(ctx);
}

/* Builds a new program on ctx with stderr in a file; returns what was printed (caller frees). */
static char *stderr_of_build(clattn_context *ctx, const char *source) {
  char path[512];
  snprintf(path, sizeof path, "%s/stderr.txt", test_tmpdir());
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  cr_assert(saved >= 0 && fd >= 0, "cannot redirect stderr to %s", path);
  dup2(fd, 2);
  cl_program prog;
  clattn_status st = clattn__build(ctx, source, "-DVALUE=1", &prog);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  cr_assert_eq(st, CLATTN_OK, "%s", clattn_last_error(ctx));
  char *text = calloc(1, 65536);
  cr_assert_not_null(text);
  cr_assert(pread(fd, text, 65535, 0) >= 0);
  close(fd);
  return text;
}

Test(context, build_log_read_at_creation) {
  setenv("CLATTN_BUILD_LOG", "1", 1);
  clattn_context *with = test_context(NULL);
  unsetenv("CLATTN_BUILD_LOG");
  clattn_context *without = test_context(NULL);
  setenv("CLATTN_BUILD_LOG", "1", 1);
  char *a = stderr_of_build(without, "__kernel void f(__global float *x) { x[0] = VALUE; }");
  cr_expect(!strstr(a, "clattn: built"), "a later CLATTN_BUILD_LOG printed: %s", a);
  unsetenv("CLATTN_BUILD_LOG");
  char *b = stderr_of_build(with, "__kernel void g(__global float *x) { x[0] = VALUE; }");
  cr_expect(strstr(b, "clattn: built \"-DVALUE=1\""), "the build log is missing: \"%s\"", b);
  free(a);
  free(b);
  clattn_context_destroy(with);
  clattn_context_destroy(without);
}

Test(context, version_is_the_cmake_version) {
  cr_assert_str_eq(clattn_version(), CLATTN_EXPECTED_VERSION);
  unsigned major = 0, minor = 0, patch = 0;
  cr_assert_eq(sscanf(CLATTN_EXPECTED_VERSION, "%u.%u.%u", &major, &minor, &patch), 3);
  cr_assert_eq(clattn_version_number(), major * 1000000 + minor * 1000 + patch, "%u",
               clattn_version_number());
  /* The header this test was compiled with says the same. */
  cr_assert_eq(major, CLATTN_VERSION_MAJOR);
  cr_assert_eq(minor, CLATTN_VERSION_MINOR);
  cr_assert_eq(patch, CLATTN_VERSION_PATCH);
}
