/* Split keys (flash-decoding): when a problem's query blocks give fewer work-groups than the
 * device has compute units (a few queries against a long KV cache, as in decoding), the keys
 * are cut into ranges that separate work-groups compute, each writing its partial O and LSE to a
 * workspace; cl/merge.cl combines them into the caller's O and LSE. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most key ranges the planner takes: 64. An H100 at batch 1 and 32k keys read faster with
 * each step from 32 ranges to 64 (0.104, 0.085, 0.079 ms), and no faster at 96 or 128 (a whole
 * wave of decode_mma's 8 work-groups a unit on 132 units: 0.080-0.090 and 0.081-0.083 ms against
 * 64's 0.078-0.079; at 128k keys all three within 3%), docs/BENCHMARKS.md. $CLATTN_SPLITS, an
 * experiment, may ask a decode family (one with a split_fill) for up to 128. */
#define MAX_SPLITS 64
#define MAX_SPLITS_FORCED 128 /* cl/merge.cl's MERGE_MAX_SPLITS */

unsigned clattn__split_count(const clattn_context *ctx, const clattn__shape *s,
                             const clattn__plan *p, unsigned *kv_per_split) {
  const clattn__family *f = clattn__family_of(&p->cfg);
  size_t units = ctx->device.compute_units * (f && f->split_fill ? f->split_fill : 1);
  size_t bkv = p->cfg.bkv;
  size_t groups = clattn__config_row_groups(&p->cfg, s);
  *kv_per_split = (unsigned)s->seqlen_kv;
  /* The workspace is reused call after call, which an out-of-order queue would race on; an
   * override is run as given; packed sequences are not split (the merge indexes rows by batch
   * strides). */
  if (!ctx->queue_in_order || !strcmp(p->origin, "override") || s->varlen) return 1;
  size_t count;
  if (ctx->force_splits) { /* $CLATTN_SPLITS, an experiment: each range at least a tile */
    size_t tiles = (s->seqlen_kv + bkv - 1) / bkv;
    count = ctx->force_splits < tiles ? ctx->force_splits : tiles;
  } else {
    if (groups >= units || s->seqlen_kv < 4 * bkv) return 1;
    size_t least = f && f->split_min_keys > 2 * bkv ? f->split_min_keys : 2 * bkv;
    /* A family that fills units with several work-groups each asks for whole waves: the most
     * ranges whose work-groups all fit at once. An H100 read decode's K/V at 93% of the stream
     * with 16 ranges at batch 8 (1024 work-groups, 8 a unit: one wave) and 70% with 17 (a
     * second wave of 32), docs/BENCHMARKS.md. Otherwise enough to cover every unit. */
    size_t want = f && f->split_fill > 1 ? units / groups : (units + groups - 1) / groups;
    size_t most = s->seqlen_kv / least; /* >= 2 tiles */
    count = want < most ? want : most;
  }
  size_t max = ctx->force_splits && f && f->split_fill > 1 ? MAX_SPLITS_FORCED : MAX_SPLITS;
  if (count > max) count = max;
  if (count < 2) return 1;
  size_t per = (s->seqlen_kv + count - 1) / count;
  per = (per + bkv - 1) / bkv * bkv;
  *kv_per_split = (unsigned)per;
  return (unsigned)((s->seqlen_kv + per - 1) / per);
}

/* cl/merge.cl's work-group: 256 work-items a row where the device allows it. */
static size_t merge_wg(const clattn_context *ctx) {
  return clattn__helper_wg(&ctx->device, 256);
}

/* The merge stores O in the call's storage type (cl/common.cl's DTYPE; fp32 adds nothing); the
 * context keeps it (ctx->merge, released with the workspace). */
static clattn_status merge_kernel(clattn_context *ctx, clattn_dtype t, cl_kernel *out) {
  if (ctx->merge[t]) {
    *out = ctx->merge[t];
    return CLATTN_OK;
  }
  const clattn__family *f = clattn__family_for(CLATTN__ROLE_MERGE);
  char *src = NULL, options[64];
  snprintf(options, sizeof options, "-cl-std=CL1.2 -DMW=%zu%s", merge_wg(ctx),
           clattn__dtype_define(t));
  clattn_status st = clattn__family_source(ctx, f, &src);
  cl_program prog = NULL;
  if (st == CLATTN_OK) st = clattn__build(ctx, src, options, &prog);
  free(src);
  if (st != CLATTN_OK) return st;
  cl_int err;
  *out = clCreateKernel(prog, f->entries[0], &err);
  if (err != CL_SUCCESS) return clattn__fail_cl(ctx, err, "clCreateKernel(merge)");
  ctx->merge[t] = *out;
  memset(&ctx->merge_memo[t], 0, sizeof ctx->merge_memo[t]);
  return CLATTN_OK;
}

