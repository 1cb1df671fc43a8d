"""Scans over stacked state whose slabs are updated in place
(src/compiler/scan_in_place.h): a KV-cache decode step's scan over layers
writes this token's row into layer i's slab of the cache. The pass makes
the loop write the row into the stacked array itself instead of copying
each slab out and back; these programs check that the results stay those
of the definition, on the iron device (host or CUDA, as IRON_DEVICE says):

- the caches bit for bit against a numpy model of the scan (pure data
  movement), the float carry against XLA:CPU;
- a random sweep of the class: layers, cache shapes, dtypes, positions in
  and out of range (clamped), the slab read after the write or not,
  neighbours the pass must leave alone (the old slab read too, two writes,
  a reversed scan), donated or not, the input cache read after the call;
- that the pass fires on the decode step (iron-dump says how many slabs),
  and that IRON_SCAN_IN_PLACE=0 gives the same bits.
"""
import glob
import os
import re
import subprocess
import tempfile

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax

from test_reader_printer import find_tool  # iron-dump of this tree


def _clamp(start, dim, size):
    start = int(start) + dim if int(start) < 0 else int(start)
    return min(max(start, 0), dim - size)


def _model(cache, upd, pos, two=False):
    """The scan's stacked result: each layer's slab with its row written."""
    out = np.array(cache, copy=True)
    for i in range(cache.shape[0]):
        p = _clamp(pos, cache.shape[1], 1)
        out[i, p] = upd[i]
        if two:
            q = _clamp(pos + 1, cache.shape[1], 1)
            out[i, q] = upd[i]
    return out


def _body(variant):
    def layer(h, xs):
        k, u, pos = xs
        k1 = k
        rest = (k.shape[1:])
        k = lax.dynamic_update_slice(k, u[None], (pos,) + (0,) * len(rest))
        if variant == "two":
            k = lax.dynamic_update_slice(k, u[None], (pos + 1,) + (0,) * len(rest))
        if variant in ("read", "two", "reverse"):
            h = h + jnp.sum(k.astype(jnp.float32))
        if variant == "read_old":
            h = h + jnp.sum(k1.astype(jnp.float32)) - jnp.sum(k.astype(jnp.float32))
        return h, k
    return layer


def _program(variant, L):
    def f(cache, upd, pos):
        body = _body(variant)
        posv = jnp.broadcast_to(pos, (L,))
        h, new = lax.scan(body, jnp.float32(0), (cache, upd, posv),
                          reverse=variant == "reverse")
        return h, new
    return f


_DTYPES = [np.float32, jnp.bfloat16, np.int32, np.int8, np.float16]


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(params=["default", "all"])
def inlining(request, monkeypatch):
    """The pass sees a scan's body only once its calls are inlined, which
    devices that fuse do (CUDA); IRON_INLINE_CALLS=all makes the host
    device inline too, so that the rewritten loop runs on the host."""
    if request.param == "all":
        monkeypatch.setenv("IRON_INLINE_CALLS", "all")
    jax.clear_caches()
    yield request.param
    jax.clear_caches()


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_scan_slab_update_sweep(dtype, inlining, iron_device, cpu_device):
    rng = np.random.default_rng(7 + np.dtype(dtype).num)
    variants = ["stack", "read", "read_old", "two", "reverse"]
    for case in range(20):
        variant = variants[case % len(variants)]
        L = int(rng.integers(1, 5))
        T = int(rng.integers(1, 9))
        rest = tuple(int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 3))))
        cache = _values(rng, (L, T) + rest, dtype)
        upd = _values(rng, (L,) + rest, dtype)
        pos = np.int32(rng.integers(-3, T + 3))
        donate = bool(case % 3 == 0)
        f = jax.jit(_program(variant, L), donate_argnums=(0,) if donate else ())
        args = [jax.device_put(v, iron_device) for v in (cache, upd, pos)]
        h, new = f(*args)
        want = _model(cache, upd, pos, two=variant == "two")
        msg = f"case {case} {variant} L={L} T={T} rest={rest} pos={pos} donate={donate}"
        np.testing.assert_array_equal(np.asarray(new), want, err_msg=msg)
        href, newref = jax.jit(_program(variant, L))(
            *[jax.device_put(v, cpu_device) for v in (cache, upd, pos)])
        np.testing.assert_array_equal(np.asarray(newref), want, err_msg=msg)
        np.testing.assert_allclose(np.asarray(h), np.asarray(href),
                                   rtol=2e-2 if dtype in (jnp.bfloat16, np.float16) else 1e-5,
                                   atol=1e-2, err_msg=msg)
        if not donate:  # the caller's cache is untouched
            np.testing.assert_array_equal(np.asarray(args[0]), cache, err_msg=msg)


