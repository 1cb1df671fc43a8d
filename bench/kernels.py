#!/usr/bin/env python3
"""Memory-bound and data-dependent kernels: iron vs XLA:GPU vs PyTorch (issue 14).

    python3 bench/kernels.py [--only NAMES|GROUPS] [--quick] [--rounds 2]
                             [--steps 10] [--json out.json] [--md out.md]
    python3 bench/kernels.py --list
    python3 bench/kernels.py --smoke --frameworks iron,cpu    # CPU, tiny sizes

Programs (`--list` prints them with their shapes): reductions (full sums of
2^20..2^28 f32 and bf16, row, column and middle-axis sums, argmax over rows
and over everything, batch norm's per-channel statistics of an NHWC tensor), row-wise fusions (softmax f32/bf16, log_softmax,
logsumexp, layer norm, RMS norm, the gradients of a softmax loss, a layer
norm and an RMS norm),
transposes (`m.T + 1`, `(m * m + v).T * 2 + 1`, 3-D permutations,
f32/bf16), an 8-op element-wise
chain (f32/bf16), data-dependent while loops (a Newton iteration whose
predicate is a max-reduction; a scalar loop of 10,000 iterations) and the
training step of a 6-conv CNN (f32 and bf16), and a KV-cache decode step
(batch 1, 12 layers as a scan, d 1024, cache 2048: the token's keys and
values written at its position with dynamic_update_slice into the donated
cache, attention over the positions so far; f32 and bf16; torch runs the
same step eagerly, writing its cache in place). Groups for --only: copy,
reduce, rowwise, transpose, elementwise, while, cnn, decode; names and fnmatch
patterns work too (`--only 'sum_*,cnn'`).

How it measures:
- One process per framework and round (`--worker`), so the frameworks never
  share a CUDA context; rounds interleave the frameworks (iron, xla, torch,
  iron, ...). A worker prints one RESULT line per program; if it dies (a
  crash, or no progress for --timeout seconds) the driver records the
  program it was running and starts a new worker for the rest.
- Inputs are fresh non-zero data made on the device by a counter-based hash
  (integer ops only, then exact conversions), so iron, XLA and torch get
  bit-identical inputs without host transfers. Inputs smaller than twice
  the L2 (2 x 60 MB) are made in several copies and rotated between runs,
  so that every run reads from DRAM.
- Time: the median over all timed runs of all rounds; every run is timed to
  completion (block_until_ready / torch.cuda.synchronize), dispatch
  included. A program stops after --steps runs, or after 3 runs once its
  runs took --budget-s seconds.
- Bytes: the minimal traffic, each input read once and each output written
  once; GB/s = bytes / time; "%cp" = GB/s as a share of the device-to-device
  copy bandwidth measured in the same run (the `copy` program: a 1 GiB copy
  counted as read + write; the best framework's copy is the roofline).
- Check: every framework's outputs are compared with the reference (xla, or
  cpu in smoke runs) on up to 4096 sampled elements per output. The error is
  max |a - r| / max(|r|, 1e-3 * max|r|): the relative error, except that
  elements smaller than 1/1000 of the largest are measured against that.
  Each program has a tolerance (f32 1e-4, norms 1e-3, bf16 2e-2..5e-2,
  TF32 CNN 1e-2);
  a larger error prints FAIL and makes the exit status 2.
- Precision: the CNN's f32 convolutions and the linear layer use each
  framework's default: TF32 on Hopper for XLA:GPU (DEFAULT precision) and
  for iron unless IRON_CUDA_TF32=0; torch with allow_tf32 for cuDNN and
  matmul. The workers report what they used (META lines, JSON meta).
- Torch runs the natural eager equivalents: torch.sum, torch.softmax,
  `m.t().contiguous() + 1`, the unfused chain, a Python while loop with an
  `.item()` predicate, the CNN with cuDNN (channels_last, benchmark mode)
  and torch.optim.Adam. When torch is missing its worker is skipped.

The default run (rounds 2) is meant to take 2-3 minutes on the H200:
--budget (seconds) skips the second round when the first one says that it
would not fit. --quick: six headline programs, one round.
"""
import argparse
import fnmatch
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

FRAMEWORKS = ["iron", "xla", "torch"]
SMOKE_FRAMEWORKS = ["iron", "cpu"]
GROUPS = ["copy", "reduce", "rowwise", "transpose", "elementwise", "while", "cnn",
          "decode"]
QUICK = ["sum_f32_256m", "softmax_f32", "transpose_f32", "chain8_f32",
         "newton_while", "cnn_f32"]
L2_BYTES = 60 << 20
SAMPLE = 4096  # elements per output compared with the reference

# Filled by the workers (the driver imports neither jax nor torch).
jax = jnp = lax = None
torch = F = None


# --------------------------------------------------------------------------
# Inputs: a counter-based hash, identical in jax (uint32) and torch/numpy
# (int64 with explicit masking, no overflow).

M32 = 0xFFFFFFFF
H1, H2 = 0x7FEB352D, 0x846CA68B  # lowbias32 (C. Wellons)
GOLDEN = 0x9E3779B9


def stream_offset(copy, index):
    """The hash counter offset of input `index` of rotation copy `copy`."""
    return ((1 + 8 * copy + index) * GOLDEN) & M32


def _mul32_i64(x, c):
    # (x * c) mod 2^32 for 0 <= x < 2^32 with every product below 2^49.
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & M32


def hash_i64(x):
    """lowbias32 on int64 arrays (numpy or torch) holding values < 2^32."""
    x = x ^ (x >> 16)
    x = _mul32_i64(x, H1)
    x = x ^ (x >> 15)
    x = _mul32_i64(x, H2)
    return x ^ (x >> 16)


def hash_u32(x):
    """lowbias32 on a jax uint32 array (wrapping arithmetic)."""
    import numpy as np
    x = x ^ (x >> 16)
    x = x * np.uint32(H1)
    x = x ^ (x >> 15)
    x = x * np.uint32(H2)
    return x ^ (x >> 16)


@dataclass
class Inp:
    """One input. dist: mix = [-0.5, 1.5) * scale, sym = [-1, 1) * scale,
    pos = [0.5, 1.5) * scale, newton = (k + 1) * 2^16 for 24-bit k
    (2^17 .. 2^40), label = integers [0, scale), full = the value scale.
    scale is a power of two for mix/sym/pos, so every value is exact in f32
    (u has 24 bits) and the same in every framework, FMA or not."""
    shape: tuple
    dtype: str = "f32"  # f32, bf16, i32
    dist: str = "mix"
    scale: float = 1.0
    rotate: bool = True

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        return self.size * {"f32": 4, "bf16": 2, "i32": 4}[self.dtype]


def _values_from_k(k_float, kind, scale):
    """Floats from 24-bit hash values; k_float is k converted to f32. The
    callers set k's lowest bit, so that no value is exactly 0 (u * 2 - 0.5
    and u * 2 - 1 vanish only for even k)."""
    u = k_float * (2.0 ** -24)
    if kind == "mix":
        return (u * 2.0 - 0.5) * scale
    if kind == "sym":
        return (u * 2.0 - 1.0) * scale
    if kind == "pos":
        return (u + 0.5) * scale
    if kind == "newton":
        return (k_float + 1.0) * 65536.0
    raise ValueError(kind)


def gen_numpy(inp, offset):
    """The torch generator's arithmetic run in numpy (tests compare it with
    the jax generator bit for bit)."""
    import numpy as np
    if inp.dist == "full":
        return np.full(inp.shape, inp.scale, np.float32)
    x = (np.arange(inp.size, dtype=np.int64) + offset) & M32
    h = hash_i64(x)
    if inp.dist == "label":
        return (h % int(inp.scale)).astype(np.int32).reshape(inp.shape)
    v = _values_from_k(((h >> 8) | 1).astype(np.float32), inp.dist, np.float32(inp.scale))
    return v.astype(np.float32).reshape(inp.shape)


