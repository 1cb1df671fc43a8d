#!/usr/bin/env bash
# The one test command: C unit tests (gcc, -Werror), the same under
# ASan+UBSan, the fuzz targets (when clang is present), then the jax-level
# pytest suites against the installed plugin. Runs every stage, prints each
# runner's summary, and exits non-zero if any stage failed.
#
# Environment: PYTHON (default python3), JOBS (default 2),
# IRON_TEST_SKIP_INSTALL=1 to test the already-installed plugin as is,
# PYTEST_ARGS (extra pytest arguments, e.g. "-x -k corpus").
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
JOBS="${JOBS:-2}"
# Debian's system python is "externally managed"; this is a throwaway test
# environment, so let pip install into it (ignored by pip versions without
# PEP 668 support).
export PIP_BREAK_SYSTEM_PACKAGES=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

T0=$(date +%s)
declare -a RESULTS=()
FAILED=0

stage_begin() { STAGE="$1"; STAGE_T0=$(date +%s); echo; echo "=== $STAGE"; }
stage_end() {  # $1: exit status of the stage
  local dt=$(( $(date +%s) - STAGE_T0 ))
  if [ "$1" -eq 0 ]; then
    RESULTS+=("ok     ${STAGE} (${dt}s)")
  else
    RESULTS+=("FAILED ${STAGE} (${dt}s, exit $1)")
    FAILED=1
  fi
}

# 1. Python test requirements, from PyPI only when something is missing.
stage_begin "python requirements"
if "$PY" - <<'PYEOF'
import importlib.metadata as md, shutil, sys
want = {"jax": "0.10.2", "jaxlib": "0.10.2"}
for pkg in ["jax", "jaxlib", "optax", "flax", "equinox", "diffrax",
            "optimistix", "lineax", "numpyro", "numpy", "pytest",
            "scikit-build-core", "flatbuffers"]:
    try:
        v = md.version(pkg)
    except md.PackageNotFoundError:
        sys.exit(f"missing {pkg}")
    if pkg in want and v != want[pkg]:
        sys.exit(f"{pkg} {v} != {want[pkg]}")
for tool in ["cmake", "ninja"]:
    if shutil.which(tool) is None:
        sys.exit(f"missing {tool}")
PYEOF
then
  echo "all present"
  stage_end 0
else
  "$PY" -m pip install -q -r requirements-test.txt
  stage_end $?
fi

# 2. The plugin itself, built by scikit-build-core through pip. No build
# isolation: the build requirements were installed just above, and isolation
# would fetch them again from PyPI.
if [ "${IRON_TEST_SKIP_INSTALL:-0}" != 1 ]; then
  stage_begin "pip install . (plugin build)"
  # A persistent build dir (ignored by git) makes re-runs incremental.
  "$PY" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
    --config-settings=build-dir=build-pip . 2>&1 | tail -40
  stage_end "${PIPESTATUS[0]}"
fi

# 3. C unit tests, warnings as errors.
# CI's 2 cores and ~15 minutes do not hold every test: by default the tests
# labelled "slow" (NVRTC compiles of every generated kernel, reference
# convolutions, the largest CUDA emulations: minutes each) and the
# sanitizer stage are left out; IRON_TEST_FULL=1 runs them all (the GPU
# machine's ctest runs the CUDA ones on every session, docs/test-runs.md).
FULL="${IRON_TEST_FULL:-0}"
C_LABELS='slow'
[ "$FULL" = 1 ] && C_LABELS='^$'
# The jax-level suites likewise leave out the tests marked slow
# (tests/python/conftest.py) unless IRON_TEST_FULL=1.
[ "$FULL" = 1 ] || export IRON_TEST_QUICK="${IRON_TEST_QUICK:-1}"
stage_begin "C unit tests (build-ci, gcc, -Werror; $([ "$FULL" = 1 ] && echo all || echo "without label slow"))"
status=0
cmake -S . -B build-ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIRON_WERROR=ON >/dev/null \
  && cmake --build build-ci -j "$JOBS" \
  && (cd build-ci && ctest -LE "$C_LABELS" --output-on-failure --timeout 300 -j "$JOBS" 2>&1 | tail -60; exit "${PIPESTATUS[0]}") \
  || status=$?
