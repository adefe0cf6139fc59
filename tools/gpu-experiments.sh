#!/usr/bin/env bash
# On the device machine: the experiments stop 36 prepared and could not run (no device was lent
# after its first call). Each is a build option or a tool switch, so it needs no rebuild there.
# split: the fp16 forward + backward at N = 4096 (d = 128, then 64), non-causal, each kernel's
#   device time by name (tools/host_shim.c's SHIM_KERNEL_TIMES) and its registers and spills
#   (-cl-nv-verbose), with the backward's staged rows as planned and halved (-DSQ=16 at d = 128,
#   -DSQ=32 at d = 64: fewer of bwd_dkdv's registers held by S and dP); also times e2375e0's
#   bwd_rowdot (0.30-0.33 ms a launch before, stop 36's call 1) (kernel_split.txt, regs.txt).
# page-order: paged 16 at batch 8, 32k keys, one row, fp16, its pages shuffled (as always) and
#   in pool order (CLATTN_PAGE_ORDER=sequential), in turns: whether paged decode's lag behind a
#   contiguous cache (72% against 91% of the stream) is the scattered pool's (paged_order.txt).
# ftz: the fp16 forward and forward + backward at N = 4096 (d = 64, 128, causal both) with and
#   without -cl-denorms-are-zero (ex2.approx and rcp.approx without the denormal fix-ups, as
#   FlashAttention's --use_fast_math builds them), in turns, then four checks with it (ftz.txt).
# cap: the softcap's tanh by ex2 + rcp (CAP_FAST 1) and by tanh.approx.f32 (CAP_FAST 2, the
#   default since stop 37), checked and timed (tools/gpu-variants.sh cap-impl; cap_impl*.txt).
# paged-bkv: decode at b8/32k, one row, fp16 (and int8 paged 16 and contiguous), contiguous and paged 16 and 64,
#   with the planned 32-key blocks and with 16 (-DBKV=16, and -DSTAGE=1 for int8, whose plan is
#   stage 2), in turns, two rounds: at dc4e203 (16-key blocks) paged 16 read 88% of the stream,
#   since the 32-key blocks 72% (paged_bkv.txt). The key ranges stay multiples of 32.
# int8-bkv: the int8 cache at b8/32k, one row, contiguous and paged 16, as planned (32-key
#   blocks in two stages), in 64-key blocks (-DBKV=64 -DSTAGE=1: four steps' loads at once, the
#   bytes of fp16's 32-key blocks; c23b6e3) and in 32 in one stage, in turns, ROUNDS_BKV rounds;
#   the fp16 cache beside them, as planned and with each 16 keys' loads issued during the
#   previous 16's math (-DBKV=32 -DSTAGE=2), which the paged cache (16-key blocks, one stage:
#   84% of the stream on the H200 against contiguous's 91%) may want (int8_bkv.txt). On the H200
#   int8 was 1.16x fp16 (goal 1.8x): a warp's step of 16 int8 keys brings 4 KB a memory round
#   trip, a quarter of fp16's 32-key blocks.
# splits-b1: batch 1 at 32k and 128k keys, one row, fp16: the plan's key ranges (128 since
#   0dfe9b9) against CLATTN_SPLITS=64 (the most before) and 96, in turns (splits_b1.txt).
# rows4: four query rows a sequence (16 packed rows a tile) at b8/32k, fp16, contiguous: the plan
#   (32-key blocks, one stage) against each 16 keys' loads during the previous 16's math
#   (-DSTAGE=2) and 16-key blocks, in turns, two rounds (rows4.txt; 80% of the stream on the
#   H200 in stop 38, goal 85%).
# cap-ab: the fp32 softcap's cost against plain (B = 1, H = 16, N = 4096, d = 128, causal and
#   not), with the packed kernels and with the baseline's (gpu-pack.sh's BASE_KERNELS, .gpu/basecl:
#   before the rational tanh's division became a refined reciprocal), in turns, two rounds
#   (cap_ab.txt). The H200 measured 1.12-1.13x in stop 38 (goal 1.05x).
# i8-ab: the int8 cache at b8/32k, one row, contiguous and paged 16, with the packed kernels
#   (prmt-built fp16 pairs) and the baseline's (.gpu/basecl), in turns, two rounds, the fp16
#   cache beside them; then checked int8 runs (fp16 and bf16 queries, paged and contiguous,
#   four rows, causal) on the packed kernels (i8_ab.txt).
# alibi-ab: the fp16 forward (B = 1, H = 16, N = 4096, d = 128, full and causal) plain and with
#   ALiBi, packed kernels and baseline's in turns, three rounds; then ALiBi checked in fp16 and
#   bf16, causal and not, forward and backward (alibi_ab.txt).
# merge-ab (since f6af3f5 the baseline's merge.cl is the packed build's own, gpu-pack.sh: merges are
#   compared between builds, BASE_BUILD_DIR): decode (fp16 cache, one row) at b1/4k, b1/32k (32 and 64 key ranges) and b8/32k,
#   each kernel's device time by name (SHIM_KERNEL_TIMES: decode_mma and merge_splits) and the
#   call's median, with the packed kernels (merge_splits' loops unrolled by 8) and the baseline's
#   (.gpu/basecl: BASE_KERNELS=26829bc, a load a trip), in turns, two rounds (merge_ab.txt).
# append: clattn_kv_append timed by its event (`clattn run --kv-cache`'s append line, since
#   77e65c9; f459899: the kernel's work-group of 64 a row) at b8 and b64, one and four new rows,
#   and 512 (a prefill's), fp16 and int8, contiguous and paged 16, beside a copy kernel
#   (append.txt).
# f32-builtins: the fp32 forward and backward (B = 1, H = 16, N = 4096, d = 64 and 128, causal and
#   not) through the plan on this GPU and through the H200's built-in configs forced
#   (runtime/plan/builtin.c: forward_mma 128/32 at d = 64, 128/16 at d = 128; backward_mma
#   128/128), checked, then timed in turns, two rounds: on an H100 (no built-ins: the heuristic's
#   plan) `clattn run --dtype f32` took 15.3 ms where the H200's bench took 3.9 (stop 39), which
#   says whether its entries should name the H100 too (f32_builtins.txt).
# SPLIT_SPECS: split's runs, "D OPTIONS" joined by |; ROUNDS_BKV: paged-bkv's rounds (2).
# Usage: tools/gpu-experiments.sh DIR [split] [page-order] [ftz] [cap] [paged-bkv] [int8-bkv]
# [splits-b1] [rows4] [cap-ab] [i8-ab] [alibi-ab] [merge-ab] [append] [f32-builtins] (DIR
# from
# tools/gpu-pack.sh; the first four by default, in that order). Writes to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-split page-order ftz cap}
gpu_env_header | tee -a "$out/env.txt"
bench=(--tokens 16384 --hidden 2048 --seqlen 4096 --columns fused --warmup 3 --repeat 10 --dtype f16)
if [[ " $steps " == *" split "* ]]; then
  IFS='|' read -r -a specs <<<"${SPLIT_SPECS:-128 |128 -DSQ=16|64 |64 -DSQ=32}"
  for spec in "${specs[@]}"; do
    d=${spec%% *} o=${spec#* }
    echo "== d=$d options: ${o:-none}"
    CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS="-cl-nv-verbose $o" SHIM_KERNEL_TIMES=1 \
      LD_PRELOAD="$dir/libclattn_host_shim.so" timeout 35 "$cl" bench "${bench[@]}" \
      --head-dim $d --causal off --backward >"$out/b.tmp" 2>&1
    grep -E "kernel |configs|^ +[0-9]" "$out/b.tmp"
    { echo "== d=$d $o"; grep -E "registers|spill|Function prop" "$out/b.tmp"; } >>"$out/regs.txt"
  done >"$out/kernel_split.txt"
  rm -f "$out/b.tmp"
fi
if [[ " $steps " == *" page-order "* ]]; then
  for o in shuffled sequential shuffled sequential; do
    echo "paged 16 $o: $(CLATTN_PAGE_ORDER=$o timeout 20 "$cl" run --kv-cache paged --page-size 16 \
      --dtype f16 --batch 8 --heads 32 --heads-kv 8 --head-dim 128 --seqlen-q 1 --context 32768 \
      --no-check --warmup 5 --repeat 30 2>&1 | grep -oE 'median [0-9.]+ ms|[0-9]+% of a stream' |
      tr '\n' ' ')"
  done >"$out/paged_order.txt"
