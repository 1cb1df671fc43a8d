"""Integer results that wrap (negate, abs, add, sub, mul at the type's
limits) feeding every kind of consumer (divide, remainder, min/max,
compare, shifts, converts, select, reductions), on the iron device (host
or CUDA, as IRON_DEVICE says), bit for bit against a model of two's
complement arithmetic (Python integers, wrapped to the type after every
op).

The class this guards: a narrow integer computed in a wider register must
be truncated to its own width before the next op reads it. The GPU fuzzer
found int16 (-x) / min(-x, x) giving -1 instead of 1 at x = -32768 on the
GPU only (fz_26297024).

The reference is the model, not XLA:CPU: XLA's algebraic simplifier
assumes no overflow in places (jax 0.10.2 on the dev machine: int8
`select(x * x < 0, x, x * x)` returns the wrapped negative product, as if
x * x < 0 were false; `abs(min(-x))` over a row holding -128 gives 127, as
if min(-x) were -max(x)), so it is not consistent with its own wrapping.
"""
import itertools

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax

_DTYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


def _wrap(v, dtype):
    info = np.iinfo(dtype)
    span = 1 << info.bits
    return (v - info.min) % span + info.min


# Producers whose result wraps at the type's limits: (jax, model on ints).
_PRODUCERS = {
    "neg": (lax.neg, lambda w: -w),
    "abs": (lax.abs, abs),
    "add": (lambda x: lax.add(x, x), lambda w: w + w),
    "sub": (lambda x: lax.sub(lax.neg(x), x), lambda w: -w - w),
    "mul": (lambda x: lax.mul(x, x), lambda w: w * w),
    "zero_minus": (lambda x: lax.sub(lax.full_like(x, 0), x), lambda w: -w),
    "one_minus": (lambda x: lax.sub(lax.full_like(x, 1), x), lambda w: 1 - w),
    "minus_one": (lambda x: lax.sub(x, lax.full_like(x, 1)), lambda w: w - 1),
    "times_m1": (lambda x: lax.mul(x, lax.full_like(x, -1)), lambda w: -w),
    "neg_plus1": (lambda x: lax.neg(lax.add(x, lax.full_like(x, 1))),
                  lambda w: -(w + 1)),
}


def _nonzero(v):
    # Keep divisors away from 0 (the point is the wrapped dividend); -1
    # stays, to reach INT_MIN / -1.
    return lax.select(lax.eq(v, lax.full_like(v, 0)), lax.full_like(v, 3), v)


def _tdiv(a, b):  # C's truncating division, on Python ints
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _shr1(p, dtype):
    # Arithmetic shift right by one on the bit pattern: unsigned types
    # shift their top bit in too (as XLA does).
    return _wrap(p, np.dtype(f"int{np.iinfo(dtype).bits}")) >> 1


def _clz(p, dtype):
    bits = np.iinfo(dtype).bits
    return bits - (p % (1 << bits)).bit_length()


# Consumers of the wrapped p (and of x): (jax, model on ints (p, w, dtype)
# -> value in the result type, before wrapping), result type (None: p's
# own).
_CONSUMERS = {
    "div": (lambda p, x: lax.div(p, _nonzero(lax.min(p, x))),
            lambda p, w, dt: _tdiv(p, min(p, w) or 3), None),
    "rem": (lambda p, x: lax.rem(p, _nonzero(lax.max(p, x))),
            lambda p, w, dt: p - (max(p, w) or 3) * _tdiv(p, max(p, w) or 3),
            None),
    "min": (lax.min, lambda p, w, dt: min(p, w), None),
    "max": (lax.max, lambda p, w, dt: max(p, w), None),
    "lt": (lambda p, x: lax.lt(p, x).astype(p.dtype),
           lambda p, w, dt: int(p < w), None),
    "eq_self": (lambda p, x: lax.eq(p, lax.neg(lax.neg(p))).astype(p.dtype),
                lambda p, w, dt: 1, None),
    "shr1": (lambda p, x: lax.shift_right_arithmetic(p, lax.full_like(p, 1)),
             lambda p, w, dt: _shr1(p, dt), None),
    "to_i32": (lambda p, x: lax.convert_element_type(p, jnp.int32),
               lambda p, w, dt: p, np.int32),
    "to_f32": (lambda p, x: lax.convert_element_type(p, jnp.float32),
               lambda p, w, dt: p, np.float32),
    "to_u32": (lambda p, x: lax.convert_element_type(p, jnp.uint32),
               lambda p, w, dt: p, np.uint32),
    "to_i8": (lambda p, x: lax.convert_element_type(p, jnp.int8),
              lambda p, w, dt: p, np.int8),
    "gt": (lambda p, x: lax.gt(p, lax.full_like(p, 0)).astype(p.dtype),
           lambda p, w, dt: int(p > 0), None),
    "clz": (lambda p, x: lax.clz(p), lambda p, w, dt: _clz(p, dt), None),
    "select": (lambda p, x: lax.select(lax.lt(p, lax.full_like(p, 0)), x, p),
               lambda p, w, dt: w if p < 0 else p, None),
}


