"""Denormals and signed zeros through reductions, scans, windows and dots,
compared bit for bit with XLA:CPU (jax's CPU backend) on the same inputs.

XLA:CPU runs whole programs with denormals flushed (FTZ and DAZ), so a sum
or product that lands on a denormal gives 0, and a max/min of denormals
returns zero; the host device does the same for every job (base/fpenv.h,
device.h: flush_denormals). A reduce over size-1 dims is a reshape in XLA
(init ignored, -0.0 and denormals pass unchanged), and so in iron
(ir.h: iron_ir_reduce_is_reshape). The programs are a sweep: each op over
f32, f64 and bf16 rows of denormals, +-0 and normal values, at lengths
around the host's vector and thread-split boundaries.

One exception, on the CUDA device only: dots run in cuBLAS, which keeps
denormal operands and results (as XLA:GPU's dots do); flushing them would
take a pass over both operands and the result. There a dot's result is
compared with XLA:CPU's after both are flushed (docs/decisions.md). And
XLA:CPU's own bf16 window and scatter max/min depend on the machine: they
flush on the dev machine and kept denormals on the GPU machine's CPU
(vector code for another ISA), so those are compared flushed too."""
import ml_dtypes
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax

_TINY = {np.float32: np.float32(1e-40), np.float64: np.float64(1e-310),
         ml_dtypes.bfloat16: ml_dtypes.bfloat16(1e-39)}


def _rows(dt, n):
    """3 x n: denormals of both signs, zeros of both signs, and products
    that underflow (a tiny normal value in rows that multiply). Every sum
    is exact in any order: the test is about flushing, not summation
    order."""
    t = float(_TINY[dt])
    rng = np.random.default_rng(n)
    pick = np.array([t, -t, 0.5 * t, 0.0, -0.0, 3 * t])
    a = rng.choice(pick, size=(3, n))
    # Powers of two: sums exact in any order, products underflow.
    a[1, ::7] = 2.0 ** (-70 if dt is not np.float64 else -540)
    a[2, n // 2] = 2.0
    return a.astype(dt)


def _programs(dt):
    one = np.array(1, dt)
    progs = {
        "sum": lambda a: jnp.sum(a, axis=1),
        "prod": lambda a: jnp.prod(a, axis=1),
        "max": lambda a: jnp.max(a, axis=1),
        "min": lambda a: jnp.min(a, axis=1),
        "sum_all": lambda a: jnp.sum(a),
        "cumsum": lambda a: jnp.cumsum(a, axis=1),
        "cumprod": lambda a: jnp.cumprod(a, axis=1),
        "cummax": lambda a: lax.cummax(a, axis=1),
        "window_sum": lambda a: lax.reduce_window(
            a, np.array(0, dt), lax.add, (1, 2), (1, 1), "VALID"),
        "window_max": lambda a: lax.reduce_window(
            a, np.array(-np.inf, dt), lax.max, (1, 2), (1, 1), "VALID"),
        # Size-1 reduced dims: a reshape in XLA, whatever the init.
        "sum_unit_axis": lambda a: jnp.sum(a[:, :, None], axis=2),
        "max_unit_axis": lambda a: jnp.max(a[:, None, :], axis=1),
        # Scatter combiners (the host's typed fast paths, CUDA's CAS loop).
        "scatter_max": lambda a: a.at[0].max(a[1]),
        "scatter_min": lambda a: a.at[2].min(a[1]),
        "reduce_init5": lambda a: lax.reduce(
            a[:, :, None], np.array(5, dt), lax.add, (2,)),
    }
    if dt is not ml_dtypes.bfloat16:
        progs["dot"] = lambda a: a @ (a.T * one)
        # Complex arithmetic on denormal parts (c128's f64 parts have no
        # -ftz on the GPU; gen/scalar.c flushes them).
        cz = lambda a: lax.complex(a, a[::-1])  # noqa: E731
        progs["complex_mul"] = lambda a: cz(a) * cz(a[:, ::-1])
        progs["complex_add"] = lambda a: cz(a) + cz(-a[:, ::-1])
    return progs


# bf16 max/min that XLA:CPU flushes on the dev machine and keeps on the
# GPU machine's CPU (another ISA's vector code): compared flushed.
_BF16_MACHINE_DEPENDENT = ("window_max", "scatter_max", "scatter_min")


def _cuda(dev):
    return "NVIDIA" in str(dev.device_kind)


def _flushed(a):
    """a with its denormals and zeros read as +0 (cuBLAS's sum of kept
    denormals has a sign where XLA:CPU's sum of flushed products is +0)."""
    tiny = ml_dtypes.finfo(a.dtype).tiny  # np.finfo may not know bf16
    return np.where(np.abs(a) < tiny, np.zeros_like(a), a)


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33, 257])
@pytest.mark.parametrize("dt", list(_TINY), ids=lambda d: np.dtype(d).name)
def test_denormals_match_xla_cpu(iron_device, cpu_device, dt, n):
    x = _rows(dt, n)
    bad = []
    with jax.enable_x64(True):  # f64 (scoped: other tests run without)
        for name, f in _programs(dt).items():
            got = np.asarray(jax.jit(f)(jax.device_put(x, iron_device)))
            want = np.asarray(jax.jit(f)(jax.device_put(x, cpu_device)))
            if (name == "dot" and _cuda(iron_device)) or (
                    name in _BF16_MACHINE_DEPENDENT and
                    dt is ml_dtypes.bfloat16):
                got, want = _flushed(got), _flushed(want)
            if got.dtype != want.dtype or got.tobytes() != want.tobytes():
                bad.append(f"{name}: iron {got.ravel()[:6]} "
                           f"xla {want.ravel()[:6]}")
    assert not bad, "\n".join(bad)


