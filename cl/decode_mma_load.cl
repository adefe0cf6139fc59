/* The decode_mma family's parameters and loads (cl/decode_mma.cl has the kernel and describes
 * the family): the tile's and the step's sizes from the -D parameters, a 16-byte chunk or a word
 * of a cache row, the int8 cache's bytes as fp16 or bf16 pairs, and load_step, which issues every
 * load of a 16-key step before any is used. Concatenated before cl/decode_mma.cl (registry.c). */


#if KV8 && (D % 64 || DV % 32)
#error "decode_mma: an int8 cache needs D a multiple of 64 and DV of 32"
#endif
#if D % 32 || DV % 16 || D > 128 || DV > 128
#error "decode_mma: D a multiple of 32 and DV of 16, both at most 128"
#endif

/* A 16-byte chunk holds EPC elements of the cache (8 fp16/bf16, 16 int8), SPC k-steps' worth
 * (4 elements a lane a k-step). */
#if KV8
#define EPC 16
#else
#define EPC 8
#endif
#define SPC (EPC / 4)
#define NKC (D / (4 * EPC)) /* 16-byte chunks of a key row a lane loads */
#define KWL (4 * NKC)       /* their 32-bit words */
#define VWL (NT * (KV8 ? 1 : 2) / 4) /* 32-bit words of a V row a lane loads: NT elements */
#define KS (D / 16)         /* k-steps of Q K^T */
#define NT (DV / 8)         /* n8 tiles of O; a lane's columns of a V row */
#define R16 (BQ > 8)        /* rows 8-15 of the fragments hold rows of the tile */
#define QW (D / 2)          /* 32-bit words of a Q row in local memory */
#define QROWS (R16 ? 16 : 8) /* Q's rows in local memory */
#ifndef BKV
#define BKV 16
#endif
#define SUBS (BKV / 16)     /* 16-key steps a block */
#ifndef STAGE
#define STAGE 1
#endif
#if STAGE == 2 && BKV != 32
#error "decode_mma: STAGE 2 (the next step loaded during this one) rotates two 16-key steps: BKV 32"
#endif

/* O's accumulators per n8 tile: rows gq and gq + 8 (4), or, with BQ <= 8 on the tensor cores,
 * rows gq only (2), the mma's rows 8-15 written to registers that die at once (MMA16_TOP):
 * 32 registers fewer at DV = 128. */
