"""The fuse_reductions Tile IR pass: consecutive tile_range passes over the same rows whose
reductions combine run as one pass when the compiler can verify the algebra on the IR (the seed
README softmax becomes an online softmax; independent sums run together), and nothing changes
where the laws do not hold. Every kernel runs fused and unfused (fuse_reductions=False) on every
device, ragged N, against float64 numpy."""

import re

import numpy as np
import pytest

import metile
from kernels import layernorm_loops, seed_softmax as softmax, rmsnorm as rmsnorm_loops

SENTINEL = 12345.0


def count_for(kernel, *args, **kw):
    text = kernel[(1,)].compile(*args, **kw).source("tile_ir_opt")
    return len(re.findall(r"^\s*(?:%[\w%, ]+ = )?for ", text, re.M))


# Triton's habit: -inf for masked lanes and a -inf start, so lanes that see no element keep -inf.
@metile.kernel
def softmax_inf(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    m = metile.full((BLOCK,), -float("inf"), "f32")
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        m = metile.maximum(m, x)
    mx = metile.max(m)
    s = metile.zeros((BLOCK,), "f32")
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        s = s + metile.exp2((x - mx))
    total = metile.sum(s)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        metile.store(Out + row * N + cols, metile.exp2(x - mx) / total, mask=mask)


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _rows(n):
    r = np.random.default_rng(n)
    return np.stack([r.standard_normal(n) * 3, -(1 + r.random(n) * 5), np.full(n, 2.5),
                     np.linspace(-40, 40, n)]).astype(np.float32)


@pytest.mark.parametrize("n", [1, 37, 64, 300, 1000])
@pytest.mark.parametrize("fuse", [True, False])
def test_seed_softmax(device, n, fuse):
    x = _rows(n)
    for block in (32, 256):
        out = np.full_like(x, SENTINEL)
        softmax[(len(x),)](x, out, n, BLOCK=block, fuse_reductions=fuse)
        np.testing.assert_allclose(out, _softmax_ref(x), rtol=2e-5, atol=1e-7,
                                   err_msg=f"N={n} BLOCK={block} fuse={fuse}")
    assert count_for(softmax, x, out, n, BLOCK=32, fuse_reductions=fuse) == (2 if fuse else 3)


@pytest.mark.parametrize("n", [1, 37, 300])
@pytest.mark.parametrize("fuse", [True, False])
def test_softmax_with_inf_lanes(device, n, fuse):
    x = _rows(n)
    x[0, : n // 2] = -np.inf  # -inf elements add exp(-inf) = 0 in both forms
    out = np.full_like(x, SENTINEL)
    softmax_inf[(len(x),)](x, out, n, BLOCK=64, fuse_reductions=fuse)
    xd = x.astype(np.float64)
    e = np.exp2(xd - xd.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-7)
    assert count_for(softmax_inf, x, out, n, BLOCK=64, fuse_reductions=fuse) == (2 if fuse else 3)


@pytest.mark.parametrize("n", [1, 37, 300, 1000])
@pytest.mark.parametrize("fuse", [True, False])
def test_layernorm_loops(device, n, fuse):
    r = np.random.default_rng(n)
    x = (r.standard_normal((3, n)) + 0.5).astype(np.float32)
    w, b = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    out = np.full_like(x, SENTINEL)
    layernorm_loops[(3,)](x, w, b, out, n, BLOCK=64, fuse_reductions=fuse)
    xd = x.astype(np.float64)
    mu = xd.mean(axis=1, keepdims=True)
    ref = (xd - mu) / np.sqrt(xd.var(axis=1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert count_for(layernorm_loops, x, w, b, out, n, BLOCK=64,
                     fuse_reductions=fuse) == (2 if fuse else 3)


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_rmsnorm_loops_keep_their_store_pass(device, n):
    r = np.random.default_rng(n)
    x, w = r.standard_normal((3, n)).astype(np.float32), r.standard_normal(n).astype(np.float32)
    out = np.full_like(x, SENTINEL)
    rmsnorm_loops[(3,)](x, w, out, n, BLOCK=64)
    xd = x.astype(np.float64)
    ref = xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert count_for(rmsnorm_loops, x, w, out, n, BLOCK=64) == 2


# ---- where the laws do not hold, the IR stays as written -----------------------------------

@metile.kernel
def not_rescalable(X, Out, N, BLOCK: metile.constexpr):
    # exp(x) * m is not of the form E(e - M): no rescaling recovers it from a running max.
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        m = metile.maximum(m, metile.load(X + cols, mask=cols < N))
    m = metile.max(m)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.exp(metile.load(X + cols, mask=cols < N)) * m
    metile.store(Out, metile.sum(s))


@metile.kernel
def other_element(X, Y, Out, N, BLOCK: metile.constexpr):
    # The max is over X but the exponentials over Y: exponents may be positive, so no merge.
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        m = metile.maximum(m, metile.load(X + cols, mask=cols < N))
    m = metile.max(m)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.exp(metile.load(Y + cols, mask=cols < N) - m)
    metile.store(Out, metile.sum(s))


@metile.kernel
def nonzero_start(X, Out, N, BLOCK: metile.constexpr):
    # The sum starts at 1, not the identity of +: 1 is not relative to the running max.
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        m = metile.maximum(m, metile.load(X + cols, mask=cols < N))
    m = metile.max(m)
    s = 1.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.exp(metile.load(X + cols, mask=cols < N) - m)
    metile.store(Out, metile.sum(s))


@metile.kernel
def min_not_max(X, Out, N, BLOCK: metile.constexpr):
    # A running min, then exp(x - min): the exponents are >= 0, not the max homomorphism's form.
    m = 1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        m = metile.minimum(m, metile.load(X + cols, mask=cols < N))
    m = metile.min(m)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.exp(metile.load(X + cols, mask=cols < N) - m)
    metile.store(Out, metile.sum(s))


@metile.kernel
def other_bounds(X, Out, N, BLOCK: metile.constexpr):
    # The second pass covers a different range: not the same rows.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N)
    ss = 0.0
    for i in metile.tile_range(BLOCK, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        ss = ss + metile.load(X + cols, mask=cols < N)
    metile.store(Out, metile.sum(s) + metile.sum(ss))


def _negatives():
    r = np.random.default_rng(7)
    n = 300
    x = r.standard_normal(n).astype(np.float32)
    y = (r.standard_normal(n) * 2).astype(np.float32)
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    return [
        (not_rescalable, (x,), (np.exp(xd) * xd.max()).sum()),
        (other_element, (x, y), np.exp(yd - xd.max()).sum()),
        (nonzero_start, (x,), 64 + np.exp(xd - xd.max()).sum()),  # 1.0 per lane of BLOCK=64
        (min_not_max, (x,), np.exp(xd - xd.min()).sum()),
        (other_bounds, (x,), xd.sum() + xd[64:].sum()),
    ]


@pytest.mark.parametrize("case", range(5))
def test_laws_that_do_not_hold_leave_the_ir_unchanged(device, case):
    kernel, bufs, ref = _negatives()[case]
    n = len(bufs[0])
    out = np.zeros(1, np.float32)
    fused = kernel[(1,)].compile(*bufs, out, n, BLOCK=64).source("tile_ir_opt")
    kept = kernel[(1,)].compile(*bufs, out, n, BLOCK=64,
                                fuse_reductions=False).source("tile_ir_opt")
    assert fused == kept
    kernel[(1,)](*bufs, out, n, BLOCK=64)
    np.testing.assert_allclose(out[0], ref, rtol=1e-5)


def test_option_is_checked_and_keyed(device):
    x = _rows(40)
    out = np.zeros_like(x)
    a = softmax[(1,)].compile(x, out, 40, BLOCK=32)
    b = softmax[(1,)].compile(x, out, 40, BLOCK=32, fuse_reductions=False)
    assert a.source("tile_ir_opt") != b.source("tile_ir_opt")
    with pytest.raises(metile.MetileError, match="fuse_reduction"):
        softmax[(1,)](x, out, 40, BLOCK=32, fuse_reduction=False)  # misspelt option
