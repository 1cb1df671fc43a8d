#!/usr/bin/env python3
"""GPU benchmarks: iron-cuda vs XLA:GPU (jax-cuda) vs PyTorch, one command.

    python3 bench/gpu_bench.py [--steps 20] [--rounds 3] [--only a,b] [--json out]

Each (benchmark, framework) runs in its own process (`--worker`), so the
frameworks never share a CUDA context; the driver interleaves them round by
round (iron, xla, torch, iron, ...) and reports, per benchmark, the median
over all timed steps of all rounds. Every step is timed to completion
(block_until_ready / torch.cuda.synchronize). Losses of iron and XLA are
compared (same initial parameters and data: both are JAX programs).

Benchmarks (f32 training steps: forward + backward + AdamW):
  transformer_d256: d=256, 4 layers, T=256, batch 32, 4 heads, vocab 256
  transformer_d512: d=512, 4 layers, T=256, batch 64, 8 heads, vocab 256
  gru256:           GRU, hidden 256, input 256, T=256, batch 256 (lax.scan;
                    torch uses cuDNN nn.GRU)
and micro benchmarks: tiny (x*2+1 on 4 floats, round trip), matmul
(4096^3 f32), elementwise (tanh(x)*y+1 on 64M f32).

The iron worker runs with JAX_PLATFORMS=iron and IRON_DEVICE=cuda (so a
missing CUDA device fails loudly instead of timing the host).

--trace N: after the timed steps each worker runs N more steps under a
CUPTI activity trace (bench/kernel_trace.c, built here against this
machine's CUPTI) and reports, per step, the kernels and copies the GPU ran,
their summed time, the time the GPU was busy (union of their intervals)
and the wall time of the traced step; wall minus busy is the time the GPU
waited for the host. The same instrument measures all three frameworks.
Tracing adds a little host time per launch: wall times of traced steps are
not the benchmark's timings.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BENCHES = ["tiny", "elementwise", "matmul", "transformer_d256",
           "transformer_d512", "gru256"]
FRAMEWORKS = ["iron", "xla", "torch"]

TRANSFORMERS = {
    "transformer_d256": dict(d=256, layers=4, T=256, B=32, heads=4, vocab=256),
    "transformer_d512": dict(d=512, layers=4, T=256, B=64, heads=8, vocab=256),
}
GRU = dict(H=256, I=256, T=256, B=256)


# --------------------------------------------------------------------------
# Kernel trace (--trace)

KT_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ironjax_kernel_trace")


def _find(patterns):
    import glob
    for pat in patterns:
        hits = sorted(glob.glob(pat, recursive=True))
        if hits:
            return hits[0]
    return None


def build_kernel_trace():
    """Builds bench/kernel_trace.c against this machine's CUPTI; returns the
    (libcupti, libkt) paths. Raises with what is missing."""
    import site
    sp = site.getsitepackages() + [site.getusersitepackages()]
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    lib = _find([f"{d}/nvidia/**/libcupti.so*" for d in sp] +
                [f"{cuda}/extras/CUPTI/lib64/libcupti.so*",
                 f"{cuda}/lib64/libcupti.so*", f"{cuda}/lib/libcupti.so*",
                 f"{cuda}/targets/*/lib/libcupti.so*"])
    hdr = _find([f"{cuda}/include/cupti.h", f"{cuda}/extras/CUPTI/include/cupti.h",
                 f"{cuda}/targets/*/include/cupti.h"] +
                [f"{d}/nvidia/**/include/cupti.h" for d in sp])
    cuda_h = _find([f"{cuda}/include/cuda.h", f"{cuda}/targets/*/include/cuda.h"])
    if not lib or not hdr or not cuda_h:
        raise RuntimeError(f"kernel trace: CUPTI not found (lib {lib}, "
                           f"cupti.h {hdr}, cuda.h {cuda_h})")
    os.makedirs(KT_DIR, exist_ok=True)
    out = os.path.join(KT_DIR, "libkernel_trace.so")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_trace.c")
    cmd = ["gcc", "-std=c17", "-O2", "-shared", "-fPIC", src,
           "-I", os.path.dirname(hdr), "-I", os.path.dirname(cuda_h),
           lib, "-Wl,-rpath," + os.path.dirname(lib), "-o", out]
    subprocess.run(cmd, check=True)
    with open(os.path.join(KT_DIR, "libs"), "w") as fh:
        fh.write(lib + "\n" + out + "\n")
    return lib, out


def kernel_kind(name):
    """A kernel's family for the trace summary: library convolutions and
    GEMMs, iron's generated kernels by their name's stem (iron_reduce_...,
    iron_ew_...), XLA's fusions by their kind (loop_/input_ ...)."""
    low = name.lower()
    if any(t in low for t in ("fprop", "dgrad", "wgrad", "conv", "xmma", "cutlass",
                              "cudnn", "engine")):
        return "conv/cudnn" if "gemm" not in low or "implicit" in low or "conv" in low \
            else "gemm"
    if "gemm" in low or "cublas" in low or low.startswith("sm90_") or low.startswith("nvjet"):
        return "gemm"
    if name.startswith("iron_"):
        return "_".join(name.split("_")[:2])
    for k in ("loop_", "input_", "wrapped_", "transpose_", "copy_", "reduce"):
        if k in low:
            return "xla " + k.strip("_")
    return name.split("(")[0][:30]


