#!/usr/bin/env python3
"""Batch norm's forward and gradients over a sweep of shapes, dtypes and
reduced axes (arrays of 1 MiB and more, so src/compiler/recompute.c and
merge_reduces.c apply), written as StableHLO artifacts and run through the
emulated CUDA device against the host (test_cuda_fusion_corpus).

    python3 scripts/bn_sweep_emu.py [BUILD_DIR] [OUT_DIR]
"""
import itertools
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'build-dev')
OUT = sys.argv[2] if len(sys.argv) > 2 else '/tmp/iron_bn_sweep'
os.makedirs(OUT, exist_ok=True)
import gen_corpus as g
import jax, jax.numpy as jnp
from jax import lax

def bn_grad(axes, dt):
    def loss(x, gm, bt, w):
        xf = x.astype(jnp.float32) if dt == jnp.bfloat16 else x
        mu = xf.mean(axes, keepdims=True)
        var = ((xf - mu) ** 2).mean(axes, keepdims=True)
        h = (xf - mu) * lax.rsqrt(var + 1e-5) * gm + bt
        return jnp.sum(jax.nn.relu(h) * w)
    return jax.value_and_grad(loss, (0, 1, 2))

n = 0
for (shape, axes), dt in itertools.product(
        [((4096, 64), (0,)), ((2048, 100), (0,)), ((64, 64, 80), (0, 1)),
         ((16, 32, 32, 48), (0, 1, 2)), ((512, 4, 160), (0,)), ((300, 1000), (0,))],
        [jnp.float32, jnp.bfloat16]):
    kept = tuple(d for i, d in enumerate(shape) if i not in axes)
    pshape = tuple(1 if i in axes else d for i, d in enumerate(shape))
    x = jax.ShapeDtypeStruct(shape, dt)
    p = jax.ShapeDtypeStruct(pshape, jnp.float32)
    w = jax.ShapeDtypeStruct(shape, jnp.float32)
    name = f"bn_{'x'.join(map(str, shape))}_a{''.join(map(str, axes))}_{jnp.dtype(dt).name}"
    open(os.path.join(OUT, name + '.mlirbc'), 'wb').write(
        g.serialize(jax.jit(bn_grad(axes, dt)).lower(x, p, p, w)))
    n += 1
print(n, "programs in", OUT)
r = subprocess.run([os.path.join(BUILD, 'tests', 'test_cuda_fusion_corpus')],
                   env=dict(os.environ, IRON_TEST_CORPUS_DIR=OUT),
                   capture_output=True, text=True)
print("\n".join(ln for ln in (r.stdout + r.stderr).splitlines()
                if not ln.startswith("  ")))
sys.exit(r.returncode)
