#!/usr/bin/env bash
# On the device machine: `clattn bench` (fused vs standard) on FlashAttention's benchmark shapes
# (batch = 16384 / N, heads = 2048 / d) and PyTorch SDPA on the same shapes in the same call,
# joined into one table (table.md, by tools/gpu-table.py); the bandwidth check of the traffic
# model (bandwidth.txt); a correctness sample of the standard path.
# Usage: tools/gpu-bench.sh DIR [N list] (DIR from tools/gpu-pack.sh); env NO_BANDWIDTH (set:
# skip the bandwidth check). Writes to $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
ns=${2:-512,1024,2048,4096,8192,16384}
gpu_env_header \
  >"$out/env.txt"
# The standard path against the double-precision reference (a few shapes of DESIGN.md's list).
for a in "--seqlen-q 113 --seqlen-kv 203 --head-dim 111 --heads 2" \
  "--seqlen 1024 --head-dim 128 --causal --heads 4 --heads-kv 1 --layout bhsd" \
  "--seqlen-q 203 --seqlen-kv 113 --head-dim 64 --causal --offset 5" \
  "--seqlen 300 --head-dim 300 --heads 2"; do
  echo "$a | $("$cl" run --algorithm standard --lse --repeat 0 --warmup 0 $a 2>&1 |
    grep -E 'check:|clattn:' | head -1)" >>"$out/standard_check.txt"
done
here=$(dirname "$0")
"$cl" bench --tokens 16384 --hidden 2048 --head-dim 64,128 --seqlen "$ns" --causal both --json \
  >"$out/bench.json" 2>"$out/bench.err"
timeout 240 python3 "$dir/torch_sdpa.py" --dtype float32 --d 64,128 --n "$ns" --causal 0,1 \
  --json "$out/torch.json" >"$out/torch.txt" 2>&1
python3 "$here/gpu-table.py" "$out/bench.json" "$out/torch.json" >"$out/table.md"
[ -n "${NO_BANDWIDTH:-}" ] && exit 0
"$cl" bench --tokens 16384 --hidden 2048 --head-dim 64,128 --seqlen 512,2048,8192,16384 \
  --causal both --bandwidth --columns fused,standard >"$out/bandwidth.txt" 2>>"$out/bench.err"