def _remainder_pairs(dt):
    """Dividend/divisor pairs around the remainder's denormal rules:
    exact remainders that are denormals (a tiny normal divisor), denormal
    dividends (kept when smaller than the divisor), denormal and zero
    divisors (read as zero: NaN), equal denormals, and ordinary pairs."""
    fi = ml_dtypes.finfo(dt)
    tiny, t = float(fi.tiny), float(_TINY[dt])
    xs = [0.25, 0.3, 1.0, -0.75, 3.0 * tiny, t, -t, 0.0, t, 1.0, 5.5, -7.0]
    ys = [tiny * 1.0625, tiny * 1.5, tiny * 3.25, tiny * 1.125, tiny * 2,
          1.0, 0.5, t, t, t, 2.0, -3.0]
    rng = np.random.default_rng(7)
    k = rng.integers(0, len(xs), 64)
    sign = rng.choice([-1.0, 1.0], 64)
    return (np.array(xs)[k] * sign).astype(dt), np.array(ys)[k].astype(dt)


@pytest.mark.parametrize("dt", list(_TINY), ids=lambda d: np.dtype(d).name)
def test_remainder_denormals_match_xla_cpu(iron_device, cpu_device, dt):
    # fz_59815549 (the GPU fuzzer): rem(0.25, 2.4e-38) is an exact
    # denormal that XLA:CPU and the host keep and that the GPU's fmodf
    # under -ftz flushed to 0.
    x, y = _remainder_pairs(dt)
    with jax.enable_x64(True):
        f = jax.jit(lax.rem)
        got = np.asarray(f(jax.device_put(x, iron_device),
                           jax.device_put(y, iron_device)))
        want = np.asarray(f(jax.device_put(x, cpu_device),
                            jax.device_put(y, cpu_device)))
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = np.flatnonzero(((g != w) | (np.signbit(g) != np.signbit(w))) & ~nan)
    assert bad.size == 0, (f"x {x[bad][:4]} y {y[bad][:4]}: iron "
                           f"{got[bad][:4]} xla {want[bad][:4]}")
