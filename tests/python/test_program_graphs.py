"""Whole programs as device graphs (src/runtime/exec_graph.c,
IRON_CUDA_PROGRAM_GRAPHS): on the CUDA device an executable whose program
only enqueues capturable device work runs its first call the ordinary way,
records the second as one CUDA graph and replays it from then on, copying
the arguments into fixed homes and the results out of them.

Checked here, over many calls with changing inputs: every call's results
equal jax's CPU backend's (within the f32 tolerance of the GPU's math), and
a replayed call on the same inputs as the first (ordinary) call gives the
same bits; donated training state (an Adam step, a small CNN step), an
argument returned as a result, constants, zero-size values and a value
returned twice; 8 threads calling one jitted function; and, on CUDA, that
replays happened at all (IRON_PROFILE's "graph replays/run" in a fresh
process) and that IRON_CUDA_PROGRAM_GRAPHS=0 gives the same bits. On the
host device the same comparisons check the ordinary path (no graphs there).

On the GPU machine (scripts/program_graphs_gpu.sh runs it):
  IRON_DEVICE=cuda IRON_CUDA_TF32=0 JAX_PLATFORMS=iron,cpu \\
      python3 -m pytest tests/python/test_program_graphs.py"""
import os
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 2e-5


def _is_cuda(dev):
    return dev.platform == "iron" and "NVIDIA" in str(dev.device_kind)


def _cpu(f, *args):
    cpu = jax.devices("cpu")[0]
    return jax.jit(f, device=cpu)(*[jax.device_put(a, cpu) for a in args])


def _close(a, b, tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(a, b)


def _bits(tree):
    return [np.asarray(x).tobytes() for x in jax.tree_util.tree_leaves(tree)]


def chain(x, y):
    # Enough kernel steps for the rule (element-wise chains fuse, so the
    # reductions and dots separate them); several results, one twice, an
    # argument, a constant and a zero-size value.
    h = x
    for i in range(6):
        h = jnp.tanh(h @ y + i) * 0.5
        h = h - h.mean(0, keepdims=True)
    s = (h * h).sum()
    return h, s, x, jnp.arange(3.0), jnp.zeros((0, 4)), s


@pytest.mark.parametrize("n", [8, 64])
def test_chain_many_calls(iron_device, n):
    rng = np.random.default_rng(n)
    f = jax.jit(chain, device=iron_device)
    xs = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(6)]
    y = rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n)
    first = None
    for k in range(24):
        x = xs[k % len(xs)]
        got = f(x, y)
        want = _cpu(chain, x, y)
        for g, w in zip(got, want):
            _close(g, w, 1e-4)
        if k == 0:
            first = _bits(got)
        if k % len(xs) == 0:
            assert _bits(got) == first, f"call {k} differs from call 0"
    # Results are arrays of their own: deleting one keeps the others.
    r = f(xs[0], y)
    r[0].delete()
    _close(r[2], xs[0])


def _mlp_init(rng, sizes):
    return [(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a),
             np.zeros(b, np.float32)) for a, b in zip(sizes, sizes[1:])]


def _mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, -1))


def _adam_step(state, x, y):
    params, m, v, t = state
    loss, g = jax.value_and_grad(_mlp_loss)(params, x, y)
    t = t + 1.0
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8) * jnp.sqrt(
            1 - 0.999 ** t) / (1 - 0.9 ** t), params, m, v)
    return (params, m, v, t), loss


def test_adam_donated_state(iron_device):
    rng = np.random.default_rng(0)
    params = _mlp_init(rng, [32, 64, 64, 10])
    zeros = jax.tree_util.tree_map(np.zeros_like, params)
    state0 = (params, zeros, zeros, np.float32(0))
    batches = [(rng.standard_normal((16, 32)).astype(np.float32),
                np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)])
               for _ in range(5)]
    step = jax.jit(_adam_step, donate_argnums=(0,), device=iron_device)
    cpu_state = state0
    state = jax.device_put(state0, iron_device)
    for k in range(20):
        x, y = batches[k % len(batches)]
        state, loss = step(state, x, y)
        cpu_state, cpu_loss = _cpu(_adam_step, cpu_state, x, y)
        _close(loss, cpu_loss, 1e-4)
    for a, b in zip(jax.tree_util.tree_leaves(state),
                    jax.tree_util.tree_leaves(cpu_state)):
        _close(a, b, 1e-4)


