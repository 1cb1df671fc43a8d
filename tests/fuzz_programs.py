#!/usr/bin/env python3
"""Random-program differential fuzzer of the CUDA fusion pass and code
generators (issue 12 part 3).

From a seed it builds a random well-typed jax program: chains of
element-wise ops (float math, integer and bitwise ops, comparisons,
selects, clamps, converts and bitcasts), broadcasts, reshapes, slices,
dynamic_slice / dynamic_update_slice at random starts (constants, or
scalar arguments that the harness sets far out of range), transposes,
concatenates, pads, reverses, iotas, reductions over random axes,
argmax, cumulative sums, log_softmax and scans, over random shapes
(rank 0-4; dims of 0, 1, odd and larger sizes) and every dtype class
(bool, s8..s64, u8..u64, f16, bf16, f32, f64, c64, c128, and the narrow
f8e4m3fn / f8e5m2 / s4 / u4). Each program is lowered with jax to the
StableHLO portable artifact a PJRT plugin receives (tests/gen_corpus.py's
serialize()) and written as fz_<seed>.mlirbc; the C harness
tests/c/test_cuda_fuzz_programs.c then compiles each artifact twice, on
the plain host device and as the CUDA device plans it (CUDA fusion, the
generated CUDA kernels compiled as C++ and run on the CPU:
tests/c/cuda_emu_exec.h; or on a real GPU with IRON_TEST_FUZZ_DEVICE=cuda),
runs both on the same inputs and compares every result bit for bit
(NaN payloads aside). See docs/ARCHITECTURE.md (testing) for which ops
are exact where.

Subcommands
  gen  --seed S --count N --out DIR    write N programs (seeds S..S+N-1)
       [--big] (larger shapes, for GPU runs) [--jobs J]
  run  --harness PATH [--seed S] [--count N] [--fresh K] [--batch B]
       [--jobs J] [--plant NAME] [--expect-fail] [--keep DIR]
       generate and run through the harness, in batches; on failure print
       each failing program with the command that reproduces it.
  show --seed S                        print program S (its steps and the
       StableHLO text), e.g. to turn a finding into a regression case.

Program seeds are independent: fz_<S> is the same program whatever batch
it was generated in (its generator is seeded with S alone).

A manifest (DIR/manifest.txt: one line per program: name, "exact" or
"inexact", the ops that are not bit-exact between a real GPU and the host
(transcendental functions, float sums...)) tells the GPU mode where to
compare with a tolerance; the CPU emulation compares everything exactly
(its kernels call the same libm as the host).
"""
import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Generation lowers with jax's CPU rules (what the iron plugin gets too)
# and never needs a device: keep the plugin (maybe stale) out, but for the
# xla subcommand (iron's host device against XLA:CPU).
if len(sys.argv) > 1 and sys.argv[1] == "xla":
    os.environ["JAX_PLATFORMS"] = "iron,cpu"
    os.environ.setdefault("IRON_DEVICE", "host")
    sys.path.insert(0, os.path.join(ROOT, "python"))
else:
    os.environ["JAX_PLATFORMS"] = "cpu"

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------
# dtypes

BOOL = "bool"
SINT = ["int8", "int16", "int32", "int64"]
UINT = ["uint8", "uint16", "uint32", "uint64"]
FLOAT = ["float16", "bfloat16", "float32", "float64"]
CPLX = ["complex64", "complex128"]
NARROW = ["float8_e4m3fn", "float8_e5m2", "int4", "uint4"]

# Relative weights of the dtypes of fresh values.
DTYPE_WEIGHTS = (
    [(BOOL, 3)] + [(d, 3) for d in SINT] + [("int32", 4)] +
    [(d, 2) for d in UINT] + [("float32", 10), ("float16", 3),
                              ("bfloat16", 3), ("float64", 3)] +
    [(d, 2) for d in CPLX])

# Ops whose results a real GPU does not reproduce bit for bit (libdevice's
# functions against the host's libm; float sums in another order).
# Float sums over at least this many elements add in another order on the
# host than in the CUDA kernels: the host splits such rows over its threads
# when it has few rows (gen/row.h), the row fusion's tree is the
# one-thread host's. Compared with a tolerance in emulation too
# (fz_1800652; XLA:CPU's order is a third one there).
LONG_FLOAT_SUM = 16383

INEXACT_OPS = {
    "exp", "exp2", "expm1", "log", "log1p", "logistic", "sin", "cos", "tan",
    "tanh", "atan2", "pow", "cbrt", "rsqrt", "erf", "log_softmax",
    "reduce_add_float", "reduce_mul_float", "cumsum_float",
    "scatter_add_float", "long_float_sum",
    "cabs", "cdiv", "csqrt", "cexp", "clog", "clog1p", "cexpm1", "csin",
    "ccos", "ctan", "ctanh", "crsqrt", "clogistic", "cpow",
}


def jnp_dtype(name):
    import jax.numpy as jnp
    return jnp.dtype(getattr(jnp, name)) if name != BOOL else jnp.dtype(bool)


def dclass(dt):
    n = str(dt)
    if n == "bool":
        return "bool"
    if n in SINT:
        return "sint"
    if n in UINT:
        return "uint"
    if n in FLOAT:
        return "float"
    if n in CPLX:
        return "cplx"
    return "narrow"


# ---------------------------------------------------------------------------
# The generator

DIMS = [(0, 2), (1, 14), (2, 8), (3, 8), (4, 4), (5, 6), (7, 5), (8, 3),
        (13, 3), (16, 2), (17, 2), (31, 1), (32, 1), (33, 2), (64, 1),
        (100, 1), (129, 1), (255, 0.5), (256, 0.5), (1023, 0.3)]
RANKS = [(0, 1), (1, 4), (2, 5), (3, 3), (4, 2)]


def wchoice(rng, pairs):
    total = sum(w for _, w in pairs)
    r = rng.random() * total
    for v, w in pairs:
        r -= w
        if r < 0:
            return v
    return pairs[-1][0]


