"""Probes of GPU-only miscompiles (sixteenth session), each a few ways of
writing one expression, compiled with the machine's NVRTC (optimized and
-G) and run on the GPU through the driver API (ctypes; no iron involved):

- neg16: a 16-bit integer negation (neg.s16 in the PTX, which is right)
  whose result later goes through a sign extension (cvt.s32.s16: division,
  arithmetic shift, widening convert, compare) came out +32768 at
  x = -32768 when optimized (fz_26297024).
- minneg: a min (max) reduction of negated int32 loads, unrolled by 8 as
  iron's reduce kernels are; ptxas forms three-input VIMNMX3 and, by the
  SASS, feeds one load of each un-negated (fz_26298356: |min(-x)| gave
  |min(x)|). Ordinary values in [-20, 20], so min(-x) != -min(x).
- then the neg16 expression through XLA:GPU, where jax has a cuda backend.

Usage (GPU machine): python3 scripts/debug/ptxas_probe.py
"""
import ctypes
import glob
import os
import sys

import numpy as np

VARIANTS = {
    # What the prelude's iron_ineg compiles to today.
    "plain": "return (T)(U)(0u - (unsigned)(U)x);",
    # The negation as inline PTX, 16-bit.
    "asm_neg16": 'T r; asm("neg.s16 %0, %1;" : "=h"(r) : "h"(x)); return r;',
    # The negation as inline PTX in 32 bits, truncated in the asm.
    "asm_neg32": ('T r; asm("{ .reg .s32 t; cvt.s32.s16 t, %1; neg.s32 t, t; '
                  'cvt.u16.u32 %0, t; }" : "=h"(r) : "h"(x)); return r;'),
    # 32-bit arithmetic behind an empty asm (optimization barrier).
    "barrier32": ("unsigned r = 0u - (unsigned)(U)x; asm volatile(\"\" : \"+r\"(r)); "
                  "return (T)(U)r;"),
    # Subtraction from zero as inline PTX sub.s16.
    "asm_sub16": 'T r; asm("sub.s16 %0, 0, %1;" : "=h"(r) : "h"(x)); return r;',
    # ~x + 1 with the not behind a barrier.
    "not_plus1": ("unsigned short n = (unsigned short)~(U)x; asm volatile(\"\" : \"+h\"(n)); "
                  "return (T)(U)(n + 1u);"),
}

SRC = r"""
typedef short T; typedef unsigned short U;
__device__ __forceinline__ T neg_(T x) { BODY }
struct __align__(16) v8 { T v[8]; };
extern "C" __global__ void probe(const T *in, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i * 8 >= n) return;
  v8 a = ((const v8 *)in)[i];
  #pragma unroll
  for (int k = 0; k < 8; ++k) {
    T x = a.v[k];
    T v = neg_(x);
    T m = x < v ? x : v;
    T d = m == 0 ? (T)-1 : (m == (T)-1 ? neg_(v) : (T)(v / m));
    int j = i * 8 + k;
    out[5 * j + 0] = (int)v;
    out[5 * j + 1] = (int)(T)(v >> 1);
    out[5 * j + 2] = (int)d;
    out[5 * j + 3] = (int)(v < x);
    out[5 * j + 4] = (int)(float)v;
  }
}
"""


def find_lib(pattern_list):
    for pat in pattern_list:
        for p in sorted(glob.glob(pat), reverse=True):
            if "stubs" not in p:
                return p
    return None


