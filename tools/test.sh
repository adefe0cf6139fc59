#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (Criterion cases through CTest) on the
# default OpenCL device: PoCL on the CPU where there is no GPU.
#   tools/test.sh [ctest args]             the suite, in ${BUILD_DIR:-build}
#   tools/test.sh --sanitize [ctest args]  the suite under ASan and UBSan, in build-sanitize,
#                                          less the suites that run the forward's shape list
#                                          again on other kernels (forward_mma,
#                                          forward_mma_half, forward_rows, tiles;
#                                          backward_mma, backward_mma_half,
#                                          backward_half and standard_backward_half
#                                          the backward's; variants and varlen, whose host code
#                                          suite extended runs): their host code
#                                          is the forward's and backward's, and CI's 30 minutes
#                                          on 2 cores have no room for them twice
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
if [ "${1:-}" = "--sanitize" ]; then
  shift
  export BUILD_DIR=${BUILD_DIR:-build-sanitize}
  flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  # The plain build's PoCL kernel cache, where it has one (.ci/run runs the plain suite first):
  # the same kernels, not compiled again (tests/CMakeLists.txt's CLATTN_TEST_POCL_CACHE).
  pocl_cache=$PWD/${PLAIN_BUILD_DIR:-build}/tests/tmp/pocl
  [ -d "$pocl_cache" ] || pocl_cache=$PWD/$BUILD_DIR/tests/tmp/pocl
  tools/build.sh "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" \
    "-DCLATTN_TEST_POCL_CACHE=$pocl_cache"
  # PoCL and LLVM keep allocations to process exit, which LeakSanitizer would report as leaks of
  # ours; tests/sanitize.supp names only those libraries. UBSan stops at the first error.
  # intercept_tls_get_addr=0: up to GCC 13 the runtime's __tls_get_addr interceptor takes a
  # dynamic TLS block that happens to start 16 bytes into a page for a pre-2.25 glibc header and
  # reads the words before it as a range, so LeakSanitizer's tracer segfaults at exit ("Tracer
  # caught signal 11") now and then, a failure that reports no leak (PoCL's LLVM allocates such
  # blocks; CI failed so in cli/commands once). Static TLS and every thread's stack are still
  # scanned.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_odr_violation=0:intercept_tls_get_addr=0}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitize.supp:print_suppressions=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  cd "$BUILD_DIR"
  # The selftests rerun the suites on broken kernels (the plain run has them): minutes, no new
  # host code; so do the suites that force one more kernel through the forward's host path
  # (forward_rows, tiles, forward_naive, the mma ones) and the forward shape list on the
  # standard path (standard_backward runs its host code), the plan golden (explain of the
  # shape list), the layering check (nm, no code run) and the PTX check (clang and ptxas on the
  # kernels, no host code). The package test builds a consumer
  # without the sanitizer's runtime, which an instrumented library cannot be loaded into. The
  # atomic-dQ backward's cases are emulated kernels too: its tuner case (host code that once
  # wrote past a buffer) and its fallback to the two kernels (a replan) stay.
  exec ctest --output-on-failure -j"$(nproc)" \
    -E '^(forward_mma|forward_mma_half|forward_half|backward_mma|backward_mma_half|backward_half|standard_backward_half|forward_rows|tiles|forward_naive|standard|variants|varlen|selftest|plan|layers|package|ptx)/|^backward_atomic/b?f16_' "$@"
fi
tools/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
