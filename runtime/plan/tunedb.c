/* Tuning database: JSON through cJSON. Every value read from a file is checked for type and
 * range before use; a bad entry is skipped, a bad file ignored, never fatal. The entries in
 * memory and the reader are here; the merged, locked writes in tunedb_save.c. */
#include "tunedb_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DB_MAX_BYTES (64u << 20)

void clattn__db_device_of(const clattn__device *d, clattn__db_device *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->platform, sizeof out->platform, "%s", d->platform_name);
  snprintf(out->platform_version, sizeof out->platform_version, "%s", d->platform_version);
  snprintf(out->vendor, sizeof out->vendor, "%s", d->vendor);
  snprintf(out->name, sizeof out->name, "%s", d->name);
  snprintf(out->driver, sizeof out->driver, "%s", d->driver);
  out->gpu = (d->type & CL_DEVICE_TYPE_GPU) != 0;
  out->compute_units = d->compute_units;
  out->local_mem = d->local_mem_reported; /* the key stays what the device reports */
}

void clattn__db_free(clattn__db *db) {
  free(db->entries);
  memset(db, 0, sizeof *db);
}

int clattn__db_same_device(const clattn__db_device *a, const clattn__db_device *b) {
  return !strcmp(a->platform, b->platform) && !strcmp(a->platform_version, b->platform_version) &&
         !strcmp(a->vendor, b->vendor) && !strcmp(a->name, b->name) &&
         !strcmp(a->driver, b->driver) && a->compute_units == b->compute_units &&
         a->local_mem == b->local_mem;
}

static int same_key(const clattn__db_entry *a, const clattn__db_entry *b) {
  return clattn__db_same_device(&a->dev, &b->dev) && a->source_hash == b->source_hash &&
         !memcmp(&a->cls, &b->cls, sizeof a->cls);
}

int clattn__db_put(clattn__db *db, const clattn__db_entry *e) {
  for (size_t i = 0; i < db->count; i++)
    if (same_key(&db->entries[i], e)) {
      db->entries[i] = *e;
      return 1;
    }
  if (db->count == db->cap) {
    size_t cap = db->cap ? db->cap * 2 : 16;
    clattn__db_entry *bigger = realloc(db->entries, cap * sizeof *bigger);
    if (!bigger) return 0;
    db->entries = bigger, db->cap = cap;
  }
  db->entries[db->count++] = *e;
  return 1;
}

/* ---- reading: every field is checked ---- */

static int get_str(const cJSON *o, const char *key, char *dst, size_t len) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= len) return 0;
  memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
  return 1;
}

static int get_uint(const cJSON *o, const char *key, double max, unsigned long long *dst) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
      v->valuedouble > max || v->valuedouble != floor(v->valuedouble))
    return 0;
  *dst = (unsigned long long)v->valuedouble;
  return 1;
}

static int get_bool(const cJSON *o, const char *key, unsigned *dst) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsBool(v)) return 0;
  *dst = cJSON_IsTrue(v) ? 1u : 0u;
  return 1;
}

/* The stagings beyond 1 as a file names them, each an optional flag: split_kv 2 (forward_mma's
 * split tiles, forward_mma_half's two stages, decode's V with K), next_k 3 (decode's next K with
 * V, forward_mma_half's one stage in FlashAttention-2's order), q_local 4 (that order with Q in
 * local memory). */
static const char *const stage_flags[] = {"split_kv", "next_k", "q_local"};

