"""PJRT surface beyond running programs: executable serialization (jax's
persistent compilation cache), compile-option checks with XLA's messages,
memory stats and cost analysis."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax._src.lib import xla_client as xc

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compiled(fn, *args):
    return jax.jit(fn).lower(*args).compile()


def _loaded_executable(compiled):
    return compiled.runtime_executable()


# --------------------------------------------------------------------------
# Serialization


def _serialize(compiled):
    exe = _loaded_executable(compiled)
    return exe.serialize() if hasattr(exe, "serialize") else \
        exe.client.serialize_executable(exe)


def _deserialize(iron_device, blob):
    from jax._src import compiler
    backend = iron_device.client
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return backend.deserialize_executable(
        blob, xc.DeviceList((iron_device,)), options)


def test_serialized_executable_round_trips(iron_device):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    compiled = _compiled(lambda a: jnp.tanh(a) * 2 + a.sum(), x)
    blob = _serialize(compiled)
    assert b"IRONJAXE" in blob
    loaded = _deserialize(iron_device, blob)
    arg = jax.device_put(x, iron_device)
    (out,) = loaded.execute([arg])
    np.testing.assert_array_equal(np.asarray(out), np.asarray(compiled(arg)))
    # The same program gives the same fingerprint after a round trip.
    assert loaded.fingerprint == _loaded_executable(compiled).fingerprint
    assert loaded.fingerprint
    # Serializing twice gives the same bytes (the cache key relies on none of
    # it, but byte-stable blobs make cache entries comparable).
    assert _serialize(compiled) == blob


@pytest.mark.parametrize("damage", [
    "flip_artifact_byte", "flip_header_size", "flip_checksum", "truncate",
    "truncate_to_header", "empty", "foreign", "future_version",
    "version_1"])
def test_damaged_serialized_executable_is_refused(iron_device, damage):
    compiled = _compiled(lambda a: a + 1, np.float32(1))
    blob = bytearray(_serialize(compiled))
    # jaxlib (IFRT) puts its own header in front of the plugin's bytes:
    # varint length, header, then ours to the end.
    ours = blob.find(b"IRONJAXE")
    assert ours > 0
    expected = "corrupt"
    if damage == "flip_artifact_byte":
        blob[ours + 64 + 10] ^= 0x40
    elif damage == "flip_header_size":
        blob[ours + 16] ^= 0x01
        expected = "truncated or corrupt"
    elif damage == "flip_checksum":
        blob[-1] ^= 0xFF
    elif damage == "truncate":
        blob = blob[:-5]
        expected = "truncated or corrupt"
    elif damage == "truncate_to_header":
        blob = blob[:ours + 40]
        expected = "not an ironjax serialized executable"
    elif damage == "empty":
        blob = blob[:ours]
        expected = "not an ironjax serialized executable"
    elif damage == "foreign":
        blob = blob[:ours] + bytearray(b"\x08\x01" * 100)
        expected = "bad magic bytes"
    elif damage == "future_version":
        blob[ours + 8] = 3
        expected = "format version 3"
    elif damage == "version_1":
        # Blobs of format 1 (their checksum's FNV offset basis lacked a
        # digit) are refused by their version, before the checksum.
        blob[ours + 8] = 1
        expected = "format version 1 (written by"
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        _deserialize(iron_device, bytes(blob))
    assert "INVALID_ARGUMENT" in str(info.value)
    assert expected in str(info.value)


def test_serialized_checksum_is_standard_fnv1a_64(iron_device):
    # The trailer is FNV-1a 64 (offset basis 14695981039346656037, prime
    # 1099511628211) of every byte of the envelope before it, format 2.
    compiled = _compiled(lambda a: a * 3, np.float32(1))
    blob = _serialize(compiled)
    ours = blob.find(b"IRONJAXE")
    assert int.from_bytes(blob[ours + 8:ours + 12], "little") == 2
    h = 14695981039346656037
    for b in blob[ours:-8]:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    assert int.from_bytes(blob[-8:], "little") == h


_CACHE_PROGRAM = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from jax._src import monitoring
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    hits = []
    monitoring.register_event_listener(
        lambda name, **kw: hits.append(name)
        if name == "/jax/compilation_cache/cache_hits" else None)

    @jax.jit
    def f(x, y):
        return jnp.sin(x) @ y + jnp.cumsum(x, axis=1)[:, :2]

    x = jax.device_put(np.arange(12, dtype=np.float32).reshape(3, 4),
                       jax.devices("iron")[0])
    y = jnp.ones((4, 2), jnp.float32)
    out = np.asarray(f(x, y))
    ref = np.asarray(jax.jit(f, backend="cpu")(np.asarray(x), np.asarray(y)))
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    print("HITS", len(hits))
""")


