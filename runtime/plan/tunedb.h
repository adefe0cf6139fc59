/* Tuning database (JSON through cJSON): entries keyed by device, kernel-source hash and problem
 * class; lookup with fallbacks; merged, locked, atomic writes. Internal. */
#ifndef CLATTN_TUNEDB_H
#define CLATTN_TUNEDB_H

#include "plan.h"

typedef struct clattn__db_device {
  char platform[256], platform_version[256], vendor[256], name[256], driver[128];
  int gpu; /* CL_DEVICE_TYPE_GPU */
  unsigned compute_units;
  unsigned long long local_mem;
} clattn__db_device;

typedef struct clattn__db_entry {
  clattn__db_device dev;
  uint64_t source_hash;
  clattn__class cls;
  clattn__config cfg;
  double median_ms, spread; /* spread: (max - min) / median of the timing runs */
  char date[32];
} clattn__db_entry;

typedef struct clattn__db {
  clattn__db_entry *entries;
  size_t count, cap;
} clattn__db;

/* How well an entry matches, best first. */
typedef enum clattn__match {
  CLATTN__MATCH_NONE = 0,
  CLATTN__MATCH_VENDOR_TYPE = 1, /* same vendor and device type */
  CLATTN__MATCH_DEVICE = 2,      /* same device, other driver or platform version */
  CLATTN__MATCH_EXACT = 3        /* same device and driver */
} clattn__match;

void clattn__db_device_of(const clattn__device *d, clattn__db_device *out);
/* Same platform (and version), vendor, name and driver. */
int clattn__db_same_device(const clattn__db_device *a, const clattn__db_device *b);

/* Reads path into db (emptied first). A missing file is an empty database (CLATTN_OK). A file
 * that cannot be read or parsed, is not a clattn tuning database or is of an unknown version,
 * leaves db empty and returns CLATTN_ERR_IO with why (naming path); entries with bad fields are
 * skipped and counted in *skipped (why names the first). Any bytes are safe (the fuzz target's
 * entry point). */
clattn_status clattn__db_load(const char *path, clattn__db *db, size_t *skipped, char *why,
                              size_t why_len);
void clattn__db_free(clattn__db *db);
/* Adds or replaces (same device, source hash and class) an entry in memory. */
int clattn__db_put(clattn__db *db, const clattn__db_entry *e);
/* Under an exclusive lock of path.lock: reads the file again, merges the entries, writes a
 * temporary file and renames it over path, so concurrent writers lose nothing and readers
 * never see a partial file. A file that cannot be read (a folder, no permission) or is of an
 * unknown (later) version is never written over: CLATTN_ERR_IO, why names path. A corrupt one
 * (not JSON, not a clattn database) is renamed <path>.corrupt-<UTC time> and a fresh database
 * written: CLATTN_OK with a warning in why for the caller's diagnostics ("" when none). */
clattn_status clattn__db_save_merged(const char *path, const clattn__db_entry *entries, size_t n,
                                     char *why, size_t why_len);
/* The best entry for (device, class) whose source hash is that of its family's source
 * (source_hash[family id], the class's pass's sources: clattn__sources_load): the
 * best match level first; within a level, the class's own sequence-length bucket first, then the
 * nearest bucket. NULL when none. */
const clattn__db_entry *clattn__db_lookup(const clattn__db *db, const clattn__device *dev,
                                          const uint64_t *source_hash, const clattn__class *cls,
                                          clattn__match *level);
/* 1 when clattn__db_lookup's entry e (at level) is this device and driver's for exactly this
 * class (its bucket): the class counts as tuned (planner.c's "tuned" origin, keep_tuned). */
int clattn__db_exact(const clattn__db_entry *e, clattn__match level, const clattn__class *cls);
/* 1 and the entry's config when the database holds an exact entry (clattn__db_exact). */
int clattn__db_tuned(const clattn__db *db, const clattn__device *dev, const uint64_t *source_hash,
                     const clattn__class *cls, clattn__config *cfg);

#endif
