/* Configs set and checked through the API: clattn_override_config and clattn_config_check. The
 * config names its family, hence its pass; an override replaces its class's plans. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The problem's class and cfg (NULL allowed: *c untouched) checked against this device; call
 * with ctx->lock held. prefix starts the message of a rejected config. */
static clattn_status checked_config(clattn_context *ctx, const clattn_problem *problem,
                                    const clattn_config *cfg, const char *prefix,
                                    clattn__class *cls, clattn__config *c) {
  clattn__shape s;
  clattn_status st = clattn__shape_from_problem(ctx, problem, &s);
  if (st != CLATTN_OK) return st;
  if (s.d > CLATTN__MAX_FUSED_DIM || s.dv > CLATTN__MAX_FUSED_DIM)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "%shead dims %zu/%zu: the fused kernels support at most %d", prefix, s.d,
                        s.dv, CLATTN__MAX_FUSED_DIM);
  *cls = clattn__class_of(&s, CLATTN__FORWARD);
  char why[200];
  if (!cfg) return CLATTN_OK;
  if (!clattn__config_from_public(cfg, c, why, sizeof why))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s%s", prefix, why);
  cls->pass = clattn__family_of(c)->pass;
  /* A variant the family does not compute is a valid request it cannot run. */
  if (!clattn__config_computes(cls, c, why, sizeof why))
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED, "%s%s", prefix, why);
  if (!clattn__config_legal(&ctx->device, cls, c, why, sizeof why))
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
  /* A config replaces its pass's override; NULL removes every pass's. */
  for (unsigned pass = 0; st == CLATTN_OK && pass < CLATTN__PASSES; pass++) {
    clattn__class k = cls;
    k.pass = pass;
    if (cfg && pass != cls.pass) continue;
    st = clattn__override_set(ctx, &k, cfg ? &c : NULL);
    clattn__plans_forget(ctx, &k);
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
