"""Single-device collectives, replica/partition ids and tuples, as jax emits
them for shard_map/pmap over a one-device mesh (and as hand-written
StableHLO for the ops jax elides), compared with XLA:CPU. They run on
whatever device `iron` is: with IRON_DEVICE=cuda on a GPU machine the CUDA
device's collectives (device copies and memsets, src/device/cuda/
cuda_collective.c), inside loops recorded as CUDA graphs too."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
from jax._src import compiler
from jax._src.lib import xla_client as xc
from jax._src.lax import parallel

try:
    from jax import shard_map
except ImportError:  # pragma: no cover - older jax
    from jax.experimental.shard_map import shard_map


def _programs(dev):
    mesh = Mesh(np.array([dev]), ("i",))

    def sm(f):
        return jax.jit(shard_map(f, mesh=mesh, in_specs=P(), out_specs=P(),
                                 check_vma=False))

    return {
        "psum": sm(lambda a: jax.lax.psum(a, "i")),
        "psum_tuple": sm(lambda a: jax.lax.psum((a, a.astype(jnp.int32)), "i")),
        "pmax": sm(lambda a: jax.lax.pmax(a, "i")),
        "pmean": sm(lambda a: jax.lax.pmean(a, "i")),
        "all_gather": sm(lambda a: jax.lax.all_gather(a, "i")),
        "all_gather_tiled": sm(lambda a: jax.lax.all_gather(a, "i", tiled=True)),
        "psum_scatter": sm(lambda a: jax.lax.psum_scatter(a, "i", tiled=True)),
        "ppermute_self": sm(lambda a: jax.lax.ppermute(a, "i", [(0, 0)])),
        "ppermute_none": sm(lambda a: jax.lax.ppermute(a, "i", [])),
        "axis_index": sm(lambda a: a + jax.lax.axis_index("i")),
        "psum_in_scan": sm(lambda a: jax.lax.scan(
            lambda c, x: (c + jax.lax.psum(x, "i"), c), a[0], a)[0]),
        # *_start(...).done(): stablehlo.async_start/async_done around the
        # collective, inlined by the tuple pass.
        "psum_async": sm(lambda a: parallel.psum_start(a, "i").done()),
        "all_gather_async": sm(
            lambda a: parallel.all_gather_start(a, "i", tiled=True).done()),
        "ppermute_async": sm(
            lambda a: parallel.ppermute_start(a, "i", [(0, 0)]).done()),
        "psum_scatter_async": sm(lambda a: parallel.psum_scatter_start(
            a, "i", scatter_dimension=0, tiled=True).done()),
        "pmap_psum": jax.pmap(lambda a: jax.lax.psum(a, "i") * 2,
                              axis_name="i", devices=[dev]),
        "pmap_axis_index": jax.pmap(lambda a: a + jax.lax.axis_index("i"),
                                    axis_name="i", devices=[dev]),
    }


_NAMES = list(_programs(jax.devices("cpu")[0]))


@pytest.fixture(scope="module")
def programs(iron_device, cpu_device):
    return _programs(iron_device), _programs(cpu_device)


@pytest.mark.parametrize("name", _NAMES)
def test_single_device_collective_matches_cpu(programs, name):
    iron, cpu = programs
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    arg = x[None] if name.startswith("pmap") else x
    try:
        want = jax.tree.leaves(jax.tree.map(np.asarray, cpu[name](arg)))
    except AttributeError as e:  # an API this jax lacks (0.11: psum_start)
        pytest.skip(f"jax {jax.__version__}: {e}")
    got = jax.tree.leaves(jax.tree.map(np.asarray, iron[name](arg)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


_DTYPES = [np.float32, jnp.bfloat16, np.int8, np.uint32, np.bool_,
           np.complex64, np.float16]


def _sample(dtype, shape):
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 7) - 3
    if dtype == np.complex64:
        return (x + 1j * (x + 1)).astype(dtype)
    if dtype == np.bool_:
        return x > 0
    if dtype == np.uint32:
        return (x + 3).astype(dtype)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(3, 5), (0, 4), (1,)], ids=str)
def test_collectives_dtypes_shapes_match_cpu(iron_device, cpu_device, dtype,
                                             shape):
    def progs(dev):
        mesh = Mesh(np.array([dev]), ("i",))

        def f(a):
            outs = [jax.lax.all_gather(a, "i"),
                    jax.lax.ppermute(a, "i", [(0, 0)]),
                    jax.lax.ppermute(a, "i", [])]
            if dtype != np.bool_:
                outs.append(jax.lax.psum(a, "i"))
            if dtype not in (np.bool_, np.complex64):  # XLA:CPU refuses
                outs.append(jax.lax.pmax(a, "i"))
            return outs

        return jax.jit(shard_map(f, mesh=mesh, in_specs=P(), out_specs=P(),
                                 check_vma=False))

    x = _sample(dtype, shape)
    got = [np.asarray(o) for o in progs(iron_device)(x)]
    want = [np.asarray(o) for o in progs(cpu_device)(x)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_collectives_in_counted_loop_match_cpu(iron_device, cpu_device):
    # A fori_loop of 12 iterations whose body holds collectives: on the CUDA
    # device the body is recorded once as a CUDA graph and replayed, so the
    # copies and memsets must be graph-capturable and land in the loop's
    # carries each iteration.
    def prog(dev):
        mesh = Mesh(np.array([dev]), ("i",))

        def body(i, c):
            a, z = c
            a = jax.lax.psum(a * 0.5 + i, "i")
            a = jax.lax.ppermute(a, "i", [(0, 0)]) + 1
            z = jax.lax.ppermute(z + a, "i", [])
            return a, z

        def f(a):
            return jax.lax.fori_loop(0, 12, body, (a, a))

        return jax.jit(shard_map(f, mesh=mesh, in_specs=P(), out_specs=P(),
                                 check_vma=False))

    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    got = [np.asarray(o) for o in prog(iron_device)(x)]
    want = [np.asarray(o) for o in prog(cpu_device)(x)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], np.zeros_like(x))


def test_pmap_collective_grads_match_cpu(iron_device, cpu_device):
    # jax's pmap tests (testGradOfGather, testGradOfPsum, ...): the
    # transposes of all_gather/psum are reduce_scatter/psum.
    def prog(dev):
        def f(a):
            g = jax.lax.all_gather(a, "i", tiled=True)
            s = jax.lax.psum_scatter(g * g, "i", tiled=True)
            return jnp.sum(jax.lax.psum(s, "i") * a)

        return jax.pmap(jax.grad(f), axis_name="i", devices=[dev])

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 12)
    np.testing.assert_allclose(np.asarray(prog(iron_device)(x)),
                               np.asarray(prog(cpu_device)(x)), rtol=1e-6)


def test_ppermute_without_source_gives_zeros(programs):
    iron, _ = programs
    x = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
    np.testing.assert_array_equal(np.asarray(iron["ppermute_none"](x)),
                                  np.zeros_like(x))


# --------------------------------------------------------------------------
# Hand-written StableHLO: ops jax elides on one device, tuples.

_MODULES = {
    "all_to_all": """
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "stablehlo.all_to_all"(%arg0) {split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}""",
    "all_reduce_variadic": """
