"""GPU smoke test of ironjax's CUDA device through jax: device listing,
host<->device round trips of every common dtype, programs that need no
kernel (identity, reshape, constants, donation), copies between GPUs, and
timings. Kernel ops (jnp.sin) are reported, not required: they arrive with
the CUDA kernels.

Usage (one command; builds nothing, uses the newest build*/ of this tree or
$IRON_PLUGIN_PATH):
    IRON_TEST_REQUIRE_CUDA=1 python3 tests/cuda/smoke.py
Without a usable GPU it says why and exits 0, or 1 with
IRON_TEST_REQUIRE_CUDA=1. Any wrong answer exits 1.
"""
import os
import sys
import time

os.environ.setdefault("IRON_DEVICE", "cuda")
os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "python"))

import numpy as np  # noqa: E402

REQUIRE = os.environ.get("IRON_TEST_REQUIRE_CUDA") == "1"
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def main():
    import jax
    import jax.numpy as jnp
    try:
        devs = jax.devices("iron")
    except Exception as e:  # client creation failed: no usable GPU
        print(f"no CUDA device for ironjax: {e}")
        return 1 if REQUIRE else 0
    cpu = jax.devices("cpu")[0]
    dev = devs[0]
    print(f"devices: {devs}; kind={dev.device_kind!r}")
    check(dev.platform == "iron", "platform is iron")
    check("NVIDIA" in dev.device_kind, "device_kind names the GPU")
    check(f"kind={dev.device_kind}" in str(dev), "str(device) carries the kind")

    # Round trips.
    rng = np.random.default_rng(0)
    dtypes = [np.float32, np.float16, jnp.bfloat16, np.int8, np.uint8,
              np.int16, np.int32, np.uint32, np.bool_, np.complex64]
    for dt in dtypes:
        for shape in [(), (0,), (7,), (3, 5, 7), (1000, 33)]:
            x = (rng.standard_normal(shape) * 50).astype(dt)
            y = np.asarray(jax.device_put(x, dev))
            check(y.dtype == x.dtype and y.shape == x.shape and
                  y.tobytes() == x.tobytes(),
                  f"round trip {np.dtype(dt).name}{list(shape)}")
    # Non-contiguous host data.
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    for view, name in [(base.T, "transposed"), (base[:, ::3], "stepped"),
                       (base[::-1], "reversed")]:
        y = np.asarray(jax.device_put(view, dev))
        check(np.array_equal(y, view), f"round trip of a {name} array")

    # Programs without kernels.
    x = jax.device_put(np.arange(24, dtype=np.float32).reshape(2, 3, 4), dev)
    ident = jax.jit(lambda a: a)
    y = ident(x)
    check(np.array_equal(np.asarray(y), np.asarray(x)), "jit identity")
    x.delete()  # the result must not alias the argument
    check(np.array_equal(np.asarray(y), np.arange(24).reshape(2, 3, 4)),
          "identity result outlives its deleted argument")
    r = jax.jit(lambda a: a.reshape(6, 4))(y)
    check(r.shape == (6, 4) and
          np.array_equal(np.asarray(r), np.arange(24).reshape(6, 4)),
          "jit reshape")
    k = np.array([7, 8, 9], np.int32)
    a, c = jax.jit(lambda a: (a, jnp.asarray(k)))(y)
    check(np.array_equal(np.asarray(c), k), "jit returning a constant")
    d = jax.device_put(np.ones((128,), np.float32), dev)
    out = jax.jit(lambda a: a, donate_argnums=0)(d)
    check(d.is_deleted() and np.array_equal(np.asarray(out), np.ones(128)),
          "donation")
    if len(devs) > 1:
        z = jax.device_put(y, devs[1])
        check(np.array_equal(np.asarray(z), np.asarray(y)),
              "copy between GPUs")
        check(z.devices() == {devs[1]}, "copy lands on the second GPU")
    else:
        print("note  one GPU: copies between GPUs not exercised")

    # A kernel op: informative until the CUDA kernels land, but never wrong.
    v = np.linspace(-3, 3, 1000, dtype=np.float32)
    try:
        got = np.asarray(jax.jit(jnp.sin)(jax.device_put(v, dev)))
        want = np.asarray(jax.jit(jnp.sin)(jax.device_put(v, cpu)))
        check(np.allclose(got, want, rtol=1e-5, atol=1e-6), "jnp.sin on the GPU")
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0]
        print(f"note  jnp.sin not runnable yet: {msg}")
        check("cuda" in msg or "unimplemented" in msg.lower() or
              "not supported" in msg, "a kernel op is refused with a clear error")

    # Timings.
    big = rng.standard_normal(64 << 20, dtype=np.float32)  # 256 MiB
    t0 = time.perf_counter()
    b = jax.device_put(big, dev)
    b.block_until_ready()
    t1 = time.perf_counter()
    back = np.asarray(b)
    t2 = time.perf_counter()
    check(np.array_equal(back, big), "256 MiB round trip")
    print(f"time  256 MiB: to device {big.nbytes / (t1 - t0) / 1e9:.2f} GB/s, "
          f"to host {big.nbytes / (t2 - t1) / 1e9:.2f} GB/s")
    small = jax.device_put(np.ones((16,), np.float32), dev)
    f = jax.jit(lambda a: a.reshape(4, 4))
    f(small).block_until_ready()
    n = 1000
    t0 = time.perf_counter()
    for _ in range(n):
        o = f(small)
    o.block_until_ready()
    print(f"time  jit reshape dispatch: {(time.perf_counter() - t0) / n * 1e6:.1f} us/call")
    stats = dev.memory_stats()
    if stats:
        print(f"note  memory_stats: {stats}")

    print(f"{'FAILED: ' + ', '.join(failures) if failures else 'all passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