static clattn_status ensure_split_ws(clattn_context *ctx, size_t bytes) {
  if (ctx->split_ws_bytes >= bytes) return CLATTN_OK;
  if (ctx->split_ws) clReleaseMemObject(ctx->split_ws);
  ctx->split_ws_bytes = 0;
  cl_int err;
  ctx->split_ws = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (err != CL_SUCCESS) {
    ctx->split_ws = NULL;
    return clattn__fail(
        ctx, CLATTN_ERR_OUT_OF_RESOURCES,
        "split keys: cannot allocate the %zu-byte workspace of partial results (%s)", bytes,
        clattn__cl_error_name(err));
  }
  ctx->split_ws_bytes = bytes;
  return CLATTN_OK;
}

/* The most rows x ranges a tile's fused merge takes (else merge_splits): the last work-group of a
 * tile merges them alone, after its own range, so its time grows with them while merge_splits
 * spreads a call's rows over the GPU. On an H100 (docs/BENCHMARKS.md, stop 43) the fused merge
 * was 4% faster at batch 64 with 2 ranges (4 rows a tile: 8), the same at batch 8 with 16 ranges
 * (64), and slower with 16 rows a tile (256) or 64 ranges (256). */
#define FUSED_MERGE_MOST 32

int clattn__split_fused(const clattn_context *ctx, const clattn__shape *s, const clattn__plan *p,
                        unsigned count) {
  const clattn__family *f = clattn__family_of(&p->cfg);
  if (!ctx->merge_fused || !f || !f->merge_in_kernel || !f->row_groups) return 0;
  size_t rows = s->seqlen_q * (s->heads_kv ? s->heads_q / s->heads_kv : 1);
  if (rows > p->cfg.bq) rows = p->cfg.bq;
  return ctx->merge_fused > 1 || rows * count <= FUSED_MERGE_MOST;
}

/* The fused merge's counts: n ints, zero before the call's kernel (filled on the in-order queue
 * when new, or after a call that may have left some counted). 0 where they cannot be had: the
 * call then merges by merge_splits, which it can, so nothing is reported (an error message
 * would outlive the call that succeeded). */
static int merge_counts_ready(clattn_context *ctx, size_t n) {
  cl_int err = CL_SUCCESS;
  if (ctx->merge_count_n < n) {
    if (ctx->merge_count) clReleaseMemObject(ctx->merge_count);
    ctx->merge_count_n = 0;
    ctx->merge_count = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, n * sizeof(cl_int), NULL, &err);
    if (err != CL_SUCCESS) {
      ctx->merge_count = NULL;
      return 0;
    }
    ctx->merge_count_n = n, ctx->merge_count_dirty = 1;
  }
  if (ctx->merge_count_dirty) {
    const cl_int zero = 0;
    if (clEnqueueFillBuffer(ctx->queue, ctx->merge_count, &zero, sizeof zero, 0,
                            ctx->merge_count_n * sizeof(cl_int), 0, NULL, NULL) != CL_SUCCESS)
      return 0;
    ctx->merge_count_dirty = 0;
  }
  return 1;
}

