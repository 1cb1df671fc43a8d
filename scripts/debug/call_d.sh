#!/usr/bin/env bash
# Eighteenth session's second call: convolutions (cuDNN heuristics vs
# Find vs XLA), the kernels table (quick), then the model zoo on CUDA.
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
CONV_TIMEOUT=200 KERNELS_ARGS="--rounds 1" timeout 560 scripts/gpu_session.sh build convbench kquick 2>&1 | tail -110
ZOO_TIMEOUT=${ZOO_TIMEOUT:-150} timeout 160 scripts/gpu_session.sh zoo 2>&1 | tail -30
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
