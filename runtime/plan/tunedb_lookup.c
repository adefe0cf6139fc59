/* Tuning database lookup: the best entry for a device and class, by match level (this device
 * and driver, the same device with another driver, the same vendor and type), then by the
 * nearest sequence-length bucket. */
#include "tunedb.h"

#include <string.h>

static clattn__match match_level(const clattn__db_device *e, const clattn__db_device *d) {
  if (clattn__db_same_device(e, d)) return CLATTN__MATCH_EXACT;
  if (!strcmp(e->vendor, d->vendor) && !strcmp(e->name, d->name) && e->local_mem == d->local_mem)
    return CLATTN__MATCH_DEVICE;
  if (!strcmp(e->vendor, d->vendor) && e->gpu == d->gpu) return CLATTN__MATCH_VENDOR_TYPE;
  return CLATTN__MATCH_NONE;
}

static unsigned bucket_distance(unsigned a, unsigned b) {
  unsigned n = 0;
  if (!a || !b) return ~0u; /* not a bucket (a caller's class): never loop on it */
  while (a < b) a *= 4, n++;
  while (b < a) b *= 4, n++;
  return n;
}

const clattn__db_entry *clattn__db_lookup(const clattn__db *db, const clattn__device *dev,
                                          const uint64_t *source_hash, const clattn__class *cls,
                                          clattn__match *level) {
  clattn__db_device me;
  clattn__db_device_of(dev, &me);
  const clattn__db_entry *best = NULL;
  clattn__match best_level = CLATTN__MATCH_NONE;
  unsigned best_dist = ~0u;
  for (size_t i = 0; i < db->count; i++) {
    const clattn__db_entry *e = &db->entries[i];
    if (e->cls.pass != cls->pass || e->cls.dtype != cls->dtype ||
        e->cfg.kernel >= CLATTN__MAX_FAMILIES || e->source_hash != source_hash[e->cfg.kernel] ||
        e->cls.d != cls->d || e->cls.dv != cls->dv || e->cls.causal != cls->causal ||
        /* a cache class and a plain one never share an entry (the decode kernels' tiles are
         * not the plain families') */
        (e->cls.variants & CLATTN__VAR_CACHE) != (cls->variants & CLATTN__VAR_CACHE))
      continue;
    clattn__match m = match_level(&e->dev, &me);
    unsigned dist = bucket_distance(e->cls.bucket, cls->bucket);
    if (m == CLATTN__MATCH_NONE) continue;
    if (m > best_level || (m == best_level && dist < best_dist))
      best = e, best_level = m, best_dist = dist;
  }
  *level = best_level;
  return best;
}

int clattn__db_exact(const clattn__db_entry *e, clattn__match level, const clattn__class *cls) {
  return e && level == CLATTN__MATCH_EXACT && e->cls.bucket == cls->bucket;
}

int clattn__db_tuned(const clattn__db *db, const clattn__device *dev, const uint64_t *source_hash,
                     const clattn__class *cls, clattn__config *cfg) {
  clattn__match level;
  const clattn__db_entry *e = clattn__db_lookup(db, dev, source_hash, cls, &level);
  if (!clattn__db_exact(e, level, cls)) return 0;
  *cfg = e->cfg;
  return 1;
}
