"""approx_max_k / approx_min_k on iron (the XLA fallback: an exact top-k),
compared with XLA:CPU. aggregate_to_topk=False returns the larger
approximate output size, sorted."""
import numpy as np
import pytest
import jax
from jax import lax


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("dim,aggregate", [(1, True), (0, True), (1, False)])
def test_approx_top_k_matches_cpu(iron_device, cpu_device, is_max, dim,
                                  aggregate):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 200)).astype(np.float32)
    # No ties: XLA sorts with is_stable=false (std::sort on CPU) and its
    # order among equal values is not reproduced (see src/device/host/sort.c).
    fn = lax.approx_max_k if is_max else lax.approx_min_k

    def f(a):
        return fn(a, 7, reduction_dimension=dim, aggregate_to_topk=aggregate)

    got = jax.jit(f, device=iron_device)(x)
    want = jax.jit(f, device=cpu_device)(x)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
