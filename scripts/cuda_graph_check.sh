#!/usr/bin/env bash
# GPU check of the CUDA-graph loop mode (through the device tool): builds,
# runs the loop programs of the pytest corpus with graphs forced on every
# counted loop of >= 2 iterations and with graphs off, then the GRU
# benchmark (graphs on; IRON_PROFILE for kernel steps / replays).
# Usage: scripts/cuda_graph_check.sh [tests|bench|all|full]; logs under $OUT.
# full: all, then the whole pytest corpus on CUDA with IRON_CUDA_GRAPHS=2.
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
echo "build $(( $(date +%s) - t0 ))s"
export IRON_TEST_REQUIRE_CUDA=1
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
export IRON_GRAPH_DEBUG=1
echo "== test_cuda_device"
timeout 60 build-dev/tests/test_cuda_device 2>&1 | tail -3
K="scan or while or fori or loop or gru or rnn"
if [ "$what" = tests ] || [ "$what" = all ] || [ "$what" = full ]; then
  for g in 2 0; do
    echo "== corpus loops, IRON_CUDA_GRAPHS=$g"
    IRON_CUDA_GRAPHS=$g IRON_CUDA_TF32=0 IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu \
      timeout 150 python3 -m pytest tests/python/test_corpus.py -q -s -p no:cacheprovider \
      -rf --tb=short -k "$K" >"$out/corpus_g$g.txt" 2>&1
    grep -E "passed|failed|Error|FAILED" "$out/corpus_g$g.txt" | tail -8
    echo "graph yes: $(grep -c 'graph yes' "$out/corpus_g$g.txt"), no: $(grep -c 'graph no' "$out/corpus_g$g.txt")"
    grep "graph recording\|graph no" "$out/corpus_g$g.txt" | sed 's/of [0-9]* iter/of N iter/' | sort | uniq -c | sort -rn | head -6
    echo "t=$(( $(date +%s) - t0 ))s"
  done
fi
if [ "$what" = bench ] || [ "$what" = all ] || [ "$what" = full ]; then
  echo "== GRU bench (iron graphs on, XLA:GPU)"
  timeout 200 python3 bench/gpu_bench.py --only gru256 --frameworks iron,xla \
    --steps ${STEPS:-10} --warmup 2 --rounds 1 >"$out/bench.txt" 2>&1
  tail -3 "$out/bench.txt"
  echo "t=$(( $(date +%s) - t0 ))s"
  for g in ${BENCH_GRAPHS:-1 0}; do
    echo "== GRU iron worker, IRON_PROFILE=1 IRON_CUDA_GRAPHS=$g"
    IRON_CUDA_GRAPHS=$g IRON_PROFILE=1 JAX_PLATFORMS=iron IRON_DEVICE=cuda timeout 120 \
      python3 bench/gpu_bench.py --worker iron --bench gru256 --steps 5 --warmup 1 \
      >"$out/worker_g$g.txt" 2>&1
    grep "iron profile: jit_step\|graph recording\|graph yes\|graph no" "$out/worker_g$g.txt" | sort | uniq -c | sort -rn | head -6
    grep -o '"times": \[[^]]*\]' "$out/worker_g$g.txt" | head -c 300; echo
    echo "t=$(( $(date +%s) - t0 ))s"
  done
fi
if [ "$what" = full ]; then
  unset IRON_GRAPH_DEBUG
  PYTEST_TIMEOUT=${FULL_TIMEOUT:-170} IRON_CUDA_GRAPHS=2 scripts/cuda_tests.sh corpus 2>&1 | tail -30
fi
echo "total $(( $(date +%s) - t0 ))s"