func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<3xf32>) -> (tensor<2x4xf32>, tensor<3xf32>) {
  %0:2 = "stablehlo.all_reduce"(%arg0, %arg1) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.multiply %a, %b : tensor<f32>
      stablehlo.return %1 : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2x4xf32>, tensor<3xf32>) -> (tensor<2x4xf32>, tensor<3xf32>)
  return %0#0, %0#1 : tensor<2x4xf32>, tensor<3xf32>
}""",
    "replica_partition_id": """
func.func public @main(%arg0: tensor<2x4xf32>) -> (tensor<ui32>, tensor<ui32>) {
  %0 = stablehlo.replica_id : tensor<ui32>
  %1 = stablehlo.partition_id : tensor<ui32>
  return %0, %1 : tensor<ui32>, tensor<ui32>
}""",
    "tuple_nested": """
func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<3xf32>) -> (tensor<3xf32>, tensor<2x4xf32>) {
  %t = stablehlo.tuple %arg0, %arg1 : tuple<tensor<2x4xf32>, tensor<3xf32>>
  %u = stablehlo.tuple %t, %arg0 : tuple<tuple<tensor<2x4xf32>, tensor<3xf32>>, tensor<2x4xf32>>
  %a = stablehlo.get_tuple_element %u[0] : (tuple<tuple<tensor<2x4xf32>, tensor<3xf32>>, tensor<2x4xf32>>) -> tuple<tensor<2x4xf32>, tensor<3xf32>>
  %b = stablehlo.get_tuple_element %a[1] : (tuple<tensor<2x4xf32>, tensor<3xf32>>) -> tensor<3xf32>
  %c = stablehlo.get_tuple_element %u[1] : (tuple<tuple<tensor<2x4xf32>, tensor<3xf32>>, tensor<2x4xf32>>) -> tensor<2x4xf32>
  %d = stablehlo.add %c, %c : tensor<2x4xf32>
  return %b, %d : tensor<3xf32>, tensor<2x4xf32>
}""",
    "tuple_in_region": """
