#!/usr/bin/env python3
"""Generates tests/data/conv: StableHLO portable artifacts (as
tests/gen_corpus.py writes them) of every convolution program of the op
conformance suite (tests/conformance/ops.py, the cases whose name starts
with "conv": each float dtype the case accepts, plus one integer dtype)
and of convolutions jax emits for training (forward and both gradients of
NHWC/HWIO and NCHW/OIHW convolutions with symmetric, asymmetric ("SAME"
with even sizes), negative and lhs-dilated padding, strides, dilations,
feature groups and depthwise, 1-D, 2-D and 3-D).

tests/c/test_cuda_cudnn.c plans every convolution of these files (and of
tests/data/corpus) as a cuDNN call and runs the plan on the CPU against the
host's convolution kernel.

Usage: python3 tests/gen_conv_corpus.py [--out DIR]
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "conformance"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import gen_corpus  # noqa: E402  (serialize)
import ops  # noqa: E402


def shapes_of(args):
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]


def conformance_programs():
    for c in ops.CASES:
        if not c.name.startswith("conv"):
            continue
        floats = [d for d in c.dtypes if d in ops.FLOAT]
        ints = [d for d in c.dtypes if d in ops.INT][:1]
        for dt in floats + ints:
            args = c.args(np.random.default_rng(0), dt)
            yield f"{c.name}__{dt.name}", c.fn(dt), shapes_of(args), \
                c.x64 or ops.needs_x64(dt)


def grads(x_shape, w_shape, strides, padding, dt=jnp.float32, **kw):
    """Forward and both cotangents of one convolution in one program."""
    def f(x, w, ct):
        y, vjp = jax.vjp(lambda a, b: lax.conv_general_dilated(
            a, b, strides, padding, **kw), x, w)
        return (y,) + vjp(ct)
    x = jax.ShapeDtypeStruct(x_shape, dt)
    w = jax.ShapeDtypeStruct(w_shape, dt)
    y = jax.eval_shape(lambda a, b: lax.conv_general_dilated(
        a, b, strides, padding, **kw), x, w)
    return f, [x, w, jax.ShapeDtypeStruct(y.shape, dt)]


NHWC = dict(dimension_numbers=("NHWC", "HWIO", "NHWC"))
TRAINING = {
    # The CNN of bench/conv_bench.py, small: 3x3 SAME-like explicit padding.
    "nhwc_3x3_s1": grads((2, 8, 8, 8), (3, 3, 8, 16), (1, 1), ((1, 1), (1, 1)), **NHWC),
    "nhwc_3x3_s2": grads((2, 8, 8, 8), (3, 3, 8, 16), (2, 2), ((1, 1), (1, 1)), **NHWC),
    "nhwc_first_layer_c3": grads((2, 8, 8, 3), (3, 3, 3, 8), (1, 1), ((1, 1), (1, 1)), **NHWC),
    # "SAME" with stride 2 and even sizes: padding (0, 1).
    "nhwc_same_s2_even": grads((2, 8, 8, 4), (3, 3, 4, 8), (2, 2), "SAME", **NHWC),
    "nhwc_5x5_same_s2": grads((2, 9, 10, 4), (5, 5, 4, 8), (2, 2), "SAME", **NHWC),
    "nhwc_7x7_stem_s2": grads((1, 16, 16, 3), (7, 7, 3, 8), (2, 2), "SAME", **NHWC),
    "nhwc_1x1_s2": grads((2, 8, 8, 8), (1, 1, 8, 16), (2, 2), "VALID", **NHWC),
    "nhwc_valid_s3": grads((2, 11, 10, 4), (3, 2, 4, 5), (3, 3), "VALID", **NHWC),
    "nhwc_rhs_dilated": grads((2, 12, 12, 4), (3, 3, 4, 4), (1, 1), "SAME",
                              rhs_dilation=(2, 2), **NHWC),
    "nhwc_negative_pad": grads((2, 9, 9, 4), (3, 3, 4, 4), (1, 2),
                               ((-1, 1), (2, -1)), **NHWC),
    "nhwc_big_pad": grads((2, 5, 5, 4), (2, 2, 4, 4), (2, 2), ((3, 2), (1, 4)), **NHWC),
    "nhwc_grouped": grads((2, 8, 8, 8), (3, 3, 4, 12), (1, 1), "SAME",
                          feature_group_count=2, **NHWC),
    "nhwc_grouped_s2": grads((2, 8, 8, 8), (3, 3, 2, 8), (2, 2), "SAME",
                             feature_group_count=4, **NHWC),
    "nhwc_depthwise": grads((2, 8, 8, 6), (3, 3, 1, 12), (1, 1), "SAME",
                            feature_group_count=6, **NHWC),
    "nchw_3x3_s1": grads((2, 8, 9, 9), (16, 8, 3, 3), (1, 1), ((1, 1), (1, 1))),
    "nchw_3x3_s2_same": grads((2, 4, 10, 10), (8, 4, 3, 3), (2, 2), "SAME"),
    "nchw_grouped": grads((2, 6, 7, 7), (9, 2, 3, 3), (1, 1), "SAME",
                          feature_group_count=3),
    "nwc_1d": grads((2, 17, 4), (5, 4, 6), (2,), "SAME",
                    dimension_numbers=("NWC", "WIO", "NWC")),
    "ncw_1d_dilated": grads((2, 4, 17), (6, 4, 3), (1,), "VALID", rhs_dilation=(3,)),
    "ndhwc_3d": grads((1, 5, 6, 7, 3), (3, 3, 3, 3, 4), (1, 2, 1), "SAME",
                      dimension_numbers=("NDHWC", "DHWIO", "NDHWC")),
    "nhwc_bf16": grads((2, 8, 8, 8), (3, 3, 8, 8), (2, 2), "SAME", dt=jnp.bfloat16, **NHWC),
    "nhwc_f16": grads((2, 8, 8, 8), (3, 3, 8, 8), (1, 1), "SAME", dt=jnp.float16, **NHWC),
    "nchw_f64": grads((2, 3, 6, 6), (4, 3, 3, 3), (2, 1), "SAME", dt=jnp.float64),
    "nhwc_transpose_s2": (lambda x, w: lax.conv_transpose(
        x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        [jax.ShapeDtypeStruct((2, 5, 5, 4), jnp.float32),
         jax.ShapeDtypeStruct((3, 3, 4, 6), jnp.float32)]),
    "nhwc_highest": grads((2, 8, 8, 4), (3, 3, 4, 4), (1, 1), "SAME",
                          precision=lax.Precision.HIGHEST, **NHWC),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "data", "conv"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if f.endswith(".mlirbc"):
            os.remove(os.path.join(a.out, f))
    progs = list(conformance_programs())
    for name, (fn, shapes) in TRAINING.items():
        x64 = any(s.dtype == np.float64 for s in shapes)
        progs.append((f"jax_{name}", fn, shapes, x64))
    for name, fn, shapes, x64 in progs:
        with jax.enable_x64(x64):
            lowered = jax.jit(fn).lower(*shapes)
            data = gen_corpus.serialize(lowered)
        with open(os.path.join(a.out, name + ".mlirbc"), "wb") as fh:
            fh.write(data)
    print(f"{len(progs)} programs in {a.out}")


if __name__ == "__main__":
    main()
