/* Writes the fuzz targets' seed corpora (committed in tests/fuzz/corpus/<target>/; rerun when a
 * format changes): fuzz_make_seeds DIR writes DIR/tunedb, DIR/bincache and DIR/validate.
 *   tunedb:   a database as the runtime writes it (clattn__db_save_merged, entries for this
 *             device like test_tunedb.c's), an empty one, and a few broken ones.
 *   bincache: an entry as the runtime writes it (clattn__bincache_store of a tiny program built
 *             on this device), and damaged copies of it.
 *   validate: problems in fuzz_validate.c's encoding: valid forward and backward calls, and
 *             bad ones (overflowing strides, aliasing sub-buffers, odd heads, unknown dtype...). */
#include "tune.h"
#include "tunedb.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failed;

static void put_file(const char *dir, const char *name, const void *data, size_t len) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(data, 1, len, f) == len;
  if (f) ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "cannot write %s\n", path), failed = 1;
}

static void put_text(const char *dir, const char *name, const char *text) {
  put_file(dir, name, text, strlen(text));
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (f) fclose(f);
  *len = buf ? (size_t)n : 0;
  return buf;
}

/* ---- tunedb ---- */

static void tunedb_seeds(clattn_context *ctx, const char *dir) {
  clattn__db_entry e[3];
  memset(e, 0, sizeof e);
  clattn__sources src = {0}, bwd = {0};
  if (clattn__sources_load(ctx, CLATTN__FORWARD, &src) != CLATTN_OK ||
      clattn__sources_load(ctx, CLATTN__BACKWARD, &bwd) != CLATTN_OK)
    fprintf(stderr, "kernel sources: %s\n", clattn_last_error(ctx)), failed = 1;
  for (int i = 0; i < 3; i++) {
    clattn__db_device_of(&ctx->device, &e[i].dev);
    e[i].median_ms = 1.5 + i, e[i].spread = 0.01;
    snprintf(e[i].date, sizeof e[i].date, "2026-12-02");
  }
  clattn__class rows = {32, 32, 0, clattn__seqlen_bucket(100), 0};
  clattn__config rows_cfg = {8, 16, 2, 1, 1, 0, 1, 1};
  clattn__class tiles = {64, 64, 1, clattn__seqlen_bucket(4096), 0};
  clattn__config tiles_cfg = {32, 16, 4, 1, 1, 1, 2, 4};
  clattn__class back = {64, 64, 0, clattn__seqlen_bucket(1024), 1};
  clattn__config back_cfg = {32, 32, 0, 0, 0, clattn__family_find("backward_rows"), 0, 0};
  e[0].cls = rows, e[0].cfg = rows_cfg, e[0].source_hash = src.hash[0];
  e[1].cls = tiles, e[1].cfg = tiles_cfg, e[1].source_hash = src.hash[1];
  e[2].cls = back, e[2].cfg = back_cfg, e[2].source_hash = bwd.hash[back_cfg.kernel];
  clattn__sources_free(&src);
  clattn__sources_free(&bwd);
  char path[4200], why[256];
  snprintf(path, sizeof path, "%s/real.json", dir);
  remove(path);
  if (clattn__db_save_merged(path, e, 3, why, sizeof why) != CLATTN_OK)
    fprintf(stderr, "%s\n", why), failed = 1;
  snprintf(path, sizeof path, "%s/real.json.lock", dir);
  remove(path);
  put_text(dir, "empty.json",
           "{\"format\": \"clattn-tuning-db\", \"version\": 1, \"entries\": []}\n");
  put_text(dir, "newer_version.json",
           "{\"format\": \"clattn-tuning-db\", \"version\": 2, \"entries\": []}\n");
  put_text(dir, "not_a_db.json", "{\"format\": \"something else\", \"entries\": {}}\n");
  put_text(dir, "truncated.json", "{\"format\": \"clattn-tuning-db\", \"version\": 1, \"entr");
  put_text(dir, "bad_entry.json",
           "{\"format\":\"clattn-tuning-db\",\"version\":1,\"entries\":[{\"device\":{\"platform\":"
           "\"p\",\"platform_version\":\"v\",\"vendor\":\"x\",\"name\":\"n\",\"driver\":\"d\","
           "\"gpu\":true,\"compute_units\":1e300,\"local_mem\":-1},\"source_hash\":\"0123\","
           "\"class\":{\"dtype\":\"f32\",\"head_dim\":64,\"head_dim_v\":64,\"causal\":false,"
           "\"seqlen_bucket\":100,\"pass\":\"sideways\"},\"config\":{\"kernel\":\"forward_mma\","
           "\"block_q\":3,\"block_kv\":16,\"threads_per_row\":1,\"stage_kv\":true,\"pad\":2,"
           "\"split_kv\":true,\"rows_per_item\":0,\"vector_width\":8}},[],null,7]}\n");
}

