"""Buffer donation on `iron`: donated inputs are consumed (deleted), the
result is still right, and a donated buffer cannot be used again."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp


def device(request, fixture, platform):
    try:
        return request.getfixturevalue(fixture)
    except pytest.FixtureLookupError:
        return jax.devices(platform)[0]


@pytest.fixture
def iron(request):
    return device(request, "iron_device", "iron")


def test_donated_input_is_deleted_and_result_correct(iron):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.full((3, 4), 0.5, np.float32)
    x = jax.device_put(a, iron)
    y = jax.device_put(b, iron)
    f = jax.jit(lambda x, y: x * 2.0 + y, donate_argnums=0)
    r = f(x, y)
    np.testing.assert_array_equal(np.asarray(r), a * 2.0 + b)
    assert r.devices() == {iron}
    assert x.is_deleted()
    assert not y.is_deleted()  # not donated: untouched and usable
    np.testing.assert_array_equal(np.asarray(y), b)


def test_reusing_donated_buffer_raises(iron):
    x = jax.device_put(np.ones((4,), np.float32), iron)
    f = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    r = f(x)
    assert x.is_deleted()
    with pytest.raises(Exception, match="deleted|donated"):
        np.asarray(x)
    with pytest.raises(Exception, match="deleted|donated"):
        f(x)
    # The result and the device stay fine.
    np.testing.assert_array_equal(np.asarray(r), np.full((4,), 2.0, np.float32))
    np.testing.assert_array_equal(np.asarray(f(r)), np.full((4,), 3.0, np.float32))


def test_donation_in_a_training_loop(iron):
    # The usual pattern: state donated every step, its replacement fed back.
    w = jax.device_put(np.zeros((8, 8), np.float32), iron)
    g = jax.device_put(np.ones((8, 8), np.float32), iron)
    step = jax.jit(lambda w, g: (w - 0.25 * g, jnp.sum(w)), donate_argnums=0)
    olds = []
    for _ in range(10):
        olds.append(w)
        w, s = step(w, g)
    assert all(o.is_deleted() for o in olds)
    np.testing.assert_allclose(np.asarray(w), np.full((8, 8), -2.5, np.float32))
    assert float(s) == pytest.approx(-2.25 * 64)


def test_donation_of_several_args_and_pytrees(iron):
    params = {"a": jax.device_put(np.full((3,), 2.0, np.float32), iron),
              "b": jax.device_put(np.arange(3, dtype=np.int32), iron)}
    extra = jax.device_put(np.full((3,), 10.0, np.float32), iron)
    f = jax.jit(lambda p, e: ({"a": p["a"] * e, "b": p["b"] + 1}, e.sum()),
                donate_argnums=(0,))
    new, total = f(params, extra)
    assert params["a"].is_deleted() and params["b"].is_deleted()
    assert not extra.is_deleted()
    np.testing.assert_array_equal(np.asarray(new["a"]), np.full((3,), 20.0))
    np.testing.assert_array_equal(np.asarray(new["b"]), np.arange(1, 4))
    assert float(total) == 30.0


def test_explicit_delete(iron):
    x = jax.device_put(np.ones((5,), np.float32), iron)
    keep = jax.device_put(np.arange(5, dtype=np.float32), iron)
    x.delete()
    assert x.is_deleted()
    with pytest.raises(Exception, match="deleted"):
        np.asarray(x)
    np.testing.assert_array_equal(np.asarray(keep * 2), np.arange(5) * 2.0)


def test_identity_result_does_not_alias_undonated_input():
    # XLA returns a fresh buffer for an output that is an undonated input:
    # deleting the input must leave the result intact (jax's own
    # test_trivial_computations checks this).
    dev = jax.devices("iron")[0]
    x = jax.device_put(np.arange(6, dtype=np.float32).reshape(2, 3), dev)
    y = jax.jit(lambda a: a)(x)
    r = jax.jit(lambda a: a.reshape(3, 2))(x)
    assert y.unsafe_buffer_pointer() != x.unsafe_buffer_pointer()
    assert r.unsafe_buffer_pointer() != x.unsafe_buffer_pointer()
    x.delete()
    np.testing.assert_array_equal(np.asarray(y), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(r), np.arange(6).reshape(3, 2))
