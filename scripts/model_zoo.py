#!/usr/bin/env python3
"""Larger real models than tests/python/test_models.py, for the GPU machine
and for dumping programs (IRON_DUMP_DIR) that the emulated CUDA fusion then
runs (IRON_TEST_CORPUS_DIR=DIR build/tests/test_cuda_fusion_corpus).

Each model is written as its library's users write it (flax linen, flax
nnx, equinox, optax), runs a few training or decode steps on `iron` and on
jax's CPU backend from the same seed, and prints the largest difference of
every output with the tolerance it is held to. Exit status 1 if any model
fails on iron or differs beyond its tolerance.

    JAX_PLATFORMS=iron,cpu python3 scripts/model_zoo.py [--only NAME] [--list]

On the GPU machine: IRON_DEVICE=cuda (the iron device is then the GPU).
"""
import argparse
import os
import sys
import time
import traceback

os.environ.setdefault("JAX_PLATFORMS", "iron,cpu")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402
import equinox as eqx  # noqa: E402

MODELS = {}


def model(rtol, atol):
    def reg(fn):
        MODELS[fn.__name__] = (fn, rtol, atol)
        return fn
    return reg


def train(loss_fn, params, tx, batches, has_state=False, state=None):
    """A jitted optax loop: returns (losses, params[, state])."""
    opt = tx.init(params)

    @jax.jit
    def step(params, state, opt, batch):
        if has_state:
            (loss, state), g = jax.value_and_grad(
                loss_fn, has_aux=True)(params, state, batch)
        else:
            loss, g = jax.value_and_grad(loss_fn)(params, batch)
        upd, opt = tx.update(g, opt, params)
        return optax.apply_updates(params, upd), state, opt, loss

    losses = []
    for b in batches:
        params, state, opt, loss = step(params, state, opt, b)
        losses.append(loss)
    return jnp.stack(losses), params, state


# --- a ResNet with batch norm, strided and 1x1 convolutions (NHWC) --------
class ResBlock(nn.Module):
    ch: int
    stride: int = 1

    @nn.compact
    def __call__(self, x, train):
        norm = lambda: nn.BatchNorm(use_running_average=not train,  # noqa
                                    momentum=0.9)
        y = nn.Conv(self.ch, (3, 3), (self.stride,) * 2, use_bias=False)(x)
        y = nn.relu(norm()(y))
        y = nn.Conv(self.ch, (3, 3), use_bias=False)(y)
        y = norm()(y)
        if x.shape[-1] != self.ch or self.stride != 1:
            x = nn.Conv(self.ch, (1, 1), (self.stride,) * 2,
                        use_bias=False)(x)
            x = norm()(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    @nn.compact
    def __call__(self, x, train):
        x = nn.Conv(16, (3, 3), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train)(x))
        for ch, s in ((16, 1), (32, 2), (64, 2)):
            x = ResBlock(ch, s)(x, train)
        return nn.Dense(10)(jnp.mean(x, (1, 2)))


@model(rtol=2e-3, atol=2e-4)
def resnet_batchnorm():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 10, 16).astype(np.int32)
    m = ResNet()
    v = m.init(jax.random.key(0), x, train=False)

    def loss_fn(p, stats, batch):
        logits, upd = m.apply({"params": p, "batch_stats": stats}, batch[0],
                              train=True, mutable=["batch_stats"])
        return optax.softmax_cross_entropy_with_integer_labels(
            logits, batch[1]).mean(), upd["batch_stats"]
    losses, p, stats = train(loss_fn, v["params"], optax.sgd(0.05, 0.9),
                             [(x, y)] * 3, has_state=True,
                             state=v["batch_stats"])
    return losses, p, stats


# --- a GPT: token + position embeddings, causal attention with dropout,
# GELU MLP, weight-tied output, adamw with a schedule and clipping --------
class GPTBlock(nn.Module):
    d: int
    heads: int

    @nn.compact
    def __call__(self, x, train):
        h = nn.LayerNorm()(x)
        # No q/k/v biases: the key bias's gradient is 0 analytically
        # (softmax is shift-invariant), rounding noise that adam scales up
        # to the learning rate on either backend.
        h = nn.MultiHeadDotProductAttention(
            self.heads, dropout_rate=0.1, deterministic=not train,
            use_bias=False)(
                h, mask=nn.make_causal_mask(jnp.ones(x.shape[:2])))
        x = x + h
        h = nn.Dense(4 * self.d)(nn.LayerNorm()(x))
        h = nn.Dense(self.d)(nn.gelu(h))
        return x + nn.Dropout(0.1, deterministic=not train)(h)


