"""Linear algebra on `iron` against jax's CPU backend: jnp.linalg /
jax.scipy.linalg / lax.linalg programs (LAPACK FFI custom calls, run by the
plugin with scipy's LAPACK), the native stablehlo.cholesky and
stablehlo.triangular_solve kernels, and a jax.export round trip."""
import contextlib
import zlib

import numpy as np
import pytest
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax._src.interpreters import mlir
from jax._src.lax import linalg as lax_linalg


def device(request, fixture, platform):
    try:
        return request.getfixturevalue(fixture)
    except pytest.FixtureLookupError:
        return jax.devices(platform)[0]


@pytest.fixture
def iron(request):
    return device(request, "iron_device", "iron")


@pytest.fixture
def cpu(request):
    return device(request, "cpu_device", "cpu")


DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 1e-4, np.float64: 1e-10, np.complex64: 1e-4,
       np.complex128: 1e-10}


def x64_for(dtype):
    wide = np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))
    return jax.enable_x64(True) if wide else contextlib.nullcontext()


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def general(rng, shape, dtype):
    return rand(rng, shape, dtype)


def hpd(rng, shape, dtype):
    """Hermitian positive definite (batched)."""
    a = rand(rng, shape, dtype)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def well_conditioned(rng, shape, dtype):
    n = shape[-1]
    return (rand(rng, shape, dtype) + 2 * n * np.eye(n)).astype(dtype)


def run(fn, args, dev):
    with jax.default_device(dev):
        return jax.jit(fn)(*[jax.device_put(a, dev) for a in args])


def compare(got, want, rtol, where, atol=None):
    got_l, got_t = jax.tree_util.tree_flatten(got)
    want_l, want_t = jax.tree_util.tree_flatten(want)
    assert got_t == want_t, where
    for i, (g, w) in enumerate(zip(got_l, want_l)):
        assert g.dtype == w.dtype and g.shape == w.shape, (where, i)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol,
                                   atol=rtol if atol is None else atol,
                                   equal_nan=True, err_msg=f"{where}: leaf {i}")


def check(fn, args, iron, cpu, dtype, where, rtol=None):
    want = run(fn, args, cpu)
    got = run(fn, args, iron)
    for leaf in jax.tree_util.tree_leaves(got):
        assert leaf.devices() == {iron}, where
    compare(got, want, TOL[dtype] if rtol is None else rtol, where)


def abs_cols(x):
    # Eigen/singular vectors are unique up to a phase per column.
    return jnp.abs(x)


