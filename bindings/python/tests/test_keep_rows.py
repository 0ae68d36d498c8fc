"""The keep_rows Tile IR pass: a later tile_range pass that re-reads what an earlier pass over the
same range read takes the tiles the earlier pass kept when the row fits (K iterations within the
device's budget, checked at run time), and reads memory as written otherwise (an opt-in compile
option; the cpu device keeps nothing; interp and metal-sim run the rewrite). Every kernel runs
with and without it (keep_rows=False) on every device, for rows that fit in one tile, in a few
tiles, and that do not fit, against float64 numpy."""

import re

import numpy as np
import pytest

import metile
from test_fuse_reductions import (SENTINEL, layernorm_centred, layernorm_loops, rmsnorm_loops,
                                  softmax)


def opt_ir(kernel, grid, *args, **kw):
    # Without source locations: the compile cache may hand back an identical program compiled from
    # another file's copy of the kernel (test_seed_examples.py's softmax, say).
    text = kernel[grid].compile(*args, **kw).source("tile_ir_opt")
    return re.sub(r" loc\([^\n]*\)", "", text)


def loads_in_last_loop(text):
    body = text[text.rfind(" for "):]
    return re.findall(r"= load [^\n]*", body)


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# N: one tile, several tiles kept (K <= 4 for BLOCK=32 on every device), longer than K tiles.
SIZES = [1, 32, 100, 128, 129, 300]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("keep", [True, False])
def test_softmax_reads_the_kept_row(device, n, keep):
    r = np.random.default_rng(n)
    x = (r.standard_normal((3, n)) * 4).astype(np.float32)
    out = np.full_like(x, SENTINEL)
    for fuse in (True, False):
        softmax[(3,)](x, out, n, BLOCK=32, keep_rows=keep, fuse_reductions=fuse)
        np.testing.assert_allclose(out, _softmax_ref(x), rtol=2e-5, atol=1e-7,
                                   err_msg=f"N={n} keep={keep} fuse={fuse}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("keep", [True, False])
def test_layernorm_and_rmsnorm_read_the_kept_row(device, n, keep):
    r = np.random.default_rng(n + 3)
    x = (r.standard_normal((2, n)) + 0.25).astype(np.float32)
    w, b = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    xd = x.astype(np.float64)
    mu, var = xd.mean(axis=1, keepdims=True), xd.var(axis=1, keepdims=True)
    for kernel in (layernorm_centred, layernorm_loops):
        out = np.full_like(x, SENTINEL)
        kernel[(2,)](x, w, b, out, n, BLOCK=32, keep_rows=keep)
        np.testing.assert_allclose(out, (xd - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-4,
                                   atol=1e-4, err_msg=kernel.__name__)
    out = np.full_like(x, SENTINEL)
    rmsnorm_loops[(2,)](x, w, out, n, BLOCK=32, keep_rows=keep)
    np.testing.assert_allclose(out, xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-5) * w,
                               rtol=1e-5, atol=1e-6)


def test_the_ir_shows_the_kept_row_and_the_switch(device, monkeypatch):
    x = np.zeros((2, 40), np.float32)
    out = np.zeros_like(x)
    kept = opt_ir(softmax, (2,), x, out, 40, BLOCK=32, keep_rows=True)
    plain = opt_ir(softmax, (2,), x, out, 40, BLOCK=32, keep_rows=False)
    assert opt_ir(softmax, (2,), x, out, 40, BLOCK=32) == plain  # off by default
    if device.name == "cpu":  # its caches hold the re-read row: nothing is kept there
        assert kept == plain
        return
    assert kept != plain
    # Every other device has threadgroup memory: a copy loop fills the row's array, and the store
    # pass reads it where the row fits; its load from memory stays (it reads when the row does not
    # fit), masked off by the runtime check.
    last = kept[kept.rfind(" for "):]
    assert "row = 1" in kept and "threadgroup>>" in last
    assert len(loads_in_last_loop(kept)) == 2 and len(loads_in_last_loop(plain)) == 1
    assert re.search(r"= not %\d+ : bool", kept) and " select " in last
    # METILE_GPU_OFF=threadgroup_rows: the kept tiles are values (registers, local arrays); the
    # store pass's one load is masked by the runtime check and selects the kept tile.
    monkeypatch.setenv("METILE_GPU_OFF", "threadgroup_rows")
    slots = opt_ir(metile.kernel(softmax.fn), (2,), x, out, 40, BLOCK=32, keep_rows=True)
    assert "row = 1" not in slots and slots != plain
    assert len(loads_in_last_loop(slots)) == 1
    last = slots[slots.rfind(" for "):]
    assert re.search(r"= not %\d+ : bool", slots) and " select " in last
    with pytest.raises(metile.MetileError, match="keep_row"):
        softmax[(2,)](x, out, 40, BLOCK=32, keep_row=False)  # misspelt option


@metile.kernel
def softmax_in_place(X, N, BLOCK: metile.constexpr):
    # Reads and writes X: a store could reach what the first pass read, so nothing is kept.
    row = metile.program_id(0)
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        m = metile.maximum(m, metile.load(X + row * N + cols, mask=cols < N))
    m = metile.max(m)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.exp(metile.load(X + row * N + cols, mask=cols < N) - m)
    s = metile.sum(s)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        metile.store(X + row * N + cols, metile.exp(x - m) / s, mask=cols < N)


@metile.kernel
def shifted_reread(X, Out, N, BLOCK: metile.constexpr):
    # The second pass reads one element further along: other addresses, nothing to keep.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N)
    t = metile.sum(s)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + cols + 1, mask=cols + 1 < N)
        metile.store(Out + cols, x - t, mask=cols + 1 < N)