fi
if [[ " $steps " == *" paged-bkv "* ]]; then
  for round in $(seq "${ROUNDS_BKV:-2}"); do
    for c in "contiguous f16" "paged 16 f16" "paged 64 f16" "paged 16 i8" "contiguous i8"; do
      set -- $c
      kv=(--kv-cache $1) dt=${*: -1}
      [ "$1" = paged ] && kv+=(--page-size $2)
      for o in "" "-DBKV=16"; do
        [ "$dt" = i8 ] && [ -n "$o" ] && o="$o -DSTAGE=1"
        echo "round $round $c ${o:-planned}: $(CLATTN_BUILD_OPTIONS="$o" timeout 20 "$cl" run \
          "${kv[@]}" --cache-dtype $dt --dtype f16 --batch 8 --heads 32 --heads-kv 8 \
          --head-dim 128 --seqlen-q 1 --context 32768 --no-check --warmup 5 --repeat 30 2>&1 |
          grep -oE 'median [0-9.]+ ms|[0-9]+% of a stream|clattn:.*' | tr '\n' ' ')"
      done
    done
  done >"$out/paged_bkv.txt"
fi
if [[ " $steps " == *" ftz "* ]]; then
  for o in none -cl-denorms-are-zero none -cl-denorms-are-zero; do
    for p in "" --backward; do
      echo "== options: $o $p"
      CLATTN_BUILD_OPTIONS="${o/none/}" timeout 30 "$cl" bench "${bench[@]}" --head-dim 64,128 \
        --causal both $p 2>&1 | grep -E "^ +[0-9]"
    done
  done >"$out/ftz.txt" 2>&1
  for a in "--dtype f16 --causal" "--dtype bf16 --softcap 30" "--dtype f16 --backward" \
    "--dtype f32 --causal"; do
    echo "check ftz $a: $(CLATTN_BUILD_OPTIONS=-cl-denorms-are-zero timeout 30 "$cl" run $a \
      --batch 2 --heads 4 --heads-kv 2 --seqlen-q 777 --seqlen-kv 1030 --head-dim 128 --lse 2>&1 |
      grep -E 'check|clattn:' | tr '\n' ' ')"
  done >>"$out/ftz.txt"
