"""The CUDA device's error promise, on a GPU (docs/ARCHITECTURE.md, "What
fails a call, what retires a device"): an error that leaves the CUDA context
healthy fails only its own call and the next call works; only a sticky fault
of the context retires the device, naming the op and its source line, while
jax's CPU backend in the same process and other processes go on.

Skipped without a CUDA device (IRON_TEST_REQUIRE_CUDA=1 makes that a
failure). scripts/cuda_tests.sh runs it on the GPU machine:
  IRON_DEVICE=cuda JAX_PLATFORMS=iron,cpu python3 -m pytest -s \\
      tests/python/test_cuda_faults.py
(-s shows the soak's memory numbers.) Tests that need a fresh process (an
out-of-memory limit, an injected fault) run one in a subprocess."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

HERE = os.path.dirname(os.path.abspath(__file__))


def _is_cuda(dev):
    return dev.platform == "iron" and "NVIDIA" in str(dev.device_kind)


@pytest.fixture(scope="module")
def gpu():
    dev = jax.devices("iron")[0]
    if not _is_cuda(dev):
        msg = f"no CUDA device (iron device is {dev.device_kind})"
        if os.environ.get("IRON_TEST_REQUIRE_CUDA") == "1":
            pytest.fail(msg + " and IRON_TEST_REQUIRE_CUDA=1")
        pytest.skip(msg)
    return dev


def run_script(tmp_path, source, env=None, timeout=300, name="script.py"):
    """Runs `source` as a file (so that source lines have a name) in a fresh
    Python on the CUDA device; returns (returncode, stdout + stderr)."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    e = dict(os.environ)
    e.update({"IRON_DEVICE": "cuda", "JAX_PLATFORMS": "iron,cpu"})
    e["PYTHONPATH"] = os.pathsep.join(
        [p for p in [os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                  "python"), e.get("PYTHONPATH")] if p])
    if env:
        e.update(env)
    p = subprocess.run([sys.executable, str(path)], env=e, capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


# --- out of memory -----------------------------------------------------------

OOM_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
dev = jax.devices("iron")[0]
x = jax.device_put(np.arange(1024, dtype=np.float32), dev)
double = jax.jit(lambda v: v * 2)
np.testing.assert_array_equal(np.asarray(double(x)), np.arange(1024) * 2)
CHUNK = int({chunk})  # f32 elements per buffer
fill = jax.jit(lambda v, k: jnp.zeros((CHUNK,), jnp.float32) + v[0] + k)
for attempt in range(3):
    # Allocate until the device refuses, holding every buffer.
    held = []
    try:
        for k in range(100000):
            y = fill(x, np.float32(k))
            y.block_until_ready()
            held.append(y)
        raise SystemExit("never ran out of memory")
    except jax.errors.JaxRuntimeError as e:
        assert "RESOURCE_EXHAUSTED" in str(e), str(e)
        assert "stays unusable" not in str(e), str(e)
        print("refused after %d buffers of %d bytes: %s"
              % (len(held), 4 * CHUNK, str(e).splitlines()[0][:200]))
    assert float(held[-1][7]) == len(held) - 1
    del held
    # The next call works, and so does a loop (recorded as a CUDA graph).
    np.testing.assert_array_equal(np.asarray(double(x)), np.arange(1024) * 2)
    s = jax.jit(lambda v: jax.lax.fori_loop(0, 16, lambda i, a: a + 1.0, v))(x)
    np.testing.assert_array_equal(np.asarray(s), np.arange(1024) + 16)
stats = dev.memory_stats() or {{}}
print("bytes_in_use after:", stats.get("bytes_in_use"))
print("OK")
"""


def test_memory_limit_fails_one_call(gpu, tmp_path):
    # IRON_CUDA_MEMORY_LIMIT of 1 GiB, buffers of 256 MiB.
    rc, out = run_script(tmp_path, OOM_SCRIPT.format(chunk=64 << 20),
                         env={"IRON_CUDA_MEMORY_LIMIT": str(1 << 30)})
    print(out)
    assert rc == 0 and "OK" in out, out


def test_real_out_of_memory_fails_one_call(gpu, tmp_path):
    # Buffers of 2 GiB until the card is full: the driver's pool refuses.
    rc, out = run_script(tmp_path, OOM_SCRIPT.format(chunk=512 << 20))
    print(out)
    assert rc == 0 and "OK" in out, out


# --- threads -----------------------------------------------------------------

def _loop_step(w, x):
    # A counted loop (recorded as a CUDA graph) around a matmul.
    def body(i, h):  # exact f32 (not TF32) to compare with the CPU
        return jnp.tanh(jnp.dot(h, w, precision=lax.Precision.HIGHEST)
                        + 0.01 * i)
    return lax.fori_loop(0, 8, body, x)


def test_eight_threads_execute(gpu):
    cpu = jax.devices("cpu")[0]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32) / 8
    xs = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(8)]
    f_gpu = jax.jit(_loop_step)
    with jax.default_device(cpu):
        want = [np.asarray(jax.jit(_loop_step)(w, x)) for x in xs]
    wd = jax.device_put(w, gpu)
    errors = []

    def work(k):
        try:
            for r in range(50):
                out = f_gpu(wd, jax.device_put(xs[k], gpu))
                np.testing.assert_allclose(np.asarray(out), want[k],
                                           rtol=2e-5, atol=2e-5)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(f"thread {k}: {e!r}")

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_compiles_and_copies_while_loops_are_captured(gpu):
    """The root cause of CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED in jax's
    suite: other threads' stream work (compiles uploading constants, copies
    to and from the host) while a loop body is being recorded."""
    stop = threading.Event()
    errors = []
    loop = jax.jit(lambda v: lax.fori_loop(
        0, 64, lambda i, a: jnp.sin(a) * 0.5 + a * 0.5 + 1e-3, v))
    x = jax.device_put(np.linspace(0, 1, 4096, dtype=np.float32), gpu)
    with jax.default_device(jax.devices("cpu")[0]):
        want_loop = np.asarray(loop(np.linspace(0, 1, 4096, dtype=np.float32)))
    results = []

    def looper():
        try:
            while not stop.is_set():
                results.append(loop(x))  # async: the next one is queued
                if len(results) > 8:
                    r = results.pop(0)
                    np.testing.assert_allclose(np.asarray(r), want_loop,
                                               rtol=1e-4, atol=1e-5)
        except Exception as e:  # noqa: BLE001
            errors.append(f"looper: {e!r}")

    def compiler(seed):
        try:
            rng = np.random.default_rng(seed)
            for k in range(12):
                # Constants of 8 MiB (an unstaged copy that waits for the
                # stream) and of 4 KiB (a staged one).
                big = rng.standard_normal(2 << 20).astype(np.float32)
                small = rng.standard_normal(1024).astype(np.float32)
                f = jax.jit(lambda v, b=big, s=small, k=k:
                            (v[:1024] * s + b[:1024] * (k + 1)).sum())
                v = rng.standard_normal(4096).astype(np.float32)
                got = float(f(jax.device_put(v, gpu)))
                terms = v[:1024] * small + big[:1024] * (k + 1)
                want = float(terms.sum())
                tol = 1e-4 * float(np.abs(terms).sum()) + 1e-3
                assert abs(got - want) <= tol, (got, want)
        except Exception as e:  # noqa: BLE001
            errors.append(f"compiler {seed}: {e!r}")

    def copier():
        try:
            rng = np.random.default_rng(7)
            while not stop.is_set():
                a = rng.standard_normal(1 << 16).astype(np.float32)
                d = jax.device_put(a, gpu)
                np.testing.assert_array_equal(np.asarray(d), a)
        except Exception as e:  # noqa: BLE001
            errors.append(f"copier: {e!r}")

    ts = [threading.Thread(target=looper), threading.Thread(target=copier)]
    cs = [threading.Thread(target=compiler, args=(s,)) for s in range(3)]
    for t in ts + cs:
        t.start()
    for t in cs:
        t.join()
    stop.set()
    for t in ts:
        t.join()
    for r in results:
        np.testing.assert_allclose(np.asarray(r), want_loop, rtol=1e-4,
                                   atol=1e-5)
    assert not errors, errors


# --- an injected kernel fault -------------------------------------------------

FAULT_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
dev = jax.devices("iron")[0]
x = jax.device_put(np.arange(64, dtype=np.float32)[::-1].copy(), dev)
ok = jax.jit(lambda v: v + 1)
np.testing.assert_array_equal(np.asarray(ok(x)), np.arange(64)[::-1] + 1)
def f(v):
    return jnp.sort(v)  # FAULT LINE
try:
    np.asarray(jax.jit(f)(x))
    raise SystemExit("the fault was not reported")
except jax.errors.JaxRuntimeError as e:
    print("FAULT:", e)
# Every later call on the retired device fails with the same error.
for g in (ok, jax.jit(lambda v: v * 3)):
    try:
        np.asarray(g(x))
        raise SystemExit("a call on the retired device worked")
    except jax.errors.JaxRuntimeError as e:
        assert "stays unusable" in str(e), str(e)
        print("LATER:", str(e)[:160])
# jax's CPU backend in this process goes on.
cpu = jax.devices("cpu")[0]
y = jax.jit(lambda v: jnp.sort(v) * 2)(jax.device_put(np.arange(4.0)[::-1].copy(), cpu))
np.testing.assert_array_equal(np.asarray(y), [0, 2, 4, 6])
print("CPU OK")
"""


