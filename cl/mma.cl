/* Tensor-core primitives shared by the kernels that use NVIDIA's mma.sync (cl/forward_mma.cl,
 * cl/backward_mma.cl); the runtime puts this text before theirs (runtime/jit.c).
 *
 * MMA(c, a, b0, b1): c += a b for one m16n8k8 TF32 fragment triple, where lane (gq, tq) =
 * (lane / 4, lane % 4) holds A elements (gq, tq), (gq + 8, tq), (gq, tq + 4), (gq + 8, tq + 4),
 * B elements (tq, gq), (tq + 4, gq) and C elements (gq, 2 tq), (gq, 2 tq + 1), (gq + 8, 2 tq),
 * (gq + 8, 2 tq + 1). SPLIT gives the 3xTF32 split (x = hi + lo, both TF32), MMA3 the three
 * products of it, FLUSH the chained temporaries into fp32 (tensor cores truncate as they
 * accumulate). With MMA_EMULATE (CLATTN_MMA_EMULATE=1, for tests on any device) mma.sync, the
 * shuffles and the TF32 rounding are emulated with local memory and barriers: every work-item
 * of the work-group must then reach each MMA, and a kernel declares SCRATCH floats of local
 * memory per warp and passes them as SCR_ARGS. */

#ifdef MMA_EMULATE
/* Unrolled, the emulation's hundreds of barriers per tile take PoCL minutes to compile. */
#define UNROLL
/* Per warp: A (16 x 8) and B (8 x 8), each in its hi and lo parts, of one MMA3, and 32 floats
 * for shuffles. The host passes what its local-memory models count (CLATTN__MMA_SCRATCH);
 * too few would overlap the warps' scratch, so that fails the build. */
#if !defined(SCRATCH) || SCRATCH < 2 * 128 + 2 * 64 + 32
#error "SCRATCH (runtime/internal.h's CLATTN__MMA_SCRATCH) is below what mma3_emu uses"
#endif
#define SCR , __local float *scr, uint lane
#define SCR_ARGS , scr, lane

static inline uint tf32(float x) { /* cvt.rna: to nearest, ties away from zero */
  const uint u = as_uint(x);
  return (u & 0x7f800000u) == 0x7f800000u ? u : (u + 0x1000u) & 0xffffe000u;
}

/* The three MMAs of the 3xTF32 split at once, in the order the hardware runs them (lo hi, hi lo,
 * hi hi), each adding its eight products to the accumulator: one pair of barriers instead of
 * three keeps PoCL's compile times short. */
static void mma3_emu(float *c, const uint *ah, const uint *al, uint bh0, uint bh1, uint bl0,
                     uint bl1 SCR) {
  __local float *sa = scr, *sal = scr + 128, *sb = scr + 256, *sbl = scr + 320;
  const uint gq = lane / 4, tq = lane % 4;
  for (uint e = 0; e < 4; e++) {
    const uint at = (gq + 8 * (e & 1)) * 8 + tq + 4 * (e >> 1);
    sa[at] = as_float(ah[e]), sal[at] = as_float(al[e]);
  }
  sb[tq * 8 + gq] = as_float(bh0), sb[(tq + 4) * 8 + gq] = as_float(bh1);
  sbl[tq * 8 + gq] = as_float(bl0), sbl[(tq + 4) * 8 + gq] = as_float(bl1);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint e = 0; e < 4; e++) {
    const uint row = gq + 8 * (e >> 1), col = 2 * tq + (e & 1);
    float x = 0.0f, y = 0.0f, z = 0.0f;
    for (uint k = 0; k < 8; k++) x += sal[row * 8 + k] * sb[k * 8 + col];
    for (uint k = 0; k < 8; k++) y += sa[row * 8 + k] * sbl[k * 8 + col];
    for (uint k = 0; k < 8; k++) z += sa[row * 8 + k] * sb[k * 8 + col];
    c[e] = ((c[e] + x) + y) + z;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#define MMA3(t, ah, al, bh0, bh1, bl0, bl1) mma3_emu(t, ah, al, bh0, bh1, bl0, bl1, scr, lane)

static inline float shfl_xor(float v, uint lanes SCR) {
  __local float *sx = scr + 384;
  sx[lane] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = sx[lane ^ lanes];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#else
#define UNROLL _Pragma("unroll")
#define SCR
#define SCR_ARGS

static inline uint tf32(float x) {
  uint r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/* c += a b for one m16n8k8 TF32 fragment triple. Not volatile: ptxas may schedule it. */
#define MMA(c, a, b0, b1)                                                                          \
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "          \
      "{%8,%9}, {%0,%1,%2,%3};"                                                                    \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                             \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

static inline float shfl_xor(float v, uint lanes) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lanes));
  return r;
}
#endif

#define SPLIT(x, hi, lo)                                                                           \
  do {                                                                                             \
    const float x_ = (x);                                                                          \
    hi = tf32(x_);                                                                                 \
    lo = tf32(x_ - as_float(hi));                                                                  \
  } while (0)

#ifndef MMA_EMULATE
/* t += a b in 3xTF32, the small terms first. */
#define MMA3(t, ah, al, bh0, bh1, bl0, bl1)                                                        \
  do {                                                                                             \
    MMA(t, al, bh0, bh1);                                                                          \
    MMA(t, ah, bl0, bl1);                                                                          \
    MMA(t, ah, bh0, bh1);                                                                          \
  } while (0)
#endif

/* c += t in fp32, then t = 0. */
#define FLUSH(c, t)                                                                                \
  do {                                                                                             \
    for (uint e_ = 0; e_ < 4; e_++) c[e_] += t[e_], t[e_] = 0.0f;                                  \
  } while (0)

/* Max and sum over the four lanes of a quad (the lanes that share a row of a fragment). */
static inline float quad_max(float v SCR) {
  v = fmax(v, shfl_xor(v, 1 SCR_ARGS));
  return fmax(v, shfl_xor(v, 2 SCR_ARGS));
}

/* Whether p holds in some lane of the warp, the same answer in every lane (a warp-uniform
 * branch): vote.sync, or a butterfly of the emulation's shuffles. */
#ifdef MMA_EMULATE
static inline int warp_any(int p SCR) {
  float v = p ? 1.0f : 0.0f;
  for (uint s = 16; s; s /= 2) v = fmax(v, shfl_xor(v, s SCR_ARGS));
  return v > 0.0f;
}
#else
static inline int warp_any(int p) {
  int r;
  asm volatile("{\n\t.reg .pred a, b;\n\tsetp.ne.s32 a, %1, 0;\n\t"
               "vote.sync.any.pred b, a, 0xffffffff;\n\tselp.s32 %0, 1, 0, b;\n\t}"
               : "=r"(r)
               : "r"(p));
  return r;
}
#endif

static inline float quad_sum(float v SCR) {
  v += shfl_xor(v, 1 SCR_ARGS);
  return v + shfl_xor(v, 2 SCR_ARGS);
}
