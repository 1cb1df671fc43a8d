"""dynamic_slice and dynamic_update_slice clamp each op's own start indices
(StableHLO: start = clamp(start, 0, operand_dim - size_dim), per op), also
when one dynamic slice reads another's result, on the iron device (host or
CUDA, as IRON_DEVICE says), against a numpy model of that definition.

XLA:CPU (jax 0.10.2 here) differs from the definition on nested dynamic
slices whose inner start is out of range: it folds the two slices into one
whose start is the sum of the unclamped starts, then clamps once (found by
the GPU fuzzer, fz_26297974: b[1, 127 -> 33 : 128][:, 1 : 5] is
b[1, 34:38]; XLA:CPU returns b[1, 124:128]). iron follows the definition;
where every start is in range both agree, and the sweep checks that too
(an outer start out of range is enough for XLA:CPU's fold to differ).
"""
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax


def _clamp(start, dim, size):
    # jax's lax.dynamic_slice first wraps a negative start once (s + dim,
    # numpy-style); the op itself then clamps.
    start = int(start) + dim if int(start) < 0 else int(start)
    return min(max(start, 0), dim - size)


def _model_ds(x, starts, sizes):
    idx = tuple(slice(_clamp(s, d, z), _clamp(s, d, z) + z)
                for s, d, z in zip(starts, x.shape, sizes))
    return x[idx]


def _model_dus(x, u, starts):
    out = x.copy()
    idx = tuple(slice(_clamp(s, d, z), _clamp(s, d, z) + z)
                for s, d, z in zip(starts, x.shape, u.shape))
    out[idx] = u
    return out


def test_fz_26297974_nested_dynamic_slice(iron_device):
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, (7, 128)).astype(bool)
    f = jax.jit(lambda b, s: lax.dynamic_slice(
        lax.dynamic_slice(b, (s, jnp.int32(127)), (1, 95)),
        (jnp.int32(0), s), (1, 4)))
    got = np.asarray(f(jax.device_put(b, iron_device),
                       jax.device_put(np.int32(1), iron_device)))
    np.testing.assert_array_equal(got, b[1:2, 34:38])


_DTYPES = [np.int8, np.int32, np.float32, np.bool_, jnp.bfloat16, np.uint16]


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_nested_dynamic_slices_sweep(dtype, iron_device, cpu_device):
    rng = np.random.default_rng(int(np.dtype(dtype).num))
    agree_checked = 0
    for case in range(24):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(1, 9)) for _ in range(rank))
        mid = tuple(int(rng.integers(1, d + 1)) for d in shape)
        inner = tuple(int(rng.integers(1, m + 1)) for m in mid)
        upd = tuple(int(rng.integers(1, m + 1)) for m in mid)
        if case % 2:  # starts anywhere, out of range on either side
            s1 = rng.integers(-4, 12, rank).astype(np.int32)
            s2 = rng.integers(-4, 12, rank).astype(np.int32)
            s3 = rng.integers(-4, 12, rank).astype(np.int32)
        else:  # every start in range
            s1 = np.array([rng.integers(0, d - m + 1) for d, m in zip(shape, mid)], np.int32)
            s2 = np.array([rng.integers(0, m - z + 1) for m, z in zip(mid, inner)], np.int32)
            s3 = np.array([rng.integers(0, m - z + 1) for m, z in zip(mid, upd)], np.int32)
        x = (rng.integers(-50, 50, shape) if dtype is not np.bool_
             else rng.integers(0, 2, shape)).astype(dtype)
        u = (rng.integers(-50, 50, upd) if dtype is not np.bool_
             else rng.integers(0, 2, upd)).astype(dtype)

        def fn(x, u, s1, s2, s3):
            m = lax.dynamic_slice(x, tuple(s1), mid)
            a = lax.dynamic_slice(m, tuple(s2), inner)
            w = lax.dynamic_update_slice(m, u, tuple(s3))
            c = lax.dynamic_slice(w, tuple(s2), inner)
            return a, w, c

        m = _model_ds(x, s1, mid)
        want_w = _model_dus(m, u, s3)
        want = (_model_ds(m, s2, inner), want_w, _model_ds(want_w, s2, inner))
        args = (x, u, s1, s2, s3)
        got = jax.jit(fn)(*[jax.device_put(v, iron_device) for v in args])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w,
                                          err_msg=f"case {case}: {shape} {mid} {inner} {s1} {s2} {s3}")
        if case % 2 == 0:  # XLA:CPU keeps the definition here
            ref = jax.jit(fn)(*[jax.device_put(v, cpu_device) for v in args])
            for g, r in zip(got, ref):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(r))
            agree_checked += 1
    assert agree_checked > 0
