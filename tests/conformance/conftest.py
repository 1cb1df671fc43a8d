"""pytest setup for the op-conformance suite: the same device fixtures as
tests/python/conftest.py (duplicated so this directory runs on its own).
The device under test is always jax.devices("iron")[0]; which hardware backs
it (host now, CUDA later) is the plugin's choice, not this suite's."""
import importlib.util
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if importlib.util.find_spec("ironjax") is None:
    sys.path.insert(0, os.path.join(_ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402  (after JAX_PLATFORMS is set)
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def iron_device():
    return jax.devices("iron")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]
