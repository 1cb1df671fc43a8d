"""NaN, signed-zero and tie rules of every reduce/sort/scan path, swept over
row lengths around every vector, tile and block boundary (issue 13): the
first-index rule of argmax/argmin (jax's body keeps its first operand when
both are NaN, and the smaller index on equal values), max/min of NaN and of
+0/-0, jax's sort order (NaNs last, -0.0 == 0.0, stable), and
cummax/cummin through NaN. Each length is one jit of all the ops over rows
of patterns on `iron`, compared with numpy (argmax, stable argsort and
sort have numpy's rules) and, at the boundary lengths, with jax's CPU
backend too (XLA:CPU compiles take ~0.5 s, so not at every length).

XLA:CPU is the reference, except for jnp.max/jnp.min: XLA:CPU's vectorized
max/min reduce drops NaNs and orders +0/-0 by position (measured with jax
0.10.2: the max of 300 zeros with NaNs is 0.0 in a [17, 300] row reduce,
and of zeros with a NaN in the last place -inf in a 1-D reduce from 4096
elements on), so those are compared with StableHLO's semantics instead
(IEEE maximum/minimum: any NaN gives NaN; of +0 and -0, max gives +0 and
min -0), which is what XLA:CPU returns for short 1-D rows.

By default the sweep takes the boundary lengths (and for f32 every power
of two +-1 up to 2^16, and 100000); IRON_TEST_NAN_SWEEP=full takes every
length 1..300 and every power of two +-1 for every dtype (about 10
minutes). tests/c/test_reduce_nan_sweep.c sweeps every length on the
kernels directly (host, and the CUDA generated kernels on the CPU)."""
import os

import ml_dtypes
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax

_POW2 = {v for k in range(1, 17) for v in (2**k - 1, 2**k, 2**k + 1)}
# Every boundary of the host's and CUDA's paths: 8-lane blocks, the 16, 64
# and 256 thresholds, 32-lane warps, 256-thread blocks.
_EDGES = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 66, 100, 127,
          128, 129, 255, 256, 257, 300}
_LONG = {4095, 4096, 4097, 65537}
FULL = os.environ.get("IRON_TEST_NAN_SWEEP") == "full"
if FULL:
    LENGTHS = {"f32": sorted(set(range(1, 301)) | _POW2 | {100000})}
    LENGTHS["f16"] = LENGTHS["bf16"] = LENGTHS["f32"]
    XLA_LENGTHS = _EDGES | _POW2 | {100000}
else:
    LENGTHS = {"f32": sorted(_EDGES | _POW2 | {100000}),
               "f16": sorted(_EDGES | _LONG), "bf16": sorted(_EDGES | _LONG)}
    XLA_LENGTHS = _EDGES | _LONG | {100000}


