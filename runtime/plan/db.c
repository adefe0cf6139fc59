/* The context's tuning database: read once, at the first plan that needs it, and added to by
 * tuning runs. */
#include "plan.h"
#include "tunedb.h"

#include <stdlib.h>

const struct clattn__db *clattn__context_db(clattn_context *ctx) {
  if (ctx->db) return ctx->db;
  ctx->db = calloc(1, sizeof *ctx->db);
  static const clattn__db empty; /* only when even the empty database cannot be allocated */
  if (!ctx->db) return &empty;
  if (ctx->tuning_db) {
    size_t skipped = 0;
    char why[512];
    clattn_status st = clattn__db_load(ctx->tuning_db, ctx->db, &skipped, why, sizeof why);
    if (st != CLATTN_OK || skipped) clattn__warn(ctx, "tuning database: %s", why);
  }
  return ctx->db;
}

void clattn__context_db_put(clattn_context *ctx, const void *entry) {
  clattn__context_db(ctx);
  if (ctx->db) clattn__db_put(ctx->db, entry);
}

void clattn__context_db_release(clattn_context *ctx) {
  if (ctx->db) clattn__db_free(ctx->db);
  free(ctx->db);
  ctx->db = NULL;
}
