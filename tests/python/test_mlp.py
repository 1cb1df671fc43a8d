"""examples/train_mlp.py trains the same on `iron` as on jax's CPU backend."""
import importlib.util
import pathlib

import numpy as np
import pytest
import jax

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"


def device(request, fixture, platform):
    try:
        return request.getfixturevalue(fixture)
    except pytest.FixtureLookupError:
        return jax.devices(platform)[0]


@pytest.fixture(scope="module")
def train_mlp():
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # main() is guarded: nothing runs here
    return mod


def test_mlp_loss_curves_match(train_mlp, request):
    iron = device(request, "iron_device", "iron")
    cpu = device(request, "cpu_device", "cpu")
    steps = 50
    got, params = train_mlp.train(steps, device=iron, log_every=0,
                                  return_params=True)
    want = train_mlp.train(steps, device=cpu, log_every=0)
    for leaf in jax.tree_util.tree_leaves(params):
        assert leaf.devices() == {iron}
    assert len(got) == len(want) == steps
    assert np.all(np.isfinite(got))
    # Same data, same init, same optimizer: the curves agree to float32
    # accuracy (differences come only from summation order in matmuls and
    # reductions, compounded over 50 adam steps).
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-4)
    assert got[-1] < got[0] * 0.9, "the loss did not go down"
