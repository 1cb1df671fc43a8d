"""Float remainder with denormal operands: XLA:CPU, numpy (the C library's
fmodf/fmod) and iron's devices, side by side on one machine.

The host device's remainder is the C library's fmod, as XLA:CPU's is; this
prints where they part, to choose one host rule independent of the C library.
Run: JAX_PLATFORMS=iron,cpu python3 scripts/debug/rem_denormal_probe.py
"""
import os
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

f32 = np.float32
den = [f32(1e-45), f32(2.4e-38), f32(-3e-39), f32(1.1754942e-38), f32(5e-40)]
nrm = [f32(0.25), f32(-1.5), f32(3e-38), f32(1.2e-38), f32(7.0)]
xs, ys = [], []
for a in den + nrm:
    for b in den + nrm:
        xs.append(a); ys.append(b)
x = np.array(xs, f32); y = np.array(ys, f32)
with np.errstate(all="ignore"):
    ref_np = np.fmod(x, y)
cpu = jax.devices("cpu")[0]
rem = jax.jit(lambda a, b: lax.rem(a, b))
out = {"numpy": ref_np,
       "xla_cpu": np.asarray(rem(jax.device_put(x, cpu), jax.device_put(y, cpu)))}
try:
    iron = jax.devices("iron")[0]
    out["iron:" + os.environ.get("IRON_DEVICE", "default")] = np.asarray(
        rem(jax.device_put(x, iron), jax.device_put(y, iron)))
except RuntimeError as e:
    print("no iron device:", e)
names = list(out)
diff = 0
for i in range(len(x)):
    vals = [out[n][i] for n in names]
    bits = {v.view(np.uint32).item() for v in vals}
    if len(bits) > 1:
        diff += 1
        print(f"rem({x[i]!r}, {y[i]!r}):", "  ".join(f"{n}={v!r}" for n, v in zip(names, vals)))
print(f"{diff} of {len(x)} pairs differ among {names}")
for n in names[2:]:
    bad = int(np.sum(out[n].view(np.uint32) != out["xla_cpu"].view(np.uint32)))
    print(f"{n} against xla_cpu: {bad} of {len(x)} pairs differ")