class GPT(nn.Module):
    vocab: int = 97
    d: int = 64
    layers: int = 2
    heads: int = 4
    ctx: int = 32

    @nn.compact
    def __call__(self, tok, train):
        emb = nn.Embed(self.vocab, self.d)
        pos = self.param("pos", nn.initializers.normal(0.02),
                         (self.ctx, self.d))
        x = emb(tok) + pos[: tok.shape[1]]
        for _ in range(self.layers):
            x = GPTBlock(self.d, self.heads)(x, train)
        return emb.attend(nn.LayerNorm()(x))


@model(rtol=2e-3, atol=2e-4)
def gpt_train():
    rng = np.random.default_rng(1)
    tok = rng.integers(0, 97, (8, 33)).astype(np.int32)
    m = GPT()
    p = m.init(jax.random.key(1), tok[:, :-1], train=False)["params"]
    sched = optax.warmup_cosine_decay_schedule(0, 3e-3, 2, 10)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched))

    def loss_fn(p, batch):
        t, key = batch
        logits = m.apply({"params": p}, t[:, :-1], train=True,
                         rngs={"dropout": key})
        return optax.softmax_cross_entropy_with_integer_labels(
            logits, t[:, 1:]).mean()
    keys = jax.random.split(jax.random.key(2), 3)
    losses, p, _ = train(loss_fn, p, tx, [(tok, k) for k in keys])
    return losses, p


# --- sampling from the GPT: top-k, temperature, categorical draws ---------
@model(rtol=1e-4, atol=1e-5)
def gpt_sample_topk():
    m = GPT()
    tok = jnp.zeros((4, 32), jnp.int32)
    p = m.init(jax.random.key(3), tok, train=False)["params"]

    @jax.jit
    def sample(p, key):
        def body(i, c):
            tok, key = c
            key, sub = jax.random.split(key)
            logits = m.apply({"params": p}, tok, train=False)
            lg = jax.lax.dynamic_index_in_dim(logits, i, 1, False) / 0.8
            v, ix = jax.lax.top_k(lg, 8)
            pick = jax.random.categorical(sub, v)
            nxt = jnp.take_along_axis(ix, pick[:, None], 1)[:, 0]
            return tok.at[:, i + 1].set(nxt), key
        return jax.lax.fori_loop(0, 31, body, (tok, key))[0]
    return sample(p, jax.random.key(4))


# --- a U-Net: transposed convolutions, group norm, skip concatenations ----
class UNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        def block(x, ch):
            x = nn.Conv(ch, (3, 3))(x)
            return nn.swish(nn.GroupNorm(num_groups=4)(x))
        e1 = block(x, 16)
        e2 = block(nn.max_pool(e1, (2, 2), (2, 2)), 32)
        mid = block(nn.avg_pool(e2, (2, 2), (2, 2)), 32)
        u2 = nn.ConvTranspose(32, (2, 2), (2, 2))(mid)
        d2 = block(jnp.concatenate([u2, e2], -1), 32)
        u1 = nn.ConvTranspose(16, (2, 2), (2, 2))(d2)
        d1 = block(jnp.concatenate([u1, e1], -1), 16)
        return nn.Conv(x.shape[-1], (1, 1))(d1)


@model(rtol=2e-3, atol=2e-4)
def unet_denoise():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 16, 16, 3)).astype(np.float32)
    m = UNet()
    p = m.init(jax.random.key(5), x)

    def loss_fn(p, batch):
        clean, key = batch
        noisy = clean + 0.3 * jax.random.normal(key, clean.shape)
        return jnp.mean((m.apply(p, noisy) - clean) ** 2)
    keys = jax.random.split(jax.random.key(6), 3)
    losses, p, _ = train(loss_fn, p, optax.adam(1e-3),
                         [(x, k) for k in keys])
    return losses, p