/* ---- bincache ---- */

/* The entry file clattn__bincache_store writes for a tiny program built on this device (the
 * caller frees it), or NULL. */
static unsigned char *real_entry(clattn_context *ctx, const char *cache, size_t *len) {
  const char *text = "kernel void k(global float *x) { x[get_global_id(0)] = 1.0f; }\n";
  cl_int err;
  cl_program prog = clCreateProgramWithSource(ctx->cl, 1, &text, NULL, &err);
  if (err == CL_SUCCESS) err = clBuildProgram(prog, 1, &ctx->device_id, "", NULL, NULL);
  if (err == CL_SUCCESS) clattn__bincache_store(ctx, 0x0123456789abcdefull, "-DSEED=1", prog);
  if (prog) clReleaseProgram(prog);
  char programs[4200], path[8400];
  snprintf(programs, sizeof programs, "%s/programs", cache);
  DIR *d = err == CL_SUCCESS ? opendir(programs) : NULL;
  struct dirent *de;
  unsigned char *entry = NULL;
  while (d && !entry && (de = readdir(d)))
    if (strstr(de->d_name, ".bin") && !strstr(de->d_name, ".tmp")) {
      snprintf(path, sizeof path, "%s/%s", programs, de->d_name);
      entry = slurp(path, len);
      remove(path);
    }
  if (d) closedir(d);
  if (!entry) fprintf(stderr, "no cache entry in %s (build: %d)\n", programs, err), failed = 1;
  return entry;
}

/* The damaged copies are of a small entry with the real one's header and key and a binary of a
 * few bytes (laid out as write_entry does), so that mutating them is cheap. */
static void damaged_seeds(const char *dir, const unsigned char *entry, size_t len) {
  uint32_t keylen = 0;
  memcpy(&keylen, entry + 12, sizeof keylen);
  const char bin[] = "tiny binary";
  uint64_t binlen = sizeof bin, sum = clattn__hash(bin, sizeof bin, 0);
  size_t head = 16 + (size_t)keylen, small_len = head + 16 + sizeof bin;
  unsigned char *small = len > 16 && keylen < len ? malloc(small_len + 1) : NULL;
  if (!small) fprintf(stderr, "the entry's key length %u is not plausible\n", keylen), failed = 1;
  if (small) {
    memcpy(small, entry, head);
    memcpy(small + head, &binlen, 8), memcpy(small + head + 8, &sum, 8);
    memcpy(small + head + 16, bin, sizeof bin);
    put_file(dir, "small.bin", small, small_len);
    put_file(dir, "truncated.bin", small, small_len - 1);
    put_file(dir, "header_only.bin", small, 16);
    small[small_len] = 0;
    put_file(dir, "trailing_byte.bin", small, small_len + 1);
    small[small_len - 1] ^= 1; /* the checksum no longer matches */
    put_file(dir, "corrupt.bin", small, small_len);
    small[small_len - 1] ^= 1;
    uint32_t huge_key = 0xfffffff0u; /* a key longer than the file */
    memcpy(small + 12, &huge_key, sizeof huge_key);
    put_file(dir, "huge_key.bin", small, small_len);
    memcpy(small + 12, &keylen, sizeof keylen);
    uint64_t huge_bin = (uint64_t)1 << 40; /* a binary longer than the file */
    memcpy(small + head, &huge_bin, sizeof huge_bin);
    put_file(dir, "huge_binary.bin", small, small_len);
  }
  free(small);
}

static void bincache_seeds(clattn_context *ctx, const char *dir, const char *cache) {
  size_t len = 0;
  unsigned char *entry = real_entry(ctx, cache, &len);
  if (entry) {
    put_file(dir, "real.bin", entry, len);
    damaged_seeds(dir, entry, len);
  }
  free(entry);
}

/* ---- validate: fuzz_validate.c's encoding ---- */

typedef struct {
  unsigned char b[256];
  size_t n;
} seed;

static void u8(seed *s, unsigned v) {
  s->b[s->n++] = (unsigned char)v;
}

