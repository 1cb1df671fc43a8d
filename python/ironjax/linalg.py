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
        mlir.register_lowering(prim, entry.rule, platform=platform,
                               inline=entry.inline)
        count += 1
    return count


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
