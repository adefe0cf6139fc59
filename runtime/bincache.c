/* On-disk program binary cache: compiled programs survive the process, so a second process (or
 * a tuning run that compiles many configs again) loads them instead of compiling.
 *
 * Key: library version, kernel-source hash, build options, and the device's name, vendor,
 * driver and platform version. File <cache_dir>/programs/<hash of key>.bin holds a header with
 * the key itself (a hash collision or a stale file is detected by comparing it) and a checksum
 * of the binary. An unreadable, truncated, corrupt or stale entry is rebuilt from source and
 * rewritten, never fatal. Writes go to a temporary file renamed into place. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "CLATTNPB"
#define FORMAT 1u
#define MAX_BINARY ((uint64_t)1 << 30)

static char *cache_key(clattn_context *ctx, uint64_t source_hash, const char *options) {
  const clattn__device *d = &ctx->device;
  char *key = NULL;
  if (asprintf(&key, "clattn %d.%d.%d\n%016llx\n%s\n%s\n%s\n%s\n%s", CLATTN_VERSION_MAJOR,
               CLATTN_VERSION_MINOR, CLATTN_VERSION_PATCH, (unsigned long long)source_hash, options,
               d->name, d->vendor, d->driver, d->platform_version) < 0)
    return NULL;
  return key;
}

static void entry_path(clattn_context *ctx, const char *key, char *out, size_t len) {
  snprintf(out, len, "%s/programs/%016llx.bin", ctx->cache_dir,
           (unsigned long long)clattn__hash(key, strlen(key), 0x5bd1e995));
}

/* The binary stored for key, or NULL (missing, unreadable, truncated, corrupt or stale). */
static unsigned char *read_entry(const char *path, const char *key, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char magic[8];
  uint32_t format = 0, keylen = 0;
  uint64_t binlen = 0, sum = 0;
  unsigned char *bin = NULL;
  char *stored = NULL;
  int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, MAGIC, 8) &&
           fread(&format, sizeof format, 1, f) == 1 && format == FORMAT &&
           fread(&keylen, sizeof keylen, 1, f) == 1 && keylen == strlen(key) &&
           (stored = malloc(keylen + 1)) && fread(stored, 1, keylen, f) == keylen &&
           !memcmp(stored, key, keylen) && fread(&binlen, sizeof binlen, 1, f) == 1 && binlen > 0 &&
           binlen <= MAX_BINARY && fread(&sum, sizeof sum, 1, f) == 1 &&
           (bin = malloc((size_t)binlen)) && fread(bin, 1, (size_t)binlen, f) == binlen &&
           clattn__hash(bin, (size_t)binlen, 0) == sum && fgetc(f) == EOF;
  fclose(f);
  free(stored);
  if (!ok) {
    free(bin);
    return NULL;
  }
  *len = (size_t)binlen;
  return bin;
}

static void make_dirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0755);
      *p = '/';
    }
}

static void write_entry(const char *path, const char *key, const unsigned char *bin, size_t len) {
  make_dirs(path);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return; /* a read-only cache only costs time */
  uint32_t format = FORMAT, keylen = (uint32_t)strlen(key);
  uint64_t binlen = len, sum = clattn__hash(bin, len, 0);
  int ok = fwrite(MAGIC, 1, 8, f) == 8 && fwrite(&format, sizeof format, 1, f) == 1 &&
           fwrite(&keylen, sizeof keylen, 1, f) == 1 && fwrite(key, 1, keylen, f) == keylen &&
           fwrite(&binlen, sizeof binlen, 1, f) == 1 && fwrite(&sum, sizeof sum, 1, f) == 1 &&
           fwrite(bin, 1, len, f) == len;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

cl_program clattn__bincache_load(clattn_context *ctx, uint64_t source_hash, const char *options) {
  if (!ctx->cache_dir) return NULL;
  char *key = cache_key(ctx, source_hash, options), path[4200];
  if (!key) return NULL;
  entry_path(ctx, key, path, sizeof path);
  size_t len = 0;
  unsigned char *bin = read_entry(path, key, &len);
  free(key);
  if (!bin) {
    if (access(path, F_OK) == 0) ctx->bincache_rejected++;
    return NULL;
  }
  cl_int status = CL_SUCCESS, err;
  const unsigned char *bins[1] = {bin};
  cl_program prog =
      clCreateProgramWithBinary(ctx->cl, 1, &ctx->device_id, &len, bins, &status, &err);
  free(bin);
  if (err == CL_SUCCESS && status == CL_SUCCESS)
    err = clBuildProgram(prog, 1, &ctx->device_id, options, NULL, NULL);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (prog) clReleaseProgram(prog);
    ctx->bincache_rejected++;
    return NULL;
  }
  ctx->bincache_loaded++;
  return prog;
}

void clattn__bincache_store(clattn_context *ctx, uint64_t source_hash, const char *options,
                            cl_program prog) {
  if (!ctx->cache_dir) return;
  size_t len = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL) != CL_SUCCESS ||
      len == 0 || len > MAX_BINARY)
    return;
  unsigned char *bin = malloc(len);
  unsigned char *bins[1] = {bin};
  char *key = cache_key(ctx, source_hash, options), path[4200];
  if (bin && key &&
      clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
    entry_path(ctx, key, path, sizeof path);
    write_entry(path, key, bin, len);
    ctx->bincache_stored++;
  }
  free(key);
  free(bin);
}
