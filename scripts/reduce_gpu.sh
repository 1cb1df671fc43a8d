#!/usr/bin/env bash
# GPU check of the CUDA reduce rework (branch varreduce; issue 14's
# argmax / batch-norm / small full reductions, issue 12's operand counts;
# src/device/cuda/gen/reduce.c).
# Usage: scripts/reduce_gpu.sh [tests|bench|ab|all]   (logs under $OUT)
#   tests: build; GPU-free checks of the build (test_cuda_reduce_shapes_emu,
#          test_reduce_nan_sweep, test_cuda_reduce_emu); then on the CUDA
#          device vs numpy / jax's CPU backend: tests/python/
#          test_reduce_shapes.py (argmax shapes with NaNs/ties/signed zeros,
#          batch-norm statistics, variadic reduces of 2..12 operands) and
#          test_nan_ties.py.
#   bench: bench/kernels.py --only reduce,cnn,newton_while,copy --trace 2
#          (iron vs XLA:GPU vs torch, with the top kernels per program).
#   ab:    iron only, the reduce programs (and newton_while) with each new
#          path switched off: IRON_CUDA_REDUCE_STAGE=0, IRON_CUDA_REDUCE_BATCH=0,
#          and the split target at 528 / 2112 blocks instead of 1056.
#   all:   tests, bench, ab (run as separate calls if one call is limited
#          to 10 minutes: tests ~4 min, bench ~4 min, ab ~4 min).
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
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  for t in test_cuda_reduce_shapes_emu test_cuda_reduce_emu test_reduce_nan_sweep; do
    echo "== $t (GPU-free)"
    (cd build-dev && timeout 400 ./tests/$t) >"$out/$t.txt" 2>&1 || rc=1
    tail -2 "$out/$t.txt"
  done
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== test_reduce_shapes.py, test_nan_ties.py on cuda"
  IRON_TEST_REQUIRE_CUDA=1 IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu \
    timeout 400 python3 -m pytest tests/python/test_reduce_shapes.py \
    tests/python/test_nan_ties.py -q -p no:cacheprovider -rf --tb=short \
    >"$out/pytest_cuda.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/pytest_cuda.txt" | tail -20
  echo "t=$(( $(date +%s) - t0 ))s"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== bench/kernels.py --only reduce,cnn,newton_while,copy --trace 2"
  timeout 500 python3 bench/kernels.py --only reduce,cnn,newton_while,copy \
    --rounds 2 --trace 2 --json "$out/reduce.json" --md "$out/reduce.md" \
    >"$out/reduce.txt" 2>&1 || rc=1
  grep -vE "^\s+[0-9.]+ us" "$out/reduce.txt" | tail -40
  echo "t=$(( $(date +%s) - t0 ))s"
fi
if [ "$what" = ab ] || [ "$what" = all ]; then
  for sw in IRON_CUDA_REDUCE_STAGE=0 IRON_CUDA_REDUCE_BATCH=0 \
            IRON_CUDA_REDUCE_SPLIT=528 IRON_CUDA_REDUCE_SPLIT=2112 none; do
    echo "== iron with $sw"
    tag=${sw//=/_}
    env ${sw/none/IRON_AB_NONE=1} timeout 150 python3 bench/kernels.py \
      --frameworks iron --rounds 1 \
      --only 'argmax_*,colsum*,bn_stats_*,sum_f32_1m,sum_f32_16m,rowsum_f32,newton_while' \
      --md "$out/ab_$tag.md" >"$out/ab_$tag.txt" 2>&1 || rc=1
    grep -E "^\s*r0 iron" "$out/ab_$tag.txt" | tail -14
  done
  echo "t=$(( $(date +%s) - t0 ))s"
fi
exit $rc
