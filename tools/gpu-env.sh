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
