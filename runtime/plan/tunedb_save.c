/* Tuning database writes: an entry as JSON, the file rewritten whole under an exclusive lock
 * (read again and merged, then a temporary file renamed over it), a corrupt file kept aside.
 * Apart from the reader (tunedb.c), which knows nothing of locks, temporary files or folders;
 * the two share the file's names (tunedb_file.h). */
#include "tunedb_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static cJSON *entry_json(const clattn__db_entry *e) {
  cJSON *o = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(o, "device");
  cJSON_AddStringToObject(d, "platform", e->dev.platform);
  cJSON_AddStringToObject(d, "platform_version", e->dev.platform_version);
  cJSON_AddStringToObject(d, "vendor", e->dev.vendor);
  cJSON_AddStringToObject(d, "name", e->dev.name);
  cJSON_AddStringToObject(d, "driver", e->dev.driver);
  cJSON_AddBoolToObject(d, "gpu", e->dev.gpu);
  cJSON_AddNumberToObject(d, "compute_units", e->dev.compute_units);
  cJSON_AddNumberToObject(d, "local_mem", (double)e->dev.local_mem);
  char hex[24];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)e->source_hash);
  cJSON_AddStringToObject(o, "source_hash", hex);
  cJSON *c = cJSON_AddObjectToObject(o, "class");
  cJSON_AddStringToObject(c, "dtype", dtype_names[e->cls.dtype < 3 ? e->cls.dtype : 0]);
  cJSON_AddNumberToObject(c, "head_dim", e->cls.d);
  cJSON_AddNumberToObject(c, "head_dim_v", e->cls.dv);
  cJSON_AddBoolToObject(c, "causal", e->cls.causal);
  cJSON_AddNumberToObject(c, "seqlen_bucket", e->cls.bucket);
  if (e->cls.pass != CLATTN__FORWARD)
    cJSON_AddStringToObject(c, "pass", clattn__pass_name((clattn__pass)e->cls.pass));
  if (cache_index(e->cls.variants) >= 0)
    cJSON_AddStringToObject(c, "kv_cache", cache_names[cache_index(e->cls.variants)]);
  clattn_config pub;
  clattn__config_to_public(&e->cfg, &pub);
  cJSON *g = cJSON_AddObjectToObject(o, "config");
  cJSON_AddStringToObject(g, "kernel", pub.kernel);
  cJSON_AddNumberToObject(g, "block_q", pub.block_q);
  cJSON_AddNumberToObject(g, "block_kv", pub.block_kv);
  cJSON_AddNumberToObject(g, "threads_per_row", pub.threads_per_row);
  cJSON_AddBoolToObject(g, "stage_kv", pub.stage_kv);
  if (pub.stage_kv == 2) cJSON_AddBoolToObject(g, "split_kv", 1);
  if (pub.stage_kv == 3) cJSON_AddBoolToObject(g, "next_k", 1);
  if (pub.stage_kv == 4) cJSON_AddBoolToObject(g, "q_local", 1);
  cJSON_AddNumberToObject(g, "pad", pub.pad);
  cJSON_AddNumberToObject(g, "rows_per_item", pub.rows_per_item);
  cJSON_AddNumberToObject(g, "vector_width", pub.vector_width);
  cJSON_AddNumberToObject(o, "median_ms", e->median_ms);
  cJSON_AddNumberToObject(o, "spread", e->spread);
  cJSON_AddStringToObject(o, "date", e->date);
  return o;
}

static clattn_status write_atomic(const char *path, const clattn__db *db, char *why,
                                  size_t why_len) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", DB_FORMAT);
  cJSON_AddNumberToObject(root, "version", DB_VERSION);
  cJSON *arr = cJSON_AddArrayToObject(root, "entries");
  for (size_t i = 0; i < db->count; i++) cJSON_AddItemToArray(arr, entry_json(&db->entries[i]));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) {
    snprintf(why, why_len, "out of host memory writing %s", path);
    return CLATTN_ERR_OUT_OF_RESOURCES;
  }
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  ok = f && fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
  if (f) ok = fclose(f) == 0 && ok;
  free(text);
  if (!ok || rename(tmp, path) != 0) {
    snprintf(why, why_len, "cannot write %s: %s", path, strerror(errno));
    remove(tmp);
    return CLATTN_ERR_IO;
  }
  return CLATTN_OK;
}

/* Renames the corrupt file at path to <path>.corrupt-<UTC time>[-n], never over an earlier
 * copy (the caller holds the lock, so no other clattn writer races for the name); aside gets
 * the new name. */
static clattn_status keep_aside(const char *path, char *aside, size_t len, char *why,
                                size_t why_len) {
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  struct stat st;
  snprintf(aside, len, "%s.corrupt-%s", path, stamp);
  for (unsigned n = 1; n < 1000 && lstat(aside, &st) == 0; n++)
    snprintf(aside, len, "%s.corrupt-%s-%u", path, stamp, n);
  if (lstat(aside, &st) == 0 || rename(path, aside) != 0) {
    snprintf(why, why_len, "cannot move the corrupt %s aside to %s: %s", path, aside,
             strerror(errno));
    return CLATTN_ERR_IO;
  }
  return CLATTN_OK;
}

clattn_status clattn__db_save_merged(const char *path, const clattn__db_entry *entries, size_t n,
                                     char *why, size_t why_len) {
  if (why_len) why[0] = 0;
  clattn__make_parents(path);
  char lock_path[4200];
  snprintf(lock_path, sizeof lock_path, "%s.lock", path);
  int fd = open(lock_path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    snprintf(why, why_len, "cannot lock %s: %s", lock_path, strerror(errno));
    if (fd >= 0) close(fd);
    return CLATTN_ERR_IO;
  }
  clattn__db db = {0};
  size_t skipped = 0;
  char reason[1024], aside[4300] = "";
  int kind = LOAD_OK;
  clattn_status st = clattn__db_load_kind(path, &db, &skipped, reason, sizeof reason, &kind);
  if (st != CLATTN_OK && kind == LOAD_CORRUPT) {
    st = keep_aside(path, aside, sizeof aside, why, why_len);
  } else if (st != CLATTN_OK) { /* unreadable or newer: another's data, left as it is */
    snprintf(why, why_len, "%s; not written over", reason);
  }
  for (size_t i = 0; st == CLATTN_OK && i < n; i++)
    if (!clattn__db_put(&db, &entries[i])) st = CLATTN_ERR_OUT_OF_RESOURCES;
  if (st == CLATTN_OK) st = write_atomic(path, &db, why, why_len);
  /* Success with a text: the warning for the caller's diagnostics. */
  if (st == CLATTN_OK && aside[0])
    snprintf(why, why_len, "%s; kept as %s, a fresh database written", reason, aside);
  clattn__db_free(&db);
  flock(fd, LOCK_UN);
  close(fd);
  return st;
}
