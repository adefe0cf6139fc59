/* A family's config built into its kernels, with the limits the driver reports for each: the
 * planner compares them with the family's model and steps down when a kernel does not fit. */
#include "kernels.h"

#include <stdio.h>
#include <string.h>

void clattn__built_release(clattn__built *b) {
  for (unsigned i = 0; i < CLATTN__MAX_ENTRIES; i++)
    if (b->kernels[i]) clReleaseKernel(b->kernels[i]);
  memset(b, 0, sizeof *b);
}

clattn_status clattn__config_build(clattn_context *ctx, const clattn__sources *src,
                                   const clattn__class *cls, const clattn__config *c,
                                   clattn__built *out) {
  memset(out, 0, sizeof *out);
  const clattn__family *f = clattn__family_of(c);
  if (!f || f->pass != cls->pass || !src->text[c->kernel])
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "unknown %s kernel family %u",
                        clattn__pass_name((clattn__pass)cls->pass), c->kernel);
  char options[512];
  clattn__config_options(&ctx->device, cls, c, options, sizeof options);
  cl_program prog;
  clattn_status st = clattn__build(ctx, src->text[c->kernel], options, &prog);
  for (unsigned i = 0; st == CLATTN_OK && f->entries[i]; i++) {
    cl_int err;
    cl_kernel k = clCreateKernel(prog, f->entries[i], &err);
    if (err != CL_SUCCESS) {
      char what[96];
      snprintf(what, sizeof what, "clCreateKernel(%s)", f->entries[i]);
      st = clattn__fail_cl(ctx, err, what);
      break;
    }
    out->kernels[out->count++] = k;
    cl_ulong lmem = 0, pmem = 0;
    err = clGetKernelWorkGroupInfo(k, ctx->device_id, CL_KERNEL_WORK_GROUP_SIZE,
                                   sizeof out->max_wg[i], &out->max_wg[i], NULL);
    if (err == CL_SUCCESS)
      err = clGetKernelWorkGroupInfo(k, ctx->device_id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem,
                                     &lmem, NULL);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clGetKernelWorkGroupInfo");
    /* Informative only: not every driver reports it. */
    clGetKernelWorkGroupInfo(k, ctx->device_id, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof pmem, &pmem,
                             NULL);
    out->local_mem[i] = (size_t)lmem, out->private_mem[i] = (size_t)pmem;
  }
  if (st != CLATTN_OK) clattn__built_release(out);
  return st;
}
