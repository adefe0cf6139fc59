/* backward_mma_half's atomic dQ (DQ_ATOMIC 1, a caller's CLATTN_NONDETERMINISTIC; the header of
 * cl/backward_mma_half.cl says what it is): the accumulator's argument, the atomic adds and
 * bwd_dkdv's dQ = dS K over its staged K block. The program joins this file before
 * cl/backward_mma_half.cl, whose macros (CT, QW, WARPS_KV, SQ, ...) these use where they are
 * expanded. */

#ifndef DQ_ATOMIC
#define DQ_ATOMIC 0
#endif
#if DQ_ATOMIC
#define DQ_ARG , __global float *acc, ulong acc_off
#ifdef MMA_EMULATE /* *p += x by compare-and-swap (OpenCL 1.2 has no float atomics) */
static inline void add_f32(__global float *p, float x) {
  volatile __global uint *u = (volatile __global uint *)p;
  uint old = *u, seen;
  while ((seen = atomic_cmpxchg(u, old, as_uint(as_float(old) + x))) != old) old = seen;
}
#else
static inline void add_f32(__global float *p, float x) {
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(x) : "memory");
}
/* Two adjacent floats at once (sm_90, PTX 8.1): p 8-byte aligned. */
static inline void add_f32x2(__global float *p, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(x), "f"(y) : "memory");
}
#endif
/* How bwd_dkdv adds a block's dQ into acc (the host sets 2 on compute capability 9.0 and later,
 * where it measured fastest, "Stop 41" in docs/BENCHMARKS.md; 3 is an experiment's):
 * 1 red.global.add per element; 2 red.global.add.v2.f32 per pair of columns (D even; the host
 * keeps acc_off a multiple of 4); 3 the block's dQ gathered in local memory, then added by one
 * bulk reduction (cp.reduce.async.bulk, Hopper's TMA path; D a multiple of 4: the block's rows
 * are contiguous in acc and 16-byte aligned). Emulated: 1. */
#if !defined(DQ_RED) || defined(MMA_EMULATE)
#undef DQ_RED
#define DQ_RED 1
#endif
#if (DQ_RED == 2 && D % 2) || (DQ_RED == 3 && D % 4)
#undef DQ_RED
#define DQ_RED 1
#endif
#else
#define DQ_ARG
#define DQ_BULK_WAIT()
#define DQ_PENDING()
#endif

#if DQ_ATOMIC
#define DSW (SQ / 2 + 4) /* words per local row of dS^T (a row per key), an odd multiple of 4 */
#define DQ_UNITS ((SQ / 16) * ((CT + 1) / 2)) /* a block's dQ in units of 16 rows x 16 columns */
#define DQ_TRIPS ((DQ_UNITS + WARPS_KV - 1) / WARPS_KV) /* the same count for every warp */

/* dQ (rows q0 .., nrow of them, of head h) += dS K for the staged block: dS^T's rows of 16-bit
 * pairs in Sw (a row per key), K's in Kl. Warp w takes units w, w + WARPS_KV, ...: two 8-column
 * tiles of 16 rows over the block's BKV keys, then an atomic add per element. dS^T read by
 * ldmatrix.trans gives dS's A fragments (frag_cols_x4's matrices, the middle two swapped). */
#define DQ_PRODUCT(Sw, Kl, h, q0, nrow)                                                            \
  for (uint i_ = 0; i_ < DQ_TRIPS; i_++) {                                                         \
    const uint u0_ = warp + i_ * WARPS_KV, u_ = min(u0_, (uint)DQ_UNITS - 1);                      \
    const uint r0_ = u_ % (SQ / 16) * 16, c0_ = u_ / (SQ / 16) * 16;                               \
    float x_[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};                         \
    UNROLL for (uint k_ = 0; k_ < BKV / 16; k_++) {                                                \
      uint t_[4], a_[4], b_[4];                                                                    \
      frag_cols_x4(Sw, DSW, k_ * 16, r0_, lane, t_);                                               \
      a_[0] = t_[0], a_[1] = t_[2], a_[2] = t_[1], a_[3] = t_[3];                                  \
      frag_cols_x4(Kl, QW, k_ * 16, c0_, lane, b_);                                                \
      MMA16(x_[0], a_, b_[0], b_[1]);                                                              \
      MMA16(x_[1], a_, b_[2], b_[3]);                                                              \
    }                                                                                              \
    if (u0_ < DQ_UNITS) DQ_ADD(x_, r0_, c0_, h, q0, nrow);                                         \
  }
