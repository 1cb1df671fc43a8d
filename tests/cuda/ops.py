"""GPU check of the CUDA device's non-element-wise kernels through jax:
dot_general (cuBLASLt, every canonical layout path and dtype), reductions
(row/column/all, argmax, softmax, layernorm), gather/scatter (embedding
lookup and gradient, take_along_axis, .at[].set/.add/.max), random bits,
sort/argsort, cumsum/cummax, max pooling and its gradient, reduce_precision.
Each result is compared with jax's CPU backend. IRON_CUDA_TF32=0 is set so
f32 dots are exact f32 (TF32 is the default on the GPU; see
docs/decisions.md).

Usage (uses the newest build*/ of this tree or $IRON_PLUGIN_PATH):
    IRON_TEST_REQUIRE_CUDA=1 python3 tests/cuda/ops.py
Without a usable GPU it says why and exits 0, or 1 with
IRON_TEST_REQUIRE_CUDA=1. Any wrong answer or error exits 1.
"""
import os
import sys
import traceback

os.environ.setdefault("IRON_DEVICE", "cuda")
os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")
os.environ.setdefault("IRON_CUDA_TF32", "0")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "python"))

import numpy as np  # noqa: E402

REQUIRE = os.environ.get("IRON_TEST_REQUIRE_CUDA") == "1"
failures = []