#if R16 || defined(MMA_EMULATE)
#define AW 4
#define MMA_O(c, a, b0, b1) MMA16(c, a, b0, b1)
#else
#define AW 2
#define MMA_O(c, a, b0, b1)                                                                        \
  do {                                                                                             \
    float j0_, j1_;                                                                                \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA16_T "." MMA16_T ".f32 {%0,%1,%2,%3}, "        \
        "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                                               \
        : "=f"(c[0]), "=f"(c[1]), "=f"(j0_), "=f"(j1_)                                             \
        : "r"(a[0]), "r"(0u), "r"(a[2]), "r"(0u), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),          \
          "f"(0.0f), "f"(0.0f));                                                                   \
  } while (0)
#endif

/* Word i of a cache row at element offset `at` of x (4 / sizeof(kv_t) elements, the first in the
 * low bits): one 32-bit load where al (the row aligned to a word), else element by element. */
static inline uint row_word(__global const kv_t *x, ulong at, int al, uint i) {
  const uint n = 4 / sizeof(kv_t);
  if (al) return *(__global const uint *)(x + at + n * i);
  uint w = 0;
  for (uint e = 0; e < n; e++)
    w |= (n == 2 ? (uint)((__global const ushort *)x)[at + n * i + e]
                 : (uint)((__global const uchar *)x)[at + n * i + e])
         << (32 / n * e);
  return w;
}

/* The 16-byte chunk of a cache row at element offset `at`, aligned where al: one load. */
static inline uint4 row_chunk(__global const kv_t *x, ulong at, int al) {
  if (al) return *(__global const uint4 *)(x + at);
  const uint n = 4 / sizeof(kv_t);
  return (uint4)(row_word(x, at, 0, 0), row_word(x, at + n, 0, 0), row_word(x, at + 2 * n, 0, 0),
                 row_word(x, at + 3 * n, 0, 0));
}

/* Byte e of w as the int8 it holds. */
static inline float i8_of(uint w, uint e) {
  return (float)((int)(w << (24 - 8 * e)) >> 24);
}

#if KV8 && DTYPE == 1
/* fp16 queries over int8: the loaded words are biased (each byte xor 0x80: x + 128, load_step),
 * and a biased byte under the exponent byte 0x64 is the half 1024 + 128 + x, exactly; less 1152
 * (0x6480) is x. byte_perm(a, b, sel) is PTX's prmt: byte i of the result is byte (sel >> 4 i) &
 * 7 of b:a (a's bytes 0-3, b's 4-7), one instruction where the shifts, masks and ors that place
 * two bytes took about five: with the pair's subtraction they were most of an int8 step's
 * instructions. */
#define KV8_BIAS 0x80808080u
static inline uint byte_perm(uint a, uint b, uint sel) {
#ifdef MMA_EMULATE
  const ulong ba = (ulong)b << 32 | a;
  uint r = 0;
  for (uint i = 0; i < 4; i++) r |= (uint)(ba >> (8 * ((sel >> (4 * i)) & 7)) & 0xffu) << (8 * i);
  return r;
#else
  uint r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
#endif
}
/* The fp16 pair of a word's biased halves 0x64XX64YY, less 1152 each. */
static inline uint i8x2_of(uint w) {
#ifdef MMA_EMULATE
  return pack2(h2f(w & 0xffffu) - 1152.0f, h2f(w >> 16) - 1152.0f);
#else
  uint r;
  asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(w), "r"(0x64806480u));
  return r;
#endif
}
/* Bytes e of a (low half) and of b (high half) as an fp16 pair. */
static inline uint i8x2(uint a, uint b, uint e) {
  return i8x2_of((byte_perm(a, b, e | (e + 4) << 8) & 0x00ff00ffu) | 0x64006400u);
}
/* Bytes 2 h and 2 h + 1 of w as an fp16 pair: the 0x64 bytes come from byte 4 (b = 0x64646464). */
static inline uint i8x2_word(uint w, uint h) {
  return i8x2_of(byte_perm(w, 0x64646464u, 0x4040u | (2 * h) | (2 * h + 1) << 8));
}
#define KV8_KPAIR(w, h) i8x2_word((w), (h))
#define KV8_VPAIR(a, b, e) i8x2((a), (b), (e))
#elif KV8
#define KV8_BIAS 0u
#define KV8_KPAIR(w, h) PACK2(i8_of((w), 2 * (h)), i8_of((w), 2 * (h) + 1))
#define KV8_VPAIR(a, b, e) PACK2(i8_of((a), (e)), i8_of((b), (e)))
#endif
/* P' = p s_v / vmax VREF <= VREF p: no overflow, and fp16's normal range reaches as far below
 * the row's largest P as an fp16 cache's P does (further, by VREF, where scales are alike). */
#define VREF 1024.0f

/* The B register of two keys' halves in one column: half h (0 low, 1 high) of a's word, key k
 * (low), and of b's, key k + 1 (high). */
static inline uint pair_keys(uint a, uint b, uint h) {
  return h ? (a >> 16) | (b & 0xffff0000u) : (a & 0xffffu) | (b << 16);
}

/* A lane's loads of one 16-key step: K's words of keys kb0 + gq and kb0 + 8 + gq (chunks tq, tq
 * + 4, ...), V's of keys kb0 + 2 tq (+ 1) and kb0 + 8 + 2 tq (+ 1) at this lane's columns,
 * whether those keys exist, and (int8) their scales. */
