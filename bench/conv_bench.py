#!/usr/bin/env python3
"""Convolution benchmark: iron-cuda with cuDNN (heuristics, and measured
with IRON_CUDA_CUDNN=find) vs iron-cuda's own kernels (IRON_CUDA_CUDNN=0)
vs XLA:GPU vs PyTorch (cuDNN), one command.

    python3 bench/conv_bench.py [--rounds 2] [--steps 20] [--only PAT,...]
                                [--frameworks iron,iron-find,iron-nocudnn,xla,torch]
                                [--dtypes f32,bf16] [--json out] [--small]

Programs (the CNN of issue 14: NHWC 3x3 convolutions, channels
3->64->64->128->128->256->256, strides 1,1,2,1,2,1, padding 1, batch 128,
32x32, batch-norm + relu after each, mean pooling and a linear layer):
  L<i>_fwd    layer i's convolution
  L<i>_dgrad  its input gradient (jax.linear_transpose in x: a
              convolution with lhs_dilation for the strided layers)
  L<i>_wgrad  its weight gradient (the transpose in w: swapped roles)
  cnn_step    the whole training step (forward, backward, Adam)
each in f32 (DEFAULT precision: TF32 on all frameworks, as XLA:GPU does)
and bf16.

Each framework runs in its own process (`--worker`), all programs in a
row; the driver interleaves the frameworks round by round and reports per
program the median over all timed calls of all rounds. Convolution
programs are timed as `--steps` back-to-back calls then one sync (per-call
throughput, as a training step issues them); the CNN step is timed step by
step to completion. Outputs of every framework are compared with XLA's
(relative max error of a sample; the CNN step: the loss of 2 steps).
TFLOP/s counts 2 x multiply-adds of the convolution (or of all the
step's convolutions). --small: a tiny CNN (batch 4, 8x8, 8..32 channels)
to check the script itself (any device).
"""
import argparse
import fnmatch
import json
import math
import os
import statistics
import subprocess
import sys
import time

FRAMEWORKS = ["iron", "iron-find", "iron-nocudnn", "xla", "torch"]
CNN = dict(B=128, HW=32, cin=3, chans=(64, 64, 128, 128, 256, 256),
           strides=(1, 1, 2, 1, 2, 1), classes=10)
SMALL = dict(B=4, HW=8, cin=3, chans=(8, 8, 16, 16, 32, 32),
             strides=(1, 1, 2, 1, 2, 1), classes=10)
SAMPLE = 512
TOL = {"f32": 2e-2, "bf16": 5e-2}  # TF32 / bf16 vs XLA, relative to max |xla|


def layers(c):
    """(name, x shape NHWC, w shape HWIO, stride, out shape) per layer."""
    out, hw, cin = [], c["HW"], c["cin"]
    for i, (cout, s) in enumerate(zip(c["chans"], c["strides"])):
        ho = (hw + 2 - 3) // s + 1
        out.append((f"L{i}", (c["B"], hw, hw, cin), (3, 3, cin, cout), s,
                    (c["B"], ho, ho, cout)))
        hw, cin = ho, cout
    return out


def conv_flops(x, w, o):
    return 2 * o[0] * o[1] * o[2] * o[3] * w[0] * w[1] * w[2]


def programs(dtypes):
    progs = []
    for dt in dtypes:
        for name, xs, ws, s, os_ in layers(CNN):
            f = conv_flops(xs, ws, os_)
            for kind in ("fwd", "dgrad", "wgrad"):
                if kind == "dgrad" and name == "L0":
                    continue  # no input gradient of the first layer
                progs.append(dict(name=f"{name}_{kind}_{dt}", kind=kind, dtype=dt,
                                  x=xs, w=ws, stride=s, y=os_, flops=f))
        total = 0
        for i, (_, xs, ws, _, os_) in enumerate(layers(CNN)):
            total += conv_flops(xs, ws, os_) * (3 if i else 2)
        progs.append(dict(name=f"cnn_step_{dt}", kind="step", dtype=dt, flops=total))
    return progs