fi
if [[ " $steps " == *" cap "* ]]; then
  CAP_IMPLS="1 2" CAP_DTYPES=f16 ROUNDS=${ROUNDS:-1} timeout 150 bash "$here/gpu-variants.sh" \
    "$dir" cap-impl >/dev/null 2>&1
fi
# One decode run's median and share of the stream: decode_run ENV... -- clattn run options.
decode_run() {
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 20 "$cl" run --dtype f16 --heads 32 --heads-kv 8 --head-dim 128 \
    --seqlen-q 1 --no-check --warmup 5 --repeat 30 "$@" 2>&1 |
    grep -oE 'median [0-9.]+ ms|[0-9]+% of a stream|clattn:.*' | tr '\n' ' '
}
if [[ " $steps " == *" int8-bkv "* ]]; then
  for round in $(seq "${ROUNDS_BKV:-2}"); do
    for c in "contiguous" "paged --page-size 16"; do
      for o in "" "-DBKV=64 -DSTAGE=1" "-DBKV=32 -DSTAGE=1"; do
        echo "round $round int8 $c ${o:-planned}: $(decode_run CLATTN_BUILD_OPTIONS="$o" -- \
          --kv-cache $c --cache-dtype i8 --batch 8 --context 32768)"
      done
      for o in "" "-DBKV=32 -DSTAGE=2"; do
        echo "round $round fp16 $c ${o:-planned}: $(decode_run CLATTN_BUILD_OPTIONS="$o" -- \
          --kv-cache $c --cache-dtype f16 --batch 8 --context 32768)"
      done
    done
  done >"$out/int8_bkv.txt"
