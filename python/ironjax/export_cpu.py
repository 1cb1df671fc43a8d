"""`jax.export` artifacts made for `cpu` run on `iron`.

jax refuses to call an Exported whose `platforms` do not name the current
lowering platform ("exported for platforms ('cpu', 'tpu') but it is used on
('iron',)"). The `iron` platform lowers with jax's generic rules plus jax's
own CPU rules for linear algebra (see linalg.py), and the plugin executes
every custom call those CPU rules emit, so a module lowered for `cpu` is a
module iron runs with XLA:CPU's semantics. This registers an `iron` lowering
of jax's `call_exported` primitive that picks the artifact's `cpu` variant
when it has no `iron` one; anything iron cannot run is still refused at
compile time, naming the op. IRON_ACCEPT_CPU_EXPORTS=0 keeps jax's check.
"""
from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def register_lowering(platform: str) -> bool:
    if os.environ.get("IRON_ACCEPT_CPU_EXPORTS", "1") == "0":
        return False
    try:
        from jax._src.export import _export
        from jax._src.interpreters import mlir
    except ImportError:  # pragma: no cover - layout of jax changed
        logger.warning("ironjax: cpu exports are not accepted on %s", platform)
        return False
    prim = getattr(_export, "call_exported_p", None)
    generic = getattr(_export, "_call_exported_lowering", None)
    if prim is None or generic is None:  # pragma: no cover
        return False

    def lowering(ctx, *args, exported):
        mc = ctx.module_context
        plats = tuple(mc.platforms)
        if (platform in plats and platform not in exported.platforms
                and "cpu" in exported.platforms):
            # The check and the platform index read module_context.platforms:
            # name iron "cpu" for this call only.
            mc.platforms = tuple("cpu" if p == platform else p for p in plats)
            try:
                return generic(ctx, *args, exported=exported)
            finally:
                mc.platforms = plats
        return generic(ctx, *args, exported=exported)

    mlir.register_lowering(prim, lowering, platform=platform)
    return True
