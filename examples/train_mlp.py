"""Train a small MLP classifier with plain JAX and optax.

    JAX_PLATFORMS=iron python examples/train_mlp.py [--steps 200]

A synthetic 3-class problem (Gaussian blobs pushed through a fixed random
nonlinearity, so it is not linearly separable) is generated with numpy; the
model is a 3-layer MLP written with jax.numpy, trained with optax.adam on
minibatches that a jitted train_step cuts out of the device-resident dataset
with dynamic slices. Needs only jax, optax and numpy.

tests/python/test_mlp.py imports train() from here and compares the loss
curves of `iron` and `cpu`.
"""
import argparse
import time

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
import optax

N_FEATURES = 16
N_CLASSES = 3
HIDDEN = 64
N_EXAMPLES = 1024
BATCH = 128


def make_dataset(seed=0):
    """(x float32[N, F], one-hot labels float32[N, C]) from numpy only."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((N_CLASSES, N_FEATURES)) * 0.5
    labels = rng.integers(0, N_CLASSES, N_EXAMPLES)
    x = centers[labels] + rng.standard_normal((N_EXAMPLES, N_FEATURES))
    mix = rng.standard_normal((N_FEATURES, N_FEATURES)) / np.sqrt(N_FEATURES)
    x = np.tanh(x @ mix) + 0.1 * x
    onehot = np.eye(N_CLASSES)[labels]
    return x.astype(np.float32), onehot.astype(np.float32)


def init_params(seed=0):
    rng = np.random.default_rng(seed + 1)
    sizes = [N_FEATURES, HIDDEN, HIDDEN, N_CLASSES]
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)
        params.append({"w": w.astype(np.float32),
                       "b": np.zeros(fan_out, np.float32)})
    return params


def forward(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params, x, y):
    # One-hot labels: softmax cross-entropy without any gather.
    return jnp.mean(optax.softmax_cross_entropy(forward(params, x), y))


OPTIMIZER = optax.adam(learning_rate=3e-3)


@jax.jit
def train_step(params, opt_state, xs, ys, step):
    n_batches = xs.shape[0] // BATCH
    start = (step % n_batches) * BATCH
    xb = lax.dynamic_slice_in_dim(xs, start, BATCH)
    yb = lax.dynamic_slice_in_dim(ys, start, BATCH)
    loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


@jax.jit
def accuracy(params, xs, ys):
    pred = jnp.argmax(forward(params, xs), axis=-1)
    return jnp.mean(pred == jnp.argmax(ys, axis=-1))


def train(steps=200, device=None, seed=0, log_every=0, log=print,
          return_params=False):
    """Train for `steps` steps on `device` (default: jax's default device).

    Returns the per-step losses as floats (and the final params, all living
    on `device`, when return_params is true). Prints "step N loss X" every
    `log_every` steps when log_every > 0.
    """
    device = device or jax.devices()[0]
    xs, ys = make_dataset(seed)
    put = lambda t: jax.device_put(t, device)
    xs, ys = put(xs), put(ys)
    params = jax.tree_util.tree_map(put, init_params(seed))
    opt_state = jax.tree_util.tree_map(put, OPTIMIZER.init(params))
    losses = []
    for step in range(steps):
        params, opt_state, loss = train_step(params, opt_state, xs, ys,
                                             put(np.int32(step)))
        losses.append(loss)  # stays on the device: no sync per step
        if log_every and (step + 1) % log_every == 0:
            log(f"step {step + 1} loss {float(loss):.4f}")
    losses = [float(v) for v in losses]
    if return_params:
        return losses, params
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    print("devices:", jax.devices())
    t0 = time.perf_counter()
    losses, params = train(opts.steps, seed=opts.seed, log_every=20,
                           return_params=True)
    xs, ys = make_dataset(opts.seed)
    acc = float(accuracy(params, xs, ys))
    print(f"trained {opts.steps} steps in {time.perf_counter() - t0:.2f} s, "
          f"train accuracy {acc:.3f}")
    print(f"final loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