static int is_pow2_in(unsigned long long v, unsigned long long lo, unsigned long long hi) {
  return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

/* The class's storage type from its name in the file (dtype_names), -1 when none. */
static int dtype_of(const char *name) {
  for (int i = 0; i < 3; i++)
    if (!strcmp(name, dtype_names[i])) return i;
  return -1;
}

/* One entry; 0 and why when a field is missing, of the wrong type or out of range. */
static int parse_entry(const cJSON *e, clattn__db_entry *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(e, "device");
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(e, "class");
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(e, "config");
  const cJSON *hash = cJSON_GetObjectItemCaseSensitive(e, "source_hash");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(e, "median_ms");
  unsigned long long u[16];
  unsigned gpu = 0;
  char dtype[8], kernel[32];
  if (!cJSON_IsObject(dev) || !cJSON_IsObject(cls) || !cJSON_IsObject(cfg)) {
    snprintf(why, why_len, "an entry lacks device, class or config objects");
    return 0;
  }
  clattn__db_device *d = &out->dev;
  if (!get_str(dev, "platform", d->platform, sizeof d->platform) ||
      !get_str(dev, "platform_version", d->platform_version, sizeof d->platform_version) ||
      !get_str(dev, "vendor", d->vendor, sizeof d->vendor) ||
      !get_str(dev, "name", d->name, sizeof d->name) ||
      !get_str(dev, "driver", d->driver, sizeof d->driver) ||
      !get_uint(dev, "compute_units", 1e6, &u[0]) || !get_uint(dev, "local_mem", 1e12, &u[1]) ||
      !get_bool(dev, "gpu", &gpu)) {
    snprintf(why, why_len, "an entry's device has a missing or bad field");
    return 0;
  }
  d->gpu = (int)gpu;
  d->compute_units = (unsigned)u[0], d->local_mem = u[1];
  char hex[24];
  if (!cJSON_IsString(hash) || !hash->valuestring || strlen(hash->valuestring) != 16 ||
      strspn(hash->valuestring, "0123456789abcdef") != 16) {
    snprintf(why, why_len, "an entry's source_hash is not 16 hex digits");
    return 0;
  }
  snprintf(hex, sizeof hex, "%s", hash->valuestring);
  out->source_hash = strtoull(hex, NULL, 16);
  int dt = dtype_of(get_str(cls, "dtype", dtype, sizeof dtype) ? dtype : "");
  if (dt < 0 || !get_uint(cls, "head_dim", CLATTN__MAX_FUSED_DIM, &u[2]) || u[2] < 1 ||
      !get_uint(cls, "head_dim_v", CLATTN__MAX_FUSED_DIM, &u[3]) || u[3] < 1 ||
      !get_bool(cls, "causal", &out->cls.causal) || !get_uint(cls, "seqlen_bucket", 65536, &u[4]) ||
      clattn__seqlen_bucket(u[4]) != u[4]) {
    snprintf(why, why_len, "an entry's class has a missing or bad field");
    return 0;
  }
  out->cls.d = (unsigned)u[2], out->cls.dv = (unsigned)u[3], out->cls.bucket = (unsigned)u[4];
  out->cls.dtype = (unsigned)dt;
  /* "pass" (absent in files written before backward tuning): which kernels the entry tunes. */
  char pass[16] = "forward";
  if (cJSON_GetObjectItemCaseSensitive(cls, "pass") &&
      (!get_str(cls, "pass", pass, sizeof pass) ||
       (strcmp(pass, "forward") && strcmp(pass, "backward")))) {
    snprintf(why, why_len, "an entry's class has a pass other than forward or backward");
    return 0;
  }
  out->cls.pass = !strcmp(pass, "backward") ? CLATTN__BACKWARD : CLATTN__FORWARD;
  char kv[24] = "";
  if (cJSON_GetObjectItemCaseSensitive(cls, "kv_cache")) {
    int known = get_str(cls, "kv_cache", kv, sizeof kv);
    for (int i = 0; known && i < 4; i++)
      if (!strcmp(kv, cache_names[i])) out->cls.variants = cache_bits(i);
    if (!out->cls.variants || out->cls.pass != CLATTN__FORWARD) {
      snprintf(why, why_len,
               "an entry's class has a kv_cache other than contiguous, paged, contiguous_i8 or "
               "paged_i8, or a backward one");
      return 0;
    }
  }
  /* The config in the public form, read as the API reads one (clattn__config_from_public): the
   * family's own defaults apply, and a field it cannot take rejects the entry. */
  clattn_config pub;
  memset(&pub, 0, sizeof pub);
  unsigned stage = 0;
  if (!get_str(cfg, "kernel", kernel, sizeof kernel) || !kernel[0] ||
      !get_uint(cfg, "block_q", 1024, &u[5]) || !is_pow2_in(u[5], 1, 1024) ||
      !get_uint(cfg, "block_kv", 1024, &u[6]) || /* a power of two, or forward_mma_half's 48 */
      !(is_pow2_in(u[6], 1, 1024) || (u[6] && u[6] % 16 == 0)) ||
      !get_uint(cfg, "threads_per_row", 1024, &u[7]) || !is_pow2_in(u[7], 1, 1024) ||
      !get_bool(cfg, "stage_kv", &stage) || !get_uint(cfg, "pad", 1, &u[8])) {
    snprintf(why, why_len, "an entry's config has a missing or bad field");
    return 0;
  }
  snprintf(pub.kernel, sizeof pub.kernel, "%s", kernel);
  pub.block_q = (unsigned)u[5], pub.block_kv = (unsigned)u[6], pub.threads_per_row = (unsigned)u[7];
  pub.stage_kv = stage, pub.pad = (unsigned)u[8], pub.rows_per_item = 1, pub.vector_width = 1;
  /* The stagings beyond 1, each an optional flag of the file (stage_flags). */
  for (unsigned i = 0; i < 3; i++) {
    unsigned on;
    if (!cJSON_GetObjectItemCaseSensitive(cfg, stage_flags[i])) continue;
    if (!get_bool(cfg, stage_flags[i], &on)) {
      snprintf(why, why_len, "an entry's config has a bad %s", stage_flags[i]);
      return 0;
    }
    if (on && pub.stage_kv >= 2) {
      snprintf(why, why_len, "an entry's config has %s and %s, which exclude each other",
               stage_flags[pub.stage_kv - 2], stage_flags[i]);
      return 0;
    }
    if (on) pub.stage_kv = 2 + i;
  }
  if (cJSON_GetObjectItemCaseSensitive(cfg, "rows_per_item")) {
    if (!get_uint(cfg, "rows_per_item", 1024, &u[9]) || !is_pow2_in(u[9], 1, 1024)) {
      snprintf(why, why_len, "an entry's config has a bad rows_per_item");
      return 0;
    }
    pub.rows_per_item = (unsigned)u[9];
  }
  if (cJSON_GetObjectItemCaseSensitive(cfg, "vector_width")) {
    if (!get_uint(cfg, "vector_width", 4, &u[10]) || !is_pow2_in(u[10], 1, 4)) {
      snprintf(why, why_len, "an entry's config has a bad vector_width");
      return 0;
    }
    pub.vector_width = (unsigned)u[10];
  }
  char bad[200];
  if (!clattn__config_from_public(&pub, &out->cfg, bad, sizeof bad)) {
    snprintf(why, why_len, "an entry's config: %s", bad);
    return 0;
  }
  if (pub.stage_kv >= 2 && out->cfg.stage != pub.stage_kv) {
    snprintf(why, why_len, "an entry's config has %s on kernel %s, which cannot %s",
             stage_flags[pub.stage_kv - 2], kernel, pub.stage_kv == 2 ? "split" : "take it");
    return 0;
  }
  if (clattn__family_of(&out->cfg)->pass != out->cls.pass) {
    snprintf(why, why_len, "an entry's config names kernel %s of another pass than its class's",
             kernel);
    return 0;
  }
  out->median_ms = cJSON_IsNumber(ms) && isfinite(ms->valuedouble) ? ms->valuedouble : 0.0;
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "spread");
  out->spread = cJSON_IsNumber(sp) && isfinite(sp->valuedouble) ? sp->valuedouble : 0.0;
  get_str(e, "date", out->date, sizeof out->date);
  return 1;
}

