/* libFuzzer target: the tuning-database loader, clattn__db_load, on any bytes. The loader reads a
 * path, so each input is written to one scratch file under $TMPDIR first. Beyond "no crash, no
 * leak, no undefined behaviour" it checks what tunedb.h promises: a failure leaves the database
 * empty and says why; every entry it keeps has fields in range; and every kept entry is found
 * again, as an exact match, by clattn__db_lookup for its own device and class. */
#include "fuzz_input.h"
#include "tunedb.h"

#include <math.h>

/* The scratch file, made once per process (a harness may keep state; the library may not). */
static char scratch[4200];

static void remove_scratch(void) {
  remove(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_scratch_path(scratch, sizeof scratch, "tunedb", ".json");
  atexit(remove_scratch);
  return 0;
}

static int is_pow2(unsigned v, unsigned hi) {
  return v >= 1 && v <= hi && !(v & (v - 1));
}

static int terminated(const char *s, size_t cap) {
  return memchr(s, 0, cap) != NULL;
}

/* The fields parse_entry checks, as an entry that survived it must have them. */
static void check_entry(const clattn__db_entry *e) {
  const clattn__db_device *d = &e->dev;
  FUZZ_CHECK(terminated(d->platform, sizeof d->platform) &&
                 terminated(d->platform_version, sizeof d->platform_version) &&
                 terminated(d->vendor, sizeof d->vendor) && terminated(d->name, sizeof d->name) &&
                 terminated(d->driver, sizeof d->driver) && terminated(e->date, sizeof e->date),
             "an entry's string is not NUL-terminated");
  FUZZ_CHECK(e->cls.d >= 1 && e->cls.d <= 256 && e->cls.dv >= 1 && e->cls.dv <= 256,
             "head dims %u/%u", e->cls.d, e->cls.dv);
  FUZZ_CHECK(clattn__seqlen_bucket(e->cls.bucket) == e->cls.bucket, "bucket %u", e->cls.bucket);
  FUZZ_CHECK(e->cls.causal <= 1 && e->cls.pass < CLATTN__PASSES && e->cls.dtype <= CLATTN_BF16,
             "causal %u pass %u dtype %u", e->cls.causal, e->cls.pass, e->cls.dtype);
  /* Key blocks: powers of two, or multiples of 16 (forward_mma_half's 48) */
  FUZZ_CHECK(is_pow2(e->cfg.bq, 1024) &&
                 (is_pow2(e->cfg.bkv, 1024) || (e->cfg.bkv % 16 == 0 && e->cfg.bkv <= 1024)),
             "blocks %u/%u", e->cfg.bq, e->cfg.bkv);
  const clattn__family *f = clattn__family_of(&e->cfg);
  FUZZ_CHECK(f && f->pass == e->cls.pass, "kernel %u of another pass or none", e->cfg.kernel);
  if (e->cls.pass == CLATTN__FORWARD) {
    FUZZ_CHECK(is_pow2(e->cfg.tpr, 1024) && is_pow2(e->cfg.rm, 1024) && is_pow2(e->cfg.vec, 4),
               "tpr %u rm %u vec %u", e->cfg.tpr, e->cfg.rm, e->cfg.vec);
    FUZZ_CHECK(e->cfg.stage <= 2 && e->cfg.pad <= 1, "stage %u pad %u", e->cfg.stage, e->cfg.pad);
    FUZZ_CHECK(e->cfg.stage < 2 || f->tensor_cores, "split_kv on %s", f->name);
  }
  FUZZ_CHECK(isfinite(e->median_ms) && isfinite(e->spread), "timings not finite");
}

/* The device model an entry was measured on, as the runtime would have queried it. */
static void device_of_entry(const clattn__db_entry *e, clattn__device *dev) {
  memset(dev, 0, sizeof *dev);
  snprintf(dev->platform_name, sizeof dev->platform_name, "%s", e->dev.platform);
  snprintf(dev->platform_version, sizeof dev->platform_version, "%s", e->dev.platform_version);
  snprintf(dev->vendor, sizeof dev->vendor, "%s", e->dev.vendor);
  snprintf(dev->name, sizeof dev->name, "%s", e->dev.name);
  snprintf(dev->driver, sizeof dev->driver, "%s", e->dev.driver);
  dev->type = e->dev.gpu ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
  dev->compute_units = e->dev.compute_units;
  dev->local_mem = dev->local_mem_reported = e->dev.local_mem;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *f = fopen(scratch, "wb");
  FUZZ_CHECK(f != NULL, "cannot write %s", scratch);
  int written = fwrite(data, 1, size, f) == size;
  written = fclose(f) == 0 && written;
  FUZZ_CHECK(written, "cannot write %s", scratch);

  clattn__db db = {0};
  size_t skipped = 99;
  /* A short message buffer as well as a roomy one: the messages must truncate, not overflow. */
  char why[256], tiny[8];
  size_t why_len = size & 1 ? sizeof tiny : sizeof why;
  char *msg = size & 1 ? tiny : why;
  clattn_status st = clattn__db_load(scratch, &db, &skipped, msg, why_len);
  FUZZ_CHECK(st == CLATTN_OK || st == CLATTN_ERR_IO || st == CLATTN_ERR_OUT_OF_RESOURCES,
             "status %d", (int)st);
  FUZZ_CHECK(terminated(msg, why_len), "the message is not NUL-terminated");
  if (st != CLATTN_OK) {
    FUZZ_CHECK(db.count == 0 && db.entries == NULL, "a failed load kept %zu entries", db.count);
    FUZZ_CHECK(msg[0] != 0, "a failed load says nothing");
  } else {
    FUZZ_CHECK(db.count <= db.cap, "count %zu > cap %zu", db.count, db.cap);
    FUZZ_CHECK(skipped == 0 || msg[0] != 0, "%zu entries skipped silently", skipped);
  }
  /* Lookups are quadratic in the entries; the first ones are enough to exercise them. */
  for (size_t i = 0; i < db.count; i++) {
    const clattn__db_entry *e = &db.entries[i];
    check_entry(e);
    if (i >= 32) continue;
    clattn__device dev;
    device_of_entry(e, &dev);
    uint64_t hashes[CLATTN__MAX_FAMILIES];
    for (unsigned v = 0; v < CLATTN__MAX_FAMILIES; v++) hashes[v] = e->source_hash;
    clattn__match level = CLATTN__MATCH_NONE;
    const clattn__db_entry *found = clattn__db_lookup(&db, &dev, hashes, &e->cls, &level);
    FUZZ_CHECK(found != NULL && level == CLATTN__MATCH_EXACT,
               "entry %zu is not found for its own device and class (level %d)", i, (int)level);
    FUZZ_CHECK(found->cls.bucket == e->cls.bucket, "an exact match in another bucket (%u, not %u)",
               found->cls.bucket, e->cls.bucket);
  }
  clattn__db_free(&db);
  FUZZ_CHECK(db.count == 0 && db.entries == NULL, "clattn__db_free left entries");
  return 0;
}