def _cnn_loss(p, x, y):
    h = x
    for i in range(3):
        h = lax.conv_general_dilated(h, p[f"w{i}"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        mu = h.mean((0, 1, 2))
        var = ((h - mu) ** 2).mean((0, 1, 2))
        h = jax.nn.relu((h - mu) * lax.rsqrt(var + 1e-5))
    logits = h.mean((1, 2)) @ p["wl"]
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()


def _cnn_step(p, x, y):
    loss, g = jax.value_and_grad(_cnn_loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - 0.05 * b, p, g), loss


def test_cnn_step_donated(iron_device):
    rng = np.random.default_rng(1)
    chans = [3, 8, 8, 16]
    p = {f"w{i}": (rng.standard_normal((3, 3, chans[i], chans[i + 1])) /
                   np.sqrt(9 * chans[i])).astype(np.float32) for i in range(3)}
    p["wl"] = (rng.standard_normal((16, 10)) / 4).astype(np.float32)
    xs = [rng.standard_normal((4, 8, 8, 3)).astype(np.float32) for _ in range(3)]
    ys = [rng.integers(0, 10, 4).astype(np.int32) for _ in range(3)]
    step = jax.jit(_cnn_step, donate_argnums=(0,), device=iron_device)
    dp = jax.device_put(p, iron_device)
    cp = p
    for k in range(12):
        dp, loss = step(dp, xs[k % 3], ys[k % 3])
        cp, closs = _cpu(_cnn_step, cp, xs[k % 3], ys[k % 3])
        _close(loss, closs, 1e-4)
    for k in p:
        _close(dp[k], cp[k], 1e-4)


def test_threads(iron_device):
    rng = np.random.default_rng(2)
    y = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    f = jax.jit(chain, device=iron_device)
    xs = [rng.standard_normal((16, 16)).astype(np.float32) for _ in range(8)]
    want = [_bits(f(x, y)) for x in xs]  # also the first calls
    bad = []

    def worker(t):
        for r in range(30):
            k = (t + r) % len(xs)
            if _bits(f(xs[k], y)) != want[k]:
                bad.append((t, r))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


_PROFILE_SCRIPT = """
import numpy as np, jax, jax.numpy as jnp, sys
sys.path.insert(0, {here!r})
from test_program_graphs import chain
rng = np.random.default_rng(3)
y = rng.standard_normal((64, 64)).astype(np.float32) / 8
f = jax.jit(chain)
out = []
for k in range(10):
    x = rng.standard_normal((64, 64)).astype(np.float32) if k % 2 else np.ones((64, 64), np.float32)
    out.append([np.asarray(a) for a in f(x, y)])
np.savez({path!r}, *[a for r in out for a in r])
# Drop the executable so that iron prints its per-run profile.
import gc
del f
jax.clear_caches()
gc.collect()
"""


def test_replays_happen_and_switch_agrees(iron_device, tmp_path):
    if not _is_cuda(iron_device):
        msg = f"no CUDA device (iron device is {iron_device.device_kind})"
        if os.environ.get("IRON_TEST_REQUIRE_CUDA") == "1":
            pytest.fail(msg + " and IRON_TEST_REQUIRE_CUDA=1")
        pytest.skip(msg)
    res = {}
    for mode in ("1", "0"):
        path = str(tmp_path / f"out{mode}.npz")
        src = textwrap.dedent(_PROFILE_SCRIPT.format(here=HERE, path=path))
        e = dict(os.environ, IRON_DEVICE="cuda", JAX_PLATFORMS="iron",
                 IRON_PROFILE="1", IRON_CUDA_PROGRAM_GRAPHS=mode)
        p = subprocess.run([sys.executable, "-c", src], env=e,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        line = [ln for ln in p.stderr.splitlines()
                if "iron profile: jit_chain" in ln]
        assert line, p.stderr[-3000:]
        replays = float(line[0].split("graph replays/run")[0].split(",")[-1])
        if mode == "1":
            assert replays >= 0.8, line[0]  # 9 of 10 calls
        else:
            assert replays == 0, line[0]
        res[mode] = np.load(path)
    for k in res["1"].files:
        assert res["1"][k].tobytes() == res["0"][k].tobytes(), k
