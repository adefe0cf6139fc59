/* Configs that come from outside the heuristic: overrides set through the API, and the tuning
 * database, read once per context. */
#include "internal.h"
#include "tunedb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clattn__config_to_public(const clattn__config *c, clattn_config *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->kernel, sizeof out->kernel, "%s", clattn__variant_name(c->variant));
  out->block_q = c->bq, out->block_kv = c->bkv, out->threads_per_row = c->tpr;
  out->stage_kv = c->stage, out->pad = c->pad;
  out->rows_per_item = c->variant == 1 && c->rm ? c->rm : 1;
  out->vector_width = c->vec ? c->vec : 1;
}

void clattn__bwd_config_to_public(const clattn__config *c, clattn_config *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->kernel, sizeof out->kernel, "%s", clattn__bwd_variant_name(c->variant));
  out->block_q = c->bq, out->block_kv = c->bkv;
  out->threads_per_row = out->rows_per_item = out->vector_width = out->stage_kv = 1;
}

int clattn__config_is_backward(const clattn_config *in) {
  char name[sizeof in->kernel + 1];
  snprintf(name, sizeof name, "%.*s", (int)sizeof in->kernel, in->kernel);
  return clattn__bwd_variant_of(name) >= 0;
}

int clattn__config_from_public(const clattn_config *in, clattn__config *out, char *why,
                               size_t why_len) {
  memset(out, 0, sizeof *out);
  char name[sizeof in->kernel + 1];
  snprintf(name, sizeof name, "%.*s", (int)sizeof in->kernel, in->kernel);
  int bwd = clattn__bwd_variant_of(name);
  if (bwd >= 0) { /* a backward config: its blocks; the rest is the forward kernels' */
    out->variant = (unsigned)bwd, out->bq = in->block_q, out->bkv = in->block_kv;
    return 1;
  }
  int variant = name[0] ? clattn__variant_of(name) : 0;
  if (variant < 0) {
    snprintf(why, why_len,
             "unknown kernel variant \"%s\" (known: forward_rows, forward_tiles, "
             "forward_mma, backward_rows, backward_mma)",
             name);
    return 0;
  }
  if (!in->block_q || !in->block_kv || !in->threads_per_row || in->block_q > 4096 ||
      in->block_kv > 4096 || in->threads_per_row > 1024 || in->stage_kv > 2 || in->pad > 64 ||
      in->rows_per_item > 1024 || in->vector_width > 16) {
    snprintf(why, why_len,
             "config out of range: block_q %u, block_kv %u (1..4096), threads_per_row %u "
             "(1..1024), stage_kv %u (0..2), pad %u (0..64)",
             in->block_q, in->block_kv, in->threads_per_row, in->stage_kv, in->pad);
    return 0;
  }
  out->bq = in->block_q, out->bkv = in->block_kv, out->tpr = in->threads_per_row;
  out->stage = in->stage_kv, out->pad = in->pad;
  out->variant = (unsigned)variant;
  out->vec = in->vector_width ? in->vector_width : 1;
  out->rm = variant == 1 && in->rows_per_item ? in->rows_per_item : 1;
  if (in->stage_kv == 2 && variant != 2) {
    snprintf(why, why_len,
             "stage_kv 2 (tiles stored split into TF32 parts) is forward_mma's alone");
    return 0;
  }
  /* forward_tiles and forward_mma always stage K/V; forward_mma may store them split. */
  if (variant >= 1) out->stage = variant == 2 && in->stage_kv == 2 ? 2 : 1;
  return 1;
}

const clattn__config *clattn__override_find(const clattn_context *ctx, const clattn__class *cls) {
  for (const clattn__override *o = ctx->overrides; o; o = o->next)
    if (!memcmp(&o->cls, cls, sizeof *cls)) return &o->cfg;
  return NULL;
}

/* The problem's class and cfg (NULL allowed: *c untouched) checked against this device; call
 * with ctx->lock held. prefix starts the message of a rejected config. */
static clattn_status checked_config(clattn_context *ctx, const clattn_problem *problem,
                                    const clattn_config *cfg, const char *prefix,
                                    clattn__class *cls, clattn__config *c) {
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st != CLATTN_OK) return st;
  if (s.d > 256 || s.dv > 256)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "%shead dims %zu/%zu: the fused kernels support at most 256", prefix, s.d,
                        s.dv);
  *cls = clattn__class_of(&s);
  cls->backward = cfg && clattn__config_is_backward(cfg);
  char why[200];
  if (cfg && (!clattn__config_from_public(cfg, c, why, sizeof why) ||
              !(cls->backward ? clattn__bwd_config_legal(&ctx->device, cls, c, why, sizeof why)
                              : clattn__config_legal(&ctx->device, cls, c, why, sizeof why))))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s%s", prefix, why);
  return CLATTN_OK;
}

clattn_status clattn_override_config(clattn_context *ctx, const clattn_problem *problem,
                                     const clattn_config *cfg) {
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__class cls;
  clattn__config c;
  clattn_status st = checked_config(ctx, problem, cfg, "override rejected: ", &cls, &c);
  if (st == CLATTN_OK) {
    /* A config replaces its pass's override; NULL removes both passes'. */
    clattn__class other = cls;
    other.backward = cfg ? cls.backward : 1;
    for (clattn__override **pp = &ctx->overrides; *pp;)
      if (!memcmp(&(*pp)->cls, &cls, sizeof cls) || !memcmp(&(*pp)->cls, &other, sizeof other)) {
        clattn__override *dead = *pp;
        *pp = dead->next;
        free(dead);
      } else {
        pp = &(*pp)->next;
      }
    clattn__override *o = cfg ? calloc(1, sizeof *o) : NULL;
    if (cfg && !o) {
      st = clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
    } else if (o) {
      o->cls = cls, o->cfg = c, o->next = ctx->overrides;
      ctx->overrides = o;
    }
    clattn__plans_forget(ctx, &cls);
    clattn__plans_forget(ctx, &other);
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

clattn_status clattn_config_check(clattn_context *ctx, const clattn_problem *problem,
                                  const clattn_config *cfg) {
  if (!ctx) return clattn__fail(NULL, CLATTN_ERR_INVALID_ARGUMENT, "context is NULL");
  pthread_mutex_lock(&ctx->lock);
  clattn__class cls;
  clattn__config c;
  clattn_status st = cfg ? checked_config(ctx, problem, cfg, "", &cls, &c)
                         : clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "cfg is NULL");
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

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