@pytest.mark.parametrize("mode, code", [("", "CUDA_ERROR_ILLEGAL_ADDRESS"),
                                        (":trap", "CUDA_ERROR_")])
def test_injected_fault_retires_the_device(gpu, tmp_path, mode, code):
    line = textwrap.dedent(FAULT_SCRIPT).splitlines().index(
        "    return jnp.sort(v)  # FAULT LINE") + 1
    rc, out = run_script(tmp_path, FAULT_SCRIPT, name="fault_script.py",
                         env={"IRON_CUDA_TEST_FAULT": "stablehlo.sort" + mode})
    print(out)
    assert rc == 0 and "CPU OK" in out, out
    fault = [l for l in out.splitlines() if l.startswith("FAULT:")][0]
    assert "stays unusable" in fault, fault
    assert code in fault, fault
    # The step that faulted: op, source line, kernel.
    assert f"stablehlo.sort (fault_script.py:{line})" in fault, fault
    assert "kernel " in fault, fault
    # Other processes (this one) still use the GPU.
    out = jax.jit(lambda v: jnp.sort(v))(jax.device_put(np.arange(8.0)[::-1].copy(), gpu))
    np.testing.assert_array_equal(np.asarray(out), np.arange(8.0))
    rc, out = run_script(tmp_path, """
        import jax, jax.numpy as jnp, numpy as np
        print(np.asarray(jax.jit(jnp.sort)(np.arange(5.0)[::-1].copy())))
        print("OK")""", name="after.py")
    assert rc == 0 and "OK" in out, out


