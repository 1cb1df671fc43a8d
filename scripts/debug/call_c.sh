#!/usr/bin/env bash
# Eighteenth session's first call: build, the decode step's A/B of the scan
# rewrite, then pyall beside test_scan_in_place + test_denormals on CUDA.
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
DECODE_TIMEOUT=55 DECODE_ARGS="--frameworks iron,xla" \
  DECODE_AB="IRON_SCAN_IN_PLACE=0 IRON_SCAN_IN_PLACE=1" \
  timeout 200 scripts/gpu_session.sh build decodeab 2>&1 | grep -E "^==|^decode_|ERROR|rror|build|copy roofline|\[" | head -40
PYALL_TIMEOUT=${PYALL_TIMEOUT:-290} PYALL_JOBS=10 \
  timeout 300 scripts/gpu_session.sh pyall 2>&1 | tail -40 &
IRON_PLUGIN_PATH=build-dev/libiron_pjrt.so PYTHONPATH=python IRON_DEVICE=cuda IRON_CUDA_TF32=0 \
  JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 90 python3 -m pytest -q -p no:cacheprovider \
  -p no:benchmark -n 4 tests/python/test_scan_in_place.py tests/python/test_denormals.py -rf --tb=short \
  > $OUT/logs/scan_tests.log 2>&1; grep -E "^FAILED|passed|failed" $OUT/logs/scan_tests.log | tail -20
wait
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
