#!/usr/bin/env bash
# On the device machine: split keys (flash-decoding) with the default plan, against the same
# config forced (an override is never split), on decoding-like shapes: few query rows, many keys,
# batch 1, heads 2048/d. Each run checks O and LSE against the host reference.
# Usage: tools/gpu-split.sh DIR (from tools/gpu-pack.sh); env CONFIG_64, CONFIG_128 (the configs
# to force, the H200 built-ins by default). Writes $OUT/split.txt.
set -uo pipefail
source "$(dirname "$0")/gpu-env.sh" "${1:-.gpu}"
echo "commit $(cat "$dir/commit")" >"$out/split.txt"
for d in 64 128; do
  cfg=forward_mma/128/32/1/1/1/1/4
  [ $d = 64 ] && cfg=${CONFIG_64:-$cfg} || cfg=${CONFIG_128:-$cfg}
  for shape in "1 16384" "1 131072" "16 65536" "128 16384"; do
    set -- $shape
    for c in 0 1; do
      args=(--batch 1 --heads $((2048 / d)) --seqlen-q $1 --seqlen-kv $2 --head-dim $d --lse
        --warmup 3 --repeat 20)
      [ $c = 1 ] && args+=(--causal)
      for how in split forced; do
        extra=()
        [ $how = forced ] && extra=(--config "$cfg")
        r=$("$cl" run "${args[@]}" "${extra[@]}" 2>&1 | grep -E 'why:|check:|time:|clattn:' |
          sed -E 's/^why: .*(keys split into [0-9]+ ranges of [0-9]+).*/\1/; s/^why: .*/no split/' |
          tr '\n' ' ')
        echo "d=$d nq=$1 nkv=$2 causal=$c $how: $r" >>"$out/split.txt"
      done
    done
  done
done
