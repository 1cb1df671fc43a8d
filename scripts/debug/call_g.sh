#!/usr/bin/env bash
# Nineteenth session's second call: build; the CNN step with the
# recompute pass off and on (IRON_FUSE_RECOMPUTE) against XLA, with CUPTI
# kernel traces by kind; the decode step; kernels.py --quick; gpu_bench's
# transformers and GRU.
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
timeout 120 python3 bench/kernels.py --quick --rounds 1 --frameworks iron,xla \
  > $OUT/logs/kquick.log 2>&1; grep -E "^[a-z_0-9]+ +[0-9-]|roofline" $OUT/logs/kquick.log | tail -12
timeout 150 python3 bench/gpu_bench.py --rounds 1 --steps 8 --only transformer_d256,transformer_d512,gru256 --frameworks iron,xla \
  > $OUT/logs/gpubench.log 2>&1; grep -v -i warn $OUT/logs/gpubench.log | tail -14
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
