"""The program corpus: jax functions run on `iron` and on `cpu` with identical
inputs and compared (tests/python/test_corpus.py), and lowered to portable
artifacts for the C reader/printer tests (tests/gen_corpus.py).

Each Case has a unique name, a function, and make_args(rng) returning a tuple
of numpy arrays (the positional arguments). Tolerances apply to floats;
integers and bools compare exactly. Every program must terminate for ANY
argument values (the C corpus runner executes the artifacts with all-zero
inputs), so data-dependent loops carry an iteration bound.

Two lists:
- CASES: programs lowered with jax's default config (x64 disabled), so every
  argument and result is at most 32 bits wide. Every case lowers with
  jax.jit(fn, **jit_kwargs).lower(*args) as is.
- X64_CASES: float64/int64/uint64/complex128 programs. They carry x64=True and
  must be traced, lowered and run inside `with jax.enable_x64(True):` (see
  case_config()); without it jax silently narrows their arguments to 32 bits
  and some of them (bitcasts) would not even trace.
ALL_CASES is both lists; names are unique across it.

Deliberately absent (they produce stablehlo.gather/scatter or linalg
custom calls, which belong to a later issue): integer-array
indexing x[idx], jnp.take, jnp.take_along_axis, .at[idx].set/add with array
indices, jnp.diagonal/diag (gather), jax.random.permutation/choice of an
array (x[perm] is a gather; permutation of an integer n is used instead),
jnp.linalg.*.
"""
import contextlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
import optax


@dataclass
class Case:
    name: str
    fn: Callable
    make_args: Callable  # (np.random.Generator) -> tuple of np.ndarray
    rtol: float = 1e-5
    atol: float = 1e-6
    # Extra keyword arguments for jax.jit (static_argnums, donate_argnums...).
    jit_kwargs: dict = field(default_factory=dict)
    # True: trace, lower and run under jax.enable_x64(True) (X64_CASES only).
    x64: bool = False


CASES: list[Case] = []
X64_CASES: list[Case] = []


def case_config(c):
    """Context manager to trace/lower/run case c in (x64 cases need it)."""
    if c.x64:
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def case(name, make_args, **kw):
    def deco(fn):
        c = Case(name, fn, make_args, **kw)
        (X64_CASES if c.x64 else CASES).append(c)
        return fn
    return deco


BF16 = jnp.bfloat16

# Tolerances by float width. f32 transcendental functions differ between
# XLA's own polynomial approximations and a libm-style implementation by a
# few ulp; f16/bf16 results are f32 computations rounded once, so 1-2 ulp of
# the narrow type (f16 ulp ~1e-3, bf16 ulp ~8e-3).
TOL = {
    "f32": dict(rtol=1e-5, atol=1e-6),
    "f16": dict(rtol=2e-3, atol=1e-3),
    "bf16": dict(rtol=1.6e-2, atol=1e-2),
    "f64": dict(rtol=1e-12, atol=1e-14),
    "c64": dict(rtol=1e-5, atol=1e-6),
    "c128": dict(rtol=1e-12, atol=1e-14),
}
# Sums/dots: the accumulation order is not specified.
ACC = {
    "f32": dict(rtol=1e-4, atol=1e-5),
    "f16": dict(rtol=1e-2, atol=1e-2),
    "bf16": dict(rtol=3e-2, atol=3e-2),
    "f64": dict(rtol=1e-11, atol=1e-12),
}


