#!/usr/bin/env bash
# Tests of tools/layers.sh on tiny fixtures compiled into folders laid out as CMake lays out the
# runtime's objects (runtime/<layer>/<file>.c.o, the generated object at the top), so that a
# checker that passes everything, or fails everything, is caught before it guards the runtime.
#   tests/layers/selftest.sh [WORK]   WORK: a scratch folder (default: a new temporary one)
# CC and NM name the compiler and nm (CTest passes CMake's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
checker=$here/../../tools/layers.sh
cc=${CC:-cc}
if [ $# -ge 1 ]; then work=$1; rm -rf "$work"; mkdir -p "$work"; else work=$(mktemp -d); fi
failures=0

# arrange DIR [SRC:FLAGS ...]: the clean layout in DIR, with SRC (a fixture's name) compiled
# with FLAGS instead; a fixture's object path can be changed with SRC:FLAGS:PATH.
arrange() {
  local dir=$work/$1 spec src flags path; shift
  declare -A flags_of=() path_of=()
  for spec in "$@"; do
    IFS=: read -r src flags path <<<"$spec"
    flags_of[$src]=$flags; [ -z "$path" ] || path_of[$src]=$path
  done
  rm -rf "$dir"
  for spec in core:runtime/core/core.c.o kernels:clattn_kernels.c.o \
              plan_b:runtime/plan/plan_b.c.o plan_c:runtime/plan/plan_c.c.o \
              context:runtime/context.c.o; do
    src=${spec%%:*}; path=${path_of[$src]:-${spec#*:}}
    mkdir -p "$(dirname "$dir/$path")"
    # shellcheck disable=SC2086  # the flags are words
    "$cc" -c -O0 ${flags_of[$src]:-} -o "$dir/$path" "$here/$src.c"
  done
}

# expect NAME RC TEXT ARGS...: layers.sh ARGS exits RC and prints a line holding TEXT.
expect() {
  local name=$1 want=$2 text=$3 rc=0 out; shift 3
  out=$("$checker" "$@" 2>&1) || rc=$?
  if [ "$rc" != "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    printf 'FAIL %s: wanted exit %s and "%s", got exit %s:\n%s\n' "$name" "$want" "$text" \
      "$rc" "$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

arrange clean
expect clean 0 "clean: 5 files in 3 layer(s), 4 edges between files, no cycles" "$work/clean"

arrange upward core:-DUPWARD
expect upward 1 \
  "runtime/core/core.c (core) uses plan_b from runtime/plan/plan_b.c (plan)" "$work/upward"

arrange cycle plan_c:-DCYCLE
expect cycle 1 \
  "cycle: runtime/plan/plan_b.c -> runtime/plan/plan_c.c -> runtime/plan/plan_b.c" "$work/cycle"
# A cycle inside one layer is no upward reference: the report must not invent one.
if "$checker" "$work/cycle" 2>&1 | grep -q ') uses .* from .* ('; then
  echo "FAIL cycle: reported as an upward reference"; failures=$((failures + 1))
fi

arrange unknown plan_c::runtime/misc/plan_c.c.o
expect unknown_folder 1 "runtime/misc/plan_c.c: runtime/misc/ is not a layer" "$work/unknown"

# A source that moved leaves its old object behind: the folder then defines plan_b twice.
arrange moved
cp "$work/moved/runtime/plan/plan_b.c.o" "$work/moved/runtime/plan_b.c.o"
expect moved_whole_folder 2 "both define plan_b" "$work/moved"
mapfile -t current < <(find "$work/moved" -name '*.o' ! -path '*/runtime/plan_b.c.o')
expect moved_objects_named 0 "clean: 5 files" "$work/moved" "${current[@]}"
expect object_outside 2 "not under" "$work/clean" "$work/moved/runtime/plan_b.c.o"

mkdir -p "$work/empty"
expect no_objects 2 "no objects" "$work/empty"
expect no_arguments 2 "usage:"

[ $# -ge 1 ] || rm -rf "$work"
[ $failures = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "layers.sh: all cases pass"
