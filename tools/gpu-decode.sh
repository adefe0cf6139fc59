#!/usr/bin/env bash
# On the device machine: decode over a KV cache (issue 18).
# check: caches checked through `clattn run --kv-cache` on the plans there (the decode family):
#   contiguous and paged (16, 64; NHD and HND), fp32, fp16, bf16 and int8, 1 and 4 query rows,
#   causal, window, softcap, sinks, mixed lengths (decode_check.txt).
# time: the Goal's shapes (heads 32 / KV heads 8, d = 128, fp16 cache; batch 1, 8, 64; contexts
#   4k, 32k, 128k; 1 and 4 query rows; contiguous, paged 16 and 64; int8 at 32k) with their
#   bandwidth against a streaming read, the model's time and the host's cost per call
#   (decode_time.txt), then PyTorch's SDPA backends on the contiguous shapes in the same call
#   (decode_torch.json), and one table of both (decode_table.md, tools/gpu-decode-table.py).
#   The clattn part stops starting runs after TIME_BUDGET seconds (420), so that PyTorch's and
#   the table fit the device's 10-minute call.
# sweep: decode's configs forced (an override: no key splits, so at batch 64 where none are
#   needed) at batch 64, context 8k, one row, fp16 contiguous, each with its registers and
#   spills (-cl-nv-verbose): the data for its defaults and the register estimate
#   (decode_sweep.txt).
# bench: the Goal's main shapes through `clattn bench --kv-cache` (faster than `time`), PyTorch's
#   one-row contiguous shapes beside them.
# splits: the small shapes (batch 1 and 8, contexts 4k and 32k, one row, fp16 contiguous) with
#   the key ranges forced ($CLATTN_SPLITS: 1 to 128, and the planner's), for the split count's rule
#   (decode_splits.txt).
# host: where a call's host microseconds go: `clattn bench` at batch 8, 32k keys, split (two
#   launches) and not ($CLATTN_SPLITS=1), under tools/host_shim.c (each OpenCL call's count and
#   time; decode_host.txt).
# paged-ab: the packed kernels against a baseline's (gpu-pack.sh's BASE_KERNELS, .gpu/basecl,
#   through CLATTN_KERNEL_DIR) at batch 8, 32k keys, one row, fp16: paged 16, paged 64 and
#   contiguous, in turns, two rounds (decode_paged_ab.txt), then three paged checks.
# merge-ab: the key ranges merged in the decode kernel (the last work-group of a tile's ranges)
#   always ($CLATTN_FUSED_MERGE=1), against the merge_splits launch (0) and the planner's rule
#   (unset), the same build, in turns, two rounds,
#   through `clattn bench --kv-cache` on the bench step's shapes (decode_merge_ab.txt), after
#   checks of the fused merge (mixed lengths with 0, paged int8 with the variants, four rows).
# DECODE_SHAPES and TORCH_ARGS narrow the time step to a few shapes (one device call).
# Usage: tools/gpu-decode.sh DIR [check] [time] [bench] [sweep] [splits] [host] [paged-ab]
# [merge-ab] (DIR
# from tools/gpu-pack.sh).
# Writes to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-check time}
gpu_env_header | tee -a "$out/env.txt"
if [[ " $steps " == *" check "* ]]; then
  n=0 bad=0
  for c in "contiguous" "paged --page-size 16" "paged --page-size 64 --kv-layout hnd"; do
    for dt in "f32" "f16" "bf16" "f16 --cache-dtype i8"; do
      for v in "--seqlen-q 1" "--seqlen-q 4 --causal" "--seqlen-q 4 --causal --window 300,0 --sinks" \
        "--seqlen-q 1 --softcap 30 --alibi"; do
        args=(--kv-cache $c --dtype $dt $v --batch 5 --heads 32 --heads-kv 8 --head-dim 128
          --context 2000 --lengths 2000,1,0,1333,777 --repeat 0 --warmup 0)
        n=$((n + 1))
        if ! timeout 120 "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then bad=$((bad + 1)); fi
        echo "$(grep -q 'PASS' "$out/run.tmp" && echo PASS || echo FAIL) ${args[*]} |" \
          "$(grep -E 'check|clattn:' "$out/run.tmp" | tr '\n' ' ' | cut -c1-300)" >>"$out/decode_check.txt"
      done
    done
  done
  rm -f "$out/run.tmp"
  echo "decode check: $((n - bad)) of $n passed" | tee -a "$out/env.txt"
