/* Links against the installed library through its public header only (clattn.h, which brings
 * clattn_plan.h). */
#include <clattn.h>
#include <stdio.h>

int main(void) {
  /* The library loaded is the one this header describes (the soname makes sure of it). */
  unsigned header = CLATTN_VERSION_MAJOR * 1000000u + CLATTN_VERSION_MINOR * 1000u;
  if (clattn_version_number() / 1000 != header / 1000) {
    fprintf(stderr, "header %u.%u, library %s\n", CLATTN_VERSION_MAJOR, CLATTN_VERSION_MINOR,
            clattn_version());
    return 1;
  }
  printf("clattn %s\n", clattn_version());
  clattn_context *ctx = NULL;
  clattn_status st = clattn_context_create_default(NULL, &ctx);
  if (st != CLATTN_OK) {
    fprintf(stderr, "%s: %s\n", clattn_status_string(st), clattn_last_error(NULL));
    return 1;
  }
  printf("%s\n", clattn_context_device_summary(ctx));
  /* clattn_plan.h's declarations come with it (installed beside it). */
  clattn_problem p = {0};
  p.batch = p.heads_q = 1, p.seqlen_q = p.seqlen_kv = 64, p.head_dim = 32;
  clattn_plan_info info;
  st = clattn_explain(ctx, &p, &info);
  if (st != CLATTN_OK) {
    fprintf(stderr, "explain: %s\n", clattn_last_error(ctx));
    clattn_context_destroy(ctx);
    return 1;
  }
  printf("plan: %s %s\n", info.algorithm, info.kernel);
  clattn_context_destroy(ctx);
  return 0;
}