def data(shape, seed, scale=1.0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def sample(a):
    import numpy as np
    a = np.asarray(a, np.float32).reshape(-1)
    idx = np.linspace(0, a.size - 1, min(SAMPLE, a.size)).astype(np.int64)
    return a[idx].tolist()


# --------------------------------------------------------------------------
# JAX workers (iron*, xla)

def jax_program(p):
    import jax
    import jax.numpy as jnp
    from jax import lax
    dt = jnp.bfloat16 if p["dtype"] == "bf16" else jnp.float32
    dn = ("NHWC", "HWIO", "NHWC")
    if p["kind"] == "step":
        return jax_cnn_step(dt)
    s = p["stride"]

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (s, s), ((1, 1), (1, 1)),
                                        dimension_numbers=dn)
    x = jnp.asarray(data(p["x"], 1), dt)
    w = jnp.asarray(data(p["w"], 2, 1.0 / math.sqrt(9 * p["w"][2])), dt)
    ct = jnp.asarray(data(p["y"], 3), dt)
    if p["kind"] == "fwd":
        f = jax.jit(conv)
        args = (x, w)
    elif p["kind"] == "dgrad":
        xspec = jax.ShapeDtypeStruct(p["x"], dt)
        f = jax.jit(lambda ct, w: jax.linear_transpose(
            lambda v: conv(v, w), xspec)(ct)[0])
        args = (ct, w)
    else:
        wspec = jax.ShapeDtypeStruct(p["w"], dt)
        f = jax.jit(lambda x, ct: jax.linear_transpose(
            lambda v: conv(x, v), wspec)(ct)[0])
        args = (x, ct)
    return f, args


def jax_cnn_step(dt):
    import jax
    import jax.numpy as jnp
    from jax import lax
    c = CNN
    params, cin = {}, c["cin"]
    for i, cout in enumerate(c["chans"]):
        params[f"w{i}"] = jnp.asarray(data((3, 3, cin, cout), 10 + i, 1.0 / math.sqrt(9 * cin)))
        params[f"g{i}"] = jnp.ones((cout,), jnp.float32)
        params[f"b{i}"] = jnp.zeros((cout,), jnp.float32)
        cin = cout
    params["wl"] = jnp.asarray(data((cin, c["classes"]), 30, 0.0625))
    params["bl"] = jnp.zeros((c["classes"],), jnp.float32)
    x = jnp.asarray(data((c["B"], c["HW"], c["HW"], c["cin"]), 31), dt)
    import numpy as np
    y = jnp.asarray(np.random.default_rng(32).integers(0, c["classes"], c["B"]), jnp.int32)

    def loss_fn(pr, x, y):
        h = x
        for i, s in enumerate(c["strides"]):
            h = lax.conv_general_dilated(h, pr[f"w{i}"].astype(dt), (s, s), ((1, 1), (1, 1)),
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            mu = h.mean((0, 1, 2))
            var = ((h - mu) ** 2).mean((0, 1, 2))
            h = (h - mu) * lax.rsqrt(var + 1e-5) * pr[f"g{i}"].astype(dt) + pr[f"b{i}"].astype(dt)
            h = jax.nn.relu(h)
        logits = h.mean((1, 2)).astype(jnp.float32) @ pr["wl"] + pr["bl"]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[:, None], 1).mean()

    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8

    def step(state, x, y):
        pr, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(pr, x, y)
        t = t + 1.0
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        pr = jax.tree_util.tree_map(
            lambda p, m, v: p - (lr / (1 - b1 ** t)) * m /
            (jnp.sqrt(v) / jnp.sqrt(1 - b2 ** t) + eps), pr, m, v)
        return (pr, m, v, t), loss

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = (params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params),
             jnp.zeros((), jnp.float32))
    return jax.jit(step, donate_argnums=(0,)), (state, x, y)


def jax_worker(progs, steps, warmup):
    import jax
    out = {"device": str(jax.devices()[0])}
    for p in progs:
        try:
            f, args = jax_program(p)
            t0 = time.perf_counter()
            if p["kind"] == "step":
                state, x, y = args
                state, l1 = jax.block_until_ready(f(state, x, y))
                compile_s = time.perf_counter() - t0
                state, l2 = f(state, x, y)
                check = [float(l1), float(l2)]
                times = []
                for i in range(warmup + steps):
                    t0 = time.perf_counter()
                    state, loss = f(state, x, y)
                    jax.block_until_ready(loss)
                    if i >= warmup:
                        times.append(time.perf_counter() - t0)
            else:
                r = jax.block_until_ready(f(*args))
                compile_s = time.perf_counter() - t0
                check = sample(r)
                for _ in range(warmup):
                    jax.block_until_ready(f(*args))
                times = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    for _ in range(steps):
                        r = f(*args)
                    jax.block_until_ready(r)
                    times.append((time.perf_counter() - t0) / steps)
            out[p["name"]] = {"times": times, "check": check, "compile_s": compile_s}
        except Exception as e:  # reported per program
            out[p["name"]] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        print(f"  {p['name']}: {'ok' if 'times' in out[p['name']] else out[p['name']]['error'][:200]}",
              file=sys.stderr, flush=True)
    return out


# --------------------------------------------------------------------------
# PyTorch worker (cuDNN, channels_last, benchmark mode: algorithms measured
# like XLA's autotuning)