#if DQ_RED == 3 /* into the block's dQ in local memory (Dq, rows of D) */
#define DQ_ADD(x_, r0_, c0_, h, q0, nrow)                                                          \
  UNROLL for (uint t_ = 0; t_ < 2; t_++) UNROLL for (uint e_ = 0; e_ < 4; e_++) {                  \
    const uint r_ = r0_ + gq + 8 * (e_ >> 1), c_ = c0_ + 8 * t_ + 2 * tq + (e_ & 1);               \
    if (c_ < D) Dq[r_ * D + c_] = x_[t_][e_];                                                      \
  }
#elif DQ_RED == 2
#define DQ_ADD(x_, r0_, c0_, h, q0, nrow)                                                          \
  UNROLL for (uint t_ = 0; t_ < 2; t_++) UNROLL for (uint e_ = 0; e_ < 4; e_ += 2) {               \
    const uint r_ = r0_ + gq + 8 * (e_ >> 1), c_ = c0_ + 8 * t_ + 2 * tq;                          \
    if (r_ < (nrow) && c_ < D)                                                                     \
      add_f32x2(acc + acc_off + (LSE_ROW(b, h) + (q0) + r_) * D + c_, x_[t_][e_], x_[t_][e_ + 1]); \
  }
#else
#define DQ_ADD(x_, r0_, c0_, h, q0, nrow)                                                          \
  UNROLL for (uint t_ = 0; t_ < 2; t_++) UNROLL for (uint e_ = 0; e_ < 4; e_++) {                  \
    const uint r_ = r0_ + gq + 8 * (e_ >> 1), c_ = c0_ + 8 * t_ + 2 * tq + (e_ & 1);               \
    if (r_ < (nrow) && c_ < D && x_[t_][e_] != 0.0f)                                               \
      add_f32(acc + acc_off + (LSE_ROW(b, h) + (q0) + r_) * D + c_, x_[t_][e_]);                   \
  }
#endif
#if DQ_RED == 3
/* The gathered block (nrow rows) added to acc by one bulk reduction, issued by work-item 0 once
 * every work-item's writes are visible to the async proxy; DQ_BULK_WAIT: its reads of Dq done
 * (before Dq is written again, and before the work-group ends). */
#define DQ_BULK(h, q0, nrow)                                                                       \
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");                                     \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                    \
  if (lid == 0)                                                                                    \
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n\t"  \
                 "cp.async.bulk.commit_group;" ::"l"(acc + acc_off + (LSE_ROW(b, h) + (q0)) * D), \
                 "r"(LDS_ADDR(Dq)), "r"((uint)((nrow) * D * 4))                                   \
                 : "memory")
#define DQ_BULK_WAIT()                                                                             \
  if (lid == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory")
#else
#define DQ_BULK(h, q0, nrow)
#define DQ_BULK_WAIT()
#endif
/* The pending block's dQ (bwd_dkdv's ph, pq, pend: its dS^T in Sw), deferred by a block so that
 * its products and adds need no barrier of their own: every warp wrote that dS^T before the
 * barrier that ended the block's trip, and Sw is written again only after the next trip's first
 * barrier. bwd_dkdv runs it at the top of each trip, before that barrier, while the next block's
 * copies fly, and once after the loop. DQ_RED 3 gathers in Dq, which the last bulk reduction
 * must have read first (a barrier after the wait). Uniform over the work-group (pend, ph, pq
 * are). */
#if DQ_RED == 3
#define DQ_BULK_READ() DQ_BULK_WAIT(); barrier(CLK_LOCAL_MEM_FENCE)
#else
#define DQ_BULK_READ()
#endif
#define DQ_PENDING()                                                                               \
  if (pend) {                                                                                      \
    DQ_BULK_READ();                                                                                \
    DQ_PRODUCT(Sw, Kl, ph, pq, min((uint)SQ, seqlen_q - pq));                                      \
    DQ_BULK(ph, pq, min((uint)SQ, seqlen_q - pq));                                                 \
    pend = false;                                                                                  \
  }
#endif

