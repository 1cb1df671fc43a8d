#!/usr/bin/env bash
# GPU check of whole programs as CUDA graphs (issue 14, dispatch:
# src/runtime/exec_graph.c, IRON_CUDA_PROGRAM_GRAPHS).
# Usage: scripts/program_graphs_gpu.sh [tests|bench|rule|all]  (logs under $OUT)
#   tests: build (build-dev, unless IRON_SKIP_BUILD=1); the fake-driver C
#          tests and the GPU C tests; tests/python/test_program_graphs.py on
#          the CUDA device (replayed results vs the first call's bits and
#          jax's CPU backend over many calls, donation, 8 threads, replays
#          counted, IRON_CUDA_PROGRAM_GRAPHS=0 gives the same bits); the
#          corpus, MLP, donation and CNN tests on cuda.
#   bench: bench/kernels.py --only cnn,newton_while --trace 2 with program
#          graphs (default) and without (=0), IRON_PROFILE=1 (kernel steps,
#          host ms and graph replays per run); bench/gpu_bench.py both ways.
#   rule:  bench/program_graph_rule.py: ms/call off vs forced over kernel
#          steps, argument counts and bytes (the rule's constants).
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L 2>&1 | head -1
if [ "${IRON_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF \
    >"$out/build.log" 2>&1 && ninja -C build-dev >>"$out/build.log" 2>&1 ||
    { tail -40 "$out/build.log"; exit 1; }
  stamp build
fi
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
export PYTHONUNBUFFERED=1
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== C tests: fake driver (program graphs, faults) and the GPU's"
  (cd build-dev && IRON_TEST_REQUIRE_CUDA=1 ctest -R "test_cuda_(program_graph|faults|device)" \
    -j4 --timeout 300 --output-on-failure) >"$out/ctest.txt" 2>&1 || rc=1
  tail -6 "$out/ctest.txt"
  echo "== test_program_graphs.py on cuda (IRON_GRAPH_DEBUG=1 in the log)"
  IRON_GRAPH_DEBUG=1 IRON_TEST_REQUIRE_CUDA=1 IRON_DEVICE=cuda IRON_CUDA_TF32=0 \
    JAX_PLATFORMS=iron,cpu timeout 500 python3 -m pytest tests/python/test_program_graphs.py \
    -q -p no:cacheprovider -rf --tb=short >"$out/test_program_graphs.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/test_program_graphs.txt" | tail -12
  grep -E "^iron: (program|recording)" "$out/test_program_graphs.txt" | sort | uniq -c | head -20
  stamp tests
  echo "== corpus, MLP, donation, CNN tests on cuda (program graphs on)"
  IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu timeout 500 python3 -m pytest \
    tests/python/test_corpus.py tests/python/test_mlp.py tests/python/test_donation.py \
    tests/python/test_conv_cnn.py tests/python/test_async.py -q -p no:cacheprovider -rf \
    --tb=short >"$out/corpus.txt" 2>&1 || rc=1
  grep -E "passed|failed|Error" "$out/corpus.txt" | tail -12
  stamp corpus
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  for pg in 1 0; do
    echo "== bench/kernels.py --only cnn,newton_while --trace 2, IRON_CUDA_PROGRAM_GRAPHS=$pg"
    IRON_CUDA_PROGRAM_GRAPHS=$pg IRON_PROFILE=1 timeout 400 python3 bench/kernels.py \
      --only cnn,newton_while --trace 2 --json "$out/kernels_pg$pg.json" \
      --md "$out/kernels_pg$pg.md" >"$out/kernels_pg$pg.txt" 2>&1 || rc=1
    tail -14 "$out/kernels_pg$pg.txt"
    grep -h "iron profile" "$out/kernels_pg$pg.txt" "$out/kernels_pg$pg.json" 2>/dev/null | head -8
    stamp "kernels pg=$pg"
  done
  for pg in 1 0; do
    echo "== bench/gpu_bench.py, IRON_CUDA_PROGRAM_GRAPHS=$pg"
    IRON_CUDA_PROGRAM_GRAPHS=$pg IRON_PROFILE=1 timeout 500 python3 bench/gpu_bench.py \
      --rounds 1 --steps 16 --json "$out/gpubench_pg$pg.json" >"$out/gpubench_pg$pg.txt" 2>&1 || rc=1
    tail -14 "$out/gpubench_pg$pg.txt"
    stamp "gpubench pg=$pg"
  done
fi
if [ "$what" = rule ] || [ "$what" = all ]; then
  echo "== bench/program_graph_rule.py (off vs forced)"
  timeout 500 python3 bench/program_graph_rule.py --json "$out/rule.json" \
    --md "$out/rule.md" >"$out/rule.txt" 2>&1 || rc=1
  head -20 "$out/rule.txt"
  stamp rule
fi
exit $rc