clattn_status clattn__forward_split(clattn_context *ctx, const clattn__shape *s,
                                    const clattn__plan *p, unsigned count, unsigned kv_per_split,
                                    const clattn_tensor *q, const clattn_tensor *k,
                                    const clattn_tensor *v, const clattn_tensor *o, cl_mem lse,
                                    cl_uint num_wait, const cl_event *wait, cl_event *done) {
  size_t rows = s->batch * s->heads_q * s->seqlen_q, bytes;
  if (__builtin_mul_overflow(rows, (size_t)count * (s->dv + 1) * sizeof(float), &bytes))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "split keys: workspace size overflows");
  if (count > MAX_SPLITS_FORCED) /* cl/merge.cl's weights hold that many */
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "split keys: %u ranges, at most %d",
                        count, MAX_SPLITS_FORCED);
  /* A family whose kernel merges its own ranges does so where the context allows (core.h's
   * merge_fused): one launch instead of two, and each tile merged as soon as its ranges are done
   * rather than after the last of all. */
  const clattn__family *f = clattn__family_of(&p->cfg);
  const int fused =
      clattn__split_fused(ctx, s, p, count) && merge_counts_ready(ctx, f->row_groups(&p->cfg, s));
  cl_kernel merge = NULL;
  clattn_status st = fused ? CLATTN_OK : merge_kernel(ctx, s->dtype, &merge);
  if (st == CLATTN_OK) st = ensure_split_ws(ctx, bytes);
  if (st != CLATTN_OK) return st;
  /* Partial outputs packed [range][batch][head][query][dv], then the partial LSEs. */
  clattn_tensor part = {ctx->split_ws, 0, s->heads_q * s->seqlen_q * s->dv, s->dv,
                        s->seqlen_q * s->dv};
  clattn__split sp = {count,
                      kv_per_split,
                      rows * s->dv,
                      (cl_ulong)count * rows * s->dv,
                      rows,
                      fused ? ctx->merge_count : NULL,
                      o,
                      lse};
  st = clattn__enqueue_forward(ctx, ctx->queue, 1, s, p, &sp, q, k, v, &part, ctx->split_ws,
                               num_wait, wait, fused ? done : NULL);
  if (fused) {
    /* A launch that failed part of the way may have left some ranges counted. */
    if (st != CLATTN_OK) ctx->merge_count_dirty = 1;
    clFlush(ctx->queue);
    return st;
  }
  cl_ulong lse_off = sp.lse_off, n_rows = rows,
           view[4] = {o->offset, o->stride_batch, o->stride_seq, o->stride_head};
  cl_uint splits = count, dv = (cl_uint)s->dv, heads = (cl_uint)s->heads_q,
          nq = (cl_uint)s->seqlen_q;
  cl_int write_lse = lse != NULL, err = CL_SUCCESS;
  cl_mem out_lse = lse ? lse : ctx->split_ws; /* any valid buffer when unused */
  /* The scalars through the context's memo (a warm call sets the buffers alone). */
  clattn__argmemo *memo = &ctx->merge_memo[s->dtype];
  clattn__args a = {merge, 0, CL_SUCCESS, memo};
  clattn__arg_mem(&a, &ctx->split_ws);
  clattn__arg(&a, sizeof lse_off, &lse_off);
  clattn__arg(&a, sizeof splits, &splits);
  clattn__arg(&a, sizeof n_rows, &n_rows);
  clattn__arg(&a, sizeof dv, &dv);
  clattn__arg_mem(&a, &o->buffer);
  for (int i = 0; i < 4; i++) clattn__arg(&a, sizeof view[i], &view[i]);
  clattn__arg(&a, sizeof heads, &heads);
  clattn__arg(&a, sizeof nq, &nq);
  clattn__arg_mem(&a, &out_lse);
  clattn__arg(&a, sizeof write_lse, &write_lse);
  if (st == CLATTN_OK) err = a.err;
  /* A work-group a row (cl/merge.cl's MW); argument 14 its first. */
  clattn__launch l = {merge, a.next, rows, merge_wg(ctx), memo};
  if (st == CLATTN_OK && err == CL_SUCCESS)
    st = clattn__launch_grid(ctx, ctx->queue, 1, &l, 0, 0, NULL, NULL, NULL);
  if (st == CLATTN_OK && err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "merge_splits");
  /* A marker, not the merge's event: the call is several kernels, and its timing (profiling of
   * done from a marker before the call) must cover them all. */
  if (st == CLATTN_OK && done) {
    err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, done);
    if (err != CL_SUCCESS) st = clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList");
  }
  clFlush(ctx->queue);
  return st;
}

void clattn__split_release(clattn_context *ctx) {
  if (ctx->split_ws) clReleaseMemObject(ctx->split_ws);
  ctx->split_ws = NULL;
  ctx->split_ws_bytes = 0;
  if (ctx->merge_count) clReleaseMemObject(ctx->merge_count);
  ctx->merge_count = NULL, ctx->merge_count_n = 0;
  for (int t = 0; t < 3; t++)
    if (ctx->merge[t]) clReleaseKernel(ctx->merge[t]), ctx->merge[t] = NULL;
}
