/* Links against the installed library through its public header only. */
#include <clattn.h>
#include <stdio.h>

int main(void) {
  clattn_context *ctx = NULL;
  clattn_status st = clattn_context_create_default(NULL, &ctx);
  if (st != CLATTN_OK) {
    fprintf(stderr, "%s: %s\n", clattn_status_string(st), clattn_last_error(NULL));
    return 1;
  }
  printf("%s\n", clattn_context_device_summary(ctx));
  clattn_context_destroy(ctx);
  return 0;
}
