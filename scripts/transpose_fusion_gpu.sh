#!/usr/bin/env bash
# GPU check of the transpose fusion (issue 14: a transpose pivots its
# element-wise producers and consumers into one tiled kernel; src/compiler/
# fuse.h iron_compiler_fuse_pivots, src/device/cuda/cuda_fusion_plan.h,
# gen/fusion.c gen_pivot_kernel). Logs under $OUT.
# Usage: scripts/transpose_fusion_gpu.sh [tests|bench|all]
#   tests: build; the GPU-free emulated sweep (bit for bit with the host,
#          NVRTC compiles of every kernel); tests/python/
#          test_transpose_fusion.py on the CUDA device vs jax's CPU backend;
#          the random-program fuzzer on the real GPU for 2 minutes.
#   bench: bench/kernels.py --only transpose,copy --trace 2 (iron vs XLA:GPU
#          vs torch, the top kernels of each), then iron alone with
#          IRON_CUDA_TRANSPOSE_FUSION=0 (the two kernels: before) and with
#          IRON_CUDA_TRANSPOSE_PAIRS=0 (bf16 in 32x32 tiles of one element
#          per thread).
#   all:   both.
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
  echo "== test_cuda_transpose_fusion_emu (GPU-free: emulated kernels vs the host, bit for bit)"
  (cd build-dev && timeout 300 ./tests/test_cuda_transpose_fusion_emu) >"$out/tfuse_emu.txt" 2>&1 || rc=1
  grep -E "sweep|NVRTC|passed|failed" "$out/tfuse_emu.txt" | tail -5
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== test_transpose_fusion.py on cuda (vs jax cpu)"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 400 \
    python3 -m pytest tests/python/test_transpose_fusion.py -q -p no:cacheprovider -rf \
    >"$out/tfuse_pytest.txt" 2>&1 || rc=1
  tail -8 "$out/tfuse_pytest.txt"
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== fuzz_programs on the GPU (2 minutes)"
  OUT=$out timeout 300 scripts/fuzz_programs_gpu.sh 2 >"$out/tfuse_fuzz.txt" 2>&1 || rc=1
  tail -6 "$out/tfuse_fuzz.txt"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== kernels.py --only transpose,copy --trace 2"
  timeout 400 python3 bench/kernels.py --only transpose,copy --trace 2 \
    --json "$out/tfuse_bench.json" --md "$out/tfuse_bench.md" >"$out/tfuse_bench.log" 2>&1 || rc=1
  grep -E "^\|" "$out/tfuse_bench.md" | head -20
  grep -E "iron +(transpose|tchain|perm)|us +x" "$out/tfuse_bench.log" | head -40
  echo "== iron, IRON_CUDA_TRANSPOSE_FUSION=0 (before)"
  IRON_CUDA_TRANSPOSE_FUSION=0 timeout 300 python3 bench/kernels.py --only transpose --frameworks iron \
    --trace 2 >"$out/tfuse_bench_off.log" 2>&1 || rc=1
  grep -E "iron +(transpose|tchain|perm)|us +x" "$out/tfuse_bench_off.log" | head -30
  echo "== iron, IRON_CUDA_TRANSPOSE_PAIRS=0 (bf16 in 32x32 tiles)"
  IRON_CUDA_TRANSPOSE_PAIRS=0 timeout 300 python3 bench/kernels.py --only 'transpose_bf16,tchain_bf16' \
    --frameworks iron --trace 2 >"$out/tfuse_bench_nopairs.log" 2>&1 || rc=1
  grep -E "iron +(transpose|tchain)|us +x" "$out/tfuse_bench_nopairs.log" | head -20
fi
echo "total $(( $(date +%s) - t0 ))s rc=$rc"
exit $rc
