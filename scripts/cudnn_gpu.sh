#!/usr/bin/env bash
# cuDNN convolutions on the GPU machine (issue 14): builds this tree, then
#   tests: test_cuda_cudnn (plans of every corpus/conformance convolution,
#          descriptors checked by the installed cuDNN), test_cuda_convfft,
#          tests/python/test_conv_cnn.py on the CUDA device with cuDNN
#          (TF32 default) and without (IRON_CUDA_CUDNN=0), the conformance
#          suite's convolution cases on cuda (exact f32, as cuda_tests.sh)
#          with IRON_CUDA_CUDNN_DEBUG logs (which call/algorithm each got),
#          and the corpus programs with convolutions;
#   bench: bench/conv_bench.py (each CNN convolution forward/backward and the
#          whole CNN step: iron+cuDNN heuristics, iron+cuDNN measured,
#          iron without cuDNN, XLA:GPU, torch).
# Usage (through the device tool): scripts/cudnn_gpu.sh [tests|bench|all]
# Logs go under $OUT when set. BENCH_ARGS adds conv_bench.py arguments.
set -uo pipefail
what=${1:-all}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | head -2
python3 -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__)"
python3 -m pip show nvidia-cudnn-cu13 2>/dev/null | grep -i "^version" | sed 's/^/nvidia-cudnn-cu13 /'
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
export IRON_TEST_REQUIRE_CUDA=1
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
if [ "$what" = all ] || [ "$what" = tests ]; then
  echo "== test_cuda_cudnn"
  build-dev/tests/test_cuda_cudnn 2>&1 | tail -4 || rc=1
  echo "== test_cuda_convfft"
  build-dev/tests/test_cuda_convfft 2>&1 | tail -2 || rc=1
  echo "== test_conv_cnn.py on cuda, cuDNN (TF32 default)"
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 400 python3 -m pytest \
    tests/python/test_conv_cnn.py -q -p no:cacheprovider -rfs --tb=short 2>&1 |
    tee "$out/conv_cnn_cudnn.txt" | tail -25 || rc=1
  echo "== test_conv_cnn.py on cuda, IRON_CUDA_CUDNN=0"
  IRON_CUDA_CUDNN=0 IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 400 python3 -m pytest \
    tests/python/test_conv_cnn.py -q -p no:cacheprovider -rf --tb=line 2>&1 |
    tee "$out/conv_cnn_nocudnn.txt" | tail -8 || rc=1
  echo "== conformance conv cases on cuda (exact f32), cuDNN decisions in cudnn_conformance.log"
  IRON_CUDA_TF32=0 IRON_CUDA_CUDNN_DEBUG=1 IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu \
    timeout 400 python3 -m pytest tests/conformance -k conv -q -p no:cacheprovider -rf \
    --tb=short -s 2>"$out/cudnn_conformance.log" | tee "$out/conformance_conv.txt" |
    grep -v "^\.\|^F\|^s" | tail -40 || rc=1
  echo "cuDNN calls: $(grep -c ': cuDNN ' "$out/cudnn_conformance.log")," \
    "kept on the CUDA kernels: $(grep -c 'kept on the CUDA kernels' "$out/cudnn_conformance.log")"
  grep 'kept on the CUDA kernels' "$out/cudnn_conformance.log" | sed 's/.*kept on the CUDA kernels: //' |
    sort | uniq -c | sort -rn | head -12
  echo "== corpus programs with convolutions on cuda"
  IRON_CUDA_TF32=0 IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 300 python3 -m pytest \
    tests/python/test_corpus.py -k "conv or cnn" -q -p no:cacheprovider -rf --tb=short 2>&1 |
    tail -8 || rc=1
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  echo "== bench/conv_bench.py"
  PYTHONUNBUFFERED=1 timeout 560 python3 bench/conv_bench.py --rounds 1 --steps 10 \
    --json "$out/conv_bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$out/conv_bench.txt" || rc=1
fi
exit $rc