def test_persistent_compilation_cache_across_processes(tmp_path):
    cache = tmp_path / "cache"
    script = tmp_path / "prog.py"
    script.write_text(_CACHE_PROGRAM)
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "iron,cpu")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(_ROOT, "python"), env.get("PYTHONPATH", "")])
    env["IRON_PJRT_TRACE"] = "1"

    def run():
        proc = subprocess.run([sys.executable, str(script), str(cache)],
                              env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc

    first = run()
    assert "[iron-pjrt] PJRT_Client_Compile\n" in first.stderr
    assert "[iron-pjrt] PJRT_Executable_Serialize\n" in first.stderr
    assert any(cache.iterdir())
    second = run()
    # Every iron program of the second run comes from the cache.
    assert "[iron-pjrt] PJRT_Client_Compile\n" not in second.stderr
    assert "[iron-pjrt] PJRT_Executable_DeserializeAndLoad\n" in second.stderr
    hits = int(second.stdout.split("HITS")[1].split()[0])
    assert hits >= 1


# --------------------------------------------------------------------------
# Compile options: the same errors as XLA:CPU


def _compile_error(device, compiler_options):
    lowered = jax.jit(lambda x: jnp.sqrt(x ** 2) + 1.0).lower(
        jax.device_put(np.float32(1), device))
    try:
        lowered.compile(compiler_options=compiler_options)
    except jax.errors.JaxRuntimeError as e:
        return str(e)
    except ValueError as e:
        # jax itself refuses some values before any backend sees them
        # (0.11.2: optimization_level 1 is no CompilerEffortLevel): the
        # same refusal on both devices.
        return f"ValueError: {e}"
    return None


@pytest.mark.parametrize("options", [
    {"invalid_key": "invalid_value"},
    {"exec_time_compilation_effort": 0.0},
    {"xla_embed_ir_in_executable": "invalid_value"},
    {"xla_embed_ir_in_executable": 3},
    {"xla_dump_max_hlo_modules": "abc"},
    {"xla_dump_max_hlo_modules": 1.5},
    {"xla_dump_max_hlo_modules": True},
    {"xla_dump_to": 3},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": "x"},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": 1},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": True},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": ""},
    {"xla_embed_ir_in_executable": 1},
    {"xla_embed_ir_in_executable": "true"},
    {"xla_embed_ir_in_executable": "TRUE"},
    {"xla_dump_max_hlo_modules": 2 ** 40},
    {"xla_dump_max_hlo_modules": "99999999999"},
    {"xla_dump_max_hlo_modules": "7x"},
    {"xla_dump_max_hlo_modules": "0x10"},
    {"": 1},
    # Valid ones compile on both.
    {"xla_embed_ir_in_executable": True},
    {"xla_dump_max_hlo_modules": 200},
    {"exec_time_optimization_effort": 0.0},
    {"optimization_level": 1},
    {"xla_cpu_enable_fast_math": True},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": "0.5"},
    {"xla_gpu_auto_spmd_partitioning_memory_budget_ratio": "nan"},
    {"xla_dump_max_hlo_modules": "7"},
    {"xla_dump_max_hlo_modules": " -3"},
    {"xla_embed_ir_in_executable": "True"},
    {"xla_embed_ir_in_executable": "False"},
])
def test_compile_options_checked_as_xla_cpu(iron_device, cpu_device, options):
    expected = _compile_error(cpu_device, options)
    assert _compile_error(iron_device, options) == expected


