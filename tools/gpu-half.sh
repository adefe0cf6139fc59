#!/usr/bin/env bash
# On the device machine: half storage (CLATTN_F16, CLATTN_BF16) forward checked on DESIGN.md's
# shape list through `clattn run --dtype` (the plans, then forward_mma_half forced), then the
# forward timed at the FlashAttention benchmark shapes (batch = 16384 / N, heads = 2048 / d) in
# each dtype beside PyTorch's SDPA backends in the same call. Usage: tools/gpu-half.sh DIR (from tools/gpu-pack.sh). Writes to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
{ echo "commit $(cat "$dir/commit")"; nvidia-smi --query-gpu=name,driver_version --format=csv; } \
  | tee "$out/env.txt"
for dt in f16 bf16; do gpu_check_list "$dt" 200 --dtype "$dt" | tee -a "$out/env.txt"; done
# The same list through the tensor-core kernel in half, forced (64 rows, 32-key tiles: the
# tiles that fit 48 KiB at d = 256); the plans above take it where it is legal.
for dt in f16 bf16; do
  gpu_check_list "${dt}_mma_half" 200 --dtype "$dt" --config forward_mma_half/64/32/1/1/1/1 |
    tee -a "$out/env.txt"
done
for dt in f32 f16 bf16; do for d in 64 128; do for n in 1024 4096; do for c in 0 1; do
  args=(--batch $((16384 / n)) --heads $((2048 / d)) --seqlen $n --head-dim $d --no-check
    --warmup 3 --repeat 10 --layout bhsd --dtype $dt)
  [ $c = 1 ] && args+=(--causal)
  echo "dtype=$dt d=$d n=$n causal=$c: $("$cl" run "${args[@]}" 2>&1 | grep -E 'plan:|time:|clattn:' | tr '\n' ' ')" \
    | tee -a "$out/clattn_half.txt"
done; done; done; done
timeout 240 python3 "$dir/torch_sdpa.py" --dtype float16,bfloat16 --d 64,128 --n 1024,4096 \
  --causal 0,1 --json "$out/torch.json" >"$out/torch.txt" 2>&1
tail -3 "$out/torch.txt"