fi
if [[ " $steps " == *" time "* ]]; then
  start=$SECONDS
  run() { # kind b ctx nq cache-dtype [args...]: one timed line into decode_time.txt
    local kind=$1 b=$2 ctx=$3 nq=$4 cdt=$5
    if ((SECONDS - start > ${TIME_BUDGET:-420})); then
      echo "$kind $cdt $b $ctx $nq | skipped: the time budget was spent" >>"$out/decode_time.txt"
      return
    fi
    shift 5
    local args=(--kv-cache ${kind%%/*} --dtype f16 --cache-dtype $cdt --batch $b --heads 32
      --heads-kv 8 --head-dim 128 --seqlen-q $nq --context $ctx --no-check --warmup 5 --repeat 30)
    [ "$kind" != contiguous ] && args+=(--page-size ${kind##*/})
    timeout 300 "$cl" run "${args[@]}" "$@" >"$out/run.tmp" 2>&1
    echo "$kind $cdt $b $ctx $nq | $(grep -E 'plan:|time:|host:|traffic:|clattn:' "$out/run.tmp" |
      tr '\n' ' ')" >>"$out/decode_time.txt"
  }
  if [ -n "${DECODE_SHAPES:-}" ]; then # "kind b ctx nq cache-dtype; ..." instead of the Goal's
    IFS=';' read -ra shapes <<<"$DECODE_SHAPES"
    for sh in "${shapes[@]}"; do run $sh; done
  else
    for b in 1 8 64; do
      for ctx in 4096 32768 131072; do
        for nq in 1 4; do
          for kind in contiguous paged/16 paged/64; do run $kind $b $ctx $nq f16; done
        done
      done
    done
    for kind in contiguous paged/16; do run $kind 8 32768 1 i8; done
  fi
  rm -f "$out/run.tmp"
  # TORCH_ARGS: torch_decode.py's --batch, --context, --rows (all of the Goal's by default)
  timeout "${TORCH_LIMIT:-300}" python3 "$dir/torch_decode.py" ${TORCH_ARGS:-} \
    --json "$out/decode_torch.json" >"$out/decode_torch.txt" 2>&1
  python3 "$dir/gpu-decode-table.py" "$out/decode_time.txt" "$out/decode_torch.json" \
    >"$out/decode_table.md" 2>&1
  cat "$out/decode_table.md"
fi
if [[ " $steps " == *" bench "* ]]; then # the Goal's shapes through `clattn bench`: one process
  # per cache kind, so one build and one streaming read each (decode_bench.txt), then PyTorch's
  # contiguous one-row shapes (decode_torch.json, .txt)
  bn=("$cl" bench --heads 32 --heads-kv 8 --head-dim 128 --dtype f16 --warmup 5 --repeat 20)
  for a in "contiguous --seqlen 4096,32768,131072 --batch 1,8" "contiguous --seqlen 4096 --batch 64" \
    "contiguous --seqlen 32768 --batch 8 --seqlen-q 4" "paged --page-size 16 --seqlen 32768 --batch 8" \
    "contiguous --cache-dtype i8 --seqlen 32768 --batch 8"; do
    echo "== --kv-cache $a" >>"$out/decode_bench.txt"
    timeout 60 "${bn[@]}" --kv-cache $a >>"$out/decode_bench.txt" 2>&1
  done
  timeout "${TORCH_LIMIT:-150}" python3 -u "$dir/torch_decode.py" --batch 1,8,64 --context 4096,32768 \
    --rows 1 --json "$out/decode_torch.json" >"$out/decode_torch.txt" 2>&1
fi
if [[ " $steps " == *" sweep "* ]]; then
  # Configs forced at batch 64 (no key splits needed), context 8k, GQA 4's one row (4-row tiles),
  # fp16 contiguous: each one's time and its registers and spills (-cl-nv-verbose, the build
  # log), over the axes the register estimate weighs (decode_family.c): work-items per key, rows
  # per work-item, load width and when V is loaded, then the block length of the cost's choice.
  # Config strings: decode/BQ/BKV/TPR/RM/stage/pad/vec.
  # SWEEP_CFGS: the configs instead (space-separated); SWEEP_ARGS: more run arguments (e.g.
  # --cache-dtype i8).
  cfgs=()
  for st in 1 2 3; do for vec in 4 2; do for tpr in 2 4; do for rm in 1 2 4; do
    cfgs+=(decode/4/64/$tpr/$rm/$st/0/$vec)
  done; done; done; done
  cfgs+=(decode/4/32/4/1/1/0/4 decode/4/128/2/1/1/0/4 decode/4/32/8/1/3/0/4 decode/4/128/2/2/3/0/4)
  [ -n "${SWEEP_CFGS:-}" ] && read -ra cfgs <<<"$SWEEP_CFGS"
  for c in "${cfgs[@]}"; do
    CLATTN_BUILD_LOG=1 CLATTN_BUILD_OPTIONS=-cl-nv-verbose timeout 120 "$cl" run --kv-cache \
      contiguous --dtype f16 --batch 64 --heads 32 --heads-kv 8 --head-dim 128 --seqlen-q 1 \
      --context 8192 --no-check --warmup 3 --repeat 10 --config "$c" ${SWEEP_ARGS:-} >"$out/run.tmp" 2>&1
    echo "$c ${SWEEP_ARGS:-} | $(grep -oE 'median [0-9.]+ ms|[0-9]+% of a stream|CLATTN_[A-Z_]+.*' "$out/run.tmp" |
      tr '\n' ' ') | $(grep -A4 clattn_decode "$out/run.tmp" | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' |
      tr '\n' ' ')" \
      >>"$out/decode_sweep.txt"
  done
  rm -f "$out/run.tmp"
