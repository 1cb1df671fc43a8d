"""Host callbacks on iron: jax.debug.print, jax.debug.callback,
jax.pure_callback and jax.experimental.io_callback.

jax lowers every callback primitive through one function,
`jax._src.callback.emit_python_callback`, which knows only the cpu, cuda,
rocm and tpu platforms (it emits a custom call whose handler XLA finds in the
executable's context). For the iron platform `install()` wraps that function:

* the Python callable (with jax's output checks) goes into a process-wide
  registry under a fresh integer id; a handle that removes it again rides on
  the lowered module's keepalives, so the entry lives as long as the
  executable that uses it. jax may drop that executable while runs of it
  are still queued (IRON_HOST_CALLBACK_SYNC=0), so the entry stays until
  the plugin's compiled ops no longer name the id either
  (`iron_host_callback_pins`, nonzero while a compiled executable with the
  op exists, and executables live until their queued runs finish): an
  entry whose handle died while pinned is retired, and removed by the next
  sweep (at the next registration, callback call or `num_registered()`);
* the op becomes `stablehlo.custom_call @iron_python_callback(token?, args...)`
  with `backend_config = "<id>"` (tokens of ordered effects are threaded
  exactly as on CPU);
* the plugin's kernel for that target (src/device/host/callback.c) calls one
  C function pointer, set here with the plugin's exported
  `iron_host_callback_set_handler`: a ctypes callback that takes the GIL,
  copies the operands into numpy arrays, runs the callable and writes the
  results into the plugin's buffers. A Python exception becomes a PJRT
  INTERNAL error carrying the traceback (as CPU's "CpuCallback error").

jax.debug.callback, jax.debug.print and checkify's check have per-platform
lowering rules in jax; `install()` registers jax's own (CPU) rules for
'iron' too.

Every other platform goes to jax's original function unchanged.
"""
from __future__ import annotations

import ctypes
import itertools
import secrets
import threading
import traceback
import weakref
from typing import Any, Callable, Sequence

import numpy as np

TARGET = "iron_python_callback"
PLATFORM = "iron"

# int32_t handler(uint64_t id, int32_t num_inputs, void *const *inputs,
#                 const uint64_t *input_nbytes, int32_t num_outputs,
#                 void *const *outputs, const uint64_t *output_nbytes,
#                 char *error, uint64_t error_capacity)
_HANDLER_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_uint64, ctypes.c_int32,
    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint64),
    ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint64)


class _Entry:
    __slots__ = ("fn", "in_avals", "out_avals")

    def __init__(self, fn, in_avals, out_avals):
        self.fn = fn
        self.in_avals = in_avals
        self.out_avals = out_avals


_registry: dict[int, _Entry] = {}
# Ids carry a random per-process prefix, so that a compiled program that
# outlived its process (were executables ever cached on disk) names no
# callable of another process: it fails with "not registered" instead.
_ID_BASE = (secrets.randbits(31) + 1) << 32
_next_id = itertools.count(_ID_BASE + 1)
# Reentrant: a finalizer (_release) may run from a garbage collection that
# starts while this thread holds the lock.
_lock = threading.RLock()


# Ids whose handle died while the plugin still pinned them.
_retired: set[int] = set()
_pins = None  # the plugin's iron_host_callback_pins, once set_handler ran


def _pinned(cb_id: int) -> bool:
    return _pins is not None and _pins(cb_id) > 0


def _sweep() -> None:
    # Caller holds _lock. The pins query calls nothing back: safe anywhere.
    for cb_id in [i for i in _retired if not _pinned(i)]:
        _retired.discard(cb_id)
        _registry.pop(cb_id, None)


def _release(cb_id: int) -> None:
    with _lock:
        if _pinned(cb_id):
            _retired.add(cb_id)
        else:
            _registry.pop(cb_id, None)
        _sweep()


class CallbackHandle:
    """Keeps callback `id` registered while referenced (jax keeps it with the
    executable, as a keepalive of the lowered module), and after that while
    the plugin still has the op compiled (runs of it may be queued)."""

    __slots__ = ("id", "__weakref__")

    def __init__(self, cb_id: int):
        self.id = cb_id
        weakref.finalize(self, _release, cb_id)

    def __repr__(self) -> str:
        return f"<iron host callback {self.id}>"


def register(fn: Callable[..., Sequence[Any]], in_avals, out_avals
             ) -> CallbackHandle:
    """Registers `fn` (called with one numpy array per entry of `in_avals`,
    returning one array-like per entry of `out_avals`); returns the handle
    whose lifetime bounds the registration."""
    with _lock:
        _sweep()
        cb_id = next(_next_id)
        _registry[cb_id] = _Entry(fn, tuple(in_avals), tuple(out_avals))
    return CallbackHandle(cb_id)


