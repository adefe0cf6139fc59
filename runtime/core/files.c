/* Files the runtime writes for the user (the program cache, the tuning database): their folders,
 * made private to the user. */
#include "core.h"

#include <stdio.h>
#include <sys/stat.h>

/* mkdir -p of path's dirname, each folder 0700 (existing ones are left as they are). */
void clattn__make_parents(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(buf, 0700);
      *p = '/';
    }
}
