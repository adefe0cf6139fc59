#!/usr/bin/env bash
# On the device machine: the backward with atomic dQ (CLATTN_NONDETERMINISTIC, `--nondeterministic`:
# bwd_dkdv also computes dQ = dS K and adds it into an fp32 accumulator, five products where
# the two-kernel backward does seven) against the deterministic backward, both as
# backward_mma_half 128/128 (the H200's built-in; forced, so that an H100, which has no built-in,
# runs the same), fp16 and bf16.
# check: a few shapes (GQA, causal, odd lengths, d = 64, 96, 128) with the atomic path, checked
#   against the double reference, with bwd_dkdv's registers and spills (-cl-nv-verbose).
# time: forward + backward, B = 4, H = 16, N = 4096 (`clattn bench --tokens 16384 --hidden
#   2048`), d = 64 and 128, causal and not, deterministic and atomic in turns, ROUNDS rounds.
# split: each kernel's device time by name (tools/host_shim.c's SHIM_KERNEL_TIMES) at d = 128,
#   both ways.
# Usage: tools/gpu-atomic.sh DIR [check] [time] [split] (DIR from tools/gpu-pack.sh; all three
# by default). Writes atomic.txt to $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-check time split}
rounds=${ROUNDS:-2}
cfg=(--config backward_mma_half/128/128)
gpu_env_header | tee -a "$out/env.txt"
{
  if [[ " $steps " == *" check "* ]]; then
    for c in "--dtype f16 --heads 8 --heads-kv 2 --seqlen 1000 --head-dim 128 --causal" \
      "--dtype bf16 --heads 8 --heads-kv 2 --seqlen 1000 --head-dim 128" \
      "--dtype f16 --heads 4 --seqlen-q 333 --seqlen-kv 1021 --head-dim 64 --causal" \
      "--dtype bf16 --heads 6 --heads-kv 3 --seqlen 777 --head-dim 96 --window 100,0 --causal" \
      "--dtype f16 --heads 4 --seqlen 513 --head-dim 128 --softcap 30"; do
      CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS=-cl-nv-verbose timeout 90 "$cl" run --batch 2 $c \
        --backward --nondeterministic "${cfg[@]}" --repeat 0 >"$out/r.tmp" 2>&1
      echo "check $c: $(grep -E 'backward ->|backward:|clattn:' "$out/r.tmp" | tr '\n' ' ' |
        cut -c1-300) | $(grep -iE 'bwd_dkdv|registers|spill' "$out/r.tmp" | sort -u |
        tr '\n' ' ' | cut -c1-500)"
    done
  fi
  if [[ " $steps " == *" time "* ]]; then
    for round in $(seq 1 "$rounds"); do
      for dt in f16 bf16; do
        for d in 64 128; do
          for cz in off on; do
            for nd in "" --nondeterministic; do
              echo "round $round $dt d=$d causal=$cz ${nd:-deterministic}: $(timeout 60 "$cl" \
                bench --tokens 16384 --hidden 2048 --seqlen 4096 --head-dim $d --causal $cz \
                --columns fused --warmup 3 --repeat 10 --dtype $dt --backward $nd "${cfg[@]}" \
                2>&1 | grep -E '^ +4096|clattn:' | awk -F'|' '{print $2}')"
            done
          done
        done
      done
    done
  fi
  if [[ " $steps " == *" split "* ]]; then
    for nd in "" --nondeterministic; do
      echo "== split d=128 fp16 non-causal ${nd:-deterministic}"
      SHIM_KERNEL_TIMES=1 LD_PRELOAD="$dir/libclattn_host_shim.so" timeout 60 "$cl" bench \
        --tokens 16384 --hidden 2048 --seqlen 4096 --head-dim 128 --causal off --columns fused \
        --warmup 3 --repeat 10 --dtype f16 --backward $nd "${cfg[@]}" 2>&1 |
        grep -E "kernel |^ +4096|clattn:"
    done
  fi
} >>"$out/atomic.txt"
rm -f "$out/r.tmp"
