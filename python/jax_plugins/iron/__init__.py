"""jax plugin entry for ironjax: registers the PJRT plugin `iron`.

jax imports this module during plugin discovery (both as a module of the
`jax_plugins` namespace package and through the `jax_plugins` entry point;
jax deduplicates by module name) and calls `initialize()`.
"""
from __future__ import annotations

import logging
import threading

import ironjax

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_initialized = False


def _enable_donation() -> None:
    # jax only emits donation (tf.aliasing_output / jax.buffer_donor) for
    # platforms in this list; without it donate_argnums only warns. The
    # plugin deletes donated inputs itself.
    try:
        from jax._src.interpreters import mlir
    except ImportError:  # pragma: no cover - layout of jax changed
        logger.warning("ironjax: cannot enable buffer donation (no jax mlir)")
        return
    platforms = getattr(mlir, "_platforms_with_donation", None)
    if isinstance(platforms, list):
        if ironjax.PLATFORM not in platforms:
            platforms.append(ironjax.PLATFORM)
    else:
        logger.warning("ironjax: cannot enable buffer donation: "
                       "jax has no mlir._platforms_with_donation list")


def _install_callbacks(path: str) -> None:
    # Host callbacks (jax.debug.print, pure_callback, io_callback): the
    # plugin's handler and the lowering for platform 'iron'.
    try:
        from ironjax import callback
        callback.install(path)
    except (ImportError, AttributeError, OSError) as e:  # pragma: no cover
        logger.warning("ironjax: host callbacks are unavailable: %s", e)


def initialize() -> None:
    """Registers the `iron` backend with jax (idempotent)."""
    global _initialized
    with _lock:
        if _initialized:
            return
        path = ironjax.library_path()
        if path is None:
            logger.warning(
                "ironjax: %s not found (set IRON_PLUGIN_PATH or install "
                "ironjax); the 'iron' platform is not registered",
                ironjax.LIBRARY_NAME)
            return
        from jax._src import xla_bridge as xb

        factories = getattr(xb, "_backend_factories", None)
        if factories is None or ironjax.PLATFORM not in factories:
            # priority -1: the CPU backend (priority 0) stays the default
            # when JAX_PLATFORMS is unset.
            xb.register_plugin(ironjax.PLATFORM, priority=-1,
                               library_path=path)
        _enable_donation()
        _install_callbacks(path)
        _initialized = True
