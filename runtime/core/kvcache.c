/* Validation of a KV cache (clattn_kv_cache, issue 18) before anything is enqueued: what the
 * host knows (element type, layout, sizes, views and arrays in their buffers, overlaps). The
 * block table's entries and the lengths live on the device and are bounded by the kernels
 * (cl/decode.cl, cl/kv_append.cl). */
#include "core.h"

#include <stdint.h>
#include <stdio.h>

/* The cache's members. */
enum { R_K, R_V, R_KS, R_VS, R_TABLE, R_LENS, R_COUNT };
static const char *const names[R_COUNT] = {"kv_cache.k",           "kv_cache.v",
                                           "kv_cache.k_scale",     "kv_cache.v_scale",
                                           "kv_cache.block_table", "kv_cache.seqlens"};

static clattn_status check_layout(clattn_context *ctx, const clattn__shape *s,
                                  const clattn_kv_cache *c) {
  if (c->dtype != s->dtype && c->dtype != CLATTN_I8)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.dtype %d: a cache holds the problem's dtype (%s) or CLATTN_I8",
                        (int)c->dtype, clattn__dtype_name(s->dtype));
  if (c->dtype != CLATTN_I8 && (c->k_scale || c->v_scale))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.%s is set but the cache's dtype is %s: scales are CLATTN_I8's",
                        c->k_scale ? "k_scale" : "v_scale", clattn__dtype_name(c->dtype));
  if (c->dtype == CLATTN_I8 && (!c->k_scale || !c->v_scale))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.%s is NULL: a CLATTN_I8 cache needs fp32 scales for K and V",
                        c->k_scale ? "v_scale" : "k_scale");
  if (!c->seqlens)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.seqlens is NULL: the tokens each sequence holds (int32 [batch])");
  if (!c->page_size) {
    if (c->num_pages || c->max_pages || c->block_table)
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                          "kv_cache.%s is set but page_size is 0 (a contiguous cache)",
                          c->block_table ? "block_table"
                          : c->num_pages ? "num_pages"
                                         : "max_pages");
    return CLATTN_OK;
  }
  if (c->page_size > 256 || (c->page_size & (c->page_size - 1)))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.page_size %zu: a power of two from 1 to 256 (0: contiguous)",
                        c->page_size);
  if (!c->block_table)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.block_table is NULL: a paged cache (page_size %zu) needs one",
                        c->page_size);
  if (!c->num_pages || c->num_pages > INT32_MAX)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.num_pages %zu: 1 to 2^31 - 1 (block_table holds int32 pages)",
                        c->num_pages);
  size_t most;
  if (c->max_pages > UINT32_MAX) /* the kernels index the table's rows in 32 bits */
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.max_pages %zu: at most 2^32 - 1 pages per sequence",
                        c->max_pages);
  if (!c->max_pages || __builtin_mul_overflow(c->max_pages, c->page_size, &most) ||
      most < s->seqlen_kv)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "kv_cache.max_pages %zu of %zu tokens hold fewer than seqlen_kv %zu",
                        c->max_pages, c->page_size, s->seqlen_kv);
  return CLATTN_OK;
}

/* Whether k and v interleave without sharing an element: one buffer, the same strides, and in
 * every slot each one's block (its elements' span) clear of the other's and of the next slot.
 * A sufficient test, exact for the usual layouts; anything else counts as overlapping. */
static int interleaved(const clattn_kv_cache *c, size_t slots, size_t per, size_t hkv, size_t d,
                       size_t dv) {
  const clattn_tensor *k = &c->k, *v = &c->v;
  if (k->buffer != v->buffer || k->stride_batch != v->stride_batch ||
      k->stride_seq != v->stride_seq || k->stride_head != v->stride_head || slots < 1)
    return 0;
  size_t span, tail, most = d > dv ? d : dv; /* a slot's elements from its first: [0, span) */
  if (__builtin_mul_overflow(per - 1, k->stride_seq, &span) ||
      __builtin_mul_overflow(hkv - 1, k->stride_head, &tail) ||
      __builtin_add_overflow(span, tail, &span) || __builtin_add_overflow(span, most, &span))
    return 0;
  size_t lo = k->offset < v->offset ? k->offset : v->offset, gap = k->offset + v->offset - 2 * lo;
  return gap >= span && (slots == 1 || gap + span <= k->stride_batch);
}

