#!/usr/bin/env python3
"""Generates tests/data/vecdot: StableHLO portable artifacts of dots with a
vector side (src/compiler/vector_dot.h), as jaxlib hands them to a PJRT
plugin: vector x matrix and matrix x vector, [1, K] rows, batched einsums
of attention over a KV cache (q . k, p . v), several contracting dims,
f32/bf16/f16/f64 and mixed operands with preferred_element_type, matrices
that are one layer's slice of stacked weights (dynamic_slice, as a scan
over layers reads them) and a decode step's scan over stacked layers.
tests/c/test_cuda_vector_dot_emu.c runs each on the host device and as the
CUDA device plans it with IRON_CUDA_VECTOR_DOTS=all (the reductions run by
the CPU emulation of the generated kernels) and compares within a
tolerance (the sums run in another order than the host's dot).

Usage: python3 tests/gen_vecdot_corpus.py [--out DIR] [--list]
"""
import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax._src.interpreters import mlir as jax_mlir  # noqa: E402
from jax._src.lib import _jax  # noqa: E402

TARGET = "1.16.0"
OUT = os.path.join(HERE, "data", "vecdot")
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16,
          "f64": jnp.float64}


def serialize(lowered):
    module = lowered.compiler_ir("stablehlo")
    bytecode = jax_mlir.module_to_bytecode(module)
    return _jax.mlir.serialize_portable_artifact(bytecode, TARGET, True)


def S(shape, dt):
    return jax.ShapeDtypeStruct(shape, dt)


def programs():
    """Yields (name, fn, args)."""
    for dn, dt in DTYPES.items():
        for k, n in ((1, 5), (7, 33), (64, 96), (300, 129)):
            yield (f"vecmat_{dn}_k{k}_n{n}", lambda x, w: x @ w,
                   (S((k,), dt), S((k, n), dt)))
            yield (f"matvec_{dn}_k{k}_n{n}", lambda w, x: w @ x,
                   (S((n, k), dt), S((k,), dt)))
            yield (f"row_{dn}_k{k}_n{n}", lambda x, w: x @ w,
                   (S((1, k), dt), S((k, n), dt)))
        # One layer of stacked weights, read at a traced layer index.
        yield (f"sliced_{dn}", lambda ws, x, i: x @ ws[i],
               (S((3, 48, 80), dt), S((48,), dt), S((), jnp.int32)))
        yield (f"sliced_t_{dn}", lambda ws, x, i: ws[i] @ x,
               (S((3, 80, 48), dt), S((48,), dt), S((), jnp.int32)))
    # Attention over a cache: batch dims, vector per head.
    for dn in ("f32", "bf16"):
        dt = DTYPES[dn]
        yield (f"qk_{dn}", lambda q, k: jnp.einsum(
            "hd,thd->ht", q, k, preferred_element_type=jnp.float32),
            (S((4, 16), dt), S((37, 4, 16), dt)))
        yield (f"pv_{dn}", lambda p, v: jnp.einsum("ht,thd->hd", p, v),
               (S((4, 37), dt), S((37, 4, 16), dt)))
    # Mixed operand dtypes, several contracting dims, a vector whose free
    # dims are all 1, both sides vectors.
    yield ("mixed_bf16_f32", lambda x, w: lax.dot_general(
        x, w, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32),
        (S((40,), jnp.bfloat16), S((40, 24), jnp.float32)))
    yield ("two_contract", lambda x, w: jnp.einsum("ab,abn->n", x, w),
           (S((3, 5), jnp.float32), S((3, 5, 17), jnp.float32)))
    yield ("unit_free", lambda x, w: jnp.einsum("iak,kn->ian", x, w),
           (S((1, 1, 9), jnp.float32), S((9, 6), jnp.float32)))
    yield ("both_vectors", lambda x, y: x @ y,
           (S((50,), jnp.float32), S((50,), jnp.float32)))
    yield ("batch_last", lambda x, w: jnp.einsum("kb,knb->bn", x, w),
           (S((12, 3), jnp.float32), S((12, 7, 3), jnp.float32)))
    # Zero-size contracting and free dims.
    yield ("empty_k", lambda x, w: x @ w,
           (S((0,), jnp.float32), S((0, 5), jnp.float32)))
    yield ("empty_n", lambda x, w: x @ w,
           (S((6,), jnp.float32), S((6, 0), jnp.float32)))

    # A decode step: a scan over stacked layers, each x @ W[layer].
    def decode(ws, x):
        def layer(h, w):
            return jnp.tanh(h @ w), None
        return lax.scan(layer, x, ws)[0]
    for dn in ("f32", "bf16"):
        yield (f"decode_scan_{dn}", decode,
               (S((4, 32, 32), DTYPES[dn]), S((32,), DTYPES[dn])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    jax.config.update("jax_enable_x64", True)
    os.makedirs(a.out, exist_ok=True)
    n = 0
    for name, fn, args in programs():
        if a.list:
            print(name)
            continue
        data = serialize(jax.jit(fn).lower(*args))
        with open(os.path.join(a.out, name + ".mlirbc"), "wb") as f:
            f.write(data)
        n += 1
    if not a.list:
        print(f"{n} programs in {a.out}")


if __name__ == "__main__":
    main()