def kernel_trace(fn, sync, n):
    """Runs fn(); sync() n times under the trace; returns per-step medians
    and the kernels that took the most time."""
    import ctypes
    with open(os.path.join(KT_DIR, "libs")) as fh:
        lib, kt_path = fh.read().split()
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    kt = ctypes.CDLL(kt_path)
    kt.kt_now.restype = ctypes.c_uint64
    kt.kt_count.restype = ctypes.c_uint64
    kt.kt_dropped.restype = ctypes.c_uint64
    kt.kt_name.restype = ctypes.c_char_p
    rc = kt.kt_start()
    if rc:
        raise RuntimeError(f"kernel trace: CUPTI error {rc}")
    sync(fn())  # settles lazily created state under the trace
    marks = []
    for _ in range(n):
        t0 = kt.kt_now()
        sync(fn())
        marks.append((t0, kt.kt_now()))
    kt.kt_stop()
    s, e = ctypes.c_uint64(), ctypes.c_uint64()
    k, nm = ctypes.c_uint32(), ctypes.c_uint32()
    recs = []
    for i in range(kt.kt_count()):
        kt.kt_get(ctypes.c_uint64(i), ctypes.byref(s), ctypes.byref(e),
                  ctypes.byref(k), ctypes.byref(nm))
        recs.append((s.value, e.value, k.value, nm.value))
    recs.sort()
    steps = []
    by_name = {}
    for t0, t1 in marks:
        inside = [r for r in recs if t0 <= r[0] < t1]
        kern = [r for r in inside if r[2] == 0]
        busy, cur_s, cur_e = 0, None, None
        for r in inside:  # sorted by start: union of intervals
            rs, re = r[0], min(r[1], t1)
            if cur_e is None or rs > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = rs, re
            else:
                cur_e = max(cur_e, re)
        if cur_e is not None:
            busy += cur_e - cur_s
        for r in kern:
            v = by_name.setdefault(r[3], [0, 0])
            v[0] += 1
            v[1] += r[1] - r[0]
        steps.append({"kernels": len(kern), "copies": len(inside) - len(kern),
                      "kernel_ms": sum(r[1] - r[0] for r in kern) / 1e6,
                      "copy_ms": sum(r[1] - r[0] for r in inside if r[2]) / 1e6,
                      "busy_ms": busy / 1e6, "wall_ms": (t1 - t0) / 1e6})
    med = {key: statistics.median(st[key] for st in steps) for key in steps[0]}
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])
    names = {i: kt.kt_name(i).decode(errors="replace") for i in by_name}
    med["top"] = [(names[i][:90], c / n, t / n / 1e6)
                  for i, (c, t) in top[:int(os.environ.get("KT_TOP", "12"))]]
    kinds = {}
    for i, (c, t) in top:
        v = kinds.setdefault(kernel_kind(names[i]), [0, 0])
        v[0] += c / n
        v[1] += t / n / 1e6
    med["kinds"] = sorted(((k, c, ms) for k, (c, ms) in kinds.items()),
                          key=lambda x: -x[2])
    med["distinct_kernels"] = len(by_name)
    med["dropped"] = int(kt.kt_dropped())
    return med


# --------------------------------------------------------------------------
# JAX (iron and xla workers)