# --- MobileNet-style depthwise separable convolutions (nnx) ---------------
class DepthwiseNet(nnx.Module):
    def __init__(self, rngs):
        self.stem = nnx.Conv(3, 16, (3, 3), strides=2, rngs=rngs)
        self.dw = nnx.Conv(16, 16, (3, 3), feature_group_count=16,
                           rngs=rngs)
        self.pw = nnx.Conv(16, 32, (1, 1), rngs=rngs)
        self.norm = nnx.LayerNorm(32, rngs=rngs)
        self.head = nnx.Linear(32, 5, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu6(self.stem(x))
        x = nnx.relu6(self.pw(nnx.relu6(self.dw(x))))
        return self.head(self.norm(x).mean((1, 2)))


@model(rtol=2e-3, atol=2e-4)
def nnx_depthwise():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 5, 8).astype(np.int32)
    net = DepthwiseNet(nnx.Rngs(7))
    opt = nnx.Optimizer(net, optax.lion(1e-3), wrt=nnx.Param)

    @nnx.jit
    def step(net, opt):
        loss, g = nnx.value_and_grad(
            lambda n: optax.softmax_cross_entropy_with_integer_labels(
                n(x), y).mean())(net)
        opt.update(net, g)
        return loss
    losses = jnp.stack([step(net, opt) for _ in range(3)])
    return losses, nnx.state(net, nnx.Param)


# --- an LSTM language model (equinox, scan over time, vmap over batch) ----
class LSTMLM(eqx.Module):
    emb: eqx.nn.Embedding
    cell: eqx.nn.LSTMCell
    out: eqx.nn.Linear

    def __init__(self, key, vocab=50, d=32):
        k = jax.random.split(key, 3)
        self.emb = eqx.nn.Embedding(vocab, d, key=k[0])
        self.cell = eqx.nn.LSTMCell(d, d, key=k[1])
        self.out = eqx.nn.Linear(d, vocab, key=k[2])

    def __call__(self, tok):
        xs = jax.vmap(self.emb)(tok)

        def f(c, x):
            c = self.cell(x, c)
            return c, c[0]
        init = (jnp.zeros(self.cell.hidden_size),) * 2
        _, hs = jax.lax.scan(f, init, xs)
        return jax.vmap(self.out)(hs)


