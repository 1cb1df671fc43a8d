#!/usr/bin/env bash
# Nineteenth session, last device seconds: build; the f32 and bf16 CNN
# steps with the recompute and sibling-reduce passes off, then on (the
# default) beside XLA. Logs straight under $OUT (a call cut off keeps
# what it wrote).
set -u
export OUT GPU_SESSION_NOPACK=1
root=$PWD
timeout 120 scripts/gpu_session.sh build > $OUT/build.log 2>&1; tail -2 $OUT/build.log
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python KT_TOP=5
IRON_FUSE_RECOMPUTE=0 IRON_FUSE_SIBLING_REDUCES=0 timeout 60 python3 bench/kernels.py \
  --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 --frameworks iron > $OUT/cnn_off.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_off.log | head -30
timeout 90 python3 bench/kernels.py --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 \
  --frameworks iron,xla > $OUT/cnn_on.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_on.log | head -40