def torch_worker(progs, steps, warmup):
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(0)}

    def nchw(a, dt):  # NHWC numpy -> channels_last NCHW tensor
        return torch.from_numpy(a).to(dev).permute(0, 3, 1, 2).to(dt).contiguous(
            memory_format=torch.channels_last)

    def oihw(a, dt):  # HWIO -> OIHW
        return torch.from_numpy(a).to(dev).permute(3, 2, 0, 1).to(dt).contiguous(
            memory_format=torch.channels_last)

    for p in progs:
        try:
            dt = torch.bfloat16 if p["dtype"] == "bf16" else torch.float32
            if p["kind"] == "step":
                f, check = torch_cnn_step(dt, nchw, oihw, dev)
            else:
                s = p["stride"]
                x = nchw(data(p["x"], 1), dt)
                w = oihw(data(p["w"], 2, 1.0 / math.sqrt(9 * p["w"][2])), dt)
                ct = nchw(data(p["y"], 3), dt)
                if p["kind"] == "fwd":
                    f = lambda: F.conv2d(x, w, stride=s, padding=1)  # noqa: E731
                    to_nhwc = lambda r: r.permute(0, 2, 3, 1)  # noqa: E731
                elif p["kind"] == "dgrad":
                    f = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
                        ct, x, w, None, [s, s], [1, 1], [1, 1], False, [0, 0], 1,
                        [True, False, False])[0]
                    to_nhwc = lambda r: r.permute(0, 2, 3, 1)  # noqa: E731
                else:
                    f = lambda: torch.ops.aten.convolution_backward(  # noqa: E731
                        ct, x, w, None, [s, s], [1, 1], [1, 1], False, [0, 0], 1,
                        [False, True, False])[1]
                    to_nhwc = lambda r: r.permute(2, 3, 1, 0)  # noqa: E731  OIHW -> HWIO
                r = f()
                torch.cuda.synchronize()
                check = sample(to_nhwc(r).float().cpu().numpy())
            for _ in range(warmup):
                f()
            torch.cuda.synchronize()
            times = []
            if p["kind"] == "step":
                for _ in range(steps):
                    t0 = time.perf_counter()
                    f()
                    torch.cuda.synchronize()
                    times.append(time.perf_counter() - t0)
            else:
                for _ in range(3):
                    t0 = time.perf_counter()
                    for _ in range(steps):
                        f()
                    torch.cuda.synchronize()
                    times.append((time.perf_counter() - t0) / steps)
            out[p["name"]] = {"times": times, "check": check}
        except Exception as e:
            out[p["name"]] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
    return out


def torch_cnn_step(dt, nchw, oihw, dev):
    import numpy as np
    import torch
    import torch.nn.functional as F
    c = CNN
    ws, gs, bs, cin = [], [], [], c["cin"]
    for i, cout in enumerate(c["chans"]):
        ws.append(oihw(data((3, 3, cin, cout), 10 + i, 1.0 / math.sqrt(9 * cin)),
                       torch.float32).requires_grad_())
        gs.append(torch.ones(cout, device=dev, requires_grad=True))
        bs.append(torch.zeros(cout, device=dev, requires_grad=True))
        cin = cout
    wl = torch.from_numpy(data((cin, c["classes"]), 30, 0.0625)).to(dev).requires_grad_()
    bl = torch.zeros(c["classes"], device=dev, requires_grad=True)
    x = nchw(data((c["B"], c["HW"], c["HW"], c["cin"]), 31), dt)
    y = torch.from_numpy(np.random.default_rng(32).integers(0, c["classes"], c["B"])).to(dev)
    params = ws + gs + bs + [wl, bl]
    opt = torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)

    def step():
        opt.zero_grad(set_to_none=True)
        h = x
        for i, s in enumerate(c["strides"]):
            h = F.conv2d(h, ws[i].to(dt), stride=s, padding=1)
            mu = h.mean((0, 2, 3), keepdim=True)
            var = ((h - mu) ** 2).mean((0, 2, 3), keepdim=True)
            h = (h - mu) * torch.rsqrt(var + 1e-5) * gs[i].to(dt).view(1, -1, 1, 1) \
                + bs[i].to(dt).view(1, -1, 1, 1)
            h = torch.relu(h)
        logits = h.mean((2, 3)).float() @ wl + bl
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        return loss

    l1 = float(step())
    l2 = float(step())
    return step, [l1, l2]


# --------------------------------------------------------------------------
# Driver

