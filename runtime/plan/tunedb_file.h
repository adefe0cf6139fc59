/* The tuning database's file, as its reader (tunedb.c) and its writer (tunedb_save.c) both
 * name it: the format and version, the names of a class's storage type and KV cache kind, and
 * what a load found, which a save needs to decide whether it may write over the file. Internal
 * to those two files; the rest of the runtime uses tunedb.h. */
#ifndef CLATTN_TUNEDB_FILE_H
#define CLATTN_TUNEDB_FILE_H

#include "tunedb.h"

#define DB_FORMAT "clattn-tuning-db"
#define DB_VERSION 1

/* A KV cache class (issue 18) as the file names it: "kv_cache" in an entry's class, absent for
 * the plain classes (whose entries a cache class never takes, nor the other way round). */
static const char *const cache_names[4] = {"contiguous", "paged", "contiguous_i8", "paged_i8"};

static inline unsigned cache_bits(int i) {
  return CLATTN__VAR_KVCACHE | (i % 2 ? CLATTN__VAR_PAGED : 0u) | (i >= 2 ? CLATTN__VAR_KV8 : 0u);
}

static inline int cache_index(unsigned variants) {
  if (!(variants & CLATTN__VAR_KVCACHE)) return -1;
  return (variants & CLATTN__VAR_PAGED ? 1 : 0) + (variants & CLATTN__VAR_KV8 ? 2 : 0);
}

/* The class's storage type as the file names it (clattn_dtype's order). */
static const char *const dtype_names[3] = {"f32", "f16", "bf16"};

/* What a file that failed to load is to a save: KEEP (it cannot be read, or is of a version
 * this library does not know: another program's or a later library's data, never written
 * over) or CORRUPT (not JSON, or not a clattn database: kept aside, then replaced). */
enum { LOAD_OK, LOAD_KEEP, LOAD_CORRUPT };

/* clattn__db_load, and what the file is to a save (LOAD_*). The reasons name the path but not
 * the consequence, which differs between a load and a save. */
clattn_status clattn__db_load_kind(const char *path, clattn__db *db, size_t *skipped, char *why,
                                   size_t why_len, int *kind);

#endif