def main():
    nvrtc_path = find_lib(["/usr/local/cuda*/targets/*/lib/libnvrtc.so.*",
                           "/usr/local/cuda*/lib64/libnvrtc.so.*",
                           "/usr/lib/x86_64-linux-gnu/libnvrtc.so.*"] +
                          [os.path.join(p, "nvidia/*/lib/libnvrtc.so.*")
                           for p in sys.path if p])
    nvrtc = ctypes.CDLL(nvrtc_path)
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    print(f"NVRTC {major.value}.{minor.value} ({nvrtc_path})")
    print("== neg16")
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0
    dev = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    cu.cuCtxSetCurrent(ctx)
    xs = np.array([-32768, -32767, -1, 0, 1, 32767, 16384, -16384] * 32,
                  dtype=np.int16)
    n = xs.size
    w = xs.astype(np.int64)
    v = ((-w + 32768) % 65536 - 32768)
    m = np.minimum(w, v)
    with np.errstate(all="ignore"):
        d = np.where(m == 0, -1, np.where(m == -1, ((-v + 32768) % 65536 - 32768),
                                          np.trunc(v / np.where(m == 0, 1, m))))
    want = np.stack([v, v >> 1, d, (v < w).astype(int), v], 1).astype(np.int32)
    din = ctypes.c_uint64()
    dout = ctypes.c_uint64()
    cu.cuMemAlloc_v2(ctypes.byref(din), ctypes.c_size_t(xs.nbytes))
    cu.cuMemAlloc_v2(ctypes.byref(dout), ctypes.c_size_t(n * 5 * 4))
    cu.cuMemcpyHtoD_v2(din, xs.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(xs.nbytes))
    for opt in ("", "-G"):
        for name, body in VARIANTS.items():
            fn, mod, prog = build(nvrtc, cu, SRC.replace("BODY", body), opt)
            if fn is None:
                print(f"{name:10s} {opt or '-O3':4s} compile failed: {compile_log(nvrtc, prog)}")
                continue
            a_in, a_out, a_n = ctypes.c_uint64(din.value), ctypes.c_uint64(dout.value), ctypes.c_int(n)
            launch(cu, fn, (a_in, a_out, a_n), 1, 64)
            got = np.zeros((n, 5), np.int32)
            cu.cuMemcpyDtoH_v2(got.ctypes.data_as(ctypes.c_void_p), dout, ctypes.c_size_t(got.nbytes))
            bad = np.flatnonzero((got != want).any(1))
            cols = sorted(set(np.nonzero(got != want)[1].tolist()))
            what = ["v", "v>>1", "div", "lt", "float"]
            print(f"{name:10s} {opt or '-O3':4s} {'ok' if bad.size == 0 else 'WRONG'}"
                  + (f": {bad.size} elements, x={sorted(set(xs[bad].tolist()))}, "
                     f"in {[what[c] for c in cols]}; e.g. got {got[bad[0]].tolist()} "
                     f"want {want[bad[0]].tolist()}" if bad.size else ""))
            cu.cuModuleUnload(mod)
            nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return nvrtc, cu


MINNEG_VARIANTS = {
    "plain_min": ("int n = -v;", "acc = acc < n ? acc : n;", "0x7fffffff"),
    "plain_max": ("int n = -v;", "acc = acc > n ? acc : n;", "-2147483647 - 1"),
    "plain_abs_min": ("int n = v < 0 ? -v : v;", "acc = acc < n ? acc : n;",
                      "0x7fffffff"),
    "not_add_min": ('int n; asm("{ not.b32 %0, %1; add.u32 %0, %0, 1; }" '
                    ': "=r"(n) : "r"(v));', "acc = acc < n ? acc : n;",
                    "0x7fffffff"),
    "not_add_max": ('int n; asm("{ not.b32 %0, %1; add.u32 %0, %0, 1; }" '
                    ': "=r"(n) : "r"(v));', "acc = acc > n ? acc : n;",
                    "-2147483647 - 1"),
}

MINNEG_SRC = r"""
extern "C" __global__ void probe(const int *in, int *out, int m) {
  int acc = INIT;
  #pragma unroll 8
  for (int i = threadIdx.x; i < m; i += 256) { int v = in[i]; NEG COMBINE }
  out[threadIdx.x] = acc;
}
"""


