"""bfloat16/float16 linear algebra on the `iron` platform, computed in f32.

jax's CPU lowering rules (which ironjax reuses for `iron`, see linalg.py)
call LAPACK, which has no 16-bit routines: jax refuses bfloat16/float16
operands of eig, lu, svd, qr (geqrf, householder_product), eigh, schur,
hessenberg, ... with "Unsupported dtype". On `iron` these primitives take
16-bit operands the way any f16/bf16 op of the host device does: the
operands are converted to f32, the f32 rule runs, and the results are
rounded back to the result types jax's shape rule gives (complex results of
eig stay complex64). Pivots and permutations are integers either way.
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)



def register_lowerings(platform: str) -> int:
    """Wraps the `platform` lowering rules of the linalg primitives so that
    16-bit float (and complex-free) operands compute in f32. Call after
    linalg.register_lowerings. Returns the number of rules wrapped."""
    try:
        import numpy as np
        from jax._src import dtypes
        from jax._src.interpreters import mlir
        from jax._src.lax import linalg as jax_linalg
    except ImportError:  # pragma: no cover - layout of jax changed
        logger.warning("ironjax: cannot wrap 16-bit linalg lowerings")
        return 0
    table = getattr(mlir, "_platform_specific_lowerings", None)
    if table is None or platform not in table:  # pragma: no cover
        return 0
    ours = table[platform]
    low = {np.dtype(dtypes.bfloat16), np.dtype(np.float16)}
    f32 = np.dtype(np.float32)
    count = 0
    from ironjax.linalg import _PRIMITIVES  # the primitives with CPU rules
    for name in _PRIMITIVES:
        prim = getattr(jax_linalg, name + "_p", None)
        entry = ours.get(prim) if prim is not None else None
        if entry is None:
            continue
        rule = entry.rule

        def wrapped(ctx, *args, _prim=prim, _rule=rule, **params):
            if not any(getattr(a, "dtype", None) in low for a in ctx.avals_in):
                return _rule(ctx, *args, **params)

            def in_f32(*xs):
                xs = [x.astype(f32) if x.dtype in low else x for x in xs]
                outs = _prim.bind(*xs, **params)
                if not _prim.multiple_results:
                    outs = [outs]
                return [o.astype(a.dtype) if o.dtype != a.dtype else o
                        for o, a in zip(outs, ctx.avals_out)]

            # Rules return one entry per result, single-result ones too.
            return mlir.lower_fun(in_f32, multiple_results=True)(ctx, *args)

        mlir.register_lowering(prim, wrapped, platform=platform,
                               inline=entry.inline)
        count += 1
    return count