def _compile_with(device, **kwargs):
    from jax._src import compiler
    from jax._src.interpreters import mlir
    lowered = jax.jit(lambda x: x + 1).lower(np.float32(1))
    code = mlir.module_to_bytecode(lowered.compiler_ir("stablehlo"))
    options = compiler.get_compile_options(**kwargs)
    try:
        device.client.compile_and_load(code, xc.DeviceList((device,)), options)
    except jax.errors.JaxRuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("kwargs", [
    dict(num_replicas=2, num_partitions=1),
    dict(num_replicas=1, num_partitions=2),
    dict(num_replicas=1, num_partitions=1, device_assignment=np.array([[5]])),
    dict(num_replicas=1, num_partitions=1),
])
def test_replicas_partitions_checked_as_xla_cpu(iron_device, cpu_device,
                                                 kwargs):
    assert _compile_with(iron_device, **kwargs) == \
        _compile_with(cpu_device, **kwargs)


def test_more_replicas_than_one_device_is_unimplemented(iron_device):
    msg = _compile_with(iron_device, num_replicas=2, num_partitions=1,
                        device_assignment=np.array([[0], [0]]))
    assert msg.startswith("UNIMPLEMENTED: ironjax runs a program on one device")


# --------------------------------------------------------------------------
# Memory stats and cost analysis


def test_memory_stats_peak(iron_device):
    stats = iron_device.memory_stats()
    assert set(stats) >= {"bytes_in_use", "peak_bytes_in_use"}
    if iron_device.device_kind == "host":  # no limit unless IRON_HOST_MEMORY_LIMIT
        assert "bytes_limit" not in stats
    else:  # a GPU's memory, as XLA:GPU reports it
        assert stats["bytes_limit"] > 0
    x = jax.device_put(np.zeros((512, 1024), np.float32), iron_device)
    x.block_until_ready()
    during = iron_device.memory_stats()
    assert during["peak_bytes_in_use"] >= during["bytes_in_use"]
    assert during["peak_bytes_in_use"] >= 512 * 1024 * 4
    x.delete()
    after = iron_device.memory_stats()
    assert after["bytes_in_use"] < during["bytes_in_use"]
    assert after["peak_bytes_in_use"] >= during["bytes_in_use"]


