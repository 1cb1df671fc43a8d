#!/usr/bin/env bash
# Twentieth session, one short call: build; the f32/bf16 CNN steps with
# the recompute, sibling-reduce and producer-merge passes off, then on
# beside XLA (CUPTI kinds); gpu_bench's transformer d512 and GRU steps
# with the producer merge off and on beside XLA; the corpus and the
# merge/shared programs on CUDA. Logs straight under $OUT.
set -u
export OUT GPU_SESSION_NOPACK=1
root=$PWD
timeout 150 scripts/gpu_session.sh build > $OUT/build.log 2>&1; tail -3 $OUT/build.log
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python KT_TOP=5
IRON_FUSE_RECOMPUTE=0 IRON_FUSE_SIBLING_REDUCES=0 IRON_FUSE_MERGE_PRODUCERS=0 timeout 60 \
  python3 bench/kernels.py --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 --frameworks iron \
  > $OUT/cnn_off.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_off.log | head -30
timeout 90 python3 bench/kernels.py --only cnn_f32,cnn_bf16 --rounds 1 --trace 1 \
  --frameworks iron,xla > $OUT/cnn_on.log 2>&1
grep -E "^cnn_|kind|trace:" $OUT/cnn_on.log | head -40
IRON_FUSE_MERGE_PRODUCERS=0 timeout 80 python3 bench/gpu_bench.py --rounds 1 --steps 8 \
  --only transformer_d512,gru256 --frameworks iron > $OUT/gb_off.log 2>&1
tail -6 $OUT/gb_off.log
timeout 120 python3 bench/gpu_bench.py --rounds 1 --steps 8 \
  --only transformer_d512,gru256 --frameworks iron,xla > $OUT/gb_on.log 2>&1
tail -8 $OUT/gb_on.log
IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 100 \
  python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 8 tests/python/test_corpus.py \
  > $OUT/corpus_cuda.log 2>&1
grep -E "^FAILED|passed|failed" $OUT/corpus_cuda.log | tail -8