class Gen:
    """Builds one program while jax traces it: every decision depends on
    the seed and on shapes/dtypes (known at trace time), so tracing again
    gives the same program."""

    def __init__(self, seed, big=False):
        self.seed = seed
        self.rng = random.Random(seed)
        self.big = big
        # Size class: tiny programs, the common middle, larger ones (more
        # vectorized loop bodies and tails).
        self.max_elems = wchoice(self.rng, [(64, 3), (6000, 6), (40000, 1)])
        if big:
            self.max_elems = 1 << 18
        self.steps = []       # readable description of the program
        self.ops = set()      # op tags used (INEXACT_OPS decides exactness)
        self.vals = []        # the values built so far (jax tracers)

    # -- helpers ----------------------------------------------------------
    def log(self, text):
        self.steps.append(text)

    def tag(self, t):
        self.ops.add(t)

    def shape(self, rank=None, elems=None):
        rng = self.rng
        limit = elems or self.max_elems
        if rank is None:
            rank = wchoice(rng, RANKS)
        dims = []
        for _ in range(rank):
            d = wchoice(rng, DIMS)
            if self.big and rng.random() < 0.3:
                d = rng.choice([255, 256, 257, 1000, 1025, 4096])
            dims.append(d)
        # Keep within the element budget (zero-size shapes are cheap).
        while 0 not in dims and int(np.prod(dims, dtype=np.int64)) > limit:
            i = max(range(rank), key=lambda k: dims[k])
            dims[i] = max(1, dims[i] // 3)
        return tuple(dims)

    def dtype(self, classes=None):
        rng = self.rng
        pairs = DTYPE_WEIGHTS
        if classes is not None:
            pairs = [(d, w) for d, w in pairs if dclass(d) in classes]
        if (classes is None or "narrow" in classes) and rng.random() < 0.04:
            return jnp_dtype(rng.choice(NARROW))
        return jnp_dtype(wchoice(rng, pairs))

    def pick(self, pred=None, avoid=None):
        """A value of the pool: recent ones more often; not `avoid` when
        there is another."""
        cands = [v for v in self.vals if (pred is None or pred(v)) and
                 v is not avoid]
        if not cands and avoid is not None:
            cands = [avoid]
        if not cands:
            return None
        if self.rng.random() < 0.5:
            return cands[-1]
        k = len(cands)
        i = int(k * (1 - self.rng.random() ** 2))
        return cands[min(i, k - 1)]

    def scalar_const(self, dt):
        rng = self.rng
        c = dclass(dt)
        if c == "bool":
            v = rng.random() < 0.5
        elif c in ("sint", "uint"):
            v = rng.choice([0, 1, 2, 3, 5, 7, 31, 100, -1, -2, -7, 127, -128])
            if c == "uint":
                v = abs(v)
        elif c == "narrow":
            v = rng.choice([0, 1, 2, -1, 3]) if str(dt) != "uint4" else \
                rng.choice([0, 1, 2, 3])
        else:
            v = rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 3.0, 1e-3, 100.0,
                            float("inf"), float("-inf"), float("nan"), -0.0])
            if c == "cplx" and rng.random() < 0.5:
                v = complex(v, rng.choice([0.0, 1.0, -0.5]))
        return np.array(v).astype(dt)

    def const(self, shape, dt):
        import jax.numpy as jnp
        from jax import lax
        if self.rng.random() < 0.3 and len(shape) > 0 and \
                dclass(dt) in ("sint", "uint", "float"):
            d = self.rng.randrange(len(shape))
            self.log(f"iota {dt} {shape} dim {d}")
            self.tag("iota")
            return lax.broadcasted_iota(dt, shape, d)
        c = self.scalar_const(dt)
        self.log(f"constant {c!r} -> {dt}{list(shape)}")
        return jnp.full(shape, c, dt)

    # -- coercions ----------------------------------------------------------
    def to_dtype(self, x, dt):
        from jax import lax
        if x.dtype == dt:
            return x
        if dclass(x.dtype) == "cplx" and dclass(dt) != "cplx":
            x = lax.real(x) if self.rng.random() < 0.7 else lax.imag(x)
            self.tag("real")
            if x.dtype == dt:
                return x
        self.tag("convert")
        return lax.convert_element_type(x, dt)

    def to_shape(self, x, shape):
        """A value of `shape` made from x by data movement."""
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        shape = tuple(shape)
        if x.shape == shape:
            return x
        n, m = int(np.prod(x.shape, dtype=np.int64)), int(
            np.prod(shape, dtype=np.int64))
        if n == m and rng.random() < 0.7:
            self.tag("reshape")
            return lax.reshape(x, shape)
        if m == 0 or n == 0:
            return self.const(shape, x.dtype)
        if x.ndim == 0:
            self.tag("broadcast")
            return lax.broadcast_in_dim(x, shape, ())
        # Rank first: fold extra leading dims away (a slice at a random
        # index), add missing ones by broadcasting.
        while x.ndim > len(shape):
            d = rng.randrange(x.ndim)
            i = rng.randrange(x.shape[d])
            self.tag("index")
            x = lax.index_in_dim(x, i, d, keepdims=False)
        if x.ndim < len(shape):
            # broadcast_in_dim needs each kept dim equal to its target or
            # 1: fit those first.
            keep = sorted(rng.sample(range(len(shape)), x.ndim))
            x = self.fit_dims(x, tuple(shape[keep[k]] if x.shape[k] != 1
                                       else 1 for k in range(x.ndim)))
            self.tag("broadcast")
            return lax.broadcast_in_dim(x, tuple(shape), tuple(keep))
        return self.fit_dims(x, shape)

    def fit_dims(self, x, shape):
        """Same rank: per dim, broadcast 1s, slice larger, pad or tile
        smaller."""
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        if x.shape == tuple(shape):
            return x
        if 0 in x.shape:
            return self.const(shape, x.dtype)
        # Size-1 dims that must grow: one broadcast_in_dim.
        if any(a == 1 and b != 1 for a, b in zip(x.shape, shape)):
            tgt = tuple(b if a == 1 else a for a, b in zip(x.shape, shape))
            self.tag("broadcast")
            x = lax.broadcast_in_dim(x, tgt, tuple(range(x.ndim)))
        if x.shape == tuple(shape):
            return x
        # Larger dims: a slice (sometimes strided), or a dynamic_slice.
        if any(a > b for a, b in zip(x.shape, shape)):
            if rng.random() < 0.3:
                sizes = tuple(min(a, b) for a, b in zip(x.shape, shape))
                x = self.dyn_slice_of(x, sizes)
            else:
                starts, limits, strides = [], [], []
                for a, b in zip(x.shape, shape):
                    if a <= b:
                        starts.append(0), limits.append(a), strides.append(1)
                        continue
                    s = 1
                    if rng.random() < 0.25 and b > 0 and (a - 1) // b >= 1:
                        s = rng.randint(1, max(1, (a - 1) // max(b - 1, 1)))
                    span = (b - 1) * s + 1 if b > 0 else 0
                    st = rng.randrange(0, a - span + 1)
                    starts.append(st), limits.append(st + span)
                    strides.append(s)
                self.tag("slice")
                x = lax.slice(x, starts, limits, strides)
        if x.shape == tuple(shape):
            return x
        # Smaller dims: pad (edge and interior) or concatenate.
        if rng.random() < 0.5:
            cfg = []
            for a, b in zip(x.shape, shape):
                extra = b - a
                interior = 0
                if extra > 0 and a > 1 and rng.random() < 0.3:
                    interior = rng.randint(0, extra // (a - 1))
                extra -= interior * max(a - 1, 0)
                lo = rng.randint(0, extra)
                cfg.append((lo, extra - lo, interior))
            pv = self.scalar_const(x.dtype)
            self.tag("pad")
            return lax.pad(x, pv, cfg)
        for d, (a, b) in enumerate(zip(x.shape, shape)):
            if a < b:
                parts = [x]
                have = a
                while have < b:
                    take = min(a, b - have)
                    parts.append(lax.slice_in_dim(x, 0, take, axis=d))
                    have += take
                self.tag("concatenate")
                x = lax.concatenate(parts, d)
        return x

    def index_scalar(self, limit):
        """A start index: a constant (sometimes out of range or negative)
        or a scalar argument (the harness sets them far out of range),
        sometimes through a little arithmetic (jax's own start
        normalization adds more)."""
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        idx = [v for v in self.vals if v.ndim == 0 and
               dclass(v.dtype) in ("sint", "uint")]
        if idx and rng.random() < 0.7:
            v = rng.choice(idx)
            if rng.random() < 0.3:
                c = np.array(rng.choice([1, 2, -1, 3]) if dclass(v.dtype) ==
                             "sint" else rng.choice([1, 2, 3])).astype(v.dtype)
                v = lax.add(v, c) if rng.random() < 0.5 else lax.mul(v, c)
            return v
        # jax adds the dim size to negative starts before the op clamps:
        # only starts below -size reach the clamp at 0.
        c = rng.choice([0, 0, 1, limit, limit + 3, -1, -5, 10**6, -10**6,
                        -2 * limit - 40, rng.randint(0, max(limit, 0))])
        return np.array(c, dtype=rng.choice(["int32", "int64", "int32"]))

    def dyn_slice_of(self, x, sizes):
        from jax import lax
        starts = [self.index_scalar(a - b) for a, b in zip(x.shape, sizes)]
        dts = {np.dtype(getattr(s, "dtype", np.int32)) for s in starts}
        if len(dts) > 1:  # one index dtype per op
            starts = [lax.convert_element_type(s, np.int32) for s in starts]
        self.tag("dynamic_slice")
        self.log(f"dynamic_slice {x.dtype}{list(x.shape)} -> {list(sizes)}")
        return lax.dynamic_slice(x, starts, sizes)

    def operand(self, shape, dt, avoid=None):
        """A value of this shape and dtype: from the pool (coerced, rarely
        `avoid`) or a constant."""
        if self.rng.random() < 0.12:
            return self.const(shape, dt)
        y = self.pick(avoid=avoid if self.rng.random() < 0.9 else None)
        return self.to_shape(self.to_dtype(y, dt), shape)

    # -- op generators ------------------------------------------------------
    def g_unary(self):
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        x = self.pick()
        c = dclass(x.dtype)
        if c == "float":
            name = rng.choice(["neg", "abs", "sign", "floor", "ceil",
                               "round", "round_even", "sqrt", "rsqrt", "cbrt",
                               "exp", "expm1", "log", "log1p", "logistic",
                               "sin", "cos", "tan", "tanh", "is_finite",
                               "reduce_precision", "erf", "square",
                               "integer_pow", "exp2"])
        elif c in ("sint", "uint"):
            name = rng.choice(["neg", "abs", "sign", "not", "popcnt", "clz",
                               "square", "integer_pow"])
            if c == "uint" and name == "abs":
                name = "not"
        elif c == "bool":
            name = "not"
        elif c == "cplx":
            name = rng.choice(["neg", "real", "imag", "cabs", "conj",
                               "csqrt", "cexp", "square", "sign", "clog",
                               "clog1p", "cexpm1", "csin", "ccos", "ctan",
                               "ctanh", "crsqrt", "clogistic"])
        else:  # narrow
            name = rng.choice(["neg", "abs", "convert_back"])
            if str(x.dtype) in ("int4", "uint4"):
                name = "convert_back"
        f = {
            "neg": lax.neg, "abs": lax.abs, "sign": lax.sign,
            "floor": lax.floor, "ceil": lax.ceil,
            "round": lambda v: lax.round(v, lax.RoundingMethod.AWAY_FROM_ZERO),
            "round_even": lambda v: lax.round(
                v, lax.RoundingMethod.TO_NEAREST_EVEN),
            "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "cbrt": lax.cbrt,
            "exp": lax.exp, "expm1": lax.expm1, "log": lax.log,
            "log1p": lax.log1p, "logistic": lax.logistic, "sin": lax.sin,
            "cos": lax.cos, "tan": lax.tan, "tanh": lax.tanh,
            "is_finite": lax.is_finite, "erf": lax.erf, "exp2": lax.exp2,
            "reduce_precision": lambda v: lax.reduce_precision(
                v, rng.choice([5, 8, 4]), rng.choice([10, 7, 3, 2])),
            "square": lax.square,
            "integer_pow": lambda v: lax.integer_pow(v, rng.choice([2, 3,
                                                                   -1, 5])
                                                     if c in ("float", "cplx")
                                                     else rng.choice([2, 3, 5])),
            "not": lax.bitwise_not, "popcnt": lax.population_count,
            "clz": lax.clz, "real": lax.real, "imag": lax.imag,
            "cabs": lax.abs, "conj": lax.conj, "csqrt": lax.sqrt,
            "cexp": lax.exp, "clog": lax.log, "clog1p": lax.log1p,
            "cexpm1": lax.expm1, "csin": lax.sin, "ccos": lax.cos,
            "ctan": lax.tan, "ctanh": lax.tanh, "crsqrt": lax.rsqrt,
            "clogistic": lax.logistic,
            "convert_back": lambda v: lax.convert_element_type(
                lax.convert_element_type(v, np.float32), v.dtype),
        }[name]
        self.tag(name)
        if name == "integer_pow" and c == "float":
            self.tag("pow")
        self.log(f"{name} {x.dtype}{list(x.shape)}")
        return f(x)

    def g_binary(self):
        from jax import lax
        rng = self.rng
        x = self.pick()
        c = dclass(x.dtype)
        ops = {
            "float": ["add", "sub", "mul", "div", "rem", "max", "min", "pow",
                      "atan2", "add", "mul", "nextafter"],
            "sint": ["add", "sub", "mul", "div", "rem", "max", "min", "and",
                     "or", "xor", "shl", "shr", "sra"],
            "uint": ["add", "sub", "mul", "div", "rem", "max", "min", "and",
                     "or", "xor", "shl", "shr", "sra"],
            "bool": ["and", "or", "xor", "max", "min"],
            "cplx": ["add", "sub", "mul", "cdiv", "cpow", "add", "mul"],
            "narrow": ["add", "mul", "max", "min", "sub"],
        }[c]
        name = rng.choice(ops)
        y = self.operand(x.shape, x.dtype, avoid=x)
        if rng.random() < 0.5:
            x, y = y, x
        f = {
            "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div,
            "cdiv": lax.div, "rem": lax.rem, "max": lax.max, "min": lax.min,
            "pow": lax.pow, "cpow": lax.pow, "atan2": lax.atan2, "and": lax.bitwise_and,
            "or": lax.bitwise_or, "xor": lax.bitwise_xor,
            "shl": lax.shift_left, "shr": lax.shift_right_logical,
            "sra": lax.shift_right_arithmetic, "nextafter": lax.nextafter,
        }[name]
        self.tag(name)
        self.log(f"{name} {x.dtype}{list(x.shape)}")
        return f(x, y)

    def g_compare(self):
        from jax import lax
        rng = self.rng
        x = self.pick()
        y = self.operand(x.shape, x.dtype, avoid=x)
        if dclass(x.dtype) == "cplx":
            name = rng.choice(["eq", "ne"])
        else:
            name = rng.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        self.tag("compare")
        self.log(f"compare {name} {x.dtype}{list(x.shape)}")
        return getattr(lax, name)(x, y)

    def g_select(self):
        from jax import lax
        rng = self.rng
        x = self.pick()
        y = self.operand(x.shape, x.dtype, avoid=x)
        if rng.random() < 0.15:
            p = self.pick(lambda v: v.ndim == 0)
            p = self.const((), np.dtype(bool)) if p is None else \
                self.to_dtype(p, np.dtype(bool))
            p = p if p.ndim == 0 else self.to_shape(p, ())
        else:
            p = self.pick(lambda v: v.dtype == np.dtype(bool))
            if p is None or rng.random() < 0.3:
                q = self.pick()
                q = self.to_shape(q, x.shape)
                c = dclass(q.dtype)
                p = lax.ne(q, self.const(q.shape, q.dtype)) if c != "narrow" \
                    else lax.ne(lax.convert_element_type(q, np.float32),
                                np.float32(0))
            p = self.to_shape(p, x.shape)
        self.tag("select")
        self.log(f"select {x.dtype}{list(x.shape)} pred{list(p.shape)}")
        return lax.select(p, x, y)

    def g_clamp(self):
        from jax import lax
        x = self.pick(lambda v: dclass(v.dtype) in ("sint", "uint", "float"))
        if x is None:
            return None
        if self.rng.random() < 0.6:
            lo, hi = self.scalar_const(x.dtype), self.scalar_const(x.dtype)
        else:
            lo, hi = self.operand(x.shape, x.dtype), \
                self.operand(x.shape, x.dtype)
        self.tag("clamp")
        self.log(f"clamp {x.dtype}{list(x.shape)}")
        return lax.clamp(lo, x, hi)

    def g_convert(self):
        x = self.pick()
        dt = self.dtype()
        self.log(f"convert {x.dtype} -> {dt}")
        if dclass(x.dtype) == "narrow" or dclass(dt) == "narrow":
            self.tag("convert_narrow")
        return self.to_dtype(x, dt)

    def g_bitcast(self):
        from jax import lax
        rng = self.rng
        # After an inexact op, a float's bits may differ by an ulp between
        # the GPU and the host (libdevice vs libm): as integers that is no
        # tolerance the harness could apply (every element differs), so
        # only integers are bitcast then.
        kinds = ("sint", "uint") if self.ops & INEXACT_OPS else \
            ("sint", "uint", "float", "cplx")
        x = self.pick(lambda v: dclass(v.dtype) in kinds)
        if x is None:
            return None
        w = x.dtype.itemsize
        same = [d for d in SINT + UINT + FLOAT
                if np.dtype(jnp_dtype(d)).itemsize == w]
        if rng.random() < 0.6 and dclass(x.dtype) != "cplx":
            dt = jnp_dtype(rng.choice(same))
        else:
            cands = [d for d in SINT + UINT + FLOAT
                     if jnp_dtype(d).itemsize < w and
                     w % jnp_dtype(d).itemsize == 0]
            if dclass(x.dtype) == "cplx" or not cands:
                return None
            dt = jnp_dtype(rng.choice(cands))
        self.tag("bitcast")
        self.log(f"bitcast {x.dtype} -> {dt}")
        if dclass(x.dtype) == "float":
            # NaN signs and payloads are not compared (XLA:CPU's are not
            # consistent either): no NaN before its bits become integers.
            # (A NaN an f16/bf16 op computes is the GPU's canonical NaN,
            # the host's keeps the operand's payload. A selected NaN
            # constant differed too until selects stopped rounding:
            # fz_710863, fz_711447, corpus fz_bf16_select_nan.)
            x = lax.select(lax.ne(x, x), lax.full_like(x, 0), x)
        y = lax.bitcast_convert_type(x, dt)
        if dclass(dt) == "float" and rng.random() < 0.7:
            # Arbitrary bits make NaNs with payloads and denormals; keep
            # them out of float arithmetic half the time.
            y = lax.select(lax.is_finite(y), y, lax.full_like(y, 0))
        return y

    def g_broadcast(self):
        from jax import lax
        rng = self.rng
        x = self.pick()
        n = int(np.prod(x.shape, dtype=np.int64))
        if x.ndim >= 5:
            return None
        add = rng.randint(0 if 1 in x.shape else 1, min(2, 5 - x.ndim))
        rank = x.ndim + add
        keep = sorted(rng.sample(range(rank), x.ndim))
        out = [0] * rank
        for k, d in enumerate(keep):
            out[d] = x.shape[k]
            if x.shape[k] == 1 and rng.random() < 0.6:
                out[d] = wchoice(rng, DIMS[1:])
        budget = self.max_elems // max(n, 1)
        for d in range(rank):
            if d not in keep:
                out[d] = wchoice(rng, DIMS)
        while 0 not in out and int(np.prod(out, dtype=np.int64)) > \
                self.max_elems:
            grow = [d for d in range(rank) if d not in keep or
                    x.shape[keep.index(d)] == 1]
            if not grow or all(out[d] == 1 for d in grow):
                return None
            d = max(grow, key=lambda k: out[k])
            out[d] = max(1, out[d] // 3)
        del budget
        self.tag("broadcast")
        self.log(f"broadcast_in_dim {x.dtype}{list(x.shape)} -> {out} "
                 f"dims {keep}")
        return lax.broadcast_in_dim(x, tuple(out), tuple(keep))

    def g_reshape(self):
        from jax import lax
        rng = self.rng
        x = self.pick()
        n = int(np.prod(x.shape, dtype=np.int64))
        if n == 0:
            rank = rng.randint(1, 4)
            shp = [rng.choice([0, 1, 3, 2]) for _ in range(rank)]
            shp[rng.randrange(rank)] = 0
        else:
            # A random factorization of n, with 1s inserted.
            f, k, m = [], 2, n
            while m > 1 and k * k <= m:
                while m % k == 0:
                    f.append(k)
                    m //= k
                k += 1
            if m > 1:
                f.append(m)
            rng.shuffle(f)
            rank = rng.randint(max(1, min(len(f), 1)), 4)
            shp = [1] * rank
            for p in f:
                shp[rng.randrange(rank)] *= p
            if rng.random() < 0.1:
                shp = []  if n == 1 else shp
        self.tag("reshape")
        self.log(f"reshape {x.dtype}{list(x.shape)} -> {shp}")
        return lax.reshape(x, tuple(shp))

    def g_slice(self):
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0)
        if x is None:
            return None
        shp = tuple(rng.randint(0 if rng.random() < 0.1 else min(a, 1), a)
                    for a in x.shape)
        self.log(f"slice {x.dtype}{list(x.shape)} -> {list(shp)}")
        return self.fit_dims(x, shp)

    def g_dynamic_slice(self):
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0)
        if x is None:
            return None
        sizes = tuple(rng.randint(0 if rng.random() < 0.05 else min(a, 1), a)
                      for a in x.shape)
        if rng.random() < 0.3:  # jax's x[i]: unit dims, squeezed after
            sizes = tuple(min(1, a) if rng.random() < 0.6 else b
                          for a, b in zip(x.shape, sizes))
            y = self.dyn_slice_of(x, sizes)
            self.tag("reshape")
            return lax.reshape(y, tuple(b for b in sizes if b != 1))
        return self.dyn_slice_of(x, sizes)

    def g_dus(self):
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0)
        if x is None:
            return None
        sizes = tuple(rng.randint(0 if rng.random() < 0.05 else min(a, 1), a)
                      for a in x.shape)
        if rng.random() < 0.3:
            # x.at[i].set(row): an update computed without the unit dims,
            # which a reshape or broadcast_in_dim adds back.
            sizes = tuple(min(1, a) if rng.random() < 0.6 else b
                          for a, b in zip(x.shape, sizes))
            sq = tuple(b for b in sizes if b != 1)
            u = self.elementwise_chain(self.operand(sq, x.dtype))
            self.tag("reshape")
            if rng.random() < 0.5:
                u = lax.reshape(u, sizes)
            else:
                keep = tuple(d for d, b in enumerate(sizes) if b != 1)
                u = lax.broadcast_in_dim(u, sizes, keep)
        else:
            u = self.operand(sizes, x.dtype)
            if rng.random() < 0.5:  # an update computed in the same group
                u = self.elementwise_chain(u)
        starts = [self.index_scalar(a - b) for a, b in zip(x.shape, sizes)]
        dts = {np.dtype(getattr(s, "dtype", np.int32)) for s in starts}
        if len(dts) > 1:
            starts = [lax.convert_element_type(s, np.int32) for s in starts]
        self.tag("dynamic_update_slice")
        self.log(f"dynamic_update_slice {x.dtype}{list(x.shape)} "
                 f"update {list(sizes)}")
        return lax.dynamic_update_slice(x, u, starts)

    def elementwise_chain(self, x):
        from jax import lax
        rng = self.rng
        for _ in range(rng.randint(1, 3)):
            c = dclass(x.dtype)
            if c in ("float", "sint", "uint", "cplx"):
                y = self.const(x.shape, x.dtype)
                op = rng.choice([lax.add, lax.mul, lax.sub])
                x = op(x, y)
            elif c == "bool":
                x = lax.bitwise_not(x)
            self.tag("chain")
        return x

    def g_transpose(self):
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim >= 2)
        if x is None:
            return None
        perm = list(range(x.ndim))
        rng.shuffle(perm)
        # Element-wise producers and consumers around it: on CUDA the
        # transpose pivots their fusion (one tiled kernel whose loads run
        # the producers and whose stores run the consumers).
        pre, post = rng.random() < 0.5, rng.random() < 0.5
        if pre:
            x = self.elementwise_chain(x)
        self.tag("transpose")
        self.log(f"transpose {x.dtype}{list(x.shape)} perm {perm}"
                 f"{' of a chain' if pre else ''}"
                 f"{' into a chain' if post else ''}")
        y = lax.transpose(x, perm)
        if post:
            y = self.elementwise_chain(y)
        if pre or post:
            self.tag("transpose_chain")
        return y

    def g_concat(self):
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0)
        if x is None:
            return None
        d = rng.randrange(x.ndim)
        parts = [x]
        for _ in range(rng.randint(1, 3)):
            shp = list(x.shape)
            shp[d] = wchoice(rng, DIMS)
            if int(np.prod(shp, dtype=np.int64)) > self.max_elems // 4:
                shp[d] = 1
            parts.append(self.operand(tuple(shp), x.dtype))
        rng.shuffle(parts)
        self.tag("concatenate")
        self.log(f"concatenate {x.dtype} dim {d} "
                 f"{[list(p.shape) for p in parts]}")
        return lax.concatenate(parts, d)

    def g_concat_many(self):
        """A concatenate of more than 64 operands (several kernels on
        CUDA): slices of one value, stacked."""
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and 0 < v.shape[0] and
                      int(np.prod(v.shape, dtype=np.int64)) <= 4096)
        if x is None:
            return None
        n = rng.randint(60, 80)
        parts = [lax.slice_in_dim(x, i % x.shape[0], i % x.shape[0] + 1,
                                  axis=0) for i in range(n)]
        self.tag("concatenate")
        self.log(f"concatenate of {n} rows of {x.dtype}{list(x.shape)}")
        return lax.concatenate(parts, 0)

    def g_pad(self):
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0)
        if x is None:
            return None
        cfg = []
        for a in x.shape:
            lo = rng.randint(-a, 3)
            hi = rng.randint(-(a + min(lo, 0)), 3)
            it = rng.randint(0, 2) if a > 1 and rng.random() < 0.3 else 0
            # The padded dim must stay >= 0.
            while a + (a - 1) * it + lo + hi < 0 if a > 0 else lo + hi < 0:
                hi += 1
            cfg.append((lo, hi, it))
        self.tag("pad")
        self.log(f"pad {x.dtype}{list(x.shape)} {cfg}")
        return lax.pad(x, self.scalar_const(x.dtype), cfg)

    def g_rev(self):
        from jax import lax
        x = self.pick(lambda v: v.ndim > 0)
        if x is None:
            return None
        dims = sorted(self.rng.sample(range(x.ndim),
                                      self.rng.randint(1, x.ndim)))
        self.tag("reverse")
        self.log(f"reverse {x.dtype}{list(x.shape)} {dims}")
        return lax.rev(x, dims)

    def index_vector(self, limit, n):
        """n gather/scatter indices into a dim of `limit`: iota-like,
        random in range, or some out of range (clamped, filled or dropped
        by the op's mode)."""
        rng = self.rng
        r = random.Random(rng.random())
        kind = rng.choice(["range", "random", "oob"])
        if kind == "range" or limit == 0:
            v = [i % max(limit, 1) for i in range(n)]
        elif kind == "random":
            v = [r.randrange(limit) for _ in range(n)]
        else:
            v = [r.choice([-1, limit, limit + 5, -limit - 3, 0, limit - 1])
                 for _ in range(n)]
        return np.array(v, dtype=rng.choice(["int32", "int64", "int32"]))

    def g_gather(self):
        """jnp.take along an axis: a gather of slices at constant or
        computed indices; mode clip or fill (out-of-range reads)."""
        import jax.numpy as jnp
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and dclass(v.dtype) != "narrow")
        if x is None:
            return None
        ax = rng.randrange(x.ndim)
        n = rng.choice([1, 2, 3, 5, 8, 17])
        idx = self.index_vector(x.shape[ax], n)
        if rng.random() < 0.3:
            ints = [v for v in self.vals if v.ndim == 0 and
                    dclass(v.dtype) in ("sint", "uint")]
            if ints:
                idx = jnp.asarray(idx) + rng.choice(ints).astype(idx.dtype)
        if x.shape[ax] == 0:
            return None  # jax refuses a non-empty take from an empty axis
        mode = rng.choice(["clip", "fill"])
        self.tag("gather")
        self.log(f"take {x.dtype}{list(x.shape)} axis {ax} n {n} {mode}")
        return jnp.take(x, idx, axis=ax, mode=mode)

    def g_scatter(self):
        """x.at[idx].set/add/max/min along axis 0 with constant indices
        (repeats, out of range: dropped)."""
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and v.shape[0] > 0 and
                      dclass(v.dtype) in ("sint", "uint", "float", "bool"))
        if x is None:
            return None
        n = rng.choice([1, 2, 3, 6])
        idx = self.index_vector(x.shape[0], n)
        upd = self.operand((n,) + tuple(x.shape[1:]), x.dtype, avoid=x)
        c = dclass(x.dtype)
        kinds = ["set", "max", "min"] if c == "bool" else \
            ["set", "add", "max", "min", "set"]
        k = rng.choice(kinds)
        if k == "add" and c == "float":
            self.tag("scatter_add_float")  # repeated indices: any order
        self.tag("scatter")
        self.log(f"scatter {k} {x.dtype}{list(x.shape)} n {n}")
        ref = x.at[idx]
        return getattr(ref, k)(upd, mode="drop")

    def g_sort(self):
        """jnp.sort or argsort along an axis (stable; NaNs last)."""
        import jax.numpy as jnp
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and
                      dclass(v.dtype) in ("sint", "uint", "float", "bool"))
        if x is None:
            return None
        ax = rng.randrange(x.ndim)
        self.tag("sort")
        if rng.random() < 0.4:
            self.log(f"argsort {x.dtype}{list(x.shape)} axis {ax}")
            return jnp.argsort(x, axis=ax, stable=True)
        self.log(f"sort {x.dtype}{list(x.shape)} axis {ax}")
        return jnp.sort(x, axis=ax)

    def g_while_data(self):
        """A data-dependent while_loop: halve an array while its largest
        magnitude exceeds a bound (at most 30 times): the predicate reduces
        over the array (a device loop on CUDA when opted in)."""
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and 0 not in v.shape and
                      dclass(v.dtype) == "float" and
                      str(v.dtype) in ("float32", "float64"))
        if x is None:
            return None
        bound = np.array(rng.choice([0.5, 1.0, 3.0, 100.0]), x.dtype)
        half = np.array(0.5, x.dtype)

        def cond(c):
            i, v = c
            return (i < 30) & (jnp.max(jnp.abs(v)) > bound)

        def body(c):
            i, v = c
            return i + 1, v * half + lax.convert_element_type(i, v.dtype) * \
                np.array(0.0, v.dtype)
        self.tag("while_data")
        self.log(f"while max|x| > {bound} {x.dtype}{list(x.shape)}")
        i, v = lax.while_loop(cond, body, (np.int32(0), x))
        return v if rng.random() < 0.7 else i

    def g_reduce_window(self):
        """lax.reduce_window (max, min, add) with random windows, strides,
        dilations and padding per dim: pooling and cumulative forms."""
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and 0 not in v.shape and
                      dclass(v.dtype) in ("sint", "uint", "float"))
        if x is None:
            return None
        win, strides, pads, wdil = [], [], [], []
        for a in x.shape:
            w = rng.choice([1, 1, 2, 3, min(a, 5)])
            d = rng.choice([1, 1, 2]) if w > 1 else 1
            span = (w - 1) * d + 1
            lo = rng.choice([0, 0, 1, span - 1])
            hi = rng.choice([0, 0, 1])
            if a + lo + hi < span:
                hi = span - a - lo
            win.append(w)
            wdil.append(d)
            strides.append(rng.choice([1, 1, 2, 3]))
            pads.append((lo, hi))
        k = rng.choice(["max", "min", "add"])
        c = dclass(x.dtype)
        if k == "add" and c == "float":
            self.tag("reduce_add_float")
        dt = x.dtype
        init = {"add": 0,
                "max": -np.inf if c == "float" else np.iinfo(dt).min,
                "min": np.inf if c == "float" else np.iinfo(dt).max}[k]
        op = {"add": lax.add, "max": lax.max, "min": lax.min}[k]
        self.tag("reduce_window")
        self.log(f"reduce_window {k} {x.dtype}{list(x.shape)} win {win} "
                 f"strides {strides} pads {pads} dil {wdil}")
        return lax.reduce_window(x, np.array(init).astype(dt), op,
                                 tuple(win), tuple(strides), tuple(pads),
                                 window_dilation=tuple(wdil))

    def g_iota(self):
        x = self.pick()
        shp = x.shape if self.rng.random() < 0.7 else self.shape()
        if len(shp) == 0:
            shp = (self.rng.choice([1, 5, 8]),)
        dt = self.dtype(("sint", "uint", "float"))
        from jax import lax
        d = self.rng.randrange(len(shp))
        self.tag("iota")
        self.log(f"iota {dt}{list(shp)} dim {d}")
        return lax.broadcasted_iota(dt, shp, d)

    def g_reduce(self):
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and dclass(v.dtype) != "narrow")
        if x is None:
            return None
        axes = tuple(sorted(rng.sample(range(x.ndim),
                                       rng.randint(1, x.ndim))))
        c = dclass(x.dtype)
        if c == "cplx":
            kinds = ["add", "mul"]
        elif c == "bool":
            kinds = ["and", "or", "max", "min"]
        elif c == "float":
            kinds = ["add", "max", "min", "mul", "argmax", "argmin", "add"]
        else:
            kinds = ["add", "max", "min", "mul", "and", "or", "xor",
                     "argmax", "argmin"]
        k = rng.choice(kinds)
        if k == "mul" and c in ("float", "cplx") and \
                int(np.prod([x.shape[a] for a in axes])) > 64:
            # A float product of many values overflows or underflows at a
            # point that depends on the order (inf on one side, a finite
            # value on the other: no tolerance applies; fz_952952).
            k = "add"
        self.log(f"reduce {k} {x.dtype}{list(x.shape)} axes {list(axes)}")
        if k in ("argmax", "argmin"):
            import jax.numpy as jnp
            ax = rng.choice(axes)
            self.tag("argmax")
            f = jnp.argmax if k == "argmax" else jnp.argmin
            if x.shape[ax] == 0:
                return None
            return f(x, axis=ax)
        if c in ("float", "cplx") and k in ("add", "mul"):
            self.tag(f"reduce_{k}_float")
            if int(np.prod([x.shape[a] for a in axes])) > LONG_FLOAT_SUM:
                self.tag("long_float_sum")
        self.tag("reduce")
        dt = x.dtype
        init = {
            "add": 0, "mul": 1, "and": -1 if c == "sint" else (
                True if c == "bool" else np.iinfo(dt).max if c == "uint"
                else 0),
            "or": 0, "xor": 0,
        }.get(k)
        if k == "max":
            init = (-np.inf if c == "float" else False if c == "bool"
                    else np.iinfo(dt).min)
        elif k == "min":
            init = (np.inf if c == "float" else True if c == "bool"
                    else np.iinfo(dt).max)
        if k == "or" and c == "bool":
            init = False
        op = {"add": lax.add, "mul": lax.mul, "max": lax.max, "min": lax.min,
              "and": lax.bitwise_and, "or": lax.bitwise_or,
              "xor": lax.bitwise_xor}[k]
        return lax.reduce(x, np.array(init).astype(dt), op, axes)

    def g_cumsum(self):
        import jax.numpy as jnp
        x = self.pick(lambda v: v.ndim > 0 and dclass(v.dtype) in
                      ("sint", "uint", "float"))
        if x is None:
            return None
        ax = self.rng.randrange(x.ndim)
        self.tag("cumsum_float" if dclass(x.dtype) == "float" else "cumsum")
        self.log(f"cumsum {x.dtype}{list(x.shape)} axis {ax}")
        from jax import lax
        if self.rng.random() < 0.3:
            return lax.cummax(x, axis=ax)
        return jnp.cumsum(x, axis=ax).astype(x.dtype)

    def g_log_softmax(self):
        import jax
        x = self.pick(lambda v: v.ndim > 0 and dclass(v.dtype) == "float")
        if x is None:
            return None
        ax = self.rng.randrange(x.ndim)
        self.tag("log_softmax")
        if x.shape[ax] > LONG_FLOAT_SUM:
            self.tag("long_float_sum")
        self.log(f"log_softmax {x.dtype}{list(x.shape)} axis {ax}")
        f = self.rng.choice([jax.nn.log_softmax, jax.nn.softmax])
        return f(x, axis=ax)

    def g_row_norm(self):
        """A row program as models write them: a float value normalized
        over its last axis (masked softmax, layer norm, RMS norm) with a
        second operand of its shape and often another element size (a
        mask, quantized values) read in every pass. The CUDA row fusion
        caches both rows in shared memory, each with its own element size
        (1-byte rows once faulted there: a4ee8a0)."""
        import jax
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim > 0 and dclass(v.dtype) == "float"
                      and v.shape[-1] > 0)
        if x is None:
            return None
        same = [v for v in self.vals if v is not x and v.shape == x.shape
                and v.dtype.itemsize <= 2 and dclass(v.dtype) != "narrow"]
        if same and rng.random() < 0.8:
            m = rng.choice(same)
        else:
            mdt = jnp_dtype(rng.choice(["bool", "bool", "int8", "uint8",
                                        "bfloat16", "float16", "float32"]))
            m = self.operand(x.shape, mdt, avoid=x)
        kind = rng.choice(["masked_softmax", "layer_norm", "rms_norm"])
        self.log(f"{kind} {x.dtype}{list(x.shape)} with {m.dtype}")
        self.tag("log_softmax" if kind == "masked_softmax" else "rsqrt")
        self.tag("reduce_add_float")
        if x.shape[-1] > LONG_FLOAT_SUM:
            self.tag("long_float_sum")
        mf = m.astype(x.dtype)
        if kind == "masked_softmax":
            keep = m if m.dtype == jnp.bool_ else m != 0
            y = jnp.where(keep, x, -jnp.inf)
            return jax.nn.softmax(y, axis=-1) * mf
        y = x + mf if rng.random() < 0.5 else x * mf
        if kind == "layer_norm":
            mu = jnp.mean(y, -1, keepdims=True)
            y = y - mu
        ms = jnp.mean(y * y, -1, keepdims=True)
        return y * lax.rsqrt(ms + np.array(1e-5, x.dtype)) + mf

    def g_scan(self):
        """A scan over the leading axis: jax lowers it to a while loop
        whose body dynamic-slices xs and dynamic-update-slices the stacked
        ys (the pattern CUDA fuses as roots)."""
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: v.ndim >= 1 and dclass(v.dtype) in
                      ("sint", "uint", "float", "bool"))
        if x is None or x.shape[0] > 40:
            return None
        c = dclass(x.dtype)
        carry0 = self.operand(x.shape[1:], x.dtype)
        coef = self.scalar_const(x.dtype)
        ops = [lax.max, lax.min] if c == "bool" else \
            [lax.add, lax.sub, lax.max, lax.mul]
        f1, f2 = rng.choice(ops), rng.choice(ops)
        rev = rng.random() < 0.3
        unroll = rng.choice([1, 1, 2])

        def body(carry, row):
            new = f1(carry, row)
            return new, f2(new, lax.full_like(new, coef))
        self.tag("scan_float" if c == "float" else "scan")
        self.log(f"scan {x.dtype}{list(x.shape)} reverse={rev} "
                 f"unroll={unroll}")
        carry, ys = lax.scan(body, carry0, x, reverse=rev, unroll=unroll)
        self.vals.append(carry)
        return ys

    def g_chain(self):
        """Several element-wise ops on one value (a long fused body)."""
        v = None
        for _ in range(self.rng.randint(2, 5)):
            w = wchoice(self.rng, [("g_unary", 3), ("g_binary", 4),
                                   ("g_compare", 1), ("g_select", 1),
                                   ("g_convert", 1)])
            v = getattr(self, w)()
            if v is not None:
                self.vals.append(v)
        return None if v is None else self.vals.pop()

    def g_scalar_loop(self):
        """A fori_loop over scalar carries (jax's counted while): its body's
        ops fuse inside the loop; the trip count is a constant or a scalar
        argument clamped to [0, 40]."""
        import jax.numpy as jnp
        from jax import lax
        rng = self.rng
        cands = [v for v in self.vals if v.ndim == 0 and
                 dclass(v.dtype) in ("sint", "uint", "float", "bool")]
        if not cands:
            x = self.pick(lambda v: v.ndim > 0 and 0 not in v.shape and
                          dclass(v.dtype) in ("sint", "uint", "float"))
            if x is None:
                return None
            cands = [self.to_shape(x, ())]
        carry = tuple(rng.choice(cands) for _ in range(rng.randint(1, 3)))
        n_ints = [v for v in self.vals if v.ndim == 0 and
                  dclass(v.dtype) == "sint"]
        if n_ints and rng.random() < 0.6:
            n = jnp.clip(lax.convert_element_type(rng.choice(n_ints),
                                                  np.int32), 0, 40)
        else:
            n = rng.choice([0, 1, 3, 17])
        ops = [[rng.choice(["add", "mul", "max", "min", "sub", "iadd"])
                for _ in carry] for _ in range(2)]
        coefs = [self.scalar_const(c.dtype) for c in carry]

        def step(i, c):
            out = []
            for k, v in enumerate(c):
                o, o2 = ops[0][k], ops[1][k]
                w = c[(k + 1) % len(c)]
                w = lax.convert_element_type(w, v.dtype)
                if dclass(v.dtype) == "bool":
                    v = lax.bitwise_xor(v, w)
                    out.append(v)
                    continue
                f = {"add": lax.add, "mul": lax.mul, "max": lax.max,
                     "min": lax.min, "sub": lax.sub, "iadd": lax.add}
                v = f[o](v, w)
                if o2 == "iadd":
                    v = lax.add(v, lax.convert_element_type(i, v.dtype))
                else:
                    v = f[o2](v, coefs[k])
                out.append(v)
            return tuple(out)
        self.tag("scalar_loop")
        if any(dclass(c.dtype) == "float" for c in carry):
            self.tag("scan_float")
        self.log(f"fori_loop over {[str(c.dtype) for c in carry]}")
        res = lax.fori_loop(0, n, step, carry)
        self.vals.extend(res[:-1])
        return res[-1]

    def g_cond(self):
        """lax.cond on a scalar predicate: each branch's element-wise ops
        fuse inside its region."""
        from jax import lax
        rng = self.rng
        x = self.pick(lambda v: dclass(v.dtype) in ("sint", "uint", "float"))
        if x is None:
            return None
        p = self.pick(lambda v: v.ndim == 0 and v is not x)
        if p is None:
            return None
        if p.dtype != np.dtype(bool):
            p = lax.ne(p, self.scalar_const(p.dtype)) if \
                dclass(p.dtype) != "narrow" else lax.ne(
                    lax.convert_element_type(p, np.float32), np.float32(0))
        y = self.operand(x.shape, x.dtype, avoid=x)
        ops = [(rng.choice([lax.add, lax.mul, lax.max, lax.sub]),
                self.scalar_const(x.dtype)) for _ in range(3)]

        def branch(k):
            def f(a, b):
                f1, c1 = ops[k]
                f2, c2 = ops[2]
                return f2(f1(a, lax.full_like(a, c1)), b), f1(b, a)
            return f
        self.tag("cond")
        self.log(f"cond {x.dtype}{list(x.shape)}")
        r0, r1 = lax.cond(p, branch(0), branch(1), x, y)
        self.vals.append(r1)
        return r0

    OPS = [("g_unary", 14), ("g_chain", 6), ("g_scalar_loop", 1), ("g_cond", 1), ("g_binary", 16), ("g_compare", 4),
           ("g_select", 5), ("g_clamp", 2), ("g_convert", 6),
           ("g_bitcast", 2), ("g_broadcast", 6), ("g_reshape", 5),
           ("g_slice", 5), ("g_dynamic_slice", 5), ("g_dus", 5),
           ("g_transpose", 4), ("g_concat", 4), ("g_concat_many", 0.3), ("g_pad", 3), ("g_rev", 2),
           ("g_iota", 2), ("g_reduce", 5), ("g_cumsum", 1),
           ("g_log_softmax", 1), ("g_row_norm", 1.5), ("g_scan", 1),
           ("g_gather", 3),
           ("g_scatter", 2), ("g_sort", 2), ("g_while_data", 1),
           ("g_reduce_window", 2)]

    # -- the program ---------------------------------------------------------
    def make_inputs(self):
        rng = self.rng
        specs = []
        for _ in range(rng.randint(1, 3)):
            specs.append((self.shape(), self.dtype()))
        if self.max_elems >= 6000 and rng.random() < 0.15:
            # Rows as models hand them in: a float row and a mask or
            # quantized row of its shape, as arguments (g_row_norm reads
            # them; a computed mask would be recomputed inside the fusion
            # instead of read as a row).
            n = rng.choice([16, 32, 48, 64, 128, 256, 272, 512])
            shp = rng.choice([(3,), (5,), (2, 3), (7,)]) + (n,)
            specs.append((shp, jnp_dtype(rng.choice(
                ["float32", "float32", "bfloat16", "float16"]))))
            specs.append((shp, jnp_dtype(rng.choice(
                ["bool", "int8", "uint8"]))))
        for _ in range(wchoice(rng, [(0, 3), (1, 4), (2, 2)])):
            specs.append(((), jnp_dtype(rng.choice(
                ["int32", "int32", "int64", "uint32", "int8", "uint8"]))))
        self.inputs = specs
        return specs

    def build(self, *args):
        rng = self.rng
        self.vals = list(args)
        n = rng.randint(3, 14)
        guard = 0
        while len(self.vals) - len(args) < n and guard < 200:
            guard += 1
            name = wchoice(rng, self.OPS)
            v = getattr(self, name)()
            if v is None:
                continue
            if int(np.prod(v.shape, dtype=np.int64)) > 4 * self.max_elems:
                continue
            self.vals.append(v)
        made = self.vals[len(args):] or self.vals
        outs = [made[-1]]
        for v in made[:-1]:
            if rng.random() < 0.2 and len(outs) < 4:
                outs.append(v)
        if rng.random() < 0.05:
            outs.append(args[0])
        return tuple(outs)