def jax_worker(bench, steps, warmup, trace=0):
    import jax
    import jax.numpy as jnp
    import numpy as np
    dev = jax.devices()[0]
    out = {"device": str(dev), "platform": dev.platform}

    def timed(fn, n):
        times = []
        res = None
        for _ in range(n):
            t0 = time.perf_counter()
            res = fn()
            jax.block_until_ready(res)
            times.append(time.perf_counter() - t0)
        return times, res

    if bench == "tiny":
        f = jax.jit(lambda x: x * 2 + 1)
        x = jax.device_put(np.arange(4, dtype=np.float32), dev)
        timed(lambda: f(x), 200)
        times = []
        for _ in range(max(steps, 16)):
            t0 = time.perf_counter()
            for _ in range(100):
                f(x).block_until_ready()
            times.append((time.perf_counter() - t0) / 100)
        out["times"] = times
        out["check"] = float(np.asarray(f(x)).sum())
        if trace:
            out["trace"] = kernel_trace(lambda: f(x), jax.block_until_ready, trace)
        return out
    if bench == "elementwise":
        n = 64 << 20
        f = jax.jit(lambda x, y: jnp.tanh(x) * y + 1)
        k1, k2 = jax.random.split(jax.random.PRNGKey(0))
        x = jax.device_put(np.asarray(jax.random.normal(k1, (n,)), np.float32), dev)
        y = jax.device_put(np.asarray(jax.random.normal(k2, (n,)), np.float32), dev)
        timed(lambda: f(x, y), warmup)
        out["times"], r = timed(lambda: f(x, y), steps)
        out["check"] = float(np.asarray(r[:1000]).sum())
        if trace:
            out["trace"] = kernel_trace(lambda: f(x, y), jax.block_until_ready, trace)
        return out
    if bench == "matmul":
        n = 4096
        f = jax.jit(lambda a, b: a @ b)
        rng = np.random.default_rng(0)
        a = jax.device_put(rng.standard_normal((n, n), np.float32), dev)
        b = jax.device_put(rng.standard_normal((n, n), np.float32), dev)
        timed(lambda: f(a, b), warmup)
        out["times"], r = timed(lambda: f(a, b), steps)
        out["check"] = float(np.asarray(r[0, :8]).sum())
        if trace:
            out["trace"] = kernel_trace(lambda: f(a, b), jax.block_until_ready, trace)
        return out

    import optax
    if bench in TRANSFORMERS:
        cfg = TRANSFORMERS[bench]
        params, loss_fn, batch = jax_transformer(cfg)
    else:
        params, loss_fn, batch = jax_gru(GRU)
    opt = optax.adamw(1e-3, weight_decay=0.01)
    params = jax.device_put(params, dev)
    batch = jax.device_put(batch, dev)
    state = opt.init(params)

    @jax.jit
    def step(params, state, batch):
        loss, g = jax.value_and_grad(loss_fn)(params, batch)
        upd, state = opt.update(g, state, params)
        return optax.apply_updates(params, upd), state, loss

    t0 = time.perf_counter()
    jax.block_until_ready(step(params, state, batch))
    out["compile_s"] = time.perf_counter() - t0
    losses = []
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        params, state, loss = step(params, state, batch)
        jax.block_until_ready(loss)
        dt = time.perf_counter() - t0
        losses.append(float(loss))
        if i >= warmup:
            times.append(dt)
    out["times"] = times
    out["losses"] = losses
    if trace:
        out["trace"] = kernel_trace(lambda: step(params, state, batch),
                                    jax.block_until_ready, trace)
    if os.environ.get("IRON_PROFILE"):
        # Drop the executables so that iron prints its per-run profile.
        import gc
        del step
        jax.clear_caches()
        gc.collect()
    return out