def arr(rng, shape, dtype, lo=-3.0, hi=3.0):
    """Random array of dtype: floats uniform in [lo, hi), ints full range."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt,
                            endpoint=True)
    if np.issubdtype(dt, np.complexfloating):
        part = np.float32 if dt == np.complex64 else np.float64
        re = rng.uniform(lo, hi, shape).astype(part)
        im = rng.uniform(lo, hi, shape).astype(part)
        return (re + 1j * im).astype(dt)
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(dt) \
        if dt != np.float64 else rng.uniform(lo, hi, shape)


def args(*specs):
    """make_args from (shape, dtype[, lo, hi]) specs."""
    def make(rng):
        return tuple(arr(rng, *s) for s in specs)
    return make


def f32(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32),)


def small_ints(rng, shape, dtype, lo, hi):
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


# ---------------------------------------------------------------- starters

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


# ------------------------------------------------- float elementwise math

# name -> (fn, lo, hi): input domain chosen so the function is finite.
UNARY_FLOAT = {
    "sin": (jnp.sin, -6.0, 6.0),
    "cos": (jnp.cos, -6.0, 6.0),
    "tan": (jnp.tan, -1.3, 1.3),
    "tanh": (jnp.tanh, -4.0, 4.0),
    "exp": (jnp.exp, -8.0, 8.0),
    "expm1": (jnp.expm1, -2.0, 2.0),
    "log": (jnp.log, 0.01, 50.0),
    "log1p": (jnp.log1p, -0.9, 5.0),
    "sqrt": (jnp.sqrt, 0.0, 50.0),
    "rsqrt": (lax.rsqrt, 0.01, 50.0),
    "cbrt": (jnp.cbrt, -30.0, 30.0),
    "abs": (jnp.abs, -3.0, 3.0),
    "negative": (jnp.negative, -3.0, 3.0),
    "sign": (jnp.sign, -3.0, 3.0),
    "floor": (jnp.floor, -5.0, 5.0),
    "ceil": (jnp.ceil, -5.0, 5.0),
    "logistic": (jax.nn.sigmoid, -8.0, 8.0),
    "erf": (lax.erf, -3.0, 3.0),
    "square": (jnp.square, -3.0, 3.0),
    "reciprocal": (jnp.reciprocal, 0.1, 5.0),
    "log2": (jnp.log2, 0.01, 50.0),
    "exp2": (jnp.exp2, -6.0, 6.0),
    "arctan": (jnp.arctan, -5.0, 5.0),
    "sinh": (jnp.sinh, -3.0, 3.0),
}
for _n, (_f, _lo, _hi) in UNARY_FLOAT.items():
    case(f"f32_{_n}", args(((6, 7), np.float32, _lo, _hi)), **TOL["f32"])(
        lambda x, _f=_f: _f(x))

for _n in ["sin", "exp", "tanh", "log", "sqrt", "logistic", "floor", "abs"]:
    _f, _lo, _hi = UNARY_FLOAT[_n]
    case(f"f16_{_n}", args(((5, 9), np.float16, _lo, _hi)), **TOL["f16"])(
        lambda x, _f=_f: _f(x))
    case(f"bf16_{_n}", args(((5, 9), BF16, _lo, _hi)), **TOL["bf16"])(
        lambda x, _f=_f: _f(x))

BINARY_FLOAT = {
    "add": (jnp.add, -3.0, 3.0),
    "subtract": (jnp.subtract, -3.0, 3.0),
    "multiply": (jnp.multiply, -3.0, 3.0),
    "divide": (jnp.divide, 0.5, 3.0),
    "maximum": (jnp.maximum, -3.0, 3.0),
    "minimum": (jnp.minimum, -3.0, 3.0),
    "power": (jnp.power, 0.1, 3.0),
    "arctan2": (jnp.arctan2, -3.0, 3.0),
    "fmod": (jnp.fmod, 0.5, 7.0),
    "remainder": (jnp.remainder, -7.0, 7.0),
}
for _n, (_f, _lo, _hi) in BINARY_FLOAT.items():
    case(f"f32_{_n}", args(((4, 6), np.float32, _lo, _hi),
                           ((4, 6), np.float32, _lo, _hi)), **TOL["f32"])(
        lambda x, y, _f=_f: _f(x, y))

for _n in ["add", "multiply", "divide", "maximum"]:
    _f, _lo, _hi = BINARY_FLOAT[_n]
    case(f"f16_{_n}", args(((4, 6), np.float16, _lo, _hi),
                           ((4, 6), np.float16, _lo, _hi)), **TOL["f16"])(
        lambda x, y, _f=_f: _f(x, y))
    case(f"bf16_{_n}", args(((4, 6), BF16, _lo, _hi),
                            ((4, 6), BF16, _lo, _hi)), **TOL["bf16"])(
        lambda x, y, _f=_f: _f(x, y))


@case("f32_broadcast_binary", args(((3, 1, 5), np.float32), ((4, 1), np.float32)))
def _(x, y):
    return x * y - y / 2.0


def special_floats(rng):
    v = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 0.5, -2.5,
                  1e-30, 3e38, -3e38], np.float32)
    return (v, rng.permutation(v))


@case("f32_special_values", special_floats)
def _(x, y):
    return (x + y, x * y, x / jnp.where(y == 0, 1.0, y), jnp.isfinite(x),
            jnp.isnan(x * y), jnp.isinf(x), jnp.maximum(x, y),
            jnp.minimum(x, y), jnp.sign(x), jnp.abs(x))


@case("f32_nan_max_min", special_floats)
def _(x, y):
    # jnp.maximum/minimum and max/min reductions propagate NaN;
    # fmax/fmin and nanmax ignore it.
    return (jnp.maximum(x, y), jnp.minimum(x, y), jnp.max(x), jnp.min(y),
            jnp.fmax(x, y), jnp.fmin(x, y), jnp.nanmax(x), jnp.nanmin(y),
            jnp.max(x[:4]), jnp.nanmax(jnp.stack([x, y]), axis=0))


@case("f32_round_half_even",
      lambda rng: (np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 3.5, 4.5,
                             -4.5, 1e7 + 0.5, 0.49999997, 8388609.0],
                            np.float32),))
def _(x):
    return (jnp.round(x), lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
            jnp.rint(x), jnp.trunc(x), jnp.round(x * 10.0, 1))


@case("f32_clip", args(((6, 6), np.float32, -5, 5)))
def _(x):
    return jnp.clip(x, -1.5, 2.0), jnp.clip(x, x.mean(), None)


@case("f32_clip_nan", special_floats)
def _(x, y):
    return jnp.clip(x, -1.0, 1.0), lax.clamp(-1.0, y, 1.0)


@case("f32_comparisons", lambda rng: (
    rng.integers(-3, 3, (5, 5)).astype(np.float32),
    rng.integers(-3, 3, (5, 5)).astype(np.float32)))
def _(x, y):
    return (x < y, x <= y, x > y, x >= y, x == y, x != y)


@case("f32_comparisons_nan", special_floats)
def _(x, y):
    return (x < y, x <= y, x > y, x >= y, x == y, x != y,
            jnp.isclose(x, y), jnp.signbit(x))


@case("f32_where", args(((4, 5), np.float32), ((4, 5), np.float32)))
def _(x, y):
    return jnp.where(x > 0, x, y), jnp.where(x > y, 1.0, -1.0)


@case("f32_where_broadcast", args(((4, 1), np.bool_), ((1, 5), np.float32),
                                  ((), np.float32)))
def _(c, x, s):
    return jnp.where(c, x, s)


@case("f32_elementwise_chain", args(((16, 16), np.float32)), **TOL["f32"])
def _(x):
    return jnp.tanh(jnp.exp(-x * x) * 3.0 + jnp.sin(x)) / (1.0 + jnp.abs(x))


@case("f32_integer_pow", args(((3, 7), np.float32)), **TOL["f32"])
def _(x):
    return x ** 2, x ** 3, x ** -2, lax.integer_pow(x, 5)


@case("f32_scalar_args", args(((), np.float32), ((), np.float32)), **TOL["f32"])
def _(a, b):
    return a * b + jnp.sin(a), jnp.maximum(a, b)


# ---------------------------------------------------------- integers

INT_DTYPES = {
    "i8": np.int8, "i16": np.int16, "i32": np.int32,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
}


def _int_cases(tag, dt, x64=False):
    signed = np.issubdtype(dt, np.signedinteger)
    bits = np.dtype(dt).itemsize * 8
    kw = dict(x64=x64)

    case(f"{tag}_arith", args(((7, 5), dt), ((7, 5), dt)), **kw)(
        lambda x, y: (x + y, x - y, x * y, -x, jnp.abs(x) if signed else x,
                      jnp.maximum(x, y), jnp.minimum(x, y)))

    case(f"{tag}_bitwise", args(((6, 6), dt), ((6, 6), dt)), **kw)(
        lambda x, y: (x & y, x | y, x ^ y, ~x))

    def div_args(rng):
        x = arr(rng, (8, 8), dt)
        y = small_ints(rng, (8, 8), dt, -4 if signed else 0, 4)
        if signed:  # the one overflowing quotient: MIN / -1
            x[0, 0] = np.iinfo(dt).min
            y[0, 0] = -1
        return x, y
    # Division and remainder by zero: lax is XLA's (x/0 = -1, x%0 = x),
    # jnp's floor division adds its sign fix-ups on top.
    case(f"{tag}_div_rem_by_zero", div_args, **kw)(
        lambda x, y: (lax.div(x, y), lax.rem(x, y), x // y, x % y))

    def shift_args(rng):
        x = arr(rng, (4, 10), dt)
        s = np.tile(np.array([0, 1, 3, bits - 1, bits, bits + 1, 2 * bits,
                              5, 7, 2], dtype=dt), (4, 1))
        return x, s
    case(f"{tag}_shifts_past_width", shift_args, **kw)(
        lambda x, s: (lax.shift_left(x, s), lax.shift_right_logical(x, s),
                      lax.shift_right_arithmetic(x, s), x << s, x >> s))

    case(f"{tag}_compare_select", args(((5, 5), dt), ((5, 5), dt)), **kw)(
        lambda x, y: (x < y, x == y, x >= y, jnp.where(x > y, x, y),
                      jnp.clip(x, y.min(), None)))

    case(f"{tag}_reductions", args(((6, 9), dt)), **kw)(
        lambda x: (jnp.sum(x, axis=0), jnp.max(x, axis=1), jnp.min(x),
                   jnp.prod(x, axis=1), jnp.argmax(x, axis=0),
                   jnp.argmin(x, axis=1)))

    case(f"{tag}_popcnt_clz", args(((5, 6), dt)), **kw)(
        lambda x: (lax.population_count(x), lax.clz(x)))


for _tag, _dt in INT_DTYPES.items():
    _int_cases(_tag, _dt)


@case("i32_sign_floor_div_neg", lambda rng: (
    np.array([7, -7, 7, -7, 0, 1, -1, 2**31 - 1, -2**31], np.int32),
    np.array([2, 2, -2, -2, 3, -3, 3, 2, 3], np.int32)))
def _(x, y):
    return (jnp.sign(x), x // y, x % y, lax.div(x, y), lax.rem(x, y),
            jnp.floor_divide(x, y), jnp.abs(x))


# ------------------------------------------------------------------ bool

@case("bool_logic", args(((5, 7), np.bool_), ((5, 7), np.bool_)))
def _(a, b):
    return (a & b, a | b, a ^ b, ~a, jnp.logical_and(a, b),
            jnp.logical_not(b), a == b, a != b)


@case("bool_reduce_where", args(((4, 8), np.bool_), ((4, 8), np.float32)))
def _(m, x):
    return (jnp.any(m, axis=1), jnp.all(m, axis=0), jnp.any(m), jnp.all(m),
            jnp.where(m, x, 0.0), jnp.sum(m), jnp.count_nonzero(m, axis=1))


# --------------------------------------------------------------- complex

@case("c64_arith", args(((4, 5), np.complex64), ((4, 5), np.complex64)),
      **TOL["c64"])
def _(x, y):
    return x + y, x - y, x * y, x / y, -x, jnp.conj(x)


@case("c64_parts", args(((4, 5), np.complex64)), **TOL["c64"])
def _(x):
    return (jnp.real(x), jnp.imag(x), jnp.abs(x), jnp.angle(x),
            lax.complex(jnp.real(x), jnp.imag(x) * 2))


@case("c64_transcendental", args(((3, 4), np.complex64, -1.5, 1.5)),
      rtol=1e-4, atol=1e-5)
def _(x):
    return jnp.exp(x), jnp.log(x), jnp.sqrt(x)


@case("c64_matmul_sum", args(((4, 6), np.complex64), ((6, 3), np.complex64)),
      rtol=1e-4, atol=1e-4)
def _(a, b):
    return a @ b, jnp.sum(a, axis=0), jnp.max(jnp.abs(a), axis=1)


@case("c64_from_real", args(((5,), np.float32), ((5,), np.float32)),
      **TOL["c64"])
def _(re, im):
    z = re + 1j * im
    return z * z, jnp.abs(z) ** 2, (z == jnp.conj(z))


# ------------------------------------------------------------ reductions

@case("reduce_sum_mean", f32(6, 7, 8), **ACC["f32"])
def _(x):
    return (jnp.sum(x), jnp.sum(x, axis=(0, 2)), jnp.mean(x, axis=1),
            jnp.sum(x, axis=-1, keepdims=True))


# Column reduces with few outputs and many rows: the CUDA device splits the
# rows over many blocks and merges the segments in order (cuda_gen_reduce.c).
@case("reduce_columns_split", lambda rng: (
    rng.standard_normal((4096, 100)).astype(np.float32),
    rng.integers(-1000, 1000, (2048, 64)).astype(np.int32),
    rng.standard_normal((8, 700, 40)).astype(np.float32)), **ACC["f32"])
def _(x, n, y):
    return (jnp.sum(x, axis=0), jnp.max(x, axis=0), jnp.argmax(x, axis=0),
            jnp.sum(n, axis=0), jnp.min(n, axis=0), jnp.sum(y, axis=(0, 1)),
            jnp.sum(x * x, axis=0), jnp.argmin(y.reshape(-1, 40), axis=0))


@case("reduce_columns_split_f16", lambda rng: (
    rng.standard_normal((3000, 48)).astype(np.float16),), **ACC["f16"])
def _(x):
    return jnp.sum(x, axis=0), jnp.max(x, axis=0)


@case("reduce_max_min", f32(6, 7, 8))
def _(x):
    return jnp.max(x, axis=0), jnp.min(x, axis=(1, 2)), jnp.max(x), jnp.min(x)


@case("reduce_prod", args(((5, 6), np.float32, 0.5, 1.5)), **ACC["f32"])
def _(x):
    return jnp.prod(x, axis=1), jnp.prod(x)


@case("reduce_argmax_argmin", f32(7, 9))
def _(x):
    return (jnp.argmax(x, axis=0), jnp.argmax(x, axis=1), jnp.argmin(x),
            jnp.argmin(x, axis=1, keepdims=True))


@case("reduce_argmax_ties_nan", lambda rng: (
    np.array([[1, 3, 3, 2], [np.nan, 1, np.nan, 5], [2, 2, 2, 2],
              [-np.inf, -np.inf, 0, np.inf]], np.float32),))
def _(x):
    return jnp.argmax(x, axis=1), jnp.argmin(x, axis=1), jnp.argmax(x, axis=0)


@case("reduce_any_all", lambda rng: (rng.integers(0, 3, (5, 6)).astype(np.float32),))
def _(x):
    return jnp.any(x > 1, axis=0), jnp.all(x > 0, axis=1), jnp.any(x == 7)


@case("reduce_logsumexp", args(((5, 8), np.float32, -20, 20)), **ACC["f32"])
def _(x):
    return jax.nn.logsumexp(x, axis=1), jax.nn.logsumexp(x)


@case("reduce_var_std", f32(6, 10), **ACC["f32"])
def _(x):
    return jnp.var(x, axis=1), jnp.std(x, axis=0), jnp.var(x, ddof=1)


@case("reduce_cumsum", f32(5, 8), **ACC["f32"])
def _(x):
    return jnp.cumsum(x, axis=1), jnp.cumsum(x, axis=0)


@case("reduce_cumsum_i32_reverse", args(((4, 7), np.int32)))
def _(x):
    return jnp.cumsum(x, axis=1), lax.cumsum(x, axis=0, reverse=True)


@case("reduce_cumprod_cummax", args(((4, 6), np.float32, 0.5, 1.5)),
      **ACC["f32"])
def _(x):
    return jnp.cumprod(x, axis=1), lax.cummax(x, axis=0), lax.cummin(x, axis=1)


@case("reduce_bf16_sum", args(((8, 32), BF16)), **ACC["bf16"])
def _(x):
    return jnp.sum(x, axis=1), jnp.mean(x), jnp.max(x, axis=0)


@case("reduce_f16_sum_mean", args(((8, 32), np.float16)), **ACC["f16"])
def _(x):
    return jnp.sum(x, axis=0), jnp.mean(x, axis=1)


@case("reduce_nan_propagation", special_floats)
def _(x, y):
    return jnp.sum(x), jnp.max(jnp.stack([x, y]), axis=0), jnp.nansum(y)


@case("reduce_zero_size", lambda rng: (np.zeros((0, 4), np.float32),))
def _(x):
    return jnp.sum(x, axis=0), jnp.prod(x, axis=0), jnp.any(x > 0, axis=0)


# -------------------------------------------------------- matmul family

def mm(*shapes, dtype=np.float32):
    return lambda rng: tuple(rng.standard_normal(s).astype(dtype) for s in shapes)


@case("matvec", mm((8, 5), (5,)), **ACC["f32"])
def _(a, v):
    return a @ v, v @ a.T


@case("dot_vectors_outer", mm((7,), (7,)), **ACC["f32"])
def _(a, b):
    return jnp.dot(a, b), jnp.outer(a, b), jnp.inner(a, b)


@case("batched_matmul", mm((3, 5, 4), (3, 4, 6)), **ACC["f32"])
def _(a, b):
    return jnp.matmul(a, b)


@case("batched_matmul_broadcast", mm((2, 1, 5, 4), (3, 4, 2)), **ACC["f32"])
def _(a, b):
    return a @ b


@case("einsum_bij_bjk", mm((2, 3, 4), (2, 4, 5)), **ACC["f32"])
def _(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


@case("einsum_contract_many", mm((3, 4, 5), (5, 4, 6)), **ACC["f32"])
def _(a, b):
    return jnp.einsum("ijk,kjl->il", a, b), jnp.einsum("ijk->kji", a)


@case("einsum_elementwise_reduce", mm((6, 7), (6, 7)), **ACC["f32"])
def _(a, b):
    return jnp.einsum("ij,ij->i", a, b), jnp.einsum("ij->", a)


@case("tensordot", mm((3, 4, 5), (4, 5, 6)), **ACC["f32"])
def _(a, b):
    return jnp.tensordot(a, b, axes=2), jnp.tensordot(a, b, axes=([1], [0]))


@case("matmul_i32", args(((4, 6), np.int32), ((6, 3), np.int32)))
def _(a, b):
    return a @ b  # wraps like XLA


@case("matmul_i8_to_i32", args(((4, 6), np.int8), ((6, 3), np.int8)))
def _(a, b):
    return jnp.matmul(a, b, preferred_element_type=jnp.int32)


@case("matmul_bf16_f32_acc", mm((8, 32), (32, 4), dtype=BF16), **ACC["bf16"])
def _(a, b):
    return jnp.matmul(a, b, preferred_element_type=jnp.float32), a @ b


@case("matmul_f16", mm((8, 16), (16, 4), dtype=np.float16), **ACC["f16"])
def _(a, b):
    return a @ b


@case("matmul_large", mm((64, 128), (128, 96)), rtol=1e-4, atol=1e-4)
def _(a, b):
    return a @ b


@case("matmul_transposed_operands", mm((16, 8), (12, 16)), **ACC["f32"])
def _(a, b):
    return a.T @ b.T, (b @ a).T


# ------------------------------------------------------- shape and layout

@case("reshape_transpose", f32(2, 3, 4))
def _(x):
    return (x.reshape(6, 4), x.reshape(-1), jnp.transpose(x, (2, 0, 1)),
            x.T, jnp.moveaxis(x, 0, -1), jnp.swapaxes(x, 1, 2))


@case("concatenate_stack", mm((2, 3), (4, 3), (2, 3)))
def _(a, b, c):
    return (jnp.concatenate([a, b, c], axis=0), jnp.stack([a, c], axis=1),
            jnp.hstack([a, c]), jnp.vstack([a, b]),
            jnp.concatenate([a, c], axis=-1))


@case("split", f32(6, 8))
def _(x):
    a, b, c = jnp.split(x, 3, axis=0)
    d, e = jnp.split(x, [3], axis=1)
    return a, b, c, d, e, jnp.array_split(x, 4, axis=1)[3]


@case("pad_modes", f32(3, 4))
def _(x):
    return (jnp.pad(x, ((1, 2), (0, 3))), jnp.pad(x, 1, constant_values=7.0),
            jnp.pad(x, ((2, 2), (1, 1)), mode="reflect"),
            jnp.pad(x, ((1, 1), (2, 2)), mode="edge"),
            jnp.pad(x, 2, mode="wrap"))


@case("flip_roll", f32(4, 6))
def _(x):
    return (jnp.flip(x, 0), jnp.flip(x), jnp.fliplr(x), jnp.roll(x, 2, axis=1),
            jnp.roll(x, -1, axis=0), jnp.roll(x, 5))


@case("tile_repeat", f32(2, 3))
def _(x):
    return (jnp.tile(x, (2, 3)), jnp.repeat(x, 3, axis=1),
            jnp.repeat(x, 2), jnp.tile(x, 2))


@case("broadcast_squeeze_expand", f32(3, 1, 4))
def _(x):
    return (jnp.broadcast_to(x, (2, 3, 5, 4)), jnp.squeeze(x),
            jnp.squeeze(x, axis=1), jnp.expand_dims(x, 0),
            jnp.expand_dims(x, (-1, 1)), x[None, :, :, None])


@case("static_slicing", f32(6, 8, 5))
def _(x):
    return (x[1:4], x[:, 2:7:2], x[::-1], x[..., ::-2], x[2], x[-1, 3],
            x[1:-1, ::3, 4], x[:, -3:])


@case("triu_tril", f32(5, 5))
def _(x):
    return jnp.triu(x), jnp.tril(x, -1), jnp.triu(x, 2)


@case("trace_ravel", f32(4, 4))
def _(x):
    return jnp.trace(x), jnp.ravel(x), x.flatten()[::3]


@case("shape_i8_data_movement", args(((4, 6), np.int8)))
def _(x):
    return (x.T, jnp.concatenate([x, x], 0), jnp.pad(x, 1), jnp.flip(x, 1),
            x.reshape(3, 8), jnp.tile(x, (1, 2)))


@case("shape_bool_data_movement", args(((3, 5), np.bool_)))
def _(x):
    return x.T, jnp.concatenate([x, ~x], 1), jnp.pad(x, 1), x[::-1, 1:4]


@case("shape_bf16_data_movement", args(((3, 5), BF16)))
def _(x):
    return x.T, jnp.stack([x, x * 2]), x.reshape(5, 3), jnp.roll(x, 1, 1)


# ----------------------------------------------------- dynamic slicing

def int_scalars(*vals):
    return tuple(np.asarray(v, np.int32) for v in vals)


@case("dynamic_slice", lambda rng: (rng.standard_normal((8, 9)).astype(np.float32),
                                    *int_scalars(2, 3)))
def _(x, i, j):
    return lax.dynamic_slice(x, (i, j), (3, 4)), lax.dynamic_index_in_dim(x, i, 1)


@case("dynamic_slice_clamped", lambda rng: (
    rng.standard_normal((8, 9)).astype(np.float32), *int_scalars(7, -4)))
def _(x, i, j):
    # Start indices are clamped so the slice stays in bounds.
    return lax.dynamic_slice(x, (i, j), (3, 4)), lax.dynamic_slice_in_dim(x, i + 5, 2)


@case("dynamic_update_slice", lambda rng: (
    rng.standard_normal((6, 7)).astype(np.float32),
    rng.standard_normal((2, 3)).astype(np.float32), *int_scalars(1, 5)))
def _(x, u, i, j):
    # j=5 with width 3 is clamped to 4.
    return lax.dynamic_update_slice(x, u, (i, j)), lax.dynamic_update_slice(x, u, (i + 10, j - 9))


@case("dynamic_slice_in_loop", lambda rng: (rng.standard_normal((10, 4)).astype(np.float32),))
def _(x):
    def body(i, acc):
        return acc + lax.dynamic_slice_in_dim(x, i, 1, axis=0)[0] * i
    return lax.fori_loop(0, 10, body, jnp.zeros(4, jnp.float32))


# Slices, transposes and dynamic slices of inputs that feed element-wise ops
# fuse into the consumer's kernel on CUDA as indexed loads.
@case("slice_transpose_fused", lambda rng: (
    rng.standard_normal((6, 10)).astype(np.float32),
    rng.standard_normal((10, 6)).astype(np.float32),
    rng.standard_normal((3, 4, 5)).astype(np.float32),
    rng.integers(-50, 50, (7, 12)).astype(np.int32)))
def _(x, y, z, n):
    return (x[:, 2:8] * 2.0 + y[1:7, ::1].T[:, :6],
            x[::2, 1::3] - jnp.tanh(x[1::2, 0:9:3]),
            jnp.transpose(z, (1, 0, 2)) * 3.0 + 1.0,
            jnp.transpose(z, (2, 1, 0)) + jnp.transpose(z, (2, 1, 0))[::-1],
            n[1:6, 3:9] * n[2:7, 0:6] + 7)


@case("dynamic_slice_fused", lambda rng: (
    rng.standard_normal((8, 9)).astype(np.float32),
    rng.standard_normal((3, 4)).astype(np.float32),
    *int_scalars(2, 3, 7, -4),
    np.asarray(6, np.uint32), np.asarray(200, np.uint8)))
def _(x, y, i, j, k, m, u, b):
    # In-range, clamped (k=7, m=-4) and unsigned (u, b) start indices.
    return (lax.dynamic_slice(x, (i, j), (3, 4)) * y + 1.0,
            jnp.exp(lax.dynamic_slice(x, (k, m), (3, 4))) - y,
            lax.dynamic_slice(x, (u, u - 5), (3, 4)) + lax.dynamic_slice(x, (j, i), (3, 4)),
            lax.dynamic_slice(x[0], (b,), (4,)) * 2.0)


# dynamic_update_slice whose update is computed element-wise: on CUDA the
# update's kernel writes it into the operand (in place when the operand
# dies), several roots per kernel.
@case("dynamic_update_slice_fused", lambda rng: (
    rng.standard_normal((6, 7)).astype(np.float32),
    rng.standard_normal((2, 3)).astype(np.float32),
    rng.standard_normal((5, 2, 3)).astype(np.float32), *int_scalars(1, 5, -3)))
def _(x, u, z, i, j, k):
    a = lax.dynamic_update_slice(x, jnp.tanh(u) * 2.0, (i, j))  # j clamped
    b = lax.dynamic_update_slice(x * 1.0, u - 1.0, (k, i))      # k clamped
    c = lax.dynamic_update_index_in_dim(z, u * u, i + 2, 0)
    # The update's shape read back from the updated array, next to the
    # update itself: the slice reads the result from memory.
    d = a[0:2, 0:3] * jnp.tanh(u) + a[1:3, 2:5]
    return a, b, c, x[0] + 1.0, d


# Issue 12: programs the CUDA device refused or failed. A window read at a
# data-dependent start and written back, updates that are broadcast
# scalars (the fusion's shape was taken from the broadcast's scalar
# operand: "3 elements in a fusion of 1 elements"), starts clamped at
# both ends.
@case("dus_window_dynamic_start", lambda rng: (
    rng.standard_normal(10).astype(np.float32),
    rng.standard_normal(3).astype(np.float32), np.asarray(2.5, np.float32)))
def _(x, u, s):
    i = jnp.argmax(x).astype(jnp.int32)
    w = lax.dynamic_slice(x, (i,), (3,))
    return (lax.dynamic_update_slice(x, u * w, (i - 2,)),
            lax.dynamic_update_slice(x, jnp.full((3,), s), (i,)),
            lax.dynamic_update_slice(x, jnp.broadcast_to(s * w[0], (3,)), (i + 7,)),
            lax.dynamic_update_slice(x, w + 1.0, (i - 20,)),
            w)


# Sub-byte start indices: ml_dtypes keeps an int4 in the low 4 bits of a
# byte (-1 is 0x0f), so -1 must read as -1 (clamped to 0), not 15.
@case("dynamic_slice_int4_starts", lambda rng: (
    rng.standard_normal(10).astype(np.float32),
    np.asarray([-1, 3, -8, 7], jnp.int4), np.asarray([1, 15, 0, 9], jnp.uint4)))
def _(x, s, u):
    return tuple(
        (lax.dynamic_slice(x, (s[k],), (3,)),
         lax.dynamic_update_slice(x, x[:2] * 2.0, (u[k],)))
        for k in range(4))


# A batch-1 transformer decode step with a KV cache: a scan over layers
# writes this token's keys and values at a traced position (the update is
# computed in another shape and reshaped: the fusion refused it), then
# attends over the cache.
def _decode_step(w, kc, vc, x, pos):
    def layer(h, p):
        wl, k_cache, v_cache = p
        q, k, v = jnp.split(h @ wl, 3, axis=-1)
        n_heads, d_head = k_cache.shape[1], k_cache.shape[2]
        k_cache = lax.dynamic_update_slice(
            k_cache, k.reshape(1, n_heads, d_head), (pos, 0, 0))
        v_cache = lax.dynamic_update_slice(
            v_cache, v.reshape(1, n_heads, d_head), (pos, 0, 0))
        s = jnp.einsum("hd,thd->ht", q.reshape(n_heads, d_head), k_cache)
        s = s / jnp.sqrt(jnp.float32(d_head))
        s = jnp.where(jnp.arange(k_cache.shape[0])[None, :] <= pos, s, -1e30)
        o = jnp.einsum("ht,thd->hd", jax.nn.softmax(s, axis=-1), v_cache)
        return h + o.reshape(-1), (k_cache, v_cache)
    h, (kc, vc) = lax.scan(layer, x, (w, kc, vc))
    return h, kc, vc


@case("kv_cache_decode_step", lambda rng: (
    rng.standard_normal((3, 8, 24)).astype(np.float32) * 0.3,
    rng.standard_normal((3, 6, 2, 4)).astype(np.float32),
    rng.standard_normal((3, 6, 2, 4)).astype(np.float32),
    rng.standard_normal(8).astype(np.float32), np.asarray(4, np.int32)),
    **ACC["f32"])
def _(w, kc, vc, x, pos):
    return _decode_step(w, kc, vc, x, pos)


@case("kv_cache_decode_loop", lambda rng: (
    rng.standard_normal((2, 8, 24)).astype(np.float32) * 0.3,
    rng.standard_normal(8).astype(np.float32), np.asarray(1, np.int32)),
    **ACC["f32"])
def _(w, x, start):
    # Several tokens in a fori_loop (a counted loop: a CUDA graph on the
    # GPU), positions traced, the last ones past the cache (clamped).
    kc = jnp.zeros((2, 5, 2, 4), jnp.float32)
    def step(t, carry):
        x, kc, vc = carry
        h, kc, vc = _decode_step(w, kc, vc, x, start + t)
        return jnp.tanh(h), kc, vc
    return lax.fori_loop(0, 6, step, (x, kc, kc))


# A scan of 80 carries updated from their sum: one fusion of 80 inputs and
# 80 results (the CUDA device refused fusions of more than 64).
@case("scan_many_carries", lambda rng: (
    rng.standard_normal((80, 3)).astype(np.float32),), **ACC["f32"])
def _(xs):
    def body(c, _):
        t = sum(c) * 0.01
        return tuple(ci * 0.5 + t for ci in c), None
    out, _ = lax.scan(body, tuple(xs[i] for i in range(80)), None, length=4)
    return out


# dynamic_slice / dynamic_update_slice of every dtype class inside a scan:
# a window of the carry is read at the step's position, blended with the
# step's row by a select (data movement only, so every dtype runs) and
# written back one row further (the last step's write clamped).
def _dslice_scan(xs, buf, m):
    def body(c, x):
        i, b = c
        w = lax.dynamic_slice(b, (i, 0), (1, 5))
        b = lax.dynamic_update_slice(b, jnp.where(m, x[None], w), (i + 1, 0))
        return (i + 1, b), lax.dynamic_slice(b, (i - 1, 1), (2, 3))
    (_, b), ys = lax.scan(body, (jnp.int32(0), buf), xs)
    return b, ys


def _dslice_args(dt):
    def make(rng):
        xs = arr(rng, (6, 5), dt)
        buf = arr(rng, (6, 5), dt)
        return xs, buf, rng.random(5) < 0.5
    return make


for _dt in (np.bool_, np.int8, np.uint16, np.int32, np.float16, BF16,
            np.float32, np.complex64, jnp.float8_e4m3fn):
    case(f"dynamic_slice_scan_{np.dtype(_dt).name}", _dslice_args(_dt))(
        _dslice_scan)


@case("scan_stacked_outputs", lambda rng: (
    rng.standard_normal((12, 4, 5)).astype(np.float32),
    rng.standard_normal((4, 5)).astype(np.float32)))
def _(xs, h0):
    def cell(h, x):
        z = jax.nn.sigmoid(x + h)
        n = jnp.tanh(x * z - h)
        h2 = (1.0 - z) * n + z * h
        return h2, (z, n, h2 * 2.0)
    h, ys = lax.scan(cell, h0, xs)
    hr, yr = lax.scan(cell, h0, xs, reverse=True)
    return h, ys, hr, yr


@case("dynamic_update_index_i32", lambda rng: (
    np.arange(12, dtype=np.int32).reshape(3, 4), *int_scalars(2, 99)))
def _(x, i, v):
    return lax.dynamic_update_index_in_dim(x, jnp.full((4,), v), i, 0)


# ------------------------------------------------------------ conversions

@case("convert_f32_to_int_saturation", lambda rng: (
    np.array([0.0, 1.7, -1.7, 2.5, -2.5, 127.9, 128.0, -129.0, 255.5, 256.0,
              3e9, -3e9, 1e20, -1e20, np.nan, np.inf, -np.inf, 65535.9],
             np.float32),))
def _(x):
    return (x.astype(jnp.int32), x.astype(jnp.int8), x.astype(jnp.uint8),
            x.astype(jnp.int16), x.astype(jnp.uint16), x.astype(jnp.uint32),
            x.astype(jnp.bool_))


@case("convert_int_to_float", lambda rng: (
    np.array([0, 1, -1, 2**24 + 1, 2**31 - 1, -2**31, 123456789], np.int32),
    np.array([0, 1, 2**32 - 1, 2**31, 16777217, 4000000001, 7], np.uint32)))
def _(i, u):
    return (i.astype(jnp.float32), u.astype(jnp.float32),
            i.astype(jnp.float16), i.astype(BF16), u.astype(jnp.int32),
            i.astype(jnp.uint32), i.astype(jnp.int8), u.astype(jnp.uint8),
            i.astype(jnp.bool_))


@case("convert_f32_to_narrow_float", lambda rng: (
    np.concatenate([rng.standard_normal(16).astype(np.float32) * 100,
                    np.array([65504.0, 65520.0, 1e6, -1e6, 1e-8, 6e-5, np.nan,
                              np.inf, 3.3895314e38, 1.0009765625,
                              1.00390625, 1.01171875], np.float32)]),))
def _(x):
    # Round to nearest even on narrowing; f16 overflows to inf.
    return x.astype(jnp.float16), x.astype(BF16), x.astype(BF16).astype(jnp.float16)


@case("convert_narrow_to_f32", lambda rng: (
    rng.standard_normal(10).astype(np.float16), rng.standard_normal(10).astype(BF16)))
def _(h, b):
    return (h.astype(jnp.float32), b.astype(jnp.float32), h.astype(jnp.int32),
            b.astype(jnp.int16), b.astype(jnp.float16), h.astype(BF16))


@case("convert_bool_and_complex", args(((6,), np.bool_), ((6,), np.float32)),
      **TOL["c64"])
def _(b, x):
    return (b.astype(jnp.float32), b.astype(jnp.int8), b.astype(jnp.uint32),
            x.astype(jnp.complex64), (x + 1j * x).real, b.astype(jnp.bfloat16))


@case("convert_int_widen_narrow", args(((8,), np.int16), ((8,), np.uint8)))
def _(s, u):
    return (s.astype(jnp.int8), s.astype(jnp.uint16), s.astype(jnp.int32),
            u.astype(jnp.int8), u.astype(jnp.int16), u.astype(jnp.uint32),
            s.astype(jnp.uint8))


# ---------------------------------------------------------- constructors

@case("iota_arange", lambda rng: int_scalars(3))
def _(k):
    return (jnp.arange(10) + k, jnp.arange(2, 20, 3, dtype=jnp.float32) * k,
            lax.broadcasted_iota(jnp.int32, (3, 4), 1) * k,
            jnp.arange(5, dtype=jnp.uint8) + k.astype(jnp.uint8))


@case("linspace", lambda rng: (np.float32(1.5),))
def _(s):
    return (jnp.linspace(0.0, 1.0, 7) * s, jnp.linspace(-s, s, 5),
            jnp.linspace(0, 10, 4, endpoint=False) + s)


@case("eye_tri_identity", lambda rng: (np.float32(2.0),))
def _(s):
    return (jnp.eye(4) * s, jnp.eye(3, 5, k=1) + s, jnp.tri(4, 3) * s,
            jnp.identity(3, dtype=jnp.int32) * s.astype(jnp.int32))


@case("one_hot", lambda rng: (rng.integers(-1, 6, 10).astype(np.int32),))
def _(y):
    # -1 and 5 are out of range for 5 classes: all-zero rows.
    return jax.nn.one_hot(y, 5), jax.nn.one_hot(y, 3, dtype=jnp.int32)


@case("full_zeros_ones_like", f32(2, 3))
def _(x):
    return (jnp.zeros_like(x) + 1, jnp.ones_like(x, dtype=jnp.int32),
            jnp.full((2, 2), 3.5) * x[0, 0], jnp.full_like(x, 7) - x)


# ------------------------------------------------------------------- lax

@case("lax_dot_general_contract_dim0", mm((5, 3, 4), (5, 6)), **ACC["f32"])
def _(a, b):
    # Contract lhs dim 0 with rhs dim 0, no batch dims.
    return lax.dot_general(a, b, (((0,), (0,)), ((), ())))


@case("lax_dot_general_batch_not_leading", mm((3, 4, 5), (6, 4, 3)), **ACC["f32"])
def _(a, b):
    # Batch dims: lhs 1, rhs 1; contract lhs 0 with rhs 2.
    return lax.dot_general(a, b, (((0,), (2,)), ((1,), (1,))))


@case("lax_dot_general_multi_contract", mm((2, 3, 4, 5), (4, 2, 6, 3)), **ACC["f32"])
def _(a, b):
    return lax.dot_general(a, b, (((1, 2), (3, 0)), ((0,), (1,))))


@case("lax_dot_general_preferred", args(((4, 5), np.int8), ((5, 3), np.int8)))
def _(a, b):
    return lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                           preferred_element_type=jnp.int32)


@case("lax_reduce_custom_body", f32(5, 6), **ACC["f32"])
def _(x):
    # Bodies that are not one single add/max/min op, but still associative
    # and commutative: StableHLO leaves the reduction order to the
    # implementation, so a non-associative body has no defined result.
    return (lax.reduce(x, -jnp.inf, jnp.logaddexp, (1,)),
            lax.reduce(jnp.abs(x), 0.0, lambda a, b: jnp.maximum(a, b) + 0.0,
                       (0,)))


@case("lax_reduce_variadic", f32(4, 7))
def _(x):
    idx = lax.broadcasted_iota(jnp.int32, x.shape, 1)

    def body(a, b):
        av, ai = a
        bv, bi = b
        pick = (av > bv) | ((av == bv) & (ai < bi))
        return jnp.where(pick, av, bv), jnp.where(pick, ai, bi)
    return lax.reduce((x, idx), (jnp.float32(-jnp.inf), jnp.int32(0)), body, (1,))


@case("lax_reduce_int_and_or", args(((4, 8), np.uint32)))
def _(x):
    return (lax.reduce(x, np.uint32(0xFFFFFFFF), lax.bitwise_and, (1,)),
            lax.reduce(x, np.uint32(0), lax.bitwise_or, (0,)),
            lax.reduce(x, np.uint32(0), lax.bitwise_xor, (0, 1)))


@case("lax_pad_negative_interior", f32(4, 5))
def _(x):
    return (lax.pad(x, 0.0, ((1, 2, 1), (0, 0, 2))),
            lax.pad(x, -1.0, ((-1, 2, 0), (2, -2, 1))),
            lax.pad(x, 9.0, ((-2, -1, 0), (0, 0, 0))))


@case("lax_rev", f32(3, 4, 5))
def _(x):
    return lax.rev(x, (0, 2)), lax.rev(x, (1,))


@case("lax_clamp", args(((6, 6), np.float32), ((6, 6), np.int32)))
def _(x, i):
    return (lax.clamp(-0.5, x, 0.5), lax.clamp(jnp.full_like(x, -1.0), x, x * x),
            lax.clamp(np.int32(-100), i, np.int32(1000)))


@case("lax_select", args(((5, 4), np.bool_), ((5, 4), np.float32), ((5, 4), np.float32)))
def _(p, a, b):
    return lax.select(p, a, b), lax.select(~p, a.astype(jnp.int32), b.astype(jnp.int32))


@case("lax_select_n", lambda rng: (rng.integers(0, 3, (6,)).astype(np.int32),
                                   *mm((6,), (6,), (6,))(rng)))
def _(w, a, b, c):
    return lax.select_n(w, a, b, c)


@case("lax_bitcast_convert", lambda rng: (
    rng.standard_normal((3, 4)).astype(np.float32),
    rng.integers(0, 2**16, (5,)).astype(np.uint16)))
def _(x, h):
    return (lax.bitcast_convert_type(x, jnp.int32),
            lax.bitcast_convert_type(x, jnp.uint32),
            lax.bitcast_convert_type(x, jnp.uint8),  # [3,4,4]
            lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.int32) ^ 1,
                                     jnp.float32),
            lax.bitcast_convert_type(h, jnp.int16),
            lax.bitcast_convert_type(h & 0x7BFF, jnp.float16),
            lax.bitcast_convert_type(h & 0x7F7F, BF16))


@case("lax_bitcast_widen", args(((3, 4), np.uint8), ((2, 2), np.int16)))
def _(b, s):
    # Narrow-to-wide bitcasts consume the last dimension (its size is the
    # width ratio).
    return (lax.bitcast_convert_type(b, jnp.uint32),
            lax.bitcast_convert_type(s, jnp.uint32))


@case("lax_sort_multi_operand", lambda rng: (
    rng.integers(0, 4, (3, 10)).astype(np.int32),
    rng.standard_normal((3, 10)).astype(np.float32)))
def _(k, v):
    return (lax.sort((k, v), dimension=1, num_keys=1),
            lax.sort((k, v), dimension=1, num_keys=2),
            lax.sort(v, dimension=0))


@case("sort_argsort", lambda rng: (
    np.array([3.0, np.nan, -1.0, 0.0, -0.0, np.inf, -np.inf, 2.0, 2.0, 1.0],
             np.float32), rng.integers(-5, 5, (4, 6)).astype(np.int32)))
def _(x, i):
    return (jnp.sort(x), jnp.argsort(x), jnp.sort(i, axis=0),
            jnp.argsort(i, axis=1, stable=True), jnp.sort(i, descending=True))


@case("lax_rng_bit_generator_threefry",
      lambda rng: (np.array([1, 2, 3, 4], np.uint32),))
def _(k):
    k2, bits = lax.rng_bit_generator(k, (4, 6), dtype=jnp.uint32,
                                     algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    k3, bits8 = lax.rng_bit_generator(k2, (5,), dtype=jnp.uint8,
                                      algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    return k2, bits, k3, bits8


@case("lax_rng_bit_generator_philox",
      lambda rng: (np.array([5, 6, 7, 8], np.uint32),))
def _(k):
    k2, bits = lax.rng_bit_generator(k, (3, 7), dtype=jnp.uint32,
                                     algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    k3, bits16 = lax.rng_bit_generator(k2, (9,), dtype=jnp.uint16,
                                       algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    return k2, bits, k3, bits16


@case("lax_reduce_precision", args(((20,), np.float32)))
def _(x):
    return (lax.reduce_precision(x * 1000, exponent_bits=8, mantissa_bits=7),
            lax.reduce_precision(x * 1000, exponent_bits=5, mantissa_bits=10))


@case("lax_nextafter_copysign", args(((6,), np.float32), ((6,), np.float32)))
def _(x, y):
    return jnp.copysign(x, y), lax.nextafter(x, y)


@case("lax_expand_dims_broadcast_in_dim", f32(3, 4))
def _(x):
    return (lax.broadcast_in_dim(x, (2, 3, 5, 4), (1, 3)),
            lax.broadcast(x, (2,)), lax.expand_dims(x, (0, 3)))


@case("lax_concatenate_slice", f32(4, 6))
def _(x):
    return (lax.concatenate([x, x * 2], 1), lax.slice(x, (1, 0), (4, 6), (2, 3)),
            lax.slice_in_dim(x, 1, 5, stride=2, axis=1))


@case("lax_transpose_reshape_dims", f32(2, 3, 4))
def _(x):
    return lax.transpose(x, (1, 2, 0)), lax.reshape(x, (4, 6), dimensions=(2, 1, 0))


# ----------------------------------------------------------- control flow

@case("scan_carry_and_outputs", f32(10, 3), **ACC["f32"])
def _(xs):
    def step(c, x):
        s, n = c
        s = s * 0.9 + x
        return (s, n + 1), (s.sum(), n)
    (s, n), (ys, ns) = lax.scan(step, (jnp.zeros(3), jnp.int32(0)), xs)
    return s, n, ys, ns


@case("scan_reverse", f32(8, 2), **ACC["f32"])
def _(xs):
    def step(c, x):
        c = jnp.tanh(c + x)
        return c, c * 2
    return lax.scan(step, jnp.zeros(2), xs, reverse=True)


@case("scan_no_xs_length", f32(4), **ACC["f32"])
def _(x):
    def step(c, _):
        return c * 1.1 + 1.0, c
    return lax.scan(step, x, None, length=6)


@case("scan_unroll", f32(12, 4), **ACC["f32"])
def _(xs):
    return lax.scan(lambda c, x: (c + x * x, c.max()), jnp.zeros(4), xs, unroll=3)


@case("fori_loop", f32(4, 4), **ACC["f32"])
def _(x):
    return lax.fori_loop(0, 7, lambda i, a: a @ x * 0.5 + i, jnp.eye(4))


@case("fori_loop_traced_bounds", lambda rng: (*int_scalars(2, 9),
                                              rng.standard_normal(3).astype(np.float32)),
      **ACC["f32"])
def _(lo, hi, x):
    return lax.fori_loop(lo, hi, lambda i, a: a + x * i.astype(jnp.float32), x)


@case("while_loop_data_dependent", args(((), np.float32, 1.0, 2.0)))
def _(x):
    # Newton iterations for sqrt(x) until converged; the trip count depends
    # on the data.
    def cond(c):
        y, it = c
        return (jnp.abs(y * y - x) > 1e-6) & (it < 100)

    def body(c):
        y, it = c
        return 0.5 * (y + x / y), it + 1
    return lax.while_loop(cond, body, (x, jnp.int32(0)))


@case("while_loop_collatz", lambda rng: int_scalars(27))
def _(n):
    def body(c):
        v, steps = c
        return jnp.where(v % 2 == 0, v // 2, 3 * v + 1), steps + 1
    # The step bound keeps it finite for every input (0 is a fixed point);
    # the C corpus runner executes these artifacts with all-zero arguments.
    return lax.while_loop(lambda c: (c[0] != 1) & (c[1] < 1000), body,
                          (n, jnp.int32(0)))


@case("cond", lambda rng: (np.float32(0.3), rng.standard_normal(4).astype(np.float32)))
def _(p, x):
    a = lax.cond(p > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)
    b = lax.cond(p < 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)
    return a, b


@case("cond_int_pred_multiple_outputs", lambda rng: (*int_scalars(1),
                                                     rng.standard_normal((2, 2)).astype(np.float32)))
def _(i, x):
    return lax.cond(i, lambda v: (v @ v, i + 1), lambda v: (v.T, i - 1), x)


@case("switch_clamped_index", lambda rng: (np.array([-3, 0, 1, 2, 7], np.int32),
                                           rng.standard_normal(3).astype(np.float32)))
def _(idx, x):
    branches = [lambda v: v + 1.0, lambda v: v * 10.0, lambda v: -v]
    # Out-of-range indices clamp to the first/last branch.
    return tuple(lax.switch(idx[k], branches, x) for k in range(5))


@case("nested_loops", f32(3, 3), **ACC["f32"])
def _(x):
    def outer(i, acc):
        def inner(c, row):
            return c + row * i, jnp.sum(c)
        c, ys = lax.scan(inner, acc, x)
        return c + ys.mean()
    return lax.fori_loop(0, 4, outer, jnp.zeros(3, jnp.float32))


@case("while_in_scan_with_cond", args(((5,), np.float32, 0.5, 3.0)), **ACC["f32"])
def _(xs):
    def step(c, x):
        # Bounded trip count: with x <= 0 the condition alone never ends.
        y, _ = lax.while_loop(lambda c: (c[0] < 10.0) & (c[1] < 64),
                              lambda c: (c[0] * 1.5, c[1] + 1), (x, 0))
        c = lax.cond(y > 12.0, lambda: c + y, lambda: c - y)
        return c, y
    return lax.scan(step, jnp.float32(0), xs)


@case("map_vmap_over_rows", f32(4, 5), **ACC["f32"])
def _(x):
    return lax.map(lambda r: jnp.sort(r) * r.sum(), x)


# ----------------------------------------------------------- jax.random

def seed_args(seed):
    return lambda rng: (np.asarray(seed, np.int32),)


@case("random_key_split", seed_args(42))
def _(s):
    k = jax.random.key(s)
    k1, k2 = jax.random.split(k)
    ks = jax.random.split(k2, 4)
    return (jax.random.key_data(k1), jax.random.key_data(ks),
            jax.random.key_data(jax.random.fold_in(k, 7)))


@case("random_prngkey_legacy", seed_args(0))
def _(s):
    k = jax.random.PRNGKey(s)
    return k, jax.random.split(k, 3), jax.random.uniform(k, (4,))


@case("random_uniform_normal", seed_args(1), **TOL["f32"])
def _(s):
    k1, k2 = jax.random.split(jax.random.key(s))
    return (jax.random.uniform(k1, (5, 6)), jax.random.normal(k2, (7,)),
            jax.random.uniform(k2, (3,), minval=-2.0, maxval=5.0))


@case("random_normal_bf16", seed_args(1), **TOL["bf16"])
def _(s):
    # A bf16 result compared at bf16 precision: XLA:CPU may keep the f32
    # intermediate of the inverse-erf when a convert to f32 follows, so the
    # result stays bf16 here.
    k1, _ = jax.random.split(jax.random.key(s))
    return jax.random.normal(k1, (2, 2), dtype=jnp.bfloat16)


@case("random_bernoulli_randint", seed_args(2))
def _(s):
    k1, k2, k3 = jax.random.split(jax.random.key(s), 3)
    return (jax.random.bernoulli(k1, 0.3, (20,)),
            jax.random.randint(k2, (4, 5), -10, 10),
            jax.random.randint(k3, (6,), 0, 256, dtype=jnp.uint8))


@case("random_categorical", lambda rng: (np.asarray(3, np.int32),
                                         rng.standard_normal((4, 6)).astype(np.float32)))
def _(s, logits):
    return jax.random.categorical(jax.random.key(s), logits, axis=-1, shape=(5, 4))


@case("random_permutation", seed_args(4))
def _(s):
    return jax.random.permutation(jax.random.key(s), 12)


@case("random_other_distributions", seed_args(5), rtol=1e-4, atol=1e-5)
def _(s):
    k1, k2, k3 = jax.random.split(jax.random.key(s), 3)
    return (jax.random.truncated_normal(k1, -1.0, 2.0, (6,)),
            jax.random.exponential(k2, (6,)),
            jax.random.gumbel(k3, (6,)))


@case("random_rbg", seed_args(6), **TOL["f32"])
def _(s):
    k = jax.random.key(s, impl="rbg")
    k1, k2 = jax.random.split(k)
    return (jax.random.key_data(k1), jax.random.uniform(k1, (4, 3)),
            jax.random.normal(k2, (5,)), jax.random.bernoulli(k2, 0.5, (8,)),
            jax.random.randint(k1, (6,), 0, 100))


@case("random_unsafe_rbg", seed_args(7), **TOL["f32"])
def _(s):
    k = jax.random.key(s, impl="unsafe_rbg")
    k1, k2 = jax.random.split(k)
    return jax.random.uniform(k1, (10,)), jax.random.key_data(k2)


@case("random_key_data_arg", lambda rng: (np.array([0, 123], np.uint32),), **TOL["f32"])
def _(kd):
    k = jax.random.wrap_key_data(kd)
    return jax.random.normal(k, (3, 3)), jax.random.key_data(jax.random.split(k, 2))


# ---------------------------------------------------------- transformations

def mlp_params(rng, sizes=(6, 16, 8, 3)):
    ps = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        ps.append(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a))
        ps.append(np.zeros(b, np.float32) + rng.standard_normal(b).astype(np.float32) * 0.1)
    return ps


def mlp_apply(ps, x):
    for i in range(0, len(ps) - 2, 2):
        x = jax.nn.relu(x @ ps[i] + ps[i + 1])
    return x @ ps[-2] + ps[-1]


def mlp_loss(ps, x, y):
    return jnp.mean(optax.softmax_cross_entropy(mlp_apply(ps, x), y))


def mlp_args(rng):
    x = rng.standard_normal((10, 6)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 10)]
    return (*mlp_params(rng), x, y)


@case("grad_mlp_loss", mlp_args, **ACC["f32"])
def _(w1, b1, w2, b2, w3, b3, x, y):
    return jax.grad(mlp_loss)([w1, b1, w2, b2, w3, b3], x, y)


@case("value_and_grad_mlp", mlp_args, **ACC["f32"])
def _(w1, b1, w2, b2, w3, b3, x, y):
    return jax.value_and_grad(mlp_loss)([w1, b1, w2, b2, w3, b3], x, y)


@case("vmap_matmul_fn", mm((5, 4, 3), (3, 2), (5, 2)), **ACC["f32"])
def _(xs, w, bs):
    f = lambda x, b: jnp.tanh(x @ w + b)
    return jax.vmap(f)(xs, bs), jax.vmap(f, in_axes=(0, None))(xs, bs[0])


@case("vmap_nested", mm((3, 4, 5)), **ACC["f32"])
def _(x):
    return jax.vmap(jax.vmap(lambda v: v / jnp.linalg.norm(v)))(x)


def small_fn(x):
    return jnp.sum(jnp.sin(x) * x ** 2) + jnp.prod(x[:2]) + jnp.exp(x[0] * x[-1])


@case("jacfwd", f32(4), rtol=1e-4, atol=1e-5)
def _(x):
    return jax.jacfwd(lambda v: jnp.sin(v) * v.sum() + v[::-1])(x)


@case("jacrev", f32(4), rtol=1e-4, atol=1e-5)
def _(x):
    return jax.jacrev(lambda v: jnp.tanh(v) * v[0] + jnp.cumsum(v))(x)


@case("hessian", f32(4), rtol=1e-4, atol=1e-4)
def _(x):
    return jax.hessian(small_fn)(x)


@case("custom_jvp_activations", args(((4, 7), np.float32, -4, 4)), rtol=1e-5, atol=1e-5)
def _(x):
    return (jax.nn.relu(x), jax.nn.softplus(x), jax.nn.gelu(x),
            jax.nn.gelu(x, approximate=False), jax.nn.softmax(x, axis=-1),
            jax.nn.log_softmax(x, axis=0), jax.nn.silu(x), jax.nn.relu6(x),
            jax.nn.elu(x), jax.nn.leaky_relu(x))


@case("grad_custom_jvp_activations", args(((4, 7), np.float32, -4, 4)),
      rtol=1e-4, atol=1e-5)
def _(x):
    gs = [jax.grad(lambda v, f=f: jnp.sum(f(v) * jnp.arange(7.0)))(x)
          for f in (jax.nn.relu, jax.nn.softplus, jax.nn.gelu,
                    lambda v: jax.nn.softmax(v, axis=-1),
                    lambda v: jax.nn.log_softmax(v, axis=-1))]
    return tuple(gs)


@case("grad_through_control_flow", f32(3), **ACC["f32"])
def _(x):
    def f(v):
        v = lax.fori_loop(0, 3, lambda i, a: jnp.sin(a) * 1.5, v)
        c, _ = lax.scan(lambda c, e: (c * e + 1.0, None), 1.0, v)
        return lax.cond(c > 0, lambda: c * 2, lambda: -c)
    return jax.grad(f)(x)


@case("checkpoint_grad", f32(5), **ACC["f32"])
def _(x):
    f = jax.checkpoint(lambda v: jnp.sum(jnp.tanh(v) ** 2 * jnp.exp(-v)))
    return jax.value_and_grad(f)(x)


@case("jvp_linearize", mm((5,), (5,)), **ACC["f32"])
def _(x, t):
    y, yt = jax.jvp(lambda v: jnp.sin(v) * jnp.cos(v ** 2), (x,), (t,))
    return y, yt


# ------------------------------------------------------- small programs

def adam_args(rng):
    ps = mlp_params(rng, (8, 32, 4))
    x = rng.standard_normal((16, 8)).astype(np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 16)]
    return (*ps, x, y)


@case("program_optax_adam_step", adam_args, rtol=1e-4, atol=1e-5)
def _(w1, b1, w2, b2, x, y):
    params = [w1, b1, w2, b2]
    opt = optax.adam(1e-2)
    state = opt.init(params)
    losses = []
    for _ in range(3):
        loss, g = jax.value_and_grad(mlp_loss)(params, x, y)
        upd, state = opt.update(g, state, params)
        params = optax.apply_updates(params, upd)
        losses.append(loss)
    return params, jnp.stack(losses)


def gru_args(rng):
    d, h, b = 6, 8, 4
    r = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
    return (r(b, d), r(b, h), r(d, 3 * h), r(h, 3 * h), r(3 * h))


@case("program_gru_cell", gru_args, rtol=1e-4, atol=1e-5)
def _(x, h, wx, wh, b):
    gx = x @ wx + b
    gh = h @ wh
    xr, xz, xn = jnp.split(gx, 3, axis=-1)
    hr, hz, hn = jnp.split(gh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    return (1 - z) * n + z * h


@case("program_gru_scan", lambda rng: (rng.standard_normal((7, 4, 6)).astype(np.float32) * 0.5,
                                       *gru_args(rng)[1:]), rtol=1e-4, atol=1e-5)
def _(xs, h0, wx, wh, b):
    def cell(h, x):
        xr, xz, xn = jnp.split(x @ wx + b, 3, axis=-1)
        hr, hz, hn = jnp.split(h @ wh, 3, axis=-1)
        r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
        h = (1 - z) * jnp.tanh(xn + r * hn) + z * h
        return h, h.mean(-1)
    return lax.scan(cell, h0, xs)


def attn_args(rng):
    b, t, d = 2, 5, 16
    r = lambda *s: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
    return (rng.standard_normal((b, t, d)).astype(np.float32), r(d, 3 * d), r(d, d),
            np.ones(d, np.float32), np.zeros(d, np.float32))


def layernorm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + eps) * g + b


@case("program_layernorm_attention", attn_args, rtol=1e-4, atol=1e-5)
def _(x, wqkv, wo, g, b):
    h = layernorm(x, g, b)
    q, k, v = jnp.split(h @ wqkv, 3, axis=-1)
    heads = lambda t: t.reshape(t.shape[0], t.shape[1], 4, -1).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    mask = jnp.tril(jnp.ones((s.shape[-1], s.shape[-1]), bool))
    s = jnp.where(mask, s, -1e9)
    o = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)
    o = o.transpose(0, 2, 1, 3).reshape(x.shape)
    return x + o @ wo


@case("program_attention_grad", attn_args, rtol=1e-4, atol=1e-4)
def _(x, wqkv, wo, g, b):
    def loss(wqkv, wo):
        h = layernorm(x, g, b)
        q, k, v = jnp.split(h @ wqkv, 3, axis=-1)
        s = jax.nn.softmax(q @ k.transpose(0, 2, 1) / 4.0, -1)
        return jnp.mean((s @ v @ wo) ** 2)
    return jax.grad(loss, argnums=(0, 1))(wqkv, wo)


@case("program_donated_update", mm((6, 6), (6, 6)), jit_kwargs=dict(donate_argnums=(0,)),
      **ACC["f32"])
def _(w, g):
    return w - 0.1 * g, jnp.sum(g * g)


# ============================================================ x64 cases

for _n in ["sin", "cos", "tan", "tanh", "exp", "expm1", "log", "log1p", "sqrt",
           "rsqrt", "cbrt", "logistic", "erf", "floor", "ceil"]:
    _f, _lo, _hi = UNARY_FLOAT[_n]
    case(f"f64_{_n}", args(((6, 5), np.float64, _lo, _hi)), x64=True, **TOL["f64"])(
        lambda x, _f=_f: _f(x))

for _n in ["add", "multiply", "divide", "power", "arctan2", "maximum", "fmod"]:
    _f, _lo, _hi = BINARY_FLOAT[_n]
    case(f"f64_{_n}", args(((4, 6), np.float64, _lo, _hi),
                           ((4, 6), np.float64, _lo, _hi)), x64=True, **TOL["f64"])(
        lambda x, y, _f=_f: _f(x, y))

for _tag, _dt in {"i64": np.int64, "u64": np.uint64}.items():
    _int_cases(_tag, _dt, x64=True)


@case("f64_matmul_reductions", lambda rng: (rng.standard_normal((8, 12)),
                                            rng.standard_normal((12, 5))),
      x64=True, **ACC["f64"])
def _(a, b):
    return a @ b, jnp.sum(a, 1), jnp.cumsum(b, 0), jnp.var(a), jnp.argmax(a, 0)


@case("f64_convert", lambda rng: (
    np.array([0.5, 1.5, -2.5, 1e19, -1e19, 9.3e18, np.nan, np.inf,
              2.0**53 + 1, 1e-310, 3.5e38, 1.0000000001]),
    np.array([2**62 + 1, -2**63, 2**53 + 1, -1, 0], np.int64)), x64=True)
def _(x, i):
    return (x.astype(jnp.int64), x.astype(jnp.uint64), x.astype(jnp.float32),
            x.astype(jnp.int32), jnp.round(x), i.astype(jnp.float64),
            i.astype(jnp.float32), i.astype(jnp.int32), i.astype(jnp.uint64))


@case("f64_bitcast", lambda rng: (rng.standard_normal(5), rng.integers(0, 2**62, 4)),
      x64=True)
def _(x, i):
    return (lax.bitcast_convert_type(x, jnp.int64),
            lax.bitcast_convert_type(x, jnp.uint32),
            lax.bitcast_convert_type(i & 0x3FEFFFFFFFFFFFFF, jnp.float64))


@case("f64_special_values", lambda rng: (
    np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-320, 1.7e308, -1.0]),), x64=True)
def _(x):
    return (jnp.isfinite(x), jnp.isnan(x), x * 2, jnp.maximum(x, 0.0), jnp.max(x),
            jnp.sign(x), jnp.sqrt(jnp.abs(x)))


@case("c128_ops", args(((4, 5), np.complex128), ((4, 5), np.complex128)),
      x64=True, **TOL["c128"])
def _(x, y):
    return (x + y, x * y, x / y, jnp.abs(x), jnp.conj(x), jnp.real(y), jnp.imag(y),
            jnp.exp(x), x.astype(jnp.complex64))


@case("c128_matmul", args(((3, 4), np.complex128), ((4, 2), np.complex128)),
      x64=True, rtol=1e-11, atol=1e-12)
def _(a, b):
    return a @ b, jnp.sum(a, axis=1)


@case("x64_random", lambda rng: (np.asarray(9, np.int64),), x64=True, **TOL["f64"])
def _(s):
    k1, k2 = jax.random.split(jax.random.key(s))
    return (jax.random.uniform(k1, (4,), dtype=jnp.float64),
            jax.random.normal(k2, (3,), dtype=jnp.float64),
            jax.random.randint(k1, (5,), 0, 2**40, dtype=jnp.int64),
            jax.random.bits(k2, (3,), dtype=jnp.uint64))


@case("x64_iota_loop", lambda rng: (np.asarray(5, np.int64),), x64=True, **TOL["f64"])
def _(n):
    def body(i, acc):
        return acc + jnp.arange(4, dtype=jnp.int64) * i
    return lax.fori_loop(jnp.int64(0), n, body, jnp.zeros(4, jnp.int64)), \
        jnp.linspace(0.0, 1.0, 5, dtype=jnp.float64) * n


# ------------------------------------------------------------ convolution

def cnn_args(rng):
    r = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
    return (r(4, 12, 12, 3), r(3, 3, 3, 8), r(8), r(3, 3, 1, 8), r(8 * 3 * 3, 5),
            np.eye(5, dtype=np.float32)[rng.integers(0, 5, 4)])


def cnn_loss(params, x, y):
    w1, b1, wd, wf = params
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn) + b1)
    # depthwise, strided: feature groups (and batch groups in its gradient)
    h = jax.nn.relu(lax.conv_general_dilated(h, wd, (2, 2), "SAME", dimension_numbers=dn,
                                             feature_group_count=8))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    logits = h.reshape(h.shape[0], -1) @ wf
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@case("program_cnn_grad", cnn_args, rtol=1e-4, atol=1e-5)
def _(x, w1, b1, wd, wf, y):
    return jax.value_and_grad(cnn_loss)((w1, b1, wd, wf), x, y)


@case("conv_nchw_dilated_transpose", args(((2, 3, 9, 8), np.float32), ((4, 3, 3, 2), np.float32),
                                          ((2, 4, 5, 5), np.float32)), **ACC["f32"])
def _(x, w, z):
    a = lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, -1)), rhs_dilation=(1, 2))
    b = lax.conv_transpose(z, w, (2, 2), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"),
                           transpose_kernel=True)
    return a, b


@case("jnp_convolve_correlate", args(((17,), np.float32), ((5,), np.float32)), **ACC["f32"])
def _(x, k):
    return (jnp.convolve(x, k), jnp.convolve(x, k, mode="same"),
            jnp.correlate(x, k, mode="valid"))


@case("conv_int8_to_int32_3d", lambda rng: (small_ints(rng, (2, 3, 4, 5, 4), np.int8, -100, 100),
                                             small_ints(rng, (2, 3, 2, 2, 3), np.int8, -100, 100)))
def _(x, w):
    return (lax.conv_general_dilated(x, w, (1, 1, 2), "SAME",
                                     preferred_element_type=jnp.int32),
            lax.conv_general_dilated(x, w, (1, 1, 1), "VALID"))

# ---------------------------------------------------------------- fft
# jnp.fft.* lowers to stablehlo.fft inside a private function. Errors grow
# like log N relative to the largest output: atol is set for outputs of
# magnitude ~10-100.

@case("fft_c64", args(((3, 24), np.complex64)), rtol=1e-5, atol=2e-5)
def _(x):
    return jnp.fft.fft(x), jnp.fft.ifft(x), jnp.fft.fft(x, n=17)


@case("rfft_irfft", args(((4, 30), np.float32)), rtol=1e-5, atol=2e-5)
def _(x):
    X = jnp.fft.rfft(x)
    return X, jnp.fft.irfft(X, n=30), jnp.fft.irfft(X, n=29), jnp.fft.rfft(x, n=7)


@case("fftn_3d", args(((2, 6, 5, 8), np.complex64)), rtol=1e-5, atol=5e-5)
def _(x):
    return jnp.fft.fftn(x, axes=(1, 2, 3)), jnp.fft.ifft2(x), \
        jnp.fft.irfftn(x[..., :5], s=(5, 8), axes=(2, 3))


@case("grad_rfft", args(((16,), np.float32)), rtol=1e-5, atol=2e-5)
def _(x):
    def loss(v):
        X = jnp.fft.rfft(v * jnp.hanning(16).astype(v.dtype))
        return jnp.sum(jnp.abs(X) ** 2) + jnp.sum(jnp.real(X) * jnp.arange(9.0))
    return jax.value_and_grad(loss)(x)


@case("fft_c128", args(((2, 12), np.complex128), ((3, 20), np.float64)),
      x64=True, rtol=1e-12, atol=1e-12)
def _(x, r):
    return jnp.fft.fft(x), jnp.fft.ifft(x), jnp.fft.rfft(r), \
        jnp.fft.irfft(jnp.fft.rfft(r), n=20)


# Issue 12: 64-bit start indices (signed, and unsigned past INT64_MAX,
# which clamp high) on f64/complex128/int64 data, fused and in a counted
# loop.
@case("dynamic_slice_x64", lambda rng: (
    rng.standard_normal((7, 6)), (rng.standard_normal((7, 6)) +
                                  1j * rng.standard_normal((7, 6))),
    rng.integers(-50, 50, (7, 6)), np.asarray(3, np.int64),
    np.asarray(2**64 - 5, np.uint64), np.asarray(-9, np.int64)),
    x64=True, **ACC["f64"])
def _(x, z, n, i, big, neg):
    def body(t, c):
        x, z, n = c
        t = t.astype(jnp.int64)
        u = t.astype(jnp.uint64)
        w = lax.dynamic_slice(x, (i + t, i - t), (2, 3))
        x = lax.dynamic_update_slice(x, jnp.sin(w) * 2.0, (neg + t, i))
        z = lax.dynamic_update_slice(z, lax.dynamic_slice(z, (u, big), (3, 2)) * 1j,
                                     (big, u))
        n = lax.dynamic_update_slice(n, lax.dynamic_slice(n, (t, t), (2, 2)) * 3 - t,
                                     (i, neg))
        return x, z, n
    return lax.fori_loop(0, 5, body, (x, z, n))



# Zero-element arrays (jax's suite on CUDA, 2026-12-03: fusions whose
# iteration space is empty but that hold one-element feeds were refused with
# "outputs have different element counts"): reductions, softmax, mixed-dtype
# broadcasts, cumulative ops and iotas over empty dims.
@case("empty_log_softmax", lambda rng: (np.zeros((0,), np.float32),
                                        np.zeros((3, 0), np.float32)))
def _(v, m):
    return jax.nn.log_softmax(v), jax.nn.softmax(m, -1), jnp.var(m, 0)


@case("empty_mixed_dtype_broadcast", lambda rng: (
    np.zeros((0, 4), np.int8), np.ones((4,), np.uint16),
    np.zeros((2, 0), np.float32)))
def _(a, b, m):
    return (a + b, a / b, a == b, jnp.cumsum(m, 1), jnp.cumprod(m, 0),
            jnp.eye(0, 3, 1) + jnp.sum(m), jnp.nonzero(m.ravel(), size=2)[0])



# Transposes of an empty array whose other dims would take the 32x32-tiled
# kernel (CUDA: "tiled transpose: bad block count"; random-program fuzzer
# on the H200, seed 15907635).
@case("empty_transpose", lambda rng: (np.zeros((2, 16, 0, 33), np.float32),))
def _(x):
    return (jnp.transpose(x, (0, 3, 2, 1)), jnp.transpose(x, (3, 0, 2, 1)) + 1,
            jnp.isfinite(jnp.transpose(x, (3, 2, 1, 0))))



# ------------------------------------------- shared element-wise values
# Values that several kernels read (batch norm's `x - mean`, a convert of
# a bf16 activation, a ReLU's mask): the CUDA device recomputes cheap ones
# in each consumer (src/compiler/recompute.h) and merges reduces over the
# same data; these pin the results of both.

def _bn(h, g, b):
    mu = h.mean((0, 1, 2))
    var = ((h - mu) ** 2).mean((0, 1, 2))
    return (h - mu) * lax.rsqrt(var + 1e-5) * g + b


@case("shared_bn_relu_grad", lambda rng: (
    rng.standard_normal((4, 6, 5, 16)).astype(np.float32),
    rng.uniform(0.5, 1.5, (16,)).astype(np.float32),
    rng.standard_normal((16,)).astype(np.float32),
    rng.standard_normal((4, 6, 5, 16)).astype(np.float32)), **ACC["f32"])
def _(x, g, b, w):
    def loss(x, g, b):
        return jnp.sum(jax.nn.relu(_bn(x, g, b)) * w)
    return jax.value_and_grad(loss, (0, 1, 2))(x, g, b)


@case("shared_conv_bn_step", lambda rng: (
    rng.standard_normal((32, 32, 32, 3)).astype(np.float32),
    (rng.standard_normal((3, 3, 3, 16)) / 4).astype(np.float32),
    (rng.standard_normal((3, 3, 16, 16)) / 8).astype(np.float32),
    rng.uniform(0.5, 1.5, (2, 16)).astype(np.float32),
    rng.standard_normal((2, 16)).astype(np.float32)), rtol=2e-3, atol=1e-4)
def _(x, w0, w1, g, b):
    # Weight gradients through batch norm are differences of sums of
    # 32,768 terms: summation orders differ by ~1e-3 relative in a few
    # elements (host against XLA:CPU).
    def loss(w0, w1, g, b):
        h = x
        for i, w in enumerate((w0, w1)):
            h = lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1)),
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = jax.nn.relu(_bn(h, g[i], b[i]))
        return jnp.sum(h.mean((1, 2)) * jnp.arange(16.0) / 16)
    return jax.value_and_grad(loss, (0, 1, 2, 3))(w0, w1, g, b)


@case("shared_bf16_convert", lambda rng: (
    rng.standard_normal((2048, 516)).astype(np.float32).astype(BF16),
    rng.standard_normal((2048, 516)).astype(np.float32)), **ACC["bf16"])
def _(a, y):
    af = a.astype(jnp.float32)
    return jnp.sum(af, 0), jnp.max(af, 1), jnp.tanh(af) * y, (af * y).astype(BF16)


@case("shared_not_copied", lambda rng: (
    rng.standard_normal((2048, 512)).astype(np.float32),
    rng.standard_normal((2048, 512)).astype(np.float32)), **ACC["f32"])
def _(a, b):
    s = a + b              # two full-size leaves: written once, read twice
    m = a > 0              # a pred mask of an f32 leaf: written once
    return jnp.sum(s * s, 0), jnp.exp(s), jnp.where(m, s, 0.0), jnp.sum(m, 1)


@case("shared_int_select_chain", lambda rng: (
    rng.integers(-50, 50, (2048, 512)).astype(np.int32),
    rng.integers(-3, 3, (512,)).astype(np.int32)))
def _(a, v):
    t = jnp.clip(a - v, -20, 20) * 3
    return (jnp.sum(t, 0), jnp.max(t, 1), t ^ a, jnp.where(t > 0, t, -t),
            jnp.sum(t * t, 1))


@case("shared_sibling_reduces", lambda rng: (
    rng.standard_normal((2048, 8, 64)).astype(np.float32),
    rng.standard_normal((2048, 8, 64)).astype(np.float32)), **ACC["f32"])
def _(x, y):
    # Column and middle-axis reduces over the same arrays: one kernel on
    # CUDA (src/compiler/merge_reduces.h), fused producers or not.
    return (jnp.sum(x * y, 0), jnp.sum(x, 0), jnp.max(y, 0), jnp.min(x, (0, 1)),
            jnp.sum(x, (0, 1)))


# ------------------------------------------- producers merged into consumers
# A value several kernels read, whose consumers read its operands anyway
# (the ReLU gradient `where(y*s + b > 0, g, 0)` beside `y`): the CUDA
# device computes it in each consumer's kernel instead of writing it
# (src/compiler/merge_producers.h). 4 MiB values, so the pass applies.

def _bn_relu_grad(x, g, b, w):
    def loss(x, g, b):
        return jnp.sum(jax.nn.relu(_bn(x, g, b)) * w)
    return jax.value_and_grad(loss, (0, 1, 2))(x, g, b)


def _bn_args(dtype, shape=(64, 16, 16, 64)):
    def make(rng):
        c = shape[-1]
        return (rng.standard_normal(shape).astype(np.float32).astype(dtype),
                rng.uniform(0.5, 1.5, (c,)).astype(np.float32).astype(dtype),
                rng.standard_normal((c,)).astype(np.float32).astype(dtype),
                rng.standard_normal(shape).astype(np.float32).astype(dtype))
    return make


@case("merge_bn_relu_grad_f32", _bn_args(np.float32), rtol=1e-4, atol=1e-4)
def _(x, g, b, w):
    return _bn_relu_grad(x, g, b, w)


@case("merge_bn_relu_grad_bf16", _bn_args(BF16, (32, 16, 16, 128)),
      rtol=3e-2, atol=3e-2)
def _(x, g, b, w):
    # bf16 activations and parameters, statistics and the ReLU in f32 (as
    # mixed-precision training computes them): a bf16 ReLU's mask flips
    # where the normalized value rounds across 0 in another summation
    # order (27 of 1M gradient elements against XLA:CPU), which no
    # tolerance covers.
    f32 = jnp.float32
    def loss(x, g, b):
        y = jax.nn.relu(_bn(x.astype(f32), g.astype(f32), b.astype(f32)))
        return jnp.sum(y * w.astype(f32))
    return jax.value_and_grad(loss, (0, 1, 2))(x, g, b)


@case("merge_mask_consumers", lambda rng: (
    rng.standard_normal((2048, 512)).astype(np.float32),
    rng.standard_normal((2048, 512)).astype(np.float32),
    rng.standard_normal((512,)).astype(np.float32)), **ACC["f32"])
def _(a, g, s):
    # p is read by two column sums (one of them a reduce of its own) and by
    # an element-wise kernel; all of them read `a` too.
    p = jnp.where(a * s > 0, g, 0.0)
    return jnp.sum(p * a, 0), jnp.sum(p, 0), p * a + a


@case("merge_int_consumers", lambda rng: (
    rng.integers(-100, 100, (2048, 512)).astype(np.int32),
    rng.integers(-100, 100, (2048, 512)).astype(np.int32)))
def _(a, g):
    p = jnp.where(a > 3, g * 3, a - g)
    return jnp.sum(p ^ a, 0), jnp.max(p - a, 0), (p * a) >> 2

@case("merge_gelu_mlp_grad", lambda rng: (
    rng.standard_normal((512, 256)).astype(np.float32),
    (rng.standard_normal((256, 1024)) / 16).astype(np.float32),
    (rng.standard_normal((1024, 256)) / 32).astype(np.float32)),
    rtol=1e-4, atol=1e-4)
def _(x, w1, w2):
    # The forward kernel returns gelu(u) for the next dot and tanh terms
    # that only the backward kernel reads, which reads u too: those are
    # computed there instead of written (a producer's results merged one by
    # one, the rest kept).
    def loss(w1, w2):
        return jnp.sum(jax.nn.gelu(x @ w1) @ w2)
    return jax.value_and_grad(loss, (0, 1))(w1, w2)

ALL_CASES: list[Case] = CASES + X64_CASES

_names = [c.name for c in ALL_CASES]
assert len(_names) == len(set(_names)), "duplicate corpus case names"