def minneg(nvrtc, cu):
    rng = np.random.default_rng(0)
    xs = rng.integers(-20, 21, 256 * 40).astype(np.int32)
    xs[123] = -15_000  # min(-x) = -20, -min(x) = 15000
    n = xs.size
    din, dout = ctypes.c_uint64(), ctypes.c_uint64()
    cu.cuMemAlloc_v2(ctypes.byref(din), ctypes.c_size_t(xs.nbytes))
    cu.cuMemAlloc_v2(ctypes.byref(dout), ctypes.c_size_t(256 * 4))
    cu.cuMemcpyHtoD_v2(din, xs.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(xs.nbytes))
    w = xs.astype(np.int64)
    for opt in ("", "-G"):
        for name, (neg, comb, init) in MINNEG_VARIANTS.items():
            src = MINNEG_SRC.replace("INIT", init).replace("NEG", neg).replace(
                "COMBINE", comb)
            fn, mod, prog = build(nvrtc, cu, src, opt)
            if fn is None:
                print(f"{name:14s} {opt or '-O3':4s} compile failed: {compile_log(nvrtc, prog)}")
                continue
            a_in, a_out, a_n = ctypes.c_uint64(din.value), ctypes.c_uint64(dout.value), ctypes.c_int(n)
            launch(cu, fn, (a_in, a_out, a_n), 1, 256)
            got = np.zeros(256, np.int32)
            cu.cuMemcpyDtoH_v2(got.ctypes.data_as(ctypes.c_void_p), dout, ctypes.c_size_t(got.nbytes))
            vals = np.abs(w) if "abs" in name else -w
            want = vals.min() if "min" in name else vals.max()
            res = got.min() if "min" in name else got.max()
            print(f"{name:14s} {opt or '-O3':4s} {'ok' if res == want else 'WRONG'}: "
                  f"{res} (want {want})")
            cu.cuModuleUnload(mod)
            nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_log(nvrtc, prog):
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.value.decode()[:300]


def build(nvrtc, cu, src, opt):
    """(function, module, program) of `probe` in src, compiled as iron does
    (sm_90a, -ftz, no FMA contraction) plus opt; function None when NVRTC
    refuses it."""
    prog = ctypes.c_void_p()
    nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"probe.cu", 0, None, None)
    opts = [b"--gpu-architecture=sm_90a", b"-default-device", b"-std=c++17",
            b"-ftz=true", b"-fmad=false"] + ([opt.encode()] if opt else [])
    arr = (ctypes.c_char_p * len(opts))(*opts)
    if nvrtc.nvrtcCompileProgram(prog, len(opts), arr):
        return None, None, prog
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    assert cu.cuModuleLoadData(ctypes.byref(mod), cubin) == 0
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"probe") == 0
    return fn, mod, prog


def launch(cu, fn, vals, grid, block):
    args = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p)
                                           for v in vals])
    assert cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, None, args, None) == 0
    assert cu.cuCtxSynchronize() == 0


def xla_gpu():
    # The same expression through XLA:GPU (its own PTX, the same ptxas).
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
        dev = jax.devices("cuda")[0]
    except Exception as e:  # noqa: BLE001
        print("XLA:GPU not available:", e)
        return
    x = np.array([-32768, -32767, -1, 1, 32767] * 8, np.int16)
    f = jax.jit(lambda x: (lax.div(-x, lax.min(-x, x)),
                           lax.convert_element_type(-x, np.int32),
                           lax.shift_right_arithmetic(-x, lax.full_like(x, 1))))
    got = [np.asarray(v)[:5].tolist() for v in f(jax.device_put(x, dev))]
    r = np.random.default_rng(0).integers(-20, 21, 1 << 20).astype(np.int32)
    r[12345] = -15_000
    g = jax.jit(lambda v: (jnp.min(-v), jnp.max(-v)))
    print("XLA:GPU int32 min(-x), max(-x):",
          [int(t) for t in g(jax.device_put(r, dev))],
          "(want", int((-r).min()), int((-r).max()), ")")
    print("XLA:GPU div, to_i32, shr at x =", x[:5].tolist(), ":", got,
          "(two's complement: [1, 1, 1, 1, 1], [-32768, 32767, 1, -1, -32767],"
          " [-16384, 16383, 0, -1, -16384])")


if __name__ == "__main__":
    nvrtc_lib, cu_lib = main()
    print("== minneg")
    minneg(nvrtc_lib, cu_lib)
    xla_gpu()
