"""Row reductions of 2-D tiles keep their results where the lanes combined them (a slice layout,
each value held by every lane of its row's simdgroup) and whole-tile reductions read them there:
a sum must count each copied value once, max and min see copies twice harmlessly. Decode
attention is the motivating kernel (row dot products, an online softmax over them, the weights
broadcast back over the value rows). Every device against float64 numpy; on GPUs the GPU IR of
the decode-shaped kernel has no conversion of the row statistics before the whole-tile
reductions."""

import numpy as np
import pytest

import metile


@metile.kernel
def stats_of_row_sums(X, Out, ROWS: metile.constexpr, COLS: metile.constexpr):
    r = metile.arange(0, ROWS)
    c = metile.arange(0, COLS)
    x = metile.load(X + r[:, None] * COLS + c[None, :])
    s = metile.sum(x, axis=1) * 2.0
    metile.store(Out + metile.arange(0, 1), metile.full((1,), metile.sum(s), "f32"))
    metile.store(Out + 1 + metile.arange(0, 1), metile.full((1,), metile.max(s), "f32"))
    metile.store(Out + 2 + metile.arange(0, 1), metile.full((1,), metile.min(s), "f32"))
    metile.store(Out + 3 + r, s)


@metile.kernel
def weighted_rows(Q, K, V, Out, ROWS: metile.constexpr, DIM: metile.constexpr):
    r = metile.arange(0, ROWS)
    d = metile.arange(0, DIM)
    q = metile.load(Q + d)
    k = metile.load(K + r[:, None] * DIM + d[None, :])
    v = metile.load(V + r[:, None] * DIM + d[None, :])
    s = metile.sum(k * q[None, :], axis=1)
    s = metile.where(r < ROWS - 3, s, -float("inf"))      # ragged keys take no weight
    p = metile.exp(s - metile.max(s))
    out = metile.sum(p[:, None] * v, axis=0) / metile.sum(p)
    metile.store(Out + d, out)


SHAPES = [(32, 128), (8, 64), (64, 32), (4, 256)]


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_whole_tile_reductions_of_row_sums(device, rows, cols):
    x = np.random.randn(rows, cols).astype(np.float32)
    out = np.zeros(3 + rows, np.float32)
    stats_of_row_sums[(1,)](x, out, ROWS=rows, COLS=cols)
    metile.synchronize()
    s = x.astype(np.float64).sum(axis=1) * 2.0
    np.testing.assert_allclose(out[3:], s, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[:3], [s.sum(), s.max(), s.min()], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("rows,dim", SHAPES)
def test_decode_shaped_softmax_over_row_dot_products(device, rows, dim):
    q = np.random.randn(dim).astype(np.float32) * 0.3
    k = np.random.randn(rows, dim).astype(np.float32)
    v = np.random.randn(rows, dim).astype(np.float32)
    out = np.zeros(dim, np.float32)
    weighted_rows[(1,)](q, k, v, out, ROWS=rows, DIM=dim)
    metile.synchronize()
    s = k.astype(np.float64) @ q
    s[rows - 3:] = -np.inf
    p = np.exp(s - s.max())
    np.testing.assert_allclose(out, (p[:, None] * v).sum(axis=0) / p.sum(), rtol=1e-4, atol=1e-5)


def test_row_statistics_are_not_converted_before_whole_tile_reductions():
    if "metal-sim" not in metile.devices():
        pytest.skip("no metal-sim device")
    with metile.use_device("metal-sim"):
        rows, dim = 32, 128
        args = (np.zeros(dim, np.float32), np.zeros((rows, dim), np.float32),
                np.zeros((rows, dim), np.float32), np.zeros(dim, np.float32))
        text = weighted_rows[(1,)].compile(*args, ROWS=rows, DIM=dim).source("gpu_ir_opt")
    # From the row sums on: the row sums in registers (shuffles), one exchange for each whole-tile
    # max and sum and one for the column sum over simdgroups, two barriers each (converting the
    # row sums to the canonical layout before the max and the sum cost four more), less the two
    # that order nothing (elide-barriers): the column sum's last one, since the sum takes the
    # second scratch array, and the sum's own last one.
    after = text[text.index("reg_reduce.sum"):]
    assert after.count("barrier") == 4, text
    assert "reg_gather" in after, text   # p[:, None] from the row statistics' own registers
