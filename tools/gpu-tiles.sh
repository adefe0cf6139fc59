#!/usr/bin/env bash
# On the device machine (stop 40's experiments, unmeasured when the budget ran out):
# tiles: forward_mma_half's tiles past 48 KiB of local memory, which NVIDIA's OpenCL runs from
#   static arrays (tools/ptx_probe's local probe) and the library allows on known GPUs since
#   72bce91 (built-ins, the tuner, --config; the heuristic keeps to 48 KiB). fp16, B = 4, H = 16,
#   N = 4096 (`clattn bench --tokens 16384 --hidden 2048`), full and causal, each config forced:
#   at d = 128 the built-in (128 rows x 32 keys, stage 3, Q in registers) against 64-key tiles
#   with Q in local memory (stage 4: FlashAttention-2's own d = 128 tiles, 64 KiB swizzled or
#   70 KiB padded), two stages of 64 keys with Q in registers (stage 2, 70 KiB) and 64 rows x 64
#   keys (stage 4, 2 warps); at d = 64 the built-in (128 x 128, stage 3) against two stages of
#   128 keys (74 KiB) and stage 4. Each config checked once at N = 1000 causal with its registers
#   and spills (-cl-nv-verbose), then timed in turns, ROUNDS rounds (tiles.txt).
# merge: decode (fp16 cache, one row) at b1/4k, b1/32k, b8/32k and b1/128k, each kernel's device
#   time (SHIM_KERNEL_TIMES), with this build (merge_splits a work-group a row, f6af3f5) and the
#   base build (.gpu/base from BASE_BUILD_DIR=<a build of f557c22 or earlier>: a work-item an
#   element), in turns, ROUNDS rounds (merge.txt). Checked in round 1.
# f32-stage: the fp32 forward on this GPU (B = 1, H = 16, N = 4096, d = 64 and 128, full and
#   causal) through its plan, forward_mma in one stage (the H100's built-ins since 2c827f3) and in
#   two (the H200's: K/V tiles stored split into TF32 parts), in turns (f32_stage.txt).
# Usage: tools/gpu-tiles.sh DIR [tiles] [merge] [f32-stage] (DIR from tools/gpu-pack.sh; all
# three by default). Writes to $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-tiles merge f32-stage}
rounds=${ROUNDS:-2}
gpu_env_header | tee -a "$out/env.txt"
c128="forward_mma_half/128/32/1/2/3/1/1 forward_mma_half/128/64/1/2/4/0/1 \
forward_mma_half/128/64/1/2/4/1/1 forward_mma_half/128/64/1/2/2/1/1 forward_mma_half/64/64/1/2/4/0/1"
c64="forward_mma_half/128/128/1/2/3/1/1 forward_mma_half/128/128/1/2/2/1/1 \
forward_mma_half/128/128/1/2/4/0/1"
if [[ " $steps " == *" tiles "* ]]; then
  for d in 128 64; do
    cs=$c128
    [ $d = 64 ] && cs=$c64
    for c in $cs; do
      CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS=-cl-nv-verbose timeout 60 "$cl" run --dtype f16 \
        --batch 1 --heads 4 --seqlen 1000 --head-dim $d --causal --config $c >"$out/r.tmp" 2>&1
      echo "check d=$d $c: $(grep -E 'plan:|->|clattn:' "$out/r.tmp" | grep -v 'clattn: built' |
        tr '\n' ' ' | cut -c1-300)" \
        "| $(grep -iE 'registers|spill' "$out/r.tmp" | sort -u | tr '\n' ' ' | cut -c1-400)"
    done
  done >"$out/tiles.txt"
  for round in $(seq 1 $rounds); do
    for d in 128 64; do
      cs=$c128
      [ $d = 64 ] && cs=$c64
      for cz in off on; do
        for c in $cs; do
          echo "round $round d=$d causal=$cz $c: $(timeout 60 "$cl" bench --tokens 16384 \
            --hidden 2048 --seqlen 4096 --head-dim $d --causal $cz --columns fused --warmup 3 \
            --repeat 10 --dtype f16 --config $c 2>&1 | grep -E '^ +4096|clattn:' |
            awk -F'|' '{print $2}')"
        done
      done
    done
  done >>"$out/tiles.txt"
  rm -f "$out/r.tmp"
fi
if [[ " $steps " == *" merge "* ]]; then
  for round in $(seq 1 $rounds); do
    for c in "--batch 1 --context 4096" "--batch 1 --context 32768" \
      "--batch 8 --context 32768" "--batch 1 --context 131072"; do
      for side in new base; do
        bin=$cl lp=$LD_LIBRARY_PATH chk=--no-check
        [ $side = base ] && bin=$dir/base/clattn lp=$dir/base:$LD_LIBRARY_PATH
        [ $round = 1 ] && chk=
        echo "round $round $c $side: $(LD_LIBRARY_PATH=$lp SHIM_KERNEL_TIMES=1 \
          LD_PRELOAD="$dir/libclattn_host_shim.so" timeout 40 "$bin" run --kv-cache contiguous \
          --dtype f16 --heads 32 --heads-kv 8 --head-dim 128 --seqlen-q 1 $c $chk --warmup 5 \
          --repeat 30 2>&1 | grep -oE 'median [0-9.]+ ms|kernel [a-z_]+ +[0-9]+ launches .*|-> [A-Z]+|clattn:.*' |
          tr '\n' ' ')"
      done
    done
  done >"$out/merge.txt"
fi
if [[ " $steps " == *" f32-stage "* ]]; then
  for round in $(seq 0 $rounds); do
    for d in 64 128; do
      b=32
      [ $d = 128 ] && b=16
      for mask in "" --causal; do
        for fc in plan forward_mma/128/$b/1/1/1/1/4 forward_mma/128/$b/1/1/2/1/4; do
          a=(--dtype f32 --batch 1 --heads 16 --seqlen 4096 --head-dim $d $mask)
          [ $fc != plan ] && a+=(--config $fc)
          if [ $round = 0 ]; then
            echo "check d=$d ${mask:-full} $fc: $(timeout 60 "$cl" run "${a[@]}" --seqlen 1000 \
              --repeat 0 2>&1 | grep -E 'plan:|->|clattn:' | tr '\n' ' ')"
          else
            echo "round $round d=$d ${mask:-full} $fc: $(timeout 60 "$cl" run "${a[@]}" \
              --no-check --warmup 2 --repeat 5 2>&1 | grep -oE 'median [0-9.]+ ms|clattn:.*' |
              tr '\n' ' ')"
          fi
        done
      done
    done
  done >"$out/f32_stage.txt"
fi
