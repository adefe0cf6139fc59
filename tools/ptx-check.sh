#!/usr/bin/env bash
# Offline check of the tensor-core kernels' inline PTX where no NVIDIA GPU is at hand (CTest's
# ptx/ test): each program (its registry files: cl/common.cl, cl/mma.cl, ..., its own file)
# compiled by clang's nvptx64 backend for sm_80 and assembled by ptxas for sm_90, in a few
# configs per storage type, so that a malformed asm string, operand or type suffix fails here
# rather than on the H200; the decode kernels and the PTX probes (tools/gpu-ptx-probe.sh)
# likewise. Registers, spills and shared memory are printed per config; they are clang's code,
# not NVIDIA's OpenCL compiler's, so only indicative.
# The OpenCL built-ins that clang's nvptx64 target lacks (work-item ids, barrier, exp2, fma, half
# and vector loads, conversions) are stubbed below; one left unstubbed is a failure, since the
# call it leaves inflates the registers (before fma was stubbed, forward_mma_half with a window
# and softcap read 255 registers and 248 bytes of spills; it has 220 and none).
# Exits 77 (skipped) without clang's nvptx64 target or ptxas (PATH, else /usr/local/cuda/bin).
# Usage: tools/ptx-check.sh [WORK_DIR]
set -uo pipefail
cl=$(cd "$(dirname "$0")/../cl" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
if ! command -v clang >/dev/null || ! clang -print-targets 2>/dev/null | grep -q nvptx64 ||
  [ ! -x "$ptxas" ]; then
  echo "skipped: needs clang with the nvptx64 target and ptxas"
  exit 77
fi
cat >"$work/stubs.cl" <<'EOF'
#define OVL __attribute__((overloadable))
size_t OVL get_local_id(uint d) { return __nvvm_read_ptx_sreg_tid_x(); }
size_t OVL get_group_id(uint d) { return __nvvm_read_ptx_sreg_ctaid_x(); }
size_t OVL get_global_id(uint d) {
  return __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
         __nvvm_read_ptx_sreg_tid_x();
}
size_t OVL get_local_size(uint d) { return __nvvm_read_ptx_sreg_ntid_x(); }
void OVL barrier(cl_mem_fence_flags f) { __syncthreads(); }
float OVL exp2(float x) { return __nvvm_ex2_approx_f(x); }
float OVL native_exp2(float x) { return __nvvm_ex2_approx_ftz_f(x); }
float OVL native_recip(float x) { return __nvvm_rcp_rn_ftz_f(x); }
float OVL log2(float x) { return __nvvm_lg2_approx_f(x); }
float OVL log(float x) { return __nvvm_lg2_approx_f(x) * 0.6931471806f; }
float OVL exp(float x) { return __nvvm_ex2_approx_f(x * 1.4426950409f); }
uint OVL min(uint a, uint b) { return a < b ? a : b; }
uint OVL max(uint a, uint b) { return a > b ? a : b; }
float OVL tanh(float x) { float e = __nvvm_ex2_approx_f(2.885390082f * x); return (e - 1.0f) / (e + 1.0f); }
long OVL min(long a, long b) { return a < b ? a : b; }
float OVL fmax(float a, float b) { return __nvvm_fmax_f(a, b); }
int OVL atomic_inc(volatile __global int *p) {
  int r; asm volatile("atom.global.add.u32 %0, [%1], 1;" : "=r"(r) : "l"(p) : "memory"); return r;
}
int OVL atomic_xchg(volatile __global int *p, int v) {
  int r; asm volatile("atom.global.exch.b32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory");
  return r;
}
float OVL vload_half(size_t i, const __global half *p) {
  float f;
  __asm__("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(((const __global ushort *)p)[i]));
  return f;
}
void OVL vstore_half_rte(float x, size_t i, __global half *p) {
  ushort u;
  __asm__("cvt.rn.f16.f32 %0, %1;" : "=h"(u) : "f"(x));
  ((__global ushort *)p)[i] = u;
}
ushort2 OVL vload2(size_t i, const __global ushort *p) { return (ushort2)(p[2 * i], p[2 * i + 1]); }
/* Without these, clang leaves calls to external functions whose ABI inflates the registers. */
float OVL fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
float OVL fmin(float a, float b) { return __nvvm_fmin_f(a, b); }
float OVL fabs(float a) { return __builtin_fabsf(a); }
/* (vloadn needs only the element's alignment; these assume the vector's: registers, not loads) */
float4 OVL vload4(size_t i, const __global float *p) { return ((const __global float4 *)p)[i]; }
float2 OVL vload2(size_t i, const __global float *p) { return ((const __global float2 *)p)[i]; }
float4 OVL convert_float4(char4 c) { return (float4)(c.s0, c.s1, c.s2, c.s3); }
float8 OVL convert_float8(char8 c) { return (float8)(convert_float4(c.lo), convert_float4(c.hi)); }
float16 OVL convert_float16(char16 c) {
  return (float16)(convert_float8(c.lo), convert_float8(c.hi));
}
static inline float h2f(uint h) {
  float f;
  __asm__("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((ushort)h));
  return f;
}
float2 OVL vloada_half2(size_t i, const __global half *p) {
  const uint u = ((const __global uint *)p)[i];
  return (float2)(h2f(u & 0xffff), h2f(u >> 16));
}
float4 OVL vloada_half4(size_t i, const __global half *p) {
  const uint2 u = ((const __global uint2 *)p)[i];
  return (float4)(h2f(u.s0 & 0xffff), h2f(u.s0 >> 16), h2f(u.s1 & 0xffff), h2f(u.s1 >> 16));
}
float8 OVL vloada_half8(size_t i, const __global half *p) {
  const uint4 u = ((const __global uint4 *)p)[i];
  return (float8)(h2f(u.s0 & 0xffff), h2f(u.s0 >> 16), h2f(u.s1 & 0xffff), h2f(u.s1 >> 16),
                  h2f(u.s2 & 0xffff), h2f(u.s2 >> 16), h2f(u.s3 & 0xffff), h2f(u.s3 >> 16));
}
EOF
fail=0
# check NAME FILES... -- DEFINES...
check() {
  local name=$1 files=() defs=()
  shift
  while [ "$1" != -- ]; do files+=("$cl/$1"); shift; done
  shift
  defs=("$@")
  cat "${files[@]}" >"$work/$name.cl"
  local tag="$name ${defs[*]}"
  if ! clang -cl-std=CL1.2 -Xclang -finclude-default-header -target nvptx64-nvidia-cuda \
    -march=sm_80 -O2 -S -Dasm=__asm__ -include "$work/stubs.cl" "${defs[@]}" \
    -o "$work/$name.ptx" "$work/$name.cl" 2>"$work/$name.log"; then
    echo "FAIL (clang) $tag"; sed -n 1,20p "$work/$name.log"; fail=1; return
  fi
  # SM90=1: Hopper's instructions (red.v2.f32, the bulk reductions), which clang here cannot
  # target: the PTX is retargeted to sm_90 and PTX ISA 8.1, as NVIDIA's OpenCL emits for an H100.
  [ -n "${SM90:-}" ] && sed -i -e 's/^\.target sm_80/.target sm_90/' -e 's/^\.version .*/.version 8.1/' \
    "$work/$name.ptx"
  if ! "$ptxas" -arch=sm_90 -v -c -o "$work/$name.o" "$work/$name.ptx" >"$work/$name.log" 2>&1
  then
    echo "FAIL (ptxas) $tag"; sed -n 1,20p "$work/$name.log"; fail=1; return
  fi
  if grep -q '^\.extern \.func' "$work/$name.ptx"; then # a built-in left unstubbed
    echo "FAIL (stubs) $tag: $(grep -oE '^\.extern \.func.*' "$work/$name.ptx" | head -3)"
    fail=1
    return
  fi
  # Per kernel of the program (clattn_forward; bwd_dkdv and bwd_dq; clattn_decode(_mma)).
  echo "ok $tag: $(grep -A2 -E "Function properties for (clattn_forward|bwd_dkdv|bwd_dq|clattn_decode|clattn_decode_mma)" \
    "$work/$name.log" | grep -oE 'for [a-z_]+|[0-9]+ bytes spill stores|Used [0-9]+ registers' |
    tr '\n' ' ')"
}
half=(common.cl mma.cl mma_half.cl forward_mma_half.cl --)
for dt in 1 2; do
  check fmh "${half[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=64 -DBKV=64 -DPAD=1 -DCAUSAL=1
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=32 -DPAD=1 -DCAUSAL=0
  # the variants (a key range per row, softcap; ALiBi, sinks and packed sequences)
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=32 -DPAD=1 -DCAUSAL=0 \
    -DMASK=1 -DSOFTCAP=1
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=32 -DPAD=1 -DCAUSAL=1 \
    -DALIBI=1 -DSINKS=1 -DVARLEN=1
  check fmh "${half[@]}" -DDTYPE=$dt -DD=59 -DDV=100 -DBQ=16 -DBKV=16 -DPAD=0 -DCAUSAL=1
  check fmh "${half[@]}" -DDTYPE=$dt -DD=256 -DDV=256 -DBQ=64 -DBKV=32 -DPAD=1 -DCAUSAL=1
  # the softcap's tanh from ex2.approx and rcp.approx (CAP_FAST 1, an alternative)
  check fmh "${half[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=64 -DBKV=64 -DPAD=1 -DCAUSAL=1 \
    -DSOFTCAP=1 -DCAP_FAST=1
  # tanh.approx.f32 (CAP_FAST 2: the host's choice for half storage on NVIDIA since stop 37)
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=128 -DBKV=32 -DRM=2 -DPAD=1 -DCAUSAL=1 \
    -DSTAGE=3 -DSOFTCAP=1 -DCAP_FAST=2
  # two stages: cp.async copies, ldmatrix fragments
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=32 -DPAD=1 -DCAUSAL=1 -DSTAGE=2
  check fmh "${half[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=128 -DBKV=64 -DPAD=1 -DCAUSAL=0 -DSTAGE=2 \
    -DMASK=1 -DSOFTCAP=1
  # two m16 tiles a warp (RM 2), in each staging
  check fmh "${half[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=128 -DBKV=64 -DRM=2 -DPAD=1 -DCAUSAL=1 -DSTAGE=2
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=32 -DRM=2 -DPAD=1 -DCAUSAL=0 -DSTAGE=2
  check fmh "${half[@]}" -DDTYPE=$dt -DD=59 -DDV=100 -DBQ=32 -DBKV=16 -DRM=2 -DPAD=0 -DCAUSAL=1 -DMASK=1
  # one stage, staggered (3), and with Q in local memory (4)
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=64 -DRM=1 -DPAD=1 -DCAUSAL=1 -DSTAGE=3
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=48 -DRM=2 -DPAD=1 -DCAUSAL=0 -DSTAGE=4
  check fmh "${half[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=128 -DBKV=64 -DRM=2 -DPAD=1 -DCAUSAL=1 -DSTAGE=4 \
    -DMASK=1 -DSOFTCAP=1
  # unpadded, swizzled (SWZ): 64-key tiles and Q in exactly 48 KiB at d = 128
  check fmh "${half[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=64 -DRM=2 -DPAD=0 -DSWZ=1 -DCAUSAL=1 -DSTAGE=4
done
# The tensor-core backward in half: bwd_dkdv and bwd_dq, staged blocks as the runtime sets them.
bhalf=(common.cl mma.cl mma_half.cl backward_mma_half_atomic.cl backward_mma_half.cl
  backward_mma_half_dq.cl --)
for dt in 1 2; do
  # atomic dQ (CLATTN_NONDETERMINISTIC): per element, by pairs and by a bulk reduction
  for red in 1 2 3; do
    sm90=; [ $red -gt 1 ] && sm90=1
    SM90=$sm90 check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=128 -DBKV=128 -DSQ=32 -DSK=32 \
      -DCAUSAL=1 -DDQ_ATOMIC=1 -DDQ_RED=$red
  done
  check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=128 -DBKV=128 -DSQ=64 -DSK=64 -DCAUSAL=1
  check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=64 -DSQ=32 -DSK=32 -DCAUSAL=0
  check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=59 -DDV=100 -DBQ=16 -DBKV=32 -DSQ=32 -DSK=32 -DCAUSAL=1
  check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=64 -DBKV=64 -DSQ=64 -DSK=64 -DCAUSAL=0 \
    -DMASK=1 -DSOFTCAP=1
  check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=64 -DBKV=64 -DSQ=64 -DSK=64 -DCAUSAL=1 \
    -DALIBI=1 -DSINKS=1 -DKVLENS=1
  # one stage of staged blocks (copied and awaited before each), where two do not fit
  check bmh "${bhalf[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=64 -DBKV=64 -DSQ=32 -DSK=32 -DCAUSAL=1 \
    -DNBUF=1
done
# The standard path's kernels with the fused kernels' tanh for half storage on NVIDIA (CAP_FAST 2).
check std common.cl standard.cl -- -DDTYPE=1 -DWG=256 -DCPI=4 -DCAUSAL=1 -DSOFTCAP=1 -DCAP_FAST=2
# The fp32 tensor-core forward, the H200's default, as the control of the stubs.
check fm common.cl mma.cl forward_mma.cl -- -DD=64 -DDV=64 -DBQ=128 -DBKV=32 -DPAD=1 -DCAUSAL=1 \
  -DVEC=4 -DKVSPLIT=1
check fm common.cl mma.cl forward_mma.cl -- -DD=128 -DDV=128 -DBQ=64 -DBKV=32 -DPAD=1 -DCAUSAL=0 \
  -DVEC=4 -DKVSPLIT=1 -DMASK=1 -DSOFTCAP=1
# The decode kernels as a GPU builds them (loops unrolled), with their registers: fp16, an int8
# cache and fp32, d = 128, GQA 4's one row, the two stages; the cost model's register estimate
# (runtime/kernels/decode_family.c) was fitted to these.
dec=(common.cl decode_common.cl decode_load.cl decode.cl --)
dd=(-DD=128 -DDV=128 -DBQ=4 -DBKV=64 -DCAUSAL=0 -DKVCACHE=1 -DKVLENS=1 -DUNROLL_LOOPS=1
  -DPTX_CVT=1 -DPTX_FENCE=1)
for st in 1 2; do
  check dec "${dec[@]}" "${dd[@]}" -DDTYPE=1 -DTPR=4 -DRM=4 -DVEC=4 -DSTAGE=$st
  check dec "${dec[@]}" "${dd[@]}" -DDTYPE=1 -DTPR=8 -DRM=2 -DVEC=2 -DSTAGE=$st -DPAGED=1
  check dec "${dec[@]}" "${dd[@]}" -DDTYPE=1 -DTPR=4 -DRM=1 -DVEC=2 -DSTAGE=$st -DKV8=1
  check dec "${dec[@]}" "${dd[@]}" -DDTYPE=0 -DTPR=4 -DRM=2 -DVEC=4 -DSTAGE=$st -DSOFTCAP=1 \
    -DSINKS=1
done
# The tensor-core decode (cl/decode_mma.cl): fp16 and bf16, d = 128 and 64, 8 and 16 rows, paged
# with the variants, int8, 32-key blocks and their two stages.
dmma=(common.cl mma.cl mma_half.cl decode_common.cl decode_mma_load.cl decode_mma.cl --
  -DPTX_FENCE=1)
for dt in 1 2; do
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=8 -DCAUSAL=0 -DKVCACHE=1 -DKVLENS=1
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=16 -DCAUSAL=1 -DKVCACHE=1 -DKVLENS=1 \
    -DPAGED=1 -DMASK=1 -DSOFTCAP=1 -DALIBI=1 -DSINKS=1
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=64 -DDV=64 -DBQ=8 -DCAUSAL=0 -DKVCACHE=1 -DKVLENS=1
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=8 -DCAUSAL=0 -DKVCACHE=1 -DKVLENS=1 \
    -DKV8=1 -DPAGED=1
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=8 -DBKV=32 -DCAUSAL=0 -DKVCACHE=1 \
    -DKVLENS=1 -DKV8=1
  # each 16 keys' loads during the previous 16's math (stage 2): fp16 / bf16 and int8
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=8 -DBKV=32 -DSTAGE=2 -DCAUSAL=0 \
    -DKVCACHE=1 -DKVLENS=1
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=8 -DBKV=32 -DSTAGE=2 -DCAUSAL=0 \
    -DKVCACHE=1 -DKVLENS=1 -DKV8=1
  # int8 in 64-key blocks (four steps' loads at once, fp16's 32-key bytes)
  check dmma "${dmma[@]}" -DDTYPE=$dt -DD=128 -DDV=128 -DBQ=8 -DBKV=64 -DCAUSAL=0 -DKVCACHE=1 \
    -DKVLENS=1 -DKV8=1
done
# The wgmma probe (tools/probe_wgmma.cl, issue 19): Hopper's wgmma needs PTX .target sm_90a,
# which clang here cannot emit, so its PTX is retargeted by hand; sm_90 must refuse it.
if clang -cl-std=CL1.2 -Xclang -finclude-default-header -target nvptx64-nvidia-cuda -march=sm_80 \
  -O2 -S -Dasm=__asm__ -include "$work/stubs.cl" -o "$work/wgmma.ptx" \
  "$(dirname "$0")/probe_wgmma.cl" 2>"$work/wgmma.log"; then
  for arch in sm_90a sm_90; do
    sed -e "s/^\.target sm_80/.target $arch/" -e 's/^\.version .*/.version 8.0/' "$work/wgmma.ptx" \
      >"$work/wgmma_$arch.ptx"
    if "$ptxas" -arch=$arch -c -o "$work/wgmma.o" "$work/wgmma_$arch.ptx" >"$work/wgmma.log" 2>&1
    then r=assembles; else r=refused; fi
    want=assembles
    [ $arch = sm_90 ] && want=refused
    if [ $r = $want ]; then echo "ok wgmma probe $arch: $r"; else
      echo "FAIL wgmma probe $arch: $r"; sed -n 1,10p "$work/wgmma.log"; fail=1; fi
  done
else
  echo "FAIL (clang) wgmma probe"; sed -n 1,20p "$work/wgmma.log"; fail=1
fi
# The dense mma.sync rate's kernel (tools/probe_mma_rate.cl), fp16 and bf16.
for bf in 0 1; do
  rate_src=$(cd "$(dirname "$0")" && pwd)/probe_mma_rate.cl
  if clang -cl-std=CL1.2 -Xclang -finclude-default-header -target nvptx64-nvidia-cuda \
    -march=sm_80 -O2 -S -Dasm=__asm__ -include "$work/stubs.cl" -DMMA_BF16=$bf \
    -o "$work/rate.ptx" "$rate_src" 2>"$work/rate.log" &&
    "$ptxas" -arch=sm_90 -v -c -o "$work/rate.o" "$work/rate.ptx" >"$work/rate.log" 2>&1; then
    echo "ok mma rate MMA_BF16=$bf: $(grep -oE 'Used [0-9]+ registers' "$work/rate.log")"
  else
    echo "FAIL mma rate MMA_BF16=$bf"; sed -n 1,10p "$work/rate.log"; fail=1
  fi
done
exit $fail