@model(rtol=2e-3, atol=2e-4)
def equinox_lstm_lm():
    tok = np.random.default_rng(8).integers(0, 50, (6, 21)).astype(np.int32)
    net = LSTMLM(jax.random.key(8))
    tx = optax.rmsprop(3e-3)
    opt = tx.init(eqx.filter(net, eqx.is_array))

    @eqx.filter_jit
    def step(net, opt):
        def loss_fn(n):
            logits = jax.vmap(n)(tok[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(
                logits, tok[:, 1:]).mean()
        loss, g = eqx.filter_value_and_grad(loss_fn)(net)
        upd, opt = tx.update(g, opt, eqx.filter(net, eqx.is_array))
        return eqx.apply_updates(net, upd), opt, loss
    losses = []
    for _ in range(3):
        net, opt, loss = step(net, opt)
        losses.append(loss)
    return jnp.stack(losses), eqx.filter(net, eqx.is_array)


# --- a vision transformer in bf16 with f32 master weights -----------------
@model(rtol=3e-2, atol=3e-2)
def vit_bf16_mixed():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 10, 8).astype(np.int32)

    class ViT(nn.Module):
        @nn.compact
        def __call__(self, img):
            h = nn.Conv(48, (4, 4), (4, 4), dtype=jnp.bfloat16)(img)
            h = h.reshape(h.shape[0], -1, 48)
            cls = self.param("cls", nn.initializers.zeros, (1, 1, 48))
            h = jnp.concatenate(
                [jnp.broadcast_to(cls, (h.shape[0], 1, 48)).astype(h.dtype),
                 h], 1)
            for _ in range(2):
                a = nn.MultiHeadDotProductAttention(
                    4, dtype=jnp.bfloat16)(nn.LayerNorm(dtype=jnp.bfloat16)(h))
                h = h + a
                m = nn.Dense(96, dtype=jnp.bfloat16)(
                    nn.LayerNorm(dtype=jnp.bfloat16)(h))
                h = h + nn.Dense(48, dtype=jnp.bfloat16)(nn.gelu(m))
            return nn.Dense(10)(h[:, 0].astype(jnp.float32))
    m = ViT()
    p = m.init(jax.random.key(9), x)

    def loss_fn(p, batch):
        return optax.softmax_cross_entropy_with_integer_labels(
            m.apply(p, batch[0]), batch[1]).mean()
    losses, p, _ = train(loss_fn, p, optax.adam(1e-3), [(x, y)] * 3)
    return losses


# --- programs nobody here wrote, eighteenth session: MoE routing (top_k,
# scatter-add with mode=drop), segment sums/max, a data-dependent while
# sampler, associative_scan, long sorts and order statistics, a top-p
# decode with a fori_loop KV cache, beam search, dilated/transposed/grouped
# convolutions, remat'd scanned attention, jax.random's samplers ---------
@model(rtol=0.002, atol=0.0002)
def moe_train():
    E, D, H, T, K = 8, 32, 64, 128, 2
    k = jax.random.PRNGKey(0); ks = jax.random.split(k, 5)
    p = dict(wg=jax.random.normal(ks[0], (D, E)) * .1, w1=jax.random.normal(ks[1], (E, D, H)) * .1,
             w2=jax.random.normal(ks[2], (E, H, D)) * .1)
    x = jax.random.normal(ks[3], (T, D)); y = jax.random.normal(ks[4], (T, D))
    def loss(p, x, y):
        logits = x @ p["wg"]
        g, idx = jax.lax.top_k(jax.nn.softmax(logits), K)
        cap = T * K // E + 4
        oh = jax.nn.one_hot(idx, E)  # T,K,E
        pos = (jnp.cumsum(oh.reshape(T * K, E), 0).reshape(T, K, E) - 1) * oh
        pos = pos.sum(-1).astype(jnp.int32)
        keep = pos < cap
        buf = jnp.zeros((E, cap, D)).at[idx, jnp.where(keep, pos, cap)].add(
            jnp.broadcast_to(x[:, None], (T, K, D)), mode="drop")
        h = jax.nn.gelu(jnp.einsum("ecd,edh->ech", buf, p["w1"]))
        o = jnp.einsum("ech,ehd->ecd", h, p["w2"])
        out = (o.at[idx, jnp.where(keep, pos, 0)].get(mode="clip") * (g * keep)[..., None]).sum(1)
        return jnp.mean((out - y) ** 2) + 0.01 * jnp.mean(jax.scipy.special.logsumexp(logits, -1) ** 2)
    tx = optax.adamw(1e-2); opt = tx.init(p)
    @jax.jit
    def step(p, opt):
        l, g = jax.value_and_grad(loss)(p, x, y)
        u, opt = tx.update(g, opt, p); return optax.apply_updates(p, u), opt, l
    ls = []
    for _ in range(4):
        p, opt, l = step(p, opt); ls.append(l)
    return jnp.stack(ls), p

@model(rtol=0.001, atol=0.0001)
def gnn_segment():
    N, Ed, F = 200, 900, 16
    rng = np.random.default_rng(1)
    src = jnp.asarray(rng.integers(0, N, Ed)); dst = jnp.asarray(rng.integers(0, N, Ed))
    x = jnp.asarray(rng.normal(size=(N, F)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(F, F)) * .2, jnp.float32)
    def f(w, x):
        for _ in range(3):
            m = jnp.tanh(x[src] @ w)
            agg = jax.ops.segment_sum(m, dst, N)
            deg = jax.ops.segment_sum(jnp.ones(Ed), dst, N)
            mx = jax.ops.segment_max(m, dst, N)
            x = x + agg / jnp.maximum(deg, 1)[:, None] + jnp.where(jnp.isfinite(mx), mx, 0)
        return jnp.sum(x ** 2) / N
    return jax.jit(jax.value_and_grad(f))(w, x)

@model(rtol=0.0001, atol=1e-05)
def diffusion_while():
    def sample(key):
        x = jax.random.normal(key, (16, 32))
        def cond(c): return (c[0] < 25) & (jnp.max(jnp.abs(c[1])) < 1e3)
        def body(c):
            i, x, k = c
            k, s = jax.random.split(k)
            t = 1.0 - i / 25
            x = x - 0.04 * x * t + 0.02 * jax.random.normal(s, x.shape)
            return i + 1, x, k
        return jax.lax.while_loop(cond, body, (0, x, key))
    return jax.jit(sample)(jax.random.PRNGKey(3))

@model(rtol=0.001, atol=0.0001)
def assoc_scan_ssm():
    T, D = 257, 24
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.uniform(.5, .99, (T, D)), jnp.float32)
    b = jnp.asarray(rng.normal(size=(T, D)), jnp.float32)
    def f(a, b):
        def op(l, r): return (l[0] * r[0], r[0] * l[1] + r[1])
        _, h = jax.lax.associative_scan(op, (a, b))
        return jnp.sum(jnp.sin(h)), h
    return jax.jit(jax.value_and_grad(f, has_aux=True))(a, b)

