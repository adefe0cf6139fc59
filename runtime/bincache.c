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

/* The header's fixed parts around the key: magic, format, key length; then binary length and
 * checksum. Read with memcpy: the bytes need not be aligned. */
#define HEAD_BYTES (8 + 4 + 4)
#define TAIL_BYTES (8 + 8)

const unsigned char *clattn__bincache_parse(const unsigned char *file, size_t file_len,
                                            const char *key, size_t *bin_len) {
  const unsigned char *bin = NULL;
  size_t keylen = strlen(key);
  uint32_t format = 0, stored_keylen = 0;
  uint64_t binlen = 0, sum = 0;
  /* Every length is compared with what is left of the file before it is used, so no field can
   * point outside [file, file + file_len). */
  if (file && file_len >= HEAD_BYTES && !memcmp(file, MAGIC, 8)) {
    memcpy(&format, file + 8, sizeof format);
    memcpy(&stored_keylen, file + 12, sizeof stored_keylen);
    size_t rest = file_len - HEAD_BYTES;
    if (format == FORMAT && stored_keylen == keylen && rest >= keylen + TAIL_BYTES &&
        !memcmp(file + HEAD_BYTES, key, keylen)) {
      const unsigned char *p = file + HEAD_BYTES + keylen;
      memcpy(&binlen, p, sizeof binlen);
      memcpy(&sum, p + 8, sizeof sum);
      rest -= keylen + TAIL_BYTES;
      /* The binary is exactly the rest of the file: a longer or shorter file is not this entry. */
      if (binlen > 0 && binlen <= MAX_BINARY && binlen == rest &&
          clattn__hash(p + TAIL_BYTES, (size_t)binlen, 0) == sum) {
        bin = p + TAIL_BYTES;
        *bin_len = (size_t)binlen;
      }
    }
  }
  return bin;
}

/* The whole entry file for key (the caller frees it) and where its binary lies in it, or NULL
 * (missing, unreadable, too large, truncated, corrupt or stale). The file's size bounds the
 * allocation, never a length read from its header. */
static unsigned char *read_entry(const char *path, const char *key, const unsigned char **bin,
                                 size_t *len) {
  unsigned char *file = NULL;
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      (uint64_t)st.st_size <= MAX_BINARY + HEAD_BYTES + TAIL_BYTES + strlen(key) &&
      (file = malloc((size_t)st.st_size))) {
    size_t n = fread(file, 1, (size_t)st.st_size, f);
    *bin = n == (size_t)st.st_size ? clattn__bincache_parse(file, n, key, len) : NULL;
    if (!*bin) {
      free(file);
      file = NULL;
    }
  }
  if (f) fclose(f);
  return file;
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
  const unsigned char *bin = NULL;
  unsigned char *file = read_entry(path, key, &bin, &len);
  free(key);
  if (!file) {
    if (access(path, F_OK) == 0) ctx->bincache_rejected++;
    return NULL;
  }
  cl_int status = CL_SUCCESS, err;
  const unsigned char *bins[1] = {bin};
  cl_program prog =
      clCreateProgramWithBinary(ctx->cl, 1, &ctx->device_id, &len, bins, &status, &err);
  free(file);
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
