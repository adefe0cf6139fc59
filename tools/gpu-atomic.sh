#!/usr/bin/env bash
# On the device machine: the backward with atomic dQ (CLATTN_NONDETERMINISTIC, `--nondeterministic`:
# bwd_dkdv also computes dQ = dS K and adds it into an fp32 accumulator, five products where
# the two-kernel backward does seven) against the deterministic backward, both as
# backward_mma_half 128/128 (the H200's built-in; forced, so that an H100, which has no built-in,
# runs the same), with each way of adding (cl/backward_mma_half_atomic.cl's DQ_RED: 1 per
# element, 2 by pairs, 3 a bulk reduction a block; MODES, "1 2 3").
# check: shapes (GQA, causal, odd lengths, d = 64, 96, 128, a window, a softcap) checked against
#   the double reference, the first in every mode, with bwd_dkdv's registers and spills.
# split: each kernel's device time by name (tools/host_shim.c's SHIM_KERNEL_TIMES), forward +
#   backward at B = 4, H = 16, N = 4096 (`--tokens 16384 --hidden 2048`), d = 128 and 64 (SPLIT_DIMS),
#   non-causal, fp16: deterministic, then each mode.
# table: the FlashAttention benchmark shapes at N = 4096 (d = 64, 128, causal and not, fp16 and
#   bf16): clattn bench forward, forward + backward deterministic and atomic (mode TABLE_MODE,
#   1), the plans' configs, beside torch_sdpa.py forward and forward + backward in the same call
#   (tools/gpu-table.py: table_*.md).
# Usage: tools/gpu-atomic.sh DIR [check] [split] [table] (DIR from tools/gpu-pack.sh; all three by
# default). Writes atomic.txt (and the tables) to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-check split table}
modes=${MODES:-1 2 3}
cfg=(--config backward_mma_half/128/128)
gpu_env_header | tee -a "$out/env.txt"
{
  if [[ " $steps " == *" check "* ]]; then
    first=1
    for c in "--dtype f16 --heads 8 --heads-kv 2 --seqlen 1000 --head-dim 128 --causal" \
      "--dtype bf16 --heads 4 --seqlen-q 333 --seqlen-kv 1021 --head-dim 64" \
      "--dtype bf16 --heads 6 --heads-kv 3 --seqlen 777 --head-dim 96 --window 100,0 --causal" \
      "--dtype f16 --heads 4 --seqlen 513 --head-dim 128 --softcap 30"; do
      for m in $modes; do
        [ -z "$first" ] && [ "$m" != "${modes%% *}" ] && continue
        CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS="-cl-nv-verbose -DDQ_RED=$m" timeout 90 "$cl" run \
          --batch 2 $c --backward --nondeterministic "${cfg[@]}" --repeat 0 >"$out/r.tmp" 2>&1
        echo "check mode $m $c: $(grep -E '^check:|clattn: [a-z]' "$out/r.tmp" | grep -v built |
          tr '\n' ' ' | cut -c1-600)"
        echo "  bwd_dkdv: $(grep -A3 "for 'sm_90" "$out/r.tmp" | grep -oE 'Used [0-9]+ registers[^,]*, [0-9]+ bytes smem|[0-9]+ bytes spill stores' |
          sort -u | tr '\n' ' ')"
      done
      first=
    done
  fi
  if [[ " $steps " == *" split "* ]]; then
    for d in ${SPLIT_DIMS:-128 64}; do
      for m in det $modes; do
        nd=(--nondeterministic) o="-DDQ_RED=$m"
        [ $m = det ] && nd=() o=
        echo "== split d=$d fp16 non-causal mode $m"
        CLATTN_BUILD_OPTIONS="$o" SHIM_KERNEL_TIMES=1 LD_PRELOAD="$dir/libclattn_host_shim.so" \
          timeout 60 "$cl" bench --tokens 16384 --hidden 2048 --seqlen 4096 --head-dim $d \
          --causal off --columns fused --warmup 3 --repeat 10 --dtype f16 --backward "${nd[@]}" \
          "${cfg[@]}" 2>&1 | grep -E "kernel |^ +4096|clattn:"
      done
    done
  fi
} >>"$out/atomic.txt"
rm -f "$out/r.tmp"
if [[ " $steps " == *" table "* ]]; then
  shapes=(--tokens 16384 --hidden 2048 --seqlen 4096 --head-dim 64,128 --causal both
    --columns fused --warmup 3 --repeat 10 --json)
  for dt in f16 bf16; do
    timeout 60 "$cl" bench "${shapes[@]}" --dtype $dt >"$out/bench_$dt.json" 2>"$out/bench_$dt.err"
    timeout 90 "$cl" bench "${shapes[@]}" --dtype $dt --backward >"$out/bench_${dt}_bwd.json" \
      2>"$out/bench_${dt}_bwd.err"
    CLATTN_BUILD_OPTIONS="-DDQ_RED=${TABLE_MODE:-1}" timeout 90 "$cl" bench "${shapes[@]}" \
      --dtype $dt --backward --nondeterministic >"$out/bench_${dt}_bwd_nd.json" \
      2>"$out/bench_${dt}_bwd_nd.err"
  done
  timeout 100 python3 "$dir/torch_sdpa.py" --dtype float16,bfloat16 --d 64,128 --n 4096 \
    --causal 0,1 --json "$out/torch.json" >"$out/torch.txt" 2>&1
  timeout 150 python3 "$dir/torch_sdpa.py" --dtype float16,bfloat16 --d 64,128 --n 4096 \
    --causal 0,1 --backward --json "$out/torch_bwd.json" >"$out/torch_bwd.txt" 2>&1
  for dt in f16 bf16; do
    python3 "$here/gpu-table.py" "$out/bench_$dt.json" "$out/torch.json" >"$out/table_$dt.md"
    for b in bwd bwd_nd; do
      python3 "$here/gpu-table.py" "$out/bench_${dt}_$b.json" "$out/torch_bwd.json" \
        >"$out/table_${dt}_$b.md"
    done
  done
  cat "$out"/table_*.md
fi
