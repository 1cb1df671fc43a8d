#!/usr/bin/env python3
"""Generates tests/data/device_loops: scalar while loops whose main(args)
is one stablehlo.while over exactly its arguments, for
tests/c/test_cuda_device_loop_emu.c (the CUDA device runs such loops as one
kernel; the test runs that kernel on the CPU and compares it with the host
device running the whole program).

For every program NAME it writes NAME.mlirbc (the portable artifact, as
tests/gen_corpus.py serializes it) and NAME.inputs (one line per input
set: the arguments as text, which the C test parses with strtod).

Usage: JAX_PLATFORMS=cpu python3 tests/gen_device_loops.py
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_corpus import serialize  # noqa: E402

OUT = os.path.join(HERE, "data", "device_loops")


def counter_f32(i, n, x):
    return lax.while_loop(lambda c: c[0] < c[1],
                          lambda c: (c[0] + 1, c[1], c[2] * 1.0001 + 0.5),
                          (i, n, x))


def newton_f32(a, x):
    return lax.while_loop(
        lambda c: jnp.abs(c[1] * c[1] - c[0]) > 1e-6 * c[0],
        lambda c: (c[0], 0.5 * (c[1] + c[0] / c[1])), (a, x))


def lcg_u64(x, steps):
    # A 64-bit LCG run until its low 10 bits are zero (data dependent).
    return lax.while_loop(
        lambda c: (c[0] & jnp.uint64(1023)) != jnp.uint64(0),
        lambda c: (c[0] * jnp.uint64(6364136223846793005) +
                   jnp.uint64(1442695040888963407), c[1] + 1), (x, steps))


def mixed(i, x, h, flag):
    def body(c):
        i, x, h, flag = c
        x = x + jnp.sin(x) * 0.1
        h = h * jnp.bfloat16(0.999) + jnp.bfloat16(1)
        return i + jnp.uint32(1), x, h, x < 1e9
    return lax.while_loop(lambda c: (c[0] < 100) & c[3], body,
                          (i, x, h, flag))


def converts(x, k):
    return lax.while_loop(
        lambda c: c[1] < 50,
        lambda c: (c[0] * 1.1 - jnp.floor(c[0]) + c[1].astype(jnp.float32),
                   c[1] + 1 + (c[1] & 1)), (x, k))


PROGRAMS = [
    ("counter_f32", counter_f32,
     (np.int32(0), np.int32(1000), np.float32(1.0)),
     ["0 1000 1.0", "5 3 2.5", "-7 10000 -0.25"]),
    ("newton_f32", newton_f32, (np.float32(2.0), np.float32(1.0)),
     ["2.0 1.0", "1e10 1.0", "0.0625 3.0"]),
    ("lcg_u64", lcg_u64, (np.uint64(27), np.int64(0)),
     ["27 0", "1024 0", "837799 5"]),
    ("mixed", mixed,
     (np.uint32(0), np.float64(0.5), jnp.bfloat16(1.0), np.bool_(True)),
     ["0 0.5 1.0 1", "90 3.0 -2.0 1", "0 0.5 1.0 0"]),
    ("converts_f32", converts, (np.float32(1.7), np.int32(0)),
     ["1.7 0", "-3.2 5", "100.5 49"]),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, fn, example, inputs in PROGRAMS:
        art = serialize(jax.jit(fn).lower(*example))
        with open(os.path.join(OUT, name + ".mlirbc"), "wb") as f:
            f.write(art)
        with open(os.path.join(OUT, name + ".inputs"), "w") as f:
            f.write("\n".join(inputs) + "\n")
        print(name, len(art), "bytes")


if __name__ == "__main__":
    main()