static void size_field(seed *s, uint64_t v) {
  if (v < 64) {
    u8(s, (unsigned)v);
  } else if (v < (1u << 14)) {
    u8(s, 0x40 | (unsigned)(v >> 8)), u8(s, (unsigned)(v & 255));
  } else {
    u8(s, 0xc0);
    for (int i = 0; i < 8; i++) u8(s, (unsigned)(v >> (8 * i)) & 255);
  }
}

/* mode, the 7 sizes, dtype, flags, algorithm and the default scale. */
static void problem(seed *s, unsigned mode, size_t b, size_t hq, size_t hkv, size_t sq, size_t skv,
                    size_t d, size_t dv, int dtype, unsigned flags, int algo) {
  s->n = 0;
  u8(s, mode);
  size_t f[7] = {b, hq, hkv, sq, skv, d, dv};
  for (int i = 0; i < 7; i++) size_field(s, f[i]);
  u8(s, (unsigned)dtype & 255), u8(s, flags), u8(s, (unsigned)algo & 255), u8(s, 0);
}

/* A packed bshd tensor in buffer buf (fuzz_validate.c: 0..6; 7 NULL buffer, 8 NULL tensor). */
static void packed(seed *s, unsigned buf, size_t offset) {
  u8(s, buf), u8(s, 0), size_field(s, offset);
}

static void raw(seed *s, unsigned buf, size_t offset, uint64_t sb, uint64_t ss, uint64_t sh) {
  u8(s, buf), u8(s, 2), size_field(s, offset);
  size_field(s, sb), size_field(s, ss), size_field(s, sh);
}

static void save_seed(const char *dir, const char *name, const seed *s) {
  put_file(dir, name, s->b, s->n);
}

enum { LSE_SUB = 2 | (5 << 2) }; /* mode bits: pass lse, in buffer 5 (a sub-buffer) */