def _inputs(dtype, n):
    info = np.iinfo(dtype)
    special = [info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2,
               info.max // 2, info.max // 2 + 1]
    if info.min < 0:
        special += [-1, -2, info.min // 2, info.min // 2 - 1]
    rng = np.random.default_rng(np.dtype(dtype).num)
    body = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    body[: len(special) * 4] = np.tile(np.array(special, dtype=dtype), 4)
    rng.shuffle(body)
    return body


def _model(dtype, x, prod, cons, out_type):
    ws = [int(v) for v in x]
    ps = [_wrap(prod(w), dtype) for w in ws]
    rt = out_type or dtype
    vals = [cons(p, w, dtype) for p, w in zip(ps, ws)]
    if np.issubdtype(rt, np.integer):
        vals = [_wrap(v, rt) for v in vals]
    return np.array(vals, dtype=rt), np.array(ps, dtype=dtype)


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_wrapped_values_feed_every_consumer(dtype, iron_device):
    # 1031 elements: a vector body (multiples of 8/4/2) and a scalar tail.
    x = _inputs(dtype, 1031)
    failures = []
    for (pn, (prod, mprod)), (cn, (cons, mcons, rt)) in itertools.product(
            _PRODUCERS.items(), _CONSUMERS.items()):
        if pn == "abs" and np.iinfo(dtype).min == 0:
            continue  # lax.abs takes signed types only
        def f(x, prod=prod, cons=cons):
            p = prod(x)
            return cons(p, x), p

        want = _model(dtype, x, mprod, mcons, rt)
        got = [np.asarray(v) for v in
               jax.jit(f)(jax.device_put(x, iron_device))]
        for w, g in zip(want, got):
            if w.dtype != g.dtype or not np.array_equal(
                    w.view(np.uint8), g.view(np.uint8)):
                bad = np.flatnonzero(w != g)[:4]
                failures.append(f"{pn}->{cn}: x={x[bad]} want {w[bad]} "
                                f"got {g[bad]}")
                break
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reducer", ["min", "max", "sum"])
def test_wrapped_values_reduced(dtype, reducer, iron_device):
    # fz_26298356's shape: a full reduction of a negated window, a row
    # reduction, and abs of a reduction of a strided slice.
    x = _inputs(dtype, 209_280).reshape(320, 327, 2)
    red = {"min": jnp.min, "max": jnp.max,
           "sum": lambda v, axis=None: jnp.sum(v, axis=axis, dtype=v.dtype)
           }[reducer]
    fn = jax.jit(lambda x: (red(lax.neg(x)), red(lax.neg(x), axis=1),
                            lax.abs(red(lax.neg(x[3:, :, :1])))))
    got = [np.asarray(v) for v in fn(jax.device_put(x, iron_device))]
    neg = _wrap(-x.astype(np.int64), dtype)
    mred = {"min": np.min, "max": np.max, "sum": np.sum}[reducer]
    want = [mred(neg), mred(neg, axis=1),
            abs(int(_wrap(mred(neg[3:, :, :1]), dtype)))]
    want = [np.asarray(_wrap(np.asarray(w, dtype=np.int64), dtype)
                       ).astype(dtype) for w in want]
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint32,
                                   np.float32],
                         ids=lambda d: np.dtype(d).name)
def test_negated_reductions_of_ordinary_values(dtype, iron_device):
    # fz_26298356: a min-reduction of a negated int32 window gave
    # |min(x)| on the GPU (ptxas folded the negation into a three-input
    # min and lost it). Ordinary values with one outlier, so that min(-x)
    # and -min(x) differ (special values at the limits hide it: there
    # min(-x) = -min(x) = INT_MIN).
    rng = np.random.default_rng(5)
    lo = 0 if np.dtype(dtype).kind == "u" else -20
    x = rng.integers(lo, 21, (320, 327, 2)).astype(dtype)
    x[17, 200, 1] = 0 if lo == 0 else -15 if dtype == np.int8 else -1500
    # (jax, numpy) per program; numpy's unsigned negation wraps as the
    # device's does, and the float values are small integers (exact).
    b = np.broadcast_to(x[None, :, :, 0], (2, 320, 327))
    progs = {
        "min_neg": (lambda v: jnp.min(-v), lambda v: np.min(-v)),
        "max_neg": (lambda v: jnp.max(-v), lambda v: np.max(-v)),
        "min_neg_rows": (lambda v: jnp.min(-v, axis=1),
                         lambda v: np.min(-v, axis=1)),
        "max_sub": (lambda v: jnp.max(jnp.asarray(7, v.dtype) - v, axis=(0, 2)),
                    lambda v: np.max(v.dtype.type(7) - v, axis=(0, 2))),
        "min_neg_bcast": (lambda v: jnp.min(-lax.broadcast_in_dim(
            v[:, :, 0], (2, 320, 327), (1, 2))), lambda v: np.min(-b)),
    }
    if np.dtype(dtype).kind != "u":
        progs["min_abs"] = (lambda v: jnp.min(jnp.abs(v) - 3),
                            lambda v: np.min(np.abs(v) - v.dtype.type(3)))
        progs["max_abs_neg"] = (lambda v: jnp.max(-jnp.abs(v), axis=0),
                                lambda v: np.max(-np.abs(v), axis=0))
    xd = jax.device_put(x, iron_device)
    bad = []
    for name, (f, ref) in progs.items():
        got = np.asarray(jax.jit(f)(xd))
        with np.errstate(over="ignore"):
            want = np.asarray(ref(x))
        if got.dtype != want.dtype or not np.array_equal(got, want):
            bad.append(f"{name}: got {got.ravel()[:4]} want {want.ravel()[:4]}")
    assert not bad, "\n".join(bad)
