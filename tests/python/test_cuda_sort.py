"""Sorts of every size on `iron`, compared with jax's CPU backend bit for
bit: jnp.sort / argsort / unique / median / searchsorted / lexsort,
lax.sort with payloads, top_k and approx_max_k on vectors past the CUDA
device's one-block limit (16384 elements), every key dtype with NaN, -0.0
and inf, ties (stability), rows along each axis, and sorts inside a scanned
body (a recorded CUDA graph). With IRON_DEVICE=cuda these run the CUDA
device's device-wide radix and merge sorts (src/device/cuda/
cuda_sort_program.c); on the host device they check the host's sort the
same way.

test_sort_1e8 (10^8 f32 elements) runs only on the CUDA device (or with
IRON_TEST_SORT_HUGE=1) and prints its time; bench/sort_bench.py times the
same sorts against XLA:GPU."""
import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax


def on(device, fn, *args):
    args = [jax.device_put(a, device) for a in args]
    out = jax.jit(fn)(*args)
    return jax.block_until_ready(out)


def same_bits(got, want, nan_payloads=True):
    """Equal bits; with nan_payloads=False any NaN equals any NaN (values
    that arithmetic made: a GPU's NaN + NaN is the canonical NaN, x86's
    keeps an operand's sign and payload)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    if got.dtype == np.bool_:
        np.testing.assert_array_equal(got, want)
        return
    g = got.reshape(-1).view(np.uint8)
    w = want.reshape(-1).view(np.uint8)
    if not np.array_equal(g, w):
        es = got.dtype.itemsize
        differ = (g != w).reshape(-1, es).any(axis=1)
        if not nan_payloads and got.dtype.kind == "f":
            differ &= ~(np.isnan(got.reshape(-1)) & np.isnan(want.reshape(-1)))
            if not differ.any():
                return
        bad = np.nonzero(differ)[0]
        i = int(bad[0])
        raise AssertionError(
            f"{len(bad)} of {got.size} elements differ; first at {i}: "
            f"iron {got.reshape(-1)[i]!r} cpu {want.reshape(-1)[i]!r}")


def check(iron_device, cpu_device, fn, *args, nan_payloads=True):
    want = on(cpu_device, fn, *args)
    got = on(iron_device, fn, *args)
    for g, w in zip(jax.tree_util.tree_leaves(got),
                    jax.tree_util.tree_leaves(want)):
        same_bits(g, w, nan_payloads)


def specials(dtype, n, seed=0, ties=False):
    """n values of dtype: random, many repeated, NaN (both signs), +-0,
    +-inf (floats)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if ties:
        pool = rng.standard_normal(3) * 10
        x = pool[rng.integers(0, 3, n)]
        return x.astype(dt)
    if dt.kind == "f" or dt.name == "bfloat16":
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
        x = x.astype(np.float32)
        k = rng.integers(0, 100, n)
        x[k < 20] = rng.standard_normal(8).astype(np.float32)[k[k < 20] % 8]
        x[k == 20] = np.nan
        x[k == 21] = -np.nan
        x[k == 22] = 0.0
        x[k == 23] = -0.0
        x[k == 24] = np.inf
        x[k == 25] = -np.inf
        return x.astype(dt)
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    k = rng.integers(0, 3, n)
    x[k == 0] = rng.integers(-3 if info.min < 0 else 0, 4, int((k == 0).sum()))
    return x


N = 100_000
F32 = np.float32


# --- the issue's programs --------------------------------------------------

def test_issue_sort_argsort(iron_device, cpu_device):
    x = specials(F32, N)
    check(iron_device, cpu_device, jnp.sort, x)
    check(iron_device, cpu_device, jnp.argsort, x)
    check(iron_device, cpu_device,
          functools.partial(jnp.argsort, descending=True), x)
    check(iron_device, cpu_device,
          functools.partial(jnp.sort, descending=True), x)


def test_issue_unique(iron_device, cpu_device):
    x = np.random.default_rng(1).integers(0, 5000, N).astype(np.int32)
    check(iron_device, cpu_device,
          functools.partial(jnp.unique, size=5000, fill_value=-1), x)
    check(iron_device, cpu_device,
          functools.partial(jnp.unique, size=5000, fill_value=-1,
                            return_index=True, return_inverse=True,
                            return_counts=True), x)
    # Eager (the size comes back from the device).
    got = jnp.unique(jax.device_put(x, iron_device))
    np.testing.assert_array_equal(np.asarray(got), np.unique(x))
    xf = specials(F32, N, seed=2)
    check(iron_device, cpu_device,
          functools.partial(jnp.unique, size=N, fill_value=0.0), xf)


