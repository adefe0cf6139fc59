#!/usr/bin/env bash
# On the device machine: tune fp32 d = 64 and 128, causal and not, at FlashAttention's benchmark
# shapes (batch = 16384 / N, heads = 2048 / d), then compare tuned and heuristic configs
# interleaved, and time the tuned configs beside PyTorch SDPA. Usage: tools/gpu-tune.sh DIR
# [BUDGET_PER_HEAD_DIM] (DIR from tools/gpu-pack.sh). Writes to $OUT (or ./gpu-out). QUICK=1
# stops after the interleaved comparison (no timings beside PyTorch).
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
budget=${2:-150}
export CLATTN_TUNING_DB="$out/tuning.json"
gpu_env_header \
  | tee "$out/env.txt"
# The register-tiled variant on the DESIGN.md shapes, forced, checked against the host reference.
while read -r b hq hkv nq nkv d dv f lay; do
  cfg=forward_tiles/32/16/4/2/1/1
  [ "$d" -gt 128 ] && cfg=forward_tiles/8/16/4/1/1/1
  args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv --head-dim $d
    --head-dim-v $dv --layout $lay --lse --repeat 0 --warmup 0 --config $cfg)
  [ "$f" = c ] && args+=(--causal)
  "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1 && r=PASS || r=FAIL
  echo "$r ${args[*]} | $(grep -E 'check:|clattn:' "$out/run.tmp" | head -1)" | tee -a "$out/tiles.txt"
done <<'SHAPES'
1 1 0 1 1 1 0 - bshd
2 3 0 17 17 59 0 - bshd
1 2 0 113 203 111 0 - bhsd
1 2 0 80 64 256 0 - bshd
1 1 0 1023 1024 128 0 c bhsd
1 2 0 203 113 64 0 c bshd
1 1 0 50 10 16 0 c bshd
2 2 0 7 0 32 0 - bshd
1 2 0 61 45 100 32 c bhsd
2 8 2 129 129 64 0 - bshd
2 4 0 1 1000 128 0 c bshd
1 2 1 130 130 256 0 c bhsd
SHAPES
echo "forward_tiles on the DESIGN.md shapes: $(grep -c PASS "$out/tiles.txt") passed"
n=4096
for d in 64 128; do
  "$cl" tune --head-dims $d --causal-list 0,1 --seqlens $n --batch $((16384 / n)) \
    --heads $((2048 / d)) --budget "$budget" --quiet 2>&1 | tee -a "$out/tune.txt"
done
for d in 64 128; do for c in 0 1; do
  args=(--batch $((16384 / n)) --heads $((2048 / d)) --seqlen $n --head-dim $d --layout bhsd
    --no-check --compare --warmup 3 --repeat 15)
  [ $c = 1 ] && args+=(--causal)
  echo "== d=$d causal=$c" | tee -a "$out/compare.txt"
  "$cl" run "${args[@]}" 2>&1 | grep -E 'plan:|compare:|time:|clattn' | tee -a "$out/compare.txt"
done; done
[ -n "${QUICK:-}" ] && exit 0 # QUICK=1: tuning and the interleaved comparison only
for d in 64 128; do for m in 1024 4096 8192; do for c in 0 1; do
  args=(--batch $((16384 / m)) --heads $((2048 / d)) --seqlen $m --head-dim $d --no-check
    --warmup 3 --repeat 10 --layout bhsd)
  [ $c = 1 ] && args+=(--causal)
  echo "d=$d n=$m causal=$c: $("$cl" run "${args[@]}" 2>&1 | grep -E 'plan:|time:|clattn:' | tr '\n' ' ')" \
    | tee -a "$out/bench.txt"
done; done; done
timeout 300 python3 "$dir/torch_sdpa.py" --dtype float32 --d 64,128 --n 1024,4096,8192 \
  --causal 0,1 --json "$out/torch.json" >"$out/torch.txt" 2>&1
tail -2 "$out/torch.txt"