def test_input_cache_read_after_the_scan(inlining, iron_device):
    """The loop's initial cache is still read after the loop: the in-place
    writes must go to a copy."""
    L, T, D = 3, 5, 4
    rng = np.random.default_rng(1)
    cache = rng.standard_normal((L, T, D)).astype(np.float32)
    upd = rng.standard_normal((L, D)).astype(np.float32)

    def f(cache, upd, pos):
        _, new = _program("read", L)(cache, upd, pos)
        return new, cache * 2
    new, old2 = jax.jit(f)(*[jax.device_put(v, iron_device)
                              for v in (cache, upd, np.int32(2))])
    np.testing.assert_array_equal(np.asarray(new), _model(cache, upd, 2))
    np.testing.assert_array_equal(np.asarray(old2), cache * 2)


def _decode_step(T, D, H):
    """The decode step of bench/kernels.py in small: pre-norm layers as a
    scan over stacked weights and a KV cache."""
    dh = D // H

    def layer(h, p):
        wqkv, wo, k, v, pos = p
        q, kn, vn = jnp.split(h @ wqkv, 3)
        k = lax.dynamic_update_slice(k, kn[None], (pos, 0))
        v = lax.dynamic_update_slice(v, vn[None], (pos, 0))
        s = jnp.einsum("hd,thd->ht", q.reshape(H, dh), k.reshape(T, H, dh))
        s = jnp.where(jnp.arange(T) <= pos, s, -jnp.inf)
        a = jnp.einsum("ht,thd->hd", jax.nn.softmax(s, -1),
                       v.reshape(T, H, dh)).reshape(D)
        return h + a @ wo, (k, v)

    def step(w, cache, x, pos):
        L = w[0].shape[0]
        h, (k, v) = lax.scan(layer, x, (*w, *cache, jnp.broadcast_to(pos, (L,))))
        return h, (k, v)
    return step


def _decode_args(L, T, D, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((L, D, 3 * D)).astype(np.float32) / 8,
         rng.standard_normal((L, D, D)).astype(np.float32) / 8)
    cache = (rng.standard_normal((L, T, D)).astype(np.float32),
             rng.standard_normal((L, T, D)).astype(np.float32))
    x = rng.standard_normal((D,)).astype(np.float32)
    return w, cache, x


def test_decode_step_matches_cpu(inlining, iron_device, cpu_device):
    L, T, D, H = 3, 16, 32, 4
    w, cache, x = _decode_args(L, T, D)
    step = jax.jit(_decode_step(T, D, H), donate_argnums=(1,))
    put = lambda t, d: jax.tree.map(lambda a: jax.device_put(a, d), t)  # noqa
    got = step(put(w, iron_device), put(cache, iron_device),
               put(x, iron_device), jax.device_put(np.int32(7), iron_device))
    ref = jax.jit(_decode_step(T, D, H))(put(w, cpu_device), put(cache, cpu_device),
                                         put(x, cpu_device),
                                         jax.device_put(np.int32(7), cpu_device))
    for g, r, c in zip(jax.tree.leaves(got)[1:], jax.tree.leaves(ref)[1:], cache):
        # Row 7 is this token's keys/values (a dot: rounding may differ);
        # every other row is the input's, bit for bit.
        g, r = np.asarray(g), np.asarray(r)
        np.testing.assert_allclose(g[:, 7], r[:, 7], rtol=1e-5, atol=1e-6)
        keep = np.arange(T) != 7
        np.testing.assert_array_equal(g[:, keep], c[:, keep])
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(ref[0]),
                               rtol=1e-4, atol=1e-4)


