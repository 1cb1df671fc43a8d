"""jax features beyond plain programs that jax's own test suite exercises:
Shardy sharding groups, memory kinds (device / pinned_host / unpinned_host),
transfer guards, layouts, error checks. Each is compared with XLA:CPU."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding


# --------------------------------------------------------------------------
# sdy.sharding_group (shard_alike): a no-op on one device.


def test_shard_alike_single_device(iron_device, cpu_device):
    from jax.experimental.shard_alike import shard_alike

    def f(x, y):
        a, b = shard_alike(x * 2, y + 1)
        return a + b.sum(), b

    x = np.arange(6, dtype=np.float32)
    y = np.ones(6, dtype=np.float32)
    text = jax.jit(f).lower(x, y).as_text()
    assert "sdy.sharding_group" in text
    got = jax.jit(f, device=iron_device)(x, y)
    want = jax.jit(f, device=cpu_device)(x, y)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