def make_gen_jax(inp):
    """A jitted generator for `inp`; the stream offset is a runtime argument
    so all rotation copies share one executable."""
    dt = {"f32": jnp.float32, "bf16": jnp.bfloat16, "i32": jnp.int32}[inp.dtype]
    if inp.dist == "full":
        return jax.jit(lambda s: jnp.full(inp.shape, inp.scale, dt))

    def g(s):
        h = hash_u32(lax.iota(jnp.uint32, inp.size) + s)
        if inp.dist == "label":
            v = (h % jnp.uint32(int(inp.scale))).astype(jnp.int32)
        else:
            v = _values_from_k(((h >> 8) | 1).astype(jnp.float32), inp.dist,
                               jnp.float32(inp.scale)).astype(dt)
        return v.reshape(inp.shape)
    return jax.jit(g)


def gen_torch(inp, offset, dev):
    dt = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}[inp.dtype]
    if inp.dist == "full":
        return torch.full(inp.shape, inp.scale, dtype=dt, device=dev)
    x = (torch.arange(inp.size, dtype=torch.int64, device=dev) + offset) & M32
    h = hash_i64(x)
    if inp.dist == "label":
        return (h % int(inp.scale)).to(torch.int32).reshape(inp.shape)
    v = _values_from_k(((h >> 8) | 1).to(torch.float32), inp.dist, float(inp.scale))
    return v.to(dt).reshape(inp.shape)


def rotation_copies(inputs, smoke):
    """How many input sets to rotate through: enough that consecutive runs
    never find their inputs in the L2."""
    nbytes = sum(i.nbytes for i in inputs if i.rotate)
    if nbytes == 0 or nbytes >= 2 * L2_BYTES:
        return 1
    k = min(32, math.ceil(4 * L2_BYTES / nbytes))
    return min(k, 2) if smoke else k


# --------------------------------------------------------------------------
# Programs

@dataclass
class Prog:
    name: str
    group: str
    title: str
    inputs: list = field(default_factory=list)
    jax_fn: object = None      # (*arrays) -> pytree, traced with jax.jit
    torch_fn: object = None    # (*tensors) -> tensor or tuple (same leaves)
    tol: float = 1e-4
    bandwidth: bool = True     # report bytes and GB/s
    iters: object = None       # int, or "out1": the count in output leaf 1
    cnn: dict = None           # the training-step programs
    decode: dict = None        # the KV-cache decode-step programs
    note: str = ""


def _chain_jax(x):
    y = jnp.tanh(x)
    y = jnp.sin(y)
    y = jnp.cos(y)
    y = jax.nn.sigmoid(y)
    y = jnp.exp(y)
    y = jnp.log1p(jnp.abs(y))
    y = y * x
    return y + x


def _chain_torch(x):
    y = torch.tanh(x)
    y = torch.sin(y)
    y = torch.cos(y)
    y = torch.sigmoid(y)
    y = torch.exp(y)
    y = torch.log1p(torch.abs(y))
    y = y * x
    return y + x


def _layernorm_jax(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b


def _rmsnorm_jax(x, g):
    return x * lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g


def _rmsnorm_torch(x, g):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), g, eps=1e-6)
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * g


def _layernorm_grad_jax(x, g, b, dy):
    return jax.vjp(_layernorm_jax, x, g, b)[1](dy)


def _layernorm_grad_torch(x, g, b, dy):
    x, g, b = (t.detach().requires_grad_(True) for t in (x, g, b))
    y = F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)
    return torch.autograd.grad(y, (x, g, b), dy)


def _rmsnorm_grad_jax(x, g, dy):
    return jax.vjp(_rmsnorm_jax, x, g)[1](dy)


def _rmsnorm_grad_torch(x, g, dy):
    x, g = (t.detach().requires_grad_(True) for t in (x, g))
    return torch.autograd.grad(_rmsnorm_torch(x, g), (x, g), dy)


def _softmax_grad_jax(m, w):
    return jax.grad(lambda m: (jax.nn.softmax(m, -1) * w).sum())(m)


def _softmax_grad_torch(m, w):
    m = m.detach().requires_grad_(True)
    (g,) = torch.autograd.grad((torch.softmax(m, -1) * w).sum(), m)
    return g


def _bn_stats_jax(x):
    # As the CNN step computes them (f32 accumulation for bf16, as jnp's
    # mean does).
    mu = x.mean((0, 1, 2))
    var = ((x - mu) ** 2).mean((0, 1, 2))
    return mu, var


def _bn_stats_torch(x):
    mu = x.mean((0, 1, 2))
    return mu, ((x - mu) ** 2).mean((0, 1, 2))


NEWTON_TOL = 1e-5
NEWTON_MAX = 100


def _newton_jax(a):
    # Newton's iteration for sqrt(a) from x0 = a; a spans 2^17..2^40, so
    # about 25 iterations; the predicate reduces over the whole array.
    def cond(c):
        x, i = c
        return (i < NEWTON_MAX) & (jnp.max(jnp.abs(x * x - a) / a) > NEWTON_TOL)

    def body(c):
        x, i = c
        return 0.5 * (x + a / x), i + 1
    return lax.while_loop(cond, body, (a, jnp.int32(0)))


def _newton_torch(a):
    x, i = a.clone(), 0
    while i < NEWTON_MAX and ((x * x - a).abs() / a).max().item() > NEWTON_TOL:
        x = 0.5 * (x + a / x)
        i += 1
    return x, torch.tensor(i, dtype=torch.int32)


def _scalar_while_jax(limit, y0):
    # The predicate reads the carried float: nothing to count up front.
    def body(c):
        x, y = c
        return x + 1.0, y * 0.999 + 1.0
    return lax.while_loop(lambda c: c[0] < limit, body, (jnp.zeros_like(y0), y0))


def _scalar_while_torch(limit, y0):
    x, y = torch.zeros_like(y0), y0
    while (x < limit).item():
        x = x + 1.0
        y = y * 0.999 + 1.0
    return x, y


