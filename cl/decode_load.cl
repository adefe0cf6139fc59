/* The CUDA-core decode's loads (cl/decode.cl): a chunk of CC elements of a K or V row, 16 bytes
 * at VEC = 4 (fp32 4, fp16/bf16 8, int8 16), half or a quarter of that at VEC = 2 or 1. Views
 * whose offsets and strides are multiples of CC elements load through aligned vectors; others,
 * and a head dim's last partial chunk, element by element. Joined after cl/decode_common.cl.
 * Parameters (-D): VEC, UNROLL_LOOPS, PACKED and PTX_CVT (below). */

/* UNROLL: full unrolling of the loops over private arrays, so that their indices are constants
 * and the arrays stay in registers on a GPU (UNROLL_LOOPS=1, decode_family.c); a CPU keeps them
 * in memory anyway, and PoCL's compile time grows with the unrolled code. */
#if UNROLL_LOOPS
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

#if KV8
#define CC (4 * VEC)
#elif DTYPE != 0
#define CC (2 * VEC)
#else
#define CC VEC
#endif

/* A chunk as loaded: VEC 32-bit words (16 bytes at VEC = 4) of EPW elements each, unpacked to
 * float only where an element is used, so that a chunk in flight holds VEC registers, not CC
 * (fp16: half as many, int8: a quarter): PACKED 1, GPUs (decode_family.c). On a CPU registers
 * cost nothing and PoCL unpacks element by element (15% slower), so its chunks are CC floats,
 * converted as they are loaded (PACKED 0). */
#define EPW (CC / VEC)
#ifndef PTX_CVT
#define PTX_CVT 0
#endif
#ifndef PACKED
#define PACKED 1
#endif
#if PACKED
typedef uint cw_t; /* a loaded chunk: CW of these */
#define CW VEC
#else
typedef float cw_t;
#define CW CC
#endif

/* The VEC 32-bit words of a chunk at p, aligned to the whole chunk: one vector load. */
static inline void load_words(__global const kv_t *p, uint *w) {
#if VEC == 4
  const uint4 u = *(__global const uint4 *)p;
  w[0] = u.s0, w[1] = u.s1, w[2] = u.s2, w[3] = u.s3;
#elif VEC == 2
  const uint2 u = *(__global const uint2 *)p;
  w[0] = u.s0, w[1] = u.s1;
#else
  w[0] = *(__global const uint *)p;
#endif
}

#if !PACKED
/* A CPU's build (PACKED 0): elements [0, n) of a chunk (n <= CC) at p converted to floats in x
 * as they are loaded, the rest zero; al: p is aligned to the whole chunk and n == CC. */
static inline void load_raw(__global const kv_t *p, uint n, int al, float *x) {
  if (al) {
#if KV8
#if VEC == 4
    const float16 y = convert_float16(as_char16(*(__global const uint4 *)p));
    UNROLL
    for (uint e = 0; e < 16; e++) x[e] = y[e];
#elif VEC == 2
    const float8 y = convert_float8(as_char8(*(__global const uint2 *)p));
    UNROLL
    for (uint e = 0; e < 8; e++) x[e] = y[e];
#else
    const float4 y = convert_float4(as_char4(*(__global const uint *)p));
    UNROLL
    for (uint e = 0; e < 4; e++) x[e] = y[e];
#endif
#elif DTYPE == 1
#if VEC == 4
    const float8 y = vloada_half8(0, p);
#elif VEC == 2
    const float4 y = vloada_half4(0, p);
#else
    const float2 y = vloada_half2(0, p);
#endif
    UNROLL
    for (uint e = 0; e < CC; e++) x[e] = y[e];
#else /* bf16: each word's halves shifted into floats; fp32: the words are the floats */
    uint w[VEC];
    load_words(p, w);
    UNROLL
    for (uint e = 0; e < VEC; e++)
#if DTYPE == 2
      x[2 * e] = as_float(w[e] << 16), x[2 * e + 1] = as_float(w[e] & 0xffff0000u);
#else
      x[e] = as_float(w[e]);
#endif
#endif
  } else {
    UNROLL
    for (uint e = 0; e < CC; e++)
#if KV8
      x[e] = e < n ? (float)p[e] : 0.0f;
#else
      x[e] = e < n ? LDS(p + e) : 0.0f;
#endif
  }
}

#else
/* Elements [0, n) of a chunk (n <= CC) at p into w, the rest zero; al: p is aligned to the
 * whole chunk and n == CC. */
static inline void load_raw(__global const kv_t *p, uint n, int al, uint *w) {
  if (al) {
    load_words(p, w);
  } else {
    UNROLL
    for (uint i = 0; i < VEC; i++) w[i] = 0u;
    UNROLL
    for (uint e = 0; e < CC; e++) {
      if (e >= n) break;
#if KV8
      const uint bits = (uint)((__global const uchar *)p)[e];
#elif DTYPE != 0
      const uint bits = (uint)((__global const ushort *)p)[e];
#else
      const uint bits = as_uint(p[e]);
#endif
      w[e / EPW] |= bits << (32 / EPW * (e % EPW));
    }
  }
}

#endif

/* Element e of a loaded chunk as float (e a constant once the loops are unrolled). */
static inline float unpack(const cw_t *w, uint e) {
#if !PACKED
  return w[e];
#elif KV8
  return (float)((int)(w[e / 4] << (24 - 8 * (e % 4))) >> 24);
#elif DTYPE == 1
#if PTX_CVT /* NVIDIA: the half's 16 bits converted in place, no private memory */
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((ushort)(w[e / 2] >> (16 * (e % 2)))));
  return f;
#else
  return vload_half(e, (const __private half *)w);
#endif
#elif DTYPE == 2
  return as_float(e % 2 ? w[e / 2] & 0xffff0000u : w[e / 2] << 16);
#else
  return as_float(w[e]);
#endif
}