fi
if [[ " $steps " == *" splits-b1 "* ]]; then
  for round in 1 2; do
    for ctx in 32768 131072; do
      for n in plan 64 96; do
        e=X=1
        [ $n != plan ] && e=CLATTN_SPLITS=$n
        echo "round $round b1/$ctx ranges $n: $(decode_run $e -- --kv-cache contiguous \
          --batch 1 --context $ctx)"
      done
    done
  done >"$out/splits_b1.txt"
fi
if [[ " $steps " == *" cap-ab "* ]]; then
  for round in 1 2; do
    for side in new base; do
      kd=()
      [ $side = base ] && kd=(CLATTN_KERNEL_DIR="$dir/basecl")
      for mask in "" --causal; do
        for v in "" "--softcap 30"; do
          echo "round $round $side fp32 ${mask:-full} ${v:-plain}: $(env "${kd[@]}" timeout 30 \
            "$cl" run --dtype f32 --batch 1 --heads 16 --seqlen 4096 --head-dim 128 $mask $v \
            --no-check --warmup 3 --repeat 10 2>&1 | grep -oE 'median [0-9.]+ ms|clattn:.*')"
        done
      done
    done
  done >"$out/cap_ab.txt"
fi
if [[ " $steps " == *" rows4 "* ]]; then
  for round in 1 2; do
    for o in "" "-DBKV=32 -DSTAGE=2" "-DBKV=16"; do
      echo "round $round 4 rows ${o:-planned}: $(decode_run CLATTN_BUILD_OPTIONS="$o" -- \
        --kv-cache contiguous --seqlen-q 4 --batch 8 --context 32768)"
    done
  done >"$out/rows4.txt"
fi
if [[ " $steps " == *" i8-ab "* ]]; then
  for round in 1 2; do
    for c in "contiguous" "paged --page-size 16"; do
      for side in new base; do
        kd=X=1
        [ $side = base ] && kd=CLATTN_KERNEL_DIR=$dir/basecl
        echo "round $round int8 $c $side: $(decode_run $kd -- --kv-cache $c --cache-dtype i8 \
          --batch 8 --context 32768)"
      done
      echo "round $round fp16 $c: $(decode_run X=1 -- --kv-cache $c --cache-dtype f16 --batch 8 \
        --context 32768)"
    done
  done >"$out/i8_ab.txt"
  for a in "--dtype f16 --kv-cache paged --page-size 16" "--dtype bf16 --kv-cache contiguous" \
    "--dtype f16 --kv-cache contiguous --seqlen-q 4 --causal" "--dtype f16 --kv-cache paged \
    --page-size 64 --seqlen-q 3 --causal --softcap 30"; do
    echo "check i8 $a: $(timeout 60 "$cl" run $a --cache-dtype i8 --batch 3 --heads 8 \
      --heads-kv 2 --head-dim 128 --context 3001 --lse 2>&1 | grep -E 'check|clattn:' |
      tr '\n' ' ')"
  done >>"$out/i8_ab.txt"
