"""Warm round trip of a tiny jitted function (x*2+1 on 4 floats, including
block_until_ready) on `iron` and on jax's CPU backend, measured in the same
process, interleaved. Prints medians over repeated batches and the ratio.

  JAX_PLATFORMS=iron,cpu python bench/tiny_roundtrip.py
"""
import statistics
import time

import numpy as np
import jax


def batch_us(f, x, n):
    t = time.perf_counter()
    for _ in range(n):
        f(x).block_until_ready()
    return (time.perf_counter() - t) / n * 1e6


def main(rounds=15, n=1000):
    f = jax.jit(lambda x: x * 2 + 1)
    data = np.arange(4, dtype=np.float32)
    xs = {p: jax.device_put(data, jax.devices(p)[0]) for p in ("iron", "cpu")}
    for x in xs.values():
        batch_us(f, x, 200)  # compile + warm up
    times = {p: [] for p in xs}
    for _ in range(rounds):
        for p, x in xs.items():
            times[p].append(batch_us(f, x, n))
    med = {p: statistics.median(t) for p, t in times.items()}
    for p, m in med.items():
        print(f"{p:5s} median {m:7.2f} us  (min {min(times[p]):.2f}, "
              f"max {max(times[p]):.2f}) over {rounds} x {n} calls")
    print(f"ratio iron/cpu {med['iron'] / med['cpu']:.2f}")


if __name__ == "__main__":
    main()