func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<3xf32>) -> (tensor<2x4xf32>, tensor<3xf32>) {
  %t = stablehlo.tuple %arg0, %arg1 : tuple<tensor<2x4xf32>, tensor<3xf32>>
  %p = stablehlo.constant dense<true> : tensor<i1>
  %r:2 = "stablehlo.if"(%p) ({
    %x = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2x4xf32>, tensor<3xf32>>) -> tensor<2x4xf32>
    %y = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2x4xf32>, tensor<3xf32>>) -> tensor<3xf32>
    %z = stablehlo.negate %y : tensor<3xf32>
    stablehlo.return %x, %z : tensor<2x4xf32>, tensor<3xf32>
  }, {
    stablehlo.return %arg0, %arg1 : tensor<2x4xf32>, tensor<3xf32>
  }) : (tensor<i1>) -> (tensor<2x4xf32>, tensor<3xf32>)
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<3xf32>
}""",
}

_ARGS = [np.arange(8, dtype=np.float32).reshape(2, 4) - 3,
         np.array([5, -2, 7], np.float32)]


def _run_text(dev, text, num_args):
    module = ("module @m attributes {mhlo.num_partitions = 1 : i32, "
              "mhlo.num_replicas = 1 : i32} {" + text + "\n}")
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    exe = dev.client.compile_and_load(module, xc.DeviceList((dev,)), options)
    outs = exe.execute([jax.device_put(a, dev) for a in _ARGS[:num_args]])
    return [np.asarray(o) for o in outs]


@pytest.mark.parametrize("name", list(_MODULES))
def test_stablehlo_collectives_and_tuples_match_cpu(iron_device, cpu_device,
                                                    name):
    text = _MODULES[name]
    num_args = text.split("->")[0].count("%arg")
    got = _run_text(iron_device, text, num_args)
    want = _run_text(cpu_device, text, num_args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_variadic_collective_in_place_across_operands(iron_device,
                                                      cpu_device):
    # %b dies at the all_reduce and has the byte size of %a's result, which
    # the planner then writes into %b's storage (in place across operands):
    # result 1 must still read %b before that.
    text = """
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %b = stablehlo.add %arg1, %arg1 : tensor<4xf32>
  %0:2 = "stablehlo.all_reduce"(%arg0, %b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %1 = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %1 : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0, %0#1, %arg0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}"""
    args = [np.array([1, -2, 3, 7], np.float32),
            np.array([0.5, -1.25, 3.0, 8.0], np.float32)]

    def run(dev):
        module = ("module @m attributes {mhlo.num_partitions = 1 : i32, "
                  "mhlo.num_replicas = 1 : i32} {" + text + "\n}")
        options = compiler.get_compile_options(num_replicas=1,
                                               num_partitions=1)
        exe = dev.client.compile_and_load(module, xc.DeviceList((dev,)),
                                          options)
        return [np.asarray(o) for o in
                exe.execute([jax.device_put(a, dev) for a in args])]

    got, want = run(iron_device), run(cpu_device)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[1], args[1] * 2)


def test_collective_broadcast_is_identity(iron_device):
    # XLA:CPU has no collective-broadcast; with one participant the result
    # is the source's (our only) operand.
    text = """
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "stablehlo.collective_broadcast"(%arg0) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}"""
    (got,) = _run_text(iron_device, text, 1)
    np.testing.assert_array_equal(got, _ARGS[0])


