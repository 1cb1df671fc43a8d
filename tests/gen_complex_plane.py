#!/usr/bin/env python3
"""Generates tests/data/complex_plane: StableHLO portable artifacts of the
jax.numpy functions that jax's FunctionAccuracyTest checks on the complex
plane (tests/lax_test.py, _functions_on_complex_plane), for complex64 and
complex128, each on a flat operand of N_POINTS elements.

tests/c/test_cuda_complex_emu.c runs every artifact on the host device and,
GPU-free, runs the kernels the CUDA device generates for it on the CPU
(tests/c/cuda_emu.h), on a grid of special values (infinities, NaN, the
extreme finite values, tiny values, every sign), and compares them.

The artifacts are what jaxlib hands the plugin (xla's Serialize with mixed
serialization at iron's StableHLO target, as tests/gen_corpus.py writes
them): jaxlib expands complex sqrt/log1p and CHLO's acos/asin/... into real
arithmetic there, so the comparison covers the real ops too.

Usage: python3 tests/gen_complex_plane.py [--out DIR]
"""
import argparse
import os

HERE = os.path.dirname(os.path.abspath(__file__))
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jax._src.interpreters import mlir as jax_mlir  # noqa: E402
from jax._src.lib import _jax  # noqa: E402

TARGET = "1.16.0"  # the StableHLO version the iron plugin asks for

# Must equal kPoints in tests/c/test_cuda_complex_emu.c (31 x 31 grid).
N_POINTS = 961

FUNCTIONS = [
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh",
    "conjugate", "cos", "cosh", "exp", "exp2", "expm1", "log", "log10",
    "log1p", "sin", "sinh", "sqrt", "square", "tan", "tanh", "sinc",
    "positive", "negative", "absolute", "sign", "reciprocal",
]


def serialize(lowered):
    # What jaxlib's PJRT C API client hands a plugin (as tests/gen_corpus.py).
    module = lowered.compiler_ir("stablehlo")
    bytecode = jax_mlir.module_to_bytecode(module)
    return _jax.mlir.serialize_portable_artifact(bytecode, TARGET, True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "data",
                                                  "complex_plane"))
    opts = ap.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    n = 0
    for dt in (np.complex64, np.complex128):
        spec = jax.ShapeDtypeStruct((N_POINTS,), dt)
        for name in FUNCTIONS:
            lowered = jax.jit(getattr(jnp, name)).lower(spec)
            path = os.path.join(opts.out,
                                f"{name}_{np.dtype(dt).name}.mlirbc")
            with open(path, "wb") as f:
                f.write(serialize(lowered))
            n += 1
    print(f"wrote {n} artifacts to {opts.out} (jax {jax.__version__})")


if __name__ == "__main__":
    main()
