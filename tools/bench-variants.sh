#!/usr/bin/env bash
# Each variant's cost against the plain problem on the same shape, where the variant removes no
# work: softcap 30, ALiBi, sinks, seqlens_kv and CLATTN_VARLEN with every length the full one
# (so the same pairs are computed), forward and backward, `clattn run --no-check` in turns for
# ROUNDS rounds after an untimed one. Prints one line per call, then per pass the median over
# rounds of each call's median (OpenCL events) and its ratio to plain. Fresh caches, none of the
# user's; on the device machine the scripts' cache stays.
#   tools/bench-variants.sh [CLATTN_BIN] [ROUNDS] [clattn run problem options...]
#   (build/tools/clattn, 3, --batch 1 --heads 4 --seqlen 512 --head-dim 64)
set -uo pipefail
cl=${1:-$(dirname "$0")/../build/tools/clattn}
rounds=${2:-3}
shift 2 2>/dev/null || shift $#
shape=("$@")
[ ${#shape[@]} -eq 0 ] && shape=(--batch 1 --heads 4 --seqlen 512 --head-dim 64)
if [ -z "${CLATTN_CACHE_DIR:-}" ]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-variants.XXXXXX") || exit 3
  trap 'rm -rf "$tmp"' EXIT
  export CLATTN_CACHE_DIR=$tmp/cache POCL_CACHE_DIR=$tmp/pocl
fi
export CLATTN_TUNING_DB=
# The full lengths, one per batch entry, for the length variants.
batch=1 n=1024
for ((i = 0; i < ${#shape[@]}; i++)); do
  case ${shape[i]} in
  --batch) batch=${shape[i + 1]} ;;
  --seqlen | --seqlen-kv) n=${shape[i + 1]} ;;
  esac
done
full=$(printf "$n%.0s," $(seq 1 "$batch"))
full=${full%,}
variants=(plain "--softcap 30" --alibi --sinks "--seqlens-kv --lengths $full"
  "--varlen --lengths $full")
for round in $(seq 0 "$rounds"); do
  for pass in forward backward; do
    for v in "${variants[@]}"; do
      t=$("$cl" run "${shape[@]}" $([ $pass = backward ] && echo --backward) --no-check \
        --warmup 2 --repeat 10 ${v/plain/} 2>&1 | grep -oE 'median [0-9.]+' | awk '{print $2}')
      echo "$round $pass $(echo "$v" | cut -d' ' -f1) ${t:-failed}"
    done
  done
done | tee "${OUT_FILE:-/dev/null}" | awk '{ print } $1 > 0 && $4 != "failed" {
    k = $2; v[k, $3, ++n[k, $3]] = $4; keys[k] = 1; names[$3] = 1 }
  function med(k, t,   c, i, j, a, x) {
    c = n[k, t]; for (i = 1; i <= c; i++) a[i] = v[k, t, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    return a[int((c + 1) / 2)] }
  END { for (k in keys) { p = med(k, "plain"); printf "%s: plain %.3f ms", k, p
      for (t in names) if (t != "plain" && n[k, t]) printf ", %s %.3f", t, med(k, t) / p
      printf "\n" } }'
