"""bench/kernels.py must not rot: every program runs end to end on iron and
XLA:CPU at smoke sizes, with iron's results within each program's
tolerance; the input generator gives the same bits in jax (uint32, on iron
and on cpu) and in the int64 arithmetic the torch worker uses (run here in
numpy, since torch is not a test requirement); the error measure flags
wrong answers."""
import importlib.util
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "kernels.py")


def _load_bench():
    spec = importlib.util.spec_from_file_location("ironjax_bench_kernels", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.jax, mod.jnp, mod.lax = jax, jnp, jax.lax  # what its jax worker binds
    return mod


@pytest.fixture(scope="module")
def kb():
    return _load_bench()


def _lowbias32(x):
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_hash_i64_is_lowbias32(kb):
    xs = [0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 123456789]
    xs += [int(v) for v in np.random.default_rng(0).integers(0, 1 << 32, 200)]
    got = kb.hash_i64(np.array(xs, np.int64))
    assert got.tolist() == [_lowbias32(x) for x in xs]


def test_generated_floats_are_never_zero(kb):
    for dist in ("mix", "sym", "pos", "newton"):
        v = kb.gen_numpy(kb.Inp((1 << 20,), dist=dist), kb.stream_offset(0, 0))
        assert np.all(v != 0) and np.all(np.isfinite(v)), dist
        assert len(np.unique(v)) > (1 << 19), dist  # random, not a pattern


@pytest.mark.parametrize("dev", ["iron", "cpu"])
@pytest.mark.parametrize("inp", [
    dict(shape=(1000,), dist="mix"), dict(shape=(7, 33), dist="sym", scale=0.25),
    dict(shape=(300,), dist="pos", scale=4.0), dict(shape=(513,), dist="newton"),
    dict(shape=(64,), dtype="i32", dist="label", scale=10),
    dict(shape=(5, 6), dist="full", scale=3.0), dict(shape=(), dist="mix"),
    dict(shape=(2, 500), dtype="bf16", dist="mix", scale=2.0)],
    ids=lambda d: f"{d.get('dtype', 'f32')}-{d['dist']}-{d['shape']}")
def test_generator_same_bits_in_jax_and_int64(kb, dev, inp):
    inp = kb.Inp(**inp)
    device = jax.devices(dev)[0]
    for copy, index in ((0, 0), (3, 1), (31, 7)):
        off = kb.stream_offset(copy, index)
        with jax.default_device(device):
            got = np.asarray(kb.make_gen_jax(inp)(np.uint32(off)))
        want = kb.gen_numpy(inp, off)
        if inp.dtype == "bf16":
            want = want.astype(jnp.bfloat16)  # numpy (ml_dtypes): round to nearest even
        assert got.shape == inp.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got.reshape(-1).view(np.uint8),
                                      want.reshape(-1).view(np.uint8))
        if inp.dist not in ("full", "label"):
            assert np.all(got != 0)


def test_rel_err_flags_wrong_answers(kb):
    ref = [np.linspace(-2, 3, 101).tolist(), [7.0]]
    assert kb.rel_err(ref, ref) == 0.0
    bad = [list(ref[0]), [7.0]]
    bad[0][10] *= 1.01  # -1.5
    assert 5e-3 < kb.rel_err(bad, ref) < 2e-2
    assert kb.rel_err([ref[0]], ref) == float("inf")          # missing output
    assert kb.rel_err([ref[0][:-1], [7.0]], ref) == float("inf")  # shape
    assert kb.rel_err([ref[0], [float("nan")]], ref) == float("inf")
    assert kb.rel_err([[float("nan")], [1.0]], [[float("nan")], [1.0]]) == 0.0
    # Elements far below the largest are measured against 1e-3 of it.
    assert kb.rel_err([[1.0, 1e-9]], [[1.0, 0.0]]) == pytest.approx(1e-6)


def test_every_program_has_both_implementations(kb):
    for smoke in (False, True):
        progs = kb.programs(smoke)
        assert len({p.name for p in progs}) == len(progs)
        assert {p.group for p in progs} == set(kb.GROUPS)
        for p in progs:
            assert p.cnn or p.decode or (p.jax_fn and p.torch_fn), p.name
    assert set(kb.QUICK) <= {p.name for p in kb.programs()}


# The whole benchmark in smoke mode (minutes on 2 cores); its generators
# are checked by the other tests of this file.
@pytest.mark.slow
def test_smoke_run_iron_vs_cpu(tmp_path):
    env = dict(os.environ)
    spec = importlib.util.find_spec("ironjax")
    tree = os.path.join(ROOT, "python")
    if spec is None or os.path.abspath(spec.origin).startswith(tree + os.sep):
        # The plugin this session tests is the source tree's (conftest put
        # it on sys.path): the workers need it on theirs.
        env["PYTHONPATH"] = os.pathsep.join(
            [tree] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    out_json, out_md = tmp_path / "k.json", tmp_path / "k.md"
    p = subprocess.run([sys.executable, BENCH, "--smoke", "--frameworks", "iron,cpu",
                        "--json", str(out_json), "--md", str(out_md)],
                       env=env, capture_output=True, text=True, timeout=1200)
    log = (p.stdout[-4000:] + "\n" + p.stderr[-2000:])
    assert out_json.exists(), log
    data = json.loads(out_json.read_text())
    names = [p.name for p in _load_bench().programs(smoke=True)]
    rows = {r["name"]: r for r in data["rows"]}
    assert list(rows) == names, log
    assert data["roofline"]["gbps"], log
    for n, r in rows.items():
        for fw in ("iron", "cpu"):
            e = r["fw"][fw]
            assert not e["errors"] and e["median_s"], (n, fw, e["errors"], log)
        assert r["fw"]["iron"]["err"] is not None and r["fw"]["iron"]["ok"], (n, r["fw"]["iron"]["err"])
    assert rows["newton_while"]["fw"]["iron"]["iters"] == rows["newton_while"]["fw"]["cpu"]["iters"] > 5
    assert p.returncode == 0, log
    md = out_md.read_text()
    assert all(f"| {n}: " in md for n in names), md
    assert "program" in p.stdout and "copy roofline" in p.stdout
