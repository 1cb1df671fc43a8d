"""The program corpus: jax functions run on `iron` and on `cpu` with identical
inputs and compared (tests/python/test_corpus.py), and lowered to portable
artifacts for the C reader/printer tests (tests/gen_corpus.py).

Each Case has a unique name, a function, and make_args(rng) returning a tuple
of numpy arrays (the positional arguments). Tolerances apply to floats;
integers and bools compare exactly.
"""
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax


@dataclass
class Case:
    name: str
    fn: Callable
    make_args: Callable  # (np.random.Generator) -> tuple of np.ndarray
    rtol: float = 1e-5
    atol: float = 1e-6
    # Extra keyword arguments for jax.jit (static_argnums, donate_argnums...).
    jit_kwargs: dict = field(default_factory=dict)


CASES: list[Case] = []


def case(name, make_args, **kw):
    def deco(fn):
        CASES.append(Case(name, fn, make_args, **kw))
        return fn
    return deco


def f32(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32),)


@case("add_mul_scalar", f32(4, 3))
def _(x):
    return x * 2.0 + 1.0


@case("matmul", lambda rng: (rng.standard_normal((8, 16)).astype(np.float32),
                             rng.standard_normal((16, 4)).astype(np.float32)),
      rtol=1e-4, atol=1e-5)
def _(a, b):
    return a @ b


@case("sum_axis", f32(5, 7))
def _(x):
    return jnp.sum(x, axis=1)
