#!/usr/bin/env python3
"""Generates tests/data/corpus: StableHLO portable artifacts of the program
corpus (tests/python/corpus.py) plus a few programs of our own that exercise
control flow, composites, custom calls, shardings and unusual element types,
for the C reader tests (tests/c/test_reader.c), the printer comparison
(tests/python/test_reader_printer.py) and the fuzz seed corpus.

For every program NAME it writes
  NAME.mlirbc   the portable artifact exactly as jaxlib hands it to a PJRT
                plugin that asks for StableHLO TARGET (1.16.0, what the iron
                plugin requests): xla's Serialize(), i.e. mixed serialization
                with CHLO kept as composites.
  NAME.txt      lowered.as_text() (what the user sees).
  NAME.ref.txt  the artifact deserialized again by jaxlib and printed in
                MLIR's generic form: the op-by-op reference for the printer
                test (serialization reorders constants and rewrites CHLO, so
                as_text is not op-for-op what the artifact holds).
Extra artifacts cover other op versions: a few programs at targets 1.0.0,
jaxlib's WEEK_12 default and jaxlib's current version, and jax.export.

Usage: python3 tests/gen_corpus.py [--only SUBSTRING] [--out DIR]
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "python"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax._src.interpreters import mlir as jax_mlir  # noqa: E402
from jax._src.lib import _jax  # noqa: E402
from jaxlib.mlir import ir  # noqa: E402
from jaxlib.mlir.dialects import stablehlo  # noqa: E402

import corpus  # noqa: E402

TARGET = "1.16.0"
OUT = os.path.join(HERE, "data", "corpus")


def serialize(lowered, target=TARGET):
    module = lowered.compiler_ir("stablehlo")
    bytecode = jax_mlir.module_to_bytecode(module)
    # The same entry point jaxlib's PJRT C API client uses (xla::Serialize
    # with mixed serialization).
    return _jax.mlir.serialize_portable_artifact(bytecode, target, True)


def reference_text(artifact):
    with ir.Context() as ctx:
        stablehlo.register_dialect(ctx)
        try:
            from jaxlib.mlir.dialects import sdy
            sdy.register_dialect(ctx)
        except Exception:  # older jaxlib without sdy bindings
            ctx.allow_unregistered_dialects = True
        ctx.allow_unregistered_dialects = True
        module = stablehlo.deserialize_portable_artifact(ctx, artifact)
        return module.operation.get_asm(print_generic_op_form=True,
                                        large_elements_limit=64)


def write(name, artifact, text, ref):
    with open(os.path.join(OUT, name + ".mlirbc"), "wb") as f:
        f.write(artifact)
    if text is not None:
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(text)
    with open(os.path.join(OUT, name + ".ref.txt"), "w") as f:
        f.write(ref)


# ---------------------------------------------------------------------------
# Our own programs: every attribute/type form the reader must handle.

def _rng_f32(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32),)


EXTRA = []


def extra(name, make_args, **kw):
    """An extra program; x64=True traces and lowers it under
    jax.enable_x64 (64-bit arguments and results)."""
    def deco(fn):
        EXTRA.append((name, fn, make_args, kw))
        return fn
    return deco


@extra("x_while_loop", lambda rng: (np.float32(1.5),))
def _(x):
    return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * x),
                          (0, x))


@extra("x_fori_capture", _rng_f32(3))
def _(x):
    w = jnp.arange(3.0, dtype=jnp.float32)
    return lax.fori_loop(0, 5, lambda i, c: c * w + x, x)


@extra("x_cond", lambda rng: (np.float32(0.5), np.float32(2.0)))
def _(p, x):
    return lax.cond(p > 0, lambda v: v * 2, lambda v: v - 1, x)


@extra("x_switch", lambda rng: (np.int32(1), np.float32(3.0)))
def _(i, x):
    return lax.switch(i, [lambda v: v + 1, lambda v: v * v, jnp.sin], x)


@extra("x_scan", _rng_f32(6, 2))
def _(xs):
    return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(2, jnp.float32),
                    xs)


@extra("x_sort_multi", lambda rng: (rng.standard_normal(7).astype(np.float32),
                                    np.arange(7, dtype=np.int32)))
def _(k, v):
    return lax.sort((k, v), num_keys=1, is_stable=True)


@extra("x_top_k", _rng_f32(4, 9))
def _(x):
    return lax.top_k(x, 3)


@extra("x_argmax_cumsum", _rng_f32(5, 4))
def _(x):
    return jnp.argmax(x, axis=1), jnp.cumsum(x, axis=0)


@extra("x_custom_call_cholesky", lambda rng: (np.eye(3, dtype=np.float32) * 2,))
def _(a):
    return jnp.linalg.cholesky(a)


@extra("x_sharding_constraint", _rng_f32(4, 4))
def _(x):
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    s = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    return lax.with_sharding_constraint(x * 2, s) + 1


@extra("x_float8_int4_consts", _rng_f32(3))
def _(x):
    f8 = jnp.array([1.0, -2.0, 0.5], dtype=jnp.float8_e4m3fn)
    f8b = jnp.array([3.0, 0.25, -1.0], dtype=jnp.float8_e5m2)
    i4 = jnp.array([1, -2, 7], dtype=jnp.int4)
    u4 = jnp.array([1, 2, 15], dtype=jnp.uint4)
    bf = jnp.array([1.5, 2.5, -3.5], dtype=jnp.bfloat16)
    h = jnp.array([0.1, 0.2, 0.3], dtype=jnp.float16)
    return (x + f8.astype(jnp.float32) + f8b.astype(jnp.float32)
            + i4.astype(jnp.float32) + u4.astype(jnp.float32)
            + bf.astype(jnp.float32) + h.astype(jnp.float32)), x.astype(
                jnp.float8_e4m3fn)


@extra("x_complex_consts", _rng_f32(2))
def _(x):
    c = jnp.array([1 + 2j, -3.5 + 0.5j], dtype=jnp.complex64)
    z = x.astype(jnp.complex64) * c + jnp.complex64(2 - 1j)
    return jnp.real(z), jnp.imag(z), jnp.abs(z)


@extra("x_bool_consts", lambda rng: (np.array([True, False, True, True, False,
                                              False, True, False, True]),))
def _(b):
    m = jnp.array([True, True, False, False, True, False, True, True, False])
    return jnp.logical_xor(b, m), jnp.logical_and(b, jnp.ones(9, bool))


@extra("x_dot_general_precision", lambda rng: (
    rng.standard_normal((2, 3, 4)).astype(np.float32),
    rng.standard_normal((2, 4, 5)).astype(np.float32)))
def _(a, b):
    return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))),
                           precision=lax.Precision.HIGHEST)


@extra("x_rng_bits", lambda rng: (np.array([1, 2], dtype=np.uint32),))
def _(k):
    key = jax.random.wrap_key_data(k, impl="threefry2x32")
    return jax.random.uniform(key, (4,)), jax.random.normal(key, (2, 2))


@extra("x_reduce_window_pad", _rng_f32(1, 6, 6, 1))
def _(x):
    y = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                          "SAME")
    return jnp.pad(y, ((0, 0), (1, 1), (0, 2), (0, 0)))


@extra("x_gather_scatter", lambda rng: (
    rng.standard_normal((5, 3)).astype(np.float32),
    np.array([4, 0, 2], dtype=np.int32)))
def _(x, idx):
    return x[idx], x.at[idx].add(1.0)


# Scatters whose updates are an intermediate of the operand's byte size
# that dies at the scatter, while the operand lives on (it is returned
# too): the planner may give the result the operand's storage, never the
# updates' (a CUDA scatter copies its operand into the result before it
# reads the updates; tests/c/test_plan_inplace.c).
@extra("x_scatter_inplace_max", lambda rng: (
    np.array([5, -3, 7], dtype=np.int32), np.array([1, 9, -8], np.int32)))
def _(x, u):
    a = x * 2
    return a.at[jnp.array([2, 0, 1])].max(u + 1), a


@extra("x_scatter_inplace_set", lambda rng: (
    rng.standard_normal(4).astype(np.float32),
    rng.standard_normal(4).astype(np.float32)))
def _(x, u):
    a = x - 1
    return a.at[jnp.array([3, 1, 0, 2])].set(u * 3), a


@extra("x_scatter_inplace_add", lambda rng: (
    rng.standard_normal((2, 3)).astype(np.float32),
    rng.standard_normal((2, 3)).astype(np.float32)))
def _(x, u):
    a = jnp.tanh(x)
    return a.at[jnp.array([1, 0])].add(jnp.exp(u)), a


@extra("x_erf_tanh_exp", _rng_f32(8))
def _(x):
    return lax.erf(x), jnp.tanh(x), jnp.exp(x), jax.nn.gelu(x, False)


@extra("x_iota_clamp_select", _rng_f32(6))
def _(x):
    i = lax.iota(jnp.int32, 6)
    return jnp.where(i % 2 == 0, jnp.clip(x, -0.5, 0.5), x), i


@extra("x_donated_aliasing", _rng_f32(4), donate_argnums=(0,))
def _(x):
    return x + 1


@extra("x_old_bytecode", _rng_f32(4))
def _(x):
    y = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0),
                       (0, x))[1]
    return jnp.sum(y * 2 + 1), jnp.sort(x)


# A value passed through 100 calls of a jitted function (jax emits one
# func.call each): inlining maps each call's result to the previous one's,
# a chain of 100; it was followed for at most 64 hops, and the program's
# result named a value of a removed call ("uses a value before it is
# defined" on the CUDA device, which inlines to fuse; jax's
# lax_control_flow_test testIssue711 with an unrolled scan of 75).
@jax.jit
def _chain_step(a, s, b):
    return s + jnp.sum(a * (0.1 * -b)), b


@extra("x_inline_chain", lambda rng: (
    rng.standard_normal(3).astype(np.float32),
    rng.standard_normal(3).astype(np.float32)))
def _(a, b):
    s = jnp.float32(0)
    for _ in range(100):
        s, b = _chain_step(a, s, b)
    return s, b


# ---------------------------------------------------------------------------
# Regression programs of the random-program fuzzer (tests/fuzz_programs.py):
# each finding, minimized by hand, named fz_<what> (the fuzz harness
# tests/c/test_cuda_fuzz_programs.c runs the corpus' fz_* programs with its
# special-value inputs; test_cuda_fusion_corpus.c runs them with the rest).

def _fz_args(*specs):
    def make(rng):
        out = []
        for shape, dt in specs:
            if np.issubdtype(np.dtype(dt), np.integer):
                out.append(rng.integers(-3, 7, size=shape).astype(dt))
            else:
                out.append(rng.standard_normal(shape).astype(dt))
        return tuple(out)
    return make


# fz_5273: a one-element load (y[:, 2, 1][2], a slice reshaped to a scalar)
# computes a dynamic_slice start, and the scalar group joins the
# dynamic_slice's fusion; the fusion's iteration space was that load's one
# element, not the slice's 4 ("CUDA fusion: outputs have different element
# counts").
@extra("fz_scalar_load_start", _fz_args(((5, 4, 2), np.float32),
                                        ((5, 4, 2), np.float32),
                                        ((), np.int32)))
def _(x, y, i):
    j = y.astype(jnp.int32)[:, 2, 1][2]
    return lax.dynamic_slice(x, (j | i, i, jnp.int32(1)), (1, 4, 1))


# fz_100541: a denormal f32 converted to c64 keeps its bits on XLA:CPU and
# the host (no arithmetic: the value becomes the real part), but the CUDA
# convert flushed it. Same width keeps (f32/f16/bf16 -> c64, f64 -> c128),
# a width change flushes (f32 -> c128, f64 -> c64). The harness's small
# unsigned inputs are denormals once bitcast; splat constants are denormal
# literals in the fused kernel.
@extra("fz_denormal_to_complex", lambda rng: (
    np.arange(7, dtype=np.uint32), np.arange(7, dtype=np.uint64),
    np.arange(7, dtype=np.uint16)), x64=True)
def _(u32, u64, u16):
    f = lax.bitcast_convert_type(u32, jnp.float32)
    d = lax.bitcast_convert_type(u64, jnp.float64)
    h = lax.bitcast_convert_type(u16, jnp.float16)
    b = lax.bitcast_convert_type(u16, jnp.bfloat16)
    c = jnp.full((7,), 1e-40, jnp.float32)
    return (f.astype(jnp.complex64), f.astype(jnp.complex128),
            d.astype(jnp.complex128), d.astype(jnp.complex64),
            h.astype(jnp.complex64), b.astype(jnp.complex128),
            b.astype(jnp.complex64), (c + f).astype(jnp.complex64),
            c.astype(jnp.complex64) * 2)


# fz_710863, fz_711447: a select of f16/bf16 values rounded its result
# again on the CUDA device (the hardware rounding): a NaN operand came out
# as the canonical NaN 0x7fff/0x7e00 where the host and XLA:CPU keep its
# bits (0x7fc0 from the NaN constant jnp.where puts there), visible once
# bitcast to integers.
@extra("fz_bf16_select_nan", lambda rng: (
    np.array([1, np.nan, -2, np.inf, np.nan, 0, -0.0, 3], jnp.bfloat16),
    np.array([1, np.nan, -2, np.inf, np.nan, 0, -0.0, 3], np.float16)))
def _(b, h):
    # NaN constants in every other lane whatever the inputs (the emulated
    # corpus run uses its own inputs), and where the inputs are NaN.
    even = lax.broadcasted_iota(jnp.int32, b.shape, 0) % 2 == 0
    nb = jnp.where(even | (b != b), jnp.full_like(b, np.nan), b)
    nh = jnp.where(even | (h != h), jnp.full_like(h, -np.nan), h)
    return (lax.bitcast_convert_type(nb, jnp.int16),
            lax.bitcast_convert_type(nh, jnp.uint16),
            lax.bitcast_convert_type(nb.reshape(2, 4), jnp.int16))


# fz_4200754: a product reduce of f64 values that lands on a denormal:
# XLA:CPU flushes it (its programs run with FTZ/DAZ), the host device did
# not (its reduce kernels ran outside the flushing FP environment). The
# class: sums, products, max/min, windows over denormals and signed zeros,
# and reduces over size-1 dims (a reshape in XLA, -0.0 kept).
@extra("fz_denormal_reductions", lambda rng: (
    np.array([[1e-160, 1e-160, 3.0, 1.0], [1e-300, 1e-10, 1.0, -0.0],
              [-1e-310, 5e-311, 0.0, 2.0]], np.float64),
    np.array([[1e-40, -1e-40, 2e-20, 2e-20], [-0.0, -0.0, 5e-41, 1.0],
              [1e-40, 1e-40, 1e-40, -1e-40]], np.float32)), x64=True)
def _(d, f):
    return (jnp.prod(d, axis=1), jnp.sum(d * 1e-150, axis=1),
            jnp.max(d, axis=1), jnp.min(f, axis=1), jnp.prod(f, axis=1),
            jnp.sum(f), jnp.cumsum(f, axis=1), lax.cummax(d, axis=1),
            jnp.sum(f[:, :, None], axis=2), jnp.max(d[:, None, :], axis=1),
            jnp.cumsum(f[:, :1], axis=1), f @ f.T)


# fz_101685: an s4 constant -1 was stored as the byte 0xff (the IR's
# sign-extended form) where buffers hold low bits (0x0f: ml_dtypes, XLA:CPU,
# every kernel); a CUDA select re-encoding it made host and CUDA differ.
@extra("fz_int4_constants", lambda rng: (
    np.arange(-8, 8).astype(jnp.int4), np.arange(16).astype(jnp.uint4),
    np.int32(1)))
def _(x, u, i):
    m = lax.dynamic_update_slice(x, jnp.full((5,), -1, jnp.int4), (i,))
    n = lax.dynamic_update_slice(u, jnp.full((5,), 15, jnp.uint4), (i,))
    k = jnp.array([-8, -1, 7, -3] * 4, jnp.int4)
    return (lax.select(i != 0, m, x), lax.select(i != 0, n, u), k,
            jnp.full((16,), -2, jnp.int4), jnp.concatenate([x, k]))


# fz_120486: a transpose of zero elements whose other dims take the tiled
# path (a stride-1 dim of >= 16 moved away from the innermost, which has
# >= 16): its block count was 0 and the CUDA compile failed ("tiled
# transpose: bad block count").
@extra("fz_empty_tiled_transpose", _fz_args(((64, 0, 64, 7, 31), np.float32),
                                            ((7, 64, 64, 0, 31), np.complex64)))
def _(x, y):
    return (lax.transpose(x, (3, 4, 2, 1, 0)), lax.transpose(y, (1, 3, 2, 0, 4)),
            lax.transpose(x, (4, 1, 0, 2, 3)))


# fz_9502289: a row fusion (a masked softmax of an int32 row converted to
# f32) kept its exp values in the shared buffer of the cached int32 input
# row, which the row no longer needed; the store converted each float to
# int32 (0.3 -> 0) instead of keeping its bits, so every result was 0 on
# the CUDA device (IRON_CUDA_ROW_CACHE=0 hid it). The class: a kept value
# in the cache of an input of another type of the same size.
@extra("fz_row_keep_other_type", lambda rng: (
    rng.integers(-20, 20, (16, 96)).astype(np.int32),
    rng.integers(0, 2, (16, 96)).astype(bool),
    rng.integers(0, 1000, (16, 96)).astype(np.uint32),
    rng.standard_normal((16, 96)).astype(np.float32)))
def _(x, m, u, f):
    xf = x.astype(jnp.float32)
    s = jax.nn.softmax(jnp.where(m, xf, -jnp.inf), axis=-1)
    t = jax.nn.softmax(u.astype(jnp.float32) * 0.01, axis=-1)
    n = jax.nn.log_softmax(xf * 0.5 + f, axis=-1)
    k = lax.bitcast_convert_type(f, jnp.int32)
    r = jax.nn.softmax((k >> 20).astype(jnp.float32), axis=-1)
    return s, t, n, r


# fz_9801757: a fusion whose transpose of a computed value (a pivot) has a
# sibling output computed before it at the operand's shape (o1 below, from
# the same broadcast): the CUDA generator computed every output but the
# pivots' ancestors at the result's coordinates, where that one has no
# place ("broadcast_in_dim is not supported yet in a CUDA fusion of
# another shape"). Such outputs are now computed in the tiles' first phase.
@extra("fz_pivot_sibling_output", lambda rng: (
    rng.integers(0, 9, (2, 3, 16)).astype(np.uint8), np.int32(3)))
def _(a, s):
    o = jnp.argsort(a, axis=2).astype(jnp.int32)
    x = jnp.concatenate([(~o)[:, :, 1:16:14], ~o], axis=2)
    b = lax.broadcast_in_dim(x, (2, 3, 7, 18, 4), (0, 1, 3))
    o1 = jnp.where(b != lax.broadcasted_iota(jnp.int32, b.shape, 3), b, s)
    t = lax.transpose(b - 5, (2, 4, 0, 1, 3))
    r = jnp.concatenate([o[:, 0:3:2, 3:6]] * 2, axis=0)
    c = lax.broadcast_in_dim(r, (7, 4, 2, 3, 18), (1, 2, 3))
    o3 = jnp.where(c != lax.broadcasted_iota(jnp.int32, c.shape, 3), ~t, 0)
    f = lax.transpose(b.astype(jnp.float32) * 0.5, (2, 4, 0, 1, 3))
    return o3, o1, f + 1, b * 3


# fz_26297024: int16 (-x) / min(-x, x) at x = -32768 gave -1 on the GPU
# (1 on the host): ptxas of CUDA 13.0 loses the sign extension of a
# negated 16-bit value (docs/decisions.md, sixteenth session). x | -32768
# makes every zero input the type's minimum, whatever the harness's seed.
@extra("fz_neg16_widen", lambda rng: (
    rng.integers(0, 4, (4, 258)).astype(np.int16),
    rng.integers(0, 4, (258,)).astype(np.uint16)))
def _(x, u):
    y = x | jnp.int16(-32768)
    n = -y
    v = u | jnp.uint16(0x8000)
    return (lax.div(n, jnp.minimum(n, y)), n.astype(jnp.int32), n >> 1,
            jnp.abs(y) < 0, (-v) >> 1, (-v).astype(jnp.uint32))


# fz_26298356: |min(-x)| over a window gave |min(x)| on the GPU: ptxas of
# CUDA 13.0 folded the negation into a three-input min (VIMNMX3) of the
# unrolled reduce loop and lost it. The -15 makes min(-x) and -min(x)
# differ whatever the inputs (but at the type's limits).
@extra("fz_min_neg_window", lambda rng: (
    rng.integers(0, 5, (333, 333)).astype(np.int32),))
def _(x):
    w = lax.dynamic_slice(x.at[300, 7].set(-15), (16, 0), (320, 327))
    b = lax.broadcast_in_dim(w, (1, 320, 327, 2), (1, 2))
    return jnp.abs(jnp.min(-b)), jnp.max(-b), jnp.min(-w, axis=0)


@extra("x_scan_kv_update", lambda rng: (
    rng.standard_normal((3, 6, 8)).astype(np.float32),
    rng.standard_normal((3, 6, 8)).astype(np.float32),
    rng.standard_normal((3, 8, 24)).astype(np.float32) / 4,
    rng.standard_normal((8,)).astype(np.float32), np.int32(4)))
def _(k, v, w, x, pos):
    # A decode step's scan over layers: this token's keys and values
    # written into each layer's slab of the caches, attention over them
    # (src/compiler/scan_in_place.h rewrites both caches).
    def layer(h, p):
        w, k, v = p
        q, kn, vn = jnp.split(h @ w, 3)
        k = lax.dynamic_update_slice(k, kn[None], (pos, 0))
        v = lax.dynamic_update_slice(v, vn[None], (pos, 0))
        s = jnp.einsum("hd,thd->ht", q.reshape(2, 4), k.reshape(6, 2, 4))
        s = jnp.where(jnp.arange(6) <= pos, s, -jnp.inf)
        a = jnp.einsum("ht,thd->hd", jax.nn.softmax(s, -1), v.reshape(6, 2, 4))
        return h + a.reshape(8), (k, v)
    return lax.scan(layer, x, (w, k, v))


# Targets older than 0.15.0 get older MLIR bytecode versions (0.9.0 -> 0,
# 0.10.0 -> 1, 0.12.0 -> 3, 0.14.0 -> 4: no properties, inherent attributes
# in the attribute dictionary).
OLD_BYTECODE_TARGETS = ["0.9.0", "0.10.0", "0.12.0", "0.14.0"]

# Programs re-serialized at other targets / through jax.export.
VERSIONED = ["x_while_loop", "x_scan", "x_top_k", "x_dot_general_precision",
             "x_erf_tanh_exp", "x_custom_call_cholesky"]


def lower_case(c, rng):
    with corpus.case_config(c):
        args = c.make_args(rng)
        return jax.jit(c.fn, **c.jit_kwargs).lower(*args), args


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=OUT,
                    help="output directory (default tests/data/corpus)")
    opts = ap.parse_args()
    OUT = opts.out
    os.makedirs(OUT, exist_ok=True)
    cases = list(getattr(corpus, "ALL_CASES", corpus.CASES))
    failures = []
    n = 0
    for c in cases:
        if opts.only not in c.name:
            continue
        rng = np.random.default_rng(0)
        try:
            lowered, _ = lower_case(c, rng)
            with corpus.case_config(c):
                art = serialize(lowered)
            write(c.name, art, lowered.as_text(), reference_text(art))
            n += 1
        except Exception as e:  # report and go on: one case must not block
            failures.append((c.name, repr(e)[:200]))
    extra_fns = {}
    for name, fn, make_args, kw in EXTRA:
        if opts.only not in name:
            continue
        rng = np.random.default_rng(0)
        kw = dict(kw)
        x64 = kw.pop("x64", False)
        try:
            with jax.enable_x64(x64):
                args = make_args(rng)
                jitted = jax.jit(fn, **kw)
                lowered = jitted.lower(*args)
            art = serialize(lowered)
            write(name, art, lowered.as_text(), reference_text(art))
            extra_fns[name] = (jitted, args)
            n += 1
        except Exception as e:
            failures.append((name, repr(e)[:200]))
    # Other op versions.
    week12 = str(stablehlo.get_version_from_compatibility_requirement(
        stablehlo.StablehloCompatibilityRequirement.WEEK_12))
    current = str(stablehlo.get_current_version())
    for name in VERSIONED:
        if name not in extra_fns:
            continue
        jitted, args = extra_fns[name]
        lowered = jitted.lower(*args)
        for tag, target in (("v1_0_0", "1.0.0"), ("week12", week12),
                            ("current", current)):
            try:
                art = serialize(lowered, target)
                write(f"{name}.{tag}", art, None, reference_text(art))
                n += 1
            except Exception as e:
                failures.append((f"{name}.{tag}", repr(e)[:200]))
        try:
            exp = jax.export.export(jitted)(*args)
            art = exp.mlir_module_serialized
            write(f"{name}.export", art, None, reference_text(art))
            n += 1
        except Exception as e:
            failures.append((f"{name}.export", repr(e)[:200]))
    if "x_old_bytecode" in extra_fns:
        jitted, args = extra_fns["x_old_bytecode"]
        lowered = jitted.lower(*args)
        for target in OLD_BYTECODE_TARGETS:
            tag = "t" + target.replace(".", "_")
            try:
                art = serialize(lowered, target)
                write(f"x_old_bytecode.{tag}", art, None, reference_text(art))
                n += 1
            except Exception as e:
                failures.append((f"x_old_bytecode.{tag}", repr(e)[:200]))
    print(f"wrote {n} artifacts to {OUT}")
    for name, err in failures:
        print(f"FAILED {name}: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
