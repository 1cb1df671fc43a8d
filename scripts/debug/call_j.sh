#!/usr/bin/env bash
# Twentieth session, first call: build; the f32/bf16 CNN steps with the
# recompute, sibling-reduce and producer-merge passes off, the last off,
# then all on beside XLA; then jax's
# 20 core files and the corpus on CUDA side by side. Logs under $OUT.
set -u
export OUT GPU_SESSION_NOPACK=1
root=$PWD
timeout 150 scripts/gpu_session.sh build > $OUT/build.log 2>&1; tail -3 $OUT/build.log
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python KT_TOP=5
IRON_FUSE_RECOMPUTE=0 IRON_FUSE_SIBLING_REDUCES=0 IRON_FUSE_MERGE_PRODUCERS=0 timeout 60 python3 bench/kernels.py \
  --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 --frameworks iron > $OUT/cnn_off.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_off.log | head -30
IRON_FUSE_MERGE_PRODUCERS=0 timeout 60 python3 bench/kernels.py \
  --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 --frameworks iron > $OUT/cnn_nomp.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_nomp.log | head -30
timeout 90 python3 bench/kernels.py --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 \
  --frameworks iron,xla > $OUT/cnn_on.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_on.log | head -40
SUITE_DEADLINE=220 timeout 245 scripts/gpu_session.sh suite\& corpus\& wait > $OUT/rest.log 2>&1
tail -40 $OUT/rest.log
tar czf $OUT/logs.tgz -C $OUT logs 2>/dev/null; rm -rf $OUT/logs
