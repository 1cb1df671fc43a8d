#!/usr/bin/env bash
# Runs the C tests and the pytest corpus with the HOST device on the GPU
# machine (jaxlib 0.11.2 there), without pip-installing: the plugin is built
# with CMake and found through IRON_PLUGIN_PATH / PYTHONPATH.
# Usage (through the device tool): scripts/device_host_tests.sh
# Writes logs under $OUT when set.
set -uo pipefail
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)" | tee "$out/versions.txt"
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
(cd build-dev && ctest 2>&1 | tail -5) | tee "$out/ctest.txt"
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export JAX_PLATFORMS=iron,cpu IRON_DEVICE=host
python3 -m pytest tests/python -q -p no:cacheprovider "$@" 2>&1 | tee "$out/pytest.txt" | tail -30
python3 -m pytest tests/conformance -q -p no:cacheprovider 2>&1 | tee "$out/conformance.txt" | tail -5
