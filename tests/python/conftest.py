"""Shared pytest setup for the jax-level tests: both backends are initialised
(`iron` first, `cpu` as the reference), and the fixtures `iron_device` and
`cpu_device` give their first devices.

The plugin library is the one the package finds (ironjax.library_path()):
$IRON_PLUGIN_PATH, else an installed ironjax, else the newest
build*/libiron_pjrt.so of this source tree. When ironjax is not installed,
this tree's python/ directory is put on sys.path so jax discovers
jax_plugins.iron from it."""
import importlib.util
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("ironjax") is None:
    sys.path.insert(0, os.path.join(_ROOT, "python"))

import jax  # noqa: E402  (after JAX_PLATFORMS is set)
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def iron_device():
    return jax.devices("iron")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]
