#!/usr/bin/env bash
# On the device machine, after a change to the runtime (no timings worth quoting): DESIGN.md's
# shape list through `clattn run`, forward and backward (both algorithms), a dry-run tune of each
# pass (the tuners' correctness gate must crown something on real tensor cores) and one bench
# row (exit status 0). Usage: tools/gpu-sanity.sh DIR (DIR from tools/gpu-pack.sh); writes
# sanity.txt to $OUT and prints its summary lines.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
log=$out/sanity.txt
gpu_env_header >"$log"
pass=0 fail=0
while read -r b hq hkv nq nkv d dv f lay off; do
  args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv --head-dim $d
    --head-dim-v $dv --layout $lay --offset $off --lse --repeat 0 --warmup 0)
  [ "$f" = c ] && args+=(--causal)
  for extra in "" "--backward" "--backward --algorithm standard"; do
    if "$cl" run "${args[@]}" $extra >"$out/run.tmp" 2>&1; then pass=$((pass + 1)); r=PASS
    else fail=$((fail + 1)); r=FAIL; fi
    echo "$r ${args[*]} $extra | $(grep -E 'check|clattn:' "$out/run.tmp" | head -1)" >>"$log"
  done
done <<<"$(grep -v "^#" "$(dirname "$0")/gpu-shapes.txt")"
echo "runs: $pass passed, $fail failed" | tee -a "$log"
for pass_flag in "" --backward; do
  "$cl" tune --head-dims 64,128 --causal-list 0,1 --seqlens 1024 --dry-run --budget 60 --quiet \
    $pass_flag >"$out/tune.tmp" 2>&1
  echo "tune $pass_flag: exit $?" | tee -a "$log"
  cat "$out/tune.tmp" >>"$log"
done
"$cl" bench --seqlen 2048 --head-dim 128 --heads 16 --causal on --warmup 1 --repeat 3 >>"$log" 2>&1
echo "bench: exit $?" | tee -a "$log"
rm -f "$out/run.tmp" "$out/tune.tmp"