def programs(smoke=False):
    """The program table; smoke=True divides every size down so that all of
    it runs on a CPU in seconds."""
    if smoke:
        n20, n24, n28 = 1 << 10, 1 << 12, 1 << 14
        R, C, LN = 64, 256, 128
        T3, MID = (16, 8, 32), (8, 32, 64)
        WHILE_N = 200
        cnn = dict(B=4, HW=8, chans=(8, 8, 16, 16, 32, 32), classes=10)
    else:
        n20, n24, n28 = 1 << 20, 1 << 24, 1 << 28
        R, C, LN = 32768, 8192, 4096
        T3, MID = (512, 512, 256), (256, 1024, 1024)
        WHILE_N = 10000
        cnn = dict(B=128, HW=32, chans=(64, 64, 128, 128, 256, 256), classes=10)
    cnn["strides"] = (1, 1, 2, 1, 2, 1)
    BN = (4, 8, 8, 64) if smoke else (128, 32, 32, 64)

    def sz(n):
        return f"2^{int(math.log2(n))}"

    f32m = Inp((R, C))
    P = []
    add = P.append
    add(Prog("copy_f32_1g", "copy", f"copy of {sz(n28)} f32 (roofline)",
             [Inp((n28,))], lambda x: jnp.copy(x), lambda x: x.clone()))
    for n, nm in ((n20, "1m"), (n24, "16m"), (n28, "256m")):
        add(Prog(f"sum_f32_{nm}", "reduce", f"jnp.sum(x), {sz(n)} f32",
                 [Inp((n,))], jnp_sum, lambda x: x.sum()))
    add(Prog("sum_bf16_256m", "reduce", f"jnp.sum(x), {sz(n28)} bf16",
             [Inp((n28,), "bf16")], jnp_sum, lambda x: x.sum(), tol=2e-2))
    add(Prog("rowsum_f32", "reduce", f"m.sum(-1), {R}x{C} f32", [f32m],
             lambda m: m.sum(-1), lambda m: m.sum(-1)))
    add(Prog("colsum_f32", "reduce", f"m.sum(0), {R}x{C} f32", [f32m],
             lambda m: m.sum(0), lambda m: m.sum(0)))
    add(Prog("midsum_f32", "reduce", f"a.sum(1), {'x'.join(map(str, MID))} f32",
             [Inp(MID)], lambda a: a.sum(1), lambda a: a.sum(1)))
    add(Prog("argmax_rows_f32", "reduce", f"jnp.argmax(m, -1), {R}x{C} f32",
             [f32m], lambda m: jnp.argmax(m, -1), lambda m: m.argmax(-1)))
    add(Prog("argmax_full_f32", "reduce", f"jnp.argmax(m), {R}x{C} f32",
             [f32m], lambda m: jnp.argmax(m), lambda m: m.argmax()))
    # Batch norm's statistics: per-channel reductions of an NHWC activation
    # over (N, H, W), i.e. tall narrow columns [N*H*W, C] (the CNN step's
    # largest iron kernels, 2026-12-03).
    add(Prog("colsum_narrow_f32", "reduce",
             f"x.sum(0), {BN[0] * BN[1] * BN[2]}x{BN[3]} f32",
             [Inp((BN[0] * BN[1] * BN[2], BN[3]))],
             lambda x: x.sum(0), lambda x: x.sum(0)))
    for dt, tol in (("f32", 1e-4), ("bf16", 2e-2)):
        add(Prog(f"bn_stats_{dt}", "reduce",
                 f"mean, var over (0,1,2) of NHWC {'x'.join(map(str, BN))} {dt}",
                 [Inp(BN, dt)], _bn_stats_jax, _bn_stats_torch, tol=tol))

    for dt, tol in (("f32", 1e-4), ("bf16", 3e-2)):
        add(Prog(f"softmax_{dt}", "rowwise", f"softmax(m, -1), {R}x{C} {dt}",
                 [Inp((R, C), dt)], lambda m: jax.nn.softmax(m, -1),
                 lambda m: torch.softmax(m, -1), tol=tol))
    add(Prog("log_softmax_f32", "rowwise", f"log_softmax(m, -1), {R}x{C} f32",
             [f32m], lambda m: jax.nn.log_softmax(m, -1),
             lambda m: torch.log_softmax(m, -1)))
    add(Prog("logsumexp_f32", "rowwise", f"logsumexp(m, -1), {R}x{C} f32",
             [f32m], lambda m: jax.scipy.special.logsumexp(m, -1),
             lambda m: torch.logsumexp(m, -1)))
    add(Prog("layernorm_f32", "rowwise", f"layer norm (gamma, beta), {R}x{LN} f32",
             [Inp((R, LN)), Inp((LN,), dist="pos"), Inp((LN,), dist="sym")],
             _layernorm_jax,
             lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5),
             tol=1e-3))  # outputs near 0 see the mean's rounding (sum order)
    add(Prog("rmsnorm_f32", "rowwise", f"RMS norm (gamma), {R}x{LN} f32",
             [Inp((R, LN)), Inp((LN,), dist="pos")], _rmsnorm_jax, _rmsnorm_torch,
             tol=1e-3))
    add(Prog("layernorm_grad_f32", "rowwise",
             f"layer norm gradients (x, gamma, beta), {R}x{LN} f32",
             [Inp((R, LN)), Inp((LN,), dist="pos"), Inp((LN,), dist="sym"),
              Inp((R, LN), dist="sym")],
             _layernorm_grad_jax, _layernorm_grad_torch, tol=2e-3))
    add(Prog("rmsnorm_grad_f32", "rowwise",
             f"RMS norm gradients (x, gamma), {R}x{LN} f32",
             [Inp((R, LN)), Inp((LN,), dist="pos"), Inp((R, LN), dist="sym")],
             _rmsnorm_grad_jax, _rmsnorm_grad_torch, tol=2e-3))
    add(Prog("softmax_grad_f32", "rowwise",
             f"grad of sum(softmax(m)*w), {R}x{C} f32",
             [f32m, Inp((R, C), dist="sym")], _softmax_grad_jax,
             _softmax_grad_torch))

    for dt, tol in (("f32", 1e-4), ("bf16", 2e-2)):
        add(Prog(f"transpose_{dt}", "transpose", f"m.T + 1, {R}x{C} {dt}",
                 [Inp((R, C), dt)], lambda m: m.T + 1,
                 lambda m: m.t().contiguous() + 1, tol=tol))
        # Producers and consumers around the transpose (one fused kernel
        # on iron's CUDA device: IRON_CUDA_TRANSPOSE_FUSION).
        add(Prog(f"tchain_{dt}", "transpose",
                 f"(m * m + v).T * 2 + 1, {R}x{C} {dt}",
                 [Inp((R, C), dt), Inp((C,), dt, dist="sym")],
                 lambda m, v: (m * m + v).T * 2 + 1,
                 lambda m, v: (m * m + v).t().contiguous() * 2 + 1, tol=tol))
        for perm in ((0, 2, 1), (2, 0, 1)):
            p = "".join(map(str, perm))
            add(Prog(f"perm{p}_{dt}", "transpose",
                     f"transpose {perm}, {'x'.join(map(str, T3))} {dt}",
                     [Inp(T3, dt)],
                     (lambda perm: lambda x: jnp.transpose(x, perm))(perm),
                     (lambda perm: lambda x: x.permute(*perm).contiguous())(perm),
                     tol=tol))
    for dt, tol in (("f32", 1e-4), ("bf16", 5e-2)):
        add(Prog(f"chain8_{dt}", "elementwise",
                 f"8-op chain (tanh..log1p), {sz(n28)} {dt}",
                 [Inp((n28,), dt)], _chain_jax, _chain_torch, tol=tol))

    add(Prog("newton_while", "while",
             f"while_loop Newton sqrt, {sz(n20)} f32, max-reduce predicate",
             [Inp((n20,), dist="newton")], _newton_jax, _newton_torch,
             tol=1e-5, bandwidth=False, iters="out1"))
    add(Prog("scalar_while", "while",
             f"scalar while_loop, {WHILE_N} iterations",
             [Inp((), dist="full", scale=float(WHILE_N), rotate=False),
              Inp((), rotate=False)], _scalar_while_jax, _scalar_while_torch,
             tol=1e-5, bandwidth=False, iters=WHILE_N))

    dec = (dict(L=2, T=32, D=64, H=4) if smoke else
           dict(L=12, T=2048, D=1024, H=16))
    for dt, tol in (("f32", 2e-3), ("bf16", 5e-2)):
        add(Prog(f"decode_{dt}", "decode",
                 f"KV-cache decode step {dt}, batch 1, {dec['L']} layers "
                 f"(scan), d {dec['D']}, cache {dec['T']}",
                 tol=tol, bandwidth=False, decode=dict(dec, dtype=dt)))

    ch = "->".join(map(str, cnn["chans"]))
    for dt, tol in (("f32", 1e-2), ("bf16", 5e-2)):
        add(Prog(f"cnn_{dt}", "cnn",
                 f"CNN train step {dt}, b{cnn['B']} {cnn['HW']}x{cnn['HW']} {ch}",
                 tol=tol, bandwidth=False, cnn=dict(cnn, dtype=dt)))
    return P


def jnp_sum(x):
    return jnp.sum(x)


def cnn_flops(c):
    """Convolution FLOPs of one training step: forward, weight gradients,
    and input gradients of every layer but the first."""
    hw, cin, fwd, dgrad = c["HW"], 3, 0, 0
    for i, (cout, s) in enumerate(zip(c["chans"], c["strides"])):
        hw //= s
        f = 2 * c["B"] * hw * hw * 9 * cin * cout
        fwd += f
        dgrad += f if i else 0
        cin = cout
    return 2 * fwd + dgrad


