#!/usr/bin/env bash
# Nineteenth session's first call: build; each CNN convolution on iron
# (cuDNN heuristics, Find), XLA:GPU and torch; CUPTI kernel traces of the
# CNN step (iron and XLA); XLA's optimized HLO of the step (its cuDNN
# algorithm choices); then the model zoo on CUDA.
set -u
export OUT GPU_SESSION_NOPACK=1
mkdir -p $OUT/logs
root=$PWD
timeout 200 scripts/gpu_session.sh build 2>&1 | tail -5
CONV_TIMEOUT=200 CONV_FRAMEWORKS=iron,iron-find,xla,torch \
  timeout 210 scripts/gpu_session.sh convbench 2>&1 | tail -75
IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so PYTHONPATH=$root/python \
  timeout 120 python3 bench/kernels.py --only cnn_f32,cnn_bf16 --rounds 1 --trace 2 \
  --frameworks iron,xla > $OUT/logs/ktrace.log 2>&1; grep -v -i warn $OUT/logs/ktrace.log | tail -70
mkdir -p $OUT/xladump
XLA_FLAGS="--xla_dump_to=$OUT/xladump --xla_dump_hlo_as_text" JAX_PLATFORMS=cuda \
  timeout 60 python3 bench/conv_bench.py --worker xla --names cnn_step_f32 --steps 2 --warmup 1 \
  --dtypes f32 > /dev/null 2>&1
find $OUT/xladump -type f ! -name '*after_optimizations.txt' -delete
grep -ho 'custom_call_target="__cudnn[^"]*".*backend_config=.*' $OUT/xladump/*after_optimizations.txt \
  | grep -o 'custom_call_target="[^"]*"\|"algo_id":"[0-9]*"\|"math_type":"[A-Z_]*"\|"is_cudnn_frontend":[a-z]*\|"workspace_size":"[0-9]*"' \
  | paste -sd' ' | sed 's/custom_call_target/\n&/g' | head -40
ZOO_TIMEOUT=150 timeout 160 scripts/gpu_session.sh zoo 2>&1 | tail -30
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
