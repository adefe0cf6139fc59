#!/usr/bin/env bash
# On the device machine: the plans `clattn explain` gives DESIGN.md's shape list (and
# tests/golden/explain_extra_shapes.txt) with this build and with a baseline (DIR/base, from
# BASE_BUILD_DIR in tools/gpu-pack.sh), and their diff: a planner change shows what it moves.
# Then the forward and the fused backward of `clattn run` checked on the list with this build.
# Usage: tools/gpu-plans.sh DIR. Writes to $OUT (or ./gpu-out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
{ echo "commit $(cat "$dir/commit"), base $(cat "$dir/base/commit" 2>/dev/null || echo none)"
  nvidia-smi --query-gpu=name,driver_version --format=csv; } | tee "$out/env.txt"
lists=("$here/gpu-shapes.txt" "$here/../tests/golden/explain_extra_shapes.txt")
EXPLAIN_JOBS=4 "$here/explain-shapes.sh" "$cl" "${lists[@]}" >"$out/explain_new.txt" 2>&1
if [ -x "$dir/base/clattn" ]; then
  LD_LIBRARY_PATH="$dir/base:$LD_LIBRARY_PATH" EXPLAIN_JOBS=4 \
    "$here/explain-shapes.sh" "$dir/base/clattn" "${lists[@]}" >"$out/explain_old.txt" 2>&1
  diff "$out/explain_old.txt" "$out/explain_new.txt" >"$out/explain.diff"
  echo "explain: $(grep -c '^<' "$out/explain.diff") of $(wc -l <"$out/explain_old.txt") lines differ" \
    | tee -a "$out/env.txt"
fi

gpu_check_list forward 120 | tee -a "$out/env.txt"
gpu_check_list backward 120 --backward | tee -a "$out/env.txt"
