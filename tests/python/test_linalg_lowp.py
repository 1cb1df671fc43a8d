"""bfloat16/float16 linear algebra on iron (python/ironjax/linalg_lowp.py).

jax's CPU backend refuses 16-bit operands of its LAPACK-backed primitives;
iron computes them in f32 and rounds the results back. Checked against
XLA:CPU's f32 result on the same (rounded) inputs, within the 16-bit type's
precision, and for jax's result dtypes.

From jax 0.11 on, the primitives themselves refuse 16-bit operands when
they are traced, on every platform; there the tests check that iron gives
the same TypeError as jax's front end.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.lax import linalg as lax_linalg

CASES = {
    "eig": lambda x: lax_linalg.eig(x, compute_left_eigenvectors=False,
                                    compute_right_eigenvectors=False),
    "lu": lax_linalg.lu,
    "svd": lambda x: lax_linalg.svd(x, full_matrices=False, compute_uv=False),
    "qr_r": lambda x: jnp.abs(jnp.linalg.qr(x)[1]),
    "eigvalsh": lambda x: jnp.linalg.eigvalsh(x + x.T),
    "cholesky": lambda x: jnp.linalg.cholesky(
        x @ x.T + 4 * jnp.eye(x.shape[0], dtype=x.dtype)),
    "solve": lambda x: jnp.linalg.solve(x, x[:, :1]),
}
TOL = {jnp.bfloat16: 5e-2, jnp.float16: 5e-3}


def frontend_refuses(fn, x):
    """True when jax refuses x's dtype while tracing fn (jax >= 0.11)."""
    try:
        jax.eval_shape(fn, x)
    except TypeError as e:
        if "does not accept dtype" in str(e):
            return True
        raise
    return False


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16],
                         ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_16bit_linalg_matches_f32(name, dtype, iron_device):
    fn = CASES[name]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5)).astype(np.float32) + 3 * np.eye(5, dtype=np.float32)
    x16 = jnp.asarray(a).astype(dtype)
    if frontend_refuses(fn, x16):
        with pytest.raises(TypeError, match="does not accept dtype"):
            jax.jit(fn)(jax.device_put(x16, iron_device))
        return
    got = jax.jit(fn)(jax.device_put(x16, iron_device))
    shapes = jax.eval_shape(fn, x16)
    cpu = jax.devices("cpu")[0]
    want = jax.jit(fn)(jax.device_put(x16.astype(jnp.float32), cpu))
    got_l, want_l = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_l) == len(jax.tree.leaves(shapes))
    for g, w, s in zip(got_l, want_l, jax.tree.leaves(shapes)):
        assert g.dtype == s.dtype and g.shape == s.shape
        g = np.asarray(g).astype(np.complex128 if np.iscomplexobj(g) else np.float64)
        w = np.asarray(w).astype(g.dtype)
        if name == "eig":  # eigenvalue order is LAPACK's; compare sorted
            g, w = np.sort_complex(g), np.sort_complex(w)
        np.testing.assert_allclose(g, w, rtol=TOL[dtype], atol=TOL[dtype])


def test_cpu_refuses_what_iron_runs():
    # The reason this exists: XLA:CPU (jax's rule) has no 16-bit LAPACK
    # (NotImplementedError); jax >= 0.11 refuses the dtype while tracing.
    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jnp.eye(3, dtype=jnp.bfloat16), cpu)
    with pytest.raises((NotImplementedError, TypeError)):
        jax.jit(lax_linalg.lu)(x)
