"""The PJRT surface of the `iron` plugin as jax sees it: registration and
devices, host<->device transfers of every dtype and of strided numpy views,
readiness, memory stats, jit, donation, compiled text, errors; plus the C ABI
of the function table itself (through ctypes)."""
import contextlib
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import jax
import jax.numpy as jnp
from jax import lax

import ironjax

# --------------------------------------------------------------------------
# Registration and devices


def test_iron_device_identity(iron_device):
    assert iron_device.platform == "iron"
    # The host device's kind is "host"; a CUDA device's, the GPU's name.
    if os.environ.get("IRON_DEVICE") == "cuda":
        kind = iron_device.device_kind
        assert kind.startswith("NVIDIA"), kind
    else:
        kind = "host"
        assert iron_device.device_kind == "host"
    assert iron_device.id == 0
    assert repr(iron_device) == f"IronDevice(id=0, kind={kind})"
    assert str(jax.devices("iron")) == f"[IronDevice(id=0, kind={kind})]"
    assert iron_device.client.platform_version.endswith("ironjax 0.1.0")


def test_iron_is_one_addressable_device(iron_device):
    assert jax.devices("iron") == [iron_device]
    assert jax.local_devices(backend="iron") == [iron_device]
    memories = iron_device.addressable_memories()
    assert iron_device.default_memory() == memories[0]
    assert memories[0].kind == "device"
    # Every device has XLA:CPU's memory kinds (test_jax_surface.py tests
    # them; on CUDA the host kinds are page-locked host memory).
    assert [m.kind for m in memories] == ["device", "pinned_host",
                                          "unpinned_host"]


def test_plugin_pins_stablehlo_version():
    from jax._src import xla_bridge as xb
    assert list(xb.backend_stablehlo_version("iron")) == [1, 16, 0]


def test_library_path_is_found():
    path = ironjax.library_path()
    assert path is not None and path.endswith("libiron_pjrt.so")


def test_donation_is_enabled_for_iron(iron_device):  # backends initialised
    from jax._src.interpreters import mlir
    assert "iron" in mlir._platforms_with_donation


# --------------------------------------------------------------------------
# Transfers

DTYPES = [
    ("bool", np.bool_, False),
    ("int8", np.int8, False),
    ("int16", np.int16, False),
    ("int32", np.int32, False),
    ("int64", np.int64, True),
    ("uint8", np.uint8, False),
    ("uint16", np.uint16, False),
    ("uint32", np.uint32, False),
    ("uint64", np.uint64, True),
    ("float16", np.float16, False),
    ("bfloat16", jnp.bfloat16, False),
    ("float32", np.float32, False),
    ("float64", np.float64, True),
    ("complex64", np.complex64, False),
    ("complex128", np.complex128, True),
    ("int4", jnp.int4, False),
    ("uint4", jnp.uint4, False),
    ("float8_e4m3fn", jnp.float8_e4m3fn, False),
    ("float8_e5m2", jnp.float8_e5m2, False),
]


