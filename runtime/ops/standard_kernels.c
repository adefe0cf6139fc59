/* The standard path's kernels (cl/standard.cl), built per name and options and kept per
 * context, and their launches: shared by its forward, its backward and the packed copies of its
 * operands. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct clattn__aux_kernel {
  char name[16], options[192]; /* longer than any clattn__std_options string (variants too) */
  cl_kernel kernel;
  struct clattn__aux_kernel *next;
} clattn__aux_kernel;

clattn_status clattn__std_kernel(clattn_context *ctx, const char *name, const char *options,
                                 cl_kernel *out) {
  for (clattn__aux_kernel *a = ctx->aux; a; a = a->next)
    if (!strcmp(a->name, name) && !strcmp(a->options, options)) return *out = a->kernel, CLATTN_OK;
  char *src = NULL;
  clattn_status st = clattn__family_source(ctx, clattn__family_for(CLATTN__ROLE_STANDARD), &src);
  cl_program prog = NULL;
  if (st == CLATTN_OK) st = clattn__build(ctx, src, options, &prog);
  free(src);
  if (st != CLATTN_OK) return st;
  cl_int err;
  cl_kernel k = clCreateKernel(prog, name, &err);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateKernel(standard path)");
  clattn__aux_kernel *a = calloc(1, sizeof *a);
  if (!a) {
    clReleaseKernel(k);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  snprintf(a->name, sizeof a->name, "%s", name);
  snprintf(a->options, sizeof a->options, "%s", options);
  a->kernel = k;
  a->next = ctx->aux;
  ctx->aux = a;
  *out = k;
  return CLATTN_OK;
}

clattn_status clattn__std_launch(clattn_context *ctx, cl_kernel k, cl_uint base_arg, size_t items,
                                 size_t wg) {
  clattn__launch l = {k, base_arg, items, wg, NULL};
  return clattn__launch_grid(ctx, ctx->queue, 1, &l, ctx->std_launch_groups, 0, NULL, NULL, NULL);
}

void clattn__std_kernels_release(clattn_context *ctx) {
  for (clattn__aux_kernel *a = ctx->aux, *next; a; a = next) {
    next = a->next;
    clReleaseKernel(a->kernel);
    free(a);
  }
  ctx->aux = NULL;
}
