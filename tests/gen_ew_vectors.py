#!/usr/bin/env python3
"""Generates tests/data/ew/vectors.bin (and with --narrow,
vectors_narrow.bin: converts from/to the f8/f6/f4/s4/u4/s2/u2 types): element-wise op expectations from
jax's own CPU backend (XLA:CPU), the ground truth for the host kernels.

Each case is one StableHLO op on rank-1 tensors, compiled as raw StableHLO
text by XLA:CPU (so we test the op itself, not jax's lowering of it). A
dtype combination the StableHLO verifier rejects is not written (the kernel
may refuse it). Run: python3 tests/gen_ew_vectors.py [--narrow]
Format (little endian), read by tests/c/test_host_elementwise.c:
  "IEWV" u32 version=1 u32 num_cases, then per case:
  str op (vhlo base name), u8 num_inputs, str dtype per input, str out dtype,
  i8 comparison_direction, i8 compare_type (-1: none), u8 tolerance class
  (0 exact, 1 approximate), u32 n, then each input's n elements, then the
  output's n elements, in host storage format. str = u8 length + bytes.
"""
import os
import struct
import sys

import numpy as np
import ml_dtypes
import jax
jax.config.update("jax_enable_x64", True)
from jax._src import xla_bridge as xb
from jax._src.lib import xla_client as xc

BE = xb.get_backend("cpu")
DEV = BE.local_devices()[0]

DT = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32,
    "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
    "ui64": np.uint64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "f32": np.float32, "f64": np.float64, "complex<f32>": np.complex64,
    "complex<f64>": np.complex128,
}
INTS = ["i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
COMPLEX = ["complex<f32>", "complex<f64>"]
ALL = ["i1"] + INTS + FLOATS + COMPLEX
# Narrow types (one element per byte, low bits): convert cases only, in
# vectors_narrow.bin.
NARROW = {
    "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz,
    "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "f8E4M3": ml_dtypes.float8_e4m3,
    "f8E3M4": ml_dtypes.float8_e3m4, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
    "f4E2M1FN": ml_dtypes.float4_e2m1fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn, "i4": ml_dtypes.int4,
    "ui4": ml_dtypes.uint4, "i2": ml_dtypes.int2, "ui2": ml_dtypes.uint2,
}
DT.update(NARROW)
NARROW_BITS = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "i4": 4,
               "ui4": 4, "i2": 2, "ui2": 2}


def narrow_all(dt):
    """Every value of a narrow dtype (all bit patterns)."""
    bits = NARROW_BITS.get(dt, 8)
    return np.arange(1 << bits, dtype=np.uint8).view(DT[dt])


def narrow_targets(dt, src):
    """Values of float dtype src around every representable value of the
    narrow float dtype dt: the values, midpoints, and just off midpoints."""
    v = narrow_all(dt).astype(np.float64)
    v = np.unique(v[np.isfinite(v)])
    mids = (v[1:] + v[:-1]) / 2
    top = v[-1] + (v[-1] - v[-2])
    extra = [top, top / 2 + v[-1] / 2, v[-1] * 1.01, v[-1] * 4, 1e30,
             np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30]
    allv = np.concatenate([v, mids, mids * (1 + 1e-6), mids * (1 - 1e-6),
                           -mids, np.array(extra)])
    with np.errstate(all="ignore"):
        return uniq(allv.astype(DT[src]))
PART = {"complex<f32>": "f32", "complex<f64>": "f64"}


def uniq(arr):
    out, seen = [], set()
    for v in arr:
        k = v.tobytes()
        if k not in seen:
            seen.add(k)
            out.append(v)
    return np.array(out, dtype=arr.dtype)


