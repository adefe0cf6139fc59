/* JIT: a program for (source, options) from the per-context program cache (keyed by source
 * hash and options), the on-disk binary cache, or compiled now. */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static clattn_status build_failed(clattn_context *ctx, cl_program prog, cl_int err,
                                  const char *options) {
  clattn_status st = clattn__fail(ctx, CLATTN_ERR_BUILD,
                                  "clBuildProgram failed: %s (%d), options \"%s\"; build log:\n",
                                  clattn__cl_error_name(err), err, options);
  size_t n = 0;
  if (clGetProgramBuildInfo(prog, ctx->device_id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) ==
          CL_SUCCESS &&
      n > 0) {
    char *log = calloc(n + 1, 1);
    if (log && clGetProgramBuildInfo(prog, ctx->device_id, CL_PROGRAM_BUILD_LOG, n, log, NULL) ==
                   CL_SUCCESS)
      clattn__append_error(ctx, log);
    free(log);
  }
  return st;
}

/* $CLATTN_BUILD_LOG set: each program compiled from source prints its build options and log on
 * stderr (with CLATTN_BUILD_OPTIONS=-cl-nv-verbose, NVIDIA's registers and spills). */
static void print_build_log(clattn_context *ctx, cl_program prog, const char *options) {
  size_t n = 0;
  if (clGetProgramBuildInfo(prog, ctx->device_id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS)
    return;
  char *log = calloc(n + 1, 1);
  if (log &&
      clGetProgramBuildInfo(prog, ctx->device_id, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS)
    fprintf(stderr, "clattn: built \"%s\":\n%s\n", options, log);
  free(log);
}

clattn_status clattn__build(clattn_context *ctx, const char *source, const char *options,
                            cl_program *out) {
  *out = NULL;
  uint64_t h = clattn__hash(source, strlen(source), 0);
  for (clattn__program *p = ctx->programs; p; p = p->next)
    if (p->source_hash == h && strcmp(p->options, options) == 0) {
      *out = p->program;
      return CLATTN_OK;
    }
  cl_program prog = clattn__bincache_load(ctx, h, options);
  if (!prog) {
    cl_int err;
    size_t len = strlen(source);
    prog = clCreateProgramWithSource(ctx->cl, 1, &source, &len, &err);
    if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateProgramWithSource");
    err = clBuildProgram(prog, 1, &ctx->device_id, options, NULL, NULL);
    if (err != CL_SUCCESS) {
      clattn_status st = build_failed(ctx, prog, err, options);
      clReleaseProgram(prog);
      return st;
    }
    ctx->compiled++;
    if (ctx->build_log) print_build_log(ctx, prog, options);
    clattn__bincache_store(ctx, h, options, prog);
  }
  clattn_status st = clattn__program_cache_put(ctx, h, options, prog);
  if (st == CLATTN_OK) *out = prog;
  return st;
}

int clattn__program_cached(const clattn_context *ctx, uint64_t source_hash, const char *options) {
  for (const clattn__program *p = ctx->programs; p; p = p->next)
    if (p->source_hash == source_hash && strcmp(p->options, options) == 0) return 1;
  return 0;
}

clattn_status clattn__program_cache_put(clattn_context *ctx, uint64_t source_hash,
                                        const char *options, cl_program prog) {
  clattn__program *p = calloc(1, sizeof *p);
  char *opts = strdup(options);
  if (!p || !opts) {
    free(p);
    free(opts);
    clReleaseProgram(prog);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  p->source_hash = source_hash;
  p->options = opts;
  p->program = prog;
  p->next = ctx->programs;
  ctx->programs = p;
  return CLATTN_OK;
}

void clattn__program_cache_release(clattn_context *ctx) {
  for (clattn__program *p = ctx->programs, *next; p; p = next) {
    next = p->next;
    clReleaseProgram(p->program);
    free(p->options);
    free(p);
  }
  ctx->programs = NULL;
}

size_t clattn__program_cache_size(const clattn_context *ctx) {
  size_t n = 0;
  for (const clattn__program *p = ctx->programs; p; p = p->next) n++;
  return n;
}
