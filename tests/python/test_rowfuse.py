"""Row-wise programs (issue 14) on `iron` compared with jax's CPU backend:
softmax, log_softmax, logsumexp, layer norm, RMS norm and their gradients,
f32/bf16/f16, rows of 1 .. 100000 elements, other axes and zero-size
arrays. With IRON_DEVICE=cuda these run the CUDA device's row fusions
(src/compiler/fuse_rows.h: one kernel per group, the host's summation
order) and are compared within a tolerance (the GPU's expf/logf are not
glibc's; everything else, sums included, is computed as the host does: the
GPU-free bit-for-bit check is tests/c/test_cuda_row_fusion_emu.c). Also on
the CUDA device: two runs give the same bits, IRON_CUDA_ROW_FUSION=0 (the
unfused kernels) agrees within the tolerance, and a scanned layer norm (a
row fusion inside a recorded loop body) matches. On the host device the
same comparisons check the host.

scripts/rowfuse_gpu.sh runs this on the GPU."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

TOL = {"float32": 2e-5, "bfloat16": 2e-2, "float16": 4e-3}


def layer_norm(x, g, b, axes=(-1,)):
    mu = jnp.mean(x, axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axes, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5).astype(x.dtype) * g + b


def rms_norm(x, g):
    ms = jnp.mean(jnp.square(x), -1, keepdims=True)
    return x * jax.lax.rsqrt(ms + 1e-6).astype(x.dtype) * g


def inputs(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(s).astype(np.float32) * 2.0,
                        dtype=dtype) for s in shapes]


def program(name, axis=-1):
    if name == "softmax":
        return lambda x: jax.nn.softmax(x, axis), 1
    if name == "log_softmax":
        return lambda x: jax.nn.log_softmax(x, axis), 1
    if name == "logsumexp":
        return lambda x: jax.nn.logsumexp(x, axis), 1
    if name == "layer_norm":
        return layer_norm, 3
    if name == "rms_norm":
        return rms_norm, 2
    if name.endswith("_grad"):
        base = name[:-5]
        if base in ("softmax", "log_softmax", "logsumexp"):
            f, _ = program(base, axis)
            return (lambda x, w: jax.grad(
                lambda x: jnp.sum((f(x) * w).astype(jnp.float32)))(x)), 2
        if base == "layer_norm":
            return (lambda x, g, b, dy: jax.vjp(layer_norm, x, g, b)[1](dy)), 4
        if base == "rms_norm":
            return (lambda x, g, dy: jax.vjp(rms_norm, x, g)[1](dy)), 3
    raise ValueError(name)


def arg_shapes(name, shape):
    row = shape[-1:]
    if name in ("layer_norm",):
        return [shape, row, row]
    if name in ("rms_norm",):
        return [shape, row]
    if name == "logsumexp_grad":
        return [shape, shape[:-1]]
    if name in ("softmax_grad", "log_softmax_grad"):
        return [shape, shape]
    if name == "layer_norm_grad":
        return [shape, row, row, shape]
    if name == "rms_norm_grad":
        return [shape, row, shape]
    return [shape]


def run(device, fn, args):
    args = [jax.device_put(a, device) for a in args]
    return jax.block_until_ready(jax.jit(fn)(*args))


def close(got, want, tol, what, floor=1e-30):
    """max |got - want| <= tol * max(max |want|, floor) per output (floor:
    gradients that cancel to ~0 are measured against the inputs' scale)."""
    for g, w in zip(jax.tree_util.tree_leaves(got),
                    jax.tree_util.tree_leaves(want)):
        g = np.asarray(g, np.float64)
        w = np.asarray(w, np.float64)
        assert g.shape == w.shape, what
        if w.size == 0:
            continue
        assert np.array_equal(np.isnan(g), np.isnan(w)), what
        inf = np.isinf(w)
        assert np.array_equal(g[inf], w[inf]), what
        ok = ~np.isnan(w) & ~inf
        scale = max(np.max(np.abs(w[ok]), initial=0.0), floor)
        err = np.max(np.abs(g[ok] - w[ok]), initial=0.0) / scale
        assert err <= tol, f"{what}: error {err:.3g} > {tol}"


def same_bits(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.tobytes() == y.tobytes()


NAMES = ["softmax", "log_softmax", "logsumexp", "layer_norm", "rms_norm"]
GRADS = [n + "_grad" for n in NAMES]
LENGTHS = [1, 2, 31, 32, 33, 127, 1000, 1024, 4097, 8192, 100000]


def batch(n):
    return (2,) if n >= 100000 else (3, 5) if n < 100 else (6,)


CASES = []
for n in LENGTHS:
    for name in NAMES + GRADS:
        CASES.append((name, "float32", batch(n) + (n,)))
for n in (33, 1000, 8192):
    for name in NAMES:
        CASES.append((name, "bfloat16", batch(n) + (n,)))
        CASES.append((name, "float16", batch(n) + (n,)))
    for name in ("softmax_grad", "layer_norm_grad"):
        CASES.append((name, "bfloat16", batch(n) + (n,)))
# Sizes like the kernels benchmark's, smaller.
CASES += [("softmax", "float32", (256, 8192)), ("layer_norm", "float32", (512, 4096)),
          ("layer_norm_grad", "float32", (256, 4096)),
          ("softmax_grad", "float32", (256, 8192))]


# On the host device (no row fusions there) every third case is enough to
# keep the comparison itself checked; the GPU runs them all.
SPARSE = {id(c) for c in CASES[1::3]}


@pytest.mark.parametrize("case", CASES,
                         ids=[f"{a}-{b}-{'x'.join(map(str, c))}"
                              for a, b, c in CASES])
def test_rowwise(iron_device, cpu_device, case):
    name, dtype, shape = case
    if iron_device.device_kind == "host" and id(case) in SPARSE:
        pass
    elif iron_device.device_kind == "host":
        pytest.skip("row fusions are a CUDA device path; sampled on the host")
    fn, _ = program(name)
    args = inputs(arg_shapes(name, shape), dtype)
    want = run(cpu_device, fn, args)
    got = run(iron_device, fn, args)
    grad = name.endswith("_grad")
    close(got, want, TOL[dtype] * (10 if grad else 1),
          f"{name} {dtype} {shape}", floor=1.0 if grad else 1e-30)
    again = run(iron_device, fn, args)
    same_bits(got, again)


@pytest.mark.parametrize("name,shape,axis", [
    ("softmax", (1000, 3), 0), ("softmax", (2, 300, 3), 1),
    ("log_softmax", (33, 4), 0), ("softmax", (0, 8), -1),
    ("softmax", (4, 0), -1), ("logsumexp", (3, 0), -1),
    ("softmax", (3, 20, 50), (-2, -1))])
def test_other_axes_and_empty(iron_device, cpu_device, name, shape, axis):
    fn, _ = program(name, axis)
    args = inputs([shape], "float32")
    close(run(iron_device, fn, args), run(cpu_device, fn, args), 2e-5,
          f"{name} {shape} axis {axis}")


def test_layer_norm_two_axes(iron_device, cpu_device):
    fn = lambda x, g, b: layer_norm(x, g, b, (-2, -1))  # noqa: E731
    args = inputs([(3, 4, 50), (4, 50), (4, 50)], "float32")
    close(run(iron_device, fn, args), run(cpu_device, fn, args), 2e-5, "ln2d")


def test_scanned_layer_norm(iron_device, cpu_device):
    # A row fusion inside a loop body (recorded as a CUDA graph on cuda).
    def f(x, g, b):
        def body(h, _):
            h = layer_norm(jnp.tanh(h) * 1.5, g, b)
            return h, jnp.sum(jax.nn.softmax(h, -1) * h, -1)
        return jax.lax.scan(body, x, None, length=8)
    args = inputs([(64, 512), (512,), (512,)], "float32")
    close(run(iron_device, f, args), run(cpu_device, f, args), 1e-4, "scan")


def test_switch_off_agrees(iron_device, cpu_device):
    # IRON_CUDA_ROW_FUSION is read at compile time: a new function compiles
    # without row fusions.
    x, w = inputs([(64, 3000), (64, 3000)], "float32")
    fn = lambda x, w: jax.grad(  # noqa: E731
        lambda x: jnp.sum(jax.nn.softmax(x, -1) * w))(x)
    old = os.environ.get("IRON_CUDA_ROW_FUSION")
    os.environ["IRON_CUDA_ROW_FUSION"] = "0"
    try:
        off = run(iron_device, lambda x, w: fn(x, w) + 0.0, [x, w])
    finally:
        if old is None:
            del os.environ["IRON_CUDA_ROW_FUSION"]
        else:
            os.environ["IRON_CUDA_ROW_FUSION"] = old
    on = run(iron_device, fn, [x, w])
    close(on, off, 2e-4, "row fusion on vs off")
    close(on, run(cpu_device, fn, [x, w]), 2e-4, "vs cpu")
