/* Built-in defaults: tile configs measured by the project on devices it has run on, shipped
 * with the library and used when the tuning database has nothing for the device. Matched by
 * platform and device-name substrings; each row names how it was measured (docs/BENCHMARKS.md). */
#include "internal.h"

#include <string.h>

typedef struct {
  const char *platform, *device; /* substrings of the platform and device names */
  unsigned d, dv, causal, bucket;
  clattn__config cfg;
} builtin;

static const builtin table[] = {
    {NULL, NULL, 0, 0, 0, 0, {0}}, /* end */
};

const clattn__config *clattn__builtin_find(const clattn__device *dev, const clattn__class *cls) {
  const builtin *best = NULL;
  for (const builtin *b = table; b->platform; b++) {
    if (!strstr(dev->platform_name, b->platform) || !strstr(dev->name, b->device) ||
        b->d != cls->d || b->dv != cls->dv || b->causal != cls->causal)
      continue;
    /* The class's own bucket, else the largest bucket measured at or below it, else any. */
    if (!best || b->bucket == cls->bucket ||
        (best->bucket != cls->bucket && b->bucket <= cls->bucket && b->bucket > best->bucket))
      best = b;
  }
  return best ? &best->cfg : NULL;
}
