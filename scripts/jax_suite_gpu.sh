#!/usr/bin/env bash
# jax's own test suite on the CUDA device, on the GPU machine (16 cores, one
# H200, a 10-minute limit per call). Builds this tree, then runs the chosen
# test files with scripts/jax_suite.py: 16 pytest processes at once, the
# large files split into shards, IRON_DEVICE=cuda, IRON_CUDA_TF32=0.
# jax's tests (tests/, conftest.py, pyproject.toml) travel in the ignored
# folder .jaxtests (name it in the device call's `carry`). The machine has
# jax 0.11.2, which has no tag in the mirror: since the thirteenth session
# the mirror's newest commit (cec06d1, 0.11.1.dev) is used, whose tests skew
# less against 0.11.2 than jax-v0.11.0's:
#   git --git-dir=<mirror> archive cec06d1 tests conftest.py pyproject.toml \
#     | tar -x -C .jaxtests
# Usage: scripts/jax_suite_gpu.sh [SET] [TIMEOUT_S]
#   SET: core20 (default, the 20 files of docs/jax-test-suite.md), rest
#   (every other tests/*_test.py) or a comma-separated file list.
# Results: $OUT/suite.json (every outcome; merge runs with
# scripts/jax_suite_merge.py) and $OUT/suite.txt.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
set_=${1:-core20}
tmo=${2:-400}
core20=nn_test.py,random_test.py,x64_context_test.py,lax_control_flow_test.py,lax_test.py,lax_numpy_test.py,api_test.py,lax_numpy_reducers_test.py,batching_test.py,custom_api_test.py,lax_numpy_operators_test.py,lax_autodiff_test.py,dtypes_test.py,lax_numpy_indexing_test.py,tree_util_test.py,fft_test.py,linalg_test.py,debugging_primitives_test.py,pmap_test.py,stax_test.py
# Shards for the files with the most tests (the large ones start first).
shards="--shard lax_numpy_test.py:5 --shard lax_test.py:4
  --shard lax_control_flow_test.py:3 --shard api_test.py:2
  --shard linalg_test.py:3 --shard lax_autodiff_test.py:2 --shard nn_test.py:2
  --shard custom_api_test.py:2 --shard lax_numpy_operators_test.py:2
  --shard export_harnesses_multi_platform_test.py:6 --shard shape_poly_test.py:4
  --shard pjit_test.py:2 --shard sparse_bcoo_bcsr_test.py:3
  --shard lax_scipy_special_functions_test.py:2 --shard scipy_stats_test.py:2
  --shard random_lax_test.py:2 --shard export_test.py:2"
if [ "$set_" = core20 ]; then
  files=$core20
elif [ "$set_" = rest ]; then
  # Every other tests/*_test.py: the known long ones first, then by size.
  first="export_harnesses_multi_platform_test.py shape_poly_test.py sparse_bcoo_bcsr_test.py lax_scipy_special_functions_test.py pjit_test.py"
  files=$(cd .jaxtests/tests && { for f in $first; do echo "$f"; done
    ls -S *_test.py | grep -vxF -f <(tr ', ' '\n\n' <<<"$core20 $first"); } | paste -sd,)
else
  files=$set_
fi
if [ ! -f build-dev/libiron_pjrt.so ] || [ "${IRON_SUITE_REBUILD:-1}" = 1 ]; then
  cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF \
    -DIRON_BUILD_TESTS=OFF >"$out/cmake.log" 2>&1 &&
    ninja -C build-dev iron_pjrt >>"$out/cmake.log" 2>&1 ||
    { tail -40 "$out/cmake.log"; exit 1; }
fi
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_DEVICE=cuda IRON_CUDA_TF32=0 IRON_TEST_REQUIRE_CUDA=1
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
export PYTHONUNBUFFERED=1
python3 scripts/jax_suite.py --jax-src "$root/.jaxtests" --files "$files" \
  --jobs "${JOBS:-16}" --timeout "$tmo" --deadline "${SUITE_DEADLINE:-0}" --cases 3 $shards \
  --workdir /tmp/jax_suite_out --json "$out/${SUITE_NAME:-suite}.json" \
  --known "$root/tests/jax_suite/known_failures_cuda.txt" 2>&1 |
  tee "$out/${SUITE_NAME:-suite}.txt"
