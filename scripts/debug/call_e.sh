#!/usr/bin/env bash
# Eighteenth session's third call: jax's 20 core files on CUDA beside the
# GPU fuzzer (fresh seeds), then bench/gpu_bench.py on a quiet GPU.
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
FUZZ_MINUTES=${FUZZ_MINUTES:-3} FUZZ_JOBS=4 timeout 420 scripts/gpu_session.sh build suite\& fuzzgpu wait 2>&1 | tail -80
GPUBENCH_TIMEOUT=150 GPUBENCH_STEPS=8 timeout 160 scripts/gpu_session.sh gpubench 2>&1 | tail -20
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
