#!/usr/bin/env bash
# A/B of the element-wise and row-kernel fast paths of issue 14 (branch
# ewfast) on the GPU: bench/kernels.py over the element-wise chains, row
# fusions and bf16 sums, iron only, with every switch on (default), then
# with each one off, then all off (the code before the branch). Needs
# build-dev (scripts/gpu_session.sh build). Logs and tables under $OUT/ab.
# Usage: scripts/ewfast_ab.sh [PROGRAMS]   (default: the list below)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/iron-out}
mkdir -p "$OUT/ab"
progs=${1:-"chain8_f32,chain8_bf16,softmax_f32,softmax_bf16,log_softmax_f32,layernorm_f32,sum_bf16_256m"}
export IRON_CACHE_DIR=$root/build-dev/kcache
run() {  # NAME ENV...
  local name=$1; shift
  env "$@" IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
    python3 bench/kernels.py --frameworks iron --rounds 1 --only "$progs" \
    --md "$OUT/ab/$name.md" >"$OUT/ab/$name.log" 2>&1
  echo "== $name ($*)"; grep -E '^\|' "$OUT/ab/$name.md" | cut -d'|' -f2,4 | tail -n +3
}
run default
run hw_round_off IRON_CUDA_HW_ROUND=0
run ftz_ops_off IRON_CUDA_FTZ_OPS=0
run vec_math_off IRON_CUDA_VECTORIZE_MATH=0
run minmax_off IRON_CUDA_SELECT_MINMAX=0
run stage_out_off IRON_CUDA_ROW_STAGE_OUT=0
run all_off IRON_CUDA_HW_ROUND=0 IRON_CUDA_FTZ_OPS=0 IRON_CUDA_VECTORIZE_MATH=0 \
  IRON_CUDA_SELECT_MINMAX=0 IRON_CUDA_ROW_STAGE_OUT=0