fi
if [[ " $steps " == *" alibi-ab "* ]]; then
  for round in 1 2 3; do
    for side in new base; do
      kd=X=1
      [ $side = base ] && kd=CLATTN_KERNEL_DIR=$dir/basecl
      for mask in "" --causal; do
        for v in "" --alibi; do
          echo "round $round $side fp16 ${mask:-full} ${v:-plain}: $(env $kd timeout 30 "$cl" \
            run --dtype f16 --batch 1 --heads 16 --seqlen 4096 --head-dim 128 $mask $v \
            --no-check --warmup 3 --repeat 10 2>&1 | grep -oE 'median [0-9.]+ ms|clattn:.*')"
        done
      done
    done
  done >"$out/alibi_ab.txt"
  for a in "--dtype f16" "--dtype bf16 --causal" "--dtype f16 --causal --backward" \
    "--dtype bf16 --backward"; do
    echo "check alibi $a: $(timeout 60 "$cl" run $a --alibi --batch 2 --heads 4 --heads-kv 2 \
      --seqlen-q 777 --seqlen-kv 1030 --head-dim 128 --lse 2>&1 | grep -E 'check|clattn:' |
      tr '\n' ' ')"
  done >>"$out/alibi_ab.txt"
fi
if [[ " $steps " == *" merge-ab "* ]]; then
  for round in 1 2; do
    for c in "--batch 1 --context 4096" "--batch 1 --context 32768" "--batch 8 --context 32768"; do
      for side in new base; do
        kd=X=1
        [ $side = base ] && kd=CLATTN_KERNEL_DIR=$dir/basecl
        echo "round $round $c $side: $(env $kd SHIM_KERNEL_TIMES=1 \
          LD_PRELOAD="$dir/libclattn_host_shim.so" timeout 30 "$cl" run --kv-cache contiguous \
          --dtype f16 --heads 32 --heads-kv 8 --head-dim 128 --seqlen-q 1 $c --no-check \
          --warmup 5 --repeat 30 2>&1 | grep -E 'median|kernel |clattn:' |
          grep -oE 'median [0-9.]+ ms|kernel [a-z_]+ +[0-9]+ launches .*|clattn:.*' | tr '\n' ' ')"
      done
    done
  done >"$out/merge_ab.txt"
fi
if [[ " $steps " == *" append "* ]]; then
  for c in "--batch 8 --context 32768 --seqlen-q 1" "--batch 64 --context 4096 --seqlen-q 1" \
    "--batch 8 --context 32768 --seqlen-q 4" "--batch 8 --context 4096 --seqlen-q 512"; do
    for kv in "contiguous" "paged --page-size 16"; do
      for dt in f16 i8; do
        echo "$c $kv $dt: $(timeout 60 "$cl" run --kv-cache $kv --cache-dtype $dt --dtype f16 \
          --heads 32 --heads-kv 8 --head-dim 128 $c --no-check --warmup 5 --repeat 30 2>&1 |
          grep -E 'append:|clattn:' | tr '\n' ' ')"
      done
    done
  done >"$out/append.txt"
fi
if [[ " $steps " == *" f32-builtins "* ]]; then
  for round in 0 1 2; do
    for d in 64 128; do
      fc=forward_mma/128/32/1/2/1/1/4
      [ $d = 128 ] && fc=forward_mma/128/16/1/2/1/1/4
      for mask in "" --causal; do
        for side in plan builtin; do
          for pass in fwd bwd; do
            a=(--dtype f32 --batch 1 --heads 16 --seqlen 4096 --head-dim $d $mask)
            [ $pass = bwd ] && a+=(--backward)
            [ $side = builtin ] && [ $pass = fwd ] && a+=(--config $fc)
            [ $side = builtin ] && [ $pass = bwd ] && a+=(--config backward_mma/128/128)
            if [ $round = 0 ]; then # checked once on smaller rows, with the plans printed
              echo "check d=$d ${mask:-full} $side $pass: $(timeout 120 "$cl" run "${a[@]}" \
                --seqlen 1000 --repeat 0 2>&1 | grep -E 'plan:|backward:|->|clattn:' |
                tr '\n' ' ')"
            else
              echo "round $round d=$d ${mask:-full} $side $pass: $(timeout 60 "$cl" run \
                "${a[@]}" --no-check --warmup 2 --repeat 5 2>&1 |
                grep -oE 'median [0-9.]+ ms|clattn:.*' | tr '\n' ' ')"
            fi
          done
        done
      done
    done
  done >"$out/f32_builtins.txt"
fi
