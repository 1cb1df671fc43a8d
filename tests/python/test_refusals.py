"""Programs the CUDA device used to refuse while the host ran them (issue
12, README "What the CUDA device still refuses"), each compared with jax's
CPU backend bit for bit: scatters of several operands (jax 0.10.2 emits
single-operand scatters only, so they are written as StableHLO text),
reduce_window of more than 8 operands, integer dots whose batch is past one
launch's grid, convolutions with window attributes past 2^40 and dots of
s2/u2 operands. On the host device they pin the host's answers; with
IRON_DEVICE=cuda (scripts/cuda_tests.sh) they run the new CUDA kernels."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax
from jax._src import compiler
from jax._src.lib import xla_client as xc


def _run_text(dev, text, args):
    module = ("module @m attributes {mhlo.num_partitions = 1 : i32, "
              "mhlo.num_replicas = 1 : i32} {" + text + "\n}")
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    exe = dev.client.compile_and_load(module, xc.DeviceList((dev,)), options)
    outs = exe.execute([jax.device_put(a, dev) for a in args])
    return [np.asarray(o) for o in outs]


# (value, index) argmin per target: duplicates, an out-of-bounds and a
# negative index (dropped), ties broken by the smaller index.
_ARGMIN = """
func.func public @main(%v: tensor<6xf32>, %i: tensor<6xi32>, %idx: tensor<40x1xi32>, %uv: tensor<40xf32>, %ui: tensor<40xi32>) -> (tensor<6xf32>, tensor<6xi32>) {
  %r:2 = "stablehlo.scatter"(%v, %i, %idx, %uv, %ui) ({
    ^bb0(%a0: tensor<f32>, %a1: tensor<i32>, %u0: tensor<f32>, %u1: tensor<i32>):
      %lt = stablehlo.compare LT, %u0, %a0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %u0, %a0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %il = stablehlo.compare LT, %u1, %a1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %t = stablehlo.and %eq, %il : tensor<i1>
      %p = stablehlo.or %lt, %t : tensor<i1>
      %s0 = stablehlo.select %p, %u0, %a0 : tensor<i1>, tensor<f32>
      %s1 = stablehlo.select %p, %u1, %a1 : tensor<i1>, tensor<i32>
      stablehlo.return %s0, %s1 : tensor<f32>, tensor<i32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<6xf32>, tensor<6xi32>, tensor<40x1xi32>, tensor<40xf32>, tensor<40xi32>) -> (tensor<6xf32>, tensor<6xi32>)
  return %r#0, %r#1 : tensor<6xf32>, tensor<6xi32>
}"""

# Three operands (XLA:CPU takes one float precision per scatter), windows
# of 2 rows of [7, 3] (overlapping), an
# order-dependent body: r_i = u_i - a_i + a_{i+1}.
_ROWS = """
func.func public @main(%a: tensor<7x3xf32>, %b: tensor<7x3xi32>, %c: tensor<7x3xi16>, %idx: tensor<9x1xi32>, %ua: tensor<9x2x3xf32>, %ub: tensor<9x2x3xi32>, %uc: tensor<9x2x3xi16>) -> (tensor<7x3xf32>, tensor<7x3xi32>, tensor<7x3xi16>) {
  %r:3 = "stablehlo.scatter"(%a, %b, %c, %idx, %ua, %ub, %uc) ({
    ^bb0(%a0: tensor<f32>, %a1: tensor<i32>, %a2: tensor<i16>, %u0: tensor<f32>, %u1: tensor<i32>, %u2: tensor<i16>):
      %d0 = stablehlo.subtract %u0, %a0 : tensor<f32>
      %n0 = stablehlo.convert %a1 : (tensor<i32>) -> tensor<f32>
      %r0 = stablehlo.add %d0, %n0 : tensor<f32>
      %d1 = stablehlo.subtract %u1, %a1 : tensor<i32>
      %n1 = stablehlo.convert %a2 : (tensor<i16>) -> tensor<i32>
      %r1 = stablehlo.add %d1, %n1 : tensor<i32>
      %d2 = stablehlo.subtract %u2, %a2 : tensor<i16>
      %n2 = stablehlo.convert %a0 : (tensor<f32>) -> tensor<i16>
      %r2 = stablehlo.add %d2, %n2 : tensor<i16>
      stablehlo.return %r0, %r1, %r2 : tensor<f32>, tensor<i32>, tensor<i16>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<7x3xf32>, tensor<7x3xi32>, tensor<7x3xi16>, tensor<9x1xi32>, tensor<9x2x3xf32>, tensor<9x2x3xi32>, tensor<9x2x3xi16>) -> (tensor<7x3xf32>, tensor<7x3xi32>, tensor<7x3xi16>)
  return %r#0, %r#1, %r#2 : tensor<7x3xf32>, tensor<7x3xi32>, tensor<7x3xi16>
}"""


def _vals(rng, shape, dtype):
    v = rng.integers(-16, 17, size=shape)
    return (v / 8).astype(dtype) if np.dtype(dtype).kind == "f" else v.astype(dtype)


def _check_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_variadic_scatter_argmin_matches_cpu(iron_device, cpu_device, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, 4, size=(40, 1)).astype(np.int32)
    idx[5] = 9   # out of bounds: dropped
    idx[7] = -1  # negative: dropped
    args = [_vals(rng, (6,), np.float32), np.arange(6, dtype=np.int32), idx,
            _vals(rng, (40,), np.float32),
            rng.integers(-5, 50, size=(40,)).astype(np.int32)]
    _check_same(_run_text(iron_device, _ARGMIN, args),
                _run_text(cpu_device, _ARGMIN, args))


@pytest.mark.parametrize("seed", [1, 2])
def test_variadic_scatter_rows_in_order_matches_cpu(iron_device, cpu_device,
                                                    seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, 6, size=(9, 1)).astype(np.int32)
    args = [_vals(rng, (7, 3), np.float32), _vals(rng, (7, 3), np.int32),
            _vals(rng, (7, 3), np.int16), idx,
            _vals(rng, (9, 2, 3), np.float32), _vals(rng, (9, 2, 3), np.int32),
            _vals(rng, (9, 2, 3), np.int16)]
    _check_same(_run_text(iron_device, _ROWS, args),
                _run_text(cpu_device, _ROWS, args))


def test_variadic_scatter_unique_indices_matches_cpu(iron_device, cpu_device):
    text = _ARGMIN.replace("unique_indices = false", "unique_indices = true")
    rng = np.random.default_rng(5)
    # Distinct in-bounds targets first, the rest out of bounds (dropped).
    idx = np.full((40, 1), 100, np.int32)
    idx[:6, 0] = rng.permutation(6)
    args = [_vals(rng, (6,), np.float32), np.arange(6, dtype=np.int32), idx,
            _vals(rng, (40,), np.float32),
            rng.integers(-5, 50, size=(40,)).astype(np.int32)]
    _check_same(_run_text(iron_device, text, args),
                _run_text(cpu_device, text, args))


@pytest.mark.parametrize("n", [9, 12, 16])
def test_reduce_window_many_operands_matches_cpu(iron_device, cpu_device, n):
    rng = np.random.default_rng(n)
    dts = [np.float32, np.int32, np.float16, np.int8]
    xs = tuple(_vals(rng, (5, 11), dts[i % 4]) for i in range(n))
    inits = tuple(np.zeros((), dts[i % 4]) for i in range(n))

    def body(acc, x):
        # acc_i + x_{i+1}: every operand's window feeds another's result.
        return tuple(acc[i] + x[(i + 1) % n].astype(acc[i].dtype)
                     for i in range(n))

    def f(*xs):
        return lax.reduce_window(xs, inits, body, (2, 3), (2, 2),
                                 ((1, 0), (2, 1)), base_dilation=(1, 2))

    got = jax.jit(f, device=iron_device)(*xs)
    want = jax.jit(f, device=cpu_device)(*xs)
    _check_same([np.asarray(g) for g in got], [np.asarray(w) for w in want])


def test_int_dot_batch_past_grid_matches_numpy(iron_device):
    # batch 70000 > 65535 blocks of a grid's z dimension.
    rng = np.random.default_rng(0)
    a = rng.integers(-9, 10, size=(70000, 3, 2)).astype(np.int32)
    b = rng.integers(-9, 10, size=(70000, 2, 4)).astype(np.int32)
    got = jax.jit(lambda x, y: jnp.einsum("bij,bjk->bik", x, y),
                  device=iron_device)(a, b)
    np.testing.assert_array_equal(np.asarray(got), np.einsum("bij,bjk->bik",
                                                             a, b))


def test_conv_window_attributes_past_2_40_match_numpy(iron_device):
    # Stride 2^44, lhs dilation 2^42, rhs dilation 2^45, padding 2^45: two
    # outputs, kernel tap 1 reading input elements 0 and 4 (the other taps
    # fall in the padding). XLA:CPU returns garbage here (values near 1e-19
    # where the answer is 1.45; jax 0.10.2), so numpy is the reference
    # (products and sums of k/8 values are exact in f32).
    rng = np.random.default_rng(1)
    lhs = _vals(rng, (1, 2, 5), np.float32)
    rhs = _vals(rng, (3, 2, 3), np.float32)

    def f(x, w):
        return lax.conv_general_dilated(
            x, w, window_strides=(1 << 44,), padding=[(1 << 45, 1 << 45)],
            lhs_dilation=(1 << 42,), rhs_dilation=(1 << 45,),
            dimension_numbers=("NCH", "OIH", "NCH"))

    got = np.asarray(jax.jit(f, device=iron_device)(lhs, rhs))
    want = np.stack([rhs[:, :, 1] @ lhs[0, :, 0], rhs[:, :, 1] @ lhs[0, :, 4]],
                    axis=-1)[None]
    assert got.shape == (1, 3, 2)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_dot_of_int2_operands_matches_cpu(iron_device, cpu_device):
    int2 = getattr(jnp, "int2", None)
    if int2 is None:
        pytest.skip("this jax has no int2")
    rng = np.random.default_rng(2)
    a = rng.integers(-2, 2, size=(4, 6)).astype(np.int8)
    b = rng.integers(-9, 10, size=(6, 5)).astype(np.int32)

    def f(x, y):
        return lax.dot_general(x.astype(int2), y, (((1,), (0,)), ((), ())),
                               preferred_element_type=jnp.int32)

    got = np.asarray(jax.jit(f, device=iron_device)(a, b))
    want = np.asarray(jax.jit(f, device=cpu_device)(a, b))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, a.astype(np.int32) @ b)
