#!/usr/bin/env bash
# One GPU-machine call that does much: builds this tree once (build-dev,
# Release, every target, 16 cores), then runs the named stages, each with
# its log under $OUT/logs, and packs the logs into $OUT/logs.tgz (the
# device tool returns at most 8 files). A stage name may end in & to run
# in the background beside the next ones; `wait` waits for them.
# Stages:
#   suite        jax's 20 core test files on CUDA (scripts/jax_suite_gpu.sh;
#                $OUT/suite.json); needs .jaxtests carried
#   suiterest    every other jax test file on CUDA ($OUT/suite_rest.json)
#   corpus       pytest corpus + MLP on CUDA (scripts/cuda_tests.sh corpus)
#   conformance  op conformance on CUDA
#   staged       host-staged steps on CUDA
#   faults       the error promise on the GPU (test_cuda_faults.py)
#   kquick       bench/kernels.py --quick;  kernels: the whole benchmark
#                (extra arguments in $KERNELS_ARGS, e.g. "--trace 3 --only cnn")
#   gpubench     bench/gpu_bench.py --rounds 1 --steps 16
#   cpusuite     jax's 20 core files on XLA:CPU alone ($OUT/cpusuite.txt):
#                which failures of the carried .jaxtests are not iron's
#   decodeab     bench/kernels.py --only decode under each VAR=value[,VAR=value]
#                of $DECODE_AB (default: IRON_CUDA_VECTOR_DOTS=0, then sliced);
#                $DECODE_ARGS e.g. "--trace 1"
#   convbench    bench/conv_bench.py (--frameworks $CONV_FRAMEWORKS, default
#                iron,iron-find,xla: cuDNN heuristics vs measured; $CONV_ARGS)
#   sort         scripts/cuda_sort_check.sh tests; sortbench: its bench
#   misc         scripts/cuda_misc_check.sh
#   ctest        the GPU C tests (test_cuda_*)
#   reliab       scripts/reliab_gpu_check.sh (window plan, NaN/tie sweeps)
#   finds        scripts/debug/gpu_finds.sh (GPU-only fuzz finds under
#                switches, test_int_wrap on CUDA, the kernels' SASS)
#   fusioncheck  scripts/cuda_fusion_check.sh (issue 12's programs, decode)
#   pyall        every tests/python file on CUDA (pytest-xdist, 8 workers;
#                $OUT/pyall.txt): the files no other stage runs there too
#                (-p no:benchmark: pytest-benchmark's warning under xdist
#                is an error with jax's warning filters)
#   zoo          scripts/model_zoo.py on CUDA (flax/equinox/optax models
#                against XLA:CPU)
#   rowtests     scripts/rowfuse_gpu.sh tests; rowbench: its bench
#   redtests     scripts/reduce_gpu.sh tests; redbench, redab: its bench
#                and its A/B of the reduce switches

#   tfuse        scripts/transpose_fusion_gpu.sh tests; tfusebench: its bench
#   fuzzgpu      scripts/fuzz_programs_gpu.sh ${FUZZ_MINUTES:-3} (random
#                programs, host vs the real CUDA device)
#   dwtests      scripts/device_while_gpu.sh tests (device while loops);
#                dwbench: its bench (kernels.py --only while, switch on/off)

