#!/usr/bin/env bash
# On the device machine: forward + backward, `clattn bench --backward` (fused vs standard) beside
# torch_sdpa.py --backward on the same shapes in the same call (table_bwd.md), and gradient
# checks of both algorithms against the double reference (`clattn run --backward`), the
# backward's plan per class and its kernels' registers and spills (nv_verbose_bwd.txt).
# Usage: tools/gpu-bwd.sh DIR [N list] (DIR from tools/gpu-pack.sh). Writes to $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
ns=${2:-1024,4096,16384}
gpu_env_header \
  >>"$out/env.txt"
for alg in fused standard; do
  for a in "--seqlen-q 113 --seqlen-kv 203 --head-dim 59 --causal --heads 2" \
    "--seqlen 1024 --head-dim 128 --causal --heads 4 --heads-kv 1 --layout bhsd" \
    "--seqlen 512 --head-dim 64 --heads 2"; do
    echo "$alg $a | $("$cl" run --backward --algorithm $alg --repeat 0 --warmup 0 $a 2>&1 |
      grep -E 'check|clattn:' | tr '\n' ' ')" >>"$out/bwd_check.txt"
  done
done
# The backward's plan per class, and registers and spills of its kernels (-cl-nv-verbose).
for d in 64 128; do
  for c in "" --causal; do
    echo "d=$d $c: $("$cl" explain --head-dim $d --seqlen 4096 $c 2>&1 | grep backward: |
      tr '\n' ' ')" >>"$out/bwd_check.txt"
  done
  CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS=-cl-nv-verbose "$cl" run --backward --head-dim $d \
    --seqlen 256 --repeat 0 --warmup 0 2>&1 | grep -iE "registers|spill|function properties|error" |
    sed "s|^|d=$d: |" >>"$out/nv_verbose_bwd.txt"
done
here=$(dirname "$0")
"$cl" bench --backward --tokens 16384 --hidden 2048 --head-dim 64,128 --seqlen "$ns" \
  --causal both --columns fused,standard --warmup 1 --repeat 5 --json \
  >"$out/bench_bwd.json" 2>"$out/bench_bwd.err"
timeout 200 python3 "$dir/torch_sdpa.py" --dtype float32 --d 64,128 --n "$ns" --causal 0,1 \
  --backward --json "$out/torch_bwd.json" >"$out/torch_bwd.txt" 2>&1
python3 "$here/gpu-table.py" "$out/bench_bwd.json" "$out/torch_bwd.json" >"$out/table_bwd.md"
