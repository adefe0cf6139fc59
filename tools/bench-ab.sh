#!/usr/bin/env bash
# A/B timing of two `clattn` binaries on the fused path, interleaved round after round, so that
# a refactor can be shown to keep speed (or what it costs): both see the same machine state.
#   tools/bench-ab.sh OLD_CLATTN NEW_CLATTN [ROUNDS]   (ROUNDS: 5)
# Shapes (PoCL-sized, B = 1, H = ${BENCH_AB_HEADS:-2}): forward at d = 64 and 128, N = 512 and
# 1024, causal and not (one `clattn bench` call), and forward + backward at N = 512, d = 64
# (`bench --backward`). Each call: --warmup ${BENCH_AB_WARMUP:-2} --repeat ${BENCH_AB_REPEAT:-10};
# its median per shape is one sample. Round 0 runs each binary once untimed, to compile its
# kernels into its own program cache; rounds 1..ROUNDS then alternate the order (old first in
# odd rounds, new first in even ones). Each binary has its own temporary cache, tuning
# database and PoCL cache (fresh, removed at exit), so neither reads the other's or the user's.
# Prints per shape: the median over rounds of old and new, the median over rounds of the
# per-round ratio new/old with its range, the same ratio of the calls' fastest runs, and
# whether the two binaries plan the same fused config (for fwd+bwd the backward's too; clattn
# explain); above the table, how busy the machine was with other processes during the run.
# About 1.5 minutes on an idle 2-core PoCL CPU (91 s). Keep the machine otherwise idle; an A/A
# run (the same binary twice) shows the noise level.
# Exit: 0; 2 usage error; 3 a bench call failed (its stderr is shown).
set -uo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 OLD_CLATTN NEW_CLATTN [ROUNDS]  (both executable)" >&2
  exit 2
fi
rounds=${3:-5}
case $rounds in '' | *[!0-9]* | 0) echo "$0: ROUNDS must be a positive integer" >&2; exit 2 ;; esac
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
bin_old=$(abs "$1") bin_new=$(abs "$2")
heads=${BENCH_AB_HEADS:-2} warmup=${BENCH_AB_WARMUP:-2} repeat=${BENCH_AB_REPEAT:-10}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-ab.XXXXXX") || exit 3
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old" "$tmp/new"
unset CLATTN_KERNEL_DIR CLATTN_BUILD_OPTIONS CLATTN_BUILD_LOG CLATTN_MMA_EMULATE

common=(--columns fused --batch 1 --heads "$heads" --csv)
sets=(fwd bwd)
declare -A set_args=(
  [fwd]="--seqlen 512,1024 --head-dim 64,128 --causal both"
  [bwd]="--seqlen 512 --head-dim 64 --causal off --backward")

# run SIDE SET WARMUP REPEAT: one bench call of one binary in its own folders; CSV on stdout.
run() {
  local side=$1 set=$2 w=$3 r=$4 bin
  [ "$side" = old ] && bin=$bin_old || bin=$bin_new
  # shellcheck disable=SC2086 # set_args holds several options
  CLATTN_CACHE_DIR=$tmp/$side/cache CLATTN_TUNING_DB=$tmp/$side/tuning.json \
    POCL_CACHE_DIR=$tmp/$side/pocl XDG_CACHE_HOME=$tmp/$side/xdg \
    "$bin" bench "${common[@]}" ${set_args[$set]} --warmup "$w" --repeat "$r" \
    2>"$tmp/err" || {
    echo "$0: $side ($bin) bench ${set_args[$set]} failed:" >&2
    cat "$tmp/err" >&2
    exit 3
  }
}

# The machine's busy CPU time (all processes) from /proc/stat, in clock ticks: set beside this
# script's own, it tells whether something else ran during the measurement.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat 2>/dev/null; }
start=$SECONDS busy0=$(busy_ticks)
echo "round 0: compiling each binary's kernels (untimed)" >&2
for side in old new; do for set in "${sets[@]}"; do run $side "$set" 0 1 >/dev/null; done; done
: >"$tmp/samples"
for ((round = 1; round <= rounds; round++)); do
  order="old new"
  ((round % 2 == 0)) && order="new old"
  echo "round $round/$rounds ($order) at $((SECONDS - start)) s" >&2
  for set in "${sets[@]}"; do
    for side in $order; do
      # CSV columns: seqlen,head_dim,causal,batch,heads,flops,...,fused_ms, fused_min_ms (10, 11)
      run "$side" "$set" "$warmup" "$repeat" |
        awk -F, -v s="$set" -v side="$side" -v rd="$round" \
          'NR > 1 { printf "%s N=%s d=%s causal=%s B=%s H=%s\t%s\t%s\t%s\t%s\n",
                    s, $1, $2, $3, $4, $5, rd, side, $10, $11 }' \
          >>"$tmp/samples" || exit 3 # run's message is out; its exit was a subshell's
    done
  done