fi
if [[ " $steps " == *" splits "* ]]; then
  for sh in "1 4096" "8 4096" "1 32768" "8 32768"; do
    read -r b ctx <<<"$sh"
    for n in planned 1 2 4 8 16 24 32 48 64; do
      r=$(CLATTN_SPLITS=${n/planned/} timeout 60 "$cl" run --kv-cache contiguous --dtype f16 \
        --batch $b --heads 32 --heads-kv 8 --head-dim 128 --seqlen-q 1 --context $ctx --no-check \
        --warmup 5 --repeat 30 2>&1 | grep -oE 'key range[s]?|[0-9]+ key ranges?|median [0-9.]+ ms|[0-9]+% of a stream' |
        tr '\n' ' ')
      echo "b $b ctx $ctx splits $n | $r"
    done
  done | tee "$out/decode_splits.txt"
fi
if [[ " $steps " == *" host "* ]]; then
  for n in planned 1; do
    echo "== CLATTN_SPLITS=${n/planned/(planned)}, 5 + 200 calls timed, 200 for the host column"
    CLATTN_SPLITS=${n/planned/} LD_PRELOAD="$dir/libclattn_host_shim.so" timeout 60 "$cl" bench \
      --kv-cache contiguous --dtype f16 --heads 32 --heads-kv 8 --head-dim 128 --seqlen 32768 \
      --batch 8 --warmup 5 --repeat 200 2>&1 | grep -E 'host_shim|ranges?$'
  done | tee "$out/decode_host.txt"
fi
if [[ " $steps " == *" paged-ab "* ]]; then
  for r in 1 2; do for side in new base; do
    for kv in "paged --page-size 16" "paged --page-size 64" contiguous; do
      kd=()
      [ $side = base ] && kd=(env CLATTN_KERNEL_DIR="$dir/basecl")
      x=$(timeout 40 "${kd[@]}" "$cl" run --kv-cache $kv --dtype f16 --batch 8 --heads 32 \
        --heads-kv 8 --head-dim 128 --seqlen-q 1 --context 32768 --no-check --warmup 5 \
        --repeat 30 2>&1 | grep -oE '[0-9]+ key ranges?|median [0-9.]+ ms|[0-9]+% of a stream' |
        tr '\n' ' ')
      echo "r$r $side $kv | $x"
    done
  done; done | tee "$out/decode_paged_ab.txt"
  for a in "--page-size 16" "--page-size 64 --kv-layout hnd" "--page-size 16 --cache-dtype i8"; do
    echo "check paged $a: $(timeout 40 "$cl" run --kv-cache paged $a --dtype f16 --batch 3 \
      --heads 32 --heads-kv 8 --head-dim 128 --seqlen-q 1 --context 2000 2>&1 | grep check)"
  done | tee -a "$out/decode_paged_ab.txt"
  echo "base kernels: $(cat "$dir/basecl/commit" 2>/dev/null)" >>"$out/decode_paged_ab.txt"
fi
if [[ " $steps " == *" merge-ab "* ]]; then
  for a in "contiguous --dtype f16" "paged --page-size 16 --dtype bf16 --cache-dtype i8 --softcap 30 --sinks" \
    "contiguous --dtype f16 --seqlen-q 4 --causal --window 300,0" "paged --page-size 64 --dtype f32" \
    "contiguous --dtype f16 --cache-dtype i8 --alibi"; do
    echo "check $a: $(timeout 60 "$cl" run --kv-cache $a --batch 5 --heads 32 --heads-kv 8 \
      --head-dim 128 --context 2000 --lengths 2000,1,0,1333,777 2>&1 | grep -E 'plan:|check:' |
      tr '\n' ' ')"
  done | tee "$out/decode_merge_ab.txt"
  bn=("$cl" bench --heads 32 --heads-kv 8 --head-dim 128 --dtype f16 --warmup 5 --repeat 20)
  for r in 1 2; do for fm in 1 0 rule; do
    for a in "contiguous --seqlen 4096,32768 --batch 1,8" "contiguous --seqlen 4096 --batch 64" \
      "contiguous --seqlen 32768 --batch 8 --seqlen-q 4" "paged --page-size 16 --seqlen 32768 --batch 8" \
      "contiguous --cache-dtype i8 --seqlen 32768 --batch 8"; do
      echo "== r$r CLATTN_FUSED_MERGE=$fm --kv-cache $a"
      fe=(env CLATTN_FUSED_MERGE=$fm)
      [ $fm = rule ] && fe=(env -u CLATTN_FUSED_MERGE)
      timeout 60 "${fe[@]}" "${bn[@]}" --kv-cache $a 2>&1 | grep -E '^ +[0-9]'
    done
  done; done | tee -a "$out/decode_merge_ab.txt"
fi
