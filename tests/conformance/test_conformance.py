"""Op conformance: every (op case, dtype) of ops.py runs on the device under
test (`iron`) and on jax's CPU backend with identical inputs. Results must
have the same dtypes and shapes; bit-exact ops (integers, bools, data
movement, RNG bits, sort order, comparisons, conversions, correctly rounded
float ops) compare bit for bit (NaN payloads aside, signs of zeros
included); the others compare within the case's per-dtype (rtol, atol),
with NaNs and infinities in the same places."""
import contextlib
import hashlib

import numpy as np
import pytest
import jax

import ops


def seed(name):
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def config(c, dt):
    if c.x64 or ops.needs_x64(dt):
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def run_on(fn, args, dev):
    placed = [jax.device_put(a, dev) for a in args]
    with jax.default_device(dev):
        out = jax.jit(fn)(*placed)
    return jax.block_until_ready(out)


def as_float(a):
    """float64/complex128 view of a float-like array (bf16/f16 included)."""
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def uint_view(a):
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def check_exact(g, w, where):
    if g.dtype.kind in "biu" or g.size == 0:
        np.testing.assert_array_equal(g, w, err_msg=where, strict=True)
        return
    if np.iscomplexobj(w):
        check_exact(g.real.copy(), w.real.copy(), where + " (real)")
        check_exact(g.imag.copy(), w.imag.copy(), where + " (imag)")
        return
    gf, wf = as_float(g), as_float(w)
    gn, wn = np.isnan(gf), np.isnan(wf)
    bad = (gn != wn) | (~wn & (uint_view(g) != uint_view(w)))
    if bad.any():
        i = np.flatnonzero(bad.ravel())
        raise AssertionError(
            f"{where}: {len(i)}/{g.size} elements differ bitwise (NaN payloads aside); "
            f"first at flat {i[:6].tolist()}: got {gf.ravel()[i[:6]].tolist()} "
            f"want {wf.ravel()[i[:6]].tolist()}")


def check_close(g, w, rtol, atol, where):
    gf, wf = as_float(g), as_float(w)
    parts = [(gf.real, wf.real), (gf.imag, wf.imag)] if np.iscomplexobj(wf) else [(gf, wf)]
    bad = np.zeros(wf.shape, bool)
    for gp, wp in parts:  # NaN and inf positions (and inf signs) must agree
        bad |= np.isnan(gp) != np.isnan(wp)
        bad |= np.isinf(wp) != np.isinf(gp)
        bad |= np.isinf(wp) & (gp != wp)
    fin = np.isfinite(gf) & np.isfinite(wf)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(fin, np.abs(gf - wf), 0)
        lim = atol + rtol * np.abs(np.where(fin, wf, 0))
    bad |= fin & (err > lim)
    if bad.any():
        i = np.flatnonzero(bad.ravel())
        raise AssertionError(
            f"{where}: {len(i)}/{g.size} elements outside rtol={rtol} atol={atol}; "
            f"first at flat {i[:6].tolist()}: got {gf.ravel()[i[:6]].tolist()} "
            f"want {wf.ravel()[i[:6]].tolist()}")


def compare(got, want, tol, where, atol_by_max=False):
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    g, w = np.asarray(got), np.asarray(want)
    if tol is not None and atol_by_max and w.size:
        fin = np.isfinite(as_float(w))
        big = float(np.abs(as_float(w))[fin].max()) if fin.any() else 0.0
        tol = (tol[0], tol[1] * big)
    if tol is None or tol == (0, 0):
        check_exact(g, w, where)
    else:
        check_close(g, w, tol[0], tol[1], where)


def param_id(p):
    c, dt = p
    return f"{c.name}[{dt.name}]"


@pytest.mark.parametrize("p", ops.all_params(), ids=param_id)
def test_op(p, iron_device, cpu_device):
    c, dt = p
    name = param_id(p)
    with config(c, dt):
        args = c.args(np.random.default_rng(seed(name)), dt)
        fn = c.fn(dt)
        want = run_on(fn, args, cpu_device)
        got = run_on(fn, args, iron_device)
        want_l, want_t = jax.tree_util.tree_flatten(want)
        got_l, got_t = jax.tree_util.tree_flatten(got)
        assert got_t == want_t, f"{name}: output tree {got_t} != {want_t}"
        tol = ops.tolerance(c, dt)
        paths = [jax.tree_util.keystr(k) for k, _ in
                 jax.tree_util.tree_flatten_with_path(want)[0]]
        errors = []
        for path, g, w in zip(paths, got_l, want_l):
            where = f"{name} output {path or 0}"
            assert g.devices() == {iron_device}, f"{where} lives on {g.devices()}"
            try:
                compare(g, w, tol, where, c.atol_by_max)
            except AssertionError as e:  # report every differing output
                errors.append(str(e).splitlines()[0] if len(got_l) > 1 else str(e))
        assert not errors, "\n".join(errors)


@pytest.mark.parametrize("r", ops.REFUSED, ids=lambda r: r.name)
def test_refused(r, iron_device):
    """Unsupported ops fail at compile time with an error naming the op, and
    the device stays usable afterwards."""
    args = [jax.device_put(a, iron_device) for a in r.args(np.random.default_rng(seed(r.name)))]
    with pytest.raises(Exception) as info:
        with jax.default_device(iron_device):
            jax.block_until_ready(jax.jit(r.fn)(*args))
    assert f"{r.op} is not supported yet" in str(info.value), str(info.value)
    x = jax.device_put(np.arange(3, dtype=np.float32), iron_device)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: v + 1)(x)), [1, 2, 3])