done

# The fused config each binary plans per shape (same caches: no compile now).
: >"$tmp/configs"
while IFS=$'\t' read -r key; do
  n=${key#* N=} n=${n%% *} d=${key#* d=} d=${d%% *} c=${key#* causal=} c=${c%% *}
  args=(--batch 1 --heads "$heads" --seqlen "$n" --head-dim "$d")
  [ "$c" = 1 ] && args+=(--causal)
  for side in old new; do
    [ "$side" = old ] && bin=$bin_old || bin=$bin_new
    CLATTN_CACHE_DIR=$tmp/$side/cache CLATTN_TUNING_DB=$tmp/$side/tuning.json \
      POCL_CACHE_DIR=$tmp/$side/pocl XDG_CACHE_HOME=$tmp/$side/xdg \
      "$bin" explain "${args[@]}" >"$tmp/explain" 2>/dev/null
    cfg=$(sed -n 's/^config: *\([^,]*\),.*/\1/p' "$tmp/explain")
    [ "${key%% *}" = bwd ] &&
      cfg="$cfg; $(sed -n 's/^backward: *\([^(]*\) (.*/\1/p' "$tmp/explain")"
    [ -s "$tmp/device.$side" ] ||
      sed -n 's/^device: *\(.*\) | global.*/\1/p' "$tmp/explain" >"$tmp/device.$side"
    printf '%s\t%s\t%s\n' "$key" "$side" "${cfg:-?}" >>"$tmp/configs"
  done
done < <(cut -f1 "$tmp/samples" | awk '!seen[$0]++')

busy1=$(busy_ticks) wall=$((SECONDS - start))
# This shell's children's user and system time (bash `times`, second line: "XmY.YYYs XmY.YYYs").
times >"$tmp/times" # not in a pipeline: there it would be a subshell's
own=$(tail -n 1 "$tmp/times" |
  awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } print t }')
load=""
if [ -n "$busy0" ] && [ -n "$busy1" ] && [ "$wall" -gt 0 ]; then
  hz=$(getconf CLK_TCK) cores=$(nproc)
  load=$(awk -v b=$((busy1 - busy0)) -v hz="$hz" -v w="$wall" -v c="$cores" -v o="$own" \
    'BEGIN { printf "machine busy %.0f%% of %d cores during the run, this script %.0f%%, " \
                    "others %.0f%%",
             100 * b / hz / w / c, c, 100 * o / w / c, 100 * (b / hz - o) / w / c }')
fi
echo "old: $bin_old"
echo "new: $bin_new"
echo "device: $(cat "$tmp/device.old")"
cmp -s "$tmp/device.old" "$tmp/device.new" || echo "device (new): $(cat "$tmp/device.new")"
echo "fused path, B=1 H=$heads, --warmup $warmup --repeat $repeat per call, $rounds rounds" \
  "interleaved; old/new: median over rounds of each call's median; ratio: median (min-max)" \
  "over rounds of new/old (of the calls' medians; min: of their fastest runs); fwd+bwd rows" \
  "time forward + backward; $wall s${load:+; $load}"
python3 - "$tmp/samples" "$tmp/configs" <<'EOF'
import sys
from statistics import median
samples, configs = {}, {}
order = []
for line in open(sys.argv[1]):
    key, rd, side, ms, mn = line.rstrip("\n").split("\t")
    if key not in samples:
        samples[key] = {}
        order.append(key)
    samples[key].setdefault(int(rd), {})[side] = (float(ms), float(mn))
for line in open(sys.argv[2]):
    key, side, cfg = line.rstrip("\n").split("\t")
    configs.setdefault(key, {})[side] = cfg
print(f"{'shape':<38} {'old ms':>9} {'new ms':>9} {'new/old':>7} {'range':>13} "
      f"{'min new/old':>11}  plan")
for key in order:
    both = [r for r in samples[key].values() if "old" in r and "new" in r]
    old = [r["old"][0] for r in both]
    new = [r["new"][0] for r in both]
    ratios = [r["new"][0] / r["old"][0] for r in both if r["old"][0] > 0] or [float("nan")]
    ratios_min = [r["new"][1] / r["old"][1] for r in both if r["old"][1] > 0] or [float("nan")]
    c = configs.get(key, {})
    plan = "same " + c.get("old", "?") if c.get("old") == c.get("new") else \
        f"DIFFERS old {c.get('old', '?')} new {c.get('new', '?')}"
    name = key.replace("bwd ", "fwd+bwd ", 1)
    med = lambda v: median(v) if v else float("nan")
    print(f"{name:<38} {med(old):9.3f} {med(new):9.3f} {median(ratios):7.3f} "
          f"{min(ratios):6.3f}-{max(ratios):.3f} {median(ratios_min):11.3f}  {plan}")
EOF
