#!/usr/bin/env bash
# On the device machine: half storage (CLATTN_F16, CLATTN_BF16) forward checked on DESIGN.md's
# shape list through `clattn run --dtype`, then the forward timed at the FlashAttention benchmark
# shapes (batch = 16384 / N, heads = 2048 / d) in each dtype beside PyTorch's SDPA backends in the
# same call. Usage: tools/gpu-half.sh DIR (from tools/gpu-pack.sh). Writes to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
{ echo "commit $(cat "$dir/commit")"; nvidia-smi --query-gpu=name,driver_version --format=csv; } \
  | tee "$out/env.txt"
shapes=$(grep -v "^#" "$here/gpu-shapes.txt")
for dt in f16 bf16; do
  pass_n=0 fail_n=0
  while read -r b hq hkv nq nkv d dv f lay off; do
    args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv --head-dim $d
      --head-dim-v $dv --layout $lay --offset $off --lse --repeat 0 --warmup 0 --dtype $dt)
    [ "$f" = c ] && args+=(--causal)
    if timeout 200 "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then
      pass_n=$((pass_n + 1)) r=PASS
    else fail_n=$((fail_n + 1)) r=FAIL; fi
    echo "$r ${args[*]} | $(grep -E 'check|plan:|clattn:' "$out/run.tmp" | tr '\n' ' ' | cut -c1-300)" \
      >>"$out/correctness_$dt.txt"
  done <<<"$shapes"
  echo "$dt: $pass_n passed, $fail_n failed" | tee -a "$out/env.txt"
done
rm -f "$out/run.tmp"
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
