#!/usr/bin/env bash
# fp32, fp16 and bf16 storage timed against each other with the same forced config, so that
# only the storage differs (docs/BENCHMARKS.md, "Half storage on PoCL"): `clattn run --no-check`
# at d = 64 and 128, N = 512 and 1024, B = 1, H = 2, the three dtypes in turn, ROUNDS rounds after
# an untimed one; prints one line per call ("round d=.. n=.. dtype median_ms") and then, per
# shape, the median over rounds and its ratio to fp32. Fresh caches, none of the user's.
#   tools/bench-dtypes.sh [CLATTN_BIN] [ROUNDS]   (build/tools/clattn, 5)
set -uo pipefail
cl=${1:-$(dirname "$0")/../build/tools/clattn}
rounds=${2:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-dtypes.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT
export CLATTN_CACHE_DIR=$tmp/cache CLATTN_TUNING_DB= POCL_CACHE_DIR=$tmp/pocl
# The fp32 built-in configs of PoCL's d = 64 and 128 classes (runtime/plan/builtin.c).
shapes=("64 512 forward_tiles/128/32/1/1/1/0/1" "64 1024 forward_tiles/128/32/1/1/1/0/1"
  "128 512 forward_tiles/64/64/2/1/1/1/1" "128 1024 forward_tiles/64/64/2/1/1/1/1")
for round in $(seq 0 "$rounds"); do
  for shape in "${shapes[@]}"; do
    read -r d n cfg <<<"$shape"
    for dt in f32 f16 bf16; do
      t=$("$cl" run --batch 1 --heads 2 --seqlen "$n" --head-dim "$d" --dtype $dt --config "$cfg" \
        --no-check --warmup 2 --repeat 10 2>&1 | grep -oE 'median [0-9.]+' | awk '{print $2}')
      echo "$round d=$d n=$n $dt ${t:-failed}"
    done
  done
done | tee "$tmp/times.txt"
# Medians over rounds 1.., and each half type's ratio to fp32.
awk '$1 > 0 && $5 != "failed" { k = $2 " " $3; v[k, $4, ++n[k, $4]] = $5; keys[k] = 1 }
  function med(k, t,   c, i, j, a, x) {
    c = n[k, t]; for (i = 1; i <= c; i++) a[i] = v[k, t, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    return a[int((c + 1) / 2)] }
  END { for (k in keys) { f = med(k, "f32"); printf "%s  f32 %.3f  f16 %.3f (%.3f)  bf16 %.3f (%.3f)\n",
    k, f, med(k, "f16"), med(k, "f16") / f, med(k, "bf16"), med(k, "bf16") / f } }' "$tmp/times.txt" | sort