stage_end "$status"

# 4. The C unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer
# (any report fails the test), then the two fuzz targets, time-bounded by
# their ctest definitions (tests/fuzz/CMakeLists.txt): fuzz_reader (reader
# and printer) and fuzz_compile (read, verify, plan and run on the host
# device), run side by side, one core each. With clang, one build serves
# both (IRON_FUZZ builds the whole tree with the sanitizers and libFuzzer's
# coverage instrumentation); without clang the sanitized unit tests are
# built with gcc and fuzzing is skipped.
# (Each ctest has a timeout so a hang fails the stage instead of stalling CI.)
# CI's default run has a quick form of this stage (IRON_TEST_SANITIZE=quick,
# the default unless IRON_TEST_FULL=1): the reader, compiler, plan and
# runtime tests and the host kernels' tests (SAN_QUICK_TESTS) under the
# sanitizers, the fuzz replays, and 30,000 seeded executions per fuzz
# target; IRON_TEST_SANITIZE=1
# or IRON_TEST_FULL=1 run every non-emulation C test and 45 + 60 s.
SAN_MODE="${IRON_TEST_SANITIZE:-quick}"
[ "$FULL" = 1 ] && SAN_MODE=1
SAN_QUICK_TESTS='^(test_base|test_reader|test_inline|test_fuse|test_counted_loop|test_device_plans|test_plan_fuzz|test_runtime|test_runtime_exec|test_runtime_corpus|test_device_memory|test_compile_memory|test_host_elementwise|test_host_reduce|test_host_shape|test_host_gather|test_host_scatter|test_host_window|test_host_sort|fuzz_.*)$'
SAN_SELECT=()
FUZZ_SECS=(45 60)
FUZZ_RUNS=0
if [ "$SAN_MODE" = quick ]; then
  SAN_SELECT=(-R "$SAN_QUICK_TESTS")
  # A fixed seed and count (tests/fuzz/CMakeLists.txt IRON_FUZZ_RUNS):
  # about 2 s (reader) and 25 s (compile) on 2 cores, the same inputs every
  # run of a tree.
  FUZZ_RUNS=30000
