"""jax features beyond plain programs that jax's own test suite exercises:
Shardy sharding groups, memory kinds (device / pinned_host / unpinned_host),
transfer guards, layouts, error checks. Each is compared with XLA:CPU."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding


# --------------------------------------------------------------------------
# sdy.sharding_group (shard_alike): a no-op on one device.


def test_shard_alike_single_device(iron_device, cpu_device):
    # jax 0.11 moved it out of jax.experimental (skipped there).
    shard_alike = pytest.importorskip(
        "jax.experimental.shard_alike").shard_alike

    def f(x, y):
        a, b = shard_alike(x * 2, y + 1)
        return a + b.sum(), b

    x = np.arange(6, dtype=np.float32)
    y = np.ones(6, dtype=np.float32)
    text = jax.jit(f).lower(x, y).as_text()
    assert "sdy.sharding_group" in text
    got = jax.jit(f)(jax.device_put(x, iron_device),
                     jax.device_put(y, iron_device))
    want = jax.jit(f)(jax.device_put(x, cpu_device),
                      jax.device_put(y, cpu_device))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# --------------------------------------------------------------------------
# Memory kinds: the host device has XLA:CPU's three memories, buffers live in
# the one they were put in, and programs place results in annotated ones.

_KINDS = ("device", "pinned_host", "unpinned_host")


def _sharding(device, kind):
    return SingleDeviceSharding(device, memory_kind=kind)


def test_memory_kinds_match_xla_cpu(iron_device, cpu_device):
    got = [m.kind for m in iron_device.addressable_memories()]
    want = [m.kind for m in cpu_device.addressable_memories()]
    assert got == want == list(_KINDS)
    assert iron_device.default_memory().kind == "device"
    for m in iron_device.addressable_memories():
        assert m.addressable_by_devices() == [iron_device]
        assert iron_device.memory(m.kind) == m


@pytest.mark.parametrize("src", _KINDS)
@pytest.mark.parametrize("dst", _KINDS)
def test_device_put_between_memory_kinds(iron_device, src, dst):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = jax.device_put(x, _sharding(iron_device, src))
    assert a.sharding.memory_kind == src
    b = jax.device_put(a, _sharding(iron_device, dst))
    assert b.sharding.memory_kind == dst
    np.testing.assert_array_equal(np.asarray(b), x)
    if src != dst:
        a.delete()  # the copy is its own buffer
        np.testing.assert_array_equal(np.asarray(b), x)


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_jit_result_placed_in_memory_kind(iron_device, cpu_device, kind):
    x = np.arange(6, dtype=np.float32)
    results = {}
    for dev in (iron_device, cpu_device):
        f = jax.jit(lambda a: a * 2 + 1, out_shardings=_sharding(dev, kind))
        arg = jax.device_put(x, _sharding(dev, kind))
        compiled = f.lower(arg).compile()
        out = compiled(arg)
        assert out.sharding.memory_kind == kind
        assert compiled.runtime_executable().get_output_memory_kinds() == \
            [[kind]] or \
            compiled.runtime_executable().get_output_memory_kinds() == [kind]
        results[dev.platform] = np.asarray(out)
    np.testing.assert_array_equal(results["iron"], results["cpu"])


def _offload_programs(dev):
    """Host-offloading programs a user writes; each returns arrays and the
    memory kinds of its results."""
    from jax.ad_checkpoint import checkpoint_name
    host, on_dev = _sharding(dev, "pinned_host"), _sharding(dev, "device")
    x = np.arange(6, dtype=np.float32)
    out = {}
    # An argument in host memory, moved to the device inside the program.
    f = jax.jit(lambda a: jax.device_put(a, on_dev) * 2, in_shardings=host,
                out_shardings=on_dev)
    r = f(jax.device_put(x, host))
    out["in_host"] = (np.asarray(r), r.sharding.memory_kind)
    # A donated argument in host memory, its result there too.
    g = jax.jit(lambda a: a + 1, in_shardings=host, out_shardings=host,
                donate_argnums=0)
    arg = jax.device_put(x, host)
    r = g(arg)
    out["donated"] = (np.asarray(r), r.sharding.memory_kind, arg.is_deleted())
    # Activations offloaded by a remat policy (gradient through them).
    pol = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["y"],
        offload_src="device", offload_dst="pinned_host")

    def loss(w, a):
        y = checkpoint_name(jnp.tanh(a @ w), "y")
        return jnp.sum(jnp.sin(y) ** 2)
    w = jax.device_put(np.eye(4, dtype=np.float32) * 0.5 +
                       np.float32(0.01) * np.arange(16, dtype=np.float32)
                       .reshape(4, 4), dev)
    a = jax.device_put(np.linspace(-1, 1, 12, dtype=np.float32)
                       .reshape(3, 4), dev)
    out["remat"] = (np.asarray(jax.jit(jax.grad(
        jax.checkpoint(loss, policy=pol)))(w, a)),)
    # A scan that puts each step's value in host memory.
    def body(c, _):
        c = jnp.sin(c) + 1
        return c, jax.device_put(c, host)
    c, ys = jax.jit(lambda c: jax.lax.scan(body, c, None, length=4))(
        jax.device_put(x, dev))
    out["scan"] = (np.asarray(c), np.asarray(ys), ys.sharding.memory_kind)
    return out


def test_host_offloading_programs(iron_device, cpu_device):
    got, want = _offload_programs(iron_device), _offload_programs(cpu_device)
    assert got.keys() == want.keys()
    for name in got:
        for g, w in zip(got[name], want[name]):
            if isinstance(g, np.ndarray):
                np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6,
                                           err_msg=name)
            else:
                assert g == w, name


def test_compute_on2_out_memory_space(iron_device):
    compute_on = pytest.importorskip("jax.experimental.compute_on")
    if not hasattr(compute_on, "compute_on2"):
        pytest.skip("this jax has no compute_on2 (jax 0.11.2 has not)")
    compute_on2 = compute_on.compute_on2

    @compute_on2(compute_type="device_host",
                 out_memory_spaces=(jax.memory.Space.Host,
                                    jax.memory.Space.Device))
    def f(x, y):
        return x * 2, y * 3

    x = jax.device_put(jnp.arange(3.0), iron_device)
    out1, out2 = f(x, x)
    np.testing.assert_array_equal(np.asarray(out1), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(out2), [0.0, 3.0, 6.0])
    assert out1.sharding.memory_kind == "pinned_host"
    assert out2.sharding.memory_kind == "device"


# --------------------------------------------------------------------------
# Layouts: iron arrays are row-major. A row-major (or default/auto) layout
# request compiles and runs; any other one is refused at compile time with a
# message naming it (XLA:CPU honours them; iron would need transposing
# buffers), never silently ignored.


def _format(device, major_to_minor):
    from jax.experimental.layout import Format, Layout
    return Format(Layout(major_to_minor=major_to_minor),
                  SingleDeviceSharding(device))


def test_row_major_layout_request_runs(iron_device, cpu_device):
    x = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    got = jax.jit(lambda a: a + 1,
                  in_shardings=_format(iron_device, (0, 1)))(x)
    want = jax.jit(lambda a: a + 1,
                   in_shardings=_format(cpu_device, (0, 1)))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert got.format.layout.major_to_minor == (0, 1)


def test_column_major_layout_request_is_refused(iron_device):
    x = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    f = jax.jit(lambda a: a + 1, in_shardings=_format(iron_device, (1, 0)))
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"argument 0 asks for the layout \{0,1\}.*"
                             r"only the row-major layout"):
        f(x)
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"result 0 asks for the layout \{0,1\}"):
        jax.device_put(x, _format(iron_device, (1, 0)))


# --------------------------------------------------------------------------
# jax.experimental.buffer_callback (jax lowers it for cpu/cuda/rocm only;
# ironjax registers a rule on its host callbacks).


def test_buffer_callback_writes_outputs_in_place(iron_device, cpu_device):
    from jax.experimental import buffer_callback as bc
    seen = []

    def cb(ctx, out, x, y):
        seen.append((ctx.stage, x.shape, x.dtype, x.writeable, out[0].writeable))
        np.asarray(out[0])[...] = np.asarray(x) * 2 + np.asarray(y)
        np.asarray(out[1])[...] = np.asarray(x).sum()

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.ones((3, 4), np.float32)
    out_types = (jax.ShapeDtypeStruct((3, 4), jnp.float32),
                 jax.ShapeDtypeStruct((), jnp.float32))
    results = {}
    for dev in (iron_device, cpu_device):
        fun = jax.jit(lambda a, b: bc.buffer_callback(cb, out_types)(a, b))
        got = fun(jax.device_put(x, dev), jax.device_put(y, dev))
        assert got[0].devices() == {dev}
        results[dev.platform] = [np.asarray(g) for g in got]
    for g, w in zip(results["iron"], results["cpu"]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(results["iron"][0], x * 2 + y)
    assert seen[0][1:] == seen[1][1:] == ((3, 4), np.float32, False, True)
    assert seen[0][0] == seen[1][0] == bc.ExecutionStage.EXECUTE


def test_buffer_callback_side_effect_and_aliases(iron_device):
    from jax.experimental import buffer_callback as bc
    called = []

    def effect(*_):
        called.append(True)

    fun = bc.buffer_callback(effect, jax.ShapeDtypeStruct((), jnp.float32),
                             has_side_effect=True)
    with jax.default_device(iron_device):
        jax.block_until_ready(jax.jit(fun)())
    assert called == [True]

    def add_one(ctx, out, x):
        # The output aliases the input: it starts with the input's values.
        np.asarray(out)[...] += 1

    x = jax.device_put(np.arange(5, dtype=np.int32), iron_device)
    fun = bc.buffer_callback(add_one, jax.ShapeDtypeStruct((5,), jnp.int32),
                             input_output_aliases={0: 0})
    np.testing.assert_array_equal(np.asarray(jax.jit(fun)(x)),
                                  np.arange(1, 6, dtype=np.int32))


# --------------------------------------------------------------------------
# Locations: jax writes a call-site location per Python frame when its
# traceback_in_locations_limit is -1, a chain as deep as the stack. The
# reader once refused chains past 64 levels ("attribute nesting too deep";
# numpyro's NUTS on the GPU machine); past 1024 levels the rest of a chain
# reads as an unknown location.


@pytest.mark.parametrize("depth", [100, 600])
def test_deep_call_site_locations(iron_device, depth):
    prev = jax.config.jax_traceback_in_locations_limit
    jax.config.update("jax_traceback_in_locations_limit", -1)
    try:
        x = jax.device_put(jnp.arange(3.0), iron_device)

        def deep(n):
            if n == 0:
                return jax.jit(lambda v: jnp.sin(v) * 2)(x)
            return deep(n - 1)
        got = deep(depth)
    finally:
        jax.config.update("jax_traceback_in_locations_limit", prev)
    np.testing.assert_allclose(np.asarray(got), np.sin(np.arange(3.0)) * 2,
                               rtol=1e-6)
