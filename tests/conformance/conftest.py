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


def _known_mismatches():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "known_mismatches.txt")
    known = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            case_id, _, reason = line.partition(" | ")
            known[case_id.strip()] = reason.strip()
    return known


def pytest_collection_modifyitems(config, items):
    """Known mismatches run as strict xfails: they must keep failing (with
    the reason shown) until fixed, and a fixed one fails the run until its
    line in known_mismatches.txt is removed."""
    known = _known_mismatches()
    seen = set()
    for item in items:
        case_id = item.callspec.id if hasattr(item, "callspec") else None
        if case_id in known:
            seen.add(case_id)
            item.add_marker(pytest.mark.xfail(reason=known[case_id],
                                              strict=True))
    stale = sorted(set(known) - seen)
    selected = (config.option.keyword or config.option.markexpr or
                any("::" in a for a in config.args))
    if stale and not selected:
        # A listed id that matches no test is a typo or a renamed case.
        raise pytest.UsageError(
            "known_mismatches.txt lists ids that match no test: "
            + ", ".join(stale))