def test_issue_median_quantile(iron_device, cpu_device):
    x = np.random.default_rng(3).standard_normal(N).astype(F32)
    check(iron_device, cpu_device, jnp.median, x)
    # Interpolating methods add arithmetic whose rounding may differ from
    # XLA:CPU's by an ulp (not the sort's business): exact methods here.
    check(iron_device, cpu_device,
          lambda v: jnp.quantile(v, jnp.array([0.1, 0.5, 0.99], F32),
                                 method="lower"), x)
    check(iron_device, cpu_device,
          lambda v: jnp.percentile(v, 25.0, method="nearest"), x)
    x2 = np.random.default_rng(4).standard_normal((7, 30000)).astype(F32)
    check(iron_device, cpu_device, lambda v: jnp.median(v, axis=1), x2)


# scan_unrolled: the slowest of the three on 2 cores; the quick run keeps
# the other two.
@pytest.mark.parametrize("method", ["scan", "sort",
                                    pytest.param("scan_unrolled",
                                                 marks=pytest.mark.slow)])
def test_issue_searchsorted(iron_device, cpu_device, method):
    rng = np.random.default_rng(5)
    a = np.sort(rng.standard_normal(N).astype(F32))
    v = rng.standard_normal(N).astype(F32)
    for side in ("left", "right"):
        check(iron_device, cpu_device,
              lambda s, q: jnp.searchsorted(s, q, side=side, method=method),
              a, v)
    # Unsorted input sorted on the device first.
    check(iron_device, cpu_device,
          lambda s, q: jnp.searchsorted(jnp.sort(s), q, method=method),
          rng.standard_normal(N).astype(F32), v)


# --- dtypes, ties, lengths -------------------------------------------------

DTYPES = ["float32", "float16", "bfloat16", "int8", "int16", "int32",
          "uint8", "uint16", "uint32", "bool"]
X64_DTYPES = ["float64", "int64", "uint64"]


def _dt(name):
    return jnp.bfloat16 if name == "bfloat16" else np.dtype(name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [16385, N])
def test_sort_dtypes(iron_device, cpu_device, dtype, n):
    x = specials(_dt(dtype), n, seed=n)
    check(iron_device, cpu_device, jnp.sort, x)
    check(iron_device, cpu_device, jnp.argsort, x)
    check(iron_device, cpu_device,
          functools.partial(jnp.argsort, descending=True), x)


@pytest.mark.parametrize("dtype", X64_DTYPES)
def test_sort_dtypes_x64(iron_device, cpu_device, dtype):
    with jax.enable_x64(True):
        x = specials(np.dtype(dtype), N, seed=7)
        check(iron_device, cpu_device, jnp.sort, x)
        check(iron_device, cpu_device, jnp.argsort, x)
        i = np.arange(N, dtype=np.int64)[::-1].copy()
        check(iron_device, cpu_device,
              lambda k, p: lax.sort((k, p), num_keys=1), x, i)


@pytest.mark.parametrize("n", [1, 2, 17, 2047, 2048, 2049, 16383, 16384,
                               16385, 32769, 100_001])
def test_sort_lengths_ties(iron_device, cpu_device, n):
    x = specials(F32, n, seed=n, ties=True)
    check(iron_device, cpu_device, jnp.argsort, x)
    check(iron_device, cpu_device,
          functools.partial(jnp.argsort, descending=True), x)
    check(iron_device, cpu_device, jnp.sort, specials(F32, n, seed=n + 1))


def test_lax_sort_operands(iron_device, cpu_device):
    rng = np.random.default_rng(8)
    k1 = rng.integers(0, 50, N).astype(np.int16)
    k2 = specials(F32, N, seed=9)
    p = rng.standard_normal(N).astype(F32)
    check(iron_device, cpu_device, lambda a, b, c: lax.sort((a, b, c)),
          k1, k2, p)
    check(iron_device, cpu_device,
          lambda a, b, c: lax.sort((a, b, c), num_keys=2), k1, k2, p)
    check(iron_device, cpu_device,
          lambda a, b, c: lax.sort((a, b, c), num_keys=3), k1, k2, p)
    check(iron_device, cpu_device,
          lambda a, b: jnp.lexsort((a, b)), k2, k1)
    c = (k2 + 1j * rng.standard_normal(N).astype(F32)).astype(np.complex64)
    check(iron_device, cpu_device, jnp.sort, c)
    check(iron_device, cpu_device, jnp.argsort, c)


