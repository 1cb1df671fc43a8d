"""Execution on `iron` is asynchronous: dispatch returns before the work
ends, and block_until_ready really waits for it."""
import time

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax


def device(request, fixture, platform):
    try:
        return request.getfixturevalue(fixture)
    except pytest.FixtureLookupError:
        return jax.devices(platform)[0]


@pytest.fixture
def iron(request):
    return device(request, "iron_device", "iron")


N = 192


@jax.jit
def slow(x, w, n):
    # n matmuls in a data-dependent loop (n is traced: one compile for all n).
    return lax.fori_loop(0, n, lambda i, a: jnp.tanh(a @ w), x)


def inputs(dev):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    w = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    return jax.device_put(x, dev), jax.device_put(w, dev)


def timed(x, w, n):
    t0 = time.perf_counter()
    r = slow(x, w, n)
    t1 = time.perf_counter()
    ready_at_return = r.is_ready()
    r.block_until_ready()
    t2 = time.perf_counter()
    return r, t1 - t0, t2 - t0, ready_at_return


def calibrated_trips(x, w, dev, target_s=0.5):
    """A trip count that makes `slow` take about target_s on this machine."""
    n = 4
    slow(x, w, jax.device_put(np.int32(n), dev)).block_until_ready()  # compile
    while True:
        _, _, total, _ = timed(x, w, jax.device_put(np.int32(n), dev))
        if total >= target_s / 4 or n >= 1 << 20:
            break
        n *= 4
    return max(n, int(n * target_s / max(total, 1e-6)))


def test_block_until_ready_waits(iron):
    x, w = inputs(iron)
    n = calibrated_trips(x, w, iron)
    n_arg = jax.device_put(np.int32(n), iron)
    r, dispatch_s, total_s, ready_at_return = timed(x, w, n_arg)
    print(f"trips {n}: dispatch {dispatch_s * 1e3:.2f} ms, "
          f"block_until_ready {total_s * 1e3:.1f} ms")
    assert total_s > 0.2, "calibration failed to make a long-running program"
    assert not ready_at_return, "result was ready when dispatch returned"
    assert dispatch_s < total_s / 5, (dispatch_s, total_s)
    assert r.is_ready()
    assert np.all(np.isfinite(np.asarray(r)))
    # And the values are the ones jax's CPU backend computes. Compared on a
    # short run: over thousands of trips the iteration amplifies the last-bit
    # differences of two GEMMs' summation orders past any fixed tolerance.
    cpu = jax.devices("cpu")[0]
    xc, wc = inputs(cpu)
    short = 8
    got = slow(x, w, jax.device_put(np.int32(short), iron))
    want = slow(xc, wc, jax.device_put(np.int32(short), cpu))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)


def test_dependent_dispatches_chain_without_blocking(iron):
    x, w = inputs(iron)
    n_arg = jax.device_put(np.int32(3), iron)
    t0 = time.perf_counter()
    r = x
    for _ in range(20):
        r = slow(r, w, n_arg)  # each consumes the previous, still pending
    dispatch_s = time.perf_counter() - t0
    got = np.asarray(r)  # a sync point
    cpu = jax.devices("cpu")[0]
    xc, wc = inputs(cpu)
    want = slow(xc, wc, jax.device_put(np.int32(60), cpu))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-5)
    print(f"20 chained dispatches in {dispatch_s * 1e3:.2f} ms")


def test_to_host_waits_for_pending_work(iron):
    x, w = inputs(iron)
    n = calibrated_trips(x, w, iron, target_s=0.3)
    r = slow(x, w, jax.device_put(np.int32(n), iron))
    got = np.asarray(r)  # must wait, never read a half-written buffer
    cpu = jax.devices("cpu")[0]
    xc, wc = inputs(cpu)
    want = slow(xc, wc, jax.device_put(np.int32(n), cpu))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-5)


def test_block_until_ready_on_pytrees(iron):
    x, w = inputs(iron)
    f = jax.jit(lambda x, w: {"a": x @ w, "b": (x.sum(), w.max())})
    out = jax.block_until_ready(f(x, w))
    assert all(leaf.is_ready() for leaf in jax.tree_util.tree_leaves(out))
