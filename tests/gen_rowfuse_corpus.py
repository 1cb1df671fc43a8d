#!/usr/bin/env python3
"""Generates tests/data/rowfuse: StableHLO portable artifacts of the row
programs of issue 14 (softmax, log_softmax, logsumexp, layer norm, RMS norm
and their gradients) over a sweep of row lengths around the kernel's
boundaries (1, 2, 31, 32, 33, 127, 1000, 1024, 4097, 8192, 100000), batch
shapes, f32/bf16/f16, non-trailing axes and zero-size arrays, as jaxlib
hands them to a PJRT plugin. tests/c/test_cuda_row_fusion_emu.c runs each
on the host device and as the CUDA device plans it (row fusion kernels run
by the multi-thread CPU emulation) and compares the results bit for bit.

Usage: python3 tests/gen_rowfuse_corpus.py [--out DIR] [--list]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax._src.interpreters import mlir as jax_mlir  # noqa: E402
from jax._src.lib import _jax  # noqa: E402

TARGET = "1.16.0"
OUT = os.path.join(HERE, "data", "rowfuse")

LENGTHS = [1, 2, 31, 32, 33, 127, 1000, 1024, 4097, 8192, 100000]
SOME = [2, 33, 1000, 4097]
DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16}


def serialize(lowered):
    module = lowered.compiler_ir("stablehlo")
    bytecode = jax_mlir.module_to_bytecode(module)
    return _jax.mlir.serialize_portable_artifact(bytecode, TARGET, True)


def layer_norm(x, g, b, axes=(-1,)):
    mu = jnp.mean(x, axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axes, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5).astype(x.dtype) * g + b


def rms_norm(x, g):
    ms = jnp.mean(jnp.square(x), -1, keepdims=True)
    return x * jax.lax.rsqrt(ms + 1e-6).astype(x.dtype) * g


def fwd(name, axis=-1):
    if name == "softmax":
        return lambda x: jax.nn.softmax(x, axis)
    if name == "log_softmax":
        return lambda x: jax.nn.log_softmax(x, axis)
    if name == "logsumexp":
        return lambda x: jax.nn.logsumexp(x, axis)
    raise ValueError(name)


def programs():
    """Yields (name, fn, arg shapes/dtypes)."""
    def batch(n, i):
        if n >= 100000:
            return (2,)
        return [(4,), (2, 3), (5,), (1,)][i % 4]

    for dname, dt in DTYPES.items():
        lengths = LENGTHS if dname == "f32" else SOME
        for i, n in enumerate(lengths):
            b = batch(n, i)
            x = jax.ShapeDtypeStruct(b + (n,), dt)
            v = jax.ShapeDtypeStruct((n,), dt)
            for p in ("softmax", "log_softmax", "logsumexp"):
                yield f"{p}_{dname}_n{n}", fwd(p), (x,)
            yield f"layer_norm_{dname}_n{n}", layer_norm, (x, v, v)
            yield f"rms_norm_{dname}_n{n}", rms_norm, (x, v)
        glengths = [1] + SOME + [8192] if dname == "f32" else (
            [33, 1000] if dname == "bf16" else [])
        for i, n in enumerate(glengths):
            b = batch(n, i + 1)
            x = jax.ShapeDtypeStruct(b + (n,), dt)
            v = jax.ShapeDtypeStruct((n,), dt)
            for p in ("softmax", "log_softmax", "logsumexp"):
                f = fwd(p)
                if p == "logsumexp":
                    w = jax.ShapeDtypeStruct(b, dt)
                else:
                    w = x
                yield (f"{p}_grad_{dname}_n{n}",
                       jax.grad(lambda x, w, f=f: jnp.sum(
                           (f(x) * w).astype(jnp.float32))), (x, w))
            yield (f"layer_norm_grad_{dname}_n{n}",
                   lambda x, g, b, dy: jax.vjp(layer_norm, x, g, b)[1](dy),
                   (x, v, v, x))
            yield (f"rms_norm_grad_{dname}_n{n}",
                   lambda x, g, dy: jax.vjp(rms_norm, x, g)[1](dy),
                   (x, v, x))
    f32 = jnp.float32
    # Other axes: not row fusions (they must still run), and reductions
    # over several trailing dims.
    s = jax.ShapeDtypeStruct
    yield "softmax_axis0_f32", fwd("softmax", 0), (s((1000, 3), f32),)
    yield "softmax_axis1_f32", fwd("softmax", 1), (s((2, 300, 3), f32),)
    yield "log_softmax_axis0_f32", fwd("log_softmax", 0), (s((33, 4), f32),)
    yield ("layer_norm_2d_f32",
           lambda x, g, b: layer_norm(x, g, b, (-2, -1)),
           (s((3, 4, 50), f32), s((4, 50), f32), s((4, 50), f32)))
    yield ("softmax_2d_f32", lambda x: jax.nn.softmax(x, (-2, -1)),
           (s((3, 20, 50), f32),))
    yield ("layer_norm_grad_2d_f32",
           lambda x, g, b, dy: jax.vjp(
               lambda x, g, b: layer_norm(x, g, b, (-2, -1)), x, g, b)[1](dy),
           (s((3, 4, 50), f32), s((4, 50), f32), s((4, 50), f32),
            s((3, 4, 50), f32)))
    # Zero-size arrays.
    yield "softmax_empty_rows_f32", fwd("softmax"), (s((0, 8), f32),)
    yield "softmax_empty_row_f32", fwd("softmax"), (s((4, 0), f32),)
    yield ("layer_norm_empty_f32", layer_norm,
           (s((0, 16), f32), s((16,), f32), s((16,), f32)))
    # Two softmaxes sharing nothing, and a softmax whose input is also
    # used after it (the row fusion must leave it alone).
    yield ("two_softmax_f32",
           lambda x, y: (jax.nn.softmax(x, -1), jax.nn.softmax(y, -1)),
           (s((4, 100), f32), s((6, 33), f32)))
    yield ("softmax_then_use_f32",
           lambda x: jax.nn.softmax(x, -1) + jnp.sum(x, -1, keepdims=True),
           (s((8, 64), f32),))
    # Row fusions inside a loop body (a scan over layers), and a loop
    # that reads a value of a row group (it must stay after the fusion).
    def scan_ln(x, g, b):
        def body(h, _):
            h = layer_norm(jnp.tanh(h) * 1.5, g, b)
            return h, jnp.sum(jax.nn.softmax(h, -1) * h, -1)
        return jax.lax.scan(body, x, None, length=3)
    yield ("scan_layer_norm_f32", scan_ln,
           (s((8, 96), f32), s((96,), f32), s((96,), f32)))

    def loop_reads_row(x):
        y = jax.nn.softmax(x, -1)
        z = jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + y, y)
        return z + jnp.max(x, -1, keepdims=True)
    yield "loop_reads_row_f32", loop_reads_row, (s((6, 40), f32),)
    # Rows with 1- and 2-byte operands beside f32 ones (a mask, quantized
    # activations): each row buffer in shared memory has the padded length
    # of the f32 rows, which for 1-byte elements is not a whole number of
    # 16-byte vectors (a misaligned vector store: a fault on the GPU).
    for n in (16, 32, 48, 256, 272, 512, 1000, 1024):
        b = (5,) if n < 512 else (3,)
        x = s(b + (n,), f32)
        m = s(b + (n,), jnp.bool_)
        yield (f"masked_softmax_f32_n{n}",
               lambda x, m: jax.nn.softmax(jnp.where(m, x, -jnp.inf), -1),
               (x, m))
        yield (f"masked_softmax_bf16_n{n}",
               lambda x, m: jax.nn.softmax(jnp.where(m, x, -jnp.inf), -1),
               (s(b + (n,), jnp.bfloat16), m))
        for qn, qt in (("i8", jnp.int8), ("u8", jnp.uint8)):
            yield (f"dequant_layer_norm_{qn}_n{n}",
                   lambda q, sc, g, bb: layer_norm(
                       q.astype(f32) * sc, g, bb) + (q > 3).astype(f32),
                   (s(b + (n,), qt), s(b + (1,), f32), s((n,), f32),
                    s((n,), f32)))
    # Masks computed in the program, beside the scores: from a traced
    # position (a decode step) and causal (iota >= iota, broadcast over
    # batch and heads). The mask's pred broadcast joins the row fusion
    # (test_cuda_row_fusion_emu's mask_in_row_fusion) instead of being
    # written out at the scores' shape.
    def pos_mask(x, pos):
        return jax.nn.softmax(
            jnp.where(jnp.arange(x.shape[-1]) <= pos, x, -jnp.inf), -1)

    def causal(x):
        t = x.shape[-1]
        m = jnp.arange(t)[:, None] >= jnp.arange(t)[None, :]
        return jax.nn.softmax(jnp.where(m, x, -1e9), -1)
    for n in (33, 256, 2048):
        yield (f"pos_mask_softmax_f32_n{n}", pos_mask,
               (s((16, n), f32), s((), jnp.int32)))
    yield ("pos_mask_softmax_bf16_n300", pos_mask,
           (s((4, 300), jnp.bfloat16), s((), jnp.int32)))
    for t in (8, 100):
        yield (f"causal_mask_softmax_f32_t{t}", causal, (s((2, 3, t, t), f32),))
    yield ("causal_mask_softmax_bf16_t64", causal,
           (s((2, 2, 64, 64), jnp.bfloat16),))
    # Attention-like: softmax of a matmul, then a matmul.
    yield ("attention_f32",
           lambda q, k, v: jax.nn.softmax(q @ k.T / 8.0, -1) @ v,
           (s((16, 32), f32), s((24, 32), f32), s((24, 8), f32)))

    # A decode layer: its weights and KV cache are slices of stacked
    # arrays, this token's keys/values are written into the cache, and
    # the scores are masked up to the position. With many small groups
    # upstream, the row pass's dependency sets once overflowed (8 entries)
    # and the softmax's max stayed a kernel of its own; the whole softmax
    # must be one row kernel (test_cuda_row_fusion_emu checks the plan).
    def decode_layer(w, wo, kc, vc, h, pos):
        T, D, H = kc.shape[1], h.shape[0], 4
        q, kn, vn = jnp.split(h @ w[0], 3)
        k = jax.lax.dynamic_update_slice(kc[0], kn[None], (pos, 0))
        v = jax.lax.dynamic_update_slice(vc[0], vn[None], (pos, 0))
        sc = jnp.einsum("hd,thd->ht", q.reshape(H, D // H),
                        k.reshape(T, H, D // H)) / 4.0
        sc = jnp.where(jnp.arange(T) <= pos, sc, -jnp.inf)
        a = jnp.einsum("ht,thd->hd", jax.nn.softmax(sc, -1),
                       v.reshape(T, H, D // H)).reshape(D)
        return h + a @ wo[0], k, v
    yield ("whole_softmax_decode_layer_f32", decode_layer,
           (s((2, 64, 192), f32), s((2, 64, 64), f32), s((2, 128, 64), f32),
            s((2, 128, 64), f32), s((64,), f32), s((), jnp.int32)))


    # A deep transformer's gradient (six layers unrolled, norms after the
    # residual adds): the residual stream depends on more groups than the
    # row pass's dependency sets list, and the later layers' norms must
    # still be row fusions; a softmax's row sums spread for the backward
    # pass must leave the forward kernel as row values, not full arrays
    # (test_cuda_row_fusion_emu checks the plan).
    def deep_transformer_grad(x, wqkv, wo, w1, w2):
        L, D, H = wqkv.shape[0], x.shape[-1], 2
        B, T = x.shape[0], x.shape[1]
        mask = jnp.tril(jnp.ones((T, T), bool))

        def loss(wqkv, wo, w1, w2):
            h = x
            for i in range(L):
                q, k, v = jnp.split(layer_norm(h, 1.0, 0.0) @ wqkv[i], 3, -1)
                sh = lambda t: t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)  # noqa
                a = sh(q) @ sh(k).transpose(0, 1, 3, 2) / 4.0
                a = jax.nn.softmax(jnp.where(mask, a, -1e9), -1)
                o = (a @ sh(v)).transpose(0, 2, 1, 3).reshape(B, T, D)
                h = h + o @ wo[i]
                h = h + jax.nn.gelu(layer_norm(h, 1.0, 0.0) @ w1[i]) @ w2[i]
            return jnp.sum(layer_norm(h, 1.0, 0.0) ** 2)
        return jax.grad(loss, (0, 1, 2, 3))(wqkv, wo, w1, w2)
    yield ("whole_deep_transformer_grad_f32", deep_transformer_grad,
           (s((2, 16, 32), f32), s((6, 32, 96), f32), s((6, 32, 32), f32),
            s((6, 32, 128), f32), s((6, 128, 32), f32)))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    n = 0
    for name, fn, shapes in programs():
        if args.list:
            print(name)
            continue
        lowered = jax.jit(fn).lower(*shapes)
        with open(os.path.join(args.out, name + ".mlirbc"), "wb") as f:
            f.write(serialize(lowered))
        n += 1
    if not args.list:
        print(f"wrote {n} artifacts to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