@model(rtol=1e-06, atol=1e-06)
def sort_stats():
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=100_003), jnp.float32)
    xi = jnp.asarray(rng.integers(-50, 50, 70_001), jnp.int32)
    def f(x, xi):
        u = jnp.unique(xi, size=120, fill_value=0)
        return (jnp.sort(x), jnp.argsort(x, stable=True), u, jnp.median(x), jnp.percentile(x, jnp.array([5., 50., 95.])),
                jnp.searchsorted(jnp.sort(x), x[:1000]), jax.lax.top_k(x, 17), jnp.argsort(-xi, stable=True),
                jnp.bincount(xi + 50, length=100), jnp.cumsum(xi), jnp.cumprod(x[:64]))
    return jax.jit(f)(x, xi)

@model(rtol=0.0001, atol=1e-05)
def top_p_decode():
    V, D, L, S = 97, 32, 3, 40
    k = jax.random.PRNGKey(5); ks = jax.random.split(k, 4)
    emb = jax.random.normal(ks[0], (V, D)); wqkv = jax.random.normal(ks[1], (L, D, 3 * D)) * .2
    def gen(key):
        cache = jnp.zeros((L, 2, S, D))
        def step(carry, _):
            tok, pos, cache, key = carry
            h = emb[tok]
            def layer(i, hc):
                h, cache = hc
                q, kk, v = jnp.split(h @ wqkv[i], 3)
                cache = cache.at[i, 0, pos].set(kk).at[i, 1, pos].set(v)
                s = cache[i, 0] @ q / np.sqrt(D)
                s = jnp.where(jnp.arange(S) <= pos, s, -jnp.inf)
                h = h + jax.nn.softmax(s) @ cache[i, 1]
                return h, cache
            h, cache = jax.lax.fori_loop(0, L, layer, (h, cache))
            logits = emb @ h
            sl = jnp.sort(logits)[::-1]; cp = jnp.cumsum(jax.nn.softmax(sl))
            thr = sl[jnp.sum(cp < 0.9)]
            logits = jnp.where(logits >= thr, logits, -jnp.inf)
            key, s = jax.random.split(key)
            tok = jax.random.categorical(s, logits)
            return (tok, pos + 1, cache, key), tok
        _, toks = jax.lax.scan(step, (jnp.int32(1), jnp.int32(0), cache, key), None, length=S)
        return toks
    return jax.jit(gen)(jax.random.PRNGKey(6))

@model(rtol=1e-05, atol=1e-05)
def beam_search():
    V, B, S = 50, 4, 12
    tbl = jax.random.normal(jax.random.PRNGKey(7), (V, V))
    def search():
        scores = jnp.zeros(B).at[1:].set(-1e9); seqs = jnp.zeros((B, S), jnp.int32)
        def body(i, c):
            scores, seqs = c
            last = seqs[:, jnp.maximum(i - 1, 0)]
            lp = jax.nn.log_softmax(tbl[last])
            tot = (scores[:, None] + lp).reshape(-1)
            top, ix = jax.lax.top_k(tot, B)
            beam, tok = ix // V, ix % V
            seqs = seqs[beam].at[:, i].set(tok)
            return top, seqs
        return jax.lax.fori_loop(0, S, body, (scores, seqs))
    return jax.jit(search)()

@model(rtol=0.001, atol=0.0001)
def conv_transpose_dilated():
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(8, (3,), kernel_dilation=2, padding="SAME")(x)
            x = nn.relu(x)
            x = nn.ConvTranspose(4, (4,), strides=(2,))(x)
            x = nn.Conv(6, (3, 3), feature_group_count=2, strides=2)(x.reshape(x.shape[0], 8, -1, 4))
            x = nn.GroupNorm(num_groups=2)(x)
            return nn.max_pool(x, (2, 2), padding="SAME").mean()
    x = jax.random.normal(jax.random.PRNGKey(8), (3, 32, 4))
    net = Net(); p = net.init(jax.random.PRNGKey(9), x)
    return jax.jit(jax.value_and_grad(lambda p: net.apply(p, x)))(p)