static void validate_seeds(const char *dir) {
  seed s;
  /* Forward, GQA: q, k, v in the page buffer, o in the odd one, lse in a sub-buffer. */
  problem(&s, LSE_SUB, 1, 2, 1, 8, 8, 16, 16, 0, 0, 0);
  packed(&s, 1, 0), packed(&s, 1, 256), packed(&s, 1, 384), packed(&s, 2, 0);
  save_seed(dir, "forward_ok", &s);
  /* The same with o in the root buffer's sub-buffer at 0 and q in the root: they alias. */
  problem(&s, 2, 1, 2, 1, 8, 8, 16, 16, 0, 0, 0);
  packed(&s, 3, 0), packed(&s, 1, 256), packed(&s, 1, 384), packed(&s, 4, 0);
  save_seed(dir, "forward_alias", &s);
  /* Backward, causal, head_dim_v != head_dim: every tensor somewhere of its own. */
  problem(&s, 1 | LSE_SUB, 1, 2, 2, 4, 6, 8, 4, 0, CLATTN_CAUSAL, CLATTN_ALGO_FUSED);
  packed(&s, 1, 0), packed(&s, 1, 64), packed(&s, 1, 160), packed(&s, 1, 256);
  packed(&s, 1, 320), packed(&s, 2, 0), packed(&s, 2, 64), packed(&s, 2, 160);
  save_seed(dir, "backward_ok", &s);
  /* Strides that overflow the address range. */
  problem(&s, 0, 3, 1, 1, 4, 4, 4, 4, 0, 0, 0);
  raw(&s, 3, 0, (uint64_t)1 << 62, 4, 4), packed(&s, 3, 64), packed(&s, 3, 128);
  packed(&s, 2, 0);
  save_seed(dir, "stride_overflow", &s);
  /* A broadcast input (stride_seq 0) is fine; an output with stride_seq 0 writes one row. */
  problem(&s, 0, 1, 1, 1, 4, 4, 4, 4, 0, 0, CLATTN_ALGO_STANDARD);
  raw(&s, 1, 0, 0, 0, 4), packed(&s, 1, 64), packed(&s, 1, 128), raw(&s, 2, 0, 0, 0, 4);
  save_seed(dir, "self_overlap_output", &s);
  /* A buffer of another OpenCL context, a NULL buffer, a NULL tensor. */
  problem(&s, 0, 1, 1, 1, 4, 4, 4, 4, 0, 0, 0);
  packed(&s, 6, 0), packed(&s, 1, 64), packed(&s, 1, 128), packed(&s, 2, 0);
  save_seed(dir, "other_context", &s);
  problem(&s, 1, 1, 1, 1, 4, 4, 4, 4, 0, 0, 0);
  packed(&s, 1, 0), packed(&s, 7, 64), packed(&s, 1, 128), packed(&s, 8, 0);
  save_seed(dir, "null_tensors", &s);
  /* Problems that fail before any tensor: odd heads, F16, an unknown algorithm, a fused head
   * dim of 300, huge sequence lengths; and an empty one. */
  problem(&s, 0, 1, 3, 2, 4, 4, 4, 4, 0, 0, 0);
  save_seed(dir, "heads_not_multiple", &s);
  problem(&s, 0, 1, 1, 1, 4, 4, 4, 4, CLATTN_F16, 0, 0);
  save_seed(dir, "dtype_f16", &s);
  problem(&s, 0, 1, 1, 1, 4, 4, 4, 4, 0, 0x80, -3);
  save_seed(dir, "bad_flags_algorithm", &s);
  problem(&s, 0, 1, 1, 1, 4, 4, 300, 300, 0, 0, CLATTN_ALGO_FUSED);
  save_seed(dir, "fused_dim_300", &s);
  problem(&s, 0, 1, 1, 1, (size_t)1 << 31, (size_t)1 << 40, 4, 4, 0, 0, 0);
  save_seed(dir, "seqlen_huge", &s);
  problem(&s, 1, 0, 4, 2, 0, 8, 4, 4, 0, 0, 0);
  packed(&s, 7, 0), packed(&s, 7, 0), packed(&s, 7, 0), packed(&s, 7, 0);
  packed(&s, 7, 0), packed(&s, 7, 0), packed(&s, 7, 0), packed(&s, 7, 0);
  save_seed(dir, "backward_empty", &s);
  /* KV caches (mode bit 7): a paged fp32 decode over pages in the root buffer, with its table in
   * a sub-buffer and its lengths in the one-float buffer; an int8 contiguous append (bit 0),
   * its scales in the page buffer and a sub-buffer; and a page size of 24. */
  problem(&s, 0x80, 1, 4, 2, 1, 32, 8, 8, 0, 0, 0);
  packed(&s, 1, 0), packed(&s, 2, 0);
  u8(&s, 0), size_field(&s, 8), size_field(&s, 8), size_field(&s, 4);
  packed(&s, 3, 4096), packed(&s, 3, 8192);
  u8(&s, 5), u8(&s, 0), u8(&s, 7), u8(&s, 7);
  save_seed(dir, "cache_paged_forward", &s);
  problem(&s, 0x81, 1, 4, 2, 1, 16, 8, 8, 0, 0, 0);
  packed(&s, 3, 16384), packed(&s, 3, 16448);
  u8(&s, 3), size_field(&s, 0), size_field(&s, 0), size_field(&s, 0);
  packed(&s, 2, 0), packed(&s, 2, 1024);
  u8(&s, 7), u8(&s, 0), u8(&s, 1), u8(&s, 4);
  save_seed(dir, "cache_i8_append", &s);
  problem(&s, 0x80, 1, 4, 2, 1, 32, 8, 8, 0, 0, 0);
  packed(&s, 1, 0), packed(&s, 2, 0);
  u8(&s, 0), size_field(&s, 24), size_field(&s, 8), size_field(&s, 4);
  packed(&s, 3, 4096), packed(&s, 3, 8192);
  u8(&s, 5), u8(&s, 0), u8(&s, 7), u8(&s, 7);
  save_seed(dir, "cache_page_size_24", &s);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR (writes DIR/tunedb, DIR/bincache, DIR/validate)\n", argv[0]);
    exit(2);
  }
  char tunedb[4200], bincache[4200], validate[4200], cache[4200];
  snprintf(tunedb, sizeof tunedb, "%s/tunedb", argv[1]);
  snprintf(bincache, sizeof bincache, "%s/bincache", argv[1]);
  snprintf(validate, sizeof validate, "%s/validate", argv[1]);
  snprintf(cache, sizeof cache, "%s/.seed-cache", argv[1]);
  mkdir(argv[1], 0755), mkdir(tunedb, 0755), mkdir(bincache, 0755), mkdir(validate, 0755);
  clattn_options opt = {cache, "", NULL, 0};
  clattn_context *ctx = NULL;
  if (clattn_context_create_default(&opt, &ctx) != CLATTN_OK)
    fprintf(stderr, "no context: %s\n", clattn_last_error(NULL)), failed = 1;
  if (ctx) {
    tunedb_seeds(ctx, tunedb);
    bincache_seeds(ctx, bincache, cache);
    validate_seeds(validate);
  }
  clattn_context_destroy(ctx);
  char programs[4300];
  snprintf(programs, sizeof programs, "%s/programs", cache);
  rmdir(programs), rmdir(cache);
  return failed;
}
