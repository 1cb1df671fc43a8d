"""approx_max_k / approx_min_k on the `iron` platform.

On every platform but TPU, jax lowers `approx_top_k` to an `ApproxTopK`
custom call marked `is_fallback`, which XLA expands into an exact sort along
the reduction dimension followed by a slice. We register the same fallback
as a jax-level lowering for `iron`: `lax.top_k` (of the negated operand for
min-k; ties keep the lower index first, while XLA's unstable sort leaves
their order to std::sort), over the first `n` elements where `n` is the output size jax's
abstract evaluation chose (k, or the larger approximate size when
`aggregate_to_topk=False`).
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def _fallback(operand, *, k, reduction_dimension, recall_target, is_max_k,
              reduction_input_size_override, aggregate_to_topk):
    import jax.numpy as jnp
    from jax import lax
    from jax._src.lax import ann as jax_ann

    dim = reduction_dimension % operand.ndim
    out_aval, _ = jax_ann._approx_top_k_abstract_eval(
        operand.aval if hasattr(operand, "aval") else operand, k=k,
        reduction_dimension=dim, recall_target=recall_target,
        is_max_k=is_max_k,
        reduction_input_size_override=reduction_input_size_override,
        aggregate_to_topk=aggregate_to_topk)
    n = out_aval.shape[dim]
    x = jnp.moveaxis(operand, dim, -1)
    vals, idx = lax.top_k(x if is_max_k else -x, n)
    if not is_max_k:
        vals = -vals
    return [jnp.moveaxis(vals, -1, dim), jnp.moveaxis(idx, -1, dim)]


def register_lowerings(platform: str) -> int:
    """Registers the fallback lowering of approx_top_k for `platform`.
    Returns 1 when registered, 0 when jax's internals moved."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.lax import ann as jax_ann
    except ImportError:  # pragma: no cover - layout of jax changed
        logger.warning("ironjax: approx_top_k lowering not registered")
        return 0

    def rule(ctx, operand, **params):
        params.pop("fallback", None)
        return mlir.lower_fun(
            lambda x: _fallback(x, **params), multiple_results=True)(
                ctx, operand)

    mlir.register_lowering(jax_ann.approx_top_k_p, rule, platform=platform)
    return 1
