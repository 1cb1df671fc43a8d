"""Bit-exact rounding of small dots against XLA:CPU.

Matrix-vector products whose contraction is shorter than one AVX2 vector
(k < 8 for f32, k < 4 for f64) are summed by XLA:CPU in order with fused
multiply-adds; iron's host device does the same (src/device/host/dot_gemm.c),
so they agree bit for bit (the CUDA device's cuBLAS sums in its own order:
close, not bit-exact). Last-bit differences matter: finite-difference gradient
checks of small solves (jax's custom_linear_solve_test) amplify them by
1/eps."""
import numpy as np
import pytest
import jax

from test_linalg import cpu, iron, x64_for  # noqa: F401  (fixtures)


@pytest.mark.parametrize("dtype,k", [(np.float32, 3), (np.float32, 7),
                                     (np.float64, 2), (np.float64, 3)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_short_matvec_bit_exact(dtype, k, iron, cpu):
    rng = np.random.default_rng(31 + k)
    with x64_for(dtype):
        a = rng.standard_normal((4, 64, k)).astype(dtype)
        x = rng.standard_normal((4, k)).astype(dtype)

        def f(a, x):
            return (a[0] @ x[0],                        # matrix-vector
                    jax.vmap(lambda m, v: m @ v)(a, x),  # batched
                    a[1] @ x[1][:, None])               # one column

        def on(dev):
            with jax.default_device(dev):
                return jax.jit(f)(jax.device_put(a, dev),
                                  jax.device_put(x, dev))
        got, want = on(iron), on(cpu)
        for i, (g, w) in enumerate(zip(got, want)):
            if iron.device_kind == "host":
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w),
                                              err_msg=f"form {i}")
            else:  # cuBLAS sums in its own order (no bit contract there)
                np.testing.assert_allclose(
                    np.asarray(g), np.asarray(w), err_msg=f"form {i}",
                    rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)
