#!/usr/bin/env bash
# On the device machine (issue 19): does NVIDIA's OpenCL reach Hopper's wgmma through inline PTX?
# The wgmma probe (tools/wgmma_probe.c on tools/probe_wgmma.cl, packed by tools/gpu-pack.sh)
# prints the .version/.target lines of the PTX the compiler emits, builds a one-warpgroup
# wgmma.mma_async kernel with no option and with -cl-nv-arch sm_90a (and sm_90), with each build
# log, and runs what builds (D = A B over ones: 16 everywhere is right). tools/ptx-check.sh
# checks offline that the kernel's PTX assembles for sm_90a and is refused for sm_90.
# Usage: tools/gpu-wgmma-probe.sh DIR (from tools/gpu-pack.sh). Writes $OUT/wgmma_probe.txt.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
{
  gpu_env_header
  timeout 120 "$dir/wgmma_probe" "$dir/probe_wgmma.cl" NVIDIA
  echo "exit $?"
} 2>&1 | tee "$out/wgmma_probe.txt"
