"""A small CNN's forward pass and gradients on `iron` against jax's CPU
backend: every convolution form jax emits for training (forward, input
gradient = lhs-dilated transposed convolution, weight gradient = swapped
roles or batch groups) in NHWC/HWIO and NCHW/OIHW, with strides, "SAME"
padding on even sizes (asymmetric), explicit and negative padding, rhs
dilation, feature groups and depthwise, 1-D and 2-D; f32 at DEFAULT
precision (TF32 on the CUDA device, as XLA:GPU) and HIGHEST (exact f32),
bf16 and f64.

On the CUDA device these run through cuDNN where it is installed
(src/device/cuda/cuda_cudnn.c), otherwise through its own kernels; the
last test checks, on a CUDA device whose cuDNN loads, that every
convolution of the CNN did take cuDNN (IRON_CUDA_CUDNN_DEBUG)."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

# (strides, padding, extra kwargs) per layer; channels grow 4 -> 8 -> 8 -> 8.
LAYERS = [
    ((1, 1), ((1, 1), (1, 1)), {}),
    ((2, 2), "SAME", {}),                                # (0, 1) on even sizes
    ((1, 1), "SAME", {"rhs_dilation": (2, 2)}),
    ((2, 1), ((-1, 2), (2, 0)), {"feature_group_count": 2}),
    ((1, 1), "SAME", {"feature_group_count": 8}),        # depthwise
]


def cnn_params(rng, layout, dtype):
    params, cin = [], 4
    for i, (_, _, kw) in enumerate(LAYERS):
        g = kw.get("feature_group_count", 1)
        cout = 8
        shape = (3, 3, cin // g, cout) if layout == "NHWC" else (cout, cin // g, 3, 3)
        params.append((rng.standard_normal(shape) / np.sqrt(9 * cin // g)).astype(dtype))
        cin = cout
    return params


def cnn_loss(params, x, layout, precision):
    dn = ("NHWC", "HWIO", "NHWC") if layout == "NHWC" else ("NCHW", "OIHW", "NCHW")
    h = x
    for w, (s, pad, kw) in zip(params, LAYERS):
        h = lax.conv_general_dilated(h, w, s, pad, dimension_numbers=dn,
                                     precision=precision, **kw)
        h = jax.nn.relu(h) + 0.1 * h
    acc = jnp.float64 if h.dtype == jnp.float64 else jnp.float32
    return jnp.sum(h.astype(acc) ** 2) / h.size, h


def run(device, fn, *args):
    args = jax.device_put(args, device)
    return jax.tree_util.tree_map(np.asarray, jax.jit(fn)(*args))


def rel_close(got, want, tol, what):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    scale = max(np.max(np.abs(want)), 1e-30)
    err = np.max(np.abs(got - want)) / scale
    assert err <= tol, f"{what}: max error {err:.2e} of max |want| {scale:.2e} (tol {tol})"


CASES = [
    # dtype, precision, tolerance relative to the largest value
    ("float32", lax.Precision.DEFAULT, 2e-2),   # TF32 on CUDA
    ("float32", lax.Precision.HIGHEST, 1e-4),   # exact f32 everywhere
    ("bfloat16", None, 6e-2),
    ("float64", None, 1e-10),
]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype,precision,tol", CASES,
                         ids=["f32_default", "f32_highest", "bf16", "f64"])
def test_cnn_forward_and_gradients(iron_device, cpu_device, layout, dtype, precision, tol):
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(7)
    with jax.enable_x64(dtype == "float64"):
        params = cnn_params(rng, layout, dt)
        xs = (2, 10, 12, 4) if layout == "NHWC" else (2, 4, 10, 12)
        x = rng.standard_normal(xs).astype(dt)

        def f(params, x):
            (loss, h), (gp, gx) = jax.value_and_grad(
                lambda p, v: cnn_loss(p, v, layout, precision), argnums=(0, 1),
                has_aux=True)(params, x)
            return loss, h, gp, gx

        got = run(iron_device, f, params, x)
        want = run(cpu_device, f, params, x)
    names = ["loss", "activations", "weight gradients", "input gradient"]
    for name, g, w in zip(names, got, want):
        for i, (a, b) in enumerate(zip(jax.tree_util.tree_leaves(g),
                                       jax.tree_util.tree_leaves(w))):
            rel_close(a, b, tol, f"{layout} {dtype} {name} [{i}]")


def test_conv_1d_and_transpose(iron_device, cpu_device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 17, 4)).astype(np.float32)
    w = rng.standard_normal((5, 4, 6)).astype(np.float32)
    z = rng.standard_normal((2, 5, 5, 4)).astype(np.float32)
    k = rng.standard_normal((3, 3, 4, 6)).astype(np.float32)

    def f(x, w, z, k):
        hi = lax.Precision.HIGHEST
        a = lax.conv_general_dilated(x, w, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"),
                                     precision=hi)
        g = jax.grad(lambda v: jnp.sum(lax.conv_general_dilated(
            v, w, (3,), ((2, 1),), rhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC"),
            precision=hi) ** 2))(x)
        t = lax.conv_transpose(z, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                               precision=hi)
        return a, g, t

    for a, b, name in zip(run(iron_device, f, x, w, z, k), run(cpu_device, f, x, w, z, k),
                          ["1-D conv", "1-D gradient", "transpose"]):
        rel_close(a, b, 1e-5, name)


def test_cnn_convolutions_take_cudnn(iron_device):
    """On a CUDA device with cuDNN, every convolution of the CNN (and its
    gradients) goes to cuDNN: none silently keeps the fallback kernels."""
    if "NVIDIA" not in str(iron_device.device_kind):
        pytest.skip("not a CUDA device")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import numpy as np, jax
        from jax import lax
        import test_conv_cnn as t
        rng = np.random.default_rng(0)
        for layout in ("NHWC", "NCHW"):
            p = t.cnn_params(rng, layout, np.float32)
            x = rng.standard_normal((2, 10, 12, 4) if layout == "NHWC" else (2, 4, 10, 12)).astype(np.float32)
            jax.block_until_ready(jax.jit(jax.grad(
                lambda p, v: t.cnn_loss(p, v, layout, lax.Precision.DEFAULT)[0],
                argnums=(0, 1)))(p, x))
    """)
    env = dict(os.environ, IRON_CUDA_CUDNN_DEBUG="1", JAX_PLATFORMS="iron")
    env.pop("IRON_CUDA_CUDNN", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("iron cudnn:")]
    if any("libcudnn (cuDNN 9) not found" in ln for ln in lines):
        pytest.skip("cuDNN is not installed here")
    assert lines, "no convolution reported (IRON_CUDA_CUDNN_DEBUG)"
    kept = [ln for ln in lines if "kept on the CUDA kernels" in ln]
    assert not kept, "\n".join(kept)
    # 5 layers x (forward, weight gradient) + 5 input gradients, x 2 layouts
    assert sum("cuDNN " in ln for ln in lines) >= 2 * 15, "\n".join(lines)
