#!/usr/bin/env bash
# Prepares .gpu/ (ignored by git) for a run on the device machine: the built `clattn` command and
# library, the NVIDIA ICD helper and the PyTorch peer script from ../shared. Name .gpu in the
# device call's carry, then run `bash tools/gpu-check.sh .gpu` there. BASE_BUILD_DIR (optional):
# a baseline build, packed into .gpu/base for the scripts that compare two (tools/gpu-plans.sh);
# BASE_KERNELS (optional, below): a baseline commit's kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
rm -rf .gpu && mkdir -p .gpu
cp "$build"/tools/clattn "$build"/tools/ptx_probe tools/probe_*.cl "$build"/libclattn.so* .gpu/
cp "$build"/tools/libclattn_host_shim.so .gpu/ 2>/dev/null || true # tools/host_shim.c
# Shared libraries the build links that the device machine lacks (its OpenCL loader is there).
for lib in $(ldd "$build"/libclattn.so | awk '/libcjson|libclblast/ {print $3}'); do cp -L "$lib" .gpu/; done
cp ../shared/gpu/nvidia-env.sh ../shared/peers/torch_sdpa.py tools/torch_padded.py \
  tools/torch_decode.py tools/gpu-decode-table.py .gpu/
git rev-parse --short HEAD > .gpu/commit
# BASE_KERNELS=REV: that commit's kernel text (cl/) in .gpu/basecl, for `tools/gpu-half.sh ab`
# (the same build, its kernels given by CLATTN_KERNEL_DIR: an A/B of kernel changes alone).
if [ -n "${BASE_KERNELS:-}" ]; then
  mkdir -p .gpu/basecl
  git archive "$BASE_KERNELS" cl | tar -x -C .gpu/basecl --strip-components=1
  # bwd_dq left cl/backward_mma_half.cl for a file of its own (e0408a7): a baseline from before
  # has it in the first, so an empty second keeps the embedded one from defining it twice.
  [ -e .gpu/basecl/backward_mma_half_dq.cl ] || : >.gpu/basecl/backward_mma_half_dq.cl
  # And the atomic dQ's helpers (DQ_ATOMIC), in a file of their own since stop 41.
  [ -e .gpu/basecl/backward_mma_half_atomic.cl ] || : >.gpu/basecl/backward_mma_half_atomic.cl
  # Likewise decode_mma's loads, in a file of their own since 4bf3308.
  [ -e .gpu/basecl/decode_mma_load.cl ] || : >.gpu/basecl/decode_mma_load.cl
  # The merge's launch is the host's (a work-group a row since f6af3f5): a baseline's merge.cl
  # would run under the wrong grid, so the packed build's own is used (merges are compared
  # between builds: BASE_BUILD_DIR).
  cp cl/merge.cl .gpu/basecl/merge.cl
  git rev-parse --short "$BASE_KERNELS" >.gpu/basecl/commit
fi
if [ -n "${BASE_BUILD_DIR:-}" ]; then
  mkdir -p .gpu/base
  cp "$BASE_BUILD_DIR"/tools/clattn "$BASE_BUILD_DIR"/libclattn.so* .gpu/base/
  git -C "$BASE_BUILD_DIR/.." rev-parse --short HEAD > .gpu/base/commit 2>/dev/null || true
fi
du -sh .gpu