def jax_transformer(c):
    import jax
    import jax.numpy as jnp
    import numpy as np
    rng = np.random.default_rng(0)
    d, L, V, T, B, H = c["d"], c["layers"], c["vocab"], c["T"], c["B"], c["heads"]

    def w(*shape, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return (rng.standard_normal(shape) * s).astype(np.float32)

    params = {"emb": w(V, d, scale=0.02), "pos": w(T, d, scale=0.02),
              "out": w(d, V), "lnf": (np.ones(d, np.float32), np.zeros(d, np.float32)),
              "layers": []}
    for _ in range(L):
        params["layers"].append({
            "ln1": (np.ones(d, np.float32), np.zeros(d, np.float32)),
            "qkv": w(d, 3 * d), "proj": w(d, d),
            "ln2": (np.ones(d, np.float32), np.zeros(d, np.float32)),
            "fc1": w(d, 4 * d), "fc2": w(4 * d, d)})
    tokens = rng.integers(0, V, (B, T + 1)).astype(np.int32)

    def ln(x, p):
        g, b = p
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

    def loss_fn(p, tok):
        x_in, y = tok[:, :-1], tok[:, 1:]
        x = p["emb"][x_in] + p["pos"][None]
        mask = jnp.tril(jnp.ones((T, T), bool))
        for lp in p["layers"]:
            h = ln(x, lp["ln1"])
            qkv = h @ lp["qkv"]
            q, k, v = jnp.split(qkv, 3, axis=-1)
            sh = lambda t: t.reshape(B, T, H, d // H).transpose(0, 2, 1, 3)
            q, k, v = sh(q), sh(k), sh(v)
            a = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(d // H)
            a = jnp.where(mask, a, -1e9)
            a = jax.nn.softmax(a, axis=-1)
            o = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
            x = x + o @ lp["proj"]
            h = ln(x, lp["ln2"])
            x = x + jax.nn.gelu(h @ lp["fc1"]) @ lp["fc2"]
        x = ln(x, p["lnf"])
        logits = x @ p["out"]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[..., None], -1).mean()

    return params, loss_fn, tokens


def jax_gru(c):
    import jax
    import jax.numpy as jnp
    import numpy as np
    rng = np.random.default_rng(0)
    H, I, T, B = c["H"], c["I"], c["T"], c["B"]
    s = 1.0 / np.sqrt(H)
    params = {"wi": (rng.uniform(-s, s, (I, 3 * H))).astype(np.float32),
              "wh": (rng.uniform(-s, s, (H, 3 * H))).astype(np.float32),
              "bi": (rng.uniform(-s, s, (3 * H,))).astype(np.float32),
              "bh": (rng.uniform(-s, s, (3 * H,))).astype(np.float32),
              "wo": (rng.uniform(-s, s, (H, 1))).astype(np.float32)}
    xs = rng.standard_normal((T, B, I)).astype(np.float32)
    ys = rng.standard_normal((B, 1)).astype(np.float32)

    def loss_fn(p, batch):
        xs, ys = batch
        gi_all = xs @ p["wi"] + p["bi"]  # (T, B, 3H), torch-style gate order r,z,n

        def cell(h, gi):
            gh = h @ p["wh"] + p["bh"]
            ir, iz, inn = jnp.split(gi, 3, -1)
            hr, hz, hn = jnp.split(gh, 3, -1)
            r = jax.nn.sigmoid(ir + hr)
            z = jax.nn.sigmoid(iz + hz)
            n = jnp.tanh(inn + r * hn)
            h = (1 - z) * n + z * h
            return h, None

        h, _ = jax.lax.scan(cell, jnp.zeros((B, H), jnp.float32), gi_all)
        return jnp.mean((h @ p["wo"] - ys) ** 2)

    return params, loss_fn, (xs, ys)


# --------------------------------------------------------------------------
# PyTorch worker

def torch_worker(bench, steps, warmup, trace=0):
    import numpy as np
    import torch
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True  # what XLA:GPU does for f32
    torch.backends.cudnn.allow_tf32 = True
    out = {"device": torch.cuda.get_device_name(0), "platform": "torch"}

    def tsync(_):
        torch.cuda.synchronize()

    def timed(fn, n):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            r = fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return times, r

    if bench == "tiny":
        x = torch.arange(4, dtype=torch.float32, device=dev)
        timed(lambda: x * 2 + 1, 200)
        times = []
        for _ in range(max(steps, 16)):
            t0 = time.perf_counter()
            for _ in range(100):
                (x * 2 + 1)
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / 100)
        out["times"] = times
        if trace:
            out["trace"] = kernel_trace(lambda: x * 2 + 1, tsync, trace)
        return out
    if bench == "elementwise":
        n = 64 << 20
        x = torch.randn(n, device=dev)
        y = torch.randn(n, device=dev)
        timed(lambda: torch.tanh(x) * y + 1, warmup)
        out["times"], _ = timed(lambda: torch.tanh(x) * y + 1, steps)
        if trace:
            out["trace"] = kernel_trace(lambda: torch.tanh(x) * y + 1, tsync, trace)
        return out
    if bench == "matmul":
        n = 4096
        a = torch.randn(n, n, device=dev)
        b = torch.randn(n, n, device=dev)
        timed(lambda: a @ b, warmup)
        out["times"], _ = timed(lambda: a @ b, steps)
        if trace:
            out["trace"] = kernel_trace(lambda: a @ b, tsync, trace)
        return out

    torch.manual_seed(0)
    if bench in TRANSFORMERS:
        c = TRANSFORMERS[bench]
        d, L, V, T, B, H = c["d"], c["layers"], c["vocab"], c["T"], c["B"], c["heads"]

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = torch.nn.LayerNorm(d)
                self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
                self.proj = torch.nn.Linear(d, d, bias=False)
                self.ln2 = torch.nn.LayerNorm(d)
                self.fc1 = torch.nn.Linear(d, 4 * d, bias=False)
                self.fc2 = torch.nn.Linear(4 * d, d, bias=False)
                self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

            def forward(self, x):
                h = self.ln1(x)
                q, k, v = self.qkv(h).split(d, -1)
                sh = lambda t: t.view(B, T, H, d // H).transpose(1, 2)
                q, k, v = sh(q), sh(k), sh(v)
                a = (q @ k.transpose(-1, -2)) / (d // H) ** 0.5
                a = a.masked_fill(~self.mask, -1e9).softmax(-1)
                o = (a @ v).transpose(1, 2).reshape(B, T, d)
                x = x + self.proj(o)
                return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(V, d)
                self.pos = torch.nn.Parameter(torch.randn(T, d) * 0.02)
                self.blocks = torch.nn.ModuleList([Block() for _ in range(L)])
                self.lnf = torch.nn.LayerNorm(d)
                self.out = torch.nn.Linear(d, V, bias=False)

            def forward(self, tok):
                x = self.emb(tok) + self.pos
                for b in self.blocks:
                    x = b(x)
                return self.out(self.lnf(x))

        model = Model().to(dev)
        tokens = torch.randint(0, V, (B, T + 1), device=dev)

        def loss_fn():
            logits = model(tokens[:, :-1])
            return torch.nn.functional.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
    else:
        c = GRU
        gru = torch.nn.GRU(c["I"], c["H"]).to(dev)
        head = torch.nn.Linear(c["H"], 1).to(dev)
        model = torch.nn.ModuleList([gru, head])
        xs = torch.randn(c["T"], c["B"], c["I"], device=dev)
        ys = torch.randn(c["B"], 1, device=dev)

        def loss_fn():
            _, h = gru(xs)
            return ((head(h[0]) - ys) ** 2).mean()

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    timed(step, warmup)
    out["times"], _ = timed(step, steps)
    if trace:
        out["trace"] = kernel_trace(step, tsync, trace)
    return out


# --------------------------------------------------------------------------
# Driver

def run_worker(fw, bench, steps, warmup, timeout, trace=0):
    env = dict(os.environ)
    if fw == "iron":
        env["JAX_PLATFORMS"] = "iron"
        env.setdefault("IRON_DEVICE", "cuda")
    elif fw == "xla":
        env["JAX_PLATFORMS"] = "cuda"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", fw, "--bench",
           bench, "--steps", str(steps), "--warmup", str(warmup),
           "--trace", str(trace)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout}s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["wall_s"] = time.time() - t0
            prof = [ln for ln in p.stderr.splitlines()
                    if ln.startswith("iron profile:")]
            if prof:  # IRON_PROFILE=1: the programs' own counts
                r["iron_profile"] = prof
            return r
    tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
    return {"error": f"exit {p.returncode}: " + " | ".join(tail)}


def fmt_ms(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def print_traces(benches, fws, results):
    print()
    print("kernel trace, medians per traced step (wall includes tracing):")
    print(f"{'benchmark':18s} {'fw':6s} {'kernels':>8s} {'copies':>7s} "
          f"{'kernel ms':>10s} {'busy ms':>9s} {'wall ms':>9s} {'idle ms':>9s} "
          f"{'us/kernel':>9s}")
    for b in benches:
        for f in fws:
            tr = [r["trace"] for r in results[b][f] if "trace" in r]
            if not tr:
                continue
            t = tr[-1]
            per = t["kernel_ms"] * 1e3 / t["kernels"] if t["kernels"] else 0
            print(f"{b:18s} {f:6s} {t['kernels']:8.0f} {t['copies']:7.0f} "
                  f"{t['kernel_ms']:10.3f} {t['busy_ms']:9.3f} {t['wall_ms']:9.3f} "
                  f"{t['wall_ms'] - t['busy_ms']:9.3f} {per:9.2f}")
    for b in benches:
        for r in results[b].get("iron", [])[-1:]:
            for ln in r.get("iron_profile", []):
                print(f"{b}: {ln}")
    for b in benches:
        for f in fws:
            tr = [r["trace"] for r in results[b][f] if "trace" in r]
            if not tr or b in ("tiny", "elementwise", "matmul"):
                continue
            print(f"\n{b} {f}: {tr[-1]['distinct_kernels']} distinct kernels; "
                  f"most time (count/step, ms/step):")
            for name, c, ms in tr[-1]["top"]:
                print(f"  {c:7.1f} {ms:8.3f}  {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--bench")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json")
    ap.add_argument("--trace", type=int, default=0,
                    help="also trace N steps per worker with CUPTI")
    a = ap.parse_args()
    if a.worker:
        try:
            if a.worker == "torch":
                r = torch_worker(a.bench, a.steps, a.warmup, a.trace)
            else:
                r = jax_worker(a.bench, a.steps, a.warmup, a.trace)
        except Exception as e:  # reported by the driver, with the message
            r = {"error": f"{type(e).__name__}: {str(e)[:800]}"}
        print("RESULT " + json.dumps(r), flush=True)
        return
    benches = [b for b in BENCHES if not a.only or b in a.only.split(",")]
    if a.trace:
        build_kernel_trace()
    fws = a.frameworks.split(",")
    results = {b: {f: [] for f in fws} for b in benches}
    for rnd in range(a.rounds):
        for b in benches:
            for f in fws:
                r = run_worker(f, b, a.steps, a.warmup, a.timeout,
                               a.trace if rnd == a.rounds - 1 else 0)
                results[b][f].append(r)
                med = statistics.median(r["times"]) if "times" in r else None
                print(f"round {rnd} {b:18s} {f:6s} "
                      f"{fmt_ms(med) if med else r.get('error', '?')[:300]}",
                      flush=True)
    print()
    print(f"{'benchmark':18s} {'iron-cuda':>11s} {'XLA:GPU':>11s} {'torch':>11s} "
          f"{'iron/XLA':>9s} {'iron/torch':>10s}  losses")
    summary = {}
    for b in benches:
        med = {}
        for f in fws:
            ts = [t for r in results[b][f] for t in r.get("times", [])]
            med[f] = statistics.median(ts) if ts else None
        note = ""
        li = [r.get("losses") for r in results[b].get("iron", []) if r.get("losses")]
        lx = [r.get("losses") for r in results[b].get("xla", []) if r.get("losses")]
        if li and lx:
            n = min(len(li[0]), len(lx[0]))
            dif = max(abs(x - y) / max(1e-6, abs(y)) for x, y in zip(li[0][:n], lx[0][:n]))
            note = (f"iron {li[0][0]:.4f}->{li[0][n-1]:.4f} xla "
                    f"{lx[0][0]:.4f}->{lx[0][n-1]:.4f} max rel diff {dif:.1e}"
                    f" {'OK' if dif < 2e-2 else 'MISMATCH'}")
        ri = (med.get("iron") / med["xla"]) if med.get("iron") and med.get("xla") else None
        rt = (med.get("iron") / med["torch"]) if med.get("iron") and med.get("torch") else None
        errs = "; ".join(f"{f}: {r['error'][:200]}" for f in fws
                         for r in results[b][f][:1] if "error" in r)
        print(f"{b:18s} {fmt_ms(med.get('iron')):>11s} {fmt_ms(med.get('xla')):>11s} "
              f"{fmt_ms(med.get('torch')):>11s} "
              f"{(f'{ri:.2f}' if ri else '-'):>9s} {(f'{rt:.2f}' if rt else '-'):>10s}  "
              f"{note} {errs}")
        summary[b] = {"median_s": med, "iron_over_xla": ri, "iron_over_torch": rt,
                      "note": note, "errors": errs}
    if a.trace:
        print_traces(benches, fws, results)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"summary": summary, "raw": results}, fh, indent=1)


if __name__ == "__main__":
    main()
