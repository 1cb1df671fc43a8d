#!/usr/bin/env bash
# Issue 12's CUDA fusion checks on the GPU machine, one command: builds this
# tree, runs issue 12's corpus programs (a data-dependent dynamic window,
# broadcast-scalar updates, the KV-cache decode step and loop, a scan of 80
# carries, dynamic slices of 9 dtypes in scans, 64-bit start indices) and
# the other dynamic-slice and scan cases of the corpus on the GPU against
# XLA:CPU, then times a larger batch-1 decode step (24 layers, 16 heads of
# 64, a cache of 2048) with and without one-element groups fused
# (IRON_FUSE_SCALARS), printing the kernel launches per step
# (IRON_PROFILE=1). Logs under $OUT (default /tmp/iron-out).
# Usage (through the device tool): scripts/cuda_fusion_check.sh
set -uo pipefail
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | head -2
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev >>"$out/cmake.log" 2>&1 || { tail -50 "$out/cmake.log"; exit 1; }
export IRON_CUDA_TF32=${IRON_CUDA_TF32:-0}
export IRON_PLUGIN_PATH=$root/build-dev/libiron_pjrt.so
export PYTHONPATH=$root/python:$root/tests/python${PYTHONPATH:+:$PYTHONPATH}
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
rc=0
echo "== issue 12's corpus programs on cuda"
IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu timeout 300 python3 -m pytest \
  tests/python/test_corpus.py -q -p no:cacheprovider -rf --tb=short \
  -k "dus_window or kv_cache or many_carries or dynamic_slice or dynamic_update or scan" \
  2>&1 | tee "$out/fusion_corpus_cuda.txt" | tail -25 || rc=1
echo "== decode step timing (ms per step; kernel launches per step)"
cat >"$out/decode_bench.py" <<'EOF'
import time, numpy as np, jax, jax.numpy as jnp
from corpus import _decode_step
L, D, H, T = 24, 1024, 16, 2048
r = np.random.default_rng(0)
dev = jax.devices("iron")[0]
w = jax.device_put(r.standard_normal((L, D, 3 * D)).astype(np.float32) * 0.02, dev)
kc = jax.device_put(np.zeros((L, T, H, D // H), np.float32), dev)
vc = jax.device_put(np.zeros((L, T, H, D // H), np.float32), dev)
x = jax.device_put(r.standard_normal(D).astype(np.float32), dev)
step = jax.jit(_decode_step, donate_argnums=(1, 2))
h, kc, vc = step(w, kc, vc, x, np.int32(0))
h.block_until_ready()
times = []
for pos in range(1, 41):
    t0 = time.perf_counter()
    h, kc, vc = step(w, kc, vc, x, np.int32(pos))
    h.block_until_ready()
    times.append(time.perf_counter() - t0)
print(f"decode step: median {1e3 * np.median(times[8:]):.3f} ms, min {1e3 * min(times):.3f} ms")
EOF
for fs in 1 0; do
  echo "-- IRON_FUSE_SCALARS=$fs"
  IRON_FUSE_SCALARS=$fs IRON_PROFILE=1 IRON_DEVICE=cuda JAX_PLATFORMS=iron \
    timeout 300 python3 "$out/decode_bench.py" 2>&1 |
    grep -E "decode step|kernel steps|per run|Error|error" | tail -6 || rc=1
done
exit $rc
