#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages clattn needs to build and test, when any is missing.
# Sourced or run by tools/test.sh and tools/quickstart.sh; `tools/deps.sh --fuzz` (tools/fuzz.sh)
# adds clang and its sanitizer and libFuzzer runtimes, which the plain build does not need.
set -euo pipefail
packages=(build-essential cmake pkg-config ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
  libcriterion-dev libcjson-dev libclblast-dev libopenblas-dev gnuplot-nox)
[ "${1:-}" != "--fuzz" ] || packages+=(clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "clattn: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
