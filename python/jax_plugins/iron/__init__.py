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


def _enable_compilation_cache() -> None:
    # jax's persistent compilation cache serves only the platforms named in
    # compilation_cache.is_cache_used ("tpu", "gpu", "cpu", "neuron"). The
    # plugin serializes executables (PJRT_Executable_Serialize), so iron
    # uses the cache whenever it is enabled; other backends keep jax's rule.
    try:
        from jax._src import compilation_cache as cc
    except ImportError:  # pragma: no cover - layout of jax changed
        return
    original = getattr(cc, "is_cache_used", None)
    if original is None or getattr(original, "_ironjax_wrapped", False):
        if original is None:
            logger.warning("ironjax: cannot enable the persistent "
                           "compilation cache (jax layout changed)")
        return

    class _SupportedPlatform:
        # What jax's check sees for iron: a platform it lists, so its
        # metrics and its once-per-task decision are exactly those of one.
        platform = "cpu"
        supports_executable_serialization = True

    def is_cache_used(backend, *args, **kwargs) -> bool:
        if getattr(backend, "platform", None) == ironjax.PLATFORM:
            backend = _SupportedPlatform()
        return original(backend, *args, **kwargs)

    is_cache_used._ironjax_wrapped = True
    cc.is_cache_used = is_cache_used
def _enable_linalg(path: str) -> None:
    # jax has no lowering of eigh/svd/qr/... for our platform: reuse its CPU
    # rules (LAPACK FFI custom calls, implemented by the plugin) and give the
    # plugin scipy's LAPACK.
    from ironjax import linalg
    try:
        linalg.register_lowerings(ironjax.PLATFORM)
    except Exception as e:  # pragma: no cover - jax internals changed
        logger.warning("ironjax: linalg lowerings not registered: %s", e)
    try:
        from ironjax import linalg_lowp
        linalg_lowp.register_lowerings(ironjax.PLATFORM)
    except Exception as e:  # pragma: no cover - jax internals changed
        logger.warning("ironjax: 16-bit linalg lowerings not wrapped: %s", e)
    try:
        from ironjax import export_cpu
        export_cpu.register_lowering(ironjax.PLATFORM)
    except Exception as e:  # pragma: no cover - jax internals changed
        logger.warning("ironjax: cpu exports not accepted: %s", e)
    try:
        from ironjax import ann
        ann.register_lowerings(ironjax.PLATFORM)
    except Exception as e:  # pragma: no cover - jax internals changed
        logger.warning("ironjax: approx_top_k lowering not registered: %s", e)
    try:
        linalg.register_lapack(path)
    except Exception as e:  # pragma: no cover
        logger.warning("ironjax: LAPACK not registered: %s", e)
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
        _enable_compilation_cache()
        _enable_linalg(path)
        _install_callbacks(path)
        _initialized = True
