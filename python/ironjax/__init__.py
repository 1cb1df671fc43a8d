"""ironjax: a JAX backend written in C, loaded by jax as the PJRT plugin `iron`.

Importing this package does not import jax. `library_path()` finds the PJRT
plugin library (libiron_pjrt.so); jax registers it through
`jax_plugins.iron.initialize()` (run by jax's plugin discovery), after which
`JAX_PLATFORMS=iron` or `jax.devices("iron")` select it.
"""
from __future__ import annotations

import glob
import os

__version__ = "0.1.0"

PLATFORM = "iron"
LIBRARY_NAME = "libiron_pjrt.so"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _installed_library() -> str | None:
    path = os.path.join(_PACKAGE_DIR, "lib", LIBRARY_NAME)
    return path if os.path.isfile(path) else None


def _is_sanitized(path: str) -> bool:
    """Whether a library was built with -fsanitize (IRON_SANITIZE=ON): it only
    loads with the sanitizer runtime preloaded, so it is never picked
    implicitly (name it in IRON_PLUGIN_PATH to use it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return True
    return b"libasan.so" in data or b"libtsan.so" in data


def _source_tree_library() -> str | None:
    """The newest build*/libiron_pjrt.so of the source tree this package
    sits in (python/ironjax -> repository root), for running uninstalled;
    sanitizer builds are skipped."""
    root = os.path.dirname(os.path.dirname(_PACKAGE_DIR))
    if not os.path.isfile(os.path.join(root, "CMakeLists.txt")):
        return None
    candidates = glob.glob(os.path.join(root, "build*", LIBRARY_NAME))
    candidates = [c for c in candidates
                  if os.path.isfile(c) and not _is_sanitized(c)]
    if not candidates:
        return None
    return max(candidates, key=os.path.getmtime)


def _other_installed_library() -> str | None:
    """An installed ironjax/lib/ elsewhere on sys.path (when this package was
    imported from a source tree that has no build)."""
    import sys
    for entry in sys.path:
        path = os.path.join(entry or ".", "ironjax", "lib", LIBRARY_NAME)
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None


def library_path() -> str | None:
    """Path of the PJRT plugin library, or None if none is found.

    Order: $IRON_PLUGIN_PATH (must name an existing file), the library
    installed with this package (ironjax/lib/), the newest build*/ directory
    of the source tree this package was imported from, an installed ironjax
    elsewhere on sys.path.
    """
    override = os.environ.get("IRON_PLUGIN_PATH")
    if override:
        if not os.path.isfile(override):
            raise FileNotFoundError(
                f"IRON_PLUGIN_PATH={override!r} does not name a file")
        return os.path.abspath(override)
    return (_installed_library() or _source_tree_library() or
            _other_installed_library())


__all__ = ["LIBRARY_NAME", "PLATFORM", "__version__", "library_path"]
