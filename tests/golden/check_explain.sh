#!/usr/bin/env bash
# CTest plan/explain_matches_golden: the plans `clattn explain` gives DESIGN.md's shapes and a
# few more (tools/explain-shapes.sh) must equal the golden file line for line. A golden made on
# another device (its first line, the device header, differs) does not apply: exit 77, which
# CTest reports as skipped (SKIP_RETURN_CODE), with both headers.
#   tests/golden/check_explain.sh CLATTN_BIN GOLDEN [SHAPES_FILE...]
# Regenerate, on the golden's device, with the binary whose plans are the reference:
#   tools/explain-shapes.sh build/tools/clattn tools/gpu-shapes.txt \
#     tests/golden/explain_extra_shapes.txt > tests/golden/explain_pocl.txt
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 CLATTN_BIN GOLDEN [SHAPES_FILE...]" >&2; exit 2; }
cl=$1 golden=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -r "$golden" ] || { echo "FAIL: cannot read the golden file $golden" >&2; exit 1; }
actual=$(mktemp "${TMPDIR:-/tmp}/explain-actual.XXXXXX") || exit 1
trap 'rm -f "$actual"' EXIT
# The device header first (one small explain), so that another device skips in seconds.
want=$(head -n 1 "$golden")
if ! have=$("$root/tools/explain-shapes.sh" --header "$cl"); then
  echo "FAIL: tools/explain-shapes.sh --header printed no device header" >&2
  exit 1
fi
if [ "$want" != "$have" ]; then
  printf 'SKIP: the golden is for another device\n  golden: %s\n  here:   %s\n' "$want" "$have"
  exit 77
fi
"$root/tools/explain-shapes.sh" "$cl" "$@" >"$actual"
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: tools/explain-shapes.sh exited $rc" >&2
  exit 1
fi
if ! diff -u --label "golden $golden" --label "this build ($cl)" "$golden" "$actual"; then
  d=$(diff "$golden" "$actual")
  echo "FAIL: the plans differ from the golden: $(grep -c '^<' <<<"$d") golden line(s) not" \
    "produced, $(grep -c '^>' <<<"$d") line(s) instead (above: - golden, + this build)"
  exit 1
fi
echo "ok: $(($(wc -l <"$actual") - 1)) shapes, the same plans as $golden"
