/* Problem classes: what a compiled kernel depends on besides its config (head dims, causality,
 * the pass) and the sequence-length bucket that tiles are chosen per: seqlen_q's, or for a call
 * over a KV cache its context's (seqlen_kv, the longest sequence), since a decode call has one or
 * a few rows and its cost is the keys it reads (issue 18: "the bucket is the context"). */
#include "plan.h"

unsigned clattn__seqlen_bucket(size_t n) {
  unsigned b = 64;
  while (b < 65536 && b < n) b *= 4;
  return b;
}

clattn__class clattn__class_of(const clattn__shape *s, clattn__pass pass) {
  unsigned variants =
      (s->mask ? CLATTN__VAR_MASK : 0u) | (s->softcap > 0.0f ? CLATTN__VAR_SOFTCAP : 0u) |
      (s->alibi ? CLATTN__VAR_ALIBI : 0u) | (s->sinks ? CLATTN__VAR_SINKS : 0u) |
      (s->seqlens_kv || s->kv_cache ? CLATTN__VAR_KVLENS : 0u) |
      (s->varlen ? CLATTN__VAR_VARLEN : 0u) | (s->kv_cache ? CLATTN__VAR_KVCACHE : 0u) |
      (s->kv_paged ? CLATTN__VAR_PAGED : 0u) | (s->kv_i8 ? CLATTN__VAR_KV8 : 0u) |
      (s->nondet && pass == CLATTN__BACKWARD ? CLATTN__VAR_ATOMIC : 0u);
  unsigned q = clattn__seqlen_bucket(s->seqlen_q);
  clattn__class c = {(unsigned)s->d, (unsigned)s->dv,
                     s->causal,      s->kv_cache ? clattn__seqlen_bucket(s->seqlen_kv) : q,
                     (unsigned)pass, (unsigned)s->dtype,
                     variants,       s->kv_cache ? q : 0u};
  return c;
}
