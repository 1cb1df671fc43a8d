#!/usr/bin/env bash
# GPU smoke test of the CUDA device (loader, runtime, memory, programs that
# need no kernel), for the GPU machine. Builds this tree with CMake (no pip
# install), then runs the C tests written for the GPU and tests/cuda/smoke.py
# through jax with IRON_DEVICE=cuda. A missing GPU is a failure here
# (IRON_TEST_REQUIRE_CUDA=1).
# Usage (through the device tool): scripts/cuda_smoke.sh
# Writes logs under $OUT when set.
set -uo pipefail
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | tee "$out/gpus.txt"
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)" | tee "$out/versions.txt"
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
export IRON_TEST_REQUIRE_CUDA=1
rc=0
for t in build-dev/tests/test_cuda_*; do
  echo "== $t"
  "$t" 2>&1 | tee "$out/$(basename "$t").txt" || rc=1
done
echo "== tests/cuda/smoke.py"
IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so IRON_DEVICE=cuda \
  JAX_PLATFORMS=iron,cpu python3 tests/cuda/smoke.py 2>&1 | tee "$out/smoke.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
# The op families on the GPU: the conformance suite (tests/conformance,
# which replaced tests/cuda/ops.py), scripts/cuda_tests.sh conformance.
echo "cuda_smoke: $([ $rc -eq 0 ] && echo PASSED || echo FAILED)"
exit $rc
