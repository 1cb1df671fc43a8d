#!/usr/bin/env bash
# The CUDA device's test run on the GPU machine: builds this tree with CMake,
# runs the GPU C tests, the jax smoke test, then the pytest corpus (with test_refusals.py), the
# host-staged steps (callbacks and linalg: test_cuda_host_staged.py,
# test_callbacks.py, test_linalg*.py) and the op-conformance suite with
# IRON_DEVICE=cuda (every program on the GPU, compared with XLA:CPU). Prints
# each runner's "N passed, N failed".
# With `faults` (or all): the error promise on the GPU
# (tests/python/test_cuda_faults.py: out of memory, 8 threads, compiles and
# copies while loops are recorded, an injected kernel fault, jax's
# scan-grad/lu_solve programs in a loop, a 10,000-step soak whose memory
# numbers go to $OUT/faults_cuda.txt).
# Usage (through the device tool):
#   scripts/cuda_tests.sh [corpus|staged|conformance|faults|all]
# Logs go under $OUT when set. PYTEST_TIMEOUT bounds each pytest stage.
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | head -2
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
export IRON_TEST_REQUIRE_CUDA=1
# The suites compare with XLA:CPU (exact f32 GEMMs): no TF32 here.
export IRON_CUDA_TF32=${IRON_CUDA_TF32:-0}
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
echo "== test_cuda_device"
build-dev/tests/test_cuda_device 2>&1 | tail -5 || rc=1
echo "== test_cuda_host_staged"
build-dev/tests/test_cuda_host_staged 2>&1 | tail -5 || rc=1
echo "== test_cuda_faults (fake driver)"
build-dev/tests/test_cuda_faults 2>&1 | tail -5 || rc=1
echo "== tests/cuda/smoke.py"
IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 120 python3 tests/cuda/smoke.py 2>&1 | tail -8 || rc=1
T=${PYTEST_TIMEOUT:-280}
if [ "$what" = all ] || [ "$what" = corpus ]; then
  echo "== pytest corpus on cuda"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout "$T" python3 -m pytest \
    tests/python/test_corpus.py tests/python/test_mlp.py \
    tests/python/test_refusals.py tests/python/test_jax_surface.py \
    tests/python/test_plugin.py tests/python/test_denormals.py \
    tests/python/test_models.py -q -p no:cacheprovider \
    -rf --tb=line 2>&1 | tee "$out/corpus_cuda.txt" | grep -v "^\.\|^F\|^s" | tail -60
fi
if [ "$what" = all ] || [ "$what" = staged ]; then
  echo "== pytest host-staged steps (callbacks, linalg) on cuda"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout "$T" python3 -m pytest \
    tests/python/test_cuda_host_staged.py tests/python/test_callbacks.py \
    tests/python/test_linalg.py tests/python/test_linalg_lowp.py -q \
    -p no:cacheprovider -rf --tb=line 2>&1 | tee "$out/staged_cuda.txt" |
    grep -v "^\.\|^F\|^s" | tail -60
fi
if [ "$what" = all ] || [ "$what" = faults ]; then
  echo "== pytest test_cuda_faults on cuda"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout "$T" python3 -m pytest \
    tests/python/test_cuda_faults.py -q -s -p no:cacheprovider -rf \
    --tb=short 2>&1 | tee "$out/faults_cuda.txt" | tail -60 || rc=1
fi
if [ "$what" = all ] || [ "$what" = conformance ]; then
  echo "== conformance on cuda"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout "$T" python3 -m pytest \
    tests/conformance -q -p no:cacheprovider -rf --tb=line 2>&1 |
    tee "$out/conformance_cuda.txt" | grep -v "^\.\|^F\|^s" | tail -60
fi
exit $rc