def test_switch_off_gives_same_bits(inlining, iron_device, monkeypatch):
    """The rewrite moves no byte of the cache but the token's rows. On the
    host the results are the same bits either way. On CUDA the attention's
    sums read the slab in place as fused reductions with the rewrite and
    from a copy (another dot kernel) without it: the token's rows of later
    layers and the hidden state then differ in rounding only (H100: 1 ulp,
    12 of 256 elements)."""
    L, T, D, H = 2, 8, 16, 2
    w, cache, x = _decode_args(L, T, D, seed=3)
    put = lambda t: jax.tree.map(lambda a: jax.device_put(a, iron_device), t)  # noqa
    outs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("IRON_SCAN_IN_PLACE", flag)
        jax.clear_caches()
        outs.append(jax.jit(_decode_step(T, D, H))(
            put(w), put(cache), put(x), jax.device_put(np.int32(5), iron_device)))
    jax.clear_caches()
    if "NVIDIA" not in str(iron_device.device_kind):
        for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        return
    keep = np.arange(T) != 5
    for a, b in zip(jax.tree.leaves(outs[0])[1:], jax.tree.leaves(outs[1])[1:]):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_array_equal(a[:, keep], b[:, keep])
        np.testing.assert_allclose(a[:, 5], b[:, 5], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(outs[0][0]), np.asarray(outs[1][0]),
                               rtol=1e-5, atol=1e-6)


def test_pass_fires_on_the_decode_step(iron_device, monkeypatch):
    """Both caches' slabs are updated in place, and the attention's reads
    of the slab come from the stacked cache (no slab copy kernel left)."""
    tool = find_tool()
    if tool is None:
        pytest.skip("iron-dump not built")
    L, T, D, H = 2, 8, 16, 2
    w, cache, x = _decode_args(L, T, D)
    with tempfile.TemporaryDirectory() as d:
        monkeypatch.setenv("IRON_DUMP_DIR", d)
        jax.clear_caches()
        put = lambda t: jax.tree.map(lambda a: jax.device_put(a, iron_device), t)  # noqa
        jax.jit(_decode_step(T, D, H), donate_argnums=(1,))(
            put(w), put(cache), put(x), jax.device_put(np.int32(1), iron_device))
        monkeypatch.delenv("IRON_DUMP_DIR")
        arts = [p for p in glob.glob(os.path.join(d, "*.mlirbc")) if "decode" in p or "step" in p]
        assert arts, os.listdir(d)
        r = subprocess.run([tool, "--fuse-cuda", arts[0]], capture_output=True,
                           text=True, timeout=120)
        # The CUDA generator takes every kernel of the rewritten program
        # (a load's chain of reshapes: the iteration space is the chain's
        # last link's shape).
        k = subprocess.run([tool, "--cuda-kernels", arts[0]], capture_output=True,
                           text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    refused = [ln for ln in k.stderr.splitlines() if "not supported" in ln]
    assert not refused, refused
    m = re.search(r"(\d+) scanned slabs updated in place", r.stderr)
    assert m and int(m.group(1)) == 2, r.stderr
    # No kernel of main's loop makes a whole [T, D] slab any more (before:
    # one slab copy out of each cache and one into each stacked result).
    main = r.stdout.split("func.func private")[0]
    loop = main[main.index("stablehlo.while"):]
    assert not re.search(rf"\}}\) : \([^\n]*\) -> tensor<{T}x{D}xf32>", loop), loop


@pytest.mark.parametrize("num", [0, 1, 2, 5])
def test_loop_carries_moved_in(num, inlining, iron_device):
    """A while takes its carries by move when its inputs die there
    (executor.c): a fori_loop with traced bounds reads its counter and
    limit from the carries, and a carry array updated in place from
    iteration 0 leaves the caller's array alone."""
    def count(lo, num, x):
        def body(i, c):
            tot, x = c
            return tot + i, x.at[i % x.shape[0]].add(1.0)
        return lax.fori_loop(lo, num, body, (0, x * 1.0))
    x = np.arange(4, dtype=np.float32)
    put = lambda v: jax.device_put(v, iron_device)  # noqa
    tot, y = jax.jit(count)(put(np.int32(0)), put(np.int32(num)), put(x))
    want = x.copy()
    for i in range(num):
        want[i % 4] += 1
    assert int(tot) == sum(range(num))
    np.testing.assert_array_equal(np.asarray(y), want)
    tot, _ = jax.jit(count)(put(np.int32(1)), put(np.int32(num)), put(x))
    assert int(tot) == sum(range(1, num))

