"""Reductions at the sizes where the CUDA reduce kernels change shape
(gen/reduce.c: staged ordered loops for argmax, batched loads, split rows
and columns, fused producers): argmax/argmin of [rows, n] over either axis
and of everything, with NaNs, ties and signed zeros, against numpy's first
index rule (bit for bit); batch norm's per-channel mean and variance of an
NHWC tensor (f32 and bf16) against jax's CPU backend; a variadic lax.reduce
of 1..12 operands (argmax with payloads, past the 8 operands the CUDA
device once refused) against jax's CPU backend, bit for bit. On the host
device these check the same programs; on CUDA (IRON_DEVICE=cuda) the
kernels of the reduce rework."""
import ml_dtypes
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax


def _values(shape, seed, nan_rate=1e-3):
    rng = np.random.default_rng(seed)
    vals = np.array([1.0, 2.0, 0.0, -0.0, -1.0, 2.0, np.inf, -np.inf],
                    np.float32)
    x = vals[rng.integers(0, 8, size=shape)]
    x[rng.random(shape) < nan_rate] = np.nan
    return x


def _np_argmax(x, axis, is_max):
    # numpy: the first NaN, else the first max/min (as jax's argmax).
    f = np.argmax if is_max else np.argmin
    return f(x, axis=axis)


# [rows, n] pairs around the CUDA paths: warp per row (n < 2048), block per
# row, split rows (few rows, long), columns (split and not), whole stages.
SHAPES = [(3, 33), (64, 1000), (300, 8192), (3, 32773), (40, 8192),
          (2, 200003), (8192, 3), (131072, 5), (4096, 64)]


@pytest.mark.parametrize("shape", SHAPES)
def test_argmax_shapes(shape, iron_device):
    x = _values(shape, sum(shape))
    # Some rows all -0 (the kept zero's sign), some NaN-heavy.
    x[::7] = -0.0
    x[1::9, ::5] = np.nan
    xd = jax.device_put(x, iron_device)
    bad = []
    for is_max in (True, False):
        f = jnp.argmax if is_max else jnp.argmin
        for axis in (0, 1, None):
            got = np.asarray(jax.jit(lambda v: f(v, axis))(xd))
            want = _np_argmax(x, axis, is_max)
            if not np.array_equal(got, want):
                bad.append(f"{'max' if is_max else 'min'} axis={axis}: "
                           f"{int(np.sum(got != want))} differ")
    assert not bad, bad


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_batch_norm_stats(dtype, iron_device, cpu_device):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((32, 16, 16, 64)) * 2 + 0.5).astype(dtype)

    def stats(h):
        mu = h.mean((0, 1, 2))
        var = ((h - mu) ** 2).mean((0, 1, 2))
        return mu, var, h.sum((0, 1, 2)), (h * h).sum((0, 1, 2))

    got = jax.jit(stats)(jax.device_put(x, iron_device))
    want = jax.jit(stats)(jax.device_put(x, cpu_device))
    tol = 1e-5 if dtype == np.float32 else 2e-2
    for g, w in zip(got, want):
        g = np.asarray(g, np.float64)
        w = np.asarray(w, np.float64)
        assert np.allclose(g, w, rtol=tol, atol=tol * np.abs(w).max()), (
            np.abs(g - w).max())


def _argmax_payload_body(num):
    def body(a, x):
        av, ai, xv, xi = a[0], a[1], x[0], x[1]
        pick = (av > xv) | (av != av)
        pi = pick | ((av == xv) & (ai < xi))
        out = [jnp.where(pick, av, xv), jnp.where(pi, ai, xi)]
        for k in range(2, num):
            out.append(jnp.where(pi, a[k], x[k]))
        return tuple(out)
    return body


@pytest.mark.parametrize("num", [2, 3, 8, 9, 12])
@pytest.mark.parametrize("shape,axes", [((5, 20001), (1,)),
                                        ((3000, 40), (0,)),
                                        ((70001,), (0,))])
def test_variadic_reduce(num, shape, axes, iron_device, cpu_device):
    x = _values(shape, num)
    # XLA:CPU refuses floats of mixed precisions in one reduce.
    dts = [np.float32, np.int32, np.int16, np.uint8, np.float32, np.int8,
           np.uint32, np.int32, np.float32, np.uint16, np.int8, np.float32]

    def f(v):
        idx = lax.broadcasted_iota(jnp.int32, v.shape, axes[0])
        ops = [v, idx]
        inits = [jnp.float32(-jnp.inf), jnp.int32(0)]
        for k in range(2, num):
            ops.append(((idx * 31 + k * 7) % 100).astype(dts[k]))
            inits.append(jnp.asarray(100 + k, dts[k]))
        return lax.reduce(tuple(ops), tuple(inits),
                          _argmax_payload_body(num), axes)

    got = jax.jit(f)(jax.device_put(x, iron_device))
    want = jax.jit(f)(jax.device_put(x, cpu_device))
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if k == 0:  # values: NaN == NaN; signed zeros by bits
            g = np.where(np.isnan(g), np.float32(np.nan), g)
            w = np.where(np.isnan(w), np.float32(np.nan), w)
            same = np.array_equal(g.view(np.uint32), w.view(np.uint32))
        else:
            same = np.array_equal(g, w)
        assert same, f"operand {k}"