def values(dt, binary):
    """Edge values of dtype dt (a subset when used in a cross product)."""
    np_dt = np.dtype(DT[dt])
    if dt == "i1":
        return np.array([False, True])
    if dt in INTS:
        info = np.iinfo(np_dt)
        bw = info.bits
        if binary:
            vals = [0, 1, 2, 3, 7, -1, -2, -7, bw, bw + 1, info.max, info.min]
        else:
            # 2**24 + 2**16 + 1 and 2**53 + 2**29 + 1 tell direct rounding
            # to bf16/f32 from rounding through f32/f64 first.
            vals = [0, 1, 2, 3, 7, 8, 100, -1, -2, -7, -100, bw - 1, bw,
                    info.max, info.min, info.max - 1, info.min + 1,
                    0x55, 0x5555 % (info.max + 1), 2 ** 24 + 2 ** 16 + 1,
                    2 ** 53 + 2 ** 29 + 1, -(2 ** 24 + 2 ** 16 + 1),
                    65519, 65520, 2 ** 31 + 2 ** 7 + 1]
        out = []
        for v in vals:
            if info.min <= v <= info.max:
                out.append(v)
            elif v < 0 and v + (1 << bw) >= 0:  # unsigned: two's complement
                out.append(v + (1 << bw))
        return uniq(np.array(out, dtype=np_dt))
    if dt in FLOATS:
        if binary:
            vals = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, 0.5, np.inf,
                    -np.inf, np.nan, 7.0, -7.0, 1e30]
        else:
            vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5,
                    0.7, -1.7, 1e-3, 100.0, -100.0, 20.0, -20.0, 88.5,
                    -104.0, 1000.0, 3e9, -3e9, 2.0 ** 31, 2.0 ** 63, 1e20,
                    -1e20, 65519.0, 65520.0, 70000.0, 1e-8, 6e-5, 3e-39,
                    1e-300, 1e300, np.inf, -np.inf, np.nan, -np.nan,
                    # double rounding f64 -> f32 -> f16/bf16
                    1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40,
                    255.5, -128.5, 127.5, 4294967295.5, 18446744073709551616.0,
                    -9223372036854775808.0, 9.223372036854775e18]
        arr = np.array(vals, dtype=np.float64)
        with np.errstate(all="ignore"):
            return uniq(arr.astype(np_dt))
    # complex
    parts = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan]
    if binary:
        inf, nan = np.inf, np.nan
        return np.array([complex(1, 0), complex(0, 1), complex(0, 0),
                         complex(-2.5, 0.5), complex(inf, 0), complex(0, inf),
                         complex(nan, 0), complex(inf, inf), complex(1, nan),
                         complex(-0.0, -1), complex(3, -4),
                         complex(1e30, 1e30)], dtype=np_dt)
    out = [complex(r, i) for r in parts for i in parts]
    if not binary:
        out += [complex(1e20, 1), complex(-1e-20, 3e-30), complex(100, 50)]
    return np.array(out, dtype=np_dt)


def module(op, in_dts, out_dt, n, attrs=""):
    args = ", ".join("%%a%d: tensor<%dx%s>" % (i, n, d)
                     for i, d in enumerate(in_dts))
    operands = ", ".join("%%a%d" % i for i in range(len(in_dts)))
    in_types = ", ".join("tensor<%dx%s>" % (n, d) for d in in_dts)
    return ("module @m {\n  func.func public @main(%s) -> tensor<%dx%s> {\n"
            "    %%0 = \"stablehlo.%s\"(%s) %s : (%s) -> tensor<%dx%s>\n"
            "    return %%0 : tensor<%dx%s>\n  }\n}\n" %
            (args, n, out_dt, op, operands, attrs, in_types, n, out_dt, n,
             out_dt))


def run(op, in_dts, out_dt, inputs, attrs=""):
    if os.environ.get("EWV_TRACE"):
        print("run", op, in_dts, out_dt, file=sys.stderr, flush=True)
    n = len(inputs[0])
    text = module(op, in_dts, out_dt, n, attrs)
    try:
        exe = BE.compile_and_load(text, xc.DeviceList((DEV,)),
                                  xc.CompileOptions())
    except Exception:  # rejected by the verifier: not a legal combination
        return None
    try:
        bufs = [jax.device_put(x, DEV) for x in inputs]
        out = exe.execute(bufs)
        return np.asarray(out[0])
    except Exception:  # dtype jax cannot transfer (f6 types)
        return None


CASES = []


def s(text):
    b = text.encode()
    return struct.pack("<B", len(b)) + b


def add_case(op, in_dts, out_dt, inputs, attrs="", cmp=(-1, -1), tol=0):
    res = run(op, in_dts, out_dt, inputs, attrs)
    if res is None:
        return False
    n = len(inputs[0])
    rec = s(op) + struct.pack("<B", len(in_dts))
    for d in in_dts:
        rec += s(d)
    rec += s(out_dt) + struct.pack("<bbBI", cmp[0], cmp[1], tol, n)
    for x, d in zip(inputs, in_dts):
        rec += np.ascontiguousarray(x, dtype=DT[d]).tobytes()
    rec += np.ascontiguousarray(res, dtype=DT[out_dt]).tobytes()
    CASES.append(rec)
    return True


UNARY_EXACT = ["abs", "negate", "not", "sign", "floor", "ceil",
               "round_nearest_afz", "round_nearest_even", "popcnt",
               "count_leading_zeros", "real", "imag", "is_finite", "sqrt"]
UNARY_APPROX = ["exponential", "exponential_minus_one", "log",
                "log_plus_one", "logistic", "rsqrt", "cbrt", "sine",
                "cosine", "tan", "tanh"]