@model(rtol=0.001, atol=0.0001)
def remat_scan_attention():
    B, T, H, Dh = 2, 16, 4, 8
    ks = jax.random.split(jax.random.PRNGKey(10), 4)
    q, k, v = (jax.random.normal(kk, (B, T, H, Dh)) for kk in ks[:3])
    w = jax.random.normal(ks[3], (3, H * Dh, H * Dh)) * .1
    def f(w, q, k, v):
        @jax.checkpoint
        def blk(x, wi):
            x = x + jax.nn.dot_product_attention(x, k, v, is_causal=True)
            return jnp.tanh((x.reshape(B, T, -1) @ wi).reshape(B, T, H, Dh)), None
        x, _ = jax.lax.scan(blk, q, w)
        return jnp.mean(x ** 2)
    return jax.jit(jax.value_and_grad(f))(w, q, k, v)

@model(rtol=1e-05, atol=1e-05)
def rng_heavy():
    def f(key):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        return (jax.random.bernoulli(k1, 0.3, (1000,)), jax.random.randint(k2, (500,), -7, 1 << 20),
                jax.random.permutation(k3, 1000), jax.random.gamma(k4, jnp.linspace(.2, 5, 64)),
                jax.random.choice(k1, 100, (20,), replace=False), jax.random.truncated_normal(k2, -1, 2, (300,)),
                jax.vmap(lambda k: jax.random.uniform(k, (3,)))(jax.random.split(k3, 50)))
    return jax.jit(f)(jax.random.PRNGKey(11))


# --- more of them: an nnx block with RoPE and lion, an equinox ensemble
# under filter_vmap, switch/cond inside a scan, an optax chain under
# MultiSteps, integer bit ops, gathers and scatters with clamped and
# dropped indices, cumulative reductions, a bf16 conv + batch norm (its
# first conv's bias gradient is bf16 noise around 0: atol 1e-2), small
# linear algebra, nested data-dependent while loops ------------------
@model(rtol=0.001, atol=0.0001)
def rope_nnx_lm():
    class Attn(nnx.Module):
        def __init__(self, d, h, rngs):
            self.qkv = nnx.Linear(d, 3 * d, rngs=rngs); self.o = nnx.Linear(d, d, rngs=rngs); self.h = h
            self.norm = nnx.RMSNorm(d, rngs=rngs)
        def __call__(self, x):
            B, T, D = x.shape; h = self.h; dh = D // h
            q, k, v = jnp.split(self.qkv(self.norm(x)), 3, -1)
            q, k, v = (t.reshape(B, T, h, dh) for t in (q, k, v))
            pos = jnp.arange(T)[:, None]; fr = 1.0 / (10000 ** (jnp.arange(0, dh, 2) / dh))
            ang = pos * fr; c, s = jnp.cos(ang)[None, :, None], jnp.sin(ang)[None, :, None]
            def rot(t):
                t1, t2 = t[..., ::2], t[..., 1::2]
                return jnp.stack([t1 * c - t2 * s, t1 * s + t2 * c], -1).reshape(t.shape)
            q, k = rot(q), rot(k)
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(B, T, D)
            return x + self.o(y)
    m = Attn(32, 4, nnx.Rngs(0)); opt = nnx.Optimizer(m, optax.lion(1e-3), wrt=nnx.Param)
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 16, 32))
    @nnx.jit
    def step(m, opt, x):
        l, g = nnx.value_and_grad(lambda m: jnp.mean(m(x) ** 2))(m)
        opt.update(m, g); return l
    return jnp.stack([step(m, opt, x) for _ in range(3)]), nnx.state(m, nnx.Param)

@model(rtol=0.001, atol=0.0001)
def eqx_ensemble_vmap():
    keys = jax.random.split(jax.random.PRNGKey(2), 5)
    mk = eqx.filter_vmap(lambda k: eqx.nn.MLP(4, 2, 16, 2, key=k))
    ens = mk(keys)
    x = jax.random.normal(jax.random.PRNGKey(3), (7, 4))
    @eqx.filter_jit
    def f(ens, x):
        def loss(ens):
            out = eqx.filter_vmap(lambda m: jax.vmap(m)(x))(ens)
            return jnp.mean(jax.nn.log_softmax(out, -1)[..., 0])
        return eqx.filter_value_and_grad(loss)(ens)
    l, g = f(ens, x)
    return l, jax.tree_util.tree_leaves(eqx.filter(g, eqx.is_array))