def x64_if(needed):
    return jax.enable_x64(True) if needed else contextlib.nullcontext()


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt in (np.dtype(jnp.int4), np.dtype(jnp.uint4)):
        lo = -8 if dt == np.dtype(jnp.int4) else 0
        return rng.integers(lo, lo + 16, size=shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt,
                            endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(shape) +
                1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def assert_same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    # Bit-exact: compare the raw bytes (NaN-safe, -0.0-safe).
    np.testing.assert_array_equal(
        np.ascontiguousarray(got).view(np.uint8),
        np.ascontiguousarray(want).view(np.uint8))


@pytest.mark.parametrize("name,dtype,x64", DTYPES, ids=[d[0] for d in DTYPES])
def test_round_trip_every_dtype(iron_device, name, dtype, x64):
    with x64_if(x64):
        want = sample(dtype, (3, 5))
        x = jax.device_put(want, iron_device)
        assert x.devices() == {iron_device}
        assert x.dtype == want.dtype
        assert_same(x, want)


@pytest.mark.parametrize("shape", [(), (0,), (4, 0, 3), (1,), (2, 3, 4, 5)],
                         ids=str)
def test_round_trip_shapes(iron_device, shape):
    want = sample(np.float32, shape, seed=1)
    assert_same(jax.device_put(want, iron_device), want)


VIEWS = {
    "transposed": lambda a: a.T,
    "reversed_rows": lambda a: a[::-1],
    "reversed_both": lambda a: a[::-1, ::-1],
    "step_columns": lambda a: a[:, ::3],
    "transposed_reversed": lambda a: a.T[::-2],
    "broadcast_zero_stride": lambda a: np.broadcast_to(a[:1], a.shape),
    "fortran_order": np.asfortranarray,
}


@pytest.mark.parametrize("view", list(VIEWS), ids=list(VIEWS))
@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.complex64,
                                   jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_round_trip_strided_views(iron_device, view, dtype):
    base = sample(dtype, (6, 7), seed=2)
    v = VIEWS[view](base)
    assert_same(jax.device_put(v, iron_device), np.ascontiguousarray(v))


def test_transfer_between_iron_and_cpu(iron_device, cpu_device):
    want = sample(np.float32, (4, 4), seed=3)
    x = jax.device_put(want, iron_device)
    on_cpu = jax.device_put(x, cpu_device)
    assert on_cpu.devices() == {cpu_device}
    assert_same(on_cpu, want)
    back = jax.device_put(on_cpu, iron_device)
    assert back.devices() == {iron_device}
    assert_same(back, want)


def test_block_until_ready_and_delete(iron_device):
    x = jax.device_put(np.arange(10, dtype=np.int32), iron_device)
    assert x.block_until_ready() is x
    assert not x.is_deleted()
    x.delete()
    assert x.is_deleted()
    with pytest.raises(RuntimeError):
        np.asarray(x)


def test_memory_stats_count_live_bytes(iron_device):
    before = iron_device.memory_stats()["bytes_in_use"]
    x = jax.device_put(np.zeros((256, 1024), np.float32), iron_device)
    x.block_until_ready()
    during = iron_device.memory_stats()["bytes_in_use"]
    assert during - before >= 256 * 1024 * 4
    x.delete()
    after = iron_device.memory_stats()["bytes_in_use"]
    assert after < during


# --------------------------------------------------------------------------
# Executables


def test_jit_affine(iron_device):
    f = jax.jit(lambda x: x * 2 + 1)
    x = jax.device_put(np.arange(6, dtype=np.float32).reshape(2, 3),
                       iron_device)
    y = f(x)
    assert y.devices() == {iron_device}
    y.block_until_ready()
    np.testing.assert_array_equal(
        np.asarray(y), np.arange(6, dtype=np.float32).reshape(2, 3) * 2 + 1)


def test_jit_on_default_device_with_several_outputs(iron_device):
    with jax.default_device(iron_device):
        a, b = jax.jit(lambda x, y: (x + y, x * y))(jnp.int32(3), jnp.int32(4))
    assert a.devices() == {iron_device}
    assert (int(a), int(b)) == (7, 12)


def test_donated_argument_is_deleted(iron_device):
    f = jax.jit(lambda x: x + 1, donate_argnums=0)
    x = jax.device_put(np.ones(8, np.float32), iron_device)
    y = f(x)
    np.testing.assert_array_equal(np.asarray(y), np.full(8, 2, np.float32))
    assert x.is_deleted()
    # As on jax's CPU backend: refused (jax 0.11 checks before Execute and
    # raises RuntimeError; 0.10 lets Execute refuse it: ValueError).
    with pytest.raises((RuntimeError, ValueError), match="deleted"):
        f(x)
    with pytest.raises(RuntimeError):
        np.asarray(x)


def test_donated_argument_passed_twice_is_refused(iron_device):
    # XLA:CPU refuses f(donate(a), a) with INVALID_ARGUMENT; so does iron.
    f = jax.jit(lambda x, y: x + y, donate_argnums=0)
    x = jax.device_put(np.ones(8, np.float32), iron_device)
    with pytest.raises((ValueError, jax.errors.JaxRuntimeError),
                       match="donated"):
        f(x, x)
    np.testing.assert_array_equal(np.asarray(x), np.ones(8, np.float32))


def test_non_donated_argument_survives(iron_device):
    f = jax.jit(lambda x: x + 1)
    x = jax.device_put(np.ones(8, np.float32), iron_device)
    f(x).block_until_ready()
    assert not x.is_deleted()
    np.testing.assert_array_equal(np.asarray(x), np.ones(8, np.float32))


def test_many_async_runs_chain_correctly(iron_device):
    # Each run's input is the previous run's (possibly unfinished) output:
    # events complete on worker threads while jax keeps enqueueing.
    f = jax.jit(lambda x: x + 1)
    x = jax.device_put(np.zeros((64, 64), np.int32), iron_device)
    outs = []
    for _ in range(200):
        x = f(x)
        outs.append(x)
    jax.block_until_ready(outs)
    assert all(o.is_ready() for o in outs)
    np.testing.assert_array_equal(np.asarray(x), np.full((64, 64), 200))
    np.testing.assert_array_equal(np.asarray(outs[99]), np.full((64, 64), 100))


def test_dump_dir_captures_artifacts(iron_device, tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_DUMP_DIR", str(tmp_path))

    def dumped_fn(x):
        return x - 3

    x = jax.device_put(np.ones(5, np.float32), iron_device)
    jax.jit(dumped_fn)(x).block_until_ready()
    files = [p.name for p in tmp_path.iterdir()]
    assert len(files) == 1 and files[0].startswith("jit_dumped_fn.")
    assert files[0].endswith(".mlirbc")
    data = (tmp_path / files[0]).read_bytes()
    assert data[:4] == b"ML\xefR"  # MLIR bytecode magic


def test_compiled_as_text(iron_device):
    x = jax.device_put(np.ones(3, np.float32), iron_device)
    compiled = jax.jit(lambda x: x * 2 + 1).lower(x).compile()
    text = compiled.as_text()
    assert isinstance(text, str) and text


def test_unsupported_op_raises_naming_it(iron_device):
    x = jax.device_put(np.ones(2, np.float32), iron_device)
    with pytest.raises(Exception) as info:
        jax.jit(lambda v: lax.rng_uniform(v[0], v[1], (3,)))(x).block_until_ready()
    assert "stablehlo.rng" in str(info.value)
    # The process and the backend survive it.
    y = jax.device_put(np.ones(2, np.float32), iron_device)
    assert_same(y, np.ones(2, np.float32))


def test_trace_switch_logs_slot_calls():
    # IRON_PJRT_TRACE is read when jax loads the plugin: a fresh process.
    env = dict(os.environ, IRON_PJRT_TRACE="1", JAX_PLATFORMS="iron",
               IRON_PLUGIN_PATH=ironjax.library_path(),
               PYTHONPATH=os.pathsep.join(
                   [os.path.dirname(os.path.dirname(ironjax.__file__))] +
                   sys.path))
    code = "import jax; jax.device_put(1.0).block_until_ready()"
    proc = subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[iron-pjrt] PJRT_Client_Create" in proc.stderr
    assert "[iron-pjrt] PJRT_Client_BufferFromHostBuffer" in proc.stderr
    assert ("PJRT_Client_TopologyDescription -> PJRT_Client_TopologyDescription"
            ": topology not implemented by ironjax") in proc.stderr


# --------------------------------------------------------------------------
# The C ABI of the function table

NUM_SLOTS = 138
SLOT_ERROR_DESTROY, SLOT_ERROR_MESSAGE, SLOT_ERROR_GETCODE = 0, 1, 2
SLOT_CLIENT_DMAMAP = 110
PJRT_ERROR_CODE_UNIMPLEMENTED = 12


class ErrorMessageArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("extension_start", ctypes.c_void_p),
                ("error", ctypes.c_void_p),
                ("message", ctypes.c_void_p),
                ("message_size", ctypes.c_size_t)]


class ErrorGetCodeArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("extension_start", ctypes.c_void_p),
                ("error", ctypes.c_void_p),
                ("code", ctypes.c_int)]


class ErrorDestroyArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("extension_start", ctypes.c_void_p),
                ("error", ctypes.c_void_p)]


@pytest.fixture(scope="module")
def api_slots():
    lib = ctypes.CDLL(ironjax.library_path())
    lib.GetPjrtApi.restype = ctypes.c_void_p
    api = lib.GetPjrtApi()
    assert api
    return lib, api, (ctypes.c_void_p * NUM_SLOTS).from_address(api + 40)


def test_api_table_layout(api_slots):
    _, api, slots = api_slots
    assert ctypes.c_size_t.from_address(api).value == 1144
    assert ctypes.c_int.from_address(api + 32).value == 0     # major
    assert ctypes.c_int.from_address(api + 36).value == 114   # minor
    missing = [i for i in range(NUM_SLOTS) if not slots[i]]
    assert missing == []


def test_only_get_pjrt_api_is_exported(api_slots):
    lib = api_slots[0]
    with pytest.raises(AttributeError):
        lib.iron_runtime_create  # noqa: B018 (the lookup is the test)


def test_unimplemented_slot_names_itself(api_slots):
    _, _, slots = api_slots
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    error = call(slots[SLOT_CLIENT_DMAMAP])(None)
    assert error
    msg = ErrorMessageArgs(ctypes.sizeof(ErrorMessageArgs), None, error)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(slots[SLOT_ERROR_MESSAGE])(
        ctypes.addressof(msg))
    text = ctypes.string_at(msg.message, msg.message_size).decode()
    assert "PJRT_Client_DmaMap is not implemented by ironjax" in text
    code = ErrorGetCodeArgs(ctypes.sizeof(ErrorGetCodeArgs), None, error)
    assert call(slots[SLOT_ERROR_GETCODE])(ctypes.addressof(code)) is None
    assert code.code == PJRT_ERROR_CODE_UNIMPLEMENTED
    destroy = ErrorDestroyArgs(ctypes.sizeof(ErrorDestroyArgs), None, error)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(slots[SLOT_ERROR_DESTROY])(
        ctypes.addressof(destroy))


def test_token_arguments_and_results():
    # jax hands a token parameter over as an empty bool buffer.
    dev = jax.devices("iron")[0]

    @jax.jit
    def noop(arr, token):
        return arr, token

    arr = jax.device_put(np.ones(10, np.float32), dev)
    token = jax.lax.create_token()
    out, tok = noop(arr, token)
    np.testing.assert_array_equal(np.asarray(out), np.ones(10, np.float32))
    tok.block_until_ready()
    assert type(tok) is type(token)
