"""Shared pytest setup for the jax-level tests: both backends are initialised
(`iron` first, `cpu` as the reference), and the fixtures `iron_device` and
`cpu_device` give their first devices.

Which plugin is tested: an installed ironjax (what scripts/test.sh builds
with `pip install .`); when none is installed, this tree's python/ directory
is put on sys.path and the library is the newest build*/libiron_pjrt.so of
this tree. Either way $IRON_PLUGIN_PATH overrides the library, e.g.
IRON_PLUGIN_PATH=build-me/libiron_pjrt.so to test your own build."""
import importlib.util
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")
# A module the scan rewrite breaks fails the test instead of compiling
# again as written (src/runtime/executable.c).
os.environ.setdefault("IRON_SCAN_IN_PLACE", "1")

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


# CI's time budget (2 cores, ~15 minutes for everything): scripts/test.sh
# sets IRON_TEST_QUICK=1 unless IRON_TEST_FULL=1, and then the tests marked
# `slow` are left out (each names what covers its class in the quick run).
# They run on the GPU machine and in full runs.
def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: left out when IRON_TEST_QUICK=1 (CI's default run)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("IRON_TEST_QUICK") != "1":
        return
    keep = [it for it in items if it.get_closest_marker("slow") is None]
    drop = [it for it in items if it.get_closest_marker("slow") is not None]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
