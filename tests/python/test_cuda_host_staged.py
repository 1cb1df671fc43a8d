"""Host-staged steps: host callbacks and LAPACK custom calls on whatever
device `iron` is. On the CUDA device (IRON_DEVICE=cuda) each of these runs
the host kernel on the CPU between copies from and to the GPU
(src/device/cuda/cuda_host_staged.c); on the host device the same programs
run directly. Either way the results must match jax's CPU backend, callbacks
must see each loop iteration's values in order, and a callback's exception
must fail the call without breaking the device."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback


def on(device, fn, *args):
    args = [jax.device_put(a, device) for a in args]
    out = jax.jit(fn)(*args)
    jax.block_until_ready(out)
    jax.effects_barrier()
    return out


def test_debug_print_in_jit(capsys, iron_device):
    def f(x):
        y = x * 2 + 1
        jax.debug.print("y={y} s={s}", y=y, s=jnp.sum(y))
        return y - 1

    capsys.readouterr()
    out = on(iron_device, f, np.arange(3, dtype=np.float32))
    assert capsys.readouterr().out == "y=[1. 3. 5.] s=9.0\n"
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 4])


def test_pure_callback_in_scan_per_iteration(iron_device, cpu_device):
    seen = {}

    def host(c, x):
        seen[key].append((float(c), float(x)))
        return np.float32(c * 0.5 + x)

    def f(xs):
        def body(c, x):
            # Device work before and after the callback: the callback must
            # see this iteration's carry, and the next step its result.
            r = jax.pure_callback(host, jax.ShapeDtypeStruct((), jnp.float32),
                                  c * 2, x + 1)
            return r + 1, r * 3
        return jax.lax.scan(body, jnp.float32(1), xs)

    out = {}
    for key, dev in (("cpu", cpu_device), ("iron", iron_device)):
        seen[key] = []
        out[key] = on(dev, f, np.arange(8, dtype=np.float32))
    assert len(seen["iron"]) == 8
    assert seen["iron"] == seen["cpu"]
    np.testing.assert_array_equal(np.asarray(out["iron"][1]),
                                  np.asarray(out["cpu"][1]))
    assert float(out["iron"][0]) == float(out["cpu"][0])


def test_io_callback_ordered_in_fori_loop(iron_device):
    log = []

    def host(i, v):
        log.append((int(i), float(v)))
        return np.float32(v + i)

    def f(x):
        def body(i, v):
            return io_callback(host, jax.ShapeDtypeStruct((), jnp.float32),
                               i, v * 1.0, ordered=True)
        return jax.lax.fori_loop(0, 6, body, x)

    out = on(iron_device, f, np.float32(0.5))
    want, v = [], 0.5
    for i in range(6):
        want.append((i, v))
        v += i
    assert log == want
    assert float(out) == v


def test_callback_error_then_device_still_works(iron_device):
    calls = []

    def host(x):
        calls.append(float(x[0]))
        if x[0] > 2:
            raise ValueError(f"too big: {x[0]}")
        return x * 10

    f = jax.jit(lambda x: jax.pure_callback(
        host, jax.ShapeDtypeStruct((3,), jnp.float32), x + 1) + 1)
    ok = jax.device_put(np.zeros(3, np.float32), iron_device)
    bad = jax.device_put(np.full(3, 5, np.float32), iron_device)
    np.testing.assert_array_equal(np.asarray(f(ok)), np.full(3, 11))
    with pytest.raises(Exception, match="ValueError: too big: 6"):
        jax.block_until_ready(f(bad))
    # Later calls, with and without callbacks, still work.
    np.testing.assert_array_equal(np.asarray(f(ok)), np.full(3, 11))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v * 3)(bad)),
                                  np.full(3, 15))
    assert calls == [1.0, 6.0, 1.0]


def spd(rng, n, dtype):
    a = rng.standard_normal((n, n)).astype(dtype)
    return (a @ a.T + n * np.eye(n)).astype(dtype)


LINALG = {
    "cholesky": (jnp.linalg.cholesky, 1),
    "solve": (lambda a, b: jnp.linalg.solve(a, b), 2),
    "qr": (lambda a: jnp.linalg.qr(a), 1),
    "eigh": (lambda a: jnp.linalg.eigh(a), 1),
    "svd": (lambda a: jnp.linalg.svd(a), 1),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_matches_cpu(name, iron_device, cpu_device):
    fn, nargs = LINALG[name]
    rng = np.random.default_rng(7)

    def g(a, b):
        # Device work around the custom call (its operand and its results).
        a = a * 1.0 + 0.0
        out = fn(a, b) if nargs == 2 else fn(a)
        return jax.tree.map(lambda t: t * 1.0, out)

    a = spd(rng, 6, np.float32)
    b = rng.standard_normal((6, 2)).astype(np.float32)
    want = on(cpu_device, g, a, b)
    got = on(iron_device, g, a, b)
    for w, o in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(w), rtol=1e-4,
                                   atol=1e-4, err_msg=name)


def test_linalg_in_loop_matches_cpu(iron_device, cpu_device):
    # A LAPACK call inside a fori_loop body: runs once per iteration, on
    # that iteration's values.
    def f(a):
        def body(i, m):
            q, r = jnp.linalg.qr(m + i * 0.1)
            return q @ jnp.diag(jnp.abs(jnp.diag(r)))
        return jax.lax.fori_loop(0, 5, body, a)

    a = spd(np.random.default_rng(3), 5, np.float32)
    np.testing.assert_allclose(np.asarray(on(iron_device, f, a)),
                               np.asarray(on(cpu_device, f, a)), rtol=1e-4,
                               atol=1e-4)


_SWITCH_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    dev = jax.devices("iron")[0]
    x = jax.device_put(np.eye(3, dtype=np.float32) * 4, dev)
    for name, fn in (("cholesky", jnp.linalg.cholesky),
                     ("callback", lambda v: jax.pure_callback(
                         lambda a: a, jax.ShapeDtypeStruct(v.shape, v.dtype),
                         v))):
        try:
            out = np.asarray(jax.jit(fn)(x))
            print(name, "ran", float(out[0, 0]))
        except Exception as e:  # noqa: BLE001
            print(name, "refused", str(e).replace("\\n", " "))
""")


def test_switch_off_refuses_on_cuda_only(iron_device):
    env = dict(os.environ, IRON_CUDA_HOST_STAGED="0")
    env.setdefault("JAX_PLATFORMS", "iron,cpu")
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(root, "python"),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", _SWITCH_SCRIPT], env=env,
                          cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    if "NVIDIA" in iron_device.device_kind:
        # Refused at compile time, naming the target and the switch.
        assert lines["cholesky"].startswith("refused"), lines
        assert "lapack_spotrf_ffi" in lines["cholesky"], lines
        assert "IRON_CUDA_HOST_STAGED=0" in lines["cholesky"], lines
        assert lines["callback"].startswith("refused"), lines
        assert "iron_python_callback" in lines["callback"], lines
    else:
        # The host device runs them itself: the switch is the GPU's.
        assert lines == {"cholesky": "ran 2.0", "callback": "ran 4.0"}, lines
