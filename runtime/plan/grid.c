/* Finer query blocks for small problems: a forward plan whose work-groups would leave compute
 * units idle is rebuilt with its query blocks halved (when its keys are too few to split); a
 * family with tight_rows is rebuilt with the smallest block that holds its tiles' rows. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t groups_of(const clattn__shape *s, const clattn__config *base, unsigned bq) {
  clattn__config c = *base;
  c.bq = bq;
  return clattn__config_row_groups(&c, s);
}

/* The smallest query block of a config's family (forward_mma: a warp's 16 rows). */
static unsigned min_block_q(const clattn__config *c) {
  return clattn__family_of(c)->min_block_q(c);
}

clattn_status clattn__plan_for_grid(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan **out) {
  clattn__class cls = clattn__class_of(s, CLATTN__FORWARD);
  const clattn__plan *base;
  clattn_status st = clattn__plan_get(ctx, &cls, &base);
  *out = base;
  size_t units = ctx->device.compute_units;
  if (st != CLATTN_OK || !strcmp(base->origin, "override")) return st;
  clattn__config c = base->cfg;
  char why[160];
  /* A family with tight_rows (decode) takes the smallest block that keeps its work-groups: a
   * tile of 16 rows for a GQA group of 4 heads' one query row would carry 12 idle rows, their
   * registers and their share of the work-group. GPUs only: on a CPU the idle rows cost no
   * registers (the kernel skips them), and the second build would (PoCL's, seconds). */
  int cpu = clattn__fam_is_cpu(&ctx->device);
  while (!cpu && clattn__family_of(&c)->tight_rows && c.bq / 2 >= 1 &&
         groups_of(s, &base->cfg, c.bq / 2) == groups_of(s, &base->cfg, c.bq)) {
    clattn__config half = c;
    half.bq /= 2;
    if (!clattn__config_legal(&ctx->device, &cls, &half, why, sizeof why)) break;
    c = half;
  }
  const unsigned tight = c.bq;
  /* Keys enough to split (clattn__split_count's first test; the decode families ask more, whole
   * waves and split_min_keys, but their tiles are never refined below their rows): splitting
   * fills the device without reading each K/V tile once more per extra query block, which finer
   * blocks would. */
  int split = ctx->queue_in_order && !s->varlen && s->seqlen_kv >= 4 * (size_t)base->cfg.bkv;
  while (!split && c.bq / 2 >= min_block_q(&base->cfg) && groups_of(s, &base->cfg, c.bq) < units) {
    clattn__config half = c;
    half.bq /= 2;
    /* Only while it adds work-groups: rows beyond seqlen_q split into idle ones. */
    if (half.bq % min_block_q(&half) ||
        groups_of(s, &base->cfg, half.bq) <= groups_of(s, &base->cfg, c.bq) ||
        !clattn__config_legal(&ctx->device, &cls, &half, why, sizeof why))
      break;
    c = half;
  }
  if (c.bq == base->cfg.bq) return CLATTN_OK;
  for (clattn__plan *p = ctx->plans; p; p = p->next)
    if (p->derived && !memcmp(&p->cls, &cls, sizeof cls) && !memcmp(&p->cfg, &c, sizeof c)) {
      *out = p;
      return CLATTN_OK;
    }
  clattn__sources sources;
  if ((st = clattn__sources_load(ctx, CLATTN__FORWARD, &sources)) != CLATTN_OK) return st;
  clattn__plan *p = calloc(1, sizeof *p);
  if (!p) {
    clattn__sources_free(&sources);
    return clattn__fail(ctx, CLATTN_ERR_OUT_OF_RESOURCES, "out of host memory");
  }
  st = clattn__plan_build(ctx, &sources, &cls, &c, p, why, sizeof why);
  clattn__sources_free(&sources);
  if (st != CLATTN_OK || !p->kernels[0]) { /* keep the class's plan: it runs, if on fewer units */
    free(p);
    return st;
  }
  p->cls = cls, p->cfg = c, p->derived = 1;
  snprintf(p->origin, sizeof p->origin, "%s", base->origin);
  const char *colon = strchr(base->reason, ':');
  int what = colon ? (int)(colon - base->reason) : (int)strlen(base->reason);
  if (c.bq == tight)
    snprintf(p->reason, sizeof p->reason,
             "%.*s, with blocks of %u rows instead of %u, the rows its tiles have: %.1f of %.1f "
             "KiB local memory, %zu work-items",
             what, base->reason, c.bq, base->cfg.bq,
             clattn__config_local_bytes(&ctx->device, &cls, &c) / 1024.0,
             ctx->device.local_mem / 1024.0, clattn__config_work_group(&c));
  else
    snprintf(p->reason, sizeof p->reason,
             "%.*s, with query blocks of %u rows instead of %u so that its %zu work-groups fill "
             "more of the %zu compute units: %.1f of %.1f KiB local memory, %zu work-items",
             what, base->reason, c.bq, base->cfg.bq, groups_of(s, &base->cfg, c.bq), units,
             clattn__config_local_bytes(&ctx->device, &cls, &c) / 1024.0,
             ctx->device.local_mem / 1024.0, clattn__config_work_group(&c));
  p->next = ctx->plans;
  ctx->plans = p;
  *out = p;
  return CLATTN_OK;
}