@model(rtol=0.0001, atol=1e-05)
def switch_cond_scan():
    def f(x):
        def body(c, i):
            c = jax.lax.switch(i % 3, [lambda c: c * 1.1, lambda c: jnp.sin(c), lambda c: c[::-1] + 1.0], c)
            c = jax.lax.cond(jnp.sum(c) > 0, lambda c: c - 0.5, lambda c: c + 0.25, c)
            return c, jnp.max(c)
        return jax.lax.scan(body, x, jnp.arange(20))
    return jax.jit(jax.value_and_grad(lambda x: f(x)[1].sum()))(jnp.linspace(-1, 1, 9))

@model(rtol=0.0001, atol=1e-05)
def optax_chain_schedules():
    p = {"w": jnp.ones((8, 8)) * 0.1, "b": jnp.zeros(8)}
    tx = optax.chain(optax.clip(0.5), optax.add_decayed_weights(1e-2),
                     optax.scale_by_adam(), optax.scale_by_schedule(optax.exponential_decay(1e-2, 3, 0.5)),
                     optax.scale(-1.0))
    tx = optax.MultiSteps(tx, every_k_schedule=2)
    s = tx.init(p)
    x = jnp.linspace(-1.5, 2.5, 64).reshape(8, 8)  # no cancelling grads: adam amplifies
    @jax.jit
    def step(p, s):
        g = jax.grad(lambda p: jnp.sum(jnp.tanh(x @ p["w"] + p["b"]) ** 2))(p)
        u, s = tx.update(g, s, p); return optax.apply_updates(p, u), s
    for _ in range(5): p, s = step(p, s)
    return p

@model(rtol=1e-06, atol=1e-06)
def int_bit_ops():
    def f(a, b):
        return (jnp.left_shift(a, b % 33), jnp.right_shift(a, b % 40), jax.lax.shift_right_logical(a, b % 35),
                jax.lax.population_count(a), jax.lax.clz(a), a // (b | 1), a % (b | 1), jnp.bitwise_xor(a, b) & 0xff,
                (a.astype(jnp.uint8) * 7).astype(jnp.int16), jnp.cumsum(a.astype(jnp.int8)), a.view(jnp.float32) > 0)
    r = np.random.default_rng(5)
    a = jnp.asarray(r.integers(-2**31, 2**31 - 1, 257), jnp.int32); b = jnp.asarray(r.integers(-100, 100, 257), jnp.int32)
    return jax.jit(f)(a, b)

@model(rtol=1e-06, atol=1e-06)
def gather_scatter_nd():
    r = np.random.default_rng(6)
    x = jnp.asarray(r.normal(size=(6, 7, 5)), jnp.float32)
    i = jnp.asarray(r.integers(-2, 8, (11, 2)), jnp.int32)
    def f(x, i):
        g = x[i[:, 0], :, i[:, 1] % 5]
        s = jnp.zeros((6, 5)).at[i[:, 0], i[:, 1]].add(1.0, mode="drop")
        m = jnp.full((6, 5), -jnp.inf).at[i[:, 0] % 6, i[:, 1] % 5].max(g[:, 0])
        t = jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
        return g, s, m, t, x.at[1:4, ::2].set(0.0), jnp.where(x > 0, x, 0).nonzero(size=20, fill_value=-1)
    return jax.jit(f)(x, i)

@model(rtol=0.0001, atol=1e-05)
def cumulative_reductions():
    r = np.random.default_rng(7)
    x = jnp.asarray(r.normal(size=(5, 300)), jnp.float32)
    f = lambda x: (jax.lax.cummax(x, 1), jax.lax.cumlogsumexp(x, 1), jnp.cumprod(1 + 0.01 * x, 0), jnp.argmax(x, 1),
                   jnp.argmin(x, 0), jnp.var(x, 1), jnp.nanmean(jnp.where(x > 1, jnp.nan, x), 1),
                   jax.scipy.special.logsumexp(x, axis=0, b=jnp.abs(x)), jnp.linalg.norm(x, axis=1), jnp.any(x > 2.5, 1))
    return jax.jit(f)(x)