def _cnn_init_inputs(c):
    """(name, Inp) of the parameters and the batch, in a fixed order."""
    ins, cin = [], 3
    for i, cout in enumerate(c["chans"]):
        scale = 2.0 ** -round(math.log2(math.sqrt(9 * cin)))
        ins.append((f"w{i}", Inp((3, 3, cin, cout), dist="sym", scale=scale)))
        ins.append((f"g{i}", Inp((cout,), dist="full", scale=1.0)))
        ins.append((f"b{i}", Inp((cout,), dist="full", scale=0.0)))
        cin = cout
    ins.append(("wl", Inp((cin, c["classes"]), dist="sym", scale=2.0 ** -4)))
    ins.append(("bl", Inp((c["classes"],), dist="full", scale=0.0)))
    ins.append(("x", Inp((c["B"], c["HW"], c["HW"], 3), c["dtype"])))
    ins.append(("y", Inp((c["B"],), "i32", dist="label", scale=c["classes"])))
    return ins


ADAM = dict(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8)


def _decode_inputs(c):
    """(name, Inp) of a decode step's weights (layers stacked on axis 0),
    the KV cache and the token's hidden state. Weights U(-1, 1) / 32: with
    an RMS norm before every matmul the activations stay O(1)."""
    L, T, D = c["L"], c["T"], c["D"]
    w = lambda *s: Inp(s, c["dtype"], dist="sym", scale=2.0 ** -5)  # noqa
    return [("wqkv", w(L, D, 3 * D)), ("wo", w(L, D, D)),
            ("w1", w(L, D, 4 * D)), ("w2", w(L, 4 * D, D)),
            ("k", Inp((L, T, D), c["dtype"], dist="sym")),
            ("v", Inp((L, T, D), c["dtype"], dist="sym")),
            ("x", Inp((D,), c["dtype"], dist="sym"))]


def _decode_step_jax(c, w, cache, x, pos):
    """One token through L pre-norm transformer layers (a scan over the
    stacked weights): this token's keys and values written into the cache
    at `pos` with dynamic_update_slice, attention over positions <= pos."""
    T, D, H = c["T"], c["D"], c["H"]
    dh = D // H

    def rms(h):
        hf = h.astype(jnp.float32)
        return (hf * lax.rsqrt(jnp.mean(hf * hf) + 1e-6)).astype(h.dtype)

    def layer(h, p):
        wqkv, wo, w1, w2, k, v = p
        q, kn, vn = jnp.split(rms(h) @ wqkv, 3)
        k = lax.dynamic_update_slice(k, kn[None], (pos, 0))
        v = lax.dynamic_update_slice(v, vn[None], (pos, 0))
        s = jnp.einsum("hd,thd->ht", q.reshape(H, dh), k.reshape(T, H, dh),
                       preferred_element_type=jnp.float32) / math.sqrt(dh)
        s = jnp.where(jnp.arange(T) <= pos, s, -jnp.inf)
        a = jnp.einsum("ht,thd->hd", jax.nn.softmax(s, -1).astype(h.dtype),
                       v.reshape(T, H, dh)).reshape(D)
        h = h + a @ wo
        h = h + jax.nn.gelu(rms(h) @ w1) @ w2
        return h, (k, v)
    h, (k, v) = lax.scan(layer, x, (*w, *cache))
    return h, (k, v)


def jax_decode(p, gen, sample, a):
    c = p.decode
    vals = {n: gen(inp, stream_offset(0, j))
            for j, (n, inp) in enumerate(_decode_inputs(c))}
    w = tuple(vals[n] for n in ("wqkv", "wo", "w1", "w2"))
    # The cache is donated and comes back updated: in place, as a decode
    # loop runs it.
    f = jax.jit(lambda w, cache, x, pos: _decode_step_jax(c, w, cache, x, pos),
                donate_argnums=(1,))
    cache, x = (vals["k"], vals["v"]), vals["x"]
    pos0 = c["T"] // 2
    t0 = time.perf_counter()
    h1, cache = jax.block_until_ready(f(w, cache, x, jnp.int32(pos0)))
    r = {"compile_s": time.perf_counter() - t0, "copies": 1}
    h2, cache = f(w, cache, h1, jnp.int32(pos0 + 1))
    r["check"] = [sample(h1), sample(h2)]
    box = [cache, h2, pos0 + 2]

    def call(_):
        pos = box[2] % c["T"]
        h, box[0] = f(w, box[0], box[1], jnp.int32(pos))
        # The next token's input: bounded, whatever the steps did.
        box[1], box[2] = jnp.tanh(h), box[2] + 1
        return h
    r["times"] = time_runs(call, jax.block_until_ready, a.steps, a.warmup, a.budget_s)
    if a.trace:
        r["trace"] = trace_runs(lambda: call(0), a.trace)
    return r


# --------------------------------------------------------------------------
# Workers

def emit(tag, obj):
    print(f"{tag} {json.dumps(obj)}", flush=True)


def sample_indices(size):
    import numpy as np
    if size <= SAMPLE:
        return None
    rng = np.random.default_rng(size)
    idx = np.unique(np.concatenate([rng.integers(0, size, SAMPLE - 2),
                                    [0, size - 1]]))
    return idx.astype(np.int64)


def time_runs(call, sync, steps, warmup, budget):
    """Times `steps` calls, each to completion, after `warmup` untimed ones;
    stops early (after at least 3) once the timed calls took `budget` s.
    A warm-up call that takes budget/2 is enough warm-up (slow programs)."""
    for i in range(warmup):
        t0 = time.perf_counter()
        sync(call(i))
        if time.perf_counter() - t0 > budget / 2:
            break
    times, start, i = [], time.perf_counter(), warmup
    while len(times) < steps:
        t0 = time.perf_counter()
        r = call(i)
        sync(r)
        times.append(time.perf_counter() - t0)
        del r
        i += 1
        if len(times) >= 3 and time.perf_counter() - start > budget:
            break
    return times


def jax_worker(fw, names, a):
    global jax, jnp, lax
    import jax as _jax
    import jax.numpy as _jnp
    from jax import lax as _lax
    import numpy as np
    jax, jnp, lax = _jax, _jnp, _lax
    import jax.scipy.special  # noqa: F401  (logsumexp)
    if a.cache_dir:  # later rounds skip XLA's compiles (iron recompiles)
        try:
            jax.config.update("jax_compilation_cache_dir", a.cache_dir)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        except Exception as e:  # a jax without these options: no cache
            print(f"compilation cache not enabled: {e}", file=sys.stderr)
    dev = jax.devices()[0]
    if fw == "iron":
        host = "host" in f"{getattr(dev, 'device_kind', '')} {dev}".lower()
        prec = ("f32 dots/convs as TF32 (IRON_CUDA_TF32=1)"
                if os.environ.get("IRON_CUDA_TF32", "1") != "0" and not host
                else "f32 dots/convs in f32")
    elif fw == "xla":
        mp = getattr(jax.config, "jax_default_matmul_precision", None)
        prec = f"matmul precision {mp or 'DEFAULT'} (TF32 on Ampere+)"
    else:
        prec = "f32"
    emit("META", {"fw": fw, "device": str(dev), "kind": getattr(dev, "device_kind", ""),
                  "platform": dev.platform, "jax": jax.__version__, "precision": prec,
                  "iron_env": {k: v for k, v in os.environ.items()
                               if k.startswith("IRON_") and k != "IRON_PLUGIN_PATH"}})
    progs = {p.name: p for p in programs(a.smoke)}
    gens = {}

    def gen(inp, offset):
        key = (inp.shape, inp.dtype, inp.dist, inp.scale)
        if key not in gens:
            gens[key] = make_gen_jax(inp)
        return gens[key](np.uint32(offset))

    take = jax.jit(lambda t, i: t.reshape(-1)[i])

    def sample(leaf):
        idx = sample_indices(leaf.size)
        if idx is None:
            v = np.asarray(leaf)
        else:
            v = np.asarray(take(leaf, idx))
        return v.astype(np.float64).reshape(-1).tolist()

    for name in names:
        print(f"START {name}", flush=True)
        t_start = time.perf_counter()
        p = progs[name]
        try:
            r = (jax_cnn if p.cnn else jax_decode if p.decode else
                 jax_fn)(p, gen, sample, a)
        except Exception as e:  # reported by the driver, with the message
            r = {"error": f"{type(e).__name__}: {str(e)[:600]}"}
        r["name"] = name
        r["wall_s"] = time.perf_counter() - t_start
        emit("RESULT", r)
        gc.collect()


