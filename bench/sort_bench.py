#!/usr/bin/env python3
"""Sort benchmarks on the GPU: iron-cuda vs XLA:GPU (jax-cuda), one command.

    python3 bench/sort_bench.py [--reps 5] [--only a,b] [--json out.json]
                                [--variants iron,iron-wide,iron-merge,xla]

Each (benchmark, variant) runs in its own process (`--worker`), so the two
backends never share a CUDA context. Variants:
  iron        JAX_PLATFORMS=iron, IRON_DEVICE=cuda (the defaults)
  iron-wide   ... with IRON_CUDA_SORT_BLOCK_MAX=0 (every row through the
              device-wide sorts: compares them with the one-block kernel)
  iron-merge  ... with IRON_CUDA_SORT_BLOCK_MAX=0 IRON_CUDA_SORT_RADIX=0
              (the merge sort where the radix sort would run)
  xla         JAX_PLATFORMS=cuda (XLA:GPU, CUB's radix sort)
Every call is timed to completion (block_until_ready) after a warm-up; the
median of --reps calls is reported, with iron/xla ratios. Results of all
variants are compared bit for bit (a hash of the result bytes): jnp.sort and
argsort are stable sorts, so every backend must give the same bytes.
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

# name -> (op, shape, dtype)
BENCHES = {
    "sort_f32_1e4": ("sort", (10_000,), "float32"),
    "sort_f32_16384": ("sort", (16_384,), "float32"),
    "sort_f32_1e5": ("sort", (100_000,), "float32"),
    "sort_f32_1e6": ("sort", (1_000_000,), "float32"),
    "sort_f32_1e7": ("sort", (10_000_000,), "float32"),
    "sort_f32_1e8": ("sort", (100_000_000,), "float32"),
    "argsort_f32_1e6": ("argsort", (1_000_000,), "float32"),
    "argsort_f32_1e8": ("argsort", (100_000_000,), "float32"),
    "sort_i32_1e8": ("sort", (100_000_000,), "int32"),
    "sort_bf16_1e7": ("sort", (10_000_000,), "bfloat16"),
    "top_k10_1e6": ("top_k", (1_000_000,), "float32"),
    "rows_1024x4096": ("sort", (1024, 4096), "float32"),
    "rows_64x200000": ("sort", (64, 200_000), "float32"),
}
VARIANTS = {
    "iron": {"JAX_PLATFORMS": "iron", "IRON_DEVICE": "cuda"},
    "iron-wide": {"JAX_PLATFORMS": "iron", "IRON_DEVICE": "cuda",
                  "IRON_CUDA_SORT_BLOCK_MAX": "0"},
    "iron-merge": {"JAX_PLATFORMS": "iron", "IRON_DEVICE": "cuda",
                   "IRON_CUDA_SORT_BLOCK_MAX": "0",
                   "IRON_CUDA_SORT_RADIX": "0"},
    "xla": {"JAX_PLATFORMS": "cuda"},
}


def worker(name, reps):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    op, shape, dtype = BENCHES[name]
    dev = jax.devices()[0]
    rng = np.random.default_rng(0)
    n = int(np.prod(shape))
    if dtype == "int32":
        x = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32)
    else:
        x = rng.standard_normal(n).astype(np.float32)
        if dtype == "bfloat16":
            x = x.astype(jnp.bfloat16)
    x = jax.device_put(x.reshape(shape), dev)
    fn = {"sort": jnp.sort, "argsort": jnp.argsort,
          "top_k": lambda v: lax.top_k(v, 10)}[op]
    f = jax.jit(fn)
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(x))
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t0)
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(out):
        h.update(np.asarray(leaf).tobytes())
    return {"median_s": statistics.median(times), "min_s": min(times),
            "first_s": first, "hash": h.hexdigest()[:16],
            "device": dev.device_kind}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--variants", default="iron,iron-wide,xla")
    ap.add_argument("--json", default="")
    ap.add_argument("--worker", default="")
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, args.reps)))
        return 0
    names = [b for b in BENCHES if not args.only or b in args.only.split(",")]
    variants = args.variants.split(",")
    results = {}
    for b in names:
        results[b] = {}
        for v in variants:
            env = dict(os.environ)
            env.update(VARIANTS[v])
            t0 = time.time()
            p = subprocess.run([sys.executable, __file__, "--worker", b,
                                "--reps", str(args.reps)],
                               env=env, capture_output=True, text=True,
                               timeout=600)
            line = [ln for ln in p.stdout.splitlines()
                    if ln.startswith("RESULT ")]
            if p.returncode or not line:
                tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
                results[b][v] = {"error": " | ".join(tail)}
            else:
                results[b][v] = json.loads(line[0][7:])
            results[b][v]["wall_s"] = time.time() - t0
            r = results[b][v]
            print(f"{b:18s} {v:11s} " +
                  (f"{r['median_s'] * 1e3:10.3f} ms (first {r['first_s']:.2f} s)"
                   f" {r['hash']}" if "median_s" in r else r["error"]),
                  flush=True)
    print()
    print(f"{'benchmark':18s} " + " ".join(f"{v:>11s}" for v in variants) +
          "   iron/xla  same-bytes")
    for b in names:
        row = results[b]
        cells = [f"{row[v]['median_s'] * 1e3:9.3f}ms" if "median_s" in row[v]
                 else "      error" for v in variants]
        ratio = ""
        if "median_s" in row.get("iron", {}) and "median_s" in row.get("xla", {}):
            ratio = f"{row['iron']['median_s'] / row['xla']['median_s']:9.2f}x"
            row["iron_over_xla"] = row["iron"]["median_s"] / row["xla"]["median_s"]
        hashes = {row[v]["hash"] for v in variants if "hash" in row[v]}
        row["same_bytes"] = len(hashes) <= 1
        print(f"{b:18s} " + " ".join(cells) + f"   {ratio:>8s}  "
              f"{'yes' if row['same_bytes'] else 'NO'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["same_bytes"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