# (name, function, input maker, shape). Shapes are batched; non-square where
# the routine allows it.
CASES = [
    ("cholesky", jnp.linalg.cholesky, hpd, (2, 3, 5, 5)),
    ("qr_reduced", lambda a: jnp.linalg.qr(a), general, (3, 6, 4)),
    ("qr_complete", lambda a: jnp.linalg.qr(a, mode="complete"), general,
     (2, 4, 6)),
    ("qr_r", lambda a: jnp.linalg.qr(a, mode="r"), general, (5, 3)),
    ("qr_pivoting", lambda a: jsl.qr(a, pivoting=True), general, (6, 4)),
    ("eigh", lambda a: (jnp.linalg.eigh(a)[0], abs_cols(jnp.linalg.eigh(a)[1])),
     hpd, (3, 5, 5)),
    ("eigh_upper", lambda a: jnp.linalg.eigh(a, UPLO="U")[0], hpd, (4, 4)),
    ("eigvalsh", jnp.linalg.eigvalsh, hpd, (2, 6, 6)),
    ("eig", lambda a: jnp.sort_complex(jnp.linalg.eigvals(a)), general,
     (3, 5, 5)),
    # A A^-1-style check of the eigenvectors (their phase is arbitrary).
    ("eig_vectors", lambda a: (lambda w, v: a.astype(v.dtype) @ v -
                               v * w[..., None, :])(*jnp.linalg.eig(a)),
     general, (2, 4, 4)),
    ("svd_values", lambda a: jnp.linalg.svd(a, compute_uv=False), general,
     (3, 5, 4)),
    ("svd_full", lambda a: (lambda u, s, vt: (abs_cols(u), s, jnp.abs(vt)))(
        *jnp.linalg.svd(a, full_matrices=True)), general, (2, 4, 4)),
    ("svd_reduced_wide", lambda a: (lambda u, s, vt: (u * jnp.conj(u), s))(
        *jnp.linalg.svd(a, full_matrices=False)), general, (2, 3, 5)),
    ("svd_qr_algorithm", lambda a: lax_linalg.svd(
        a, compute_uv=False, algorithm=lax_linalg.SvdAlgorithm.QR), general,
     (4, 6)),
    ("lu", lambda a: lax_linalg.lu(a), general, (3, 5, 5)),
    ("lu_wide", lambda a: lax_linalg.lu(a), general, (2, 3, 5)),
    ("scipy_lu", lambda a: jsl.lu(a), general, (5, 5)),
    ("solve", lambda a: jnp.linalg.solve(a, a[..., :2]), well_conditioned,
     (2, 5, 5)),
    ("inv", jnp.linalg.inv, well_conditioned, (3, 4, 4)),
    ("det", jnp.linalg.det, general, (3, 4, 4)),
    ("slogdet", jnp.linalg.slogdet, general, (2, 5, 5)),
    ("pinv", jnp.linalg.pinv, general, (2, 5, 3)),
    ("lstsq", lambda a: jnp.linalg.lstsq(a, a[:, :1])[0], general, (6, 4)),
    ("schur", lambda a: jnp.sort_complex(jnp.diagonal(
        jsl.schur(a, output="complex")[0])), general, (5, 5)),
    ("schur_reconstruct", lambda a: (lambda t, z: z @ t @ jnp.conj(z.T))(
        *jsl.schur(a)), general, (4, 4)),
    ("hessenberg", lambda a: jsl.hessenberg(a, calc_q=True), general, (5, 5)),
    ("tridiagonal", lambda a: lax_linalg.tridiagonal(a), hpd, (2, 5, 5)),
    ("tridiagonal_upper", lambda a: lax_linalg.tridiagonal(a, lower=False),
     hpd, (4, 4)),
    ("tridiagonal_solve", lambda a: lax_linalg.tridiagonal_solve(
        a[..., 0], a[..., 1] + 8, a[..., 2], a), general, (2, 6, 3)),
    # jaxlib's "tridiagonal_solve_perturbed_ffi" (no LAPACK routine).
    ("tridiagonal_solve_perturbed", lambda a: lax_linalg.tridiagonal_solve(
        a[..., 0], a[..., 1], a[..., 2], a, perturb_singular=True), general,
     (2, 6, 3)),
    ("solve_triangular", lambda a: jsl.solve_triangular(
        a, a[..., :3], lower=True), well_conditioned, (2, 5, 5)),
    ("solve_triangular_right_adjoint", lambda a: lax_linalg.triangular_solve(
        a, a[..., :3, :], left_side=False, lower=False, transpose_a=True,
        conjugate_a=True, unit_diagonal=True), well_conditioned, (2, 5, 5)),
    ("cho_solve", lambda a: jsl.cho_solve(jsl.cho_factor(a), a[:, :2]), hpd,
     (5, 5)),
]


# Every routine runs in all four dtypes; the other programs (which reuse the
# same routines) in f32 and c128 only: XLA:CPU's compile time of the
# reference dominates this file's run time.
ALL_DTYPES = {"cholesky", "qr_reduced", "qr_pivoting", "eigh", "eig",
              "svd_full", "svd_qr_algorithm", "lu", "schur",
              "hessenberg", "tridiagonal", "tridiagonal_solve",
              "tridiagonal_solve_perturbed", "solve_triangular"}
