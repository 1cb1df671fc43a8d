#!/usr/bin/env bash
# GPU-only fuzz finds: for each program of $FINDS (fuzz seeds, ":big" for
# --big programs), the result as built, without NVRTC optimization
# (IRON_CUDA_NVRTC_OPT=0), and with each of its kernels alone compiled
# without optimization (IRON_CUDA_NVRTC_OPT=0:NAME; names read from the
# kernels the GPU compiled into a fresh cache): which kernel's optimized
# code differs. Then the integer wrap-around sweep (test_int_wrap.py) on
# CUDA with and without the 16-bit negation workaround, and the ptxas probe
# (scripts/debug/ptxas_probe.py). Needs build-dev (scripts/gpu_session.sh
# build). Logs under $OUT/finds. WRAP=0 / PROBE=0 skip the sweep / probe
# (scripts/fuzz_programs_gpu.sh calls it that way on its failing programs).
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/iron-out}/finds
mkdir -p "$out"
h=build-dev/tests/test_cuda_fuzz_programs
FINDS=${FINDS:-"26297024:big 26298356:big"}
run() {  # seed big env...: prints "rc" and the first differing elements
  local seed=$1 big=$2; shift 2
  env IRON_TEST_SHOW_DIFFS=3 "$@" timeout 120 python3 tests/fuzz_programs.py run \
    --device cuda --harness $h --seed "$seed" --count 1 $big >"$out/run.log" 2>&1
  local rc=$?
  echo "rc=$rc $(grep -E 'differ;|beyond' "$out/run.log" | head -2 | tr '\n' ' ')"
}
for f in $FINDS; do
  seed=${f%%:*}; big=""; [ "$f" != "$seed" ] && big=--big
  cache=$out/cache_$seed; rm -rf "$cache"
  echo "== fz_$seed $big: as built: $(IRON_CACHE_DIR=$cache run $seed "$big")"
  echo "   IRON_CUDA_NVRTC_OPT=0: $(IRON_CACHE_DIR=$out/cache_g run $seed "$big" IRON_CUDA_NVRTC_OPT=0)"
  for k in $(strings "$cache"/cuda/* 2>/dev/null | grep -oE 'iron_[a-z_]+_[0-9a-f]{16}' | sort -u); do
    echo "   -G $k: $(IRON_CACHE_DIR=$out/cache_g run $seed "$big" IRON_CUDA_NVRTC_OPT=0:$k)"
  done
done
# SASS of named kernels, optimized and -G: SASS_FOR="seed[:big]:KERNEL ..."
# (IRON_CUDA_SOURCE_DIR writes every compiled module's source and cubin).
dis=$(command -v nvdisasm || ls /usr/local/cuda/bin/nvdisasm 2>/dev/null)
for f in ${SASS_FOR:-}; do
  k=${f##*:}; rest=${f%:*}; seed=${rest%%:*}; big=""; [ "$rest" != "$seed" ] && big=--big
  for mode in O3 G; do
    d=$out/src_${seed}_$mode; rm -rf "$d"; mkdir -p "$d"
    g=""; [ $mode = G ] && g=IRON_CUDA_NVRTC_OPT=0:$k
    run $seed "$big" IRON_CUDA_CACHE=0 IRON_CUDA_SOURCE_DIR=$d $g >/dev/null
    cu=$(grep -l "$k" "$d"/*.cu | head -1)
    [ -n "$cu" ] && cp "$cu" "$out/${k}_$mode.cu" &&
      [ -n "$dis" ] && "$dis" -c "${cu%.cu}.cubin" >"$out/${k}_$mode.sass" 2>&1
    echo "== SASS $k $mode: $(wc -l <"$out/${k}_$mode.sass" 2>/dev/null) lines"
  done
done
wrap() {
  IRON_PLUGIN_PATH=$PWD/build-dev/libiron_pjrt.so PYTHONPATH=$PWD/python IRON_DEVICE=cuda \
    JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 "$@" timeout 200 python3 -m pytest -q \
    -p no:cacheprovider -p no:benchmark tests/python/test_int_wrap.py 2>&1 |
    grep -E "^E  |passed|failed" | cut -c1-160 | head -${WRAP_LINES:-12}
}
if [ "${WRAP:-1}" = 1 ]; then
  echo "== test_int_wrap on CUDA"; wrap env
  echo "== test_int_wrap on CUDA, IRON_CUDA_NEG_PTX=0"; WRAP_LINES=4 wrap env IRON_CUDA_NEG_PTX=0
fi
if [ "${PROBE:-1}" = 1 ]; then
  echo "== ptxas probes"
  JAX_PLATFORMS=cuda,cpu timeout 120 python3 scripts/debug/ptxas_probe.py 2>&1 | tail -32
fi