@metile.kernel
def other_mask(X, Out, N, BLOCK: metile.constexpr):
    # The same addresses under another mask: the kept tile has zeros where this one reads.
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + cols, mask=cols < N // 2)
    t = metile.sum(s)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        metile.store(Out + cols, metile.load(X + cols, mask=cols < N) - t, mask=cols < N)


def test_rereads_that_are_not_the_same_stay_as_written(device):
    n = 50
    x = np.random.default_rng(5).standard_normal((2, n)).astype(np.float32)
    out = np.zeros(n, np.float32)
    xd = x.astype(np.float64)
    # In place: the kernel writes what it reads.
    assert opt_ir(softmax_in_place, (2,), x, n, BLOCK=32, keep_rows=True) == \
        opt_ir(softmax_in_place, (2,), x, n, BLOCK=32, keep_rows=False)
    y = x.copy()
    softmax_in_place[(2,)](y, n, BLOCK=32, keep_rows=True)
    np.testing.assert_allclose(y, _softmax_ref(x), rtol=2e-5, atol=1e-7)
    for kernel, ref in ((shifted_reread, np.append(xd[0, 1:] - xd[0].sum(), 0.0)),
                        (other_mask, xd[0] - xd[0, : n // 2].sum())):
        assert opt_ir(kernel, (1,), x, out, n, BLOCK=32, keep_rows=True) == \
            opt_ir(kernel, (1,), x, out, n, BLOCK=32, keep_rows=False), kernel.__name__
        out[:] = 0
        kernel[(1,)](x, out, n, BLOCK=32, keep_rows=True)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg=kernel.__name__)


def test_same_buffer_as_input_and_output_stays_exact(device):
    # The same array passed as X and Out (distinct parameters): each iteration stores only what it
    # has just read, so the kept row and the re-read agree.
    n = 70
    x = np.random.default_rng(9).standard_normal((2, n)).astype(np.float32)
    y = x.copy()
    softmax[(2,)](y, y, n, BLOCK=32, keep_rows=True)
    np.testing.assert_allclose(y, _softmax_ref(x), rtol=2e-5, atol=1e-7)


# Rows in threadgroup memory (devices that have it; the cpu keeps nothing): the arrays hold 60 KiB
# on interp (15360 floats), 28 KiB on metal-sim (7168), 213 KiB on an H100 (53248). Shapes
# (rows, N, BLOCK): a row shorter than its tile, one row, several whole tiles, a ragged row of
# several tiles, a ragged row over every device's array but cuda's, one over cuda's too.
LONG_ROWS = [(2, 100, 256), (1, 4096, 1024), (3, 5000, 1024), (2, 30001, 4096)]


@pytest.mark.parametrize("rows,n,block", LONG_ROWS + [(1, 70001, 4096)])
def test_long_rows_kept_in_threadgroup_memory(device, rows, n, block):
    if n > 30001 and device.name != "cuda":
        pytest.skip("a row over cuda's array: the others read the 30001 row as written already")
    from kernels import layernorm_loops as layernorm, rmsnorm, seed_softmax
    r = np.random.default_rng(n)
    x = (r.standard_normal((rows, n)) * 3).astype(np.float32)
    w, b = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    xd = x.astype(np.float64)
    mu, var = xd.mean(axis=1, keepdims=True), xd.var(axis=1, keepdims=True)
    refs = (_softmax_ref(x), (xd - mu) / np.sqrt(var + 1e-5) * w + b,
            xd / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-5) * w)
    outs = {}
    for keep in (True, False):
        o = [np.full_like(x, SENTINEL) for _ in range(3)]
        seed_softmax[(rows,)](x, o[0], n, BLOCK=block, keep_rows=keep)
        layernorm[(rows,)](x, w, b, o[1], n, BLOCK=block, keep_rows=keep)
        rmsnorm[(rows,)](x, w, o[2], n, BLOCK=block, keep_rows=keep)
        for got, want, tol in zip(o, refs, ((2e-5, 1e-7), (1e-4, 1e-4), (1e-4, 1e-5))):
            np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=f"keep={keep}")
        outs[keep] = o
    # The kept row is the row: the same bits either way.
    for kept, plain in zip(outs[True], outs[False]):
        assert np.array_equal(kept.view(np.int32), plain.view(np.int32))
    if device.name != "cpu":
        text = opt_ir(seed_softmax, (rows,), x, outs[True][0], n, BLOCK=block, keep_rows=True)
        assert "row = 1" in text


@pytest.mark.parametrize("n", [3000, 9000])
def test_unfused_passes_read_one_row(device, n):
    # Three passes (fuse_reductions off): the max, the sum and the store pass all read the row.
    r = np.random.default_rng(n)
    x = (r.standard_normal((2, n)) * 4).astype(np.float32)
    got = {}
    for keep in (True, False):
        got[keep] = np.full_like(x, SENTINEL)
        softmax[(2,)](x, got[keep], n, BLOCK=1024, keep_rows=keep, fuse_reductions=False)
        np.testing.assert_allclose(got[keep], _softmax_ref(x), rtol=2e-5, atol=1e-7)
    assert np.array_equal(got[True].view(np.int32), got[False].view(np.int32))
    if device.name != "cpu":
        text = opt_ir(softmax, (2,), x, got[True], n, BLOCK=1024, keep_rows=True, fuse_reductions=False)
        assert text.count("row = 1") == 1  # one array for the three passes
        assert text.count("ptr<f32, threadgroup>>") >= 4  # the copy's store and three passes' reads
