# Sourced by the device scripts (tools/gpu-*.sh) with the folder from tools/gpu-pack.sh as $1:
# sets dir, out ($OUT, made), cl (the command), the NVIDIA ICD, the carried libraries on
# LD_LIBRARY_PATH, and a program cache in /tmp (never under $OUT, whose files come back).
dir=$(cd "${1:-.gpu}" && pwd)
out=${OUT:-gpu-out}
mkdir -p "$out"
source "$dir/nvidia-env.sh"
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CLATTN_CACHE_DIR=/tmp/clattn-cache CLATTN_DEVICE=${CLATTN_DEVICE:-NVIDIA}
cl="$dir/clattn"

# At most eight files come back from a device call (stop 42 lost a table that way): at its exit,
# a script packs what it wrote under $out (anything but earlier archives) into one archive.
gpu_archive() {
  local files
  files=$(cd "$out" && find . -maxdepth 1 -type f ! -name '*.tgz' -printf '%P\n')
  [ -n "$files" ] && (cd "$out" && tar czf "results-$(basename "$0" .sh)-$$.tgz" $files &&
    rm -f $files)
}
trap gpu_archive EXIT

# The commit of the packed build and the GPU's name and driver: the first lines of a run's record.
gpu_env_header() {
  echo "commit $(cat "$dir/commit")"
  nvidia-smi --query-gpu=name,driver_version --format=csv
}

# DESIGN.md's shape list (tools/gpu-shapes.txt) through `clattn run` with extra arguments, each
# run checked and killed after LIMIT seconds: a line per shape in $out/correctness_NAME.txt and
# a summary line on stdout. Usage: gpu_check_list NAME LIMIT [clattn run arguments...]
# GPU_FORCE=K/BQ/BKV... adds --config GPU_FORCE to the shapes whose head dims are at most
# GPU_FORCE_MAX_DIM (128) and multiples of GPU_FORCE_DIV (1); the others run their plans.
# GPU_SHAPES: another shape file (e.g. the list without its largest shape, for a short call).
gpu_check_list() {
  local name=$1 limit=$2 pass_n=0 fail_n=0 r
  shift 2
  while read -r b hq hkv nq nkv d dv f lay off; do
    local args=(--batch $b --heads $hq --heads-kv $hkv --seqlen-q $nq --seqlen-kv $nkv
      --head-dim $d --head-dim-v $dv --layout $lay --offset $off --lse --repeat 0 --warmup 0 "$@")
    [ "$f" = c ] && args+=(--causal)
    local most=${GPU_FORCE_MAX_DIM:-128} div=${GPU_FORCE_DIV:-1}
    [ -n "${GPU_FORCE:-}" ] && [ "$d" -le "$most" ] && [ "${dv/#0/$d}" -le "$most" ] &&
      [ $((d % div)) = 0 ] && [ $((${dv/#0/$d} % div)) = 0 ] && args+=(--config "$GPU_FORCE")
    if timeout "$limit" "$cl" run "${args[@]}" >"$out/run.tmp" 2>&1; then
      pass_n=$((pass_n + 1)) r=PASS
    else fail_n=$((fail_n + 1)) r=FAIL; fi
    echo "$r ${args[*]} | $(grep -E 'check|plan:|clattn:' "$out/run.tmp" | tr '\n' ' ' | cut -c1-300)" \
      >>"$out/correctness_$name.txt"
  done < <(grep -v "^#" "${GPU_SHAPES:-$(dirname "${BASH_SOURCE[0]}")/gpu-shapes.txt}")
  rm -f "$out/run.tmp"
  echo "$name: $pass_n passed, $fail_n failed"
}
