#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (Criterion cases through CTest) on the
# default OpenCL device: PoCL on the CPU where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
tools/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
