#!/usr/bin/env bash
# Nineteenth session's second call: build; the CNN step with the
# recompute pass off and on (IRON_FUSE_RECOMPUTE) against XLA, with CUPTI
# kernel traces by kind; the decode step; kernels.py --quick; gpu_bench's
# transformer d256 and GRU; corpus programs on CUDA (shared_*, norms, convs).
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
root=$PWD
timeout 200 scripts/gpu_session.sh build 2>&1 | tail -3
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python KT_TOP=8
for v in 0 1; do
  IRON_FUSE_RECOMPUTE=$v timeout 100 python3 bench/kernels.py --only cnn_f32,cnn_bf16 \
    --rounds 1 --trace 2 --frameworks iron$([ $v = 1 ] && echo ,xla) \
    > $OUT/logs/cnn_rc$v.log 2>&1
  echo "== IRON_FUSE_RECOMPUTE=$v"; grep -v -i warn $OUT/logs/cnn_rc$v.log | grep -E "cnn_|kind|trace|copy roofline" | head -60
done
timeout 90 python3 bench/kernels.py --only decode_f32,decode_bf16 --rounds 1 --frameworks iron,xla \
  > $OUT/logs/decode.log 2>&1; grep -E "^[a-z_0-9]+ +[0-9-]|roofline" $OUT/logs/decode.log | tail -6
timeout 100 python3 bench/gpu_bench.py --rounds 1 --steps 8 --only transformer_d256,gru256 --frameworks iron,xla \
  > $OUT/logs/gpubench.log 2>&1; grep -v -i warn $OUT/logs/gpubench.log | tail -14
IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 80 \
  python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/python/test_corpus.py \
  -k "shared_ or norm or conv or softmax or reduce" > $OUT/logs/corpus_cuda.log 2>&1
grep -E "^FAILED|passed|failed" $OUT/logs/corpus_cuda.log | tail -8
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