fi
# The sanitizer stages run in the background beside the jax-level suites
# (which keep about one of CI's two cores busy), their build on one core;
# their output is printed when they end, after the conformance stage.
sanitizer_stages() {
  JOBS=1
  if command -v clang >/dev/null 2>&1; then
    SAN_DIR=build-fuzz
      SAN_CONF=(-DIRON_FUZZ=ON -DIRON_FUZZ_READER_SECONDS=${FUZZ_SECS[0]} -DIRON_FUZZ_COMPILE_SECONDS=${FUZZ_SECS[1]} -DIRON_FUZZ_RUNS=${FUZZ_RUNS})
    SAN_CC=clang
  else
    SAN_DIR=build-san
    SAN_CONF=()
    SAN_CC="${CC:-gcc}"
  fi
  # A refused huge allocation (tests of 10^12-element results) must come back
  # as NULL, as from the system allocator, not abort the test.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
  stage_begin "C unit tests, ASan+UBSan (${SAN_DIR}, ${SAN_CC}, -DIRON_SANITIZE=ON, ${SAN_MODE/1/all})"
  status=0
  # Only the targets this stage runs (the emulation and NVRTC tests stay in
  # the plain build above): the library, the tests outside those labels, the
  # fuzz replays and targets.
  SAN_LABELS='fuzz|emu|slow'
  san_targets() {
    (cd "$SAN_DIR" && ctest -N -LE "$SAN_LABELS" "${SAN_SELECT[@]}") \
      | sed -n 's/^ *Test *#[0-9]*: *//p' | sed 's/_regressions$/_replay/'
    [ "$SAN_DIR" = build-fuzz ] && printf '%s\n' fuzz_reader fuzz_compile
  }
  CC="$SAN_CC" cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DIRON_SANITIZE=ON "${SAN_CONF[@]}" -DIRON_WERROR=ON >/dev/null \
    && cmake --build "$SAN_DIR" -j "$JOBS" --target $(san_targets) \
    && (cd "$SAN_DIR" && ctest -LE "$SAN_LABELS" "${SAN_SELECT[@]}" --output-on-failure --timeout 900 -j "$JOBS" 2>&1 | tail -60; exit "${PIPESTATUS[0]}") \
    || status=$?
  stage_end "$status"

  if [ "$SAN_DIR" = build-fuzz ]; then
    stage_begin "fuzz (build-fuzz, clang, ctest -L fuzz)"
    status=0
    (cd build-fuzz && ctest -L fuzz --output-on-failure --timeout 900 -j "$JOBS" 2>&1 | tail -60; exit "${PIPESTATUS[0]}") \
      || status=$?
    # Final libFuzzer statistics (executions, exec/s, coverage, corpus growth).
    grep -H -E 'DONE|stat::' build-fuzz/tests/fuzz/fuzz_*_run.log 2>/dev/null \
      | sed 's|^build-fuzz/tests/fuzz/||' 
    stage_end "$status"
  else
    echo; echo "=== fuzz: clang not found, skipped"
    RESULTS+=("skip   fuzz (no clang)")
  fi
  printf '%s\n' "${RESULTS[@]}" > "$SAN_RESULTS"
  exit "$FAILED"
}
SAN_PID=""
mkdir -p "$ROOT/build-logs"
SAN_LOG="$ROOT/build-logs/sanitizer-stages.log"
SAN_RESULTS="$ROOT/build-logs/sanitizer-stages.results"
rm -f "$SAN_RESULTS"
if [ "$SAN_MODE" != 0 ]; then
  echo; echo "=== sanitizer stages: started in the background (log: $SAN_LOG)"
  ( RESULTS=(); FAILED=0; sanitizer_stages ) > "$SAN_LOG" 2>&1 &
  SAN_PID=$!
else
  echo; echo "=== sanitizer build and fuzz runs: off (IRON_TEST_SANITIZE=0)"
  RESULTS+=("skip   ASan+UBSan and fuzz (IRON_TEST_SANITIZE=0)")
fi

# 5. The jax-level suites: every program on iron and on cpu, compared.
stage_begin "pytest tests/python (JAX_PLATFORMS=iron,cpu)"
# Run from outside the tree's python/ package dir so the installed plugin is
# what gets imported; conftest.py falls back to the tree when none is installed.
# A hung program must fail the run, not stall CI: bound the whole suite.
JAX_PLATFORMS=iron,cpu timeout 2400 "$PY" -m pytest tests/python -q -p no:cacheprovider \
  --durations=5 ${PYTEST_ARGS:-}
stage_end $?

# 6. Op conformance: every op x dtype class on iron vs XLA:CPU, bit-exact
# where XLA is; known mismatches (tests/conformance/known_mismatches.txt) run
# as strict xfails.
stage_begin "op conformance tests/conformance (JAX_PLATFORMS=iron,cpu)"
JAX_PLATFORMS=iron,cpu timeout 1800 "$PY" -m pytest tests/conformance -q \
  -p no:cacheprovider ${PYTEST_ARGS:-}
stage_end $?

if [ -n "$SAN_PID" ]; then
  wait "$SAN_PID" || FAILED=1
  echo; echo "=== sanitizer stages (ran beside the suites above): $SAN_LOG"
  tail -120 "$SAN_LOG"
  if [ -s "$SAN_RESULTS" ]; then
    while IFS= read -r line; do RESULTS+=("$line"); done < "$SAN_RESULTS"
  else
    RESULTS+=("FAILED sanitizer stages (no results; see $SAN_LOG)")
    FAILED=1
  fi
fi

echo
echo "=== summary ($(( $(date +%s) - T0 ))s total)"
printf '%s\n' "${RESULTS[@]}"
exit "$FAILED"
