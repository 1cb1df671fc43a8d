#!/usr/bin/env bash
# Device while loops (IRON_CUDA_DEVICE_WHILE=1) crash hunt on the GPU
# machine: a RelWithDebInfo plugin (build-dbg), tests/python/test_device_while.py
# one test at a time in order under the segv_trace preload (native stacks,
# named by crash_stack.py), IRON_GRAPH_DEBUG=1; the first crashing test
# again under compute-sanitizer when the machine has it, and under ASan.
# Logs under $OUT/dw. Not part of the plugin.
#   DW_ONLY=asan: only the ASan run (whole file);
#   DW_REVERT_RELAXED=1: in a copy of the tree under /tmp, without the
#   relaxed capture mode around a loop body's allocations (the crash of the
#   ninth session), to see what the discard path did.
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/iron-out}/dw; mkdir -p "$out"
if [ "${DW_REVERT_RELAXED:-0}" = 1 ]; then
  rm -rf /tmp/dw_revert && mkdir -p /tmp/dw_revert &&
    tar -c --exclude='./build*' --exclude=./.jaxtests . | tar -x -C /tmp/dw_revert || exit 1
  cd /tmp/dw_revert
  sed -i 's/bool relaxed = d->api/bool relaxed = false \&\& d->api/' src/device/cuda/cuda_device.c
  grep -c "relaxed = false" src/device/cuda/cuda_device.c
fi
if [ "${DW_ONLY:-}" != asan ]; then
cmake -S . -B build-dbg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIRON_WERROR=OFF \
  -DIRON_BUILD_TESTS=OFF >"$out/build.log" 2>&1 && ninja -C build-dbg iron_pjrt >>"$out/build.log" 2>&1 ||
  { tail -20 "$out/build.log"; exit 1; }
gcc -std=c17 -O2 -shared -fPIC scripts/debug/segv_trace.c -o /tmp/libsegv.so || exit 1
export IRON_PLUGIN_PATH=$PWD/build-dbg/libiron_pjrt.so PYTHONPATH=$PWD/python IRON_DEVICE=cuda \
  IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu IRON_CUDA_DEVICE_WHILE=1 IRON_CACHE_DIR=$PWD/build-dbg/kcache
python3 -m pytest --collect-only -q -p no:cacheprovider tests/python/test_device_while.py 2>/dev/null |
  grep "::" > "$out/ids.txt"
echo "$(wc -l < "$out/ids.txt") tests"
# The whole file in one process first (the crash may need earlier tests).
IRON_GRAPH_DEBUG=1 LD_PRELOAD=/tmp/libsegv.so timeout 150 python3 -m pytest -p no:faulthandler \
  -p no:cacheprovider tests/python/test_device_while.py -x -v > "$out/whole.txt" 2>&1
echo "whole file: rc $?"; grep -E "PASSED|FAILED|ERROR" "$out/whole.txt" | tail -4
python3 scripts/debug/crash_stack.py < "$out/whole.txt" | head -40
grep "^iron:" "$out/whole.txt" | tail -12
last=$(grep -E "::.* (PASSED|FAILED)" "$out/whole.txt" | tail -1 | awk '{print $1}')
next=$(grep -A1 -xF "$last" "$out/ids.txt" | tail -1)
[ -n "$next" ] || next=$(head -1 "$out/ids.txt")
echo "=== alone: $next"
IRON_GRAPH_DEBUG=1 LD_PRELOAD=/tmp/libsegv.so timeout 60 python3 -m pytest -p no:faulthandler \
  -p no:cacheprovider "$next" -x -v > "$out/alone.txt" 2>&1
echo "alone: rc $?"; python3 scripts/debug/crash_stack.py < "$out/alone.txt" | head -30
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$cs" ]; then
  echo "=== compute-sanitizer: $next"
  timeout 150 "$cs" --tool memcheck --target-processes all python3 -m pytest -p no:cacheprovider \
    "$next" -x -q > "$out/sanitizer.txt" 2>&1
  echo "rc $?"; grep -E "=========|passed|failed" "$out/sanitizer.txt" | head -30
fi
fi
asan=$(gcc -print-file-name=libasan.so)
if [ -f "$asan" ]; then
  echo "=== ASan plugin"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DIRON_WERROR=OFF -DIRON_BUILD_TESTS=OFF \
    -DCMAKE_C_FLAGS="-fsanitize=address -fno-omit-frame-pointer" >"$out/asan_build.log" 2>&1 &&
    ninja -C build-asan iron_pjrt >>"$out/asan_build.log" 2>&1 &&
    IRON_GRAPH_DEBUG=1 IRON_PLUGIN_PATH=$PWD/build-asan/libiron_pjrt.so PYTHONPATH=$PWD/python \
    IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu IRON_CUDA_DEVICE_WHILE=1 \
    IRON_PLUGIN_PATH=$PWD/build-asan/libiron_pjrt.so LD_PRELOAD=$asan \
    ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:replace_intrin=0:allow_user_segv_handler=1 \
    timeout 150 python3 -m pytest -p no:faulthandler -p no:cacheprovider \
    tests/python/test_device_while.py -x -v > "$out/asan.txt" 2>&1
  echo "rc $?"; grep -E -A40 "ERROR: AddressSanitizer" "$out/asan.txt" | head -60
  grep -E "PASSED|FAILED" "$out/asan.txt" | tail -2; grep "^iron:" "$out/asan.txt" | tail -6; tail -3 "$out/asan.txt"
fi
