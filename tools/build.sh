#!/usr/bin/env bash
# Configures and builds clattn into ${BUILD_DIR:-build}; extra arguments go to CMake's configure
# step (tools/test.sh --sanitize passes its compiler flags this way).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
