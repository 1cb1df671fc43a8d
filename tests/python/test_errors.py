"""Errors on `iron` are clean Python exceptions: an op the backend does not
support yet fails at compile time naming the op and the user's source line;
bad arguments raise; nothing crashes, and the process, the device and other
buffers stay usable afterwards."""
import os
import re

import numpy as np
import pytest
import jax
import jax.numpy as jnp

THIS_FILE = os.path.basename(__file__)


def device(request, fixture, platform):
    try:
        return request.getfixturevalue(fixture)
    except pytest.FixtureLookupError:
        return jax.devices(platform)[0]


@pytest.fixture
def iron(request):
    return device(request, "iron_device", "iron")


def rng_fn(x):
    return lax.rng_uniform(x[0], x[1], (3,)) * 2.0
RNG_LINE = rng_fn.__code__.co_firstlineno + 1  # the lax.rng_uniform line


def assert_names_op_and_line(message, op, line):
    assert f"{op} is not supported yet" in message, message
    # The location as jax records it: file name then line (e.g.
    # "tests/python/test_errors.py":31:11 or test_errors.py:31).
    pattern = re.escape(THIS_FILE) + r'"?:' + str(line) + r"\b"
    assert re.search(pattern, message), (
        f"expected {THIS_FILE}:{line} in the message:\n{message}")


def check_still_usable(iron, keep, keep_value):
    np.testing.assert_array_equal(np.asarray(keep), keep_value)
    r = jax.jit(lambda a: a * 3 + 1)(keep)
    assert r.devices() == {iron}
    np.testing.assert_array_equal(np.asarray(r), keep_value * 3 + 1)


def test_unsupported_rng_names_op_and_line(iron):
    keep_value = np.arange(6, dtype=np.float32)
    keep = jax.device_put(keep_value, iron)
    x = jax.device_put(np.ones((8,), np.float32), iron)
    with pytest.raises(Exception) as info:
        jax.jit(rng_fn)(x)
    assert_names_op_and_line(str(info.value), "stablehlo.rng", RNG_LINE)
    check_still_usable(iron, keep, keep_value)


def test_unsupported_op_fails_at_compile_time(iron):
    x = jax.device_put(np.ones((8,), np.float32), iron)
    lowered = jax.jit(rng_fn).lower(x)  # lowering is jax's: it works
    with pytest.raises(Exception) as info:
        lowered.compile()  # the backend refuses here, before any execute
    assert_names_op_and_line(str(info.value), "stablehlo.rng", RNG_LINE)


def test_repeated_failures_then_success(iron):
    x = jax.device_put(np.ones((4,), np.float32), iron)
    for _ in range(3):
        with pytest.raises(Exception, match="not supported yet"):
            jax.jit(lambda v: lax.rng_uniform(v[0], v[1], (2,)))(x)
    np.testing.assert_allclose(np.asarray(jax.jit(jnp.sin)(x)), np.sin(np.ones(4)),
                               rtol=1e-6)


def test_wrong_argument_dtype_and_shape_raise(iron):
    keep_value = np.linspace(0, 1, 5, dtype=np.float32)
    keep = jax.device_put(keep_value, iron)
    x = jax.device_put(np.ones((3,), np.float32), iron)
    compiled = jax.jit(lambda v: v * 2).lower(x).compile()
    np.testing.assert_array_equal(np.asarray(compiled(x)), np.full(3, 2.0))
    with pytest.raises(TypeError):
        compiled(jax.device_put(np.ones((3,), np.int32), iron))
    with pytest.raises(TypeError):
        compiled(jax.device_put(np.ones((4,), np.float32), iron))
    with pytest.raises(TypeError):
        compiled(x, x)
    with pytest.raises(TypeError):  # shape error while tracing
        jax.jit(lambda a, b: a @ b)(x, jax.device_put(np.ones((4, 2), np.float32), iron))
    check_still_usable(iron, keep, keep_value)


def test_unusual_dtype_round_trips_or_raises_cleanly(iron):
    # float8 may or may not be supported by the backend yet; either way it
    # must not crash or corrupt: the values come back exactly or it raises.
    v = np.array([0.5, -1.0, 2.0, 448.0], dtype=jnp.float8_e4m3fn)
    try:
        b = jax.device_put(v, iron)
        got = np.asarray(b)
    except Exception:
        pass
    else:
        np.testing.assert_array_equal(got.view(np.uint8), v.view(np.uint8))
    keep_value = np.arange(3, dtype=np.int32)
    check_still_usable(iron, jax.device_put(keep_value, iron), keep_value)


def test_host_to_device_transfers_of_every_dtype(iron):
    rng = np.random.default_rng(1)
    for dt in [np.float32, np.float16, jnp.bfloat16, np.int8, np.int16, np.int32,
               np.uint8, np.uint16, np.uint32, np.bool_, np.complex64]:
        v = (rng.standard_normal((3, 5)) * 50).astype(dt)
        b = jax.device_put(v, iron)
        assert b.devices() == {iron}
        got = np.asarray(b)
        assert got.dtype == v.dtype
        np.testing.assert_array_equal(got, v)
        # Non-contiguous host views transfer their logical contents.
        np.testing.assert_array_equal(np.asarray(jax.device_put(v[:, ::2].T, iron)),
                                      v[:, ::2].T)