clattn_status clattn__check_kv_cache(clattn_context *ctx, clattn__shape *s,
                                     const clattn_kv_cache *c, int written,
                                     clattn__region regions[6]) {
  if (!c) return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache is NULL");
  clattn_status st = check_layout(ctx, s, c);
  if (st != CLATTN_OK) return st;
  int paged = c->page_size != 0;
  /* Slots: pages of page_size tokens, or the batch's entries of seqlen_kv. */
  size_t slots = paged ? c->num_pages : s->batch, per = paged ? c->page_size : s->seqlen_kv;
  size_t elem = c->dtype == CLATTN_I8 ? 1 : s->elem, hkv = s->heads_q ? s->heads_kv : 0;
  size_t scales, table;
  if (__builtin_mul_overflow(slots, per, &scales) || __builtin_mul_overflow(scales, hkv, &scales) ||
      __builtin_mul_overflow(s->batch, c->max_pages, &table))
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "kv_cache: its size overflows");
  clattn__region r[R_COUNT];
  int sc_access = written ? CLATTN__WRITES : CLATTN__READS;
  if ((st = clattn__view_region(ctx, names[R_K], &c->k, slots, per, hkv, s->d, elem, written,
                                &r[R_K])) ||
      (st = clattn__view_region(ctx, names[R_V], &c->v, slots, per, hkv, s->dv, elem, written,
                                &r[R_V])) ||
      (st = clattn__array_region(ctx, names[R_KS], c->k_scale, scales, sc_access, &r[R_KS])) ||
      (st = clattn__array_region(ctx, names[R_VS], c->v_scale, scales, sc_access, &r[R_VS])) ||
      (st = clattn__array_region(ctx, names[R_TABLE], c->block_table, table, CLATTN__READS,
                                 &r[R_TABLE])) ||
      (st = clattn__array_region(ctx, names[R_LENS], c->seqlens, s->batch, CLATTN__READS,
                                 &r[R_LENS])))
    return st;
  /* Written, k, v and the scales are outputs: none may overlap another member; K and V may
   * interleave in one buffer (FlashInfer's [page][2][token][head][dim]) without sharing an
   * element. */
  for (int i = 0; written && i < R_TABLE; i++)
    for (int j = i + 1; j < R_COUNT; j++)
      if (clattn__regions_overlap(&r[i], &r[j]) &&
          !(i == R_K && j == R_V && interleaved(c, slots, per, hkv, s->d, s->dv)))
        return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s overlaps %s in the same buffer",
                            names[i], names[j]);
  if (regions)
    for (int i = 0; i < R_COUNT; i++) regions[i] = r[i];
  s->kv_cache = 1, s->kv_paged = paged, s->kv_i8 = c->dtype == CLATTN_I8;
  s->page_size = c->page_size, s->num_pages = c->num_pages, s->max_pages = c->max_pages;
  s->sc_sb = per * s->heads_kv;
  s->block_table = c->block_table, s->k_scale = c->k_scale, s->v_scale = c->v_scale;
  s->seqlens_kv = c->seqlens;
  return CLATTN_OK;
}

clattn_status clattn__check_cache_forward(clattn_context *ctx, clattn__shape *s,
                                          const clattn_args *a) {
  const clattn_kv_cache *c = a->kv_cache;
  if (a->k.buffer || a->v.buffer)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "args.%s is set with a kv_cache: the keys and values are the cache's",
                        a->k.buffer ? "k" : "v");
  if (a->seqlens_kv)
    return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT,
                        "args.seqlens_kv is set with a kv_cache: the lengths are "
                        "kv_cache.seqlens");
  if (s->varlen)
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "CLATTN_VARLEN with a kv_cache: the sequences of a cache are its batch "
                        "entries (padded queries, kv_cache.seqlens)");
  /* The decode kernels count a KV group's packed rows (query rows times the group's heads) in
   * 32 bits. */
  size_t group = s->heads_kv ? s->heads_q / s->heads_kv : 1, packed;
  if (__builtin_mul_overflow(s->seqlen_q, group, &packed) || packed >= ((size_t)1 << 31))
    return clattn__fail(ctx, CLATTN_ERR_UNSUPPORTED,
                        "seqlen_q %zu times %zu query heads per KV head: a cache call packs at "
                        "most 2^31 - 1 rows per KV head",
                        s->seqlen_q, group);
  /* q, o, lse and the variants' arrays as a call without keys would have them. */
  size_t vkv = s->vkv;
  s->vkv = 0;
  clattn_tensor none = {0};
  clattn_status st = clattn__check_forward_tensors(ctx, s, &a->q, &none, &none, &a->o, a->lse);
  if (st == CLATTN_OK) st = clattn__check_variant_args(ctx, s, a, 0);
  s->vkv = vkv;
  clattn__region r[R_COUNT], ro, rl;
  if (st == CLATTN_OK) st = clattn__check_kv_cache(ctx, s, c, 0, r);
  if (st != CLATTN_OK) return st;
  size_t nq = s->empty ? 0 : s->seqlen_q;
  if ((st = clattn__view_region(ctx, "o", &a->o, s->batch, nq, s->heads_q, s->dv, s->elem, 1,
                                &ro)) ||
      (st = clattn__array_region(ctx, "lse", nq ? a->lse : NULL, s->lse_rows, 0, &rl)))
    return st;
  for (int i = 0; i < R_COUNT; i++)
    if (clattn__regions_overlap(&ro, &r[i]) || clattn__regions_overlap(&rl, &r[i]))
      return clattn__fail(ctx, CLATTN_ERR_INVALID_ARGUMENT, "%s overlaps %s in the same buffer",
                          clattn__regions_overlap(&ro, &r[i]) ? "o" : "lse", names[i]);
  return CLATTN_OK;
}
