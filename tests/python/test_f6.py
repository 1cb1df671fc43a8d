"""float6_e2m3fn / float6_e3m2fn (PJRT element types 32 and 33) on `iron`.

XLA:CPU (jax 0.11.2) has these as storage only: arrays transfer, but it
cannot compile converts from f6 nor arithmetic on them, and its converts to
f6 give +-0 past the largest finite value. iron keeps them as buffers on
every device (transfers, data movement, select), converts both ways as
ml_dtypes does (round to nearest even, saturate, NaN -> the sign bit alone),
on the host and the CUDA device alike (bit for bit: the emulated kernels of
tests/c/test_cuda_lowp.c), and refuses f6 arithmetic and compares at
compile time by name on both. Run with IRON_DEVICE=cuda on a GPU machine
for the CUDA device."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

F6 = [ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn]
_ids = lambda d: np.dtype(d).name


@pytest.fixture(autouse=True)
def _jaxlib_knows_f6(iron_device):
    # jaxlib 0.10 cannot hand f6 arrays to any backend ("Unknown NumPy
    # dtype"); jax's own f6 tests need jaxlib_extension_version >= 476.
    try:
        jax.device_put(np.zeros(1, F6[0]), iron_device)
    except jax.errors.JaxRuntimeError as e:
        if "Unknown NumPy dtype" in str(e):
            pytest.skip(f"jaxlib {jax.__version__} has no f6 transfers")
        raise


def _all_values(dt, shape=(64,)):
    return np.arange(64, dtype=np.uint8).view(dt).reshape(shape)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("dt", F6, ids=_ids)
def test_f6_transfers_round_trip(iron_device, dt):
    for shape in [(64,), (4, 16), (2, 2, 16)]:
        x = _all_values(dt, shape)
        a = jax.device_put(x, iron_device)
        assert a.dtype == dt
        _same_bits(a, x)
        assert repr(a).startswith("Array(")
    empty = jax.device_put(np.zeros((0, 3), dt), iron_device)
    assert np.asarray(empty).shape == (0, 3)
    # jax's dtypes_test: a scalar of the type, created and printed.
    s = jax.device_put(np.array(1.5, dt), iron_device)
    assert np.asarray(s).astype(np.float32) == 1.5


@pytest.mark.parametrize("dt", F6, ids=_ids)
def test_f6_data_movement(iron_device, dt):
    x = jax.device_put(_all_values(dt, (4, 16)), iron_device)
    h = _all_values(dt, (4, 16))
    fns = {
        "identity": lambda v: v,
        "transpose": lambda v: v.T,
        "reshape": lambda v: v.reshape(8, 8),
        "slice": lambda v: v[1:3, ::3],
        "concat": lambda v: jnp.concatenate([v, v[::-1]], axis=0),
        "broadcast": lambda v: jnp.broadcast_to(v[0], (3, 16)),
        "gather": lambda v: v[jnp.array([3, 0, 2]), 5],
        "select": lambda v: jnp.where(jnp.arange(16) % 2 == 0, v, v[::-1]),
    }
    for name, f in fns.items():
        _same_bits(jax.jit(f)(x), f(h))


@pytest.mark.parametrize("dt", F6, ids=_ids)
def test_f6_converts(iron_device, dt):
    xs = np.array([0.1, 1.3, -7.9, 100, np.nan, np.inf, -np.inf, 1e-3, -0.0,
                   0.0625, 0.09375, 7.5, 8.0, 28, 30, -30, 0.15, 0.125,
                   3.25, -2.75], np.float32)
    to_f6 = jax.jit(lambda v: v.astype(dt))
    from_f6 = jax.jit(lambda v: v.astype(jnp.float32))
    _same_bits(to_f6(jax.device_put(xs, iron_device)), xs.astype(dt))
    allv = _all_values(dt)
    np.testing.assert_array_equal(
        np.asarray(from_f6(jax.device_put(allv, iron_device))),
        allv.astype(np.float32))
    ints = np.array([0, 1, -3, 7, 8, 29, -1000], np.int32)
    _same_bits(jax.jit(lambda v: v.astype(dt))(jax.device_put(ints,
                                                              iron_device)),
               ints.astype(np.float32).astype(dt))
    # f6 -> int truncates (7.5 -> 7: no f4E2M1FN-style saturation of the
    # largest value), and f6 -> the other f6 rounds to nearest even.
    other = F6[1] if dt == F6[0] else F6[0]
    np.testing.assert_array_equal(
        np.asarray(jax.jit(lambda v: v.astype(jnp.int32))(
            jax.device_put(allv, iron_device))),
        allv.astype(np.float32).astype(np.int32))
    _same_bits(jax.jit(lambda v: v.astype(other))(
        jax.device_put(allv, iron_device)), allv.astype(other))


@pytest.mark.parametrize("dt", F6, ids=_ids)
def test_f6_arithmetic_refused_by_name(iron_device, dt):
    x = jax.device_put(_all_values(dt), iron_device)
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"UNIMPLEMENTED.*stablehlo.add"):
        jax.jit(lambda v: jax.lax.add(v, v))(x)
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"UNIMPLEMENTED.*stablehlo.compare"):
        jax.jit(lambda v: jax.lax.lt(v, v))(x)
