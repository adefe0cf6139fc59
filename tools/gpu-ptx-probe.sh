#!/usr/bin/env bash
# On the device machine (issue 19), the PTX probes (tools/ptx_probe.c, packed by
# tools/gpu-pack.sh with tools/probe_*.cl):
# - does NVIDIA's OpenCL reach Hopper's wgmma through inline PTX? The .version/.target lines of
#   the PTX the compiler emits; a one-warpgroup wgmma.mma_async kernel (probe_wgmma.cl) built
#   with no option and with -cl-nv-arch sm_90a (and sm_90), each build log, and a run of what
#   builds (D = A B over ones: 16 everywhere is right);
# - the dense mma.sync m16n8k16 rate in fp16 and bf16 (probe_mma_rate.cl), the yardstick of the
#   tensor-core kernels' achieved rate.
# tools/ptx-check.sh checks offline that both kernels assemble (the wgmma one for sm_90a only).
# Usage: tools/gpu-ptx-probe.sh DIR (from tools/gpu-pack.sh). Writes $OUT/ptx_probe.txt.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
{
  gpu_env_header
  timeout 180 "$dir/ptx_probe" "$dir/probe_wgmma.cl" "$dir/probe_mma_rate.cl" NVIDIA
  echo "exit $?"
} 2>&1 | tee "$out/ptx_probe.txt"
