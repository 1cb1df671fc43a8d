#!/usr/bin/env bash
# Issue 13 parts 1, 2 and 5 on the GPU machine: the CUDA reduce_window /
# select_and_scatter now validated by the shared window plan, and the NaN /
# signed-zero / first-index sweep with every program on the GPU (iron =
# CUDA) against XLA:CPU and numpy. Builds this tree, then runs
#   1. test_device_plans, test_reduce_nan_sweep (GPU-free, as a check of the
#      build), test_cuda_device;
#   2. pytest test_nan_ties.py (f32/f16/bf16 sweeps), test_compile_memory.py
#      and the window/cumulative/pooling corpus cases with IRON_DEVICE=cuda.
# Usage (through the device tool): scripts/reliab_gpu_check.sh
# Logs go under $OUT when set. PYTEST_TIMEOUT bounds each pytest stage.
set -uo pipefail
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | head -2
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
export IRON_TEST_REQUIRE_CUDA=1
export IRON_CUDA_TF32=${IRON_CUDA_TF32:-0}
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
for t in test_device_plans test_cuda_device test_reduce_nan_sweep; do
  echo "== $t"
  build-dev/tests/$t >"$out/$t.txt" 2>&1 || rc=1
  tail -3 "$out/$t.txt"
done
T=${PYTEST_TIMEOUT:-560}
echo "== pytest NaN/tie sweep, compile memory, window corpus on cuda"
IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout "$T" python3 -m pytest \
  tests/python/test_nan_ties.py tests/python/test_compile_memory.py \
  "tests/python/test_corpus.py" -k "nan_ties or compile or window or cum or pool or select or argm or sort" \
  -q -p no:cacheprovider -rf --tb=short 2>&1 | tee "$out/pytest_cuda.txt" |
  grep -v "^\.\|^F\|^s" | tail -60 || rc=1
exit $rc