@pytest.mark.parametrize("text,detail", [
    ("""
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %1 : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}""", "stablehlo.all_reduce is not supported yet across devices"),
    ("""
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}""", "stablehlo.collective_permute is not supported yet across devices"),
    ("""
func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<3xf32>) -> tuple<tensor<2x4xf32>, tensor<3xf32>> {
  %t = stablehlo.tuple %arg0, %arg1 : tuple<tensor<2x4xf32>, tensor<3xf32>>
  return %t : tuple<tensor<2x4xf32>, tensor<3xf32>>
}""", "stablehlo.tuple is not supported yet with type tuple<"),
])
def test_multi_device_collectives_and_escaping_tuples_refused(iron_device,
                                                              text, detail):
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        _run_text(iron_device, text, text.split("->")[0].count("%arg"))
    assert "UNIMPLEMENTED" in str(info.value)
    assert detail in str(info.value)


# jax 0.11.2 hands its asynchronous collectives (all_gather_start(...).done()
# and the like) to the plugin as custom calls with a JSON configuration
# (src/compiler/tuple_forward.c): on one device each hands its operand on.
_ASYNC_CONFIGS = {
    "all-gather": '{\\22all_gather_dimension\\22: 0, \\22replica_groups\\22: [[0]], \\22use_global_device_ids\\22: true, \\22channel_id\\22: 1}',
    "all-reduce": '{\\22replica_groups\\22: [[0]], \\22use_global_device_ids\\22: true, \\22channel_id\\22: 1}',
    "reduce-scatter": '{\\22scatter_dimension\\22: 0, \\22replica_groups\\22: [[0]], \\22tiled\\22: true, \\22use_global_device_ids\\22: true, \\22channel_id\\22: 1}',
    "all-to-all": '{\\22split_dimension\\22: 0, \\22concat_dimension\\22: 0, \\22split_count\\22: 1, \\22replica_groups\\22: [[0]], \\22channel_id\\22: 1}',
    "collective-permute": '{\\22permutation\\22: [[0, 0]], \\22channel_id\\22: 1}',
}
_REDUCER = """
func.func private @add_float32_reducer(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %b : tensor<f32>
  return %0 : tensor<f32>
}"""


def _async_collective(kind, config):
    called = ("called_computations = [@add_float32_reducer], "
              if kind in ("all-reduce", "reduce-scatter") else "")
    return _REDUCER + f"""
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {{
  %n = stablehlo.negate %arg0 : tensor<2x4xf32>
  %0 = stablehlo.custom_call @"{kind}-start"(%n) {{backend_config = "", {called}mhlo.frontend_attributes = {{async_collective_config = "{config}"}}}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = stablehlo.custom_call @"{kind}-done"(%0) {{backend_config = ""}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = stablehlo.add %1, %arg0 : tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}}"""


@pytest.mark.parametrize("kind", list(_ASYNC_CONFIGS))
def test_async_collective_custom_calls_on_one_device(iron_device, kind):
    (got,) = _run_text(iron_device, _async_collective(kind,
                                                      _ASYNC_CONFIGS[kind]), 1)
    np.testing.assert_array_equal(got, np.zeros_like(_ARGS[0]))


def test_async_collective_all_devices_group(iron_device):
    # No replica groups: one group of every device, here the only one.
    config = '{\\22replica_groups\\22: [], \\22channel_id\\22: 1}'
    (got,) = _run_text(iron_device, _async_collective("all-reduce", config), 1)
    np.testing.assert_array_equal(got, np.zeros_like(_ARGS[0]))


@pytest.mark.parametrize("kind,config,detail", [
    ("all-gather", '{\\22all_gather_dimension\\22: 0, \\22replica_groups\\22: [[0, 1]]}',
     "replica groups"),
    ("all-reduce", '{\\22replica_groups\\22: [[1]]}', "replica groups"),
    ("all-to-all", '{\\22split_count\\22: 1}', "replica groups"),
    ("collective-permute", '{\\22permutation\\22: []}', "permutation"),
    ("collective-permute", '{\\22permutation\\22: [[0, 1]]}', "permutation"),
])
def test_async_collective_custom_calls_refused_beyond_one_device(
        iron_device, kind, config, detail):
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        _run_text(iron_device, _async_collective(kind, config), 1)
    msg = str(e.value)
    assert "UNIMPLEMENTED" in msg and f'"{kind}-start"' in msg, msg
    assert detail in msg, msg
    x = jax.device_put(np.float32(2), iron_device)
    assert float(jax.jit(lambda v: v * 3)(x)) == 6.0
