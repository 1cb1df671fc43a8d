"""Data-dependent while loops (issue 14) on `iron` compared with jax's CPU
backend: predicates that reduce over arrays, trip counts 0, 1, 2 and many,
nested loops, loops inside scans and fori_loops, donated carries, bodies
with a matmul, a sort, a dynamic_update_slice, a host callback. With
IRON_DEVICE=cuda and a driver with graph conditional nodes (CUDA >= 12.4)
these run as device loops (src/runtime/executor.c run_device_loop: iteration
0 host-driven, every later one in one CUDA graph launch whose WHILE node
repeats the body while a kernel says the predicate holds); with
IRON_CUDA_DEVICE_WHILE=0 host-driven. Results must be the same either way
(test_switch_off_same_bits compares the two in subprocesses) and equal to
XLA:CPU's (integers exactly, floats within a tolerance: the GPU's division
is not the CPU's to the last bit in every case).

On the host device the same comparisons check the host's loops.
scripts/device_while_gpu.sh runs this on the GPU (and the benchmark)."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

ON_CUDA = os.environ.get("IRON_DEVICE") == "cuda"


def both(fn, *args, donate=()):
    """fn jitted on iron and on cpu, results as numpy (lists of leaves)."""
    out = []
    for dev in (jax.devices("iron")[0], jax.devices("cpu")[0]):
        a = [jax.device_put(x, dev) for x in args]
        r = jax.jit(fn, donate_argnums=donate)(*a)
        out.append([np.asarray(x) for x in jax.tree_util.tree_leaves(r)])
    return out


def check(fn, *args, rtol=1e-6, donate=()):
    got, want = both(fn, *args, donate=donate)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
        else:
            np.testing.assert_array_equal(g, w)
    return got


# --- trip counts ---------------------------------------------------------


def count_up(x, limit):
    # sum(x) grows by x.size per iteration: trips = ceil((limit - sum) / n).
    def cond(c):
        x, i = c
        return jnp.sum(x) < limit

    def body(c):
        x, i = c
        return x + 1, i + 1
    return lax.while_loop(cond, body, (x, jnp.int32(0)))


@pytest.mark.parametrize("n", [1, 7, 1000, 1 << 16])
@pytest.mark.parametrize("trips", [0, 1, 2, 3, 17, 200])
def test_trip_counts(n, trips):
    x = np.zeros(n, np.int32)
    got = check(count_up, x, np.int32(n * trips))
    assert int(got[1]) == trips


# --- predicates that reduce over arrays ------------------------------------


def newton(a, tol):
    def cond(c):
        x, i = c
        return (i < 100) & (jnp.max(jnp.abs(x * x - a) / a) > tol)

    def body(c):
        x, i = c
        return 0.5 * (x + a / x), i + 1
    return lax.while_loop(cond, body, (a, jnp.int32(0)))


@pytest.mark.parametrize("n", [1, 33, 4096, 1 << 20])
def test_newton_max_reduction(n):
    rng = np.random.default_rng(n)
    a = (rng.random(n, dtype=np.float32) * 1000 + 1).astype(np.float32)
    got, want = both(newton, a, np.float32(1e-4))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    assert abs(int(got[1]) - int(want[1])) <= 1


def any_active(x):
    # argmax-style predicate: any element still above 1 (a reduce of bools).
    def cond(c):
        return jnp.any(c[0] > 1)

    def body(c):
        x, k = c
        return jnp.where(x > 1, x // 2, x), k + jnp.sum(x > 1)
    return lax.while_loop(cond, body, (x, jnp.int32(0)))


@pytest.mark.parametrize("hi", [0, 2, 5, 1 << 20])
def test_any_predicate(hi):
    rng = np.random.default_rng(hi)
    x = rng.integers(0, hi + 1, size=(64, 33)).astype(np.int32)
    check(any_active, x)


# --- nested loops, loops inside scans and fori_loops -----------------------


def nested(x):
    # outer: 6 rounds at most; inner: grow by 1.5 until the max reaches a
    # limit that rises with the round (0 to several trips each round).
    def outer_cond(c):
        return (c[1] < 6) & (jnp.sum(c[0]) < 1e9)

    def outer_body(c):
        x, n = c
        limit = 10.0 * (n + 1).astype(jnp.float32) ** 2
        y = lax.while_loop(lambda y: jnp.max(y) < limit, lambda y: y * 1.5,
                           x)
        return y, n + 1
    return lax.while_loop(outer_cond, outer_body, (x, jnp.int32(0)))


def test_nested():
    x = np.arange(1, 9, dtype=np.float32) / 100
    check(nested, x)


def while_in_scan(xs):
    def step(carry, x):
        def c(v):
            return jnp.max(v) < x

        def b(v):
            return v * 1.5 + 1
        v = lax.while_loop(c, b, carry)
        return v - x, jnp.sum(v)
    return lax.scan(step, jnp.ones(16, jnp.float32), xs)


def test_while_inside_scan():
    xs = np.array([0.5, 3, 40, 2, 900, 1, 1, 77], np.float32)
    check(while_in_scan, xs, rtol=1e-5)


def while_in_fori(x):
    def outer(i, x):
        return lax.while_loop(lambda v: jnp.sum(v) < 100.0 * (i + 1),
                              lambda v: v + jnp.abs(v) + 1, x)
    return lax.fori_loop(0, 6, outer, x)


def test_while_inside_fori():
    check(while_in_fori, np.linspace(-1, 1, 10).astype(np.float32))


# --- bodies of other kinds ----------------------------------------------------


def matmul_body(w, x):
    def cond(c):
        return jnp.linalg.norm(c[0]) < 1e6

    def body(c):
        x, i = c
        return x * 1.1 + jnp.tanh(w @ x), i + 1
    return lax.while_loop(cond, body, (x, jnp.int32(0)))


def test_matmul_body():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32) / 8
    x = rng.standard_normal((64, 16)).astype(np.float32)
    with jax.default_matmul_precision("highest"):
        got, want = both(matmul_body, w, x)
    assert int(got[1]) == int(want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-3, atol=1e-3)


def sort_and_update(x):
    # a sort (scratch memory on CUDA) and a dynamic_update_slice per step
    def cond(c):
        return c[1] < jnp.int32(c[0][0]) % 7 + 3

    def body(c):
        x, i = c
        y = jnp.sort(x * 7919 % 1009)
        return lax.dynamic_update_slice(x, y[:4], (i,)), i + 1
    return lax.while_loop(cond, body, (x, jnp.int32(0)))


def test_sort_and_update():
    check(sort_and_update, np.arange(5000, 0, -1, dtype=np.int32))


def callback_body(x):
    # a host callback inside the body: the loop stays host-driven on CUDA
    def body(c):
        x, i = c
        y = jax.pure_callback(lambda v: np.asarray(v) * 2,
                              jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return y, i + 1
    return lax.while_loop(lambda c: jnp.sum(c[0]) < 1000, body,
                          (x, jnp.int32(0)))


def test_callback_body():
    check(callback_body, np.ones(8, np.float32))


def test_donated_carry():
    x = np.zeros(1 << 12, np.float32)
    got = check(count_up, x, np.float32(5 * x.size), donate=(0,))
    assert int(got[1]) == 5


def test_repeated_calls():
    f = jax.jit(count_up)
    dev = jax.devices("iron")[0]
    for trips in [5, 0, 9, 2, 9, 1, 30]:
        x = jax.device_put(np.zeros(100, np.int32), dev)
        r = f(x, np.int32(100 * trips))
        assert int(r[1]) == trips
        assert np.all(np.asarray(r[0]) == trips)


# --- the switch and the device loop itself (CUDA) ----------------------------

_PROBE = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp, sys
    sys.path.insert(0, %r)
    from test_device_while import newton, count_up, nested, while_in_scan
    a = (np.arange(1, 1 + (1 << 16)) * 37 %% 1000 + 1).astype(np.float32)
    r = [jax.jit(newton)(a, np.float32(1e-5)),
         jax.jit(count_up)(np.zeros(999, np.int32), np.int32(999 * 23)),
         jax.jit(nested)(np.arange(1, 9, dtype=np.float32)),
         jax.jit(while_in_scan)(np.array([0.5, 3, 40, 900], np.float32))]
    for x in jax.tree_util.tree_leaves(r):
        sys.stdout.write(np.asarray(x).tobytes().hex() + "\\n")
""") % os.path.dirname(os.path.abspath(__file__))


def _probe(extra_env):
    env = dict(os.environ, JAX_PLATFORMS="iron", **extra_env)
    p = subprocess.run([sys.executable, "-c", _PROBE], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout, p.stderr


@pytest.mark.skipif(not ON_CUDA, reason="the device loop is CUDA's")
def test_switch_off_same_bits():
    on, _ = _probe({"IRON_CUDA_DEVICE_WHILE": "1"})
    off, _ = _probe({"IRON_CUDA_DEVICE_WHILE": "0"})
    assert on == off


@pytest.mark.skipif(not ON_CUDA, reason="the device loop is CUDA's")
def test_device_loop_engaged():
    # IRON_GRAPH_DEBUG=1 says, per data-dependent loop, whether it runs as a
    # device loop and why a recording was dropped.
    _, err = _probe({"IRON_GRAPH_DEBUG": "1", "IRON_CUDA_DEVICE_WHILE": "1"})
    if "no graph conditional nodes" in err:
        pytest.skip("driver without conditional nodes")
    # Any other reason (the set-condition kernel did not compile or load)
    # is a failure.
    assert "device while loops off" not in err, err[-3000:]
    assert "device loop yes" in err, err[-3000:]
    assert "device loop of" not in err, err[-3000:]  # nothing discarded
