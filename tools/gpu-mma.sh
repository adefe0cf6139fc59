#!/usr/bin/env bash
# On the device machine: forward_mma (NVIDIA tensor cores, 3xTF32) configs and build knobs
# side by side. Each combo is CONFIG or CONFIG@OPTIONS, OPTIONS being -D knobs of
# cl/forward_mma.cl joined by commas (e.g. forward_mma/128/32/1/1/1/4@-DFLUSH_S=2,-DPREFETCH=1).
# For each: registers and spills (-cl-nv-verbose) at d = 64 and 128, correctness over DESIGN.md's
# shapes (tools/gpu-shapes.txt), and timings beside the built-in default and PyTorch SDPA in the
# same call, at batch 16384/N, heads 2048/d.
# Usage: tools/gpu-mma.sh DIR (from tools/gpu-pack.sh); env COMBOS, NS (4096), CHECKED (the
# number of combos, from the first, run over the shape list; all by default), NO_TORCH (set: no
# PyTorch timings). Writes to $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
combos=${COMBOS:-forward_mma/128/32/1/1/1/4}
ns=${NS:-4096}
echo "commit $(cat "$dir/commit")" >"$out/env.txt"
shapes=$(grep -v "^#" "$(dirname "$0")/gpu-shapes.txt")
n=0
for combo in $combos; do
  cfg=${combo%%@*} opts=""
  [ "$combo" != "$cfg" ] && opts=${combo#*@} && opts=${opts//,/ }
  export CLATTN_BUILD_OPTIONS="$opts"
  for d in 64 128; do
    CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS="$opts -cl-nv-verbose" "$cl" run --head-dim $d \
      --seqlen 256 --config "$cfg" --repeat 0 2>&1 | grep -iE "registers|spill|error|clattn:" |
      sed "s|^|$combo d=$d: |" >>"$out/nv_verbose.txt"
  done
  n=$((n + 1))
  if [ "$n" -le "${CHECKED:-99}" ]; then
    pass=0 fail=0 skip=0
    while read -r b hq hkv nq nkv d dv f lay off; do
      args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv --head-dim $d
        --head-dim-v $dv --layout $lay --offset $off --lse --repeat 0 --warmup 0)
      [ "$f" = c ] && args+=(--causal)
      args+=(--config $cfg)
      "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1
      rc=$?
      # A head dim the vector width does not divide: the same combo with scalar loads.
      if grep -q "override rejected: vector width" "$out/run.tmp"; then
        args[-1]=${cfg%/*}/1
        "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1
        rc=$?
      fi
      # A shape the combo cannot run (its tiles do not fit it) is skipped, not failed.
      if grep -qE "override rejected|override does not fit" "$out/run.tmp"; then skip=$((skip + 1)) r=SKIP
      elif [ $rc = 0 ]; then pass=$((pass + 1)) r=PASS
      else fail=$((fail + 1)) r=FAIL; fi
      echo "$r $combo ${args[*]:0:20} | $(grep -E 'check:|clattn:' "$out/run.tmp" |
        head -2 | tr '\n' ' ')" >>"$out/correctness.txt"
    done <<<"$shapes"
    echo "$combo: $pass passed, $fail failed, $skip skipped (tiles that do not fit)" >>"$out/correctness.txt"
  fi
  for d in 64 128; do for nn in $ns; do for c in 0 1; do
    base=(--batch $((16384 / nn)) --heads $((2048 / d)) --seqlen $nn --head-dim $d --no-check
      --warmup 3 --repeat 10 --layout bhsd)
    [ $c = 1 ] && base+=(--causal)
    t=$("$cl" run "${base[@]}" --config "$cfg" 2>&1 | grep -E 'time:|clattn:' | tr '\n' ' ')
    echo "d=$d n=$nn causal=$c $combo: $t" >>"$out/timing.txt"
  done; done; done
done
unset CLATTN_BUILD_OPTIONS
for d in 64 128; do for nn in $ns; do for c in 0 1; do
  base=(--batch $((16384 / nn)) --heads $((2048 / d)) --seqlen $nn --head-dim $d --no-check
    --warmup 3 --repeat 10 --layout bhsd)
  [ $c = 1 ] && base+=(--causal)
  echo "d=$d n=$nn causal=$c default: $("$cl" run "${base[@]}" 2>&1 | grep -E 'time:|config:|clattn:' |
    tr '\n' ' ')" >>"$out/timing.txt"
done; done; done
rm -f "$out/run.tmp"
[ -n "${NO_TORCH:-}" ] || timeout 200 python3 "$dir/torch_sdpa.py" --dtype float32 --d 64,128 --n "${ns// /,}" \
  --causal 0,1 >"$out/torch.txt" 2>&1
