#!/usr/bin/env bash
# On the device machine: half storage (CLATTN_F16, CLATTN_BF16). check: DESIGN.md's shape list
# through `clattn run --dtype`, forward (the plans: forward_mma_half on tensor cores) and
# backward, in each dtype. time: `clattn bench` forward and forward + backward at the
# FlashAttention benchmark shapes (batch = 16384 / N, heads = 2048 / d), fused and standard
# columns, beside PyTorch's SDPA backends (torch_sdpa.py) in the same call, one table per dtype
# and pass (tools/gpu-table.py), and the atomic-dQ backward (--nondeterministic, fused alone;
# table_bench_DT_bwd_nd.md). time-ends: the same at N = 512 and 16384, fused alone. tune:
# `clattn tune --dtype` of the H200's built-in classes (d = 64, 128; causal and not; N = 4096),
# forward and backward, as JSON.
# check-DT, check-DT-backward: one list alone (DT f16 or bf16). check-DT-bmma: the backward's
# list with backward_mma_half forced (BMMA, 128/128) where head dims allow. time-bmma: bench
# forward + backward with the plans' backward and with backward_mma_half forced, beside
# torch_sdpa.py's backward. tune-backward: the backward's classes alone; tune-forward-DT the
# forward's in one dtype. stage2: forward_mma_half's stage 2 (cp.async, ldmatrix; issue 19)
# forced on the shape list where head dims allow (multiples of 16; S2, 64/32), fp16 and bf16,
# then bench fp16 forward with the plans (stage 1) and stage 2 configs beside torch_sdpa.py's
# forward (stage2.txt, torch_fwd.txt); stage2-time: the timing alone (S2_CFGS: the configs).
# ab: the packed kernels against a baseline's (gpu-pack.sh's BASE_KERNELS, .gpu/basecl, through
# CLATTN_KERNEL_DIR: the same build, only the kernel text differs), fp16, in turns, AB_ROUNDS (2)
# rounds, each of AB_CFGS ("plan" or configs; forward, or forward + backward with AB_BACKWARD=1),
# the faster of the rounds per row (ab.txt). The A/B of stop 32's kernel changes. AB_FLAGS: more
# bench flags ("--nondeterministic" with AB_BACKWARD=1); AB_NEW_OPTS: more CLATTN_BUILD_OPTIONS
# for the new side alone; AB_TAG: a suffix of the files.
# Usage: tools/gpu-half.sh DIR [check] [check-DT...] [time] [time-ends] [time-bmma] [tune]
# [tune-backward] [stage2] [stage2-time] [ab]
# (DIR from tools/gpu-pack.sh; TUNE_BUDGET seconds per tune run, 100). Writes to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-check time}
gpu_env_header \
  | tee -a "$out/env.txt"
# 300 s a shape: the host's double reference of 4 x 16 x 2048 x 2048 causal at d = 128 took 178 s
# alone on the H200's host and outlasted 200 within the list (stop 38).
if [[ " $steps " == *" check "* ]]; then
  for dt in f16 bf16; do
    gpu_check_list "$dt" 300 --dtype "$dt" | tee -a "$out/env.txt"
    gpu_check_list "${dt}_backward" 300 --dtype "$dt" --backward | tee -a "$out/env.txt"
  done
