#!/usr/bin/env bash
# Second call: the decode step's artifact as jax 0.11.2 writes it (for the
# CUDA refusal of the rewritten loop), and the decode A/B that avoids it.
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
timeout 120 scripts/gpu_session.sh build 2>&1 | tail -3; mkdir -p $OUT/logs/dump
mkdir -p $OUT/logs
IRON_DUMP_DIR=$OUT/logs/dump IRON_SCAN_IN_PLACE=1 IRON_PLUGIN_PATH=build-dev/libiron_pjrt.so PYTHONPATH=python \
  timeout 60 python3 bench/kernels.py --only decode_f32 --rounds 1 --frameworks iron > $OUT/logs/dump.log 2>&1
ls -la $OUT/logs/dump | head
for f in $OUT/logs/dump/*.mlirbc; do build-dev/iron-dump --fuse-cuda "$f" > "$f.txt" 2>&1; done
DECODE_TIMEOUT=100 DECODE_ARGS="--frameworks iron,xla" \
  DECODE_AB="IRON_SCAN_IN_PLACE=0 IRON_SCAN_IN_PLACE=1" \
  timeout 250 scripts/gpu_session.sh decodeab 2>&1 | grep -E "^==|decode_|ERROR" | head -40
IRON_PLUGIN_PATH=build-dev/libiron_pjrt.so PYTHONPATH=python IRON_DEVICE=cuda IRON_CUDA_TF32=0 \
  JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 100 python3 -m pytest -q -p no:cacheprovider \
  -p no:benchmark tests/python/test_scan_in_place.py tests/python/test_denormals.py -rf --tb=short \
  > $OUT/logs/scan_tests.log 2>&1; grep -E "^FAILED|passed|failed" $OUT/logs/scan_tests.log | tail -20
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