def make_program(seed, big=False):
    """(jitted function, input ShapeDtypeStructs, Gen) of program `seed`."""
    import jax
    g = Gen(seed, big)
    specs = g.make_inputs()
    structs = [jax.ShapeDtypeStruct(s, d) for s, d in specs]

    def fn(*args):
        g2 = Gen(seed, big)
        g2.make_inputs()
        out = g2.build(*args)
        g.steps, g.ops = g2.steps, g2.ops
        return out
    return fn, structs, g


def lower_program(seed, big=False):
    import jax
    with jax.enable_x64(True):
        fn, structs, g = make_program(seed, big)
        lowered = jax.jit(fn).lower(*structs)
    return lowered, g


def write_programs(seeds, out, big=False, log=None):
    """Writes fz_<seed>.mlirbc for each seed and appends manifest lines.
    Returns (written, failed-to-lower)."""
    sys.path.insert(0, HERE)
    from gen_corpus import serialize
    import warnings
    warnings.simplefilter("ignore")
    ok, bad = 0, []
    lines = []
    for s in seeds:
        try:
            lowered, g = lower_program(s, big)
            art = serialize(lowered)
        except Exception as e:  # a generator bug: report, go on
            bad.append((s, f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        name = f"fz_{s}"
        with open(os.path.join(out, name + ".mlirbc"), "wb") as f:
            f.write(art)
        inexact = sorted(g.ops & INEXACT_OPS)
        lines.append(f"{name} {'inexact' if inexact else 'exact'} "
                     f"{','.join(inexact) or '-'} {','.join(sorted(g.ops))}\n")
        ok += 1
    with open(os.path.join(out, "manifest.txt"), "a") as f:
        f.writelines(lines)
    return ok, bad


def _gen_worker(a):
    seeds, out, big = a
    return write_programs(seeds, out, big)


def gen(seeds, out, big=False, jobs=1):
    os.makedirs(out, exist_ok=True)
    if jobs <= 1 or len(seeds) < 2 * jobs:
        return write_programs(seeds, out, big)
    import multiprocessing as mp
    chunks = [seeds[i::jobs] for i in range(jobs)]
    # Each worker appends its own manifest lines (one write per worker).
    with mp.get_context("spawn").Pool(jobs) as pool:
        res = pool.map(_gen_worker, [(c, out, big) for c in chunks])
    return sum(r[0] for r in res), [b for r in res for b in r[1]]


# ---------------------------------------------------------------------------
# Driver

PLANTS = ("sub_for_add", "index_off", "start_clamp", "iota_off")


def run_harness(harness, d, plant=None, extra_env=None, timeout=900):
    """Runs the C harness on directory d: (exit status, output, seconds).
    A crash or a timeout names the program it happened in (the harness's
    "@ NAME PHASE" trace lines)."""
    env = dict(os.environ)
    env["IRON_TEST_CORPUS_DIR"] = d
    env["IRON_TEST_TRACE"] = "1"
    env.pop("IRON_TEST_ONLY", None)
    if plant:
        env["IRON_TEST_PLANT"] = plant
    if extra_env:
        env.update(extra_env)
    t0 = time.time()
    try:
        p = subprocess.run([harness], env=env, cwd=d, capture_output=True,
                           text=True, timeout=timeout)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        def s(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else \
                (b or "")
        rc, text = "timeout", s(e.stdout) + s(e.stderr)
    return rc, text, time.time() - t0


def parse_report(text, rc=0):
    """FAIL lines and the summary line of the harness."""
    lines = text.splitlines()
    fails = [l for l in lines if l.startswith("FAIL ")]
    summ = [l for l in lines if l.startswith("fuzz programs")]
    if rc != 0 and not summ:  # died: the program it was in
        at = [l for l in lines if l.startswith("@ ")]
        if at:
            fails.append(f"FAIL {at[-1].split()[1]}: harness "
                         f"{'timed out' if rc == 'timeout' else f'exit {rc}'}"
                         f" in {at[-1].split()[2]}")
    return fails, (summ[0] if summ else "")


def _run_batch(args):
    """Generates one batch of programs and runs the harness on it, once
    per plant (None: no plant)."""
    bi, batch, base, harness, big, plants, env = args
    d = os.path.join(base, f"b{bi:04d}")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    ok, bad = write_programs(batch, d, big)
    runs = [(plant,) + run_harness(harness, d, plant, env) for plant in plants]
    return bi, d, ok, bad, runs


def _batches(a, seeds):
    """Batches of seeds: the given ones, then (with --minutes) more from
    where they end, for as long as the caller keeps asking."""
    for i in range(0, len(seeds), a.batch):
        yield seeds[i:i + a.batch]
    if a.minutes:
        nxt = a.seed + a.count
        while True:
            yield list(range(nxt, nxt + a.batch))
            nxt += a.batch


def cmd_run(a):
    harness = os.path.abspath(a.harness)
    seeds = list(range(a.seed, a.seed + a.count))
    fresh = [int.from_bytes(os.urandom(4), "little") | (1 << 32)
             for _ in range(a.fresh)]
    seeds += fresh
    if fresh:
        print(f"fresh seeds: {' '.join(map(str, fresh))}", flush=True)
    plants = [None]
    if a.plant:
        plants = list(PLANTS) if a.plant == "all" else a.plant.split(",")
        for p in plants:
            if p not in PLANTS:
                raise SystemExit(f"unknown plant {p}; known: {PLANTS}")
    keep = a.keep
    # Next to the harness (a build dir), not in /tmp: the emulation dlopens
    # the library it builds in the working directory, and /tmp may be
    # noexec.
    base = keep or tempfile.mkdtemp(prefix="iron_fuzz_",
                                    dir=os.path.dirname(harness))
    os.makedirs(base, exist_ok=True)
    programs = lower_failures = 0
    failures = []           # (plant, FAIL line)
    found = {p: 0 for p in plants}
    t0 = time.time()
    env = {"IRON_TEST_FUZZ_DEVICE": a.device}
    deadline = t0 + 60 * a.minutes if a.minutes else None
    nbatches = 0

    def work():
        nonlocal nbatches
        for bi, b in enumerate(_batches(a, seeds)):
            if deadline and time.time() > deadline:
                return
            nbatches += 1
            yield (bi, b, base, harness, a.big, plants, env)

    def results():
        if a.jobs <= 1:
            yield from map(_run_batch, work())
            return
        # A few batches in flight per worker, submitted as they finish (a
        # time budget stops submitting).
        from concurrent.futures import ProcessPoolExecutor, wait, \
            FIRST_COMPLETED
        import multiprocessing as mp
        with ProcessPoolExecutor(
                a.jobs, mp_context=mp.get_context("spawn")) as ex:
            todo = work()
            pending = set()
            for w in todo:
                pending.add(ex.submit(_run_batch, w))
                if len(pending) >= a.jobs:
                    break
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield f.result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        pending.add(ex.submit(_run_batch, nxt))

    for bi, d, ok, bad, runs in results():
        programs += ok
        lower_failures += len(bad)
        for s, msg in bad:
            print(f"generator: fz_{s} did not lower: {msg}")
        batch_failed = bool(bad)
        for plant, rc, text, dt in runs:
            fails, summ = parse_report(text, rc)
            if rc != 0 and not fails:
                fails = [f"FAIL {d}: harness exit {rc}: " + text[-2000:]]
            tag = f" [plant {plant}]" if plant else ""
            print(f"batch {bi}{tag}: {ok} programs, {dt:.1f}s: {summ}",
                  flush=True)
            found[plant] += len(fails)
            failures += [(plant, f) for f in fails]
            batch_failed = batch_failed or bool(fails)
            if a.verbose:
                print(text)
            elif fails and not plant:
                # The differences themselves (the harness prints them).
                print("\n".join(l for l in text.splitlines()
                                if not l.startswith(("FAIL ", "@ ")))[-6000:])
        if not keep and not batch_failed:
            shutil.rmtree(d, ignore_errors=True)
    if not keep:
        try:
            os.rmdir(base)  # empty unless a batch failed
        except OSError:
            print(f"failing batches kept under {base}")
    print(f"fuzz: {programs} programs in {nbatches} batches, "
          f"{len(failures)} failing, {lower_failures} did not lower, "
          f"{time.time() - t0:.1f}s")
    me = os.path.relpath(os.path.abspath(__file__))
    if a.expect_fail:
        missed = [p for p in plants if not found[p]]
        for p in plants:
            print(f"planted bug {p!r}: {found[p]} failing programs")
        if missed:
            print(f"planted bugs that went unnoticed: {missed}")
            return 1
        return 0
    for plant, f in failures:
        print(f)
        name = f.split()[1].rstrip(":")
        if name.startswith("fz_") and name[3:].isdigit():
            s = name[3:]
            print(f"  reproduce: python3 {me} run --harness {a.harness} "
                  f"--seed {s} --count 1 --keep /tmp/fz_{s}"
                  f"{' --big' if a.big else ''}"
                  f"\n  program:   python3 {me} show --seed {s}")
    if fresh and failures:
        print(f"(fresh seeds of this run: {' '.join(map(str, fresh))})")
    if lower_failures and not a.allow_lower_failures:
        return 1
    return 1 if failures else 0


def cmd_gen(a):
    seeds = list(range(a.seed, a.seed + a.count))
    t0 = time.time()
    ok, bad = gen(seeds, a.out, a.big, a.jobs)
    for s, msg in bad:
        print(f"generator: fz_{s} did not lower: {msg}")
    print(f"wrote {ok} programs to {a.out} ({len(bad)} did not lower) in "
          f"{time.time() - t0:.1f}s")
    return 1 if bad and not a.allow_lower_failures else 0


def special_inputs(structs, seed, k):
    """numpy inputs for the xla subcommand: k = 0 small values (scalar
    integers far out of range), k = 1 special values (as the C harness's
    seeds 1 and 3), k = 2 floats that are mostly denormals and zeros of
    both signs (XLA:CPU reads and writes denormals as zero)."""
    r = np.random.default_rng(seed * 7 + k)
    out = []
    fspecial = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.25, 65504,
                         1e10, -1e10, 2.0**31, -2.0**31 - 1, 9.3e18, 1e-3,
                         np.inf, -np.inf, np.nan, 3.4e38, 0.25, -0.75])
    for st in structs:
        dt = np.dtype(st.dtype)
        shape = st.shape
        c = dclass(dt)
        if c == "bool":
            v = r.integers(0, 2, shape).astype(bool)
        elif c in ("sint", "uint"):
            info = np.iinfo(dt)
            if len(shape) == 0:
                v = np.array(r.choice([-1000, -3, -1, 0, 1, 2, 5, 1000]))
                v = np.clip(v, info.min, info.max).astype(dt)
            elif k == 0:
                v = r.integers(max(info.min, -9), min(info.max, 12) + 1,
                               shape).astype(dt)
            else:
                pool = np.array([0, 1, 2, 7, 31, 32, 63, 64, info.max,
                                 info.max - 1, info.min, info.min + 1],
                                dtype=object)
                v = np.array(r.choice(pool, shape), dtype=object).astype(dt)
        elif c in ("float", "cplx"):
            if k == 0:
                v = (r.integers(-64, 65, shape) / 16.0)
            elif k == 2:  # denormals of the dtype, zeros, small values
                tiny = float(np.finfo(dt).tiny) if c == "float" else 1.2e-38
                v = r.choice(np.array([tiny / 4, -tiny / 8, tiny * 0.75,
                                       -tiny / 2, 0.0, -0.0, tiny, 1.0,
                                       -2.0, 0.5]), shape)
            else:
                v = r.choice(fspecial, shape)
            if c == "cplx":
                v = v + 1j * r.choice(fspecial if k else np.array([0.5, -1.0,
                                                                   0.0]),
                                      shape)
            with np.errstate(over="ignore", invalid="ignore"):
                v = np.asarray(v).astype(dt)
        else:  # narrow
            v = r.integers(0, 4, shape).astype(dt)
        out.append(np.asarray(v).reshape(shape))
    return out


def same_bits(a, b, tol):
    """Equal bits (NaNs aside), or within tol for inexact floats."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if dclass(a.dtype) == "narrow":  # one byte per element; compare values
        a, b = a.astype(np.float32), b.astype(np.float32)
    if a.dtype.kind in "fc" or str(a.dtype) == "bfloat16":
        if a.size == 0:
            return True
        x = a.astype(np.complex128 if a.dtype.kind == "c" else
                     np.float64).reshape(-1)
        y = b.astype(x.dtype).reshape(-1)
        nan = np.isnan(x) & np.isnan(y)
        eq = (a.reshape(-1).view(np.uint8).reshape(a.size, -1) ==
              b.reshape(-1).view(np.uint8).reshape(b.size, -1)).all(-1) | nan
        if tol and not eq.all():
            # As the C harness: relative 1e-9 (f64), 1e-4 (f32), 2e-2
            # (f16/bf16).
            rt = {8: 1e-9, 16: 1e-9, 4: 1e-4}.get(a.dtype.itemsize, 2e-2)
            if a.dtype.kind == "c" and a.dtype.itemsize == 8:
                rt = 1e-4
            with np.errstate(invalid="ignore", over="ignore"):
                close = np.isclose(x, y, rtol=rt, atol=1e-5, equal_nan=True)
            bad = ~(eq | close)
            return bad.sum() <= max(2, bad.size // 50)
        return bool(eq.all())
    return a.tobytes() == b.tobytes()


def cmd_xla(a):
    """iron's host device against XLA:CPU on the same programs (jax on
    both), bit for bit where the manifest says exact."""
    import jax
    import warnings
    warnings.simplefilter("ignore")
    cpu, iron = jax.devices("cpu")[0], jax.devices("iron")[0]
    bad = ran = skipped = 0
    t0 = time.time()
    for s in range(a.seed, a.seed + a.count):
        with jax.enable_x64(True):
            try:
                fn, structs, g = make_program(s, a.big)
                jax.jit(fn).lower(*structs)
            except Exception:
                skipped += 1
                continue
            inexact = g.ops & INEXACT_OPS
            tol = 1e-3 if inexact else 0
            # Denormal inputs (k = 2) only where every op is exact: XLA:CPU's
            # own pow/atan2/tanh/cbrt... give artifacts of their
            # approximations there (pow(-d, d) NaN, atan2(d, d) NaN,
            # cbrt(d) -5.6e-16; docs/jax-test-suite.md), not a contract.
            for k in range(2 if inexact else 3):
                args = special_inputs(structs, s, k)
                try:
                    want = jax.jit(fn)(*[jax.device_put(x, cpu)
                                         for x in args])
                except Exception:
                    skipped += 1
                    break
                try:
                    got = jax.jit(fn)(*[jax.device_put(x, iron)
                                        for x in args])
                    ok = all(same_bits(w, g_, tol)
                             for w, g_ in zip(want, got))
                    why = "differs"
                except Exception as e:
                    ok, why = False, f"{type(e).__name__}: {str(e)[:200]}"
                ran += 1
                if not ok:
                    bad += 1
                    print(f"FAIL fz_{s} (inputs {k}): iron host vs XLA:CPU "
                          f"{why}{' (inexact: ' + ','.join(sorted(inexact)) + ')' if inexact else ''}",
                          flush=True)
                    break
    print(f"xla: {ran} runs of {a.count} programs, {bad} differ, {skipped} "
          f"skipped, {time.time() - t0:.1f}s")
    return 1 if bad else 0


def cmd_show(a):
    lowered, g = lower_program(a.seed, a.big)
    print(f"# fz_{a.seed}: inputs {[(s, str(d)) for s, d in g.inputs]}")
    for s in g.steps:
        print(f"#   {s}")
    print(lowered.as_text())
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--count", type=int, default=100)
    g.add_argument("--out", required=True)
    g.add_argument("--big", action="store_true")
    g.add_argument("--jobs", type=int, default=1)
    g.add_argument("--allow-lower-failures", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("--harness", required=True,
                   help="build/tests/test_cuda_fuzz_programs")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--count", type=int, default=100)
    r.add_argument("--fresh", type=int, default=0,
                   help="also this many programs of fresh random seeds")
    r.add_argument("--batch", type=int, default=150)
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--big", action="store_true")
    r.add_argument("--minutes", type=float, default=0,
                   help="keep generating batches (after --count) until "
                   "this many minutes have passed")
    r.add_argument("--device", choices=("emu", "cuda"), default="emu",
                   help="the CUDA side: the CPU emulation or a real GPU")
    r.add_argument("--plant", help="plant a bug: one of %s, a comma "
                   "list, or all (each run on the same programs)" %
                   ", ".join(PLANTS))
    r.add_argument("--expect-fail", action="store_true",
                   help="succeed only if the (planted) bug is found")
    r.add_argument("--keep", help="keep the programs under this directory")
    r.add_argument("--verbose", action="store_true")
    r.add_argument("--allow-lower-failures", action="store_true")
    x = sub.add_parser("xla", help="iron's host device vs XLA:CPU through "
                       "jax (needs the plugin: IRON_PLUGIN_PATH)")
    x.add_argument("--seed", type=int, default=1)
    x.add_argument("--count", type=int, default=100)
    x.add_argument("--big", action="store_true")
    s = sub.add_parser("show")
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--big", action="store_true")
    for p in (g, r, s, x):
        p.add_argument("--skip-without-jax", action="store_true",
                       help="exit 77 (ctest's skip) when jax is missing")
    a = ap.parse_args()
    if a.skip_without_jax:
        try:
            import jax  # noqa: F401
        except ImportError:
            print("jax is not installed: skipped")
            return 77
    return {"gen": cmd_gen, "run": cmd_run, "show": cmd_show,
            "xla": cmd_xla}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