BINARY_EXACT = ["add", "subtract", "multiply", "divide", "remainder",
                "maximum", "minimum", "and", "or", "xor", "shift_left",
                "shift_right_arithmetic", "shift_right_logical"]
BINARY_APPROX = ["power", "atan2"]
CMP_DIRS = ["EQ", "NE", "GE", "GT", "LE", "LT"]
CMP_TYPES = {"FLOAT": 1, "TOTALORDER": 2, "SIGNED": 3, "UNSIGNED": 4}


def write(path):
    with open(path, "wb") as f:
        f.write(b"IEWV" + struct.pack("<II", 1, len(CASES)))
        for rec in CASES:
            f.write(rec)
    print("%d cases, %d bytes -> %s" % (len(CASES), os.path.getsize(path),
                                        path))


def main_narrow(out_path):
    CASES.clear()
    skipped = []
    for nd in NARROW:
        is_float = nd.startswith("f")
        for other in ALL:
            if not add_case("convert", [nd], other, [narrow_all(nd)]):
                skipped.append(("convert->" + other, nd))
            if other in FLOATS and is_float:
                src = narrow_targets(nd, other)
            else:
                src = values(other, False)
            if not add_case("convert", [other], nd, [src]):
                skipped.append(("convert->" + nd, other))
    write(out_path)
    print("rejected (narrow):", skipped, file=sys.stderr)


def main():
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                        "ew")
    if len(sys.argv) > 1 and sys.argv[1] == "--narrow":
        main_narrow(os.path.join(data, "vectors_narrow.bin"))
        return
    out_path = os.path.join(data, "vectors.bin")
    skipped = []
    for dt in ALL:
        u = values(dt, False)
        a = values(dt, True)
        x = np.repeat(a, len(a))
        y = np.tile(a, len(a))
        for op in UNARY_EXACT + UNARY_APPROX:
            out_dt = dt
            if op in ("abs", "real", "imag") and dt in COMPLEX:
                out_dt = PART[dt]
            if op == "is_finite":
                out_dt = "i1"
            # complex sqrt is approximate (not a correctly rounded op).
            tol = 0 if op in UNARY_EXACT and not (
                dt in COMPLEX and op in ("sqrt", "sign", "abs")) else 1
            if not add_case(op, [dt], out_dt, [u], tol=tol):
                skipped.append((op, dt))
        for op in BINARY_EXACT + BINARY_APPROX:
            if dt in COMPLEX and op == "remainder":
                continue  # crashes XLA:CPU (segfault in compile); refused
            tol = 0 if op in BINARY_EXACT else 1
            if dt in COMPLEX and op in ("multiply", "divide"):
                tol = 1
            if not add_case(op, [dt, dt], dt, [x, y], tol=tol):
                skipped.append((op, dt))
        if dt in ("f32", "f64"):
            cdt = "complex<%s>" % dt
            add_case("complex", [dt, dt], cdt, [x, y])
        # compare
        types = []
        if dt == "i1":
            types = ["UNSIGNED"]
        elif dt in INTS:
            types = ["UNSIGNED" if dt.startswith("ui") else "SIGNED"]
        elif dt in FLOATS:
            types = ["FLOAT", "TOTALORDER"]
        else:
            types = ["FLOAT"]
        for t in types:
            for di, d in enumerate(CMP_DIRS):
                attrs = ("{comparison_direction = #stablehlo<comparison_direction %s>,"
                         " compare_type = #stablehlo<comparison_type %s>}" % (d, t))
                if not add_case("compare", [dt, dt], "i1", [x, y], attrs,
                                cmp=(di, CMP_TYPES[t])):
                    skipped.append(("compare " + d + " " + t, dt))
        # select with a pred vector
        p = (np.arange(len(x)) % 3 == 0)
        add_case("select", ["i1", dt, dt], dt, [p, x, y])
        # clamp(min, x, max)
        if dt != "i1":
            lo = np.repeat(a, len(a))
            hi = np.tile(a, len(a))
            xs = np.resize(a[::-1], len(lo))
            if not add_case("clamp", [dt, dt, dt], dt, [lo, xs, hi]):
                skipped.append(("clamp", dt))
        # convert to every dtype
        for to in ALL:
            if not add_case("convert", [dt], to, [u]):
                skipped.append(("convert->" + to, dt))
    write(out_path)
    print("rejected by StableHLO (not written):", file=sys.stderr)
    for op, dt in skipped:
        print("  %s %s" % (op, dt), file=sys.stderr)


if __name__ == "__main__":
    main()
