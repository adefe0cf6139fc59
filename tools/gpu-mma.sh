#!/usr/bin/env bash
# On the device machine: the forward_mma variant (NVIDIA tensor cores, 3xTF32). Registers and
# spills from -cl-nv-verbose; correctness over DESIGN.md's shapes for three configs; timings of
# several configs beside the built-in default and PyTorch SDPA in the same call.
# Usage: tools/gpu-mma.sh DIR [quick|mid] (DIR from tools/gpu-pack.sh). Writes to $OUT.
set -uo pipefail
dir=$(cd "${1:-.gpu}" && pwd)
out=${OUT:-gpu-out}
mkdir -p "$out"
source "$dir/nvidia-env.sh"
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CLATTN_CACHE_DIR=/tmp/clattn-cache CLATTN_DEVICE=${CLATTN_DEVICE:-NVIDIA}
cl="$dir/clattn"
echo "commit $(cat "$dir/commit")" >"$out/env.txt"
for d in ${NV_DIMS-64 128 256}; do
  bkv=32; [ $d = 256 ] && bkv=16
  CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS=-cl-nv-verbose "$cl" run --head-dim $d --seqlen 256 \
    --config forward_mma/64/$bkv/1/1/1/1 --repeat 0 2>&1 |
    grep -iE "registers|spill|stack|error|check:|clattn:" | sed "s/^/d=$d: /" >>"$out/nv_verbose.txt"
done
shapes=$(grep -v "^#" "$(dirname "$0")/gpu-shapes.txt") # DESIGN.md's list
cfgs=${MMA_CFGS:-"forward_mma/64/16/1/1/1/1 forward_mma/16/8/1/1/0/1 forward_mma/128/32/1/1/1/1"}
[ "${2:-}" = mid ] && cfgs=${MMA_CFGS:-forward_mma/64/16/1/1/1/1}
for cfg in $cfgs; do
  pass=0 fail=0
  while read -r b hq hkv nq nkv d dv f lay off; do
    args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv --head-dim $d
      --head-dim-v $dv --layout $lay --offset $off --lse --repeat 0 --warmup 0 --config $cfg)
    [ "$f" = c ] && args+=(--causal)
    if "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then pass=$((pass + 1)); r=PASS
    else fail=$((fail + 1)); r=FAIL; fi
    echo "$r $cfg ${args[*]:0:20} | $(grep -E 'check:|clattn:|  ' "$out/run.tmp" | head -2 | tr '\n' ' ')" >>"$out/correctness.txt"
  done <<<"$shapes"
  echo "$cfg: $pass passed, $fail failed" | tee -a "$out/correctness.txt"
done
rm -f "$out/run.tmp"
[ "${2:-}" = quick ] && exit 0
ns="1024 4096 16384"; cfgs="default forward_mma/64/32/1/1/1/1 forward_mma/64/32/1/1/1/4"
cfgs="$cfgs forward_mma/128/32/1/1/1/4 forward_mma/64/64/1/1/1/4 forward_mma/128/16/1/1/1/4"
[ "${2:-}" = mid ] && ns=4096 && cfgs="default forward_mma/64/32/1/1/1/4 forward_mma/128/32/1/1/1/4"
for d in 64 128; do for n in $ns; do for c in 0 1; do
  base=(--batch $((16384 / n)) --heads $((2048 / d)) --seqlen $n --head-dim $d --no-check
    --warmup 3 --repeat 10 --layout bhsd)
  [ $c = 1 ] && base+=(--causal)
  for cfg in $cfgs; do
    extra=(); [ $cfg != default ] && extra=(--config $cfg)
    echo "d=$d n=$n causal=$c $cfg: $("$cl" run "${base[@]}" "${extra[@]}" 2>&1 | grep -E 'time:|clattn:' | tr '\n' ' ')" >>"$out/timing.txt"
  done
done; done; done
timeout 200 python3 "$dir/torch_sdpa.py" --dtype float32 --d 64,128 --n "${ns// /,}" \
  --causal 0,1 >"$out/torch.txt" 2>&1
