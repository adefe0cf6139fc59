#!/usr/bin/env bash
# Installs what is missing, builds, lists the OpenCL devices and runs one attention problem on
# the default device ($CLATTN_DEVICE, else the first GPU, else the first device), checked
# against the host reference: the device, the tiles chosen and why, time and GFLOP/s.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
tools/build.sh
build=${BUILD_DIR:-build}
"$build"/tools/clattn devices
echo
"$build"/tools/clattn run --batch 1 --heads 8 --seqlen 1024 --head-dim 64 --causal --lse "$@"
