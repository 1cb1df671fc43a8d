"""Compile-time memory is bounded (issue 13): a compile builds nothing in
proportion to outputs x window, and what it does build in proportion to the
program's declared sizes (splat constants, FFT plans) is charged to
IRON_COMPILE_MEMORY_LIMIT first, so a small program cannot make the plugin
allocate gigabytes while compiling; past the limit the compile fails with
RESOURCE_EXHAUSTED naming the structure, and the process stays usable."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax._src import compiler
from jax._src.lib import xla_client as xc

# The resident-memory growth a compile may cause (the peak, VmHWM, minus
# the resident size before it). Measured: 0 MB for the 2^20 and 2^24
# sliding max (XLA:CPU: 4 MB); the per-output window lists this replaces
# took 1032 MB at 2^20 and 4128 MB at 2^22.
MAX_GROWTH = 64 << 20

_RSS_SCRIPT = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp
    from jax import lax

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024

    n = int(sys.argv[1])
    dev = jax.devices("iron")[0]
    sh = jax.sharding.SingleDeviceSharding(dev)
    f = lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (64,), (1,), "SAME")
    low = jax.jit(f).lower(jax.ShapeDtypeStruct((n,), jnp.float32,
                                                sharding=sh))
    # Warm the compile path (first compile loads and registers things).
    jax.jit(lambda v: v + 1).lower(
        jax.ShapeDtypeStruct((4,), jnp.float32, sharding=sh)).compile()
    before = status("VmRSS")
    low.compile()
    print(status("VmHWM") - before)
""")


@pytest.mark.parametrize("log2n", [20, 24])
def test_sliding_max_compile_memory_is_small(log2n):
    # A fresh process, so that the high-water mark is this compile's.
    # The host device: on CUDA the compile also runs NVRTC, whose own
    # memory this does not bound.
    env = dict(os.environ, JAX_PLATFORMS="iron", IRON_DEVICE="host")
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(1 << log2n)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    growth = int(out.stdout.strip().splitlines()[-1])
    assert growth < MAX_GROWTH, (
        f"compiling a sliding max over 2^{log2n} elements grew resident "
        f"memory by {growth >> 20} MB")


def _compile_text(dev, text):
    module = ("module @m attributes {mhlo.num_partitions = 1 : i32, "
              "mhlo.num_replicas = 1 : i32} {" + text + "\n}")
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return dev.client.compile_and_load(module, xc.DeviceList((dev,)), options)


def _splat_sum(n):
    # A splat constant of n f32 (4n bytes once materialized) in a few bytes
    # of program, summed to a scalar.
    return f"""
func.func public @main() -> tensor<f32> {{
  %c = stablehlo.constant dense<1.0> : tensor<{n}xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0] : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}}"""


def _fft(n):
    return f"""
func.func public @main(%x: tensor<{n}xcomplex<f32>>) -> tensor<{n}xcomplex<f32>> {{
  %y = stablehlo.fft %x, type = FFT, length = [{n}] : (tensor<{n}xcomplex<f32>>) -> tensor<{n}xcomplex<f32>>
  return %y : tensor<{n}xcomplex<f32>>
}}"""


@pytest.fixture
def compile_limit():
    old = os.environ.get("IRON_COMPILE_MEMORY_LIMIT")

    def set_limit(v):
        if v is None:
            os.environ.pop("IRON_COMPILE_MEMORY_LIMIT", None)
        else:
            os.environ["IRON_COMPILE_MEMORY_LIMIT"] = str(v)
    yield set_limit
    set_limit(old)


def _refusal(dev, text):
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        _compile_text(dev, text)
    return str(e.value)


def test_splat_constant_past_the_limit_is_refused(iron_device, compile_limit):
    compile_limit(64 << 20)
    msg = _refusal(iron_device, _splat_sum(1 << 28))  # 1 GiB
    assert "RESOURCE_EXHAUSTED" in msg
    assert "compile memory limit exceeded" in msg
    assert "stablehlo.constant materialized to 1073741824 bytes" in msg
    assert "IRON_COMPILE_MEMORY_LIMIT=67108864" in msg
    # Under the limit it compiles and runs; the process is fine after.
    exe = _compile_text(iron_device, _splat_sum(1 << 20))
    out = exe.execute([])
    assert float(np.asarray(out[0])) == float(1 << 20)


def test_default_limit_refuses_a_32_gib_splat(iron_device, compile_limit):
    compile_limit(None)  # the default, 16 GiB
    msg = _refusal(iron_device, _splat_sum(1 << 33))
    assert "compile memory limit exceeded" in msg
    assert "IRON_COMPILE_MEMORY_LIMIT=17179869184" in msg


def test_fft_plans_past_the_limit_are_refused(iron_device, compile_limit):
    if iron_device.device_kind != "host":
        pytest.skip("host FFT plans (CUDA's are cuFFT's, in device memory)")
    compile_limit(16 << 20)
    msg = _refusal(iron_device, _fft(1 << 22))
    assert "compile memory limit exceeded" in msg
    assert "stablehlo.fft plans" in msg
    compile_limit(0)  # no limit
    _compile_text(iron_device, _fft(1 << 10))


def test_limit_zero_means_no_limit(iron_device, compile_limit):
    compile_limit(0)
    exe = _compile_text(iron_device, _splat_sum(1 << 22))
    assert float(np.asarray(exe.execute([])[0])) == float(1 << 22)