# --- the programs of jax's suite that poisoned the device ------------------------

def _scan_with_new_checkpoint(f, *args, **kwargs):
    from jax.ad_checkpoint import checkpoint_policies
    return jax.checkpoint(lambda *a: lax.scan(f, *a, **kwargs),
                          policy=checkpoint_policies.nothing_saveable)(*args)


def test_jax_suite_programs_in_a_loop(gpu):
    """lax_control_flow_test's testScanGrad (jit_scan, jit_f, new_checkpoint,
    with check_grads of order 2: many small programs dispatched while loops
    are recorded) and linalg_test's lu_solve with broadcasting (a pivot
    loop recorded between host-staged triangular solves), several rounds in
    one process: no call may fail, results as on jax's CPU backend."""
    import jax.scipy.linalg as jsl
    from jax.test_util import check_grads
    cpu = jax.devices("cpu")[0]
    rng = np.random.default_rng(0)
    d = rng.standard_normal(2)

    def f(c, a):
        b = jnp.sum(jnp.sin(a)) + jnp.sum(jnp.sin(c)) + jnp.sum(jnp.sin(d))
        return jnp.sin(c * b), b

    f_jit = jax.jit(f)
    scan = jax.jit(_scan_with_new_checkpoint, static_argnums=(0,))

    def loss(c, as_):
        return list(scan(f_jit, c, as_))[0].sum()

    for rnd in range(5):
        as_ = rng.standard_normal((5, 3)).astype(np.float32)
        c = rng.standard_normal(4).astype(np.float32)
        got = jax.grad(loss)(c, as_)
        with jax.default_device(cpu):
            want = jax.grad(loss)(c, as_)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want),
                                   rtol=5e-5, atol=1e-5)
        check_grads(lambda c, a: scan(f_jit, c, a), (c, as_), order=2,
                    modes=["rev"], atol=1e-3, rtol=5e-1)
        for lhs, rhs in (((3, 4, 4), (4,)), ((3, 8, 8), (8, 4)),
                         ((4, 4), (3, 4, 2))):
            for trans in (0, 1, 2):
                a = rng.standard_normal(lhs).astype(np.float32) + 4 * np.eye(lhs[-1], dtype=np.float32)
                b = rng.standard_normal(rhs).astype(np.float32)
                lu, piv = jax.jit(jsl.lu_factor)(a)
                solve = jax.jit(lambda lu, piv, b, t=trans: jsl.lu_solve((lu, piv), b, trans=t))
                got = solve(lu, piv, b)
                with jax.default_device(cpu):
                    want = solve(np.asarray(lu), np.asarray(piv), b)
                np.testing.assert_allclose(np.asarray(got), np.asarray(want),
                                           rtol=1e-3, atol=1e-3)