def patterns(n, dtype):
    """Rows of the test matrix: NaNs, signed zeros and ties at the places
    where a blocked or tree-shaped reduction splits a row."""
    rng = np.random.default_rng(n)
    rows = []

    def row(fill=0.0):
        return np.full(n, fill, np.float64)

    rows.append(row())
    for idx in ([1, 2], [n - 2, n - 1], [0, n - 1], [n // 3, n // 2, n - 1],
                list(range(n // 2, n, 7)), [15, 16, 63, 64, 65, 255, 256]):
        r = row()
        r[[i for i in idx if 0 <= i < n]] = np.nan
        rows.append(r)
    r = row(np.nan)
    rows.append(r)
    r = row()
    r[::2] = -0.0
    rows.append(r)
    r = row()
    r[1::2] = -0.0
    rows.append(r)
    r = row(-0.0)
    rows.append(r)
    r = row(-np.inf)
    rows.append(r)
    # Ties of the maximum and of the minimum at block edges.
    r = rng.integers(-3, 3, n).astype(np.float64)
    for i in (7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, n - 1):
        if i < n:
            r[i] = 5.0 if i % 2 else -5.0
    rows.append(r)
    # Negative NaNs, infinities and NaNs together.
    r = rng.integers(-3, 3, n).astype(np.float64)
    r[0] = np.inf
    if n > 2:
        r[n // 2] = -np.nan
        r[n - 1] = np.nan
    rows.append(r)
    # -inf and +inf only, then a NaN first.
    r = np.where(rng.random(n) < 0.5, -np.inf, np.inf)
    rows.append(r)
    r = np.where(rng.random(n) < 0.5, -np.inf, np.inf)
    r[0] = np.nan
    rows.append(r)
    # Random small values with many duplicates, some NaN and -0.
    r = rng.integers(-2, 3, n).astype(np.float64)
    r[rng.random(n) < 0.1] = np.nan
    r[(r == 0) & (rng.random(n) < 0.5)] = -0.0
    rows.append(r)
    x = np.stack(rows).astype(dtype)
    # -NaN keeps its sign bit through astype for f32/f64; make sure of it.
    return x


def ops(x):
    """Every path under test, along the rows (x: [P, n]) and along the
    columns (x.T: P kept outputs, column reduce paths)."""
    xt = x.T
    return (
        jnp.argmax(x, axis=1), jnp.argmin(x, axis=1),
        jnp.argmax(xt, axis=0), jnp.argmin(xt, axis=0),
        jnp.argmax(x[3]), jnp.argmin(x[3]),
        jnp.max(x, axis=1), jnp.min(x, axis=1),
        jnp.max(xt, axis=0), jnp.min(xt, axis=0),
        jnp.sort(x, axis=1), jnp.argsort(x, axis=1, stable=True),
        jnp.argsort(x, axis=1, stable=True, descending=True),
        lax.cummax(x, axis=1), lax.cummin(x, axis=1),
        lax.cummax(x, axis=1, reverse=True), lax.cummin(xt, axis=0),
    )


NAMES = ["argmax", "argmin", "argmax_cols", "argmin_cols", "argmax_1d",
         "argmin_1d", "max", "min", "max_cols", "min_cols", "sort",
         "argsort", "argsort_desc", "cummax", "cummin", "cummax_rev",
         "cummin_cols"]
MAXMIN = {"max", "min", "max_cols", "min_cols"}


def semantic_maxmin(x, name):
    """max/min along the rows by StableHLO's rules (IEEE maximum/minimum)."""
    v = np.asarray(x, np.float64)
    nan = np.isnan(v).any(axis=1)
    if name.startswith("max"):
        r = np.max(np.where(np.isnan(v), -np.inf, v), axis=1)
        zero_pos = ((v == 0) & ~np.signbit(v)).any(axis=1)
        r = np.where((r == 0) & zero_pos, 0.0, np.where(r == 0, -0.0, r))
    else:
        r = np.min(np.where(np.isnan(v), np.inf, v), axis=1)
        zero_neg = ((v == 0) & np.signbit(v)).any(axis=1)
        r = np.where((r == 0) & zero_neg, -0.0, np.where(r == 0, 0.0, r))
    return np.where(nan, np.nan, r)


def semantic_cum(x, is_max, reverse=False):
    """cummax/cummin along the rows: NaN sticks; of +0/-0 max keeps +0 and
    min -0 once either has been seen."""
    v = np.asarray(x, np.float64)
    if reverse:
        v = v[:, ::-1]
    acc = (np.maximum if is_max else np.minimum).accumulate(v, axis=1)
    sign_zero = (v == 0) & (np.signbit(v) != is_max)
    seen = np.logical_or.accumulate(sign_zero, axis=1)
    z = 0.0 if is_max else -0.0
    acc = np.where((acc == 0) & seen, z, np.where(acc == 0, -z, acc))
    return acc[:, ::-1] if reverse else acc


def numpy_reference(x):
    """The results of ops(x) by numpy and the rules above."""
    v = np.asarray(x, np.float64)
    n = v.shape[1]
    asc = np.argsort(v, axis=1, kind="stable")
    desc = (n - 1 - np.argsort(v[:, ::-1], axis=1, kind="stable"))[:, ::-1]
    return (
        np.argmax(v, axis=1), np.argmin(v, axis=1),
        np.argmax(v, axis=1), np.argmin(v, axis=1),
        np.argmax(v[3]), np.argmin(v[3]),
        semantic_maxmin(v, "max"), semantic_maxmin(v, "min"),
        semantic_maxmin(v, "max"), semantic_maxmin(v, "min"),
        np.take_along_axis(v, asc, axis=1), asc, desc,
        semantic_cum(v, True), semantic_cum(v, False),
        semantic_cum(v, True, reverse=True), semantic_cum(v, False).T,
    )


def same(a, b):
    """Equal values, NaNs in the same places, zeros of the same sign."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "iu":
        return np.array_equal(a, b)
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    na, nb = np.isnan(a), np.isnan(b)
    return (np.array_equal(na, nb) and np.array_equal(a[~na], b[~nb]) and
            np.array_equal(np.signbit(a[~na]), np.signbit(b[~nb])))


def first_mismatch(a, b):
    a = np.asarray(a, np.float64).reshape(-1)
    b = np.asarray(b, np.float64).reshape(-1)
    for i in range(min(a.size, b.size)):
        if not same(a[i:i + 1], b[i:i + 1]):
            return i, a[i], b[i]
    return None


_jit_ops = jax.jit(ops)


def check_length(n, dtype, iron, cpu, with_xla):
    """Mismatches of iron against the numpy reference and, when `with_xla`,
    of iron and of the reference against XLA:CPU (max/min excepted)."""
    x = patterns(n, dtype)
    got = _jit_ops(jax.device_put(x, iron))
    ref = numpy_reference(x)
    xla = _jit_ops(jax.device_put(x, cpu)) if with_xla else ref
    bad = []
    for name, g, r, w in zip(NAMES, got, ref, xla):
        g = np.asarray(g)
        if not same(g, r):
            bad.append(f"{name}: iron vs reference, first mismatch (flat "
                       f"index, iron, ref) {first_mismatch(g, r)}")
        if with_xla and name not in MAXMIN and not same(g, w):
            bad.append(f"{name}: iron vs XLA:CPU, first mismatch (flat "
                       f"index, iron, xla) {first_mismatch(g, w)}")
    return bad


# f16 and bf16 take most of this file's minutes; CI's quick run keeps the
# f32 sweep (the same kernels and rules, 4-byte elements).
@pytest.mark.parametrize("dtype", [
    np.float32,
    pytest.param(np.float16, marks=pytest.mark.slow),
    pytest.param(ml_dtypes.bfloat16, marks=pytest.mark.slow)],
    ids=["f32", "f16", "bf16"])
def test_nan_ties_sweep(dtype, iron_device, cpu_device):
    key = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}.get(
        np.dtype(dtype), "bf16")
    failures = []
    for n in LENGTHS[key]:
        with_xla = n in XLA_LENGTHS
        for b in check_length(n, dtype, iron_device, cpu_device, with_xla):
            failures.append(f"n={n}: {b}")
    assert not failures, "\n".join(failures[:40])


def test_issue_13_argmax_case(iron_device, cpu_device):
    # The reported case: two NaNs in a row of 65.
    v = np.zeros(65, np.float32)
    v[[1, 2]] = np.nan
    for f in (jnp.argmax, jnp.argmin):
        got = jax.jit(f)(jax.device_put(v, iron_device))
        assert int(got) == 1 == int(np.argmax(v))


def test_semantic_reference_matches_xla_cpu_short_1d_rows(cpu_device):
    # The rules max/min are checked against are XLA:CPU's on short 1-D rows.
    for n in (1, 2, 17, 64, 65, 300, 4095):
        x = patterns(n, np.float32)
        for i in range(x.shape[0]):
            for name, f in (("max", jnp.max), ("min", jnp.min)):
                w = jax.jit(f)(jax.device_put(x[i], cpu_device))
                assert same(w, semantic_maxmin(x[i:i + 1], name)[0]), (n, i)