def jax_fn(p, gen, sample, a):
    f = jax.jit(p.jax_fn)
    k = rotation_copies(p.inputs, a.smoke)
    first = [gen(inp, stream_offset(0, j)) for j, inp in enumerate(p.inputs)]
    sets = [first] + [[gen(inp, stream_offset(c, j)) if inp.rotate else first[j]
                       for j, inp in enumerate(p.inputs)] for c in range(1, k)]
    jax.block_until_ready(sets)
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(*first))
    r = {"compile_s": time.perf_counter() - t0, "copies": k}
    leaves = jax.tree_util.tree_leaves(out)
    r["check"] = [sample(leaf) for leaf in leaves]
    r["bytes"] = (sum(i.nbytes for i in p.inputs) + sum(leaf.nbytes for leaf in leaves))
    del out, leaves
    r["times"] = time_runs(lambda i: f(*sets[i % k]), jax.block_until_ready,
                           a.steps, a.warmup, a.budget_s)
    if a.trace:
        r["trace"] = trace_runs(lambda: f(*first), a.trace)
    if a.host_profile:
        r["host_profile"] = host_profile_runs(lambda: f(*first), a.host_profile)
    return r


def host_profile_runs(fn, n):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import host_profile
    try:
        return host_profile.profile(fn, jax.block_until_ready, n)
    except Exception as e:  # no compiler or addr2line: the timing still stands
        return [f"host profile: {type(e).__name__}: {e}"[:300]]


