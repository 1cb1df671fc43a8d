#!/usr/bin/env bash
# One-off GPU debugging of crashes (eighth session): native stacks of
# segfaulting pytest runs on the CUDA device.
cd "$(dirname "$0")/../.."
scripts/gpu_session.sh build >/dev/null || exit 1
gcc -std=c17 -O2 -shared -fPIC scripts/debug/segv_trace.c -o /tmp/libsegv.so || exit 1
export IRON_PLUGIN_PATH=$PWD/build-dev/libiron_pjrt.so PYTHONPATH=$PWD/python IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu
export IRON_CACHE_DIR=$PWD/build-dev/kcache
run() {  # name, env..., pytest args
  local n=$1; shift
  echo "=== $n"
  env "$@" 2>&1 | tail -c 60000 > /tmp/$n.txt
  grep -E "passed|failed|PASSED|FAILED|Error|error:" /tmp/$n.txt | tail -8
  python3 scripts/debug/crash_stack.py < /tmp/$n.txt | head -40
}
run dw IRON_GRAPH_DEBUG=1 LD_PRELOAD=/tmp/libsegv.so timeout 120 python3 -m pytest -p no:faulthandler -p no:cacheprovider tests/python/test_device_while.py -x -v
grep "iron:" /tmp/dw.txt | tail -5
run corpus_nodw IRON_CUDA_DEVICE_WHILE=0 LD_PRELOAD=/tmp/libsegv.so timeout 200 python3 -m pytest -p no:faulthandler -p no:cacheprovider tests/python/test_corpus.py -x -q
run corpus_nopg IRON_CUDA_PROGRAM_GRAPHS=0 LD_PRELOAD=/tmp/libsegv.so timeout 200 python3 -m pytest -p no:faulthandler -p no:cacheprovider tests/python/test_corpus.py -x -q
for t in test_cuda_scalar_ops_emu test_cuda_complex_emu; do echo "=== $t"; timeout 200 build-dev/tests/$t 2>&1 | grep -v "^  *ok" | tail -25; done