# --- soak ------------------------------------------------------------------------

def _rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_soak_10000_training_steps(gpu):
    """10,000 executions of a small training step (an MLP, its gradient over
    a scan of 4 micro-batches, SGD): device and host memory stay flat."""
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((32, 64)).astype(np.float32) * 0.1,
              "b1": np.zeros(64, np.float32),
              "w2": rng.standard_normal((64, 8)).astype(np.float32) * 0.1}
    xs = rng.standard_normal((4, 16, 32)).astype(np.float32)
    ys = rng.standard_normal((4, 16, 8)).astype(np.float32)

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    @jax.jit
    def step(p, xs, ys):
        def micro(g, xy):
            l, gi = jax.value_and_grad(loss)(p, *xy)
            return jax.tree.map(jnp.add, g, gi), l
        g0 = jax.tree.map(jnp.zeros_like, p)
        g, ls = lax.scan(micro, g0, (xs, ys))
        return jax.tree.map(lambda a, b: a - 0.05 * b / 4, p, g), ls.mean()

    p = jax.device_put(params, gpu)
    xs_d, ys_d = jax.device_put(xs, gpu), jax.device_put(ys, gpu)
    samples = []
    first_loss = None
    for i in range(10000):
        p, l = step(p, xs_d, ys_d)
        if i == 0:
            first_loss = float(l)
        if (i + 1) % 1000 == 0:
            l = float(l)  # waits
            st = gpu.memory_stats() or {}
            samples.append((i + 1, st.get("bytes_in_use"), _rss_bytes(), l))
    print("\nsoak: step, device bytes_in_use, host RSS MiB, loss")
    for n, dev_b, rss, l in samples:
        print(f"  {n:6d} {dev_b} {rss / 2**20:8.1f} {l:.6f}")
    assert samples[-1][3] < first_loss
    dev_in_use = [s[1] for s in samples]
    if dev_in_use[0] is not None:
        assert max(dev_in_use[1:]) <= dev_in_use[1], dev_in_use
    rss = [s[2] for s in samples]
    # Host memory flat after warm-up: under 16 MiB over 8,000 steps.
    assert rss[-1] - rss[1] < 16 << 20, [r >> 20 for r in rss]
