"""The fuse_reductions Tile IR pass: consecutive tile_range passes over the same rows whose
reductions combine run as one pass when the compiler can verify the algebra on the IR (the seed
README softmax becomes an online softmax; independent sums run together), and nothing changes
where the laws do not hold. Every kernel runs fused and unfused (fuse_reductions=False) on every
device, ragged N, against float64 numpy."""

import os
import re

import numpy as np
import pytest

import metile
from kernels import layernorm_centred, layernorm_loops, seed_softmax as softmax, rmsnorm as rmsnorm_loops

SENTINEL = 12345.0


def optimized_tile_ir(kernel, args, kw, off):
    """The Tile IR after its passes with METILE_GPU_OFF=off. A new kernel object: compiled
    kernels are cached per program, and METILE_GPU_OFF is read when one is compiled."""
    old = os.environ.get("METILE_GPU_OFF")
    os.environ["METILE_GPU_OFF"] = off
    try:
        return metile.kernel(kernel.fn)[(1,)].compile(*args, **kw).source("tile_ir_opt")
    finally:
        if old is None:
            del os.environ["METILE_GPU_OFF"]
        else:
            os.environ["METILE_GPU_OFF"] = old


def count_for(kernel, *args, **kw):
    # The loops as the merge leaves them: the whole_tiles pass would split each row loop in two.
    text = optimized_tile_ir(kernel, args, kw, "whole_tiles")
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


@pytest.mark.parametrize("n", [1, 37, 300])
@pytest.mark.parametrize("fuse", [True, False])
def test_softmax_of_very_negative_rows_from_a_minus_inf_start(device, n, fuse):
    # A running max that is still -inf must not rescale by E(0 - x) = inf (0 * inf is NaN):
    # rows far below -126 (exp2 overflows there) and lanes past N that never see an element.
    x = (_rows(n) - 1000).astype(np.float32)
    out = np.full_like(x, SENTINEL)
    softmax_inf[(len(x),)](x, out, n, BLOCK=64, fuse_reductions=fuse)
    xd = x.astype(np.float64)
    e = np.exp2(xd - xd.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=2e-5, atol=1e-7)


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


# ---- mean, then the sum of squares about it (Youngs-Cramer running sums, or Welford) --------

# layernorm_centred (kernels.py): the mean, then the variance about it, as textbooks write it.


# Triton's habit: masked lanes read 0 and the centred value is zeroed where the mask is off.
@metile.kernel
def variance_where(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    s = metile.zeros((BLOCK,), "f32")
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s += metile.load(X + row * N + cols, mask=cols < N, other=0.0)
    mean = metile.sum(s) / N
    v = metile.zeros((BLOCK,), "f32")
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=0.0)
        d = metile.where(cols < N, x - mean, 0.0)
        v += d * d
    metile.store(Out + row, metile.sum(v) / N)


@pytest.mark.parametrize("n", [1, 37, 300, 1000])
@pytest.mark.parametrize("fuse", [True, False])
def test_layernorm_mean_then_variance(device, n, fuse):
    r = np.random.default_rng(n)
    # A row far from 0 with a small spread: sum(x^2) - n * mean^2 would cancel; Welford does not.
    x = np.stack([r.standard_normal(n) + 0.5, r.standard_normal(n) * 0.5 + 8.0,
                  np.full(n, -7.25)]).astype(np.float32)
    w, b = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    out = np.full_like(x, SENTINEL)
    for block in (32, 256):
        layernorm_centred[(3,)](x, w, b, out, n, BLOCK=block, fuse_reductions=fuse)
        xd = x.astype(np.float64)
        mu = xd.mean(axis=1, keepdims=True)
        ref = (xd - mu) / np.sqrt(xd.var(axis=1, keepdims=True) + 1e-5) * w + b
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=f"BLOCK={block}")
    assert count_for(layernorm_centred, x, w, b, out, n, BLOCK=64,
                     fuse_reductions=fuse) == (2 if fuse else 3)


