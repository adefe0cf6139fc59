/* Configs in the public form (clattn_config: a family's name and its fields) and back, and the
 * overrides set through the API (ops/configure.c sets them). */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clattn__config_to_public(const clattn__config *c, clattn_config *out) {
  memset(out, 0, sizeof *out);
  const clattn__family *f = clattn__family_of(c);
  snprintf(out->kernel, sizeof out->kernel, "%s", f ? f->name : "");
  out->block_q = c->bq, out->block_kv = c->bkv;
  /* A field the family does not use reads as its neutral value, 1 (pad: 0). */
  out->threads_per_row = c->tpr ? c->tpr : 1;
  out->stage_kv = f && f->pass == CLATTN__FORWARD ? c->stage : 1;
  out->pad = c->pad;
  out->rows_per_item = c->rm ? c->rm : 1;
  out->vector_width = c->vec ? c->vec : 1;
}

int clattn__config_from_public(const clattn_config *in, clattn__config *out, char *why,
                               size_t why_len) {
  char name[sizeof in->kernel + 1];
  snprintf(name, sizeof name, "%.*s", (int)sizeof in->kernel, in->kernel);
  /* An empty name is the first family, forward_rows (the API's zero config). */
  unsigned id = name[0] ? clattn__family_find(name) : 0;
  const clattn__family *f = clattn__family_at(id);
  if (!f) {
    snprintf(why, why_len, "unknown kernel variant \"%s\" (known: %s)", name,
             clattn__family_names());
    return 0;
  }
  *out = f->fixed;
  out->kernel = id;
  return f->accept(f, in, out, why, why_len);
}

clattn__class clattn__override_class(const clattn__class *cls) {
  clattn__class k = *cls;
  k.variants &= ~(unsigned)(CLATTN__VAR_ALIBI | CLATTN__VAR_SINKS | CLATTN__VAR_KVLENS |
                            CLATTN__VAR_CACHE | CLATTN__VAR_ATOMIC);
  /* CLATTN_VARLEN is a flag of the problem, so its overrides keep it. A cache class's bucket is
   * its context's, and an override is set from the problem, by seqlen_q's. */
  if (k.qbucket) k.bucket = k.qbucket, k.qbucket = 0;
  return k;
}

const clattn__config *clattn__override_find(const clattn_context *ctx, const clattn__class *cls) {
  clattn__class k = clattn__override_class(cls);
  for (const clattn__override *o = ctx->overrides; o; o = o->next)
    if (!memcmp(&o->cls, &k, sizeof k)) return &o->cfg;
  return NULL;
}

clattn_status clattn__override_set(clattn_context *ctx, const clattn__class *cls,
                                   const clattn__config *cfg) {
  for (clattn__override **pp = &ctx->overrides; *pp;)
    if (!memcmp(&(*pp)->cls, cls, sizeof *cls)) {
      clattn__override *dead = *pp;
      *pp = dead->next;
      free(dead);
    } else {
      pp = &(*pp)->next;
    }
  if (!cfg) return CLATTN_OK;
  clattn__override *o = calloc(1, sizeof *o);
  if (!o) return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  o->cls = *cls, o->cfg = *cfg, o->next = ctx->overrides;
  ctx->overrides = o;
  return CLATTN_OK;
}

void clattn__overrides_release(clattn_context *ctx) {
  for (clattn__override *o = ctx->overrides, *next; o; o = next) {
    next = o->next;
    free(o);
  }
  ctx->overrides = NULL;
}
