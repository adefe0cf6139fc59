/* Parallel compilation of the programs the tuner will try next. */
#include "kernels.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_JOBS = 16 };

typedef struct {
  cl_context cl;
  cl_device_id device;
  const char *source;
  uint64_t hash;
  char options[512];
  cl_program prog;
  cl_int err;
} job;

/* Touches no clattn state: only its own job and thread-safe OpenCL calls. */
static void *build(void *arg) {
  job *j = arg;
  size_t len = strlen(j->source);
  j->prog = clCreateProgramWithSource(j->cl, 1, &j->source, &len, &j->err);
  if (j->err == CL_SUCCESS) j->err = clBuildProgram(j->prog, 1, &j->device, j->options, NULL, NULL);
  return NULL;
}

void clattn__prebuild(clattn_context *ctx, const clattn__sources *src, const clattn__class *cls,
                      const clattn__config *cfgs, size_t n) {
  job jobs[MAX_JOBS];
  size_t count = 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t width = cores > 1 ? (size_t)cores : 1;
  if (width > MAX_JOBS) width = MAX_JOBS;
  for (size_t i = 0; i < n && count < width; i++) {
    const clattn__config *c = &cfgs[i];
    if (c->kernel >= CLATTN__MAX_FAMILIES || !src->text[c->kernel]) continue;
    job *j = &jobs[count];
    memset(j, 0, sizeof *j);
    j->cl = ctx->cl, j->device = ctx->device_id;
    j->source = src->text[c->kernel], j->hash = src->hash[c->kernel];
    clattn__config_options(&ctx->device, cls, c, j->options, sizeof j->options);
    if (clattn__program_cached(ctx, j->hash, j->options)) continue;
    cl_program disk = clattn__bincache_load(ctx, j->hash, j->options);
    if (disk) {
      clattn__program_cache_put(ctx, j->hash, j->options, disk);
      continue;
    }
    count++;
  }
  if (count < 2) return; /* nothing to gain from threads: clattn__build compiles it */
  pthread_t threads[MAX_JOBS];
  int started[MAX_JOBS] = {0};
  for (size_t i = 0; i < count; i++)
    started[i] = pthread_create(&threads[i], NULL, build, &jobs[i]) == 0;
  for (size_t i = 0; i < count; i++) {
    if (started[i])
      pthread_join(threads[i], NULL);
    else
      build(&jobs[i]);
  }
  for (size_t i = 0; i < count; i++) {
    job *j = &jobs[i];
    if (j->err != CL_SUCCESS) { /* clattn__build compiles it again and reports the log */
      if (j->prog) clReleaseProgram(j->prog);
      continue;
    }
    ctx->compiled++;
    clattn__bincache_store(ctx, j->hash, j->options, j->prog);
    clattn__program_cache_put(ctx, j->hash, j->options, j->prog);
  }
}