@pytest.mark.parametrize("n", [1, 37, 300])
@pytest.mark.parametrize("fuse", [True, False])
def test_variance_with_where(device, n, fuse):
    r = np.random.default_rng(n + 1)
    x = (r.standard_normal((2, n)) * 3 - 20).astype(np.float32)
    out = np.full(2, SENTINEL, np.float32)
    variance_where[(2,)](x, out, n, BLOCK=64, fuse_reductions=fuse)
    np.testing.assert_allclose(out, x.astype(np.float64).var(axis=1), rtol=1e-4, atol=1e-6)
    assert count_for(variance_where, x, out, n, BLOCK=64, fuse_reductions=fuse) == (1 if fuse else 2)


# The running-sum form (Youngs and Cramer's update on the mean pass's own sum): a lane's count
# comes from the loop bounds, so the loops start at S and the mask takes each comparison form.
@metile.kernel
def variance_from(X, Out, N, S, BLOCK: metile.constexpr, FORM: metile.constexpr):
    row = metile.program_id(0)
    s = 0.0
    for i in metile.tile_range(S, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        live = (cols < N) if FORM == 0 else (N > cols) if FORM == 1 else (cols <= N - 1)
        s = s + metile.load(X + row * N + cols, mask=live)
    mean = metile.sum(s) / (N - S)
    v = 0.0
    for i in metile.tile_range(S, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        live = (cols < N) if FORM == 0 else (N > cols) if FORM == 1 else (cols <= N - 1)
        x = metile.load(X + row * N + cols, mask=live)
        v = v + (x - mean) * (x - mean)
    metile.store(Out + row, metile.sum(v) / (N - S))


def carries_a_count(kernel, *args, off="whole_tiles", **kw):
    # The merged loop carries an f32 scalar (the running-sum form's count); Welford carries tiles.
    text = optimized_tile_ir(kernel, args, kw, off)
    return re.search(r"^\s*%[\w%, ]+ = for .*-> \([^)]*, f32\)", text, re.M) is not None


@pytest.mark.parametrize("n, start", [(1, 0), (37, 0), (300, 5), (1000, 999), (1000, 1000)])
@pytest.mark.parametrize("form", [0, 1, 2])
def test_variance_running_sums(device, n, start, form):
    r = np.random.default_rng(n + form)
    # Rows about 1e4 with a spread of 1e-1 (sum(x^2) - n * mean^2 would lose every digit in f32),
    # about 0, and constant.
    x = np.stack([r.standard_normal(n) * 0.1 + 1e4, r.standard_normal(n),
                  np.full(n, 3.0)]).astype(np.float32)
    out = np.full(3, SENTINEL, np.float32)
    variance_from[(3,)](x, out, n, start, BLOCK=64, FORM=form)
    if start == n:  # no element: 0 / 0
        assert np.isnan(out).all()
        return
    ref = x[:, start:].astype(np.float64).var(axis=1)
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=1e-6)
    assert carries_a_count(variance_from, x, out, n, start, BLOCK=64, FORM=form)


# After the running-sum loop a lane's count is one of two scalars when the mask is
# iv + arange(w0, BLOCK) < X with X one value (w0 = 3 here: the threshold is taken in w's terms),
# and is computed per lane when the bound is a tile.
@metile.kernel
def variance_shifted(X, Out, N, BLOCK: metile.constexpr, TILE_BOUND: metile.constexpr):
    row = metile.program_id(0)
    limit = metile.full((BLOCK,), N + 3, "i32") if TILE_BOUND else N + 3
    base = X + (row * N - 3)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(3, BLOCK)
        s = s + metile.load(base + cols, mask=cols < limit)
    mean = metile.sum(s) / N
    v = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(3, BLOCK)
        x = metile.load(base + cols, mask=cols < limit)
        v = v + (x - mean) * (x - mean)
    metile.store(Out + row, metile.sum(v) / N)


@pytest.mark.parametrize("n", [1, 64, 65, 300])
@pytest.mark.parametrize("tile_bound", [False, True])
def test_variance_running_sums_counts(device, n, tile_bound):
    r = np.random.default_rng(n)
    x = np.stack([r.standard_normal(n) * 0.1 + 1e4, r.standard_normal(n)]).astype(np.float32)
    out = np.full(2, SENTINEL, np.float32)
    variance_shifted[(2,)](x, out, n, BLOCK=64, TILE_BOUND=tile_bound)
    np.testing.assert_allclose(out, x.astype(np.float64).var(axis=1), rtol=2e-3, atol=1e-6)
    assert carries_a_count(variance_shifted, x, out, n, BLOCK=64, TILE_BOUND=tile_bound)
    text = optimized_tile_ir(variance_shifted, (x, out, n), {"BLOCK": 64, "TILE_BOUND": tile_bound},
                             "whole_tiles")
    assert ("x" "i64>" in text) == tile_bound  # the per-lane counts are i64 tiles
    # METILE_GPU_OFF=two_counts: a count per lane, as a tile bound has (to compare on a GPU).
    text = optimized_tile_ir(variance_shifted, (x, out, n), {"BLOCK": 64, "TILE_BOUND": tile_bound},
                             "whole_tiles,two_counts")
    assert "x" "i64>" in text


def test_running_sums_off_keeps_welford(device, monkeypatch):
    # METILE_GPU_OFF=running_sums: the same merge in Welford's form (to compare the two).
    r = np.random.default_rng(5)
    x = (r.standard_normal((2, 300)) * 0.5 + 100.0).astype(np.float32)
    assert not carries_a_count(variance_from, x, np.zeros(2, np.float32), 300, 7, BLOCK=64,
                               FORM=0, off="whole_tiles,running_sums")
    monkeypatch.setenv("METILE_GPU_OFF", "running_sums")
    out = np.full(2, SENTINEL, np.float32)
    metile.kernel(variance_from.fn)[(2,)](x, out, 300, 7, BLOCK=64, FORM=0)
    np.testing.assert_allclose(out, x[:, 7:].astype(np.float64).var(axis=1), rtol=1e-3)


@metile.kernel
def not_a_square(X, Out, N, BLOCK: metile.constexpr):
    # (x - M) * x: linear in M per element but not a square about it.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N)
    m = metile.sum(s) / N
    v = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + cols, mask=cols < N)
        v = v + (x - m) * x
    metile.store(Out, metile.sum(v))