typedef struct {
  uint kw[2][KWL], vw[4][VWL];
  int vis[4];
#if KV8
  float ksc[4], vsc[4];
#endif
} step_t;

#if KV8
#define SCALE_PASS , k_scale, v_scale, sc_sb, heads_kv, kvh
#define SCALE_PARAMS                                                                               \
  , __global const float *k_scale, __global const float *v_scale, ulong sc_sb, uint heads_kv,      \
      uint kvh
#else
#define SCALE_PASS
#define SCALE_PARAMS
#endif

/* The step at kb0 into x, every load issued before any is used; keys at kv_end or past it, and
 * keys of pages outside the pool, read nothing and hold zeros. */
static inline void load_step(__global const kv_t *k, __global const kv_t *v, ulong b, uint kb0,
                             uint kv_end, ulong kbase, ulong vbase, ulong k_sb, ulong k_ss,
                             ulong v_sb, ulong v_ss, int kal, int val, uint gq,
                             uint tq PAGE_ARGS SCALE_PARAMS, step_t *x) {
  UNROLL
  for (uint t = 0; t < 2; t++) {
    const uint key = kb0 + 8 * t + gq;
    ulong slot;
    uint tok;
    if (key < kv_end && kv_where(b, key PAGE_PASS, &slot, &tok)) {
      const ulong at = kbase + slot * k_sb + (ulong)tok * k_ss;
      UNROLL
      for (uint i = 0; i < NKC; i++) {
        const uint4 u4 = row_chunk(k, at + EPC * (4 * i + tq), kal);
        x->kw[t][4 * i] = u4.s0, x->kw[t][4 * i + 1] = u4.s1;
        x->kw[t][4 * i + 2] = u4.s2, x->kw[t][4 * i + 3] = u4.s3;
      }
    } else {
      UNROLL
      for (uint i = 0; i < KWL; i++) x->kw[t][i] = 0u;
    }
  }
  UNROLL
  for (uint u = 0; u < 4; u++) {
    const uint key = kb0 + 8 * (u / 2) + 2 * tq + u % 2;
    ulong slot;
    uint tok;
    x->vis[u] = key < kv_end && kv_where(b, key PAGE_PASS, &slot, &tok);
    if (x->vis[u]) {
      const ulong at = vbase + slot * v_sb + (ulong)tok * v_ss + gq * NT;
#if VWL % 4 == 0
      UNROLL
      for (uint i = 0; i < VWL; i += 4) {
        const uint4 u4 = row_chunk(v, at + (EPC / 4) * i, val);
        x->vw[u][i] = u4.s0, x->vw[u][i + 1] = u4.s1;
        x->vw[u][i + 2] = u4.s2, x->vw[u][i + 3] = u4.s3;
      }
#else
      UNROLL
      for (uint i = 0; i < VWL; i++) x->vw[u][i] = row_word(v, at, val, i);
#endif
#if KV8
      const ulong si = slot * sc_sb + (ulong)tok * heads_kv + kvh;
      x->ksc[u] = k_scale[si], x->vsc[u] = v_scale[si];
#endif
    } else {
      UNROLL
      for (uint i = 0; i < VWL; i++) x->vw[u][i] = 0u;
#if KV8
      x->ksc[u] = x->vsc[u] = 0.0f;
#endif
    }
  }
#if KV8 && DTYPE == 1 /* i8x2's bias, once a word (a missing key's zeros become biased zeros) */
  UNROLL
  for (uint t = 0; t < 2; t++) {
    UNROLL
    for (uint i = 0; i < KWL; i++) x->kw[t][i] ^= KV8_BIAS;
  }
  UNROLL
  for (uint u = 0; u < 4; u++) {
    UNROLL
    for (uint i = 0; i < VWL; i++) x->vw[u][i] ^= KV8_BIAS;
  }
#endif
}
