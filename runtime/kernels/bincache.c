/* On-disk program binary cache: compiled programs survive the process, so a second process (or
 * a tuning run that compiles many configs again) loads them instead of compiling.
 *
 * Key: library version, kernel-source hash, build options, and the device's name, vendor,
 * driver and platform version. File <cache_dir>/programs/<hash of key>.bin holds a header with
 * the key itself (a hash collision or a stale file is detected by comparing it) and a checksum
 * of the binary. An unreadable, truncated, corrupt or stale entry is rebuilt from source and
 * rewritten, never fatal. Writes go to a temporary file renamed into place.
 *
 * A binary is code the OpenCL driver runs and parses without defence (a planted entry made
 * PoCL read out of bounds or abort), so the cache is trusted as ssh and pip trust theirs: the
 * folders are created 0700, and a folder or entry not owned by this user, or writable by group
 * or others, is neither read nor written, with one warning. */
#include "kernels.h"

#include <errno.h>
#include <fcntl.h>
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

/* Why a cache folder or entry may not be trusted, or NULL when it may. */
static const char *distrust(const struct stat *st, char *why, size_t len) {
  if (st->st_uid != geteuid())
    snprintf(why, len, "is owned by uid %u, not by this user (uid %u)", (unsigned)st->st_uid,
             (unsigned)geteuid());
  else if (st->st_mode & (S_IWGRP | S_IWOTH))
    snprintf(why, len, "is writable by group or others (mode %03o; chmod go-w to use it)",
             (unsigned)st->st_mode & 0777);
  else
    return NULL;
  return why;
}

/* 1 when cache_dir and cache_dir/programs exist, are folders and may be trusted. A folder that
 * exists but may not be trusted is warned about (once: clattn__warn drops repeats). */
static int folders_trusted(clattn_context *ctx) {
  const char *sub[2] = {"", "/programs"};
  int ok = 1;
  for (int i = 0; ok && i < 2; i++) {
    char dir[4200], text[160];
    snprintf(dir, sizeof dir, "%s%s", ctx->cache_dir, sub[i]);
    struct stat st;
    const char *why = NULL;
    if (stat(dir, &st) != 0) /* missing: nothing to load; a store creates it first */
      ok = 0;
    else if (!S_ISDIR(st.st_mode))
      why = "is not a folder";
    else
      why = distrust(&st, text, sizeof text);
    if (why) {
      clattn__warn(ctx, "program cache folder %s %s; not used, programs are compiled from source",
                   dir, why);
      ok = 0;
    }
  }
  return ok;
}

/* The whole entry file for key (the caller frees it) and where its binary lies in it, or NULL
 * (missing, not a regular file, not trusted, too large, truncated, corrupt or stale). The
 * file's size bounds the allocation, never a length read from its header. */
static unsigned char *read_entry(clattn_context *ctx, const char *path, const char *key,
                                 const unsigned char **bin, size_t *len) {
  unsigned char *file = NULL;
  /* No symbolic link, and no blocking on a FIFO planted where the entry should be. */
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  char text[160];
  const char *why = NULL;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      !(why = distrust(&st, text, sizeof text)) && st.st_size > 0 &&
      (uint64_t)st.st_size <= MAX_BINARY + HEAD_BYTES + TAIL_BYTES + strlen(key) &&
      (file = malloc((size_t)st.st_size))) {
    size_t n = 0;
    ssize_t got = 1;
    while (n < (size_t)st.st_size && got > 0)
      if ((got = read(fd, file + n, (size_t)st.st_size - n)) > 0) n += (size_t)got;
    *bin = n == (size_t)st.st_size ? clattn__bincache_parse(file, n, key, len) : NULL;
    if (!*bin) {
      free(file);
      file = NULL;
    }
  }
  if (why) clattn__warn(ctx, "program cache entry %s %s; ignored, rebuilt from source", path, why);
  if (fd >= 0) close(fd);
  return file;
}

static int write_all(int fd, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n > 0) {
    ssize_t done = write(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return 0;
    p += done, n -= (size_t)done;
  }
  return 1;
}

/* 1 when the entry is in place: written, flushed to disk, closed and renamed over path. The
 * temporary file is mkstemp's (0600, a name no other writer has, even one left by a process that
 * died mid-write in another container with the same pid). */
static int write_entry(clattn_context *ctx, const char *path, const char *key,
                       const unsigned char *bin, size_t len) {
  char tmp[4300];
  snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return 0; /* a read-only cache only costs time */
  uint32_t format = FORMAT, keylen = (uint32_t)strlen(key);
  uint64_t binlen = len, sum = clattn__hash(bin, len, 0);
  unsigned char head[HEAD_BYTES], tail[TAIL_BYTES];
  memcpy(head, MAGIC, 8);
  memcpy(head + 8, &format, sizeof format);
  memcpy(head + 12, &keylen, sizeof keylen);
  memcpy(tail, &binlen, sizeof binlen);
  memcpy(tail + 8, &sum, sizeof sum);
  int ok = write_all(fd, head, sizeof head) && write_all(fd, key, keylen) &&
           write_all(fd, tail, sizeof tail) && write_all(fd, bin, len) && fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  ok = ok && rename(tmp, path) == 0;
  if (!ok) unlink(tmp);
  return ok;
}

cl_program clattn__bincache_load(clattn_context *ctx, uint64_t source_hash, const char *options) {
  if (!ctx->cache_dir || !folders_trusted(ctx)) return NULL;
  char *key = cache_key(ctx, source_hash, options), path[4200];
  if (!key) return NULL;
  entry_path(ctx, key, path, sizeof path);
  size_t len = 0;
  const unsigned char *bin = NULL;
  unsigned char *file = read_entry(ctx, path, key, &bin, &len);
  free(key);
  struct stat st;
  if (!file) {
    if (lstat(path, &st) == 0) ctx->bincache_rejected++;
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
    clattn__make_parents(path);
    /* Counted only when the entry is in place: a folder that cannot be written stores none. */
    if (folders_trusted(ctx) && write_entry(ctx, path, key, bin, len)) ctx->bincache_stored++;
  }
  free(key);
  free(bin);
}