@metile.kernel
def cube(X, Out, N, BLOCK: metile.constexpr):
    # (x - M)^3: no Welford form for the third moment here.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N)
    m = metile.sum(s) / N
    v = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        d = metile.load(X + cols, mask=cols < N) - m
        v = v + d * d * d
    metile.store(Out, metile.sum(v))


@metile.kernel
def two_centres(X, Out, N, BLOCK: metile.constexpr):
    # (x - M) * (x - 2M): two different centres, not a square.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N)
    m = metile.sum(s) / N
    m2 = m * 2.0
    v = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + cols, mask=cols < N)
        v = v + (x - m) * (x - m2)
    metile.store(Out, metile.sum(v))


@metile.kernel
def centre_also_scales(X, Out, N, BLOCK: metile.constexpr):
    # M is used outside the square too (v + (x - M)^2 * M): no longer q + n * (a - M)^2.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N)
    m = metile.sum(s) / N
    v = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        d = metile.load(X + cols, mask=cols < N) - m
        v = v + d * d * m
    metile.store(Out, metile.sum(v))


def _centred_negatives():
    r = np.random.default_rng(11)
    n = 300
    x = (r.standard_normal(n) + 1.0).astype(np.float32)
    xd = x.astype(np.float64)
    m = xd.mean()
    return [(not_a_square, x, ((xd - m) * xd).sum()),
            (cube, x, ((xd - m) ** 3).sum()),
            (two_centres, x, ((xd - m) * (xd - 2 * m)).sum()),
            (centre_also_scales, x, ((xd - m) ** 2 * m).sum())]


@pytest.mark.parametrize("case", range(4))
def test_sums_that_are_not_centred_squares_stay_as_written(device, case):
    kernel, x, ref = _centred_negatives()[case]
    out = np.zeros(1, np.float32)
    fused = kernel[(1,)].compile(x, out, len(x), BLOCK=64).source("tile_ir_opt")
    kept = kernel[(1,)].compile(x, out, len(x), BLOCK=64,
                                fuse_reductions=False).source("tile_ir_opt")
    assert fused == kept
    kernel[(1,)](x, out, len(x), BLOCK=64)
    np.testing.assert_allclose(out[0], ref, rtol=1e-4, atol=1e-3)
