"""jax.export artifacts made for `cpu` run on iron (python/ironjax/export_cpu.py).

iron lowers with jax's generic and CPU rules and runs every custom call the
CPU rules emit, so an artifact exported for cpu (alone or with other
platforms) is called on iron with its cpu variant; IRON_ACCEPT_CPU_EXPORTS=0
restores jax's platform check.
"""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export


def f(x):
    return jnp.sin(x) @ jnp.linalg.inv(x + 3 * jnp.eye(3, dtype=x.dtype))


@pytest.mark.parametrize("platforms", [("cpu",), ("cpu", "tpu"),
                                       ("cuda", "cpu", "tpu")],
                         ids=["cpu", "cpu_tpu", "cuda_cpu_tpu"])
def test_cpu_export_runs_on_iron(platforms, iron_device):
    x = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    exp = export.deserialize(
        export.export(jax.jit(f), platforms=platforms)(x).serialize())
    got = exp.call(jax.device_put(x, iron_device))
    assert got.devices() == {iron_device}
    want = jax.jit(f)(jax.device_put(x, jax.devices("cpu")[0]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6,
                               atol=1e-6)


def test_export_without_arguments_runs_on_iron(iron_device):
    exp = export.export(jax.jit(lambda: jnp.arange(5) * 2),
                        platforms=("cpu", "tpu"))()
    with jax.default_device(iron_device):
        got = exp.call()
    np.testing.assert_array_equal(np.asarray(got), np.arange(5) * 2)


def test_switch_off_keeps_jax_check():
    code = (
        "import jax, numpy as np\n"
        "from jax import export\n"
        "exp = export.export(jax.jit(lambda x: x + 1), platforms=('cpu',))(np.ones(3))\n"
        "x = jax.device_put(np.ones(3), jax.devices('iron')[0])\n"
        "try:\n"
        "    exp.call(x)\n"
        "except ValueError as e:\n"
        "    print('REFUSED', 'exported for platforms' in str(e))\n")
    env = dict(os.environ, IRON_ACCEPT_CPU_EXPORTS="0",
               JAX_PLATFORMS="iron,cpu")
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    env["PYTHONPATH"] = os.path.join(root, "python") + os.pathsep + env.get(
        "PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=120)
    assert "REFUSED True" in out.stdout, out.stdout + out.stderr
