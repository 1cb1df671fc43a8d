"""jax.experimental.buffer_callback on iron.

jax lowers `buffer_callback` only for cpu, cuda and rocm (an FFI custom call
whose handler XLA finds in the executable's context) and raises "not
supported on iron backend" for every other platform. `register_lowering()`
gives the primitive a rule for 'iron' built on iron's host callbacks
(callback.py: `stablehlo.custom_call @iron_python_callback`):

* the callable gets an execution context (stage EXECUTE; `stream` raises as
  on CPU: there is no GPU stream) and array-like buffers: the inputs
  read-only, the outputs writable and zero-filled (or holding the aliased
  input, for `input_output_aliases`, as the shared buffer would on CPU);
* what the callable wrote into the outputs becomes the op's results.

The buffers are host copies, not views of the plugin's memory: in place
writes reach the results, but data pointers differ from the arrays'.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ironjax import callback as _callback


class ExecutionContext:
    """What a buffer_callback callable gets as `ctx` on iron."""

    __slots__ = ()

    @property
    def stage(self):
        from jax._src.lib import ffi as ffi_lib
        return ffi_lib.ExecutionStage.EXECUTE

    @property
    def stream(self):
        import jax
        # XLA:CPU's message: there is no GPU stream to hand out.
        raise jax.errors.JaxRuntimeError(
            "XLA FFI GPU context is not available")


class Buffer:
    """An array-like host buffer (numpy protocol and DLPack), as jax's
    ffi.Buffer offers on CPU."""

    __slots__ = ("_array",)

    def __init__(self, array: np.ndarray):
        self._array = array

    @property
    def shape(self):
        return self._array.shape

    @property
    def dtype(self):
        return self._array.dtype

    @property
    def writeable(self) -> bool:
        return bool(self._array.flags.writeable)

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != self._array.dtype:
            return self._array.astype(dtype)
        if copy:
            return self._array.copy()
        return self._array

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __repr__(self) -> str:
        return f"ironjax.Buffer({self._array!r})"


def _lowering(ctx, *args: Any, callback, in_tree, out_tree,
              has_side_effect: bool, input_output_aliases, **_):
    from jax._src import tree_util
    from jax._src import util

    if len(ctx.module_context.platforms) > 1:
        raise NotImplementedError("multi-platform lowering for buffer_callback")
    aliases = dict(input_output_aliases)
    out_avals = list(ctx.avals_out)
    exec_ctx = ExecutionContext()

    def run(*arrays):
        ins = []
        for a in arrays:
            a = np.array(a, copy=True)
            a.flags.writeable = False
            ins.append(a)
        outs = [np.zeros(aval.shape, np.dtype(aval.dtype)) for aval in out_avals]
        for i, o in aliases.items():
            outs[o][...] = ins[i]
        bufs = [Buffer(a) for a in ins] + [Buffer(a) for a in outs]
        args_in, args_out = util.split_list(bufs, [in_tree.num_leaves])
        py_args_in, py_kwargs_in = tree_util.tree_unflatten(in_tree, args_in)
        py_args_out = tree_util.tree_unflatten(out_tree, args_out)
        if callback(exec_ctx, py_args_out, *py_args_in,
                    **py_kwargs_in) is not None:
            raise ValueError("buffer_callback callback must not return any "
                             "values.")
        return outs

    results, _, _ = _callback.emit_iron_python_callback(
        ctx, run, None, list(args), list(ctx.avals_in), out_avals,
        has_side_effect=has_side_effect)
    return results


def register_lowering(platform: str = _callback.PLATFORM) -> None:
    """Gives jax's buffer_callback primitive a lowering for `platform`."""
    try:
        from jax._src import buffer_callback as jax_buffer_callback
    except ImportError:  # pragma: no cover - jax without buffer_callback
        return
    from jax._src.interpreters import mlir
    mlir.register_lowering(jax_buffer_callback.buffer_callback_p, _lowering,
                           platform=platform, cacheable=False)
