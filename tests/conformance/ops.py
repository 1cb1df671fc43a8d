"""The op-conformance case table: one OpCase per StableHLO op and variant,
each with the dtypes it accepts. tests/conformance/test_conformance.py runs
every (case, dtype) on the device under test (jax.devices("iron")[0]) and on
jax's CPU backend (XLA:CPU, the ground truth) with identical inputs.

An OpCase:
- name: the test id prefix ("exp" -> "exp[float32]");
- fn(dtype) -> the jax function to jit, built from jax.lax primitives so it
  lowers to (essentially only) the op under test;
- dtypes: the dtypes the op accepts (np.dtype-able: ml_dtypes' bfloat16 too);
- args(rng, dtype) -> tuple of numpy arrays, the inputs (edge values first:
  0, -0, +-inf, NaN, denormals, min/max, large/small magnitudes; then random);
- tol: "exact" (bit-exact up to NaN payloads, signed zeros compared) or a
  dict {dtype name or class: (rtol, atol)} looked up by tolerance();
- x64: True forces jax.enable_x64 (64-bit dtypes force it anyway).

Unsupported ops are in REFUSED: each must raise an error naming the op
("stablehlo.fft is not supported yet"), never crash or return a value.
"""
import os
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
import ml_dtypes

bf16 = np.dtype(ml_dtypes.bfloat16)
BOOL = [np.dtype(np.bool_)]
SINT = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)]
UINT = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)]
INT = SINT + UINT
FLOAT = [np.dtype(np.float16), bf16, np.dtype(np.float32), np.dtype(np.float64)]
CPLX = [np.dtype(np.complex64), np.dtype(np.complex128)]
NUM = INT + FLOAT
ALL = BOOL + INT + FLOAT + CPLX
# One dtype per storage width (1, 2, 4, 8, 16 bytes) plus bool: enough for
# data-movement ops, whose kernels only see element sizes.
MOVE = [np.dtype(np.bool_), np.dtype(np.uint8), bf16, np.dtype(np.float32),
        np.dtype(np.int64), np.dtype(np.complex128)]


def is_float(dt):
    return dt in FLOAT


def is_cplx(dt):
    return dt in CPLX


def is_int(dt):
    return dt in INT


def needs_x64(dt):
    return np.dtype(dt).itemsize >= 8 and np.dtype(dt) != np.dtype(np.complex64)


@dataclass
class OpCase:
    name: str
    fn: Callable           # dtype -> function of the args
    dtypes: list
    args: Callable         # (rng, dtype) -> tuple of np.ndarray
    tol: object = "exact"  # "exact" or {key: (rtol, atol)}
    x64: bool = False
    # Per-dtype reason the op is expected to refuse (unused for now).
    note: Optional[str] = None
    # True: atol is relative to the largest |want| of the output (transforms
    # whose every output sums every input, e.g. FFTs).
    atol_by_max: bool = False
    # True: every dtype runs by default (see pick_dtypes).
    every_dtype: bool = False


CASES: list[OpCase] = []


def case(name, fn, dtypes, args, tol="exact", x64=False, atol_by_max=False,
         every_dtype=False):
    assert all(c.name != name for c in CASES), name
    CASES.append(OpCase(name, fn, [np.dtype(d) for d in dtypes], args, tol, x64,
                        atol_by_max=atol_by_max, every_dtype=every_dtype))


def tolerance(c, dt):
    """(rtol, atol) for case c at dtype dt, or None for bit-exact."""
    if c.tol == "exact" or dt in BOOL or dt in INT:
        return None
    t = c.tol
    for key in (dt.name, "cplx" if is_cplx(dt) else "float"):
        if key in t:
            return t[key]
    return None


# --- tolerances -------------------------------------------------------------
# f16/bf16 results are computed in f32 and rounded (on XLA:CPU too), so they
# may differ by one rounding of the narrow type: rtol = its epsilon.
EPS16 = {"float16": (9.8e-4, 1e-7), "bfloat16": (7.9e-3, 1e-7)}
# Transcendentals: XLA:CPU uses its own vectorized approximations (a few ulp
# from libm); f32 rtol 2e-6 is ~16 ulp, f64 ~50 ulp.
TRANS = dict(EPS16, float32=(2e-6, 1e-37), float64=(1e-14, 1e-300),
             complex64=(4e-6, 1e-37), complex128=(2e-14, 1e-300))
# Sums/products whose association order differs between backends.
ACCUM = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2),
         "float32": (1e-5, 1e-5), "float64": (1e-13, 1e-13),
         "complex64": (1e-5, 1e-5), "complex128": (1e-13, 1e-13)}


# --- input generators -------------------------------------------------------

def float_edges(dt, denormals=False):
    fi = ml_dtypes.finfo(dt) if dt == bf16 else np.finfo(dt)
    sub = float(fi.smallest_subnormal)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 3.5, 2.5,
         float(fi.tiny), -float(fi.tiny), float(fi.max), -float(fi.max),
         float(fi.eps), 1e-3, -7.75, 100.0, 0.1]
    if denormals:  # (the *_denormals cases use denormal_edges instead)
        v += [sub, -sub, 3 * sub, float(fi.tiny) - sub]
    return np.array(v, dtype=np.float64).astype(dt)


def int_edges(dt):
    ii = np.iinfo(dt)
    v = {0, 1, 2, 3, 7, ii.max, ii.max - 1, ii.min, ii.min + 1,
         ii.max // 2, ii.max // 2 + 1}
    if ii.min < 0:
        v |= {-1, -2, -3, -7}
    return np.array(sorted(v), dtype=dt)


def edges(dt):
    if dt in BOOL:
        return np.array([False, True])
    if is_int(dt):
        return int_edges(dt)
    if is_float(dt):
        return float_edges(dt)
    part = np.float32 if dt == np.complex64 else np.float64
    e = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3, 1e3, np.inf, np.nan],
                 dtype=part)
    out = np.empty((len(e), len(e)), dt)  # not e + 1j*e: 1j*inf is nan+infj
    out.real, out.imag = e[:, None], e[None, :]
    return out.ravel()


def rand(rng, dt, n, scale=3.0, lo=None, hi=None):
    """n random values of dt: full range for ints (or [lo, hi)), mixed
    magnitudes for floats."""
    if dt in BOOL:
        return rng.random(n) < 0.5
    if is_int(dt):
        ii = np.iinfo(dt)
        lo = ii.min if lo is None else lo
        hi = ii.max if hi is None else hi - 1
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=dt)
    if is_cplx(dt):
        part = np.float32 if dt == np.complex64 else np.float64
        return (rand(rng, np.dtype(part), n, scale) +
                1j * rand(rng, np.dtype(part), n, scale)).astype(dt)
    v = rng.standard_normal(n) * scale
    if lo is not None:
        v = rng.uniform(lo, hi, n)
    return v.astype(dt)


def unary_arg(rng, dt, extra=48):
    e = edges(dt)
    return (np.concatenate([e, rand(rng, dt, extra)]).astype(dt),)


def binary_args(rng, dt, extra=48):
    """Every pair of edge values (a cross product), then random pairs."""
    e = edges(dt)
    if is_cplx(dt):
        e = e[::3]  # the complex edge set is already a product
    x = np.concatenate([np.tile(e, len(e)), rand(rng, dt, extra)]).astype(dt)
    y = np.concatenate([np.repeat(e, len(e)), rand(rng, dt, extra)]).astype(dt)
    return x, y


def finite(rng, dt, shape, scale=3.0):
    """Random finite values; integer-valued for floats when exact sums are wanted."""
    n = int(np.prod(shape))
    return rand(rng, dt, n, scale).reshape(shape)


def small_ints(rng, dt, shape, lo=-8, hi=8):
    """Small integer values in any dtype (exactly representable everywhere,
    so sums and products are exact whatever the order)."""
    if dt in BOOL:
        return rng.random(shape) < 0.5
    if dt in UINT:
        lo = 0
    v = rng.integers(lo, hi, size=shape)
    if is_cplx(dt):
        v = v + 1j * rng.integers(lo, hi, size=shape)
    return v.astype(dt)


# --- element-wise -----------------------------------------------------------

# Every float element-wise op also gets a "<op>_denormals" case (f32, f64):
# its own program, as XLA:CPU's denormal handling depends on the kernel
# (some flush to zero, some do not), and the plain cases stay meaningful
# for normal numbers whatever a device does with denormals.
DENORMAL_DTYPES = [np.dtype(np.float32), np.dtype(np.float64)]