def num_registered() -> int:
    """Live registrations (after removing the retired ones no compiled op
    names any more)."""
    with _lock:
        _sweep()
        return len(_registry)


def _write_error(buf: int, capacity: int, text: str) -> None:
    data = text.encode("utf-8", "replace")
    if len(data) >= capacity:
        # Keep the end: the exception type and message are last.
        marker = b"...(truncated)...\n"
        data = marker + data[len(data) - (capacity - 1 - len(marker)):]
    ctypes.memmove(buf, data + b"\0", len(data) + 1)


def _to_array(ptr: int, nbytes: int, aval) -> np.ndarray:
    dtype = np.dtype(aval.dtype)
    shape = tuple(aval.shape)
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes != expected:
        raise RuntimeError(
            f"iron host callback: operand of {nbytes} bytes, expected "
            f"{expected} for {dtype}{list(shape)}")
    if nbytes == 0:
        return np.zeros(shape, dtype)
    raw = (ctypes.c_char * nbytes).from_address(ptr)
    # A copy: the plugin frees the buffer after the call, and callbacks may
    # keep their arguments.
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _handle(cb_id, num_inputs, inputs, input_nbytes, num_outputs, outputs,
            output_nbytes, error, error_capacity) -> int:
    # Runs on the thread that runs the program, with the GIL (ctypes takes
    # it). Must not raise: ctypes would print and return 0.
    try:
        entry = _registry.get(cb_id)
        if _retired:
            with _lock:
                _sweep()
        if entry is None:
            raise RuntimeError(
                f"iron host callback {cb_id} is not registered (its "
                "executable was freed)")
        if num_inputs != len(entry.in_avals) or (
                num_outputs != len(entry.out_avals)):
            raise RuntimeError(
                f"iron host callback {cb_id}: called with {num_inputs} "
                f"operands and {num_outputs} results, registered with "
                f"{len(entry.in_avals)} and {len(entry.out_avals)}")
        args = [_to_array(inputs[i] or 0, input_nbytes[i], aval)
                for i, aval in enumerate(entry.in_avals)]
        outs = entry.fn(*args)
        for i, aval in enumerate(entry.out_avals):
            arr = np.ascontiguousarray(outs[i], dtype=np.dtype(aval.dtype))
            n = output_nbytes[i]
            if arr.nbytes != n:
                raise RuntimeError(
                    f"iron host callback {cb_id}: result {i} has "
                    f"{arr.nbytes} bytes, the program expects {n}")
            if n:
                ctypes.memmove(outputs[i], arr.ctypes.data, n)
        return 0
    except BaseException:  # noqa: BLE001 - every error goes back to the plugin
        try:
            _write_error(error, error_capacity,
                         "IronCallback error calling callback: " +
                         traceback.format_exc())
        except BaseException:  # noqa: BLE001
            pass
        return 1


_c_handler = _HANDLER_TYPE(_handle)  # must stay alive while installed
_library: ctypes.CDLL | None = None


def set_handler(library_path: str) -> None:
    """Hands the ctypes handler to the plugin library at `library_path` (the
    same file jax loaded, so the same loaded instance)."""
    global _library, _pins
    lib = ctypes.CDLL(library_path)
    setter = lib.iron_host_callback_set_handler
    setter.argtypes = [_HANDLER_TYPE]
    setter.restype = None
    setter(_c_handler)
    pins = getattr(lib, "iron_host_callback_pins", None)
    if pins is not None:
        pins.argtypes = [ctypes.c_uint64]
        pins.restype = ctypes.c_int32
    _pins = pins
    _library = lib


# --- the lowering -----------------------------------------------------------

_original_emit = None


def _wrap_with_checks(callback, result_avals, dtypes):
    # The checks jax's emit_python_callback applies (same messages).
    def wrapped(*args):
        out_vals = callback(*args)
        if len(out_vals) != len(result_avals):
            raise RuntimeError(
                "Mismatched number of outputs from callback. "
                "Expected: {}, Actual: {}".format(len(result_avals),
                                                  len(out_vals)))
        out_vals = tuple(dtypes.canonicalize_value(np.asarray(a))
                         for a in out_vals)
        for i, (out_val, out_aval) in enumerate(zip(out_vals, result_avals)):
            if out_val.shape != out_aval.shape:
                raise RuntimeError(
                    f"Incorrect output shape for return value #{i}: "
                    f"Expected: {out_aval.shape}, Actual: {out_val.shape}")
            if out_val.dtype != out_aval.dtype:
                raise RuntimeError(
                    f"Incorrect output dtype for return value #{i}: "
                    f"Expected: {out_aval.dtype}, Actual: {out_val.dtype}")
        return out_vals
    return wrapped


