/* Definitions shared by the kernels; the runtime puts this text before each kernel's source
 * (runtime/jit.c), so the kernel files stay standalone readable OpenCL C otherwise. */

/* Vector width of the global loads that fill the tiles (VEC = 1, 2 or 4; D and DV are
 * multiples of it). vloadn needs only float alignment, so any offset and stride stays correct;
 * aligned views load faster. */
#ifndef VEC
#define VEC 1
#endif
#if VEC == 4
typedef float4 floatv;
#define VLOAD(p) vload4(0, p)
#define VGET(x, e) ((e) == 0 ? (x).s0 : (e) == 1 ? (x).s1 : (e) == 2 ? (x).s2 : (x).s3)
#elif VEC == 2
typedef float2 floatv;
#define VLOAD(p) vload2(0, p)
#define VGET(x, e) ((e) == 0 ? (x).s0 : (x).s1)
#else
typedef float floatv;
#define VLOAD(p) (*(p))
#define VGET(x, e) (x)
#endif
