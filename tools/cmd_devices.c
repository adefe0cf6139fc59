/* `clattn devices`: platforms and devices, their memory, and the tiles sample problems get. */
#include "args.h"
#include "commands.h"

#include "clattn.h"

#include <stdio.h>
#include <string.h>

static void sample_plans(cl_platform_id platform, cl_device_id dev) {
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
  cl_int err;
  cl_context cl = clCreateContext(props, 1, &dev, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    printf("      (cannot create a context: OpenCL error %d)\n", err);
    return;
  }
  clattn_context *ctx = NULL;
  if (clattn_context_create(cl, dev, NULL, NULL, &ctx) != CLATTN_OK) {
    printf("      (clattn: %s)\n", clattn_last_error(NULL));
    clReleaseContext(cl);
    return;
  }
  printf("      %s\n", clattn_context_device_summary(ctx));
  static const size_t dims[] = {64, 128, 256};
  for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
    clattn_problem p = {0};
    p.batch = 1, p.heads_q = 16, p.seqlen_q = p.seqlen_kv = 4096, p.head_dim = dims[i];
    clattn_plan_info info;
    if (clattn_explain(ctx, &p, &info) != CLATTN_OK) {
      printf("      d=%-3zu  no plan: %s\n", dims[i], clattn_last_error(ctx));
      continue;
    }
    printf("      d=%-3zu  %s BQ=%u BKV=%u TPR=%u stage=%u: %zu work-items, %.1f of %.1f KiB local "
           "memory (%s)\n",
           dims[i], info.kernel, info.block_q, info.block_kv, info.threads_per_row, info.stage_kv,
           info.work_group_size, info.local_mem_bytes / 1024.0, info.local_mem_available / 1024.0,
           info.origin);
  }
  clattn_context_destroy(ctx);
  clReleaseContext(cl);
}

static const struct option devices_options[] = {
    {"no-plans", no_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

int cmd_devices(int argc, char **argv) {
  int plans = 1, id, state = 0; /* 1: --help printed; -1: a usage error */
  args a;
  args_init(&a, "devices", argc, argv, devices_options);
  while (!state && (id = args_next(&a)) != ARGS_END) {
    if (id == 'n') {
      plans = 0;
    } else {
      fprintf(id == 'h' ? stdout : stderr, "usage: clattn devices [--no-plans]\n");
      state = id == 'h' ? 1 : -1;
    }
  }
  if (state) return state > 0 ? CLI_OK : CLI_USAGE;
  cl_platform_id platforms[16];
  cl_uint np = 0;
  if (clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS || np == 0) {
    fprintf(stderr, "clattn: no OpenCL platform found\n");
    return CLI_ERROR;
  }
  if (np > 16) np = 16;
  for (cl_uint p = 0; p < np; p++) {
    char name[256] = {0}, version[256] = {0};
    clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    clGetPlatformInfo(platforms[p], CL_PLATFORM_VERSION, sizeof version - 1, version, NULL);
    printf("platform %u: %s (%s)\n", p, name, version);
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS) nd = 0;
    if (nd > 64) nd = 64;
    for (cl_uint d = 0; d < nd; d++) {
      char dname[256] = {0};
      clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
      printf("  device %u:%u  %s\n", p, d, dname);
      if (plans) sample_plans(platforms[p], devs[d]);
    }
  }
  return CLI_OK;
}
