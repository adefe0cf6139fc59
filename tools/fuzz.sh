#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan and UBSan) in ${BUILD_DIR:-build-fuzz}
# and runs each for ${FUZZ_SECONDS:-60} seconds from its committed seed corpus, copied to a
# temporary folder so the committed one does not grow. Fails when any target crashes, leaks,
# times out on an input or runs out of memory; the input that did it is kept in
# ${FUZZ_ARTIFACTS:-$BUILD_DIR/fuzz-artifacts} (rerun: $BUILD_DIR/tests/fuzz/fuzz_<target> FILE).
#   tools/fuzz.sh [target...]   targets: tunedb bincache validate (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh --fuzz
build=${BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tunedb bincache validate)
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCLATTN_FUZZ=ON -DCLATTN_BUILD_TESTS=OFF \
  -DCLATTN_BUILD_TOOLS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

# The tunedb target writes each input to a file: tmpfs when there is one is ten times faster.
scratch_root=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && scratch_root=/dev/shm
work=$(mktemp -d "$scratch_root/clattn-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
artifacts=${FUZZ_ARTIFACTS:-$PWD/$build/fuzz-artifacts}
mkdir -p "$artifacts" "$work/pocl"
# PoCL, LLVM and the OpenCL loader keep allocations to exit (tests/sanitize.supp names only
# those libraries); the targets' own leaks are reported.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_odr_violation=0:quarantine_size_mb=64}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitize.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TMPDIR=$work POCL_CACHE_DIR=$work/pocl CLATTN_CACHE_DIR="" CLATTN_TUNING_DB=""

# The targets run side by side, as many at once as the machine has cores (each is one process):
# on CI's 2 cores 3 targets take 2 slots of the time, not 3.
slots=$(nproc)
run_one() {
  local t=$1 corpus=$work/corpus-$1 log=$work/$1.log dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  # -timeout: no input of these checks needs a second. The largest seed sets -max_len (a
  # program-cache entry must fit whole).
  # (Its status goes to a file, never to errexit: a failing target once ended this script
  # silently, through `wait -n` below, before its report.)
  local rc=0
  "$build/tests/fuzz/fuzz_$t" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" >"$log" 2>&1 || rc=$?
  echo $rc >"$work/$t.rc"
}
for t in "${targets[@]}"; do
  cp -r "tests/fuzz/corpus/$t" "$work/corpus-$t"
  echo "fuzz: $t for ${seconds} s from $(ls "$work/corpus-$t" | wc -l) seeds" >&2
  while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do wait -n || true; done
  run_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  log=$work/$t.log
  if [ "$(cat "$work/$t.rc" 2>/dev/null)" = 0 ]; then
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" |
      sed "s/^/fuzz: $t: /" >&2 || true
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | sed "s/^/fuzz: $t: /" >&2 || true
  else
    tail -n 60 "$log" >&2
    echo "fuzz: $t FAILED; the input is in $artifacts/$t-*" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds} s each, nothing found" >&2