@model(rtol=0.03, atol=0.01)
def conv_pool_bn_bf16():
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train):
            x = nn.Conv(16, (3, 3), dtype=jnp.bfloat16)(x)
            x = nn.BatchNorm(use_running_average=not train, dtype=jnp.bfloat16)(x)
            x = nn.avg_pool(nn.relu(x), (2, 2), (2, 2))
            x = nn.Conv(8, (1, 1), dtype=jnp.bfloat16)(x)
            return nn.Dense(3)(x.reshape(x.shape[0], -1).astype(jnp.float32))
    x = jax.random.normal(jax.random.PRNGKey(8), (4, 8, 8, 3))
    n = Net(); v = n.init(jax.random.PRNGKey(9), x, False)
    def loss(p, s):
        out, upd = n.apply({"params": p, **s}, x, True, mutable=["batch_stats"])
        return jnp.mean(out ** 2), upd
    (l, upd), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(v["params"], {"batch_stats": v["batch_stats"]})
    return l, g, upd

@model(rtol=0.0001, atol=0.0001)
def linalg_mix():
    r = np.random.default_rng(10)
    a = jnp.asarray(r.normal(size=(6, 6)), jnp.float32); spd = a @ a.T + 6 * jnp.eye(6)
    f = lambda a, s: (jnp.linalg.solve(s, a), jnp.linalg.cholesky(s), jnp.linalg.slogdet(s),
                      jnp.linalg.inv(s), jax.scipy.linalg.solve_triangular(jnp.tril(s), a, lower=True),
                      jnp.einsum("ij,jk,kl->il", a, s, a), jnp.trace(s @ s), jnp.kron(a[:2, :2], s[:2, :2]))
    return jax.jit(f)(a, spd)

@model(rtol=0.0001, atol=1e-05)
def while_nested_reduce():
    def f(x):
        def outer(c):
            i, x = c
            def inner(d):
                j, y = d
                return j + 1, y * 0.9 + jnp.mean(y)
            _, x = jax.lax.while_loop(lambda d: (d[0] < 4) & (jnp.max(jnp.abs(d[1])) > 1e-3), inner, (0, x))
            return i + 1, x - jnp.min(x)
        return jax.lax.while_loop(lambda c: (c[0] < 6) & (jnp.sum(c[1]) < 1e4), outer, (0, x))
    return jax.jit(f)(jnp.linspace(0, 3, 50))


def run(name, dev):
    fn = MODELS[name][0]
    with jax.default_device(dev):
        out = fn()
        return jax.tree_util.tree_map(np.asarray, jax.device_get(out))


def compare(got, want, rtol, atol):
    """[(path, max abs diff, ok)] over the leaves."""
    rows = []
    gl = jax.tree_util.tree_flatten_with_path(got)[0]
    wl = jax.tree_util.tree_flatten_with_path(want)[0]
    if len(gl) != len(wl):
        return [("structure", float("inf"), False)]
    for (path, g), (_, w) in zip(gl, wl):
        if g.shape != w.shape or g.dtype != w.dtype:
            rows.append((jax.tree_util.keystr(path), float("inf"), False))
            continue
        if np.issubdtype(g.dtype, np.integer) or g.dtype == np.bool_:
            ok = bool(np.array_equal(g, w))
            d = float(np.max(np.abs(g.astype(np.int64) - w))) if g.size else 0.
        else:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            ok = bool(np.allclose(g64, w64, rtol=rtol, atol=atol,
                                  equal_nan=True))
            d = float(np.nanmax(np.abs(g64 - w64))) if g.size else 0.
        rows.append((jax.tree_util.keystr(path), d, ok))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    iron, cpu = jax.devices("iron")[0], jax.devices("cpu")[0]
    print(f"iron device: {iron.device_kind}", flush=True)
    bad = 0
    for name, (_, rtol, atol) in MODELS.items():
        if args.only and args.only not in name:
            continue
        t0 = time.time()
        try:
            got = run(name, iron)
        except Exception as e:  # noqa: BLE001
            bad += 1
            print(f"FAIL {name}: iron raised {type(e).__name__}: "
                  f"{str(e)[:2000]}")
            traceback.print_exc(limit=3)
            continue
        t1 = time.time()
        want = run(name, cpu)
        rows = compare(got, want, rtol, atol)
        worst = max(rows, key=lambda r: r[1]) if rows else ("-", 0., True)
        ok = all(r[2] for r in rows)
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(rows)} outputs, "
              f"max diff {worst[1]:.3g} at {worst[0]} (rtol {rtol}, atol "
              f"{atol}); iron {t1 - t0:.1f}s, cpu {time.time() - t1:.1f}s",
              flush=True)
        if not ok:
            for r in rows:
                if not r[2]:
                    print(f"    {r[0]}: {r[1]:.3g}")
    print(f"model zoo: {len(MODELS) if not args.only else '-'} models, "
          f"{bad} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