PARAMS = [pytest.param(name, fn, make, shape, dt,
                       id=f"{name}-{np.dtype(dt).name}")
          for name, fn, make, shape in CASES
          for dt in (DTYPES if name in ALL_DTYPES else
                     [np.float32, np.complex128])]


@pytest.mark.parametrize("name,fn,make,shape,dtype", PARAMS)
def test_linalg_matches_cpu(name, fn, make, shape, dtype, iron, cpu):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{np.dtype(dtype).name}".encode()))
    with x64_for(dtype):
        a = make(rng, shape, dtype)
        check(fn, (a,), iron, cpu, dtype, f"{name}[{np.dtype(dtype).name}]")


def test_cholesky_not_positive_definite_gives_nan(iron, cpu):
    a = np.array([[[1.0, 2.0], [2.0, 1.0]], [[4.0, 1.0], [1.0, 3.0]]],
                 np.float32)
    got = np.asarray(run(jnp.linalg.cholesky, (a,), iron))
    want = np.asarray(run(jnp.linalg.cholesky, (a,), cpu))
    assert np.isnan(got[0][np.tril_indices(2)]).all()
    assert np.isfinite(got[1]).all()
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


def test_singular_lu_and_eig_of_nonfinite(iron, cpu):
    a = np.zeros((3, 3), np.float32)
    compare(run(lambda x: lax_linalg.lu(x), (a,), iron),
            run(lambda x: lax_linalg.lu(x), (a,), cpu), 1e-6, "lu singular")
    b = np.full((3, 3), np.nan, np.float32)
    compare(run(jnp.linalg.eigvals, (b,), iron),
            run(jnp.linalg.eigvals, (b,), cpu), 1e-6, "eig nan")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_tridiagonal_solve_perturbed_singular(dtype, iron, cpu):
    # Exactly singular systems (T - lambda I, lambda an eigenvalue; a zero
    # matrix; n = 1 with a zero pivot): the perturbed pivots give large finite
    # solutions, the same as XLA:CPU's.
    n = 5
    with x64_for(dtype):
        ones = np.ones((3, n), dtype)
        d = np.zeros((3, n), dtype)  # T = tridiag(1, 0, 1) has eigenvalue 0
        d[1] = 2 * np.cos(np.pi / (n + 1))  # and 2 cos(pi / (n + 1))
        dl, du = ones.copy(), ones.copy()
        dl[2] = du[2] = 0  # zero matrix
        d[2] = 0
        b = rand(np.random.default_rng(21), (3, n, 2), dtype)
        fn = lambda dl, d, du, b: lax_linalg.tridiagonal_solve(
            dl, d, du, b, perturb_singular=True)
        want = run(fn, (dl, d, du, b), cpu)
        got = run(fn, (dl, d, du, b), iron)
        assert np.isfinite(np.asarray(got)).all()
        compare(got, want, TOL[dtype], "perturbed singular")
        one = (np.zeros((1,), dtype), np.zeros((1,), dtype),
               np.zeros((1,), dtype), b[0, :1])
        compare(run(fn, one, iron), run(fn, one, cpu), TOL[dtype], "n = 1")


def test_tridiagonal_solve_perturbed_denormal_pivot(iron, cpu):
    # XLA:CPU runs custom-call handlers with denormals flushed to zero: a
    # denormal pivot is a zero pivot there, and gets perturbed.
    fn = lambda dl, d, du, b: lax_linalg.tridiagonal_solve(
        dl, d, du, b, perturb_singular=True)
    for n in (1, 3):
        for dtype in (np.float32, np.complex64):
            d = np.full((n,), 1e-40, dtype)
            off = np.zeros((n,), dtype)
            b = np.full((n, 2), 1e-3, dtype)
            b[:, 1] = 1
            args = (off, d, off, b)
            compare(run(fn, args, iron), run(fn, args, cpu), 1e-6,
                    f"denormal pivot n={n} {np.dtype(dtype).name}")