def denormal_edges(dt):
    fi = np.finfo(dt)
    sub = float(fi.smallest_subnormal)
    v = [sub, -sub, 3 * sub, float(fi.tiny) - sub, -float(fi.tiny) / 4, 0.0, -0.0,
         1.0, -1.0, 0.5, float(fi.tiny), -float(fi.tiny), np.inf, np.nan]
    return np.array(v, np.float64).astype(dt)


def denormal_unary(rng, dt):
    return (denormal_edges(dt),)


def denormal_binary(rng, dt):
    e = denormal_edges(dt)
    return np.tile(e, len(e)), np.repeat(e, len(e))


def with_denormals(name, f, dtypes, tol, gen):
    dts = [d for d in DENORMAL_DTYPES if d in [np.dtype(x) for x in dtypes]]
    if dts:
        case(name + "_denormals", lambda dt: f, dts, gen, tol)


def un(name, f, dtypes, tol="exact", gen=unary_arg):
    case(name, lambda dt: f, dtypes, gen, tol)
    with_denormals(name, f, dtypes, tol, denormal_unary)


def bi(name, f, dtypes, tol="exact", gen=binary_args):
    case(name, lambda dt: f, dtypes, gen, tol)
    with_denormals(name, f, dtypes, tol, denormal_binary)


# Correctly rounded IEEE operations are exact on both backends.
bi("add", lax.add, NUM + CPLX)  # jax refuses add on bool
bi("subtract", lax.sub, NUM + CPLX)
bi("multiply", lax.mul, NUM, )
bi("multiply_complex", lax.mul, CPLX, tol=ACCUM)
bi("divide", lax.div, NUM)  # ints: x/0 and INT_MIN/-1 per XLA
bi("divide_complex", lax.div, CPLX, tol=TRANS)
bi("remainder", lax.rem, NUM)
bi("maximum", lax.max, BOOL + NUM)
bi("minimum", lax.min, BOOL + NUM)
bi("atan2", lax.atan2, FLOAT, tol=TRANS)
bi("and", lax.bitwise_and, BOOL + INT)
bi("or", lax.bitwise_or, BOOL + INT)
bi("xor", lax.bitwise_xor, BOOL + INT)


def pow_args(rng, dt):
    if is_int(dt):  # integer exponents: small, some negative
        x, _ = binary_args(rng, dt)
        lo = 0 if dt in UINT else -3
        return x, rng.integers(lo, 9, size=x.shape).astype(dt)
    return binary_args(rng, dt)


# jax 0.10 lax.pow takes only float/complex bases (integer powers lower to
# multiplies via integer_pow), so stablehlo.power on integers is not reachable.
case("power", lambda dt: lax.pow, FLOAT, pow_args, tol=TRANS)
with_denormals("power", lax.pow, FLOAT, TRANS, denormal_binary)
case("integer_pow", lambda dt: lambda x: lax.integer_pow(x, 3), INT + FLOAT, unary_arg)
case("power_complex", lambda dt: lax.pow, CPLX,
     lambda rng, dt: (finite(rng, dt, (40,), 1.0), finite(rng, dt, (40,), 1.0)),
     tol={"complex64": (2e-5, 1e-6), "complex128": (1e-13, 1e-13)})


def shift_args(rng, dt):
    bits = dt.itemsize * 8
    x = np.tile(edges(dt), 6)[:64]
    s = np.concatenate([np.arange(-2, bits + 3), rng.integers(0, bits, 64)])[:len(x)]
    return x, s.astype(dt)


for nm, f in (("shift_left", lax.shift_left),
              ("shift_right_arithmetic", lax.shift_right_arithmetic),
              ("shift_right_logical", lax.shift_right_logical)):
    case(nm, lambda dt, f=f: f, INT, shift_args)

