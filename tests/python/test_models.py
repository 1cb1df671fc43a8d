"""Real models written with the libraries JAX users train with (flax linen,
flax nnx, equinox, optax) and scientific libraries on top of them (diffrax,
optimistix, lineax, numpyro), unmodified, on `iron` against jax's CPU
backend.

Nobody here wrote these layers: flax's Conv/BatchNorm/Dropout/attention
with its KV cache, nn.scan over layers, nn.RNN, equinox's filtered
transformations and its modules. Each test builds the same model from the
same seed on both backends, runs a few training (or decode) steps and
compares losses and the final parameters. The tolerances are those of
float32 summation order compounded over a few optimizer steps; integer
outputs (argmax tokens, cache positions) must be equal.

The libraries are optional for a user of iron but required by
requirements-test.txt; on a machine without them (the GPU machine carries
them in a folder on PYTHONPATH) the module is skipped with the reason."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

flax = pytest.importorskip("flax")
eqx = pytest.importorskip("equinox")
optax = pytest.importorskip("optax")
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402


@pytest.fixture
def devs(iron_device, cpu_device):
    return iron_device, cpu_device


def on(dev, fn):
    """fn() with `dev` as the default device; results fetched to numpy."""
    with jax.default_device(dev):
        out = fn()
        return jax.tree_util.tree_map(np.asarray, jax.device_get(out))


def assert_trees_close(got, want, rtol, atol):
    g_leaves, g_def = jax.tree_util.tree_flatten(got)
    w_leaves, w_def = jax.tree_util.tree_flatten(want)
    assert g_def == w_def
    for g, w in zip(g_leaves, w_leaves):
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(g.dtype, np.integer) or g.dtype == np.bool_:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def both(devs, fn, rtol=2e-4, atol=2e-5):
    iron, cpu = devs
    got, want = on(iron, fn), on(cpu, fn)
    assert_trees_close(got, want, rtol, atol)
    return got


def images(n=8, hw=12, c=3, classes=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, hw, hw, c)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int32)
    return x, y


# --------------------------------------------------------------------------
# flax.linen: a CNN with batch norm (mutable batch_stats), dropout (an rng
# stream), pooling, trained with optax.adamw.

class LinenCNN(nn.Module):
    classes: int = 5

    @nn.compact
    def __call__(self, x, train):
        # No bias before batch norm: its gradient is exactly 0 analytically,
        # rounding noise that adam would scale up to the learning rate.
        x = nn.Conv(16, (3, 3), use_bias=False)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
        x = nn.relu(x)
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.Conv(32, (3, 3), strides=(2, 2), padding="VALID")(x)
        x = nn.gelu(x)
        x = nn.avg_pool(x, (2, 2), padding="SAME")
        x = x.reshape((x.shape[0], -1))
        x = nn.Dropout(0.25, deterministic=not train)(x)
        return nn.Dense(self.classes)(x)


def linen_cnn_training(steps=4):
    x, y = images()
    model = LinenCNN()
    variables = model.init(jax.random.key(0), x, train=False)
    params, stats = variables["params"], variables["batch_stats"]
    tx = optax.adamw(1e-2)
    opt = tx.init(params)

    @jax.jit
    def step(params, stats, opt, key):
        def loss_fn(p):
            logits, upd = model.apply({"params": p, "batch_stats": stats}, x,
                                      train=True, mutable=["batch_stats"],
                                      rngs={"dropout": key})
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y)
            return loss.mean(), upd["batch_stats"]
        (loss, stats), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
        upd, opt = tx.update(g, opt, params)
        return optax.apply_updates(params, upd), stats, opt, loss

    losses = []
    key = jax.random.key(1)
    for _ in range(steps):
        key, sub = jax.random.split(key)
        params, stats, opt, loss = step(params, stats, opt, sub)
        losses.append(loss)
    pred = jax.jit(lambda p, s: model.apply({"params": p, "batch_stats": s},
                                            x, train=False).argmax(-1))
    return jnp.stack(losses), params, stats, pred(params, stats)


def test_linen_cnn_batchnorm_dropout(devs):
    losses, *_ = both(devs, linen_cnn_training, rtol=1e-3, atol=1e-4)
    assert np.all(np.isfinite(losses))


# --------------------------------------------------------------------------
# flax.linen: layers stacked with nn.scan (parameters with a layer axis),
# rematerialized with nn.remat, a GRU over time with nn.RNN.

class Block(nn.Module):
    @nn.compact
    def __call__(self, h, _):
        y = nn.LayerNorm()(h)
        y = nn.Dense(h.shape[-1] * 2)(y)
        y = nn.silu(y)
        y = nn.Dense(h.shape[-1])(y)
        return h + y, None


class ScannedStack(nn.Module):
    layers: int = 3

    @nn.compact
    def __call__(self, x):
        x = nn.RNN(nn.GRUCell(features=12))(x)           # [B, T, 12]
        stack = nn.scan(nn.remat(Block), variable_axes={"params": 0},
                        split_rngs={"params": True}, length=self.layers)
        x, _ = stack()(x, None)
        return nn.Dense(1)(x).squeeze(-1)


def linen_scan_rnn_training(steps=3):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 7, 5)).astype(np.float32)
    t = rng.standard_normal((4, 7)).astype(np.float32)
    model = ScannedStack()
    params = model.init(jax.random.key(3), x)
    tx = optax.sgd(0.05, momentum=0.9)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt):
        loss, g = jax.value_and_grad(
            lambda p: jnp.mean((model.apply(p, x) - t) ** 2))(params)
        upd, opt = tx.update(g, opt)
        return optax.apply_updates(params, upd), opt, loss

    losses = []
    for _ in range(steps):
        params, opt, loss = step(params, opt)
        losses.append(loss)
    return jnp.stack(losses), params


def test_linen_scan_remat_gru(devs):
    both(devs, linen_scan_rnn_training, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------------
# flax.linen attention: a causal self-attention decoder trained, then decoded
# token by token with flax's own KV cache (decode=True: the cache is written
# with dynamic_update_slice at a traced index), greedy argmax.

VOCAB, D, HEADS, MAXLEN = 17, 16, 2, 8


class Decoder(nn.Module):
    decode: bool = False

    @nn.compact
    def __call__(self, tok):
        h = nn.Embed(VOCAB, D)(tok)
        if not self.decode:
            h = h + self.param("pos", nn.initializers.normal(0.02),
                               (MAXLEN, D))[: tok.shape[1]]
        # No q/k/v biases: the key bias's gradient is 0 analytically
        # (softmax is shift-invariant), noise that adam scales up.
        a = nn.SelfAttention(num_heads=HEADS, decode=self.decode,
                             deterministic=True, use_bias=False)
        mask = None if self.decode else nn.make_causal_mask(tok)
        h = h + a(nn.LayerNorm()(h), mask=mask)
        h = h + nn.Dense(D)(nn.relu(nn.Dense(2 * D)(nn.LayerNorm()(h))))
        return nn.Dense(VOCAB)(nn.LayerNorm()(h))


def linen_attention_train_and_decode(steps=3):
    rng = np.random.default_rng(4)
    tok = rng.integers(0, VOCAB, (3, MAXLEN)).astype(np.int32)
    model = Decoder()
    params = model.init(jax.random.key(5), tok)["params"]
    tx = optax.adam(3e-2)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt):
        def loss_fn(p):
            logits = model.apply({"params": p}, tok[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(
                logits, tok[:, 1:]).mean()
        loss, g = jax.value_and_grad(loss_fn)(params)
        upd, opt = tx.update(g, opt, params)
        return optax.apply_updates(params, upd), opt, loss

    losses = []
    for _ in range(steps):
        params, opt, loss = step(params, opt)
        losses.append(loss)

    dec = Decoder(decode=True)
    p = {k: v for k, v in params.items() if k != "pos"}
    # The cache's length is that of the input init sees: the whole window.
    cache = dec.init(jax.random.key(0), tok)["cache"]

    @jax.jit
    def decode_step(cache, t):
        logits, upd = dec.apply({"params": p, "cache": cache}, t,
                                mutable=["cache"])
        return upd["cache"], logits[:, -1].argmax(-1).astype(jnp.int32)

    t = tok[:, :1]
    out = []
    for _ in range(MAXLEN - 1):
        cache, nxt = decode_step(cache, t)
        out.append(nxt)
        t = nxt[:, None]
    return jnp.stack(losses), params, jnp.stack(out, 1)


def test_linen_attention_kv_cache_decode(devs):
    both(devs, linen_attention_train_and_decode, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------------
# flax.nnx: stateful modules, nnx.Optimizer, nnx.jit with in-place updates,
# nnx.Dropout and nnx.BatchNorm state, nnx.MultiHeadAttention.

class NnxModel(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Linear(6, D, rngs=rngs)
        # No biases: batch norm below removes them (0 gradients, see Decoder)
        self.attn = nnx.MultiHeadAttention(num_heads=HEADS, in_features=D,
                                           decode=False, use_bias=False,
                                           rngs=rngs)
        self.norm = nnx.LayerNorm(D, rngs=rngs)
        self.bn = nnx.BatchNorm(D, rngs=rngs)
        self.drop = nnx.Dropout(0.2, rngs=rngs)
        self.out = nnx.Linear(D, 3, rngs=rngs)

    def __call__(self, x):
        h = self.embed(x)
        h = h + self.attn(self.norm(h))
        h = self.drop(nnx.relu(self.bn(h)))
        return self.out(h.mean(1))


def nnx_training(steps=3):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    y = rng.integers(0, 3, 4).astype(np.int32)
    model = NnxModel(nnx.Rngs(params=7, dropout=8))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer):
        def loss_fn(m):
            return optax.softmax_cross_entropy_with_integer_labels(
                m(x), y).mean()
        loss, g = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, g)
        return loss

    losses = [step(model, optimizer) for _ in range(steps)]
    model.eval()
    logits = nnx.jit(lambda m: m(x))(model)
    return jnp.stack(losses), nnx.state(model, nnx.Param), logits


def test_nnx_optimizer_attention_batchnorm(devs):
    both(devs, nnx_training, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------------
# equinox: filtered jit/grad over a PyTree module, vmap over the batch,
# Conv2d + GroupNorm, a GRUCell under lax.scan, MultiheadAttention.

class EqxNet(eqx.Module):
    conv: eqx.nn.Conv2d
    norm: eqx.nn.GroupNorm
    cell: eqx.nn.GRUCell
    attn: eqx.nn.MultiheadAttention
    head: eqx.nn.MLP

    def __init__(self, key):
        k = jax.random.split(key, 5)
        self.conv = eqx.nn.Conv2d(3, 8, 3, padding=1, key=k[0])
        self.norm = eqx.nn.GroupNorm(2, 8)
        self.cell = eqx.nn.GRUCell(8, 8, key=k[1])
        self.attn = eqx.nn.MultiheadAttention(2, 8, key=k[2])
        self.head = eqx.nn.MLP(8, 4, 16, 2, activation=jax.nn.gelu, key=k[3])

    def __call__(self, img):                        # img: [3, H, W]
        h = jax.nn.relu(self.norm(self.conv(img)))  # [8, H, W]
        seq = h.reshape(8, -1).T                    # [H*W, 8]

        def scan_fn(s, xt):
            s = self.cell(xt, s)
            return s, s
        _, states = jax.lax.scan(scan_fn, jnp.zeros(8), seq)
        a = self.attn(states, states, states)
        return self.head(a.mean(0))


def equinox_training(steps=3):
    x, y = images(n=4, hw=5, classes=4, seed=9)
    x = np.transpose(x, (0, 3, 1, 2)).copy()       # NCHW, equinox's layout
    model = EqxNet(jax.random.key(10))
    tx = optax.adabelief(1e-2)
    opt = tx.init(eqx.filter(model, eqx.is_inexact_array))

    @eqx.filter_jit
    def step(model, opt):
        def loss_fn(m):
            logits = jax.vmap(m)(x)
            return optax.softmax_cross_entropy_with_integer_labels(
                logits, y).mean()
        loss, g = eqx.filter_value_and_grad(loss_fn)(model)
        upd, opt = tx.update(g, opt, eqx.filter(model, eqx.is_inexact_array))
        return eqx.apply_updates(model, upd), opt, loss

    losses = []
    for _ in range(steps):
        model, opt, loss = step(model, opt)
        losses.append(loss)
    return jnp.stack(losses), eqx.filter(model, eqx.is_array)


def test_equinox_conv_gru_attention(devs):
    both(devs, equinox_training, rtol=1e-3, atol=1e-5)


# --------------------------------------------------------------------------
# Scientific libraries built on equinox and jax's control flow: an adaptive
# ODE solve (diffrax: a while loop whose step size is data), a Newton root
# find (optimistix), linear solves (lineax: LU, conjugate gradients), NUTS
# sampling (numpyro: nested while loops, a tree of trajectories).

def diffrax_pendulum():
    diffrax = pytest.importorskip("diffrax")

    def f(t, y, args):
        return jnp.stack([y[1], -args * jnp.sin(y[0])])
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, 5.0, 0.05,
        jnp.array([1.0, 0.0]), args=2.0,
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
        saveat=diffrax.SaveAt(ts=jnp.linspace(0, 5, 11)))
    return sol.ys, sol.stats["num_steps"]


def test_diffrax_adaptive_ode(devs):
    iron, cpu = devs
    (ys, steps), (ys_w, steps_w) = on(iron, diffrax_pendulum), \
        on(cpu, diffrax_pendulum)
    np.testing.assert_allclose(ys, ys_w, rtol=1e-4, atol=1e-5)
    # An accepted/rejected step at the controller's threshold may differ
    # with the last bit of an error estimate.
    assert abs(int(steps) - int(steps_w)) <= 1, (steps, steps_w)


def optimistix_lineax_solves():
    optx = pytest.importorskip("optimistix")
    lx = pytest.importorskip("lineax")
    root = optx.root_find(lambda y, a: jnp.tanh(y) + y - a,
                          optx.Newton(rtol=1e-6, atol=1e-6), jnp.zeros(4),
                          args=jnp.arange(4.0)).value
    a = jnp.asarray(np.random.default_rng(0).standard_normal((6, 6)),
                    jnp.float32) + 6 * jnp.eye(6)
    b = jnp.arange(6.0)
    lu = lx.linear_solve(lx.MatrixLinearOperator(a), b, solver=lx.LU()).value
    cg = lx.linear_solve(
        lx.MatrixLinearOperator(a @ a.T, lx.positive_semidefinite_tag), b,
        solver=lx.CG(rtol=1e-5, atol=1e-5)).value
    return root, lu, cg


def test_optimistix_lineax(devs):
    both(devs, optimistix_lineax_solves, rtol=1e-5, atol=1e-6)


def numpyro_nuts():
    numpyro = pytest.importorskip("numpyro")
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS
    x = np.random.default_rng(1).standard_normal(50).astype(np.float32) + 1

    def model(x):
        mu = numpyro.sample("mu", dist.Normal(0, 5))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2))
        numpyro.sample("obs", dist.Normal(mu, sigma), obs=x)
    m = MCMC(NUTS(model), num_warmup=50, num_samples=50, progress_bar=False)
    m.run(jax.random.key(0), x)
    s = m.get_samples()
    return s["mu"], s["sigma"]


def test_numpyro_nuts(devs):
    # Trajectories amplify rounding differences (transcendentals 1 ulp
    # apart), so the chains agree closely, not bit for bit.
    mu, sigma = both(devs, numpyro_nuts, rtol=0, atol=2e-2)
    assert abs(float(mu.mean()) - 1.0) < 0.5