fi
# One list alone (the whole check takes about 10 minutes there): check-bf16-backward etc.
for s in $steps; do
  case $s in
  check-*-backward) dt=${s#check-}; dt=${dt%-backward}
    gpu_check_list "${dt}_backward" 300 --dtype "$dt" --backward | tee -a "$out/env.txt" ;;
  check-*-bmma) dt=${s#check-}; dt=${dt%-bmma}
    GPU_FORCE=${BMMA:-backward_mma_half/128/128} gpu_check_list "${dt}_bmma" 300 --dtype "$dt" \
      --backward | tee -a "$out/env.txt" ;;
  check-f16 | check-bf16) dt=${s#check-}
    gpu_check_list "$dt" 300 --dtype "$dt" | tee -a "$out/env.txt" ;;
  tune-forward-*) dt=${s#tune-forward-}
    CLATTN_TUNING_DB="$out/tuning.json" "$cl" tune --dtype $dt --head-dims 64,128 \
      --causal-list 0,1 --seqlens 4096 --batch 4 --heads 16 --budget "${TUNE_BUDGET:-100}" \
      --json >"$out/tune_$dt.json" 2>&1 ;;
  esac
done
# One combined table: clattn bench at N = SEQLENS with COLUMNS (fused,standard or fused), forward,
# forward + backward and forward + backward with the atomic dQ (CLATTN_NONDETERMINISTIC, fused
# alone: the standard path ignores the flag), beside torch_sdpa.py forward and forward + backward;
# files PREFIX_DT[_bwd[_nd]].json, torch_PREFIX*.json and table_PREFIX_*.md.
# Usage: time_table PREFIX SEQLENS COLUMNS
time_table() {
  local pre=$1 ns=$2 shapes dt b
  shapes=(--tokens 16384 --hidden 2048 --seqlen "$ns" --head-dim 64,128 --causal both
    --warmup 3 --repeat 10 --json)
  for dt in f16 bf16; do
    "$cl" bench "${shapes[@]}" --columns "$3" --dtype $dt >"$out/${pre}_$dt.json" \
      2>"$out/${pre}_$dt.err"
    "$cl" bench "${shapes[@]}" --columns "$3" --dtype $dt --backward \
      >"$out/${pre}_${dt}_bwd.json" 2>"$out/${pre}_${dt}_bwd.err"
    "$cl" bench "${shapes[@]}" --columns fused --dtype $dt --backward --nondeterministic \
      >"$out/${pre}_${dt}_bwd_nd.json" 2>"$out/${pre}_${dt}_bwd_nd.err"
  done
  timeout 200 python3 "$dir/torch_sdpa.py" --dtype float16,bfloat16 --d 64,128 --n "$ns" \
    --causal 0,1 --json "$out/torch_$pre.json" >"$out/torch_$pre.txt" 2>&1
  timeout 300 python3 "$dir/torch_sdpa.py" --dtype float16,bfloat16 --d 64,128 --n "$ns" \
    --causal 0,1 --backward --json "$out/torch_${pre}_bwd.json" >"$out/torch_${pre}_bwd.txt" 2>&1
  for dt in f16 bf16; do
    python3 "$here/gpu-table.py" "$out/${pre}_$dt.json" "$out/torch_$pre.json" \
      >"$out/table_${pre}_$dt.md"
    for b in bwd bwd_nd; do
      python3 "$here/gpu-table.py" "$out/${pre}_${dt}_$b.json" "$out/torch_${pre}_bwd.json" \
        >"$out/table_${pre}_${dt}_$b.md"
    done
  done
  cat "$out"/table_"$pre"_*.md
}
[[ " $steps " == *" time "* ]] && time_table bench 1024,4096 fused,standard
# time-ends: the Goal's ends, N = 512 and 16384 (B = 32 and 1), the fused path alone (the
# standard path's N x N scores at 16384 take seconds a call).
[[ " $steps " == *" time-ends "* ]] && time_table ends 512,16384 fused
if [[ " $steps " == *" time-bmma "* ]]; then
  shapes=(--tokens 16384 --hidden 2048 --seqlen 1024,4096 --head-dim 64,128 --causal both
    --columns fused --warmup 3 --repeat 10 --json --backward)
  for dt in f16 bf16; do
    "$cl" bench "${shapes[@]}" --dtype $dt >"$out/bench_${dt}_bwd.json" 2>"$out/bench_${dt}_bwd.err"
    "$cl" bench "${shapes[@]}" --dtype $dt --config "${BMMA:-backward_mma_half/128/128}" \
      >"$out/bench_${dt}_bmma.json" 2>"$out/bench_${dt}_bmma.err"
  done
  timeout 300 python3 "$dir/torch_sdpa.py" --dtype float16,bfloat16 --d 64,128 --n 1024,4096 \
    --causal 0,1 --backward --json "$out/torch_bwd.json" >"$out/torch_bwd.txt" 2>&1
  for dt in f16 bf16; do for x in bwd bmma; do
    python3 "$here/gpu-table.py" "$out/bench_${dt}_$x.json" "$out/torch_bwd.json" \
      >"$out/table_${dt}_$x.md"
  done; done
  cat "$out"/table_*.md
fi
if [[ " $steps " == *" tune-backward "* ]]; then
  export CLATTN_TUNING_DB="$out/tuning.json"
  for dt in f16 bf16; do
    "$cl" tune --dtype $dt --head-dims 64,128 --causal-list 0,1 --seqlens 4096 --batch 4 \
      --heads 16 --budget "${TUNE_BUDGET:-100}" --json --backward >"$out/tune_${dt}_bwd.json" 2>&1
  done
fi
if [[ " $steps " == *" tune "* ]]; then
  export CLATTN_TUNING_DB="$out/tuning.json"
  for dt in f16 bf16; do for pass in "" --backward; do
    "$cl" tune --dtype $dt --head-dims 64,128 --causal-list 0,1 --seqlens 4096 --batch 4 \
      --heads 16 --budget "${TUNE_BUDGET:-100}" --json $pass >"$out/tune_${dt}${pass:+_bwd}.json" 2>&1
  done; done
fi
if [[ " $steps " == *" stage2 "* ]]; then
  for dt in f16 bf16; do
    GPU_FORCE=${S2:-forward_mma_half/64/32/1/1/2/1/1} GPU_FORCE_DIV=16 \
      gpu_check_list "${dt}_stage2" 200 --dtype $dt | tee -a "$out/env.txt"
  done
fi
if [[ " $steps " == *" stage2 "* || " $steps " == *" stage2-time "* ]]; then
  sh=(--tokens 16384 --hidden 2048 --seqlen 1024,4096 --head-dim 64,128 --causal both
    --columns fused --warmup 3 --repeat 10 --dtype f16)
  cfgs=(plan forward_mma_half/64/32/1/1/2/1/1 forward_mma_half/128/32/1/1/2/1/1
    forward_mma_half/64/64/1/1/2/1/1 forward_mma_half/128/64/1/1/2/1/1)
  [ -n "${S2_CFGS:-}" ] && read -ra cfgs <<<"$S2_CFGS"
  for c in "${cfgs[@]}"; do
    echo "== $c"
    a=()
    [ $c != plan ] && a=(--config $c)
    timeout 120 "$cl" bench "${sh[@]}" "${a[@]}" 2>&1 | grep -vE '^(device|cache|#)'
  done | tee "$out/stage2.txt"
  timeout 120 python3 "$dir/torch_sdpa.py" --dtype float16 --d 64,128 --n 1024,4096 \
    --causal 0,1 >"$out/torch_fwd.txt" 2>&1
fi
if [[ " $steps " == *" ab "* ]]; then
  ab=(--tokens 16384 --hidden 2048 --seqlen 1024,4096 --head-dim 64,128 --causal both
    --columns fused --warmup 3 --repeat 10 --dtype f16)
  [ -n "${AB_BACKWARD:-}" ] && ab+=(--backward)
  read -ra more <<<"${AB_FLAGS:-}" # e.g. "--backward --nondeterministic" (without AB_BACKWARD)
  ab+=("${more[@]}")
  tag=${AB_TAG:-} # a suffix of ab_rows.txt and ab.txt, for several A/Bs in one call
  read -ra cfgs <<<"${AB_CFGS:-plan}"
  for r in $(seq "${AB_ROUNDS:-2}"); do
    for c in "${cfgs[@]}"; do
      a=()
      [ "$c" != plan ] && a=(--config "$c")
      for side in new base; do
        # the new side's extra defines, after any the caller set (the base side keeps those)
        kd=(env CLATTN_BUILD_OPTIONS="${CLATTN_BUILD_OPTIONS:-} ${AB_NEW_OPTS:-}")
        [ $side = base ] && kd=(env CLATTN_KERNEL_DIR="$dir/basecl")
        timeout 120 "${kd[@]}" "$cl" bench "${ab[@]}" "${a[@]}" 2>&1 |
          awk -v s="$side" -v c="$c" '$2 ~ /^(64|128)$/ && $6 == "|" {print s, c, $1, $2, $3, $7}'
      done
    done
  done >"$out/ab_rows$tag.txt"
  # The faster round per side, config and row; then new against base.
  awk '{k = $2 " " $3 " " $4 " " $5; t = $1 == "new" ? "n" : "b"
    if (!((t, k) in v) || $6 < v[t, k]) v[t, k] = $6; keys[k] = 1}
    END {for (k in keys) printf "%s | %.3f | %.3f | %.2fx\n", k, v["b", k], v["n", k], v["b", k] / v["n", k]}' \
    "$out/ab_rows$tag.txt" | sort | sed '1i config N d causal | base ms | new ms | base/new' |
    tee "$out/ab$tag.txt"
  echo "base kernels: $(cat "$dir/basecl/commit" 2>/dev/null); ${more[*]}; new side's" \
    "options: ${AB_NEW_OPTS:-none}" >>"$out/ab$tag.txt"
fi