un("not", lax.bitwise_not, BOOL + INT)
un("abs", lax.abs, SINT + FLOAT)
un("abs_complex", lax.abs, CPLX, tol=TRANS)
un("negate", lax.neg, NUM + CPLX)
un("sign", lax.sign, SINT + FLOAT + CPLX, tol={"cplx": TRANS["complex64"]})
un("floor", lax.floor, FLOAT)
un("ceil", lax.ceil, FLOAT)
un("round_away", lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), FLOAT)
un("round_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), FLOAT)
un("sqrt", lax.sqrt, FLOAT)  # correctly rounded
un("sqrt_complex", lax.sqrt, CPLX, tol=TRANS)
# XLA:CPU's float16 expm1 is up to 2 ulp from the correctly rounded result
# (expm1(0.1729) = 0.18869: it returns 0.1885, the correctly rounded value is
# 0.1887), so expm1 allows 2 ulp in the 16-bit types.
un("expm1", lax.expm1, FLOAT, tol=dict(TRANS, float16=(2e-3, 1e-7), bfloat16=(1.6e-2, 1e-7)))
for nm, f in (("rsqrt", lax.rsqrt), ("cbrt", lax.cbrt), ("exp", lax.exp),
              ("log", lax.log), ("log1p", lax.log1p),
              ("logistic", lax.logistic), ("sin", lax.sin), ("cos", lax.cos),
              ("tan", lax.tan), ("tanh", lax.tanh)):
    un(nm, f, FLOAT, tol=TRANS)
for nm, f in (("exp_complex", lax.exp), ("log_complex", lax.log),
              ("sin_complex", lax.sin), ("tanh_complex", lax.tanh)):
    case(nm, lambda dt, f=f: f, CPLX, lambda rng, dt: (finite(rng, dt, (48,), 2.0),),
         tol=TRANS)
un("is_finite", lax.is_finite, FLOAT)
un("popcnt", lax.population_count, INT)
un("count_leading_zeros", lax.clz, INT)
un("real", lax.real, CPLX)
un("imag", lax.imag, CPLX)
bi("complex", lax.complex, [np.float32, np.float64])

# compare: every direction in one program (one output per direction).
CMP = (lax.eq, lax.ne, lax.lt, lax.le, lax.gt, lax.ge)
case("compare", lambda dt: lambda x, y: tuple(f(x, y) for f in CMP),
     BOOL + NUM, binary_args)
with_denormals("compare", lambda x, y: tuple(f(x, y) for f in CMP), FLOAT, "exact",
               denormal_binary)
case("compare_eq_ne_complex", lambda dt: lambda x, y: (lax.eq(x, y), lax.ne(x, y)),
     CPLX, binary_args)


def select_args(rng, dt):
    x, y = binary_args(rng, dt)
    return rng.random(x.shape) < 0.5, x, y


case("select", lambda dt: lax.select, ALL, select_args)
case("select_scalar_pred", lambda dt: lambda p, x, y: lax.select(p, x, y),
     [np.float32, np.int8],
     lambda rng, dt: (np.array(True), finite(rng, dt, (3, 0)), finite(rng, dt, (3, 0))))


def clamp_args(rng, dt):
    x = unary_arg(rng, dt)[0]
    e = edges(dt)
    lo, hi = (e[1], e[-2]) if is_int(dt) else (np.array(-2.5, dt), np.array(3.5, dt))
    return np.minimum(lo, hi), x, np.maximum(lo, hi)


case("clamp", lambda dt: lax.clamp, NUM, clamp_args)
with_denormals("clamp", lambda x: lax.clamp(lax.convert_element_type(-1, x.dtype), x,
                                            lax.convert_element_type(1, x.dtype)),
               FLOAT, "exact", denormal_unary)
case("clamp_array_bounds", lambda dt: lax.clamp, [np.float32, np.int32],
     lambda rng, dt: (finite(rng, dt, (5, 4)) // 2 - 1, finite(rng, dt, (5, 4)),
                      finite(rng, dt, (5, 4)) // 2 + 1))

# Rank 0 and zero-size element-wise programs.
case("add_rank0", lambda dt: lax.add, [np.float32, np.int8, np.complex64],
     lambda rng, dt: (finite(rng, dt, ()), finite(rng, dt, ())))
case("exp_zero_size", lambda dt: lax.exp, [np.float32, np.float16],
     lambda rng, dt: (finite(rng, dt, (0, 3)),))
case("add_broadcast_chain_2d", lambda dt: lambda x, y: lax.mul(lax.add(x, y), y),
     [np.float32, np.int32], lambda rng, dt: (finite(rng, dt, (7, 9)), finite(rng, dt, (7, 9))),
     tol={"float32": (0, 0)})

# --- conversions ------------------------------------------------------------

CONV_TARGETS = [np.dtype(d) for d in ALL]


def convert_fn(src):
    def f(x):
        return tuple(lax.convert_element_type(x, t) for t in CONV_TARGETS
                     if not (is_cplx(src) and not is_cplx(t)))
    return f


def convert_args(rng, dt):
    x = unary_arg(rng, dt)[0]
    if is_float(dt) or is_cplx(dt):  # values near every integer type's limits
        extra = np.array([127.5, 128.0, -128.5, -129.0, 255.9, 256.0, 32767.0,
                          65535.0, 65536.0, 2147483647.0, 2147483648.0,
                          -2147483649.0, 4294967296.0, 9.3e18, -9.3e18, 1.9e19,
                          -0.9, 0.9], np.float64)
        with np.errstate(over="ignore"):
            x = np.concatenate([x, extra.astype(dt)])
    return (x,)


# Complex sources only convert to complex (jax refuses complex -> real
# without an explicit real()). All under x64 so int64/f64 targets exist.
case("convert", convert_fn, ALL, convert_args, x64=True)

BITCASTS = [  # (src, dst): same width, then width-changing
    (np.float32, np.int32), (np.int32, np.float32), (np.float32, np.uint32),
    (np.float16, np.int16), (bf16, np.uint16), (np.uint16, np.float16),
    (np.float64, np.int64), (np.uint64, np.float64), (np.int8, np.uint8),
    (np.float32, np.uint8), (np.float64, np.float32), (np.float64, np.uint16),
    (np.int16, np.int8), (np.uint8, np.float32), (np.float32, np.float64),
    (np.int8, np.int32), (np.float16, np.float32)]


def bitcast_args(src, dst):
    src, dst = np.dtype(src), np.dtype(dst)
    k = dst.itemsize // src.itemsize

    def gen(rng, dt):
        x = unary_arg(rng, src)[0]
        n = len(x) // max(k, 1) * max(k, 1)
        x = x[:n]
        return (x.reshape(-1, k) if k > 1 else x,)
    return gen


for s, d in BITCASTS:
    s, d = np.dtype(s), np.dtype(d)
    case(f"bitcast_{s.name}_to_{d.name}",
         lambda dt, d=d: lambda x: lax.bitcast_convert_type(x, d), [s], bitcast_args(s, d),
         x64=needs_x64(s) or needs_x64(d))

case("reduce_precision_e5m10", lambda dt: lambda x: lax.reduce_precision(x, 5, 10),
     [np.float32, np.float64], unary_arg)
case("reduce_precision_e8m7", lambda dt: lambda x: lax.reduce_precision(x, 8, 7),
     [np.float32, np.float64], unary_arg)
case("reduce_precision_e4m3", lambda dt: lambda x: lax.reduce_precision(x, 4, 3),
     [np.float16, np.float32], unary_arg)

# --- linear algebra ---------------------------------------------------------
DOT_T = [np.float16, bf16, np.float32, np.float64, np.int8, np.int32, np.int64,
         np.uint8, np.uint32, np.complex64, np.complex128]


def dot(dn, pref=None):
    return lambda dt: lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=pref)


def dot_args(sa, sb, gen=small_ints):
    return lambda rng, dt: (gen(rng, dt, sa), gen(rng, dt, sb))


# Small-integer inputs: every partial sum is exact, so results are exact in
# any accumulation order (bf16/f16 sums stay below 256/2048).
case("dot_matmul", dot((((1,), (0,)), ((), ()))), DOT_T, dot_args((5, 7), (7, 3)),
     tol={"float": (0, 0), "cplx": (0, 0)})
case("dot_vector", dot((((0,), (0,)), ((), ()))), DOT_T, dot_args((9,), (9,)),
     tol={"float": (0, 0), "cplx": (0, 0)})
case("dot_batch_transposed", dot((((1,), (2,)), ((0,), (0,)))), DOT_T,
     dot_args((2, 4, 3), (2, 5, 4)), tol={"float": (0, 0), "cplx": (0, 0)})
case("dot_two_contracting", dot((((0, 2), (1, 0)), ((), ()))),
     [np.float32, np.int32, np.complex64], dot_args((3, 2, 4), (4, 3, 5)),
     tol={"float": (0, 0), "cplx": (0, 0)})
case("dot_empty_contraction", dot((((1,), (0,)), ((), ()))),
     [np.float32, np.int32], dot_args((3, 0), (0, 4)))
case("dot_random_floats", dot((((1,), (0,)), ((), ()))),
     [np.float16, bf16, np.float32, np.float64, np.complex64],
     lambda rng, dt: (finite(rng, dt, (6, 33), 1.0), finite(rng, dt, (33, 5), 1.0)),
     tol=ACCUM)
case("dot_int8_to_int32", dot((((1,), (0,)), ((), ())), np.int32), [np.int8],
     lambda rng, dt: (rand(rng, dt, 4 * 20).reshape(4, 20), rand(rng, dt, 20 * 3).reshape(20, 3)))
case("dot_bf16_to_f32", dot((((1,), (0,)), ((), ())), np.float32), [bf16],
     lambda rng, dt: (finite(rng, dt, (4, 16), 1.0), finite(rng, dt, (16, 3), 1.0)),
     tol={"bfloat16": (1e-5, 1e-5)})

# --- convolution ------------------------------------------------------------
CONV_T = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32,
          np.float16, bf16, np.float32, np.float64, np.complex64, np.complex128]
CONV_FLOAT = [np.float16, bf16, np.float32, np.float64, np.complex64, np.complex128]
# Small-integer inputs: every partial sum is exact in f32 (XLA:CPU and iron
# both accumulate f16/bf16 in f32 and round once), so results are bit-exact.
CONV_EXACT = {"float": (0, 0), "cplx": (0, 0)}


def conv(strides, padding, **kw):
    return lambda dt: lambda x, w: lax.conv_general_dilated(x, w, strides, padding, **kw)


def conv_case(name, fn, xs, ws, dtypes=CONV_T, gen=small_ints, tol=CONV_EXACT):
    case(name, fn, dtypes, lambda rng, dt: (gen(rng, dt, xs, -4, 4), gen(rng, dt, ws, -4, 4)),
         tol=tol)


conv_case("conv_2d_nchw_same", conv((1, 1), "SAME"), (2, 3, 6, 5), (4, 3, 3, 3))
conv_case("conv_2d_nhwc_strided",
          conv((2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")),
          (2, 7, 6, 3), (3, 3, 3, 4))
conv_case("conv_1d_explicit_pad", conv((2,), ((2, 1),)), (2, 3, 9), (2, 3, 4))
conv_case("conv_3d", conv((1, 2, 1), "SAME"), (1, 2, 5, 4, 6), (3, 2, 2, 3, 2))
conv_case("conv_0d", conv((), "VALID"), (3, 5), (4, 5))
conv_case("conv_negative_padding", conv((1, 2), ((-1, 2), (1, -2))), (2, 2, 6, 7),
          (3, 2, 2, 3))
conv_case("conv_lhs_dilation", conv((1, 1), ((1, 1), (2, 2)), lhs_dilation=(2, 3)),
          (1, 2, 4, 3), (3, 2, 3, 2))
conv_case("conv_rhs_dilation", conv((1, 2), "SAME", rhs_dilation=(2, 3)), (2, 2, 7, 8),
          (2, 2, 3, 2))
conv_case("conv_depthwise",
          conv((1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
               feature_group_count=3), (2, 5, 5, 3), (3, 3, 1, 6))
conv_case("conv_feature_groups",
          conv((2, 1), "SAME", dimension_numbers=("NCHW", "HWIO", "NHWC"),
               feature_group_count=2), (2, 4, 6, 5), (2, 3, 2, 6))
conv_case("conv_batch_groups", conv((1, 1), "VALID", batch_group_count=2),
          (4, 3, 5, 5), (6, 3, 2, 2))
# Every dim in an unusual place: lhs (H, N, W, C), rhs (I, H, O, W), out (W, H, O, N).
conv_case("conv_permuted_layout",
          conv((1, 2), ((1, 0), (0, 1)), rhs_dilation=(1, 2),
               dimension_numbers=lax.ConvDimensionNumbers((1, 3, 0, 2), (2, 0, 1, 3),
                                                          (3, 2, 1, 0))),
          (5, 2, 7, 3), (3, 2, 4, 2))
conv_case("conv_transpose",
          lambda dt: lambda x, w: lax.conv_transpose(
              x, w, (2, 2), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"),
              transpose_kernel=True),
          (2, 4, 4, 3), (4, 3, 3, 3), dtypes=CONV_FLOAT + [np.int32])
# Full-range integers: products and sums wrap around like XLA:CPU's.
case("conv_int_wraparound", conv((1, 1), "SAME"), [np.int8, np.uint8, np.int32],
     lambda rng, dt: (rand(rng, dt, 2 * 3 * 5 * 5).reshape(2, 3, 5, 5),
                      rand(rng, dt, 4 * 3 * 3 * 3).reshape(4, 3, 3, 3)))
case("conv_int8_to_int32", conv((1, 1), "SAME", preferred_element_type=np.int32), [np.int8],
     lambda rng, dt: (rand(rng, dt, 2 * 3 * 5 * 5).reshape(2, 3, 5, 5),
                      rand(rng, dt, 4 * 3 * 3 * 3).reshape(4, 3, 3, 3)))
case("conv_bf16_to_f32", conv((1, 1), "SAME", preferred_element_type=np.float32),
     [bf16, np.float16],
     lambda rng, dt: (finite(rng, dt, (2, 3, 6, 6), 1.0), finite(rng, dt, (5, 3, 3, 3), 1.0)),
     tol={"bfloat16": (1e-5, 1e-5), "float16": (1e-5, 1e-5)})
case("conv_random_floats", conv((1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
     CONV_FLOAT,
     lambda rng, dt: (finite(rng, dt, (2, 9, 8, 6), 1.0), finite(rng, dt, (3, 3, 6, 5), 1.0)),
     tol=ACCUM)

# Large enough (>= 2^24 multiply-adds, >= 8 output features per group) for
# the CUDA device's im2col + cuBLASLt path (cuda_conv.c); small integers keep
# every sum exact (also at TF32), so results stay bit-exact.
GEMM_T = [np.float16, bf16, np.float32]
conv_case("conv_gemm_2d", conv((1, 1), "SAME"), (4, 16, 32, 32), (64, 16, 3, 3),
          dtypes=GEMM_T)
conv_case("conv_gemm_1d_groups",
          conv((1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"),
               feature_group_count=2), (2, 600, 64), (5, 32, 128), dtypes=GEMM_T)


def conv_grads(strides, padding, **kw):
    """Both cotangents of a convolution: the lhs one is a transposed
    (lhs-dilated, reversed-kernel) convolution, the rhs one a convolution
    with batch and feature roles swapped (batch groups when grouped)."""
    def make(dt):
        def f(x, w, ct):
            _, vjp = jax.vjp(lambda a, b: lax.conv_general_dilated(a, b, strides, padding, **kw),
                             x, w)
            return vjp(ct)
        return f
    return make


def conv_grad_case(name, xs, ws, os_, strides, padding, **kw):
    case(name, conv_grads(strides, padding, **kw), CONV_FLOAT,
         lambda rng, dt: (small_ints(rng, dt, xs, -4, 4), small_ints(rng, dt, ws, -4, 4),
                          small_ints(rng, dt, os_, -4, 4)), tol=CONV_EXACT)


conv_grad_case("conv_grad_strided", (2, 3, 7, 6), (4, 3, 3, 2), (2, 4, 4, 3), (2, 2),
               ((1, 1), (0, 1)))
conv_grad_case("conv_grad_grouped", (2, 7, 6, 4), (3, 3, 2, 6), (2, 4, 3, 6), (2, 2), "SAME",
               dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2)
conv_grad_case("conv_grad_dilated_1d", (3, 2, 11), (2, 2, 3), (3, 2, 7), (1,), "VALID",
               rhs_dilation=(2,))

# --- reductions -------------------------------------------------------------


def red_args(shape, gen=small_ints):
    return lambda rng, dt: (gen(rng, dt, shape),)


def reducer(op, init, dims):
    return lambda dt: lambda x: lax.reduce(x, np.array(init(dt), dt), op, dims)


def lowest(dt):
    if dt in BOOL:
        return False
    return np.iinfo(dt).min if is_int(dt) else -np.inf


def highest(dt):
    if dt in BOOL:
        return True
    return np.iinfo(dt).max if is_int(dt) else np.inf


# Small-integer data: sums are exact in any order, so floats compare exactly.
case("reduce_add", reducer(lax.add, lambda dt: 0, (1,)), NUM + CPLX, red_args((4, 24)),
     tol={"float": (0, 0), "cplx": (0, 0)})
case("reduce_add_all_dims", reducer(lax.add, lambda dt: 0, (0, 1, 2)),
     [np.float32, np.int32, np.int64], red_args((3, 4, 5)), tol={"float": (0, 0)})
case("reduce_add_random_f", reducer(lax.add, lambda dt: 0, (0,)),
     [np.float16, bf16, np.float32, np.float64],
     lambda rng, dt: (finite(rng, dt, (200, 3)),), tol=ACCUM)
case("reduce_mul", reducer(lax.mul, lambda dt: 1, (0,)), NUM,
     red_args((5, 6), lambda rng, dt, s: small_ints(rng, dt, s, -3, 4)),
     tol={"float": (0, 0)})
case("reduce_max", reducer(lax.max, lowest, (1,)), BOOL + NUM,
     lambda rng, dt: (unary_arg(rng, dt, 66 - len(edges(dt)) % 6)[0][:60].reshape(6, 10),))
case("reduce_min", reducer(lax.min, highest, (0,)), BOOL + NUM,
     lambda rng, dt: (unary_arg(rng, dt, 66 - len(edges(dt)) % 6)[0][:60].reshape(6, 10),))
case("reduce_and", reducer(lax.bitwise_and, lambda dt: True if dt in BOOL else np.iinfo(dt).max, (1,)),
     BOOL + [np.int32, np.uint8], red_args((4, 5)))
case("reduce_or", reducer(lax.bitwise_or, lambda dt: False if dt in BOOL else 0, (1,)),
     BOOL + [np.int32, np.uint8], red_args((4, 5)))
case("reduce_xor_generic", reducer(lax.bitwise_xor, lambda dt: 0, (0,)),
     [np.int32, np.uint16, np.int64], red_args((7, 3)))
case("reduce_zero_size", reducer(lax.add, lambda dt: 0, (1,)), [np.float32, np.int32],
     red_args((3, 0)))
case("reduce_no_dims", reducer(lax.add, lambda dt: 0, ()), [np.float32], red_args((3, 2)))


def maxabs(a, b):  # not a pattern any backend special-cases
    return lax.select(lax.gt(lax.abs(a), lax.abs(b)), a, b)


case("reduce_custom_body", reducer(maxabs, lambda dt: 0, (1,)),
     [np.float32, np.float64, np.int32, bf16],
     lambda rng, dt: (rng.permutation(np.arange(1, 61) * (rng.integers(0, 2, 60) * 2 - 1))
                      .reshape(3, 20).astype(dt),))


def argmax_fn(dt):
    def body(a, b):
        (av, ai), (bv, bi_) = a, b
        pick_a = lax.bitwise_or(lax.gt(av, bv),
                                lax.bitwise_and(lax.eq(av, bv), lax.lt(ai, bi_)))
        return lax.select(pick_a, av, bv), lax.select(pick_a, ai, bi_)

    def f(x):
        idx = lax.broadcasted_iota(np.int32, x.shape, 1)
        return lax.reduce((x, idx), (np.array(lowest(dt), dt), np.int32(0)), body, (1,))
    return f


case("reduce_variadic_argmax", argmax_fn, [np.float32, np.int8, np.uint32, bf16],
     red_args((5, 9)))
case("argmax_jnp", lambda dt: lambda x: (jnp.argmax(x, axis=0), jnp.argmin(x, axis=1)),
     [np.float32, np.float64, np.int16, np.float16],
     lambda rng, dt: (unary_arg(rng, dt, 90)[0][:72].reshape(8, 9),))

# --- windows ----------------------------------------------------------------


def rw(op, init, dims, strides, padding, base_dil=None, win_dil=None):
    return lambda dt: lambda x: lax.reduce_window(
        x, np.array(init(dt), dt), op, dims, strides, padding, base_dil, win_dil)


case("reduce_window_max_pool", rw(lax.max, lowest, (2, 2), (2, 2), "VALID"),
     [np.float32, np.float16, np.int32, np.uint8, np.float64],
     lambda rng, dt: (unary_arg(rng, dt, 80)[0][:64].reshape(8, 8),))
case("reduce_window_sum_padded", rw(lax.add, lambda dt: 0, (3, 2), (1, 2),
                                    ((1, 2), (0, 1))),
     [np.float32, np.int32, bf16, np.float64], red_args((6, 7)), tol={"float": (0, 0)})
case("reduce_window_dilated", rw(lax.add, lambda dt: 0, (2, 2), (1, 1), "VALID",
                                 (2, 1), (1, 2)),
     [np.float32, np.int16], red_args((4, 6)), tol={"float": (0, 0)})
case("reduce_window_custom", rw(maxabs, lambda dt: 0, (1, 3), (1, 1), "SAME"),
     [np.float32], lambda rng, dt: (rng.permutation(np.arange(1, 25) *
                                    (rng.integers(0, 2, 24) * 2 - 1)).reshape(4, 6).astype(dt),))
# README: cumulative sums are bit-exact with XLA:CPU's scan, so random
# floats compare exactly.
case("cumsum", lambda dt: lambda x: lax.cumsum(x, axis=1),
     [np.float32, np.int32, np.float16, np.float64, np.uint8],
     lambda rng, dt: (finite(rng, dt, (3, 70)),), tol={"float": (0, 0)})
case("cumsum_reverse", lambda dt: lambda x: lax.cumsum(x, axis=0, reverse=True),
     [np.float32, np.int64], lambda rng, dt: (finite(rng, dt, (33, 2)),), tol={"float": (0, 0)})
case("cumprod", lambda dt: lambda x: lax.cumprod(x, axis=0), [np.float32, np.int32],
     red_args((6, 4), lambda rng, dt, s: small_ints(rng, dt, s, -3, 4)), tol={"float": (0, 0)})
case("cummax", lambda dt: lambda x: lax.cummax(x, axis=0), [np.float32, np.int8, bf16],
     lambda rng, dt: (unary_arg(rng, dt, 60)[0][:60].reshape(20, 3),))
# Ties of +0 and -0 in either order (max keeps +0, min -0), NaN wins.
case("cummax_cummin_signed_zeros",
     lambda dt: lambda x: (lax.cummax(x, axis=0), lax.cummin(-x, axis=0),
                           lax.cummax(x, axis=0, reverse=True),
                           lax.reduce_window(x, np.array(-np.inf, dt), lax.max, (2,), (1,),
                                             "VALID")),
     [np.float32, np.float64, bf16],
     lambda rng, dt: (np.array([-1, 0.0, -0.0, 0.0, -0.0, -0.0, -2, 0.0, 1, -0.0, np.nan, 2],
                               np.float64).astype(dt),))
case("cummin", lambda dt: lambda x: lax.cummin(x, axis=1), [np.float32, np.uint16],
     lambda rng, dt: (unary_arg(rng, dt, 60)[0][:60].reshape(3, 20),))


def pool_grad(dt):
    def f(x, g):
        pool = lambda v: lax.reduce_window(v, np.array(-np.inf, dt), lax.max,
                                           (2, 2), (2, 2), "VALID")
        return jax.vjp(pool, x)[1](g)[0]
    return f


# Distinct values in each window: the selected position is unambiguous.
case("select_and_scatter_maxpool_grad", pool_grad, [np.float32, np.float64, bf16],
     lambda rng, dt: (rng.permutation(64).reshape(8, 8).astype(dt),
                      small_ints(rng, dt, (4, 4))))

# --- data movement ----------------------------------------------------------


def mv(name, f, shape=(4, 6), dtypes=MOVE):
    case(name, lambda dt: f, dtypes,
         lambda rng, dt: (rand(rng, dt, int(np.prod(shape))).reshape(shape),))


case("iota", lambda dt: lambda: (lax.iota(dt, 7), lax.broadcasted_iota(dt, (3, 4), 1)),
     [np.int8, np.uint8, np.int32, np.int64, np.uint32, np.float16, bf16, np.float32,
      np.float64], lambda rng, dt: ())
mv("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (3, 4, 2, 6), (1, 3)))
mv("broadcast_scalar", lambda x: lax.broadcast_in_dim(x, (2, 3), ()), shape=())
mv("reshape", lambda x: lax.reshape(x, (2, 3, 4)))
mv("transpose", lambda x: lax.transpose(x, (1, 0)))
mv("transpose_3d", lambda x: lax.transpose(x, (2, 0, 1)), shape=(3, 20, 17))
mv("slice_strided", lambda x: lax.slice(x, (1, 0), (4, 6), (2, 3)))
mv("concatenate", lambda x: lax.concatenate([x, x[:, :2], x[:, :0]], 1))
mv("pad_negative_interior",
   lambda x: lax.pad(x, lax.convert_element_type(1, x.dtype), ((1, -1, 1), (-2, 2, 2))))
mv("reverse", lambda x: lax.rev(x, (0, 1)))
mv("zero_size_slice", lambda x: lax.slice(x, (1, 2), (1, 6)))
case("dynamic_slice_clamped", lambda dt: lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)),
     MOVE, lambda rng, dt: (rand(rng, dt, 24).reshape(4, 6), np.int32(3), np.int32(-5)))
case("dynamic_update_slice_clamped",
     lambda dt: lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
     MOVE, lambda rng, dt: (rand(rng, dt, 24).reshape(4, 6), rand(rng, dt, 6).reshape(2, 3),
                            np.int32(7), np.int32(1)))

# --- gather / scatter -------------------------------------------------------
GS = [np.float32, np.int32, bf16, np.uint8, np.float64, np.complex64]


def gs_args(rng, dt):
    x = rand(rng, dt, 40).reshape(8, 5)
    idx = np.array([3, 0, 7, 3, -1, 9, -12, 2], np.int32)  # repeats, negative, OOB
    return x, idx


case("gather_index", lambda dt: lambda x, i: x[i], GS, gs_args)
case("gather_take_clip", lambda dt: lambda x, i: jnp.take(x, i, axis=1, mode="clip"),
     GS, gs_args)
case("gather_take_fill", lambda dt: lambda x, i: jnp.take(x, i, axis=0, mode="fill"),
     [np.float32, np.int32], gs_args)
case("gather_take_along_axis",
     lambda dt: lambda x, i: jnp.take_along_axis(x, (i[:, None] % 5 + jnp.zeros((8, 3), np.int32)) % 5, axis=1),
     GS, gs_args)
case("gather_2d_points", lambda dt: lambda x, i: x[i, i[::-1] % 5], GS, gs_args)
case("scatter_set_unique", lambda dt: lambda x, i: x.at[jnp.array([1, 6, 30, 4])].set(x[0]),
     GS, gs_args)  # index 30 is out of bounds: its update is dropped


def scat_args(rng, dt):
    x = small_ints(rng, dt, (8, 5))
    idx = np.array([3, 0, 7, 3, 3, 9, -12, 2], np.int32)
    return x, idx, small_ints(rng, dt, (8, 5))


for nm, meth in (("add", "add"), ("mul", "multiply"), ("min", "min"), ("max", "max")):
    dts = [d for d in GS + [np.int64] if not (is_cplx(np.dtype(d)) and meth in ("min", "max"))]
    case(f"scatter_{nm}_duplicates",
         lambda dt, meth=meth: lambda x, i, u: getattr(x.at[i], meth)(u, mode="drop"),
         dts, scat_args)


def scatter_custom(dt):
    def f(x, i, u):
        dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))
        return lax.scatter_apply(x, i[:, None], lambda v: v * 2 + 1, dn,
                                 update_shape=(8, 5), mode="drop")
    return f


case("scatter_apply_custom_body", scatter_custom, [np.int32, np.float32], scat_args)
case("segment_sum", lambda dt: lambda x, i: jax.ops.segment_sum(x, i % 4, 4),
     [np.float32, np.int32], lambda rng, dt: (small_ints(rng, dt, (8, 5)),
                                              rng.integers(0, 4, 8).astype(np.int32)))

# --- sort -------------------------------------------------------------------


def sort_args(rng, dt):
    return (unary_arg(rng, dt, 40)[0],)


case("sort", lambda dt: lambda x: lax.sort(x), BOOL + NUM, sort_args)
with_denormals("sort", lax.sort, FLOAT, "exact", denormal_unary)
with_denormals("convert_to_int32", lambda x: (lax.convert_element_type(x, np.int32),
                                              lax.convert_element_type(x, np.float16)),
               FLOAT, "exact", denormal_unary)
case("sort_2d_axis0", lambda dt: lambda x: lax.sort(x, dimension=0),
     [np.float32, np.int32, np.float16], lambda rng, dt: (finite(rng, dt, (30, 3)),))
case("sort_key_value_stable",
     lambda dt: lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
     [np.float32, np.int8, np.uint64, bf16, np.float64],
     lambda rng, dt: (small_ints(rng, dt, (50,), -4, 4), np.arange(50, dtype=np.int32)))
case("sort_two_keys", lambda dt: lambda a, b, v: lax.sort((a, b, v), num_keys=2),
     [np.float32, np.int32], lambda rng, dt: (small_ints(rng, dt, (40,), -3, 3),
                                             small_ints(rng, dt, (40,), -3, 3),
                                             np.arange(40, dtype=np.int32)))
case("argsort", lambda dt: lambda x: jnp.argsort(x, stable=True),
     [np.float32, np.int16, np.float64], sort_args)
case("sort_descending", lambda dt: lambda x: jnp.sort(x, descending=True),
     [np.float32, np.int32], sort_args)

# --- random bits ------------------------------------------------------------
KEY = lambda rng, dt: (rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32),)
for alg_name, alg in (("threefry", lax.RandomAlgorithm.RNG_THREE_FRY),
                      ("philox", lax.RandomAlgorithm.RNG_PHILOX)):
    case(f"rng_bit_generator_{alg_name}",
         lambda dt, alg=alg: lambda k: lax.rng_bit_generator(k, (5, 7), dt, alg),
         UINT, KEY)
case("random_uniform_normal",
     lambda dt: lambda k: (jax.random.uniform(jax.random.wrap_key_data(k), (64,), dt),
                           jax.random.normal(jax.random.wrap_key_data(k), (64,), dt)),
     [np.float32, np.float16], lambda rng, dt: (rng.integers(0, 2**32, 2, dtype=np.uint64)
                                                 .astype(np.uint32),), tol=TRANS)
case("random_bits_rbg",
     lambda dt: lambda k: jax.random.bits(jax.random.wrap_key_data(k, impl="rbg"), (33,), dt),
     [np.uint32, np.uint8], lambda rng, dt: (rng.integers(0, 2**32, 4, dtype=np.uint64)
                                             .astype(np.uint32),))

# --- control flow and structure ---------------------------------------------
case("while_fori", lambda dt: lambda x: lax.fori_loop(0, 5, lambda i, v: v * 2 + 1, x),
     [np.float32, np.int32, np.uint8], red_args((3,)))
case("while_data_dependent",
     lambda dt: lambda x: lax.while_loop(lambda c: (c[0] < 100) & (c[1] < 20),
                                         lambda c: (c[0] + c[0] // 3 + 1, c[1] + 1),
                                         (x, np.int32(0))),
     [np.int32, np.int64], lambda rng, dt: (np.array(3, dt),))
case("if_cond", lambda dt: lambda p, x: lax.cond(p, lambda v: v + 1, lambda v: v * 3, x),
     [np.float32, np.int16], lambda rng, dt: (np.array(False), small_ints(rng, dt, (4,))))
case("case_switch", lambda dt: lambda i, x: lax.switch(i, [lambda v: v - 1, lambda v: -v,
                                                             lambda v: v * v], x),
     [np.float32, np.int32], lambda rng, dt: (np.int32(5), small_ints(rng, dt, (4,))))
case("scan_carry", lambda dt: lambda x: lax.scan(lambda c, v: (c + v, c * v), x[0], x),
     [np.float32, np.int32], red_args((6, 3)), tol={"float": (0, 0)})
case("call_and_barrier",
     lambda dt: lambda x: lax.optimization_barrier(jax.jit(lambda v: v + v)(x) * x),
     [np.float32, np.int32], red_args((5,)))

# --- fft ----------------------------------------------------------------------
# lax.fft lowers to stablehlo.fft directly (jnp.fft wraps it in a private
# function). XLA:CPU computes with DUCC in the operand's precision; an FFT's
# rounding error grows like log N relative to the largest output, so the
# tolerance is a few ulps * log2 N of the largest |want| (atol_by_max). IRFFT
# inputs are random, i.e. not Hermitian: the imaginary parts of the DC and
# Nyquist entries must be ignored as XLA does.

def fft_tol(lengths):
    lg = max(1.0, float(np.log2(max(2, int(np.prod(lengths))))))
    e32, e64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
    return {"complex64": (0, 4 * e32 * lg), "float32": (0, 4 * e32 * lg),
            "complex128": (0, 4 * e64 * lg), "float64": (0, 4 * e64 * lg)}


def fft_case(name, kind, lengths, batch=(), dtypes=None):
    lengths = tuple(lengths)
    t = {"fft": lax.FftType.FFT, "ifft": lax.FftType.IFFT,
         "rfft": lax.FftType.RFFT, "irfft": lax.FftType.IRFFT}[kind]
    shape = tuple(batch) + lengths
    if kind == "irfft":
        shape = shape[:-1] + (lengths[-1] // 2 + 1,)
    if dtypes is None:
        dtypes = [np.float32, np.float64] if kind == "rfft" else CPLX

    def args(rng, dt):
        return (finite(rng, dt, shape, 1.0),)

    case(name, lambda dt: (lambda x: lax.fft(x, t, lengths)), dtypes, args,
         tol=fft_tol(lengths), atol_by_max=True)


for _kind in ("fft", "ifft", "rfft", "irfft"):
    for _n in (1, 2, 7, 8, 12, 17, 64, 97, 1000):
        fft_case(f"{_kind}_n{_n}", _kind, (_n,), batch=(3,))
    fft_case(f"{_kind}_2d", _kind, (12, 17), batch=(2,))
    fft_case(f"{_kind}_3d", _kind, (4, 7, 8), batch=(2,))
    fft_case(f"{_kind}_3d_odd", _kind, (5, 3, 9))
    fft_case(f"{_kind}_batched", _kind, (64,), batch=(2, 3, 5))
    fft_case(f"{_kind}_n1024", _kind, (1024,),
             dtypes=[np.float64] if _kind == "rfft" else [np.complex128])
fft_case("fft_2d_batched_c128", "fft", (8, 6), batch=(4,), dtypes=[np.complex128])
fft_case("irfft_2d_even_c64", "irfft", (6, 10), batch=(3,), dtypes=[np.complex64])
fft_case("fft_empty_batch", "fft", (8,), batch=(0,), dtypes=[np.complex64])


# --- complex specials --------------------------------------------------------
# tan/tanh of complex infinities and NaNs: XLA:CPU differs from C99 (NaN +
# i NaN for tanh(+-0 + i inf), tan(inf + 0i), ...).
def cplx_specials(rng, dt):
    part = np.float32 if dt == np.complex64 else np.float64
    v = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 20.0, -400.0, 1e30, np.inf,
                  -np.inf, np.nan], part)
    out = np.empty((len(v), len(v)), dt)
    out.real, out.imag = v[:, None], v[None, :]
    return (out.ravel(),)


case("tan_tanh_complex_specials", lambda dt: lambda x: (lax.tan(x), lax.tanh(x)),
     CPLX, cplx_specials, tol=TRANS)

# --- narrow dtypes: s4/u4, f8, f4 ------------------------------------------
# XLA:CPU computes them in a wider dtype (s4 -> s8, u4 -> u8, f8/f4 -> f16)
# and converts the result back per op; shifts right and clz of s4/u4 run in
# 4 bits. Every value (every pair for binary ops) is tested, bit-exactly
# (NaN payloads and NaN signs aside: XLA:CPU's are not consistent). One
# program per dtype computes every op (one output each). The binary cases
# run every narrow dtype; the others rotate through them (XLA:CPU takes
# seconds to compile each of these programs).
INT4 = [np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)]
F8 = [np.dtype(t) for t in (
    ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3b11fnuz,
    ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3,
    ml_dtypes.float8_e3m4, ml_dtypes.float4_e2m1fn)]


def narrow_all(dt):
    """Every value of a narrow dtype (one element per byte, low bits)."""
    if dt in INT4:
        lo = -8 if dt == INT4[0] else 0
        return np.arange(lo, lo + 16).astype(dt)
    n = 16 if dt == np.dtype(ml_dtypes.float4_e2m1fn) else 256
    return np.arange(n, dtype=np.uint8).view(dt)


def narrow_pairs(rng, dt):
    v = narrow_all(dt)
    return np.repeat(v, len(v)), np.tile(v, len(v))


NARROW_BIN = (lax.add, lax.sub, lax.mul, lax.div, lax.rem, lax.max, lax.min)
case("int4_binary",
     lambda dt: lambda x, y: tuple(f(x, y) for f in NARROW_BIN + CMP + (
         lax.shift_left, lax.shift_right_arithmetic, lax.shift_right_logical,
         lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor)),
     INT4, narrow_pairs, every_dtype=True)
case("int4_unary",
     lambda dt: lambda x: (lax.neg(x), lax.bitwise_not(x), lax.sign(x),
                           lax.population_count(x), lax.clz(x),
                           lax.integer_pow(x, 3), lax.iota(dt, 40)),
     INT4, lambda rng, dt: (narrow_all(dt),))
case("int4_clamp_select",
     lambda dt: lambda x, lo, hi: (lax.clamp(lo, x, hi),
                                   lax.select(x > lo, x, lax.broadcast(hi, x.shape))),
     INT4, lambda rng, dt: (narrow_all(dt), narrow_all(dt)[3], narrow_all(dt)[12]))
case("int4_bitcast",
     lambda dt: lambda x, w: (lax.bitcast_convert_type(x.reshape(-1, 2), np.int8),
                              lax.bitcast_convert_type(x.reshape(-1, 4), np.float16),
                              lax.bitcast_convert_type(x, INT4[1] if dt == INT4[0] else INT4[0]),
                              lax.bitcast_convert_type(w, dt)),
     INT4, lambda rng, dt: (narrow_all(dt),
                            np.array([1.0, -2.5, np.inf, 3e-41], np.float32)))
case("int4_constants",
     lambda dt: lambda x: (
         jnp.full((5,), -1 if dt == INT4[0] else 15, dt),
         jnp.array([-8, -1, 7, -3] if dt == INT4[0] else [8, 15, 7, 13], dt),
         lax.dynamic_update_slice(x, jnp.full((3,), -2 if dt == INT4[0] else 14,
                                             dt), (2,)),
         lax.select(x == x[0], x, lax.broadcast(x[3] | x[0], x.shape))),
     INT4, lambda rng, dt: (narrow_all(dt),), every_dtype=True)
case("f8_binary",
     lambda dt: lambda x, y: tuple(f(x, y) for f in NARROW_BIN + CMP + (
         lax.atan2, lax.pow)),
     F8, narrow_pairs, every_dtype=True)
case("f8_unary",
     lambda dt: lambda x: tuple(f(x) for f in (
         lax.neg, lax.abs, lax.sign, lax.floor, lax.ceil, lax.round,
         lax.is_finite, lax.exp, lax.log, lax.log1p, lax.sqrt, lax.rsqrt,
         lax.cbrt, lax.sin, lax.cos, lax.tan, lax.tanh, lax.logistic)),
     F8, lambda rng, dt: (narrow_all(dt),))
# expm1 runs through XLA:CPU's f16 expm1, which our f16 loop matches only
# within 2 f16 ulp (see "expm1" above): one narrow ulp apart after rounding.
case("f8_expm1", lambda dt: lax.expm1, F8, lambda rng, dt: (narrow_all(dt),),
     tol={d.name: (float(ml_dtypes.finfo(d).eps) * 1.01, 0.0) for d in F8})
case("f8_iota_clamp_select",
     lambda dt: lambda x, lo, hi: (lax.iota(dt, 600), lax.clamp(lo, x, hi),
                                   lax.select(x > lo, x, lax.broadcast(hi, x.shape))),
     F8, lambda rng, dt: (narrow_all(dt), narrow_all(dt)[3], narrow_all(dt)[40 % len(narrow_all(dt))]))


def narrow_ints(rng, dt, shape):
    """Small integer values of a narrow dtype: products and sums are exact
    in f32 whatever the order (ints wrap in their width)."""
    lo, hi = (0, 16) if dt == INT4[1] else (-8, 8) if dt == INT4[0] else (-4, 5)
    return rng.integers(lo, hi, size=shape).astype(dt)


# dot/convolution with narrow results: XLA:CPU computes in f32 (s8/u8) and
# rounds through f16 (wraps).
case("dot_narrow", lambda dt: lambda x, y: lax.dot(x, y), F8 + INT4,
     lambda rng, dt: (narrow_ints(rng, dt, (5, 9)), narrow_ints(rng, dt, (9, 4))))
case("conv_narrow",
     lambda dt: lambda x, w: lax.conv(x, w, (1, 1), "SAME"), F8,
     lambda rng, dt: (narrow_ints(rng, dt, (1, 2, 6, 5)),
                      narrow_ints(rng, dt, (3, 2, 3, 3))))


# f8E8M0FNU computes in f32. Its value 0x00 (2^-127) is an f32 denormal,
# which XLA:CPU's f32 kernels treat differently from op to op (sign, ceil,
# sin, pow, ... of it): left out of the arithmetic cases.
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def e8m0_all(rng, dt):
    return (np.arange(1, 256, dtype=np.uint8).view(E8M0),)


def e8m0_pairs(rng, dt):
    v = e8m0_all(rng, dt)[0]
    return np.repeat(v, len(v)), np.tile(v, len(v))


case("f8e8m0_binary",
     lambda dt: lambda x, y: tuple(f(x, y) for f in NARROW_BIN + CMP + (
         lax.atan2, lax.pow)), [E8M0], e8m0_pairs)
case("f8e8m0_unary",
     lambda dt: lambda x: tuple(f(x) for f in (
         lax.neg, lax.abs, lax.sign, lax.floor, lax.ceil, lax.exp, lax.log,
         lax.sqrt, lax.rsqrt, lax.sin, lax.tanh, lax.expm1, lax.is_finite)),
     [E8M0], e8m0_all)


def e8m0_near_one(rng, shape):
    """f8E8M0FNU values 2^-7 .. 2^8 (sums exact in f32), some 2^-127 (read
    as 0: the f32 dot flushes it)."""
    b = rng.integers(120, 136, size=shape).astype(np.uint8)
    b[rng.random(shape) < 0.1] = 0
    return b.view(E8M0)


# dot/convolution: XLA:CPU converts f8E8M0FNU operands to f32 by their bits
# and the f32 result back by its bits (no f16 step).
# (A narrow result with an operand of another dtype is refused: XLA:CPU
# converts that operand to the result dtype first.)
case("dot_e8m0",
     lambda dt: lambda x, y, z: (lax.dot(x, y), lax.dot(x, y, preferred_element_type=np.float32),
                                 lax.dot(x, z, preferred_element_type=np.float32)),
     [E8M0], lambda rng, dt: (e8m0_near_one(rng, (5, 9)), e8m0_near_one(rng, (9, 4)),
                              narrow_ints(rng, np.dtype(ml_dtypes.float8_e4m3fn), (9, 4))))
case("conv_e8m0",
     lambda dt: lambda x, w: lax.conv(x, w, (1, 1), "SAME"), [E8M0],
     lambda rng, dt: (e8m0_near_one(rng, (1, 2, 6, 5)), e8m0_near_one(rng, (3, 2, 3, 3))))


def e8m0_convert_args(rng, dt):
    f = np.concatenate([
        np.array([0, -0.0, 1, 1.5, 1.4999, 0.75, 0.7, -1, 3e38, 2.0 ** 127 * 1.5,
                  np.inf, -np.inf, np.nan, 2.0 ** -127, 2.0 ** -127 * 1.5,
                  1e-40, 2.0 ** -128], np.float32),
        (rng.standard_normal(200) * 10.0 ** rng.integers(-40, 38, 200)).astype(np.float32)])
    d = np.concatenate([np.array([1.5 - 2.0 ** -40, 1e-300, 2.0 ** -127 * 0.75,
                                  2.0 ** -127, 2.0 ** -127 * 1.002, 1e300]),
                        rng.standard_normal(200) * 10.0 ** rng.integers(-45, 40, 200)])
    with np.errstate(over="ignore"):  # f16 of large f32 values is inf
        h = f.astype(np.float16)
    return (np.arange(256, dtype=np.uint8).view(E8M0), f, f.astype(ml_dtypes.bfloat16),
            h, d, rng.integers(-2 ** 31, 2 ** 31, 200, dtype=np.int64).astype(np.int32))


case("f8e8m0_convert",
     lambda dt: lambda e, f, b, h, d, i: (
         e.astype(np.float32), e.astype(np.float64), e.astype(ml_dtypes.bfloat16),
         e.astype(np.float16), e.astype(np.int32), e.astype(np.bool_),
         e.astype(ml_dtypes.float8_e4m3fn), f.astype(E8M0), b.astype(E8M0),
         h.astype(E8M0), d.astype(E8M0), i.astype(E8M0)),
     [E8M0], e8m0_convert_args, x64=True)


# Narrow dtypes as reduce / reduce_window / sort / scatter /
# select_and_scatter values: every body op computes wide and rounds back per
# op (XLA:CPU's normalization; the host's element-wise narrow kernels, the
# CUDA region generator). Short rows (8): XLA:CPU, the host and CUDA fold
# them in order. Every encoding may occur (f8E8M0FNU: but 2^-127, see
# above), small values more often so that sums stay finite for a while.
NARROW_VALUES = INT4 + F8 + [E8M0]


def narrow_rand(rng, dt, shape):
    if dt in INT4:
        lo = -8 if dt == INT4[0] else 0
        return rng.integers(lo, lo + 16, size=shape).astype(dt)
    n = 16 if dt == np.dtype(ml_dtypes.float4_e2m1fn) else 256
    lo = 1 if dt == E8M0 else 0
    x = rng.integers(lo, n, size=shape).astype(np.uint8).view(dt)
    if dt == E8M0:
        return x
    small = (rng.integers(-4, 5, size=shape) / 2.0 ** rng.integers(0, 3, size=shape))
    return np.where(rng.random(shape) < 0.75, small.astype(dt), x)


def narrow_reduce_args(rng, dt):
    return (narrow_rand(rng, dt, (6, 8)), narrow_rand(rng, dt, ())[()],
            narrow_rand(rng, dt, (64, 64)))


def _narrow_reduce_fns(dt):
    def f(x, i, y):
        out = (lax.reduce(x, i, lax.add, (1,)), lax.reduce(x, i, lax.max, (1,)),
               lax.reduce(x, i, lax.min, (0,)),
               lax.reduce(x, i, lambda a, b: a + b * b, (1,)),
               lax.reduce_window(x, i, lax.add, (1, 3), (1, 2), [(0, 0), (2, 1)]),
               lax.reduce_window(x, i, lax.max, (2, 2), (1, 1), "VALID"),
               jnp.argmax(x, axis=1), jnp.argmin(x, axis=0),
               # Order-free bodies over long rows (the devices' parallel
               # shapes): max/min, and 4-bit sums (they wrap exactly). Long
               # rows take identity inits: XLA:CPU folds init into each of
               # its vector accumulators.
               lax.reduce(y, i, lax.max, (0, 1)), lax.reduce(y, i, lax.min, (1,)))
        if dt in INT4:
            out += (lax.reduce(y, np.array(0, dt), lax.add, (0, 1)),
                    lax.reduce(y, np.array(1, dt), lax.mul, (0,)))
        return out
    return f


case("narrow_reduce", _narrow_reduce_fns, NARROW_VALUES, narrow_reduce_args,
     every_dtype=True)


def narrow_sort_args(rng, dt):
    return (narrow_rand(rng, dt, (3, 40)),)


case("narrow_sort",
     lambda dt: lambda x: (lax.sort(x), lax.sort(x, dimension=0),
                           lax.sort((x, lax.broadcasted_iota(np.int32, x.shape, 1)),
                                    num_keys=1, is_stable=True)[1]),
     NARROW_VALUES, narrow_sort_args, every_dtype=True)


def narrow_scatter_args(rng, dt):
    return (narrow_rand(rng, dt, (16,)),
            np.array([3, 7, 3, 15, 0, 7, 3, 20, 9, 3], np.int32),
            narrow_rand(rng, dt, (10,)))


case("narrow_scatter",
     lambda dt: lambda x, i, u: (
         x.at[i].add(u, mode="drop"), x.at[i].max(u, mode="drop"),
         x.at[i].mul(u, mode="drop"), x.at[i].set(u, mode="drop"),
         x.at[i].apply(lambda v: v * v, mode="drop")),
     NARROW_VALUES, narrow_scatter_args, every_dtype=True)


def narrow_sas_args(rng, dt):
    return (narrow_rand(rng, dt, (2, 9)), narrow_rand(rng, dt, (2, 5)))


def _narrow_sas(x, s):
    # The max pool's gradient (jax's own lowering pads with the lowest value).
    from jax._src.lax.windowed_reductions import _select_and_scatter_add
    return _select_and_scatter_add(s, x, lax.ge_p, (1, 3), (1, 2), [(0, 0), (1, 1)])


case("narrow_select_and_scatter", lambda dt: _narrow_sas, NARROW_VALUES,
     narrow_sas_args)


def mixed_fp8_args(shape_l, shape_r):
    def args(rng, dt):
        x = rng.standard_normal(shape_l) * 4
        y = rng.standard_normal(shape_r) * 4
        return (x.astype(ml_dtypes.float8_e4m3fn), y.astype(ml_dtypes.float8_e5m2))
    return args


case("dot_mixed_fp8",
     lambda dt: lambda x, y: (lax.dot(x, y, preferred_element_type=np.float32),
                              lax.dot(y.T, x.T, preferred_element_type=np.float32)),
     [np.float32], mixed_fp8_args((5, 33), (33, 7)), tol=ACCUM)


# --- refused ops ------------------------------------------------------------


@dataclass
class Refused:
    name: str
    op: str                # the op the error must name
    fn: Callable
    args: Callable         # rng -> tuple of np.ndarray


REFUSED = [
]


# Default: every case runs one dtype of each class it accepts (bool, signed,
# unsigned, 16-bit float, f32, f64, complex), rotating through each class's
# members from case to case so that every dtype is still exercised by many
# ops; that keeps the suite to a few hundred programs (XLA:CPU alone needs
# ~0.1 s to compile each reference). CONFORMANCE_ALL_DTYPES=1 runs every
# dtype of every case.
ALL_DTYPES = os.environ.get("CONFORMANCE_ALL_DTYPES", "0") == "1"
# --- large shapes --------------------------------------------------------------
# (Last in the table: appending keeps every earlier case's dtype rotation.)
# Shapes that take the device's other reduce and dot kernels (on CUDA: warp,
# block, column tiles, rows or columns split over many blocks; the
# block-wide ordered argmax); small integers keep every sum exact in any
# order.
case("reduce_add_long_rows", reducer(lax.add, lambda dt: 0, (1,)),
     [np.float32, np.int32], red_args((3, 100_000)), tol={"float": (0, 0)})
case("reduce_add_one_long_row", reducer(lax.add, lambda dt: 0, (0,)),
     [np.float32, np.int64], red_args((1 << 20,)), tol={"float": (0, 0)})
case("reduce_add_tall_columns", reducer(lax.add, lambda dt: 0, (0,)),
     [np.float32, np.int32], red_args((16_384, 40)), tol={"float": (0, 0)})
case("reduce_max_wide_columns", reducer(lax.max, lowest, (0,)),
     [np.float32, np.int16], red_args((300, 97)))
case("argmax_long_rows", lambda dt: lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=1)),
     [np.float32, np.int32], red_args((4, 5000)))
case("dot_random_floats_large", dot((((1,), (0,)), ((), ()))), [np.float32, bf16],
     lambda rng, dt: (finite(rng, dt, (64, 96), 1.0), finite(rng, dt, (96, 48), 1.0)),
     tol=ACCUM)


CLASSES = [BOOL, SINT, UINT, [np.dtype(np.float16), bf16], [np.dtype(np.float32)],
           [np.dtype(np.float64)], CPLX, INT4, F8]


def pick_dtypes(c, k):
    if ALL_DTYPES or c.every_dtype:
        return list(c.dtypes)
    out = []
    for cls in CLASSES:
        members = [d for d in c.dtypes if d in cls]
        if members:
            out.append(members[k % len(members)])
    # Any dtype outside the classes above would be kept as is.
    out += [d for d in c.dtypes if not any(d in cls for cls in CLASSES)]
    return [d for d in c.dtypes if d in out]


def all_params():
    """(case, dtype) pairs in table order."""
    return [(c, dt) for k, c in enumerate(CASES) for dt in pick_dtypes(c, k)]
