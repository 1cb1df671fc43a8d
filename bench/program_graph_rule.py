#!/usr/bin/env python3
"""Measures the constants of the program-graph rule (src/runtime/exec_graph.c,
docs/decisions.md "Whole programs as CUDA graphs") on the CUDA device.

For programs of K kernel steps (a chain of small dots and tanh) that also
take A extra arguments of B bytes each and return them plus one (A more
element-wise kernels, A results of B bytes), it times a call to completion
with program graphs off (IRON_CUDA_PROGRAM_GRAPHS=0) and forced
(IRON_CUDA_PROGRAM_GRAPHS=2: every program recorded, the rule ignored), each
mode in its own process, and reports per program: ms/call both ways, the
kernel steps and replays per call (IRON_PROFILE), and what the graph saved.
From the table: host cost per kernel step = slope of `off` over K at A=0;
cost per copied argument/result = slope of `graph` over A at small B; copy
rate = slope over B. Then compare with the rule's constants (PG_*).

    python3 bench/program_graph_rule.py [--json out.json] [--md out.md]
"""
import argparse
import json
import os
import subprocess
import sys
import time

CASES = [(k, a, b) for k in (8, 32, 128) for a in (0, 8, 32)
         for b in (4096,)] + [(64, 8, b) for b in (1 << 20, 16 << 20)] + \
        [(32, 64, 4096), (16, 2, 64 << 20)]


def worker(mode, cases, calls):
    os.environ["IRON_CUDA_PROGRAM_GRAPHS"] = mode
    os.environ["IRON_PROFILE"] = "1"
    import jax
    import jax.numpy as jnp
    import numpy as np
    out = []
    for (k, a, b) in cases:
        def f(w, h, *xs):
            for _ in range(max(1, k // 2)):
                h = jnp.tanh(h @ w)
            return (h,) + tuple(x + 1.0 for x in xs)
        rng = np.random.default_rng(0)
        w = jnp.asarray(rng.standard_normal((64, 64)).astype(np.float32) / 8)
        h = jnp.asarray(rng.standard_normal((64, 64)).astype(np.float32))
        xs = [jnp.asarray(np.full(b // 4, i, np.float32)) for i in range(a)]
        g = jax.jit(f)
        for _ in range(3):
            jax.block_until_ready(g(w, h, *xs))
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            jax.block_until_ready(g(w, h, *xs))
            times.append(time.perf_counter() - t0)
        times.sort()
        out.append({"k": k, "a": a, "b": b,
                    "ms": 1e3 * times[len(times) // 2]})
        del g
        jax.clear_caches()
        import gc
        gc.collect()
    print("RESULT " + json.dumps(out), flush=True)


def run_mode(mode, calls):
    env = dict(os.environ, JAX_PLATFORMS="iron", IRON_DEVICE="cuda")
    p = subprocess.run([sys.executable, __file__, "--worker", mode,
                        "--calls", str(calls)], env=env, capture_output=True,
                       text=True, timeout=900)
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    if res is None:
        raise SystemExit(f"worker {mode} failed:\n{p.stderr[-3000:]}")
    prof = [ln for ln in p.stderr.splitlines() if ln.startswith("iron profile:")]
    # One profile line per program, in order (each executable is dropped
    # after its case); the main one has the most kernel steps.
    return res, prof


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, CASES, a.calls)
    off, prof_off = run_mode("0", a.calls)
    on, prof_on = run_mode("2", a.calls)
    rows = []
    for r0, r1 in zip(off, on):
        rows.append(dict(r0, ms_off=r0["ms"], ms_graph=r1["ms"],
                         saved_ms=r0["ms"] - r1["ms"]))
    lines = ["| K (dots+tanh) | extra args | bytes each | off ms | graph ms | saved ms |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['k']} | {r['a']} | {r['b']} | {r['ms_off']:.3f} | "
                     f"{r['ms_graph']:.3f} | {r['saved_ms']:+.3f} |")
    lines.append("")
    lines.append("IRON_PROFILE, graphs off:")
    lines += ["    " + ln for ln in prof_off]
    lines.append("IRON_PROFILE, graphs forced:")
    lines += ["    " + ln for ln in prof_on]
    text = "\n".join(lines)
    print(text)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": rows, "profile_off": prof_off,
                       "profile_graph": prof_on}, fh, indent=1)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
