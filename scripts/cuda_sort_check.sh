#!/usr/bin/env bash
# GPU check of the CUDA sort (through the device tool): builds, then runs
# tests/python/test_cuda_sort.py on the CUDA device three ways (defaults;
# IRON_CUDA_SORT_BLOCK_MAX=0: every row through the device-wide sorts;
# additionally IRON_CUDA_SORT_RADIX=0: the merge sort instead of the radix
# sort), the sort programs of the pytest corpus, and bench/sort_bench.py
# (iron vs XLA:GPU, 10^4 .. 10^8 elements).
# Usage: scripts/cuda_sort_check.sh [tests|merge|bench|all]; logs under $OUT.
#   tests: the pytest file with the defaults and with BLOCK_MAX=0;
#   merge: with BLOCK_MAX=0 RADIX=0, and the corpus's sort programs;
#   bench: bench/sort_bench.py. Each fits one 10-minute device call.
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
nvidia-smi -L 2>&1 | head -2
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
echo "build $(( $(date +%s) - t0 ))s"
export IRON_TEST_REQUIRE_CUDA=1
export IRON_CUDA_TF32=0
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
run() {  # label, env...
  local label=$1; shift
  echo "== test_cuda_sort.py on cuda ($label)"
  env "$@" IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 420 python3 -m pytest \
    tests/python/test_cuda_sort.py -q -s -p no:cacheprovider -rf --tb=short \
    >"$out/sort_$label.txt" 2>&1 || rc=1
  grep -E "10\^8|passed|failed|Error" "$out/sort_$label.txt" | tail -12
  echo "t=$(( $(date +%s) - t0 ))s"
}
if [ "$what" = tests ] || [ "$what" = all ]; then
  run default IRON_CUDA_SORT_BLOCK_MAX=16384
  run wide IRON_CUDA_SORT_BLOCK_MAX=0
fi
if [ "$what" = merge ] || [ "$what" = all ]; then
  run merge IRON_CUDA_SORT_BLOCK_MAX=0 IRON_CUDA_SORT_RADIX=0
  echo "== corpus sorts on cuda"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 200 python3 -m pytest \
    tests/python/test_corpus.py tests/python/test_ann.py -q -p no:cacheprovider \
    -rf --tb=short -k "sort or top_k or unique or median or ann or approx" \
    >"$out/corpus_sort.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/corpus_sort.txt" | tail -8
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== bench/sort_bench.py (iron vs xla)"
  timeout 400 python3 bench/sort_bench.py --reps 5 --variants iron,xla \
    --json "$out/sort_bench.json" 2>&1 | tee "$out/sort_bench.txt" | tail -16 || rc=1
  echo "== one-block rows vs the device-wide sorts (IRON_CUDA_SORT_BLOCK_MAX)"
  timeout 150 python3 bench/sort_bench.py --reps 5 --variants iron,iron-wide \
    --only sort_f32_1e4,sort_f32_16384,rows_1024x4096 \
    --json "$out/sort_bench_block.json" 2>&1 | tee "$out/sort_bench_block.txt" | tail -5 || rc=1
fi
echo "total $(( $(date +%s) - t0 ))s"
exit $rc
