#!/usr/bin/env bash
# GPU check of the row fusions (issue 14: softmax, log_softmax, logsumexp,
# layer norm, RMS norm and their gradients as one kernel per row group;
# src/compiler/fuse_rows.h, src/device/cuda/cuda_row_fusion.c).
# Usage: scripts/rowfuse_gpu.sh [tests|bench|all]   (logs under $OUT)
#   tests: build; the GPU-free emulated check (bit for bit with the host);
#          tests/python/test_rowfuse.py on the CUDA device vs jax's CPU
#          backend (rows of 1..100000, f32/bf16/f16, gradients, other axes,
#          zero-size, a scanned layer norm, IRON_CUDA_ROW_FUSION=0 agrees);
#          the pytest corpus's softmax/norm programs on cuda.
#   bench: bench/kernels.py --only rowwise,copy: iron vs XLA:GPU vs torch
#          (GB/s, % of the copy bandwidth measured in the same run), then
#          iron with IRON_CUDA_ROW_FUSION=0 (the unfused kernels: before).
#   all:   both (about 10 minutes; run tests and bench as two calls if one
#          call is limited to 10 minutes).
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
# The comparisons with jax's CPU backend want exact f32 GEMMs.
export IRON_CUDA_TF32=${IRON_CUDA_TF32:-0}
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== test_cuda_row_fusion_emu (GPU-free: emulated row kernels vs the host, bit for bit)"
  (cd build-dev && timeout 300 ./tests/test_cuda_row_fusion_emu) >"$out/rowfuse_emu.txt" 2>&1 || rc=1
  grep -E "programs|differ|NVRTC|passed|failed" "$out/rowfuse_emu.txt" | tail -6
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== test_rowfuse.py on cuda (vs jax cpu)"
  IRON_TEST_REQUIRE_CUDA=1 IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 420 \
    python3 -m pytest tests/python/test_rowfuse.py -q -p no:cacheprovider -rf \
    --tb=short >"$out/rowfuse_cuda.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/rowfuse_cuda.txt" | tail -12
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== corpus softmax/norm programs on cuda"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 200 python3 -m pytest \
    tests/python/test_corpus.py -q -p no:cacheprovider -rf --tb=short \
    -k "softmax or norm or logsumexp or attention or mlp or gru or adam" \
    >"$out/corpus_rows.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/corpus_rows.txt" | tail -8
  echo "t=$(( $(date +%s) - t0 ))s"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== bench/kernels.py --only rowwise,copy (iron vs xla vs torch)"
  timeout 360 python3 bench/kernels.py --only rowwise,copy --rounds 2 \
    --json "$out/rowwise.json" --md "$out/rowwise.md" \
    >"$out/rowwise.txt" 2>&1 || rc=1
  tail -24 "$out/rowwise.txt"
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== the same on iron with IRON_CUDA_ROW_FUSION=0 (unfused: before)"
  IRON_CUDA_ROW_FUSION=0 timeout 200 python3 bench/kernels.py --only rowwise,copy \
    --frameworks iron --rounds 1 --json "$out/rowwise_off.json" \
    >"$out/rowwise_off.txt" 2>&1 || rc=1
  tail -14 "$out/rowwise_off.txt"
fi
echo "total $(( $(date +%s) - t0 ))s"
exit $rc
