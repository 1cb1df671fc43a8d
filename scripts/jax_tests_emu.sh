#!/usr/bin/env bash
# jax's own tests as programs for the CUDA device, without a GPU: runs the
# given jax test files on the host device with IRON_DUMP_DIR (every program
# they compile is written as its StableHLO artifact), then runs every
# artifact through test_cuda_fusion_corpus: the host device against the
# CUDA device's plan with its generated kernels emulated on the CPU (bit
# for bit, but float sums of the CUDA reduce kernels, which stay on the
# host's kernel, and complex tan/tanh, 1-2 ulp apart: the known pair).
#
#   scripts/jax_tests_emu.sh JAX_CHECKOUT BUILD_DIR test_file.py [...]
#
# JAX_CHECKOUT: a jax source tree at the installed jax's tag (its tests/);
# BUILD_DIR: a build of this tree (build/tests/test_cuda_fusion_corpus).
# Environment: JAX_NUM_GENERATED_CASES (default 1), OUT (default a fresh
# directory under /tmp), IRON_TEST_EMU_ALL_GRID / IRON_TEST_EMU_REVERSE
# (README) for the emulation. docs/test-runs.md (fifteenth session) has
# the numbers of a run over 17 files.
set -uo pipefail
if [ $# -lt 3 ]; then
  sed -n 2,20p "$0"
  exit 2
fi
JAX="$1"; BUILD="$(cd "$2" && pwd)"; shift 2
OUT="${OUT:-$(mktemp -d /tmp/iron_jax_emu.XXXXXX)}"
mkdir -p "$OUT"
echo "artifacts: $OUT"
(cd "$JAX" && IRON_DUMP_DIR="$OUT" JAX_PLATFORMS=iron,cpu \
  JAX_NUM_GENERATED_CASES="${JAX_NUM_GENERATED_CASES:-1}" \
  python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 | tail -1)
echo "$(ls "$OUT" | wc -l) artifacts"
IRON_TEST_CORPUS_DIR="$OUT" "$BUILD/tests/test_cuda_fusion_corpus" 2>&1 |
  grep -v '^  ' | tail -30