def main():
    import jax
    import jax.numpy as jnp
    from jax import lax
    try:
        dev = jax.devices("iron")[0]
    except Exception as e:  # client creation failed: no usable GPU
        print(f"no CUDA device for ironjax: {e}")
        return 1 if REQUIRE else 0
    cpu = jax.devices("cpu")[0]
    rng = np.random.default_rng(0)

    def run(name, f, *args, rtol=1e-5, atol=1e-5, exact=False):
        try:
            want = jax.jit(f)(*[jax.device_put(a, cpu) for a in args])
            got = jax.jit(f)(*[jax.device_put(a, dev) for a in args])
            wl, gl = jax.tree.leaves(want), jax.tree.leaves(got)
            ok = len(wl) == len(gl)
            for w, g in zip(wl, gl):
                w, g = np.asarray(w), np.asarray(g)
                if w.shape != g.shape or w.dtype != g.dtype:
                    ok = False
                elif exact or not np.issubdtype(w.dtype, np.inexact):
                    ok &= w.tobytes() == g.tobytes() or np.array_equal(
                        w, g, equal_nan=True)
                else:
                    ct = (np.complex128 if np.iscomplexobj(w) else np.float64)
                    ok &= np.allclose(g.astype(ct), w.astype(ct), rtol=rtol,
                                      atol=atol, equal_nan=True)
            print(("ok    " if ok else "FAIL  ") + name, flush=True)
            if not ok:
                failures.append(name)
        except Exception:
            print("ERROR " + name, flush=True)
            traceback.print_exc()
            failures.append(name)

    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    bf = lambda *s: f32(*s).astype(jnp.bfloat16)  # noqa: E731

    # --- dot_general
    a, b = f32(64, 96), f32(96, 48)
    run("matmul", jnp.matmul, a, b, rtol=1e-4, atol=1e-4)
    run("x @ W.T", lambda x, w: x @ w.T, a, f32(48, 96), rtol=1e-4, atol=1e-4)
    run("x.T @ g", lambda x, g: x.T @ g, f32(96, 64), f32(96, 48), rtol=1e-4,
        atol=1e-4)
    q, k = f32(2, 4, 16, 32), f32(2, 4, 16, 32)
    run("attention scores", lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k),
        q, k, rtol=1e-4, atol=1e-4)
    run("batch dim in the middle", lambda x, y: jnp.einsum("ibk,kbj->bij", x, y),
        f32(6, 3, 8), f32(8, 3, 5), rtol=1e-4, atol=1e-4)
    run("two contracting dims",
        lambda x, y: lax.dot_general(x, y, (((0, 2), (1, 0)), ((), ()))),
        f32(3, 2, 4), f32(4, 3, 5), rtol=1e-4, atol=1e-4)
    run("vdot", jnp.dot, f32(1000), f32(1000), rtol=1e-4, atol=1e-4)
    run("matvec", jnp.dot, f32(33, 17), f32(17), rtol=1e-4, atol=1e-4)
    run("bf16 matmul", jnp.matmul, bf(32, 64), bf(64, 16), rtol=2e-2, atol=2e-2)
    run("bf16 -> f32", lambda x, y: jnp.matmul(x, y,
                                               preferred_element_type=jnp.float32),
        bf(32, 64), bf(64, 16), rtol=1e-3, atol=1e-3)
    run("f16 matmul", jnp.matmul, f32(32, 64).astype(np.float16),
        f32(64, 16).astype(np.float16), rtol=1e-2, atol=1e-2)
    run("int32 matmul", jnp.matmul, rng.integers(-50, 50, (20, 30), np.int32),
        rng.integers(-50, 50, (30, 10), np.int32))
    run("int8 -> int32", lambda x, y: lax.dot(x, y, preferred_element_type=jnp.int32),
        rng.integers(-100, 100, (20, 30), np.int8),
        rng.integers(-100, 100, (30, 10), np.int8))
    run("c64 matmul", jnp.matmul, (f32(8, 9) + 1j * f32(8, 9)).astype(np.complex64),
        (f32(9, 7) + 1j * f32(9, 7)).astype(np.complex64), rtol=1e-4, atol=1e-4)
    run("empty contraction", jnp.matmul, f32(3, 0), f32(0, 4))
    if os.environ.get("IRON_CUDA_TF32") == "0":
        run("HIGHEST precision", lambda x, y: jnp.matmul(
            x, y, precision=lax.Precision.HIGHEST), a, b, rtol=1e-4, atol=1e-4)

    # --- reduce
    x = f32(128, 1000)
    run("row sum", lambda x: x.sum(1), x, rtol=1e-4, atol=1e-4)
    run("column sum", lambda x: x.sum(0), x, rtol=1e-4, atol=1e-4)
    run("total sum", jnp.sum, f32(1 << 20), rtol=1e-4, atol=1e-3)
    run("row max", lambda x: x.max(1), x, exact=True)
    run("min over 0,2", lambda x: x.min((0, 2)), f32(7, 50, 33), exact=True)
    xn = x.copy()
    xn[3, 17] = np.nan
    xn[5, ::7] = -0.0
    # (XLA:CPU's own wide-row max loses NaNs; 24-wide rows propagate them.)
    run("max with NaN", lambda x: x.max(1), xn[:, :24], exact=True)
    run("argmax", lambda x: jnp.argmax(x, 1), xn)
    run("argmin axis 0", lambda x: jnp.argmin(x, 0), xn)
    run("any/all", lambda x: (jnp.any(x > 2, 1), jnp.all(x > -3, 0)), x)
    run("int sum", lambda x: x.sum(0), rng.integers(-9, 9, (300, 7), np.int32))
    run("softmax", lambda x: jax.nn.softmax(x, -1), x, rtol=1e-5, atol=1e-6)
    run("layernorm", lambda x: (x - x.mean(-1, keepdims=True)) /
        jnp.sqrt(x.var(-1, keepdims=True) + 1e-5), x, rtol=1e-4, atol=1e-4)
    run("bf16 mean", lambda x: x.mean(-1), bf(64, 512), rtol=1e-2, atol=1e-2)
    run("long rows", lambda x: x.sum(-1), f32(4, 100000), rtol=1e-4, atol=1e-3)

    # --- gather / scatter
    table, ids = f32(1000, 64), rng.integers(0, 1000, (8, 16), np.int32)
    run("embedding lookup", lambda t, i: t[i], table, ids, exact=True)
    logits, labels = f32(32, 100), rng.integers(0, 100, (32,), np.int32)
    run("take_along_axis", lambda l, y: jnp.take_along_axis(l, y[:, None], 1),
        logits, labels, exact=True)
    run("cross entropy", lambda l, y: -jnp.mean(
        jnp.take_along_axis(jax.nn.log_softmax(l), y[:, None], 1)),
        logits, labels, rtol=1e-5, atol=1e-5)
    run("embedding grad", jax.grad(lambda t, i: (t[i] ** 2).sum()), table, ids,
        rtol=1e-5, atol=1e-5)
    run("clamped gather", lambda x, i: x[i], f32(10), np.array([-3, 4, 12], np.int32))
    idx = rng.integers(0, 20, (50,), np.int32)
    run(".at[].add", lambda x, i, u: x.at[i].add(u), f32(20, 8), idx, f32(50, 8),
        rtol=1e-5, atol=1e-5)
    run(".at[].set", lambda x, i, u: x.at[i].set(u), f32(20, 8), idx, f32(50, 8),
        exact=True)
    run(".at[].max", lambda x, i, u: x.at[i].max(u), f32(20, 8), idx, f32(50, 8),
        exact=True)
    run(".at[].add bf16", lambda x, i, u: x.at[i].add(u), bf(20, 8), idx,
        bf(50, 8), rtol=2e-2, atol=2e-2)
    run(".at[].add out of bounds", lambda x, i, u: x.at[i].add(u, mode="drop"),
        f32(20), np.array([0, 25, -1, 19], np.int32), f32(4), exact=True)

    # --- random bits
    run("random threefry",
        lambda k: jax.random.bits(jax.random.wrap_key_data(k, impl="threefry2x32"),
                                  (1000, 3)),
        np.array([1, 2], np.uint32))
    run("random normal", lambda k: jax.random.normal(
        jax.random.wrap_key_data(k, impl="threefry2x32"), (4096,)),
        np.array([7, 9], np.uint32), rtol=1e-6, atol=1e-6)
    for alg in ("threefry2x32", "rbg", "unsafe_rbg"):
        run(f"random bits {alg}",
            lambda d, alg=alg: jax.random.bits(jax.random.key(3, impl=alg),
                                               (17, 5), jnp.uint32) + d,
            np.uint32(0))

    # --- sort
    s = f32(16, 1000)
    s[0, ::13] = np.nan
    s[1, ::11] = -0.0
    run("sort", lambda x: jnp.sort(x, -1), s, exact=True)
    run("argsort (stable)", lambda x: jnp.argsort(jnp.round(x), -1, stable=True), s)
    run("sort axis 0", lambda x: jnp.sort(x, 0), f32(300, 5), exact=True)
    run("lax.sort 2 keys", lambda a, b: lax.sort((a, b), num_keys=2),
        rng.integers(0, 3, (500,), np.int32), f32(500), exact=True)
    run("top_k via sort", lambda x: jnp.sort(x)[..., -5:], f32(8, 64), exact=True)

    # --- windows
    run("cumsum", lambda x: jnp.cumsum(x, 1), f32(4, 300), rtol=1e-4, atol=1e-4)
    run("cummax reverse", lambda x: lax.cummax(x, 1, reverse=True), f32(4, 300),
        exact=True)
    img = f32(2, 9, 11, 3)
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1),  # noqa: E731
                                       (1, 2, 2, 1), "SAME")
    run("max pool", pool, img, exact=True)
    run("max pool grad", jax.grad(lambda x: (pool(x) ** 2).sum()), img,
        rtol=1e-5, atol=1e-5)
    run("avg pool", lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1),
                                                (1, 2, 2, 1), "VALID") / 4,
        img, rtol=1e-6, atol=1e-6)
    run("reduce_precision", lambda x: lax.reduce_precision(x, 5, 10), f32(1000),
        exact=True)

    print(f"cuda ops: {'PASSED' if not failures else 'FAILED'} "
          f"({len(failures)} failing: {failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
