"""Shared pytest setup for the jax-level tests: both backends are initialised
(`iron` first, `cpu` as the reference), and the fixtures `iron_device` and
`cpu_device` give their first devices.

This tree's python/ directory goes first on sys.path, so jax discovers
jax_plugins.iron from the source tree even when an ironjax wheel is
installed, and the library is $IRON_PLUGIN_PATH, else the newest
build*/libiron_pjrt.so of this tree, else an installed one
(ironjax.library_path())."""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "python"))

import jax  # noqa: E402  (after JAX_PLATFORMS is set)
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def iron_device():
    return jax.devices("iron")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]