def run_worker(fw, names, steps, warmup, dtypes, timeout, small):
    env = dict(os.environ)
    if fw.startswith("iron"):
        env["JAX_PLATFORMS"] = "iron"
        env.setdefault("IRON_DEVICE", "cuda")
        env["IRON_CUDA_CUDNN"] = {"iron": "1", "iron-find": "find",
                                  "iron-nocudnn": "0"}[fw]
        env["IRON_CUDA_CUDNN_DEBUG"] = "1"
    elif fw == "xla":
        env["JAX_PLATFORMS"] = "cuda"
    elif fw == "xla-cpu":  # the smoke test's reference (any machine)
        env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", fw,
           "--names", ",".join(names), "--steps", str(steps), "--warmup",
           str(warmup), "--dtypes", ",".join(dtypes)] + (["--small"] if small else [])
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
            r["cudnn_debug"] = [ln for ln in p.stderr.splitlines()
                                if ln.startswith("iron cudnn:")][:200]
            return r
    tail = (p.stderr or p.stdout).strip().splitlines()[-8:]
    return {"error": f"exit {p.returncode}: " + " | ".join(tail)}


def fmt(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.0f}us" if s < 1e-3 else f"{s * 1e3:.2f}ms"


def rel_err(a, b):
    if not a or not b or len(a) != len(b):
        return None
    m = max(abs(v) for v in b) or 1.0
    return max(abs(x - y) for x, y in zip(a, b)) / m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--names", default="")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json")
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    if a.small:
        CNN.update(SMALL)
    dtypes = a.dtypes.split(",")
    progs = programs(dtypes)
    if a.worker:
        sel = [p for p in progs if p["name"] in a.names.split(",")]
        try:
            r = (torch_worker if a.worker == "torch" else jax_worker)(sel, a.steps, a.warmup)
        except Exception as e:
            r = {"error": f"{type(e).__name__}: {str(e)[:800]}"}
        print("RESULT " + json.dumps(r), flush=True)
        return
    if a.only:
        pats = a.only.split(",")
        progs = [p for p in progs if any(fnmatch.fnmatch(p["name"], q) or q in p["name"]
                                         for q in pats)]
    names = [p["name"] for p in progs]
    fws = a.frameworks.split(",")
    raw = {f: [] for f in fws}
    for rnd in range(a.rounds):
        for f in fws:
            t0 = time.time()
            r = run_worker(f, names, a.steps, a.warmup, dtypes, a.timeout, a.small)
            raw[f].append(r)
            print(f"round {rnd} {f:13s} {time.time() - t0:6.1f}s "
                  f"{r.get('error', '')[:300]}", flush=True)
    summary = {}
    hdr = "".join(f"{f:>14s}" for f in fws)
    print(f"\n{'program':22s}{hdr}  iron/xla  iron/torch  TFLOP/s(iron)  check vs xla "
          f"(max error / max |xla|)")
    for p in progs:
        n = p["name"]
        med, chk, errs = {}, {}, []
        for f in fws:
            ts = [t for r in raw[f] for t in r.get(n, {}).get("times", [])]
            med[f] = statistics.median(ts) if ts else None
            for r in raw[f]:
                if n in r and "check" in r[n]:
                    chk[f] = r[n]["check"]
                if "error" in r.get(n, {}):
                    errs.append(f"{f}: {r[n]['error'][:150]}")
        tol = TOL[p["dtype"]]
        notes = []
        ref = "xla" if "xla" in fws else "xla-cpu"
        for f in fws:
            if f == ref or f not in chk or ref not in chk:
                continue
            e = rel_err(chk[f], chk[ref])
            if e is not None:
                notes.append(f"{f} {e:.1e}{'' if e <= tol else ' MISMATCH'}")
        ri = med["iron"] / med[ref] if med.get("iron") and med.get(ref) else None
        rt = med["iron"] / med["torch"] if med.get("iron") and med.get("torch") else None
        tf = p["flops"] / med["iron"] / 1e12 if med.get("iron") else None
        cells = "".join(f"{fmt(med[f]):>14s}" for f in fws)
        print(f"{n:22s}{cells}  {(f'{ri:.2f}' if ri else '-'):>8s}  "
              f"{(f'{rt:.2f}' if rt else '-'):>10s}  {(f'{tf:.1f}' if tf else '-'):>13s}  "
              f"{'; '.join(notes)} {'; '.join(errs)}")
        summary[n] = {"median_s": med, "iron_over_xla": ri, "iron_over_torch": rt,
                      "iron_tflops": tf, "checks": notes, "errors": errs}
    for f in fws:
        dbg = [ln for r in raw[f][:1] for ln in r.get("cudnn_debug", [])]
        if dbg:
            print(f"\n{f}: IRON_CUDA_CUDNN_DEBUG (first round)")
            for ln in dbg:
                print("  " + ln)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"summary": summary, "raw": raw}, fh, indent=1)


if __name__ == "__main__":
    main()