static clattn_status read_text(const char *path, char **text, char *why, size_t why_len) {
  *text = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return CLATTN_OK;
    snprintf(why, why_len, "%s cannot be read: %s", path, strerror(errno));
    return CLATTN_ERR_IO;
  }
  struct stat st;
  clattn_status status = CLATTN_ERR_IO;
  char *buf = NULL;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
    snprintf(why, why_len, "%s cannot be read: not a regular file", path);
  else if (st.st_size > DB_MAX_BYTES)
    snprintf(why, why_len, "%s cannot be read: larger than %u bytes", path, DB_MAX_BYTES);
  else if (!(buf = malloc((size_t)st.st_size + 1)))
    snprintf(why, why_len, "%s cannot be read: out of host memory", path);
  else if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
    snprintf(why, why_len, "%s cannot be read: %s", path, ferror(f) ? strerror(errno) : "short");
  else {
    buf[st.st_size] = 0;
    *text = buf, buf = NULL;
    status = CLATTN_OK;
  }
  free(buf);
  fclose(f);
  return status;
}

static clattn_status parse_db(const char *path, const char *text, clattn__db *db, size_t *skipped,
                              char *why, size_t why_len, int *kind) {
  cJSON *root = cJSON_Parse(text); /* cJSON limits nesting depth (CJSON_NESTING_LIMIT) */
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
  clattn_status st = CLATTN_ERR_IO;
  *kind = LOAD_CORRUPT;
  if (!root) {
    snprintf(why, why_len, "%s is not valid JSON (corrupt or truncated)", path);
  } else if (!cJSON_IsString(format) || strcmp(format->valuestring, DB_FORMAT)) {
    /* Valid JSON, but someone else's (a mistyped CLATTN_TUNING_DB, say): never moved or
     * written over. Only a file that does not parse is taken for a damaged database. */
    *kind = LOAD_KEEP;
    snprintf(why, why_len,
             "%s is not a clattn tuning database (valid JSON without \"format\": \"%s\")", path,
             DB_FORMAT);
  } else if (cJSON_IsNumber(version) && version->valuedouble != DB_VERSION) {
    /* Ours, but of a format this library cannot read: a later library's. */
    *kind = LOAD_KEEP;
    snprintf(why, why_len, "%s has an unknown version %g (this library reads version %d)", path,
             version->valuedouble, DB_VERSION);
  } else if (!cJSON_IsNumber(version) || !cJSON_IsArray(entries)) {
    snprintf(why, why_len, "%s is not a clattn tuning database (no version or entries)", path);
  } else {
    const cJSON *e;
    char first[160] = "";
    st = CLATTN_OK, *kind = LOAD_OK;
    cJSON_ArrayForEach(e, entries) {
      clattn__db_entry entry;
      char w[160];
      if (!parse_entry(e, &entry, w, sizeof w)) {
        if (!(*skipped)++) snprintf(first, sizeof first, "%s", w);
      } else if (!clattn__db_put(db, &entry)) {
        st = CLATTN_ERR_OUT_OF_RESOURCES, *kind = LOAD_KEEP;
        snprintf(why, why_len, "out of host memory reading %s", path);
        break;
      }
    }
    if (st == CLATTN_OK && *skipped)
      snprintf(why, why_len, "%s: %zu entries skipped (%s)", path, *skipped, first);
  }
  cJSON_Delete(root);
  if (st != CLATTN_OK) clattn__db_free(db);
  return st;
}

clattn_status clattn__db_load_kind(const char *path, clattn__db *db, size_t *skipped, char *why,
                                   size_t why_len, int *kind) {
  clattn__db_free(db);
  *skipped = 0;
  if (why_len) why[0] = 0;
  char *text;
  *kind = LOAD_KEEP;
  clattn_status st = read_text(path, &text, why, why_len);
  if (st == CLATTN_OK) *kind = LOAD_OK;
  if (st != CLATTN_OK || !text) return st;
  st = parse_db(path, text, db, skipped, why, why_len, kind);
  free(text);
  return st;
}

clattn_status clattn__db_load(const char *path, clattn__db *db, size_t *skipped, char *why,
                              size_t why_len) {
  int kind;
  clattn_status st = clattn__db_load_kind(path, db, skipped, why, why_len, &kind);
  size_t n = why_len ? strlen(why) : 0;
  if (st == CLATTN_ERR_IO && n < why_len) snprintf(why + n, why_len - n, "; ignored");
  return st;
}