def trace_runs(fn, n):
    """CUPTI trace of n runs of fn (gpu_bench.kernel_trace): kernels per run,
    kernel and busy time, and the kernels that took the most time."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpu_bench
    try:
        if not os.path.exists(os.path.join(gpu_bench.KT_DIR, "libs")):
            gpu_bench.build_kernel_trace()
        return gpu_bench.kernel_trace(fn, jax.block_until_ready, n)
    except Exception as e:  # no CUPTI: the timing still stands
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def jax_cnn(p, gen, sample, a):
    c = p.cnn
    dt = jnp.bfloat16 if c["dtype"] == "bf16" else jnp.float32
    vals = {n: gen(inp, stream_offset(0, j))
            for j, (n, inp) in enumerate(_cnn_init_inputs(c))}
    params = {n: vals[n] for n in vals if n not in ("x", "y")}
    x, y = vals["x"], vals["y"]

    def loss_fn(pr, x, y):
        h = x
        for i, s in enumerate(c["strides"]):
            h = lax.conv_general_dilated(h, pr[f"w{i}"].astype(dt), (s, s),
                                         ((1, 1), (1, 1)),
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            mu = h.mean((0, 1, 2))
            var = ((h - mu) ** 2).mean((0, 1, 2))
            h = (h - mu) * lax.rsqrt(var + 1e-5) * pr[f"g{i}"].astype(dt) + pr[f"b{i}"].astype(dt)
            h = jax.nn.relu(h)
        logits = h.mean((1, 2)).astype(jnp.float32) @ pr["wl"] + pr["bl"]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[:, None], 1).mean()

    def step(state, x, y):
        pr, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(pr, x, y)
        t = t + 1.0
        bc1 = 1.0 - ADAM["b1"] ** t
        bc2 = 1.0 - ADAM["b2"] ** t
        m = jax.tree_util.tree_map(lambda m, g: ADAM["b1"] * m + (1 - ADAM["b1"]) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: ADAM["b2"] * v + (1 - ADAM["b2"]) * g * g, v, g)
        pr = jax.tree_util.tree_map(
            lambda p, m, v: p - (ADAM["lr"] / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + ADAM["eps"]),
            pr, m, v)
        return (pr, m, v, t), loss

    f = jax.jit(step, donate_argnums=(0,))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = (params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params),
             jnp.zeros((), jnp.float32))
    del zeros
    t0 = time.perf_counter()
    state, l1 = jax.block_until_ready(f(state, x, y))
    r = {"compile_s": time.perf_counter() - t0, "copies": 1}
    state, l2 = f(state, x, y)
    r["check"] = [sample(l1), sample(l2)]
    box = [state]

    def call(_):
        box[0], loss = f(box[0], x, y)
        return box[0], loss
    r["times"] = time_runs(call, jax.block_until_ready, a.steps, a.warmup, a.budget_s)
    if a.trace:
        r["trace"] = trace_runs(lambda: call(0), a.trace)
    if a.host_profile:
        r["host_profile"] = host_profile_runs(lambda: call(0), a.host_profile)
    r["flops"] = cnn_flops(c)
    return r


def torch_worker(names, a):
    global torch, F
    import numpy as np
    import torch as _torch
    import torch.nn.functional as _F
    torch, F = _torch, _F
    if torch.cuda.is_available():
        dev = torch.device("cuda")
        sync = lambda _: torch.cuda.synchronize()  # noqa: E731
        name = torch.cuda.get_device_name(0)
    elif a.smoke:
        dev, sync, name = torch.device("cpu"), (lambda _: None), "cpu"
    else:
        raise RuntimeError("torch: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = True  # what XLA:GPU does for f32
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    emit("META", {"fw": "torch", "device": name, "torch": torch.__version__,
                  "precision": "allow_tf32 (cuDNN and matmul)",
                  "cudnn": torch.backends.cudnn.version()})
    progs = {p.name: p for p in programs(a.smoke)}

    def gen(inp, offset):
        return gen_torch(inp, offset, dev)

    def sample(t):
        t = t.detach().reshape(-1)
        idx = sample_indices(t.numel())
        if idx is not None:
            t = t[torch.as_tensor(idx, device=t.device)]
        return t.to(torch.float64).cpu().numpy().astype(np.float64).tolist()

    for nm in names:
        print(f"START {nm}", flush=True)
        t_start = time.perf_counter()
        p = progs[nm]
        try:
            r = (torch_cnn if p.cnn else torch_decode if p.decode else
                 torch_fn)(p, gen, sample, sync, dev, a)
        except Exception as e:
            r = {"error": f"{type(e).__name__}: {str(e)[:600]}"}
        r["name"] = nm
        r["wall_s"] = time.perf_counter() - t_start
        emit("RESULT", r)
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def torch_fn(p, gen, sample, sync, dev, a):
    k = rotation_copies(p.inputs, a.smoke)
    first = [gen(inp, stream_offset(0, j)) for j, inp in enumerate(p.inputs)]
    sets = [first] + [[gen(inp, stream_offset(c, j)) if inp.rotate else first[j]
                       for j, inp in enumerate(p.inputs)] for c in range(1, k)]
    sync(None)
    t0 = time.perf_counter()
    out = p.torch_fn(*first)
    sync(out)
    r = {"compile_s": time.perf_counter() - t0, "copies": k}
    leaves = out if isinstance(out, tuple) else (out,)
    r["check"] = [sample(t) for t in leaves]
    del out, leaves
    r["times"] = time_runs(lambda i: p.torch_fn(*sets[i % k]), sync,
                           a.steps, a.warmup, a.budget_s)
    return r


def torch_cnn(p, gen, sample, sync, dev, a):
    c = p.cnn
    dt = torch.bfloat16 if c["dtype"] == "bf16" else torch.float32
    cl = torch.channels_last
    vals = {n: gen(inp, stream_offset(0, j))
            for j, (n, inp) in enumerate(_cnn_init_inputs(c))}
    ws = [vals[f"w{i}"].permute(3, 2, 0, 1).contiguous(memory_format=cl).requires_grad_()
          for i in range(len(c["chans"]))]
    gs = [vals[f"g{i}"].requires_grad_() for i in range(len(c["chans"]))]
    bs = [vals[f"b{i}"].requires_grad_() for i in range(len(c["chans"]))]
    wl, bl = vals["wl"].requires_grad_(), vals["bl"].requires_grad_()
    x = vals["x"].permute(0, 3, 1, 2)  # NCHW view of NHWC data: channels_last
    y = vals["y"].long()
    opt = torch.optim.Adam(ws + gs + bs + [wl, bl], lr=ADAM["lr"],
                           betas=(ADAM["b1"], ADAM["b2"]), eps=ADAM["eps"])

    def step(_=None):
        opt.zero_grad(set_to_none=True)
        h = x
        for w, g, b, s in zip(ws, gs, bs, c["strides"]):
            h = F.conv2d(h, w.to(dt), stride=s, padding=1)
            # f32 gamma/beta with bf16 data: the mixed form cuDNN takes.
            h = F.batch_norm(h, None, None, g, b, training=True, eps=1e-5)
            h = F.relu(h)
        logits = h.mean((2, 3)).float() @ wl + bl
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    l1 = step()
    sync(l1)
    r = {"compile_s": time.perf_counter() - t0, "copies": 1}
    l2 = step()
    r["check"] = [sample(l1), sample(l2)]
    r["times"] = time_runs(step, sync, a.steps, a.warmup, a.budget_s)
    r["flops"] = cnn_flops(c)
    return r


def torch_decode(p, gen, sample, sync, dev, a):
    c = p.decode
    T, D, H = c["T"], c["D"], c["H"]
    dh = D // H
    vals = {n: gen(inp, stream_offset(0, j))
            for j, (n, inp) in enumerate(_decode_inputs(c))}
    wqkv, wo, w1, w2 = (vals[n] for n in ("wqkv", "wo", "w1", "w2"))
    kc, vc = vals["k"].clone(), vals["v"].clone()
    ar = torch.arange(T, device=kc.device)

    def rms(h):
        hf = h.float()
        return (hf * torch.rsqrt((hf * hf).mean() + 1e-6)).to(h.dtype)

    @torch.no_grad()
    def step(x, pos):
        h = x
        for i in range(c["L"]):
            q, kn, vn = (rms(h) @ wqkv[i]).split(D)
            kc[i, pos] = kn   # in place, as a decode loop writes its cache
            vc[i, pos] = vn
            s = torch.einsum("hd,thd->ht", q.view(H, dh).float(),
                             kc[i].view(T, H, dh).float()) / math.sqrt(dh)
            s = s.masked_fill(ar > pos, float("-inf"))
            att = torch.einsum("ht,thd->hd", torch.softmax(s, -1).to(h.dtype),
                               vc[i].view(T, H, dh)).reshape(D)
            h = h + att @ wo[i]
            h = h + F.gelu(rms(h) @ w1[i], approximate="tanh") @ w2[i]
        return h

    pos0 = T // 2
    t0 = time.perf_counter()
    h1 = step(vals["x"], pos0)
    sync(h1)
    r = {"compile_s": time.perf_counter() - t0, "copies": 1}
    h2 = step(h1, pos0 + 1)
    r["check"] = [sample(h1), sample(h2)]
    box = [h2, pos0 + 2]

    def call(_):
        h = step(box[0], box[1] % T)
        box[0], box[1] = torch.tanh(h), box[1] + 1
        return h
    r["times"] = time_runs(call, sync, a.steps, a.warmup, a.budget_s)
    return r


# --------------------------------------------------------------------------
# Driver

def worker_env(fw, a):
    env = dict(os.environ)
    if fw == "iron":
        env["JAX_PLATFORMS"] = "iron"
        env.setdefault("IRON_DEVICE", "host" if a.smoke else "cuda")
    elif fw == "xla":
        env["JAX_PLATFORMS"] = "cuda"
    elif fw == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    return env


def run_worker(fw, names, a, on_result):
    """Runs `names` in worker processes for `fw`, restarting after a crash
    or a hang (no output for a.timeout seconds); returns (meta, results)."""
    results, meta, remaining = {}, None, list(names)
    while remaining:
        py = a.torch_python if fw == "torch" else sys.executable
        cmd = [py, os.path.abspath(__file__), "--worker", fw,
               "--programs", ",".join(remaining), "--steps", str(a.steps),
               "--warmup", str(a.warmup), "--budget-s", str(a.budget_s)]
        if a.trace and fw != "torch":
            cmd += ["--trace", str(a.trace)]
        if a.host_profile and fw != "torch":
            cmd += ["--host-profile", str(a.host_profile)]
        if a.smoke:
            cmd.append("--smoke")
        if a.cache_dir and fw != "torch":
            cmd += ["--cache-dir", os.path.join(a.cache_dir, fw)]
        err = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(cmd, env=worker_env(fw, a), stdout=subprocess.PIPE,
                                stderr=err, text=True)
        last = [time.time()]
        killed = [False]

        def watchdog():
            while proc.poll() is None:
                if time.time() - last[0] > a.timeout:
                    killed[0] = True
                    proc.kill()
                    return
                time.sleep(0.2)
        threading.Thread(target=watchdog, daemon=True).start()
        current = None
        for line in proc.stdout:
            last[0] = time.time()
            if line.startswith("START "):
                current = line[6:].strip()
            elif line.startswith("META "):
                meta = json.loads(line[5:])
            elif line.startswith("RESULT "):
                r = json.loads(line[7:])
                results[r["name"]] = r
                current = None
                on_result(fw, r)
        rc = proc.wait()
        remaining = [n for n in remaining if n not in results]
        if not remaining:
            break
        err.seek(0)
        lines = [ln for ln in err.read().strip().splitlines()
                 if "is experimental and not all JAX" not in ln]
        tail = " | ".join(lines[-5:])[-600:]
        why = (f"no progress for {a.timeout}s (killed)" if killed[0]
               else f"worker exited with {rc}")
        if current is None:  # died before starting a program: give up on fw
            for n in remaining:
                results[n] = {"name": n, "error": f"{why} before it started: {tail}"}
                on_result(fw, results[n])
            break
        results[current] = {"name": current, "error": f"{why} during it: {tail}"}
        on_result(fw, results[current])
        remaining.remove(current)
    return meta, results


def rel_err(got, ref):
    """max |g - r| / max(|r|, 1e-3 * max|r|) over all leaves; inf if the
    outputs do not match in structure, NaN where one is NaN and the other
    not."""
    import numpy as np
    if len(got) != len(ref):
        return math.inf
    worst = 0.0
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        if g.shape != r.shape:
            return math.inf
        if g.size == 0:
            continue
        both_nan = np.isnan(g) & np.isnan(r)
        if np.any(np.isnan(g) != np.isnan(r)):
            return math.inf
        same_inf = np.isinf(r) & (g == r)
        ok = ~(both_nan | same_inf)
        if not np.any(ok):
            continue
        g, r = g[ok], r[ok]
        if np.any(np.isinf(g) | np.isinf(r)):
            return math.inf
        floor = max(1e-3 * float(np.max(np.abs(r))), 1e-30)
        worst = max(worst, float(np.max(np.abs(g - r) / np.maximum(np.abs(r), floor))))
    return worst


def fmt_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n:g} B"


def fmt_mb(n):
    if not n:
        return "-"
    return f"{n / 1e6:.0f}" if n >= 1e7 else f"{n / 1e6:.3g}"


def fmt_t(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f}us"
    if s < 1.0:
        return f"{s * 1e3:.3f}ms"
    return f"{s:.2f}s"


def select(progs, only):
    if not only:
        return [p.name for p in progs]
    pats = [s.strip() for s in only.split(",") if s.strip()]
    names = [p.name for p in progs
             if any(p.group == s or fnmatch.fnmatch(p.name, s) for s in pats)]
    unknown = [s for s in pats if not any(p.group == s or fnmatch.fnmatch(p.name, s)
                                          for p in progs)]
    if unknown:
        sys.exit(f"kernels.py: no program matches {', '.join(unknown)} (see --list)")
    return names


def summarize(progs, names, fws, results, ref):
    """Per program and framework: median time, GB/s, %cp, error; and the
    copy roofline."""
    pm = {p.name: p for p in progs}
    rows = []
    for n in names:
        p = pm[n]
        row = {"name": n, "group": p.group, "title": p.title, "tol": p.tol, "fw": {}}
        byt = None
        for f in fws:
            rs = results[f].get(n, [])
            ok = [r for r in rs if "error" not in r]
            ts = [t for r in ok for t in r.get("times", [])]
            e = dict(median_s=statistics.median(ts) if ts else None, runs=len(ts),
                     errors=sorted({r["error"] for r in rs if "error" in r}),
                     compile_s=min((r["compile_s"] for r in ok if "compile_s" in r),
                                   default=None))
            if ok:
                byt = byt or ok[0].get("bytes")
                e["check"] = ok[0].get("check")
                e["flops"] = ok[0].get("flops")
                if p.iters == "out1" and e["check"] and len(e["check"]) > 1:
                    e["iters"] = int(e["check"][1][0])
                elif isinstance(p.iters, int):
                    e["iters"] = p.iters
            row["fw"][f] = e
        row["bytes"] = byt if p.bandwidth else None
        rc = row["fw"].get(ref, {}).get("check") if ref else None
        for f in fws:
            e = row["fw"][f]
            if f == ref or rc is None or e.get("check") is None:
                e["err"] = None
            else:
                e["err"] = rel_err(e["check"], rc)
            e["ok"] = e["err"] is None or e["err"] <= p.tol
        for f in fws:
            e, t = row["fw"][f], row["fw"][f]["median_s"]
            e["gbps"] = row["bytes"] / t / 1e9 if row["bytes"] and t else None
            if e.get("iters") and t:
                e["us_per_iter"] = t / e["iters"] * 1e6
            if e.get("flops") and t:
                e["tflops"] = e["flops"] / t / 1e12
        rows.append(row)
    roof = {"gbps": None, "from": None}
    for row in rows:
        if row["group"] == "copy":
            for f in fws:
                g = row["fw"][f].get("gbps")
                if g and (roof["gbps"] is None or g > roof["gbps"]):
                    roof = {"gbps": g, "from": f, "bytes": row["bytes"]}
    for row in rows:
        for f in fws:
            e = row["fw"][f]
            e["pct_copy"] = (100 * e["gbps"] / roof["gbps"]
                             if e["gbps"] and roof["gbps"] else None)
    return rows, roof


def note_of(e):
    if e.get("us_per_iter") is not None:
        return f"{e['iters']} it, {e['us_per_iter']:.2f} us/it"
    if e.get("tflops") is not None:
        return f"{e['tflops']:.3g} TFLOP/s conv"
    return ""


def short_note(row, fws):
    """Iterations and us/iteration, or conv TFLOP/s, for all frameworks."""
    es = [(f, row["fw"][f]) for f in fws]
    per = [(f, e["us_per_iter"]) for f, e in es if e.get("us_per_iter") is not None]
    if per:
        its = sorted({e["iters"] for f, e in es if e.get("iters")})
        return (f"  {'/'.join(map(str, its))} it; us/it "
                + " ".join(f"{f} {v:.3g}" for f, v in per))
    tf = [(f, e["tflops"]) for f, e in es if e.get("tflops") is not None]
    if tf:
        return "  conv TFLOP/s " + " ".join(f"{f} {v:.3g}" for f, v in tf)
    return ""


def err_str(e):
    if e.get("err") is None:
        return "-"
    s = f"{e['err']:.0e}" if e["err"] else "0"
    return s if e["ok"] else f"FAIL {s}"


def print_table(rows, fws, ref, roof, metas, skipped):
    """Errors and notes first, then the table: the last thing printed."""
    label = {"iron": "iron", "xla": "XLA", "torch": "torch", "cpu": "XLA:CPU"}
    errs = [(row["name"], f, msg) for row in rows for f in fws
            for msg in row["fw"][f]["errors"]]
    if errs:
        print("\nerrors (whole messages in --json):")
        for n, f, msg in errs:
            print(f"  {n} {f}: {msg[:240]}")
    for f, why in skipped.items():
        print(f"{f}: skipped ({why})")
    print()
    print(f"copy roofline: {roof['gbps']:.0f} GB/s ({roof['from']} copy of "
          f"{fmt_bytes(roof['bytes'] / 2)}, read + write)" if roof["gbps"]
          else "copy roofline: not measured")
    for f in fws:
        m = metas.get(f)
        if m:
            print(f"  {f}: {m.get('device', '?')}; {m.get('precision', '')}")
    head = f"{'program':17s} {'MB':>6s}"
    for f in fws:
        head += f" | {label.get(f, f):>9s} {'GB/s':>5s} {'%cp':>3s}"
    other = [f for f in fws if f != ref]
    if ref and "iron" in fws and ref != "iron":
        head += f" | {'i/' + label[ref][:3]:>6s}"
    if other and ref:
        head += " | err " + " ".join(f"{f:>7s}" for f in other)
    print(head)
    print("-" * len(head))
    for row in rows:
        mb = fmt_mb(row["bytes"])
        line = f"{row['name']:17s} {mb:>6s}"
        for f in fws:
            e = row["fw"][f]
            g = f"{e['gbps']:.0f}" if e.get("gbps") else "-"
            pc = f"{e['pct_copy']:.0f}" if e.get("pct_copy") else "-"
            t = fmt_t(e["median_s"]) if e["median_s"] else ("ERR" if e["errors"] else "-")
            line += f" | {t:>9s} {g:>5s} {pc:>3s}"
        if ref and "iron" in fws and ref != "iron":
            ti, tr = row["fw"]["iron"]["median_s"], row["fw"][ref]["median_s"]
            line += f" | {(f'{ti / tr:.2f}' if ti and tr else '-'):>6s}"
        if other and ref:
            line += " | " + "    " + " ".join(f"{err_str(row['fw'][f]):>7s}" for f in other)
        line += short_note(row, fws)
        print(line)


def write_md(path, rows, fws, ref, roof, metas, a, elapsed):
    label = {"iron": "iron", "xla": "XLA:GPU", "torch": "torch", "cpu": "XLA:CPU"}
    lines = []
    dev = next((m.get("kind") or m.get("device") for m in metas.values() if m), "?")
    lines.append(f"`bench/kernels.py {' '.join(a.argv)}` on {dev}; "
                 f"{a.rounds_done} round(s), median of all timed runs, {elapsed:.0f} s in all. "
                 + (f"Copy roofline {roof['gbps']:.0f} GB/s ({roof['from']} copy of "
                    f"{fmt_bytes(roof['bytes'] / 2)}, read + write)."
                    if roof["gbps"] else ""))
    for f in fws:
        if metas.get(f):
            lines.append(f"{label.get(f, f)}: {metas[f].get('precision', '')}.")
    lines.append("")
    cols = ["program", "MB"] + [label.get(f, f) for f in fws]
    if ref and "iron" in fws and ref != "iron":
        cols.append(f"iron/{label[ref]}")
    other = [f for f in fws if f != ref]
    cols.append("max rel err " + " / ".join(other))
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "|".join(["---", "---:"] + ["---:"] * (len(cols) - 3) + ["---"]) + "|")
    for row in rows:
        cells = [f"{row['name']}: {row['title']}",
                 fmt_mb(row["bytes"])]
        for f in fws:
            e = row["fw"][f]
            if not e["median_s"]:
                cells.append("error" if e["errors"] else "-")
                continue
            s = fmt_t(e["median_s"]).replace("us", " us").replace("ms", " ms")
            if e.get("gbps"):
                s += f", {e['gbps']:.0f} GB/s"
                if e.get("pct_copy"):
                    s += f" ({e['pct_copy']:.0f} %)"
            n = note_of(e)
            if n:
                s += f", {n}"
            cells.append(s)
        if ref and "iron" in fws and ref != "iron":
            ti, tr = row["fw"]["iron"]["median_s"], row["fw"][ref]["median_s"]
            cells.append(f"{ti / tr:.2f}" if ti and tr else "-")
        cells.append(" / ".join(err_str(row["fw"][f]) for f in other))
        lines.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              timeout=10).stdout.strip()
    except Exception:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--programs", help=argparse.SUPPRESS)
    ap.add_argument("--only", default="", help="program names, groups or patterns")
    ap.add_argument("--quick", action="store_true", help="headline programs, 1 round")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CPU test)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--frameworks", default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None, help="timed runs per round")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--budget-s", type=float, default=2.0,
                    help="a program's timed runs stop after this (>= 3 runs)")
    ap.add_argument("--budget", type=float, default=170.0,
                    help="skip further rounds past this many seconds (0: never)")
    ap.add_argument("--timeout", type=float, default=180.0,
                    help="kill a worker with no output for this many seconds")
    ap.add_argument("--cache-dir", default=None,
                    help="jax compilation cache ('' = off; smoke: off)")
    ap.add_argument("--torch-python", default=sys.executable,
                    help="interpreter of the torch worker (torch in another env)")
    ap.add_argument("--trace", type=int, default=0,
                    help="iron and XLA: after timing, trace N runs with CUPTI "
                         "(bench/kernel_trace.c) and print the kernels that took "
                         "the most time per run")
    ap.add_argument("--host-profile", type=int, default=0,
                    help="iron and XLA: after timing, sample the host's call "
                         "stacks over N runs (bench/host_profile.c) and print "
                         "where the host time went")
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    a.argv = sys.argv[1:]
    if a.steps is None:
        a.steps = 2 if a.smoke else (8 if a.quick else 10)
    if a.warmup is None:
        a.warmup = 1 if a.smoke else 2
    if a.worker:
        names = a.programs.split(",")
        if a.worker == "torch":
            try:
                torch_worker(names, a)
            except Exception as e:
                for n in names:
                    emit("RESULT", {"name": n, "error": f"{type(e).__name__}: {e}"[:600]})
        else:
            jax_worker(a.worker, names, a)
        return 0

    progs = programs(a.smoke)
    if a.list:
        for p in progs:
            print(f"{p.name:17s} {p.group:11s} {p.title}")
        return 0
    if a.rounds is None:
        a.rounds = 1 if (a.smoke or a.quick) else 2
    if a.cache_dir is None:
        a.cache_dir = "" if a.smoke else os.path.join(
            os.environ.get("TMPDIR", "/tmp"), "ironjax_kernels_jax_cache")
    fws = (a.frameworks.split(",") if a.frameworks
           else (SMOKE_FRAMEWORKS if a.smoke else FRAMEWORKS))
    ref = "xla" if "xla" in fws else ("cpu" if "cpu" in fws else None)
    names = select(progs, ",".join(QUICK) if a.quick and not a.only else a.only)
    if "copy_f32_1g" not in names:  # the roofline column needs it
        names.insert(0, "copy_f32_1g")
    skipped = {}
    if "torch" in fws:
        probe = subprocess.run([a.torch_python, "-c", "import importlib.util, sys; "
                                "sys.exit(importlib.util.find_spec('torch') is None)"],
                               capture_output=True)
        if probe.returncode:
            skipped["torch"] = "torch is not installed"
            fws = [f for f in fws if f != "torch"]
            print("torch: skipped (not installed)", flush=True)

    results = {f: {} for f in fws}
    metas = {}
    t_begin = time.time()

    def on_result(fw, r):
        results[fw].setdefault(r["name"], []).append(r)
        if "error" in r:
            msg = "ERROR " + r["error"][:200]
        else:
            med = statistics.median(r["times"]) if r.get("times") else None
            msg = (f"{fmt_t(med):>9s}  compile {r.get('compile_s', 0):.1f}s  "
                   f"wall {r.get('wall_s', 0):.1f}s")
            if r.get("bytes") and med:
                msg += f"  {r['bytes'] / med / 1e9:.0f} GB/s"
        print(f"  r{a.rounds_done} {fw:5s} {r['name']:17s} {msg}", flush=True)
        tr = r.get("trace")
        if tr and "error" in tr:
            print(f"      trace: {tr['error']}", flush=True)
        elif tr:
            print(f"      trace: {tr['kernels']:.0f} kernels, {tr['kernel_ms']:.3f} ms "
                  f"kernel, {tr['busy_ms']:.3f} ms busy, {tr['wall_ms']:.3f} ms wall "
                  f"per run", flush=True)
            for nm, cnt, ms in tr["top"]:
                print(f"        {ms * 1e3:9.1f} us  x{cnt:<5.1f} {nm}", flush=True)
            for nm, cnt, ms in tr.get("kinds", []):
                print(f"      kind {ms * 1e3:9.1f} us  x{cnt:<6.1f} {nm}", flush=True)
        for line in r.get("host_profile") or []:
            print(f"      {line}", flush=True)

    a.rounds_done = 0
    round_s = []
    for rnd in range(a.rounds):
        if rnd and a.budget and (time.time() - t_begin) + max(round_s) > a.budget:
            print(f"round {rnd}: skipped, it would end past --budget {a.budget:.0f}s "
                  f"(a round took {max(round_s):.0f}s)", flush=True)
            break
        t_round = time.time()
        for f in fws:
            tw = time.time()
            meta, _ = run_worker(f, names, a, on_result)
            if meta:
                metas.setdefault(f, meta)
            print(f"  r{rnd} {f}: worker done in {time.time() - tw:.1f}s", flush=True)
        round_s.append(time.time() - t_round)
        a.rounds_done = rnd + 1

    rows, roof = summarize(progs, names, fws, results, ref)
    elapsed = time.time() - t_begin
    print_table(rows, fws, ref, roof, metas, skipped)
    print(f"{a.rounds_done} round(s) of {','.join(fws)} in {elapsed:.0f}s; "
          f"times are medians; MB = minimal bytes moved; %cp = share of the copy "
          f"roofline; err = max rel. error vs {ref or '-'}")
    if a.json:
        for f in fws:  # samples are for checking, not for the record
            for rs in results[f].values():
                for r in rs:
                    r.pop("check", None)
        for row in rows:
            for e in row["fw"].values():
                e.pop("check", None)
        with open(a.json, "w") as fh:
            json.dump({"meta": {"argv": a.argv, "commit": git_commit(),
                                "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                                "rounds": a.rounds_done, "steps": a.steps,
                                "reference": ref, "skipped": skipped,
                                "workers": metas, "elapsed_s": elapsed},
                       "roofline": roof, "rows": rows, "raw": results}, fh, indent=1)
    if a.md:
        write_md(a.md, rows, fws, ref, roof, metas, a, elapsed)
    bad = any(row["fw"][f]["errors"] or not row["fw"][f]["ok"]
              or row["fw"][f]["median_s"] is None for row in rows for f in fws)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