@pytest.mark.parametrize("shape,axis", [((4, 50000), 1), ((50000, 3), 0),
                                        ((3, 20000, 2), 1), ((300, 300), 0),
                                        ((2000, 17), 1), ((1, 40000), -1)])
def test_sort_rows(iron_device, cpu_device, shape, axis):
    x = specials(F32, int(np.prod(shape)), seed=11).reshape(shape)
    check(iron_device, cpu_device, lambda v: jnp.sort(v, axis=axis), x)
    check(iron_device, cpu_device, lambda v: jnp.argsort(v, axis=axis), x)


# --- top_k -------------------------------------------------------------------

@pytest.mark.parametrize("n,k", [(N, 1), (N, 10), (N, 1000), (1_000_000, 10)])
def test_top_k(iron_device, cpu_device, n, k):
    # Distinct values: XLA sorts top_k with is_stable=false, and its order
    # among equal values is not the stable one.
    x = np.random.default_rng(n + k).permutation(n).astype(F32) * 0.5
    check(iron_device, cpu_device, lambda v: lax.top_k(v, k), x)
    xi = np.random.default_rng(k).permutation(n).astype(np.int32)
    check(iron_device, cpu_device, lambda v: lax.top_k(v, k), xi)
    rows = np.random.default_rng(1).permutation(8 * 30000).reshape(8, 30000)
    check(iron_device, cpu_device, lambda v: lax.top_k(v, 5),
          rows.astype(F32))


def test_approx_max_k(iron_device, cpu_device):
    x = np.random.default_rng(12).permutation(4 * 50000).reshape(4, 50000)
    x = x.astype(F32)
    check(iron_device, cpu_device, lambda v: lax.approx_max_k(v, 16), x)
    check(iron_device, cpu_device, lambda v: lax.approx_min_k(v, 16), x)


# --- sorts in loops (CUDA graphs) ------------------------------------------

def test_sort_in_scan(iron_device, cpu_device):
    x = specials(F32, 20000, seed=13)

    def f(v):
        def body(c, i):
            s = jnp.sort(c * (1.0 + 0.001 * i.astype(F32)))
            a = jnp.argsort(c)
            return c[a] + s, a[:4]
        return lax.scan(body, v, jnp.arange(8))

    # c[a] + s adds NaNs: their payloads are the hardware's.
    check(iron_device, cpu_device, f, x, nan_payloads=False)

    def g(v):
        return lax.fori_loop(
            0, 6, lambda i, c: jnp.sort(c)[::-1] + jnp.float32(1), v)

    check(iron_device, cpu_device, g, x, nan_payloads=False)


# --- 10^8 ------------------------------------------------------------------------

def _iron_is_cuda(iron_device):
    return "cpu" not in iron_device.device_kind.lower() and \
        iron_device.device_kind.lower() != "host"


def test_sort_1e8(iron_device, cpu_device):
    if not (_iron_is_cuda(iron_device) or
            os.environ.get("IRON_TEST_SORT_HUGE") == "1"):
        pytest.skip("10^8 elements: on the CUDA device only "
                    "(IRON_TEST_SORT_HUGE=1 forces it)")
    n = 100_000_000
    x = np.random.default_rng(14).standard_normal(n).astype(F32)
    xi = jax.device_put(x, iron_device)
    f = jax.jit(jnp.sort)
    jax.block_until_ready(f(xi))  # compile, warm up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        got = jax.block_until_ready(f(xi))
        times.append(time.perf_counter() - t0)
    print(f"\niron jnp.sort of 10^8 f32: {min(times) * 1e3:.1f} ms "
          f"(best of 3; {iron_device.device_kind})")
    want = np.sort(x, kind="stable")  # no NaN/-0 here: numpy's order is jax's
    same_bits(got, want)
    a = jax.block_until_ready(jax.jit(jnp.argsort)(xi))
    same_bits(a, np.argsort(x, kind="stable").astype(np.int32))