#   pgtests      scripts/program_graphs_gpu.sh tests (whole programs as
#                CUDA graphs); pgbench: its bench; pgrule: the rule's sweep
#   jaxtests     the jax test node ids in $JAXTESTS (space-separated), -vv,
#                on CUDA: the full assertion text of chosen failures
# Usage: scripts/gpu_session.sh build suite\& corpus\& wait kquick
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OUT=${OUT:-/tmp/iron-out}
logs=$OUT/logs
mkdir -p "$logs"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export IRON_CACHE_DIR=$root/build-dev/kcache
export IRON_SUITE_REBUILD=0
export PYTHONUNBUFFERED=1
stage() {
  local s=$1
  case "$s" in
    build)
      nvidia-smi -L | head -1
      python3 -c "import jax, jaxlib; print('jax', jax.__version__)"
      cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DIRON_WERROR=OFF >"$logs/build.log" 2>&1 &&
        ninja -C build-dev >>"$logs/build.log" 2>&1 ||
        { tail -30 "$logs/build.log"; return 1; } ;;
    suiterest) JOBS=${SUITE_JOBS:-15} SUITE_NAME=suite_rest scripts/jax_suite_gpu.sh rest ${SUITE_REST_TIMEOUT:-400} \
             >"$logs/suiterest.log" 2>&1; grep -E "passed, [0-9]+ failed|pass rate|new failures" "$logs/suiterest.log" | tail -12 ;;
    suite) JOBS=${SUITE_JOBS:-12} scripts/jax_suite_gpu.sh core20 ${SUITE_TIMEOUT:-300} \
             >"$logs/suite.log" 2>&1; grep -E "passed, [0-9]+ failed|pass rate|new failures" "$logs/suite.log" | tail -25 ;;
    corpus|conformance|staged|faults)
      OUT=$logs scripts/cuda_tests.sh "$s" >"$logs/$s.log" 2>&1
      grep -E "passed|failed|error" "$logs/$s.log" | tail -6 ;;
    kquick|kernels)
      local q=""; [ "$s" = kquick ] && q=--quick
      IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
        python3 bench/kernels.py $q ${KERNELS_ARGS:-} --json "$OUT/$s.json" --md "$OUT/$s.md" \
        >"$logs/$s.log" 2>&1; tail -45 "$logs/$s.log" ;;
    cpusuite)  # jax's 20 core files on XLA:CPU alone: the failures that are not iron's
      local files; files=$(sed -n 's/^core20=//p' scripts/jax_suite_gpu.sh | tr ',' ' ')
      (cd .jaxtests && JAX_PLATFORMS=cpu JAX_NUM_GENERATED_CASES=3 timeout ${CPUSUITE_TIMEOUT:-400} \
        python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n ${CPUSUITE_JOBS:-6} -rf --tb=no \
        $(for f in $files; do echo tests/$f; done)) >"$OUT/cpusuite.txt" 2>&1
      grep -E "^FAILED|passed|failed" "$OUT/cpusuite.txt" | tail -60 ;;
    decodeab)  # the decode step under each setting of $DECODE_AB
      for v in ${DECODE_AB:-IRON_CUDA_VECTOR_DOTS=0 IRON_CUDA_VECTOR_DOTS=sliced}; do
        local tag=${v//=/_}; tag=${tag//,/+}
        env ${v//,/ } IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
          timeout ${DECODE_TIMEOUT:-250} python3 bench/kernels.py --only decode --rounds 1 ${DECODE_ARGS:-} \
          --json "$OUT/decode_$tag.json" --md "$OUT/decode_$tag.md" >"$logs/decode_$tag.log" 2>&1
        echo "== $v"; tail -25 "$logs/decode_$tag.log"
      done ;;
    gpubench)
      IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
        timeout ${GPUBENCH_TIMEOUT:-600} python3 bench/gpu_bench.py --rounds 1 --steps ${GPUBENCH_STEPS:-16} \
        --json "$OUT/gpubench.json" >"$logs/gpubench.log" 2>&1
      tail -20 "$logs/gpubench.log" ;;
    tfuse|tfusebench)
      local w=tests; [ "$s" = tfusebench ] && w=bench
      OUT=$logs scripts/transpose_fusion_gpu.sh $w >"$logs/$s.log" 2>&1
      tail -40 "$logs/$s.log" ;;
    convbench) IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
        timeout ${CONV_TIMEOUT:-450} python3 bench/conv_bench.py --rounds ${CONV_ROUNDS:-1} \
        --frameworks ${CONV_FRAMEWORKS:-iron,iron-find,xla} ${CONV_ARGS:-} --json "$OUT/conv.json" \
        >"$logs/convbench.log" 2>&1; tail -60 "$logs/convbench.log" ;;
    sort) OUT=$logs scripts/cuda_sort_check.sh tests >"$logs/sort.log" 2>&1; tail -15 "$logs/sort.log" ;;
    sortbench) OUT=$logs scripts/cuda_sort_check.sh bench >"$logs/sortbench.log" 2>&1; tail -15 "$logs/sortbench.log" ;;
    misc) OUT=$logs scripts/cuda_misc_check.sh 200 >"$logs/misc.log" 2>&1; tail -25 "$logs/misc.log" ;;
    ctest) (cd build-dev && IRON_TEST_REQUIRE_CUDA=1 ctest -R test_cuda -j8 --timeout 300) >"$logs/ctest.log" 2>&1; tail -15 "$logs/ctest.log" ;;
    reliab) OUT=$logs/reliab scripts/reliab_gpu_check.sh >"$logs/reliab.log" 2>&1; tail -20 "$logs/reliab.log" ;;
    pyall) IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
           IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 \
           timeout ${PYALL_TIMEOUT:-450} python3 -m pytest tests/python -q -p no:cacheprovider -p no:benchmark \
           -n ${PYALL_JOBS:-8} -rf --tb=line >"$OUT/pyall.txt" 2>&1
           grep -E "^FAILED|^ERROR|passed|failed" "$OUT/pyall.txt" | tail -40 ;;
    zoo) IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
           IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu timeout ${ZOO_TIMEOUT:-400} \
           python3 scripts/model_zoo.py >"$logs/zoo.log" 2>&1; grep -v -i warn "$logs/zoo.log" | tail -25 ;;
    finds) OUT=$logs scripts/debug/gpu_finds.sh >"$logs/finds.log" 2>&1; cat "$logs/finds.log" | head -120 ;;
    fusioncheck) OUT=$logs/fusioncheck scripts/cuda_fusion_check.sh >"$logs/fusioncheck.log" 2>&1; tail -25 "$logs/fusioncheck.log" ;;
    rowquick)
      IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
        timeout 200 python3 bench/kernels.py --only rowwise,copy --rounds 1 \
        --json "$OUT/rowquick.json" --md "$OUT/rowquick.md" >"$logs/rowquick.log" 2>&1; tail -30 "$logs/rowquick.log" ;;
    dwtests|dwbench) OUT=$logs/$s scripts/device_while_gpu.sh ${s#dw} >"$logs/$s.log" 2>&1; tail -40 "$logs/$s.log" ;;
    rowtests|rowbench) OUT=$logs/$s scripts/rowfuse_gpu.sh ${s#row} >"$logs/$s.log" 2>&1; tail -40 "$logs/$s.log" ;;
    redtests|redbench|redab) OUT=$logs/$s scripts/reduce_gpu.sh ${s#red} >"$logs/$s.log" 2>&1; tail -40 "$logs/$s.log" ;;

    pgtests|pgbench|pgrule) IRON_SKIP_BUILD=1 OUT=$logs/$s scripts/program_graphs_gpu.sh ${s#pg} \
      >"$logs/$s.log" 2>&1; tail -40 "$logs/$s.log" ;;
    fuzzgpu) OUT=$logs/fuzz JOBS=${FUZZ_JOBS:-6} scripts/fuzz_programs_gpu.sh ${FUZZ_MINUTES:-3} >"$logs/fuzzgpu.log" 2>&1; tail -25 "$logs/fuzzgpu.log" ;;
    jaxtests)
      (cd .jaxtests && IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu \
        IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
        JAX_NUM_GENERATED_CASES=3 timeout 300 python3 -m pytest -vv -p no:cacheprovider \
        ${JAXTESTS:-}) >"$logs/jaxtests.log" 2>&1; tail -60 "$logs/jaxtests.log" ;;
    *) echo "unknown stage $s"; return 1 ;;
  esac
}
for s in "$@"; do
  if [ "$s" = wait ]; then wait; stamp "waited"; continue; fi
  if [ "${s%&}" != "$s" ]; then
    ( stage "${s%&}" > "$logs/${s%&}.summary" 2>&1; stamp "${s%&} done" >> "$logs/${s%&}.summary" ) &
    stamp "${s%&} started"
  else
    stage "$s"; stamp "$s done"
  fi
done
wait
for f in "$logs"/*.summary; do [ -f "$f" ] && { echo "== $(basename "$f" .summary)"; cat "$f"; }; done
# Several sessions side by side (each in the background) must not pack and
# remove each other's logs: GPU_SESSION_NOPACK=1 leaves that to the caller.
[ "${GPU_SESSION_NOPACK:-0}" = 1 ] ||
  { tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null && rm -rf "$logs"; }
stamp "all done"
