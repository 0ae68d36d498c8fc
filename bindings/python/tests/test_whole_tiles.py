"""The whole_tiles Tile IR pass: a row loop runs its whole tiles without masks or bounds guards
and only the partial last tile as written, when one check in front of the loop shows the masks
hold there. Every kernel runs with the pass and without it (METILE_GPU_OFF=whole_tiles) on every
device, on ragged rows (N below, at, and past multiples of BLOCK), against float64 numpy; rows
that reach past their buffer keep the guards (reads 0, stores dropped; interp reports them)."""

import os
import re

import numpy as np
import pytest

import metile
from kernels import layernorm_loops, rmsnorm, seed_softmax

SENTINEL = -777.0
SIZES = [1, 31, 32, 33, 96, 250]


class whole_tiles_off:
    """METILE_GPU_OFF=whole_tiles while compiling; a new kernel object (compiled kernels are
    cached per program, and the variable is read when one is compiled)."""

    def __enter__(self):
        self.old = os.environ.get("METILE_GPU_OFF")
        os.environ["METILE_GPU_OFF"] = "whole_tiles"

    def __exit__(self, *exc):
        if self.old is None:
            del os.environ["METILE_GPU_OFF"]
        else:
            os.environ["METILE_GPU_OFF"] = self.old


def variants(kernel):
    yield "on", kernel
    yield "off", metile.kernel(kernel.fn)


def run(name, kernel, grid, *args, **kw):
    if name == "off":
        with whole_tiles_off():
            kernel[grid](*args, **kw)
    else:
        kernel[grid](*args, **kw)


def _rows(n):
    r = np.random.default_rng(n)
    return np.stack([r.standard_normal(n) * 3, -(1 + r.random(n) * 5), np.full(n, 2.5),
                     np.linspace(-40, 40, n)]).astype(np.float32)


@pytest.mark.parametrize("n", SIZES)
def test_row_kernels_with_and_without_the_pass(device, n):
    x = _rows(n)
    xd = x.astype(np.float64)
    w = np.linspace(0.5, 1.5, n).astype(np.float32)
    b = np.linspace(-1, 1, n).astype(np.float32)
    e = np.exp(xd - xd.max(1, keepdims=True))
    want_sm = e / e.sum(1, keepdims=True)
    want_rms = xd / np.sqrt((xd * xd).mean(1, keepdims=True) + 1e-5) * w
    want_ln = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5) * w + b
    for name, sm in variants(seed_softmax):
        out = np.full_like(x, SENTINEL)
        run(name, sm, (len(x),), x, out, n, BLOCK=32)
        np.testing.assert_allclose(out, want_sm, rtol=2e-5, atol=1e-7, err_msg=f"softmax {name}")
    for name, rms in variants(rmsnorm):
        out = np.full_like(x, SENTINEL)
        run(name, rms, (len(x),), x, w, out, n, BLOCK=32)
        np.testing.assert_allclose(out, want_rms, rtol=2e-5, atol=2e-5, err_msg=f"rmsnorm {name}")
    for name, ln in variants(layernorm_loops):
        out = np.full_like(x, SENTINEL)
        run(name, ln, (len(x),), x, w, b, out, n, BLOCK=32)
        np.testing.assert_allclose(out, want_ln, rtol=1e-4, atol=1e-4, err_msg=f"layernorm {name}")


# Masks the pass must see through (an offset index, a comparison turned around) and one it must
# not drop (a lower limit LO past the first column: then no tile is whole and all run masked).
@metile.kernel
def window(X, Out, N, LO, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK) + 1
        m = (N > cols) & (cols >= LO)
        x = metile.load(X + row * N + cols, mask=m, other=5.0)
        metile.store(Out + row * N + cols, metile.where(m, x * 2.0 + 1.0, x), mask=cols < N)


@pytest.mark.parametrize("n", [2, 32, 33, 97])
@pytest.mark.parametrize("lo", [0, 1, 7])
def test_offset_and_turned_comparisons(device, n, lo):
    x = _rows(n)
    cols = np.arange(n)
    keep = (cols >= 1) & (cols >= lo)
    want = np.where(keep, x * 2.0 + 1.0, np.where(cols >= 1, 5.0, SENTINEL)).astype(np.float32)
    for name, k in variants(window):
        out = np.full_like(x, SENTINEL)
        run(name, k, (len(x),), x, out, n, lo, BLOCK=16)
        np.testing.assert_array_equal(out, want, err_msg=f"{name} N={n} LO={lo}")


@metile.kernel
def copy_rows(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        metile.store(Out + row * N + cols, x + 1.0, mask=cols < N)


def test_rows_past_the_buffer_keep_their_guards(device):
    # X holds 3.5 rows of 64 and Out 2.5: row 3's loads and rows 2-3's stores leave the
    # buffers, so their loops must run guarded (reads 0, stores dropped) with the pass too.
    n, rows = 64, 4
    x = np.arange(rows * n - n // 2, dtype=np.float32)
    for name, k in variants(copy_rows):
        out = np.full(rows * n - 3 * n // 2, SENTINEL, np.float32)
        if device.name == "interp":
            with pytest.raises(metile.MetileError, match="outside buffer"):
                run(name, k, (rows,), x, out, n, BLOCK=16)
            continue
        run(name, k, (rows,), x, out, n, BLOCK=16)
        np.testing.assert_array_equal(out, x[:out.size] + 1.0, err_msg=name)


def test_the_ir_runs_whole_tiles_unmasked(device):
    x = _rows(100)
    out = np.empty_like(x)
    text = re.sub(r" loc\([^\n]*\)", "", copy_rows[(4,)].compile(x, out, 100, BLOCK=32)
                  .source("tile_ir_opt"))
    loops = re.split(r"\n\s*(?:%[\w%, ]+ = )?for ", text)[1:]
    assert len(loops) == 2, text
    assert re.search(r"= load %\w+ :", loops[0]) and re.search(r"store %\w+, %\w+\n", loops[0]), text
    assert re.search(r"= load %\w+, %\w+ :", loops[1]), text  # the rest: masked as written
    with whole_tiles_off():
        text = metile.kernel(copy_rows.fn)[(4,)].compile(x, out, 100, BLOCK=32).source("tile_ir_opt")
    assert len(re.findall(r"\n\s*(?:%[\w%, ]+ = )?for ", text)) == 1


def test_unknown_gpu_off_piece_is_refused(device):
    with whole_tiles_off():
        os.environ["METILE_GPU_OFF"] = "whole_tile"
        with pytest.raises(metile.InvalidArgumentError, match="whole_tiles"):
            metile.kernel(copy_rows.fn)[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), 4,
                                              BLOCK=4)
