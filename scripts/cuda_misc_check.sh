#!/usr/bin/env bash
# GPU check of the cudamisc branch's classes (one command, on the GPU
# machine; jax's tests in .jaxtests, carried as for jax_suite_gpu.sh):
#  1. C tests: test_device_plans (collectives on both devices),
#     test_cuda_complex_emu (CUDA kernels emulated AND the GPU itself
#     against the host on the complex plane and on tests/data/emu_programs,
#     every mismatching element printed).
#  2. tests/python: collectives, f6, unsafe_buffer_pointer on IRON_DEVICE=cuda.
#  3. jax's tests of these classes, with IRON_DEVICE=cuda and IRON_DEVICE=host
#     on this machine (same numpy/mpmath), and with JAX_PLATFORMS=cpu: the
#     complex-plane accuracy tests (full messages), the f6 dtypes tests,
#     pmap/collective tests, unsafe_buffer_pointer users, and the smaller
#     ones (testViewScalar1, testScanGrad unroll0, ...).
# Usage: scripts/cuda_misc_check.sh [TIMEOUT_S per pytest run, default 240]
# Logs: $OUT/*.txt; the summary is printed.
set -uo pipefail
tmo=${1:-240}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | head -2
python3 -c "import jax, jaxlib, numpy, mpmath; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__, 'mpmath', mpmath.__version__)" 2>&1
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev iron_pjrt test_device_plans test_cuda_complex_emu >>"$out/cmake.log" 2>&1 ||
  { tail -50 "$out/cmake.log"; exit 1; }
export IRON_CUDA_TF32=0
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
export PYTHONDONTWRITEBYTECODE=1

echo "== C: test_device_plans"
build-dev/tests/test_device_plans 2>&1 | tail -3
echo "== C: test_cuda_complex_emu (emulation and the GPU against the host)"
(cd build-dev && IRON_TEST_VERBOSE=1 IRON_TEST_REQUIRE_CUDA=1 \
  timeout "$tmo" tests/test_cuda_complex_emu) >"$out/complex_emu.txt" 2>&1
grep -v "^  " "$out/complex_emu.txt" | tail -80

echo "== tests/python on cuda"
IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout "$tmo" python3 -m pytest \
  tests/python/test_collectives.py tests/python/test_f6.py \
  tests/python/test_pjrt_surface.py -k "collective or f6 or unsafe or ppermute or psum or stablehlo" \
  -q -p no:cacheprovider -rf --tb=short >"$out/python_cuda.txt" 2>&1
grep -E "passed|failed|^FAILED|^E " "$out/python_cuda.txt" | tail -30

K_PLANE="testSuccessOnComplexPlane and complex64"
K_MISC="testViewScalar or testTakeAlongAxisPromiseInBoundsNoWrapNegativeIndices or testScanGrad_jit_scan=False_jit_f=False_impl=unroll0 or testQrInvalidDtypeCPU or testIssue804 or testPPermute"
K_PTR="test_trivial_computations or testArrayCopy or testConvertElementTypeAvoidsCopies or test_array_impl_attributes"
K_F6="float6 or testArrayRepr or testFloatArrayCreation or testFloatPromotionError"
run_jax() {  # name platforms device keyword files...
  local name=$1 plat=$2 dev=$3 kw=$4
  shift 4
  (cd .jaxtests && IRON_DEVICE=$dev JAX_PLATFORMS=$plat JAX_NUM_GENERATED_CASES=3 \
    timeout "$tmo" python3 -m pytest -q -p no:cacheprovider -rf --tb=long \
    -k "$kw" "$@") >"$out/$name.txt" 2>&1
  printf '%-28s ' "$name"
  grep -E "^[0-9]+ (passed|failed)|(passed|failed).* in " "$out/$name.txt" | tail -1
  grep "^FAILED" "$out/$name.txt" | sed 's/^/    /' | head -20
}
if [ -d .jaxtests/tests ]; then
  echo "== jax's tests (complex plane: every mismatching sample is in the logs)"
  for dev in cuda host; do
    run_jax "plane_$dev" iron $dev "$K_PLANE" tests/lax_test.py
    run_jax "misc_$dev" iron,cpu $dev "$K_MISC" tests/lax_numpy_test.py \
      tests/lax_control_flow_test.py tests/linalg_test.py tests/batching_test.py
    run_jax "ptr_$dev" iron,cpu $dev "$K_PTR" tests/api_test.py \
      tests/lax_numpy_test.py tests/lax_test.py tests/random_test.py
    run_jax "f6_$dev" iron,cpu $dev "$K_F6" tests/dtypes_test.py
  done
  run_jax "pmap_cuda" iron,cpu cuda "PythonPmapTest or PmapWithDevicesTest" tests/pmap_test.py
  run_jax "plane_cpu" cpu host "$K_PLANE" tests/lax_test.py
  run_jax "misc_cpu" cpu host "$K_MISC" tests/lax_numpy_test.py \
    tests/lax_control_flow_test.py tests/linalg_test.py tests/batching_test.py
else
  echo "no .jaxtests/tests: jax's tests skipped (carry .jaxtests)"
fi
