#!/usr/bin/env bash
# GPU check of device while loops (issue 14: a data-dependent
# lax.while_loop runs iteration 0 host-driven and every later iteration in
# one CUDA graph launch whose WHILE conditional node repeats the body while
# a kernel says the predicate holds; src/runtime/executor.c
# run_device_loop, src/device/cuda/cuda_device.c "device loops").
# Usage: scripts/device_while_gpu.sh [tests|bench|all]   (logs under $OUT;
# expects build-dev built, e.g. by scripts/gpu_session.sh build)
#   tests: test_cuda_device_while (fake driver + NVRTC), then
#          tests/python/test_device_while.py on the CUDA device vs jax's CPU
#          backend (trip counts 0..200, reduction predicates, nested, in
#          scan / fori_loop, matmul / sort / callback bodies, donation, the
#          switch-off comparison and IRON_GRAPH_DEBUG's "device loop yes"),
#          and the same file with IRON_CUDA_DEVICE_WHILE=0 (host-driven).
#   bench: bench/kernels.py --only while --trace 2 with the device loops and
#          with IRON_CUDA_DEVICE_WHILE=0 (newton_while, scalar_while).
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== test_cuda_device_while (fake driver, NVRTC)"
  timeout 120 build-dev/tests/test_cuda_device_while >"$out/dw_c.txt" 2>&1 || rc=1
  tail -3 "$out/dw_c.txt"
  echo "== test_device_while.py on cuda (device loops)"
  IRON_CUDA_DEVICE_WHILE=1 IRON_TEST_REQUIRE_CUDA=1 IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu \
    timeout 400 python3 -m pytest tests/python/test_device_while.py -q \
    -p no:cacheprovider -rfs --tb=short >"$out/dw_cuda.txt" 2>&1 || rc=1
  grep -E "passed|failed|skipped|Error" "$out/dw_cuda.txt" | tail -12
  echo "t=$(( $(date +%s) - t0 ))s"
  echo "== test_device_while.py on cuda, IRON_CUDA_DEVICE_WHILE=0 (host-driven)"
  IRON_CUDA_DEVICE_WHILE=0 IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu \
    timeout 300 python3 -m pytest tests/python/test_device_while.py -q \
    -p no:cacheprovider -rf --tb=short -k "not switch_off and not engaged" \
    >"$out/dw_cuda_off.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/dw_cuda_off.txt" | tail -8
  echo "t=$(( $(date +%s) - t0 ))s"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  for sw in 1 0; do
    echo "== bench/kernels.py --only while --trace 2, IRON_CUDA_DEVICE_WHILE=$sw"
    IRON_CUDA_DEVICE_WHILE=$sw timeout 300 python3 bench/kernels.py --only while \
      --trace 2 --json "$out/dw_bench_$sw.json" --md "$out/dw_bench_$sw.md" \
      >"$out/dw_bench_$sw.log" 2>&1 || rc=1
    tail -25 "$out/dw_bench_$sw.log"
  done
  echo "t=$(( $(date +%s) - t0 ))s"
fi
exit $rc