def _ir_type(mlir, ctx, aval):
    # jax 0.10 takes the module context first; older releases did not.
    import inspect
    if len(inspect.signature(mlir.aval_to_ir_type).parameters) >= 2:
        return mlir.aval_to_ir_type(ctx.module_context, aval)
    return mlir.aval_to_ir_type(aval)


def _set_sharding(ctx, op, sharding, token_and_results):
    from jax._src import config
    from jax._src.interpreters import mlir
    try:
        from jax._src.sharding_impls import SdyArray, SdyArrayList
    except ImportError:  # pragma: no cover - older jax
        SdyArray = SdyArrayList = None
    if (token_and_results and SdyArrayList is not None and
            config.use_shardy_partitioner.value and
            isinstance(sharding, SdyArrayList)):
        # One more entry for the token result, as jax's CPU lowering does.
        sharding = SdyArrayList((
            SdyArray(mesh_shape=(), dim_shardings=(),
                     logical_device_ids=sharding.shardings[0]
                     .logical_device_ids),
            *sharding.shardings))
    mlir.set_sharding(ctx.module_context, op, sharding)


def emit_iron_python_callback(ctx, callback, token, operands, operand_avals,
                              result_avals, *, has_side_effect,
                              returns_token=True, partitioned=False,
                              sharding=None):
    """emit_python_callback for the iron platform (same signature and
    results as jax's)."""
    from jax._src import dtypes
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir.dialects import hlo

    del returns_token, partitioned  # one device: nothing to do
    if len(ctx.module_context.platforms) > 1:
        raise NotImplementedError("multi-platform lowering for python_callback")
    handle = register(_wrap_with_checks(callback, result_avals, dtypes),
                      operand_avals, result_avals)
    ctx.module_context.add_keepalive(handle)
    result_types = [_ir_type(mlir, ctx, a) for a in result_avals]
    operands = list(operands)
    if token is not None:
        operands = [token, *operands]
        result_types = [hlo.TokenType.get(), *result_types]
    op = mlir.custom_call(
        TARGET,
        result_types=result_types,
        operands=operands,
        backend_config=str(handle.id),
        has_side_effect=has_side_effect,
    )
    if sharding is not None:
        # Kept as jax writes it (the plugin ignores it: one device); tests
        # and tools read it from the lowered text.
        _set_sharding(ctx, op, sharding, token is not None and result_avals)
    results = list(op.results)
    if token is not None:
        token, *results = results
    return results, token, handle


def _emit_python_callback(ctx, *args, **kwargs):
    platforms = ctx.module_context.platforms
    if PLATFORM in platforms:
        return emit_iron_python_callback(ctx, *args, **kwargs)
    return _original_emit(ctx, *args, **kwargs)


def install_lowering() -> None:
    """Routes jax's callback lowering for platform 'iron' to ours
    (idempotent)."""
    global _original_emit
    from jax._src import callback as jax_callback
    from jax._src import debugging
    from jax._src.interpreters import mlir

    current = jax_callback.emit_python_callback
    if getattr(current, "_iron_wrapper", False):
        return
    _original_emit = current
    _emit_python_callback._iron_wrapper = True  # type: ignore[attr-defined]
    jax_callback.emit_python_callback = _emit_python_callback
    # debug_callback and debug_print have per-platform rules only.
    mlir.register_lowering(debugging.debug_callback_p,
                           debugging.debug_callback_lowering,
                           platform=PLATFORM, cacheable=False)
    mlir.register_lowering(debugging.debug_print_p,
                           debugging.debug_print_lowering_rule,
                           platform=PLATFORM, cacheable=False)
    # checkify.check staged out under jit (a no-op with debug=True, a
    # runtime error through a callback with jax_xla_runtime_errors): the
    # CPU rule.
    try:
        from jax._src import checkify
        mlir.register_lowering(checkify.check_p, checkify.check_lowering_rule,
                               platform=PLATFORM)
    except (ImportError, AttributeError):  # pragma: no cover - other jax
        pass
    # jax.experimental.buffer_callback: raises for platforms it does not
    # know; a rule on these host callbacks (buffer_callback.py).
    from ironjax import buffer_callback
    buffer_callback.register_lowering(PLATFORM)


def install(library_path: str) -> None:
    """Everything host callbacks need: the plugin's handler and the
    lowering."""
    set_handler(library_path)
    install_lowering()
