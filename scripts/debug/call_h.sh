#!/usr/bin/env bash
# Nineteenth session, short call (little device time left): build; the
# CNN step with the recompute and sibling-reduce passes off, the first
# on, both on (the default) against XLA (CUPTI kinds);
# corpus programs on CUDA (shared_*, norms, convs, reduces).
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
root=$PWD
timeout 150 scripts/gpu_session.sh build 2>&1 | tail -2
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python KT_TOP=6
for v in "IRON_FUSE_RECOMPUTE=0 IRON_FUSE_SIBLING_REDUCES=0" "IRON_FUSE_SIBLING_REDUCES=0" "IRON_FUSE_RECOMPUTE=1"; do
  tag=${v// /_}
  env $v timeout 75 python3 bench/kernels.py --only cnn_f32,cnn_bf16 \
    --rounds 1 --trace 1 --frameworks iron$([ "$v" = IRON_FUSE_RECOMPUTE=1 ] && echo ,xla) \
    > $OUT/logs/cnn_$tag.log 2>&1
  echo "== $v"; grep -v -i warn $OUT/logs/cnn_$tag.log | grep -E "^cnn_|kind|trace:" | head -40
done
IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 60 \
  python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/python/test_corpus.py \
  -k "shared_ or norm or conv or softmax or reduce" > $OUT/logs/corpus_cuda.log 2>&1
grep -E "^FAILED|passed|failed" $OUT/logs/corpus_cuda.log | tail -8
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