@pytest.mark.parametrize("dtype", [np.float32, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_eigh_tridiagonal_eigenvectors(dtype, iron, cpu):
    # jax.scipy.linalg.eigh_tridiagonal(eigvals_only=False): inverse
    # iteration with the perturbed tridiagonal solve inside a while loop.
    rng = np.random.default_rng(22)
    with x64_for(dtype):
        alpha = rand(rng, (8,), dtype).real.astype(dtype)
        beta = rand(rng, (7,), dtype)
        fn = lambda a, b: jsl.eigh_tridiagonal(a, b, eigvals_only=False)
        w, v = run(fn, (alpha, beta), iron)
        w_cpu, v_cpu = run(fn, (alpha, beta), cpu)
        tol = 1e-3 if dtype == np.float32 else 1e-9
        compare(w, w_cpu, tol, "eigenvalues")
        compare(jnp.abs(v), jnp.abs(v_cpu), tol, "eigenvectors")


EIGH_IMPLS = [lax_linalg.EighImplementation.QR,
              lax_linalg.EighImplementation.JACOBI,
              lax_linalg.EighImplementation.QDWH]


@pytest.mark.parametrize("impl", EIGH_IMPLS, ids=lambda i: i.name)
def test_eigh_every_implementation(impl, iron, cpu):
    # XLA:CPU refuses JACOBI and QDWH; iron computes them with LAPACK (the
    # result's contract does not depend on the algorithm), so they equal
    # the default implementation on CPU.
    rng = np.random.default_rng(23)
    a = hpd(rng, (2, 6, 6), np.float32)
    want = run(lambda x: (lambda v, w: (jnp.abs(v), w))(
        *lax_linalg.eigh(x)), (a,), cpu)
    got = run(lambda x: (lambda v, w: (jnp.abs(v), w))(
        *lax_linalg.eigh(x, implementation=impl, sort_eigenvalues=False)),
        (a,), iron)
    compare(got, want, 1e-4, f"eigh {impl.name}")


def test_eigh_subset_by_index(iron, cpu):
    rng = np.random.default_rng(24)
    a = hpd(rng, (2, 6, 6), np.float32)
    v_all, w_all = run(lambda x: (lambda v, w: (jnp.abs(v), w))(
        *lax_linalg.eigh(x)), (a,), cpu)
    for impl in (None, lax_linalg.EighImplementation.QDWH):
        v, w = run(lambda x: (lambda v, w: (jnp.abs(v), w))(
            *lax_linalg.eigh(x, subset_by_index=(1, 4), implementation=impl)),
            (a,), iron)
        assert v.shape == (2, 6, 3) and w.shape == (2, 3)
        compare((v, w), (v_all[..., 1:4], w_all[..., 1:4]), 1e-4,
                f"subset {impl}")


def test_grad_through_linalg(iron, cpu):
    rng = np.random.default_rng(7)
    a = hpd(rng, (4, 4), np.float32)
    f = jax.grad(lambda x: jnp.sum(jnp.linalg.eigvalsh(x) ** 2) +
                 jnp.linalg.slogdet(x)[1] + jnp.sum(jnp.linalg.inv(x)))
    compare(run(f, (a,), iron), run(f, (a,), cpu), 1e-4, "grad")


def test_export_round_trip_runs_on_iron(iron, cpu):
    from jax import export

    def f(a, b):
        q, r = jnp.linalg.qr(a)
        return (jnp.linalg.solve(a, b),
                jnp.linalg.eigvalsh(a @ jnp.swapaxes(a, -1, -2)), q, r)

    rng = np.random.default_rng(3)
    a = well_conditioned(rng, (2, 4, 4), np.float32)
    b = rand(rng, (2, 4, 3), np.float32)
    exp = export.export(jax.jit(f), platforms=("iron", "cpu"))(a, b)
    text = exp.mlir_module()
    assert "lapack_sgetrf_ffi" in text and "lapack_ssyevd_ffi" in text
    try:  # jax's serialization needs flatbuffers, not a jax dependency
        import flatbuffers  # noqa: F401
        back = export.deserialize(exp.serialize())
    except ImportError:
        back = exp  # still runs the exported StableHLO artifact
    got = run(back.call, (a, b), iron)
    want = run(f, (a, b), cpu)
    compare(got, want, 1e-4, "export")


@contextlib.contextmanager
def generic_lowering(prim, platform="iron"):
    """Lowers `prim` on `platform` with jax's platform-independent rule
    (stablehlo.cholesky / stablehlo.triangular_solve) for the duration."""
    table = mlir._platform_specific_lowerings[platform]
    saved = table.pop(prim, None)
    try:
        yield
    finally:
        if saved is not None:
            table[prim] = saved


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_native_stablehlo_cholesky(dtype, iron, cpu):
    rng = np.random.default_rng(11)
    with x64_for(dtype):
        a = hpd(rng, (2, 3, 5, 5), dtype)
        a[1, 2] = -a[1, 2]  # not positive definite: NaNs, as XLA:CPU
        # lax_linalg.cholesky symmetrizes and takes the lower factor; upper
        # is checked on the raw primitive below.
        fn = lambda x: lax_linalg.cholesky(x)
        want = run(fn, (a,), cpu)
        with generic_lowering(lax_linalg.cholesky_p):
            text = jax.jit(fn).lower(jax.device_put(a, iron)).as_text()
            assert "stablehlo.cholesky" in text
            got = run(fn, (a,), iron)
        compare(got, want, TOL[dtype], "cholesky")


def test_native_stablehlo_cholesky_upper(iron):
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo
    rng = np.random.default_rng(12)
    a = hpd(rng, (3, 4, 4), np.float32)
    table = mlir._platform_specific_lowerings["iron"]
    prim = lax_linalg.cholesky_p
    saved = table.pop(prim, None)
    try:
        mlir.register_lowering(
            prim, lambda ctx, x: [hlo.cholesky(x, lower=ir.BoolAttr.get(False))],
            platform="iron")
        got = np.asarray(run(lambda x: prim.bind(x), (a,), iron))
    finally:
        table.pop(prim, None)
        if saved is not None:
            table[prim] = saved
    want = np.linalg.cholesky(a).conj().swapaxes(-1, -2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert (np.tril(got, -1) == 0).all()


TRI_VARIANTS = [(left, lower, trans, conj, unit)
                for left in (True, False) for lower in (True, False)
                for trans, conj in ((False, False), (True, False), (True, True))
                for unit in (False, True)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_native_stablehlo_triangular_solve(dtype, iron, cpu):
    rng = np.random.default_rng(13)
    with x64_for(dtype):
        a = well_conditioned(rng, (2, 4, 4), dtype)
        b_left = rand(rng, (2, 4, 3), dtype)
        b_right = rand(rng, (2, 3, 4), dtype)

        # One program with every variant: one compile per backend.
        def fn(x, bl, br):
            return [lax_linalg.triangular_solve(
                x, bl if left else br, left_side=left, lower=lower,
                transpose_a=trans, conjugate_a=conj, unit_diagonal=unit)
                for left, lower, trans, conj, unit in TRI_VARIANTS]
        want = run(fn, (a, b_left, b_right), cpu)
        with generic_lowering(lax_linalg.triangular_solve_p):
            text = jax.jit(fn).lower(
                *[jax.device_put(v, iron) for v in (a, b_left, b_right)]
            ).as_text()
            assert text.count("stablehlo.triangular_solve") == len(TRI_VARIANTS)
            got = run(fn, (a, b_left, b_right), iron)
        for i, variant in enumerate(TRI_VARIANTS):
            compare(got[i], want[i], TOL[dtype], f"triangular_solve{variant}")


def test_unknown_custom_call_target_names_target(iron):
    from jax._src import ffi

    def f(x):
        return jax.ffi.ffi_call("iron_no_such_target",
                                jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    x = jax.device_put(np.ones((3,), np.float32), iron)
    with pytest.raises(Exception, match="iron_no_such_target"):
        jax.jit(f)(x)
    del ffi
