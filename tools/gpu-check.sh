#!/usr/bin/env bash
# On the device machine: correctness of `clattn run` on the DESIGN.md shape list, then fp32
# forward timings beside PyTorch SDPA in the same call. Usage: tools/gpu-check.sh DIR
# (DIR from tools/gpu-pack.sh). Writes to $OUT (or ./gpu-out).
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
gpu_env_header \
  | tee "$out/env.txt"
"$cl" devices | tee "$out/devices.txt"

shapes=$(grep -v "^#" "$(dirname "$0")/gpu-shapes.txt") # DESIGN.md's list
pass=0 fail=0
while read -r b hq hkv nq nkv d dv f lay off; do
  args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv --head-dim $d
    --head-dim-v $dv --layout $lay --offset $off --lse --repeat 0 --warmup 0)
  [ "$f" = c ] && args+=(--causal)
  if "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then pass=$((pass + 1)); r=PASS
  else fail=$((fail + 1)); r=FAIL; fi
  echo "$r ${args[*]} | $(grep -E 'check:|clattn:' "$out/run.tmp" | head -1)" | tee -a "$out/correctness.txt"
done <<<"$shapes"
echo "correctness: $pass passed, $fail failed" | tee -a "$out/correctness.txt"

# Timings: FlashAttention benchmark shapes (batch = 16384 / N, heads = 2048 / d), fp32.
for d in 64 128; do for n in 1024 4096 8192; do for c in 0 1; do
  args=(--batch $((16384 / n)) --heads $((2048 / d)) --seqlen $n --head-dim $d --no-check
    --warmup 3 --repeat 10 --layout bhsd)
  [ $c = 1 ] && args+=(--causal)
  echo "d=$d n=$n causal=$c: $("$cl" run "${args[@]}" 2>&1 | grep -E 'plan:|time:|clattn:' | tr '\n' ' ')" \
    | tee -a "$out/clattn_bench.txt"
done; done; done
timeout 300 python3 "$dir/torch_sdpa.py" --dtype float32 --d 64,128 --n 1024,4096,8192 \
  --causal 0,1 --json "$out/torch.json" >"$out/torch.txt" 2>&1
tail -3 "$out/torch.txt"
