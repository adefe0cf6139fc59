#!/usr/bin/env bash
# The plan `clattn explain` gives every shape of DESIGN.md's list (tools/gpu-shapes.txt), one
# stable line per shape, for a golden file (tests/golden/explain_*.txt; CTest
# plan/explain_matches_golden) that shows a change to the planner keeps its plans.
#   tools/explain-shapes.sh [--header] CLATTN_BIN [SHAPES_FILE...]
# (default: tools/gpu-shapes.txt; several files are explained as one list, in order; the
# golden's are tools/gpu-shapes.txt and tests/golden/explain_extra_shapes.txt). --header: the
# device header alone (one explain of a 1x1 problem with d = 1, a second or two on PoCL).
# Line 1 is the device header: the device summary less its global-memory field (name, vendor,
# driver, platform, compute units, local memory), which a golden applies to. Then per shape:
# the problem, the algorithm, the fused kernel and every config field, work-items, origin,
# sequence-length bucket, local memory used, kv splits, the backward's config and origin, the
# modelled traffic of both plans (plan-determined) and the standard plan's split over
# batch*heads (under a fixed CLATTN_WORKSPACE_LIMIT, so the machine's RAM does not enter).
# Not printed: timing, the reason text, FLOPs, the IO bound, the illegal-tile list.
# Every cache and database is a fresh temporary folder (under $TMPDIR), removed at exit. Runs
# the shapes ${EXPLAIN_JOBS:-$(nproc)} at a time. Exit: 0, or 2 on a usage error, 3 when the
# device header cannot be read. A shape that explain rejects prints its exit status and
# message instead of a plan (still a stable line), and does not change the exit status.
set -uo pipefail
header_only=0
[ "${1:-}" = --header ] && header_only=1 && shift
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 [--header] CLATTN_BIN [SHAPES_FILE...]  (CLATTN_BIN must be executable)" >&2
  exit 2
fi
cl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
[ $# -gt 0 ] || set -- "$(dirname "$0")/gpu-shapes.txt"
for f in "$@"; do [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 2; }; done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/explain-shapes.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT
# Nothing of the user's: caches, database, PoCL's kernel cache. Nothing that changes kernels or
# plans either (kernel folder, build options, tensor-core emulation); the device stays the
# caller's choice (CLATTN_DEVICE), and the header names it.
export CLATTN_CACHE_DIR=$tmp/cache CLATTN_TUNING_DB=$tmp/tuning.json POCL_CACHE_DIR=$tmp/pocl \
  XDG_CACHE_HOME=$tmp/xdg CLATTN_WORKSPACE_LIMIT=268435456
unset CLATTN_KERNEL_DIR CLATTN_BUILD_OPTIONS CLATTN_BUILD_LOG CLATTN_MMA_EMULATE
mkdir -p "$tmp/out"

# One shape: its line into $tmp/out/NNN, its device line into $tmp/dev.NNN. Arguments: index,
# then the shape list's columns (layout and offset, the last two, do not change a plan and
# explain takes neither).
one() {
  local i=$1 b=$2 hq=$3 hkv=$4 nq=$5 nkv=$6 d=$7 dv=$8 f=$9
  local causal=0 label
  [ "$f" = c ] && causal=1
  label="b=$b hq=$hq hkv=$hkv nq=$nq nkv=$nkv d=$d dv=$dv causal=$causal"
  local args=(--batch "$b" --heads "$hq" --heads-kv "$hkv" --seqlen-q "$nq" --seqlen-kv "$nkv"
    --head-dim "$d" --head-dim-v "$dv")
  [ "$f" = c ] && args+=(--causal)
  local txt rc
  txt=$("$cl" explain "${args[@]}" 2>"$tmp/err.$i")
  rc=$?
  sed -n 's/^device: *//p' <<<"$txt" >"$tmp/dev.$i"
  if [ $rc -ne 0 ]; then
    echo "$label | error: exit $rc: $(grep -m1 'clattn' "$tmp/err.$i" | tr -s ' ')" >"$tmp/out/$i"
    return
  fi
  # Field by field from the explain text (tools/cmd_explain.c); a field missing prints "?".
  awk -v label="$label" '
    function field(name) { return (name in f) ? f[name] : "?" }
    /^algorithm: / { f["algo"] = $2 }
    /^class: / { if (match($0, /bucket [0-9]+/)) f["bucket"] = substr($0, RSTART + 7, RLENGTH - 7) }
    /^config: / {
      f["kernel"] = $2
      cfg = $3; for (k = 4; k <= 9; k++) cfg = cfg " " $k
      sub(/,$/, "", cfg); f["cfg"] = cfg; f["wi"] = $10
    }
    /^origin: / { f["origin"] = $2 }
    /^why: / {
      f["splits"] = 1
      if (match($0, /keys split into [0-9]+ ranges of [0-9]+/)) {
        s = substr($0, RSTART, RLENGTH); n = split(s, w, " "); f["splits"] = w[4] "x" w[7]
      }
    }
    /^local: / { f["local"] = $2 "KiB" }
    /^backward: / { f["bwd"] = $2 " " $3 " " $4 " " $5 }
    /^  fused: / { f["fused"] = "r=" $3 " w=" $6 }
    /^  standard: / { f["std"] = "r=" $3 " w=" $6 }
    /^standard: / {
      if ($2 == "cannot") f["chunk"] = "none"
      else f["chunk"] = $2 " ws=" $7
    }
    END {
      line = label " | " field("algo")
      if ("kernel" in f)
        line = line " | " field("kernel") " " field("cfg") " wi=" field("wi") " origin=" \
               field("origin") " bucket=" field("bucket") " local=" field("local") \
               " splits=" field("splits") " | bwd " field("bwd") " | fused " field("fused")
      else
        line = line " | no fused plan"
      print line " | standard " field("std") " chunk=" field("chunk")
    }' <<<"$txt" >"$tmp/out/$i"
}
export -f one
export cl tmp

if [ $header_only = 1 ]; then
  echo "1 1 0 1 1 1 0 - bshd 0" >"$tmp/header-shape"
  set -- "$tmp/header-shape"
fi
cat "$@" | grep -v '^#' | grep -v '^[[:space:]]*$' | awk '{ printf "%03d %s\n", NR, $0 }' |
  xargs -P "${EXPLAIN_JOBS:-$(nproc)}" -L 1 bash -c 'one "$@"' _
# The header: the device line of the shapes explained (all the same device: one line).
hdr=$(cat "$tmp"/dev.* 2>/dev/null | sort -u)
if [ -z "$hdr" ] || [ "$(wc -l <<<"$hdr")" -ne 1 ]; then
  echo "$0: no single device line from $cl explain:" >&2
  cat "$tmp"/err.* >&2
  exit 3
fi
echo "device: ${hdr% | global*}"
[ $header_only = 1 ] || cat "$tmp"/out/*
