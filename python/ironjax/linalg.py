"""Linear algebra on the `iron` platform.

jax lowers most linalg primitives (eigh, svd, qr, lu, ...) only for the
platforms it knows: on CPU they become `stablehlo.custom_call`s of jaxlib's
LAPACK FFI targets (`lapack_sgetrf_ffi`, ...). For `iron` jax has no rule at
all for some of them, so we register jax's own CPU rules for our platform:
the programs then carry the same `lapack_*_ffi` custom calls, which are in
jax.export's list of stable targets, and the plugin implements those targets
in C (src/device/host/custom_call_lapack.c).

The plugin does not link LAPACK. scipy (a jax dependency) exposes every
LAPACK/BLAS routine of its bundled library as a PyCapsule holding the
function pointer (`scipy.linalg.cython_lapack.__pyx_capi__`); we hand those
pointers to the plugin through its exported `iron_register_lapack`.
"""
from __future__ import annotations

import ctypes
import logging

logger = logging.getLogger(__name__)

# Primitives of jax._src.lax.linalg whose CPU lowering rule we reuse.
_PRIMITIVES = (
    "cholesky", "eig", "eigh", "hessenberg", "householder_product", "ormqr",
    "lu", "geqrf", "geqp3", "schur", "svd", "triangular_solve", "tridiagonal",
    "tridiagonal_solve",
)

# LAPACK routines (without the s/d/c/z prefix) the plugin's kernels call;
# "orgqr" & co. name the real spelling, the complex one is added below.
_LAPACK = ("potrf", "getrf", "geqrf", "geqp3", "orgqr", "ormqr", "syevd",
           "gesdd", "gesvd", "geev", "gees", "gehrd", "sytrd", "gtsv")
_COMPLEX_NAME = {"orgqr": "ungqr", "ormqr": "unmqr", "syevd": "heevd",
                 "sytrd": "hetrd"}
_BLAS = ("trsm",)


def routine_names() -> list[str]:
    """Every LAPACK/BLAS routine name the plugin may ask for."""
    names = []
    for base in _LAPACK + _BLAS:
        for p in "sd":
            names.append(p + base)
        for p in "cz":
            names.append(p + _COMPLEX_NAME.get(base, base))
    return names


def register_lowerings(platform: str) -> int:
    """Registers jax's CPU lowering rules of the linalg primitives for
    `platform` (which must already be a known jax platform). Returns the
    number of rules registered; rules already present are kept."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.lax import linalg as jax_linalg
    except ImportError:  # pragma: no cover - layout of jax changed
        logger.warning("ironjax: cannot register linalg lowerings "
                       "(jax internals moved)")
        return 0
    table = getattr(mlir, "_platform_specific_lowerings", None)
    if table is None:  # pragma: no cover
        logger.warning("ironjax: jax has no _platform_specific_lowerings; "
                       "linalg is not available on %s", platform)
        return 0
    cpu_rules = table.get("cpu", {})
    ours = table[platform]
    prims = {getattr(jax_linalg, n + "_p", None) for n in _PRIMITIVES}
    prims.discard(None)
    count = 0
    for prim, entry in list(cpu_rules.items()):
        if prim not in prims or prim in ours:
            continue
        rule = entry.rule
        if prim is jax_linalg.eigh_p:
            rule = _eigh_rule(rule)
        mlir.register_lowering(prim, rule, platform=platform,
                               inline=entry.inline)
        count += 1
    return count


def _eigh_rule(cpu_rule):
    """eigh on iron: jax's CPU rule (LAPACK syevd/heevd) for every
    `implementation`, where the CPU rule refuses JACOBI, QDWH and
    subset_by_index.

    The implementation only picks the algorithm; the result has one contract
    (orthonormal eigenvectors, ascending eigenvalues: the CPU rule sorts
    whatever sort_eigenvalues says, as on CPU), which LAPACK's divide and
    conquer meets. The host has no Jacobi kernel, and jax's QDWH
    (tpu/linalg/eigh.py, written in jax ops) is not usable off TPU: once it
    splits the spectrum (n above its termination size) its eigenvectors are
    not orthogonal, on XLA:CPU as well (n = 40, termination_size = 8). jax's tests skip JACOBI/QDWH only for the platform
    names "cpu"/"gpu"; a user asking for an algorithm wants the
    decomposition, not an error. subset_by_index: the full decomposition,
    sliced (eigenvalues are ascending, so the indices select the same
    eigenpairs).
    """
    from jax._src.interpreters import mlir
    from jax._src.lax import linalg as jax_linalg

    def rule(ctx, operand, *, lower, sort_eigenvalues, subset_by_index,
             algorithm):
        del algorithm  # every implementation is LAPACK's here
        n = ctx.avals_in[0].shape[-1]
        if subset_by_index is not None and tuple(subset_by_index) != (0, n):
            lo, hi = subset_by_index

            def sliced(x):
                v, w = jax_linalg.eigh_p.bind(
                    x, lower=lower, sort_eigenvalues=True,
                    subset_by_index=None, algorithm=None)
                return v[..., lo:hi], w[..., lo:hi]

            return mlir.lower_fun(sliced, multiple_results=True)(ctx, operand)
        return cpu_rule(ctx, operand, lower=lower,
                        sort_eigenvalues=sort_eigenvalues,
                        subset_by_index=subset_by_index, algorithm=None)

    return rule


def _capsule_pointer(capsule) -> int | None:
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    return api.PyCapsule_GetPointer(capsule, name)


def register_lapack(library_path: str) -> int:
    """Hands scipy's LAPACK/BLAS function pointers to the plugin library at
    `library_path` (the same file jax loads: dlopen returns the same
    handle). Returns the number of routines registered."""
    try:
        from scipy.linalg import cython_blas, cython_lapack
    except ImportError:
        logger.warning("ironjax: scipy is not installed; linalg custom calls "
                       "will fail on the iron platform")
        return 0
    lib = ctypes.CDLL(library_path)
    fn = getattr(lib, "iron_register_lapack", None)
    if fn is None:
        logger.warning("ironjax: %s has no iron_register_lapack", library_path)
        return 0
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    caps = dict(cython_lapack.__pyx_capi__)
    caps.update(cython_blas.__pyx_capi__)
    count = 0
    for name in routine_names():
        cap = caps.get(name)
        if cap is None:
            continue
        ptr = _capsule_pointer(cap)
        if ptr and fn(name.encode(), ptr) == 0:
            count += 1
    return count
