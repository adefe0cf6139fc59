#!/usr/bin/env bash
# On the device machine: the variants of issue 17 (sliding window, top-left causal, softcap,
# ALiBi, sinks).
# check: a few variant problems through `clattn run` in fp32, fp16 and bf16, forward and
# backward, on the plans there (the tensor-core families, which CI runs only emulated, and
# whose warp-level tile skipping only a GPU runs). time: `clattn bench --columns fused` of the
# same shapes with and without each variant, so each variant's cost (softcap: no work removed)
# and a window's saving (4096 keys at N = 32768 against full causal) are ratios of one call.
# time-args: ALiBi and sinks (clattn_args buffers, which bench does not take) and the softcap
# against plain through `clattn run --no-check`, forward and backward, in turns, ROUNDS rounds; the medians
# over rounds and their ratios to plain go to args_time.txt.
# lens: seqlens_kv and CLATTN_VARLEN checked (fp32, fp16, bf16, forward and backward) on the
# plans there. padded: a padded batch (B = 8, H = 16, d = 128, N = 4096, fp16, LENGTHS) through
# clattn's seqlens_kv and varlen calls beside PyTorch's SDPA with the equivalent key-padding mask
# and its nested jagged (varlen) path, in the same call (padded.txt).
# cap-impl: the softcap's tanh several ways (cl/common.cl's CAP_FAST through CLATTN_BUILD_OPTIONS:
# 0 the rational, 1 from native exp2 and reciprocal, 2 tanh.approx.f32, the default of half
# storage on NVIDIA;
# CAP_IMPLS picks them ("0 1"; an experiment's value too); CAP_DTYPES the timed ones), each
# checked (fp32, fp16, bf16, forward and backward) and timed against plain, in turns, ROUNDS
# rounds (cap_impl.txt). Half storage on NVIDIA gets -DCAP_FAST=2 from the host: the rational
# column relies on the later -DCAP_FAST=0 winning, as clang-based compilers do (a warning).
# window-ab: a window of 4096 at N = 32768 against full causal (fp16, d = 128, 16 heads), forward
# (bench) and forward + backward (run --backward), with the packed kernels and a baseline's
# (gpu-pack.sh's BASE_KERNELS, .gpu/basecl, through CLATTN_KERNEL_DIR) in turns, twice; windowed
# problems checked first (fp16, forward and backward) (window_ab.txt, window_check.txt). Stop 33's
# A/B of the half kernels' unmasked inner tiles (76b3b2e against 7284196).
# Usage: tools/gpu-variants.sh DIR [check] [time] [time-args] [cap-impl] [lens] [padded]
# [window-ab] (DIR from tools/gpu-pack.sh).
# Writes to $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/gpu-env.sh" "${1:-.gpu}"
shift
steps=${*:-check time}
# Timed rounds "round dtype mask pass variant ms" (ms "failed" when a run failed) into medians
# per (dtype, mask, pass) and variant: med(k, variant); each table's END block follows.
med_awk='$6 != "failed" { k = $2 " " $3 " " $4; v[k, $5, ++n[k, $5]] = $6; keys[k] = 1 }
  function med(k, t,   c, i, j, a, x) {
    c = n[k, t]; for (i = 1; i <= c; i++) a[i] = v[k, t, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    return a[int((c + 1) / 2)] }'
gpu_env_header \
  | tee -a "$out/env.txt"
if [[ " $steps " == *" check "* ]]; then
  n=0 bad=0
  for dt in f32 f16 bf16; do
    for v in "--causal --window 100,0" "--causal-top-left" "--window 64,32 --softcap 30" \
      "--causal --softcap 50 --heads-kv 2" "--alibi --causal" "--sinks --causal --window 100,0" \
      "--alibi-per-batch --sinks --softcap 30 --heads-kv 2"; do
      for pass in "" --backward; do
        args=(--dtype $dt --batch 2 --heads 4 --seqlen-q 777 --seqlen-kv 1030 --head-dim 128
          --lse --repeat 0 --warmup 0 $v $pass)
        n=$((n + 1))
        if ! timeout 120 "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then bad=$((bad + 1)); fi
        echo "$(grep -q 'PASS' "$out/run.tmp" && echo PASS || echo FAIL) ${args[*]} |" \
          "$(grep -E 'plan:|backward:|check|clattn:' "$out/run.tmp" | tr '\n' ' ' | cut -c1-400)" \
          >>"$out/variants_check.txt"
      done
    done
  done
  rm -f "$out/run.tmp"
  echo "variants check: $((n - bad)) of $n passed" | tee -a "$out/env.txt"
fi
if [[ " $steps " == *" time "* ]]; then
  b=(bench --columns fused --warmup 3 --repeat 10 --json)
  for dt in f16 f32; do
    # softcap against plain (no work removed); N = 4096, d = 128, 16 heads
    "$cl" "${b[@]}" --dtype $dt --seqlen 4096 --head-dim 128 --heads 16 --causal both \
      >"$out/time_${dt}_plain.json" 2>>"$out/time.err"
    "$cl" "${b[@]}" --dtype $dt --seqlen 4096 --head-dim 128 --heads 16 --causal both \
      --softcap 30 >"$out/time_${dt}_softcap.json" 2>>"$out/time.err"
    # a window of 4096 at N = 32768 against full causal; one head batch
    "$cl" "${b[@]}" --dtype $dt --seqlen 32768 --head-dim 128 --heads 16 --causal on \
      >"$out/time_${dt}_causal32k.json" 2>>"$out/time.err"
    "$cl" "${b[@]}" --dtype $dt --seqlen 32768 --head-dim 128 --heads 16 --causal on \
      --window 4096,0 >"$out/time_${dt}_window32k.json" 2>>"$out/time.err"
  done
  # the backward of the same window against full causal (fp16), forward + backward per call
  for w in "" "--window 4096,0"; do
    t=$("$cl" run --backward --dtype f16 --batch 1 --heads 16 --seqlen 32768 --head-dim 128 \
      --causal $w --no-check --warmup 2 --repeat 5 2>&1 | grep -E 'median' | tr '\n' ' ')
    echo "backward f16 N=32768 causal ${w:-(full)}: ${t:-failed}"
  done | tee "$out/time_backward_window.txt"
fi
if [[ " $steps " == *" time-args "* ]]; then
  rounds=${ROUNDS:-3}
  for round in $(seq 1 "$rounds"); do
    for dt in f16 f32; do
      for mask in "" --causal; do
        for pass in "" --backward; do
          for v in plain --alibi --sinks "--alibi --sinks" "--softcap 30"; do
            t=$("$cl" run --dtype $dt --batch 1 --heads 16 --seqlen 4096 --head-dim 128 $mask \
              $pass --no-check --warmup 3 --repeat 10 ${v/plain/} 2>&1 |
              grep -oE 'median [0-9.]+' | awk '{print $2}')
            echo "$round $dt ${mask:-full} ${pass:-forward} ${v// /+} ${t:-failed}"
          done
        done
      done
    done
  done >"$out/args_time.raw"
  awk "$med_awk"'
    END { for (k in keys) { p = med(k, "plain")
      printf "%s  plain %.3f ms  alibi %.3f  sinks %.3f  both %.3f  softcap %.3f\n", k, p,
        med(k, "--alibi") / p, med(k, "--sinks") / p, med(k, "--alibi+--sinks") / p,
        med(k, "--softcap+30") / p } }' \
    "$out/args_time.raw" | sort | tee "$out/args_time.txt"
fi
if [[ " $steps " == *" cap-impl "* ]]; then
  impls=${CAP_IMPLS:-0 1}
  for impl in $impls; do
    for dt in f32 f16 bf16; do
      for pass in "" --backward; do
        r=$(CLATTN_BUILD_OPTIONS=-DCAP_FAST=$impl timeout 120 "$cl" run --dtype $dt --batch 2 \
          --heads 4 --heads-kv 2 --seqlen-q 777 --seqlen-kv 1030 --head-dim 128 --causal \
          --softcap 30 --lse --repeat 0 --warmup 0 $pass 2>&1 | grep -E 'check|clattn:' | tr '\n' ' ')
        echo "impl $impl $dt ${pass:---forward}: $(echo "$r" | grep -q PASS && echo PASS || echo FAIL) $r"
      done
    done
  done | cut -c1-400 >"$out/cap_impl_check.txt"
  grep -c PASS "$out/cap_impl_check.txt" | sed 's/^/cap-impl checks passed: /' | tee -a "$out/env.txt"
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for dt in ${CAP_DTYPES:-f16 f32}; do
      for mask in "" --causal; do
        for pass in "" --backward; do
          for v in plain $impls; do
            a=(--softcap 30)
            [ $v = plain ] && a=()
            t=$(CLATTN_BUILD_OPTIONS=-DCAP_FAST=${v/plain/0} "$cl" run --dtype $dt --batch 1 \
              --heads 16 --seqlen 4096 --head-dim 128 $mask $pass --no-check --warmup 3 \
              --repeat 10 "${a[@]}" 2>&1 | grep -oE 'median [0-9.]+' | awk '{print $2}')
            echo "$round $dt ${mask:-full} ${pass:-forward} $v ${t:-failed}"
          done
        done
      done
    done
  done >"$out/cap_impl.raw"
  awk "$med_awk"'
    END { for (k in keys) { p = med(k, "plain"); printf "%s  plain %.3f ms  softcap:", k, p
      for (i = 0; i <= 4; i++) if (n[k, i] > 0) printf "  CAP_FAST=%d %.3f", i, med(k, i) / p
      printf "\n" } }' \
    "$out/cap_impl.raw" | sort | tee "$out/cap_impl.txt"
fi
if [[ " $steps " == *" lens "* ]]; then
  n=0 bad=0
  for dt in f32 f16 bf16; do
    for v in "--seqlens-kv --batch 5 --causal" "--seqlens-kv --batch 5 --heads-kv 2 --alibi --sinks" \
      "--varlen --batch 8 --causal" "--varlen --batch 8 --window 64,0 --causal --sinks --heads-kv 2"; do
      for pass in "" --backward; do
        args=(--dtype $dt --heads 4 --seqlen-q 377 --seqlen-kv 530 --head-dim 128 --lse --repeat 0
          --warmup 0 $v $pass)
        n=$((n + 1))
        if ! timeout 120 "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then bad=$((bad + 1)); fi
        echo "$(grep -q 'PASS' "$out/run.tmp" && echo PASS || echo FAIL) ${args[*]} |" \
          "$(grep -E 'plan:|backward:|check|clattn:' "$out/run.tmp" | tr '\n' ' ' | cut -c1-500)" \
          >>"$out/lens_check.txt"
      done
    done
  done
  rm -f "$out/run.tmp"
  echo "lens check: $((n - bad)) of $n passed" | tee -a "$out/env.txt"
fi
if [[ " $steps " == *" padded "* ]]; then
  lengths=${LENGTHS:-4096,3000,2048,1024,3500,512,2600,1800}
  common=(--dtype f16 --batch 8 --heads 16 --seqlen 4096 --head-dim 128 --no-check --warmup 3
    --repeat 10 --lengths "$lengths")
  for pass in "" --backward; do
    for mode in --seqlens-kv --varlen; do
      t=$("$cl" run "${common[@]}" $mode $pass 2>&1 | grep -oE 'median [0-9.]+' | awk '{print $2}')
      echo "clattn ${mode#--} ${pass:---forward} ${t:-failed} ms"
    done
    # the dense problem (every entry N long), for scale
    t=$("$cl" run --dtype f16 --batch 8 --heads 16 --seqlen 4096 --head-dim 128 --no-check \
      --warmup 3 --repeat 10 $pass 2>&1 | grep -oE 'median [0-9.]+' | awk '{print $2}')
    echo "clattn dense ${pass:---forward} ${t:-failed} ms"
  done | tee "$out/padded.txt"
  timeout 300 python3 "$dir/torch_padded.py" --lengths "$lengths" --n 4096 --heads 16 --d 128 \
    --dtype float16 --backward | tee -a "$out/padded.txt"
fi
if [[ " $steps " == *" window-ab "* ]]; then
  for v in "--causal --window 100,0" "--window 64,32 --softcap 30" "--sinks --causal --window 300,0" \
    "--window 1000,200 --heads-kv 2"; do
    for pass in "" --backward; do
      args=(--dtype f16 --batch 2 --heads 4 --seqlen-q 777 --seqlen-kv 1030 --head-dim 128 --lse
        --repeat 0 --warmup 0 $v $pass)
      timeout 60 "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1
      echo "$(grep -q PASS "$out/run.tmp" && echo PASS || echo FAIL) ${args[*]} |" \
        "$(grep -E 'plan:|backward:|check|clattn:' "$out/run.tmp" | tr '\n' ' ' | cut -c1-300)"
    done
  done >"$out/window_check.txt"
  rm -f "$out/run.tmp"
  fw() { timeout 40 "$cl" bench --columns fused --warmup 3 --repeat 10 --dtype f16 --seqlen 32768 \
    --head-dim 128 --heads 16 --causal on $1 2>&1 | grep -E '^ +[0-9]'; }
  bw() { timeout 60 "$cl" run --backward --dtype f16 --batch 1 --heads 16 --seqlen 32768 \
    --head-dim 128 --causal $1 --no-check --warmup 2 --repeat 5 2>&1 |
    grep -oE 'backward median [0-9.]+ ms'; }
  for r in 1 2; do
    for k in new base; do
      if [ $k = base ]; then export CLATTN_KERNEL_DIR=$dir/basecl; else unset CLATTN_KERNEL_DIR; fi
      echo "== $k $r causal forward: $(fw '')"
      echo "== $k $r window forward: $(fw '--window 4096,0')"
      echo "== $k $r causal backward: $(bw '')"
      echo "== $k $r window backward: $(bw '--window 4096,0')"
    done
  done | tee "$out/window_ab.txt"
  unset CLATTN_KERNEL_DIR
fi