def test_memory_stats_limit_when_set():
    code = ("import jax, numpy as np; d = jax.devices('iron')[0]; "
            "print('LIMIT', d.memory_stats()['bytes_limit'])")
    env = dict(os.environ, IRON_HOST_MEMORY_LIMIT="123456789",
               IRON_DEVICE="host")  # the host device's limit
    env.setdefault("JAX_PLATFORMS", "iron,cpu")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(_ROOT, "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LIMIT 123456789" in proc.stdout


def test_cost_analysis_is_an_empty_dict(iron_device):
    # XLA:CPU returns estimates; iron has no cost model and says so with an
    # empty result rather than None (jax's API tests only check for one).
    x = jax.device_put(np.float32(1), iron_device)
    assert jax.jit(lambda a: a + 4).lower(x).compile().cost_analysis() == {}


# --------------------------------------------------------------------------
# Shape polymorphism: jax refines a polymorphic export to the call's static
# shapes before the plugin sees it, so no dynamic-shape op reaches iron.

_POLY = {
    "concat_iota_pad": (lambda x: (
        jnp.concatenate([x, x * 2], axis=0).sum(0)
        + x * jnp.arange(x.shape[0], dtype=jnp.float32)[:, None].sum(),
        jnp.pad(x, ((1, x.shape[0] % 3), (0, 0)))), "b, 4"),
    "matmul_softmax_cumsum": (lambda x: jnp.cumsum(
        jax.nn.softmax(x @ x.T, axis=-1), axis=0), "b, 4"),
    "reshape_gather": (lambda x: x.reshape(x.shape[0] * 2, -1).mean(0)
                       + x[jnp.arange(x.shape[0]) % 2, 1:3].sum(), "b, 4"),
    "two_symbols": (lambda x: jnp.broadcast_to(
        x.sum(), (x.shape[0], x.shape[1] + 1)), "b, c"),
    "fori_over_symbol": (lambda x: jax.lax.fori_loop(
        0, x.shape[0], lambda i, c: c + x[i], jnp.zeros(x.shape[1:])), "b, 4"),
}


@pytest.mark.parametrize("name", list(_POLY))
def test_polymorphic_export_runs_refined(iron_device, cpu_device, name):
    from jax import export
    fn, spec = _POLY[name]
    exported = export.export(jax.jit(fn), platforms=["iron", "cpu"])(
        jax.ShapeDtypeStruct(export.symbolic_shape(spec), jnp.float32))
    assert "?" in exported.mlir_module()  # the artifact itself is dynamic
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    # What reaches the plugin (compiled.as_text() is the artifact it got,
    # from Executable_OptimizedProgram, printed by jaxlib as HLO): static
    # shapes only, no dynamic-shape ops.
    compiled = jax.jit(exported.call).lower(
        jax.device_put(x, iron_device)).compile()
    text = compiled.as_text()
    assert "HloModule" in text
    assert not re.search(r"\[[^\]]*(\?|<=)", text)
    assert "dimension-size" not in text and "dynamic-reshape" not in text
    got = jax.tree.leaves(exported.call(jax.device_put(x, iron_device)))
    want = jax.tree.leaves(exported.call(jax.device_put(x, cpu_device)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


# --------------------------------------------------------------------------
# Array.unsafe_buffer_pointer (PJRT_Buffer_UnsafePointer): the contents'
# address in the device's memory, a host address on the host device and a
# device pointer on the CUDA device (as XLA:GPU reports it). jax's tests
# compare these addresses to tell copies from aliases.

def test_unsafe_buffer_pointer_tells_copies_from_aliases(iron_device):
    put = lambda a: jax.device_put(a, iron_device)
    x = put(np.array([1, 2, 3], np.int32))
    p = x.unsafe_buffer_pointer()
    assert isinstance(p, int) and p != 0
    assert x.unsafe_buffer_pointer() == p  # stable
    # A jitted identity returns a new buffer, two results two buffers
    # (api_test test_trivial_computations).
    y = jax.jit(lambda v: v)(x)
    assert y.unsafe_buffer_pointer() != p
    z1, z2 = jax.jit(lambda v: (v, v))(x)
    assert z1.unsafe_buffer_pointer() != z2.unsafe_buffer_pointer()
    # convert_element_type to the same dtype does not copy; to another does
    # (lax_test LazyConstantTest).
    f = put(np.zeros(5, np.float32))
    assert jax.lax.convert_element_type(f, np.float32).unsafe_buffer_pointer() \
        == f.unsafe_buffer_pointer()
    assert jax.lax.convert_element_type(f, np.int32).unsafe_buffer_pointer() \
        != f.unsafe_buffer_pointer()
    # jnp.array(copy=True) copies, jnp.asarray does not (lax_numpy
    # testArrayCopy); a key array shares its base array's buffer.
    assert jnp.array(x, copy=True).unsafe_buffer_pointer() != p
    assert jnp.asarray(x).unsafe_buffer_pointer() == p
    with jax.default_device(iron_device):
        key = jax.random.key(0)
    assert key.unsafe_buffer_pointer() == key._base_array.unsafe_buffer_pointer()
    # Every live buffer has its own address.
    bufs = [put(np.full(4, i, np.float32)) for i in range(8)]
    assert len({b.unsafe_buffer_pointer() for b in bufs}) == 8
    # On the host device it is where the contents are.
    if iron_device.device_kind == "host":
        import ctypes
        got = (ctypes.c_int32 * 3).from_address(p)
        assert list(got) == [1, 2, 3]
