"""Every corpus program (tests/python/corpus.py) runs on `iron` and on jax's
own CPU backend with identical inputs; results must agree: same tree, dtypes
and shapes exactly, integers and bools bit-exact, floats within the case's
tolerances with NaNs in the same places."""
import hashlib

import numpy as np
import pytest
import jax

from corpus import ALL_CASES, case_config


def device(request, fixture, platform):
    """The conftest fixture if there is one, else the platform's first device."""
    try:
        return request.getfixturevalue(fixture)
    except pytest.FixtureLookupError:
        return jax.devices(platform)[0]


def case_seed(name):
    # Stable across processes and Python versions (unlike hash()).
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def run_on(c, args, dev):
    placed = [jax.device_put(a, dev) for a in args]
    with jax.default_device(dev):
        return jax.jit(c.fn, **c.jit_kwargs)(*placed)


def assert_leaf_equal(got, want, c, where):
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    g, w = np.asarray(got), np.asarray(want)
    kind = np.dtype(w.dtype).kind
    if kind in "biu":
        np.testing.assert_array_equal(g, w, err_msg=where, strict=True)
        return
    if kind not in "fc":  # bfloat16 and other ml_dtypes report kind 'V'
        g, w = g.astype(np.float32), w.astype(np.float32)
    elif w.dtype == np.float16:
        g, w = g.astype(np.float32), w.astype(np.float32)
    # equal_nan=True also requires the NaNs to be in the same positions.
    np.testing.assert_allclose(g, w, rtol=c.rtol, atol=c.atol, equal_nan=True,
                               err_msg=where)


@pytest.mark.parametrize("c", ALL_CASES, ids=lambda c: c.name)
def test_corpus_case(c, request):
    iron = device(request, "iron_device", "iron")
    cpu = device(request, "cpu_device", "cpu")
    with case_config(c):
        args = c.make_args(np.random.default_rng(case_seed(c.name)))
        want = run_on(c, args, cpu)
        got = run_on(c, args, iron)
        want_leaves, want_tree = jax.tree_util.tree_flatten(want)
        got_leaves, got_tree = jax.tree_util.tree_flatten(got)
        assert got_tree == want_tree
        for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
            where = f"{c.name}: output leaf {i}"
            assert g.devices() == {iron}, f"{where} lives on {g.devices()}"
            assert_leaf_equal(g, w, c, where)
