"""Masked-off lanes are inactive (docs/semantics.md): one rule per test, on every device, against
float64 numpy; then the seed README softmax, verbatim, on ragged N x BLOCK."""

import numpy as np
import pytest

import metile

SENTINEL = 12345.0


@metile.kernel
def propagate(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    y = metile.exp(x * 2.0 + 1.0) - x  # every element-wise op keeps x's inactive lanes
    metile.store(Out + offs, y)  # no mask: only active lanes are written


def test_elementwise_results_keep_inactive_lanes(device):
    x = np.linspace(-1, 1, 64).astype(np.float32)
    for n in (0, 1, 37, 64):
        out = np.full(64, SENTINEL, np.float32)
        propagate[(1,)](x, out, n, BLOCK=64)
        ref = np.exp(x[:n].astype(np.float64) * 2 + 1) - x[:n]
        np.testing.assert_allclose(out[:n], ref, rtol=1e-5)
        assert (out[n:] == SENTINEL).all(), n


@metile.kernel
def where_kernel(X, C, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)  # inactive past N
    c = metile.load(C + offs) != 0  # active everywhere
    metile.store(Out + offs, metile.where(c, x, -1.0))
    cm = metile.load(C + offs, mask=offs < N) != 0  # an inactive condition
    metile.store(Out + BLOCK + offs, metile.where(cm, 3.0, -3.0))


def test_where_takes_condition_and_selected_operand_activity(device):
    n, block = 40, 64
    x = np.arange(block, dtype=np.float32)
    c = (np.arange(block) % 3 == 0).astype(np.int32)
    out = np.full(2 * block, SENTINEL, np.float32)
    where_kernel[(1,)](x, c, out, n, BLOCK=block)
    lane = np.arange(block)
    # Selecting x past N gives an inactive lane (not written); selecting the constant is active.
    ref = np.where(c != 0, np.where(lane < n, x, SENTINEL), -1.0)
    np.testing.assert_array_equal(out[:block], ref)
    ref2 = np.where(lane < n, np.where(c != 0, 3.0, -3.0), SENTINEL)
    np.testing.assert_array_equal(out[block:], ref2)


@metile.kernel
def reductions(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    metile.store(Out + 0, metile.sum(x))
    metile.store(Out + 1, metile.max(x))
    metile.store(Out + 2, metile.min(x))
    y = metile.load(X + offs, mask=offs < N, other=-7.0)  # other= makes the lanes active
    metile.store(Out + 3, metile.max(y))
    metile.store(Out + 4, metile.sum(y))


def test_reductions_skip_inactive_lanes(device):
    block = 64
    r = np.random.default_rng(0)
    for sign in (-1.0, 1.0):
        x = (sign * (10 + r.random(block) * 5)).astype(np.float32)
        for n in (0, 1, 5, 63, 64):
            out = np.zeros(5, np.float32)
            reductions[(1,)](x, out, n, BLOCK=block)
            xs = x[:n].astype(np.float64)
            if n == 0:  # every lane inactive: the identities
                np.testing.assert_array_equal(out[:3], [0.0, -np.inf, np.inf])
            else:
                np.testing.assert_allclose(out[:3], [xs.sum(), xs.max(), xs.min()], rtol=1e-5)
            y = np.concatenate([xs, np.full(block - n, -7.0)])
            np.testing.assert_allclose(out[3:], [y.max(), y.sum()], rtol=1e-5)


@metile.kernel
def int_reductions(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    metile.store(Out + 0, metile.sum(x))
    metile.store(Out + 1, metile.max(x))
    metile.store(Out + 2, metile.min(x))


def test_integer_reductions_skip_inactive_lanes(device):
    x = np.arange(-50, 14, dtype=np.int32)  # all negative in the first 50 lanes
    for n in (0, 3, 64):
        out = np.zeros(3, np.int32)
        int_reductions[(1,)](x, out, n, BLOCK=64)
        if n == 0:
            np.testing.assert_array_equal(out, [0, -2**31, 2**31 - 1])
        else:
            np.testing.assert_array_equal(out, [x[:n].sum(), x[:n].max(), x[:n].min()])


@metile.kernel
def reduce_2d(X, Out, R, C, BR: metile.constexpr, BC: metile.constexpr):
    rows = metile.arange(0, BR)
    cols = metile.arange(0, BC)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    x = metile.load(X + rows[:, None] * C + cols[None, :], mask=mask)
    metile.store(Out + cols, metile.max(x, axis=0))
    metile.store(Out + BC + rows, metile.max(x, axis=1))
    metile.store(Out + BC + BR, metile.max(x))


def test_two_dimensional_tiles(device):
    br, bc, r_, c_ = 8, 16, 5, 11
    x = -(np.arange(r_ * c_, dtype=np.float32) + 1)
    out = np.zeros(bc + br + 1, np.float32)
    reduce_2d[(1,)](x, out, r_, c_, BR=br, BC=bc)
    m = x.reshape(r_, c_).astype(np.float64)
    np.testing.assert_allclose(out[:c_], m.max(axis=0))
    assert (out[c_:bc] == -np.inf).all()  # columns with no active lane
    np.testing.assert_allclose(out[bc:bc + r_], m.max(axis=1))
    assert (out[bc + r_:bc + br] == -np.inf).all()
    assert out[-1] == m.max()


@metile.kernel
def store_lanes(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    metile.store(Out + offs, x + 1.0, mask=offs < BLOCK)  # the mask allows every lane


def test_store_writes_only_active_lanes(device):
    x = np.arange(32, dtype=np.float32)
    out = np.full(32, SENTINEL, np.float32)
    store_lanes[(1,)](x, out, 20, BLOCK=32)
    np.testing.assert_array_equal(out[:20], x[:20] + 1)
    assert (out[20:] == SENTINEL).all()


@metile.kernel
def loop_keep(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    m = metile.full((BLOCK,), -1e38, metile.float32)
    s = metile.zeros((BLOCK,), metile.float32)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        m = metile.maximum(m, x)
        s = s + x
    metile.store(Out + row * 2, metile.max(m))
    metile.store(Out + row * 2 + 1, metile.sum(s))


def test_loop_carried_values_keep_previous_lanes(device):
    r = np.random.default_rng(2)
    for n in (1, 5, 40, 64, 100):
        x = -(1 + r.random((3, n))).astype(np.float32)
        out = np.zeros(6, np.float32)
        loop_keep[(3,)](x, out, n, BLOCK=32)
        xs = x.astype(np.float64)
        np.testing.assert_allclose(out[0::2], xs.max(axis=1), rtol=1e-6)
        np.testing.assert_allclose(out[1::2], xs.sum(axis=1), rtol=1e-5)


@metile.kernel
def nested(X, Out, R, C, BLOCK: metile.constexpr):
    total = metile.zeros((BLOCK,), metile.float32)
    for r in metile.tile_range(0, R, 1):
        m = metile.full((BLOCK,), -1e38, metile.float32)
        for i in metile.tile_range(0, C, BLOCK):
            cols = i + metile.arange(0, BLOCK)
            m = metile.maximum(m, metile.load(X + r * C + cols, mask=cols < C))
        total = total + metile.max(m)
    metile.store(Out + metile.arange(0, BLOCK), total)


def test_nested_loops(device):
    x = -(1 + np.random.default_rng(3).random((4, 45))).astype(np.float32)
    out = np.zeros(16, np.float32)
    nested[(1,)](x, out, 4, 45, BLOCK=16)
    np.testing.assert_allclose(out, np.full(16, x.astype(np.float64).max(axis=1).sum()),
                               rtol=1e-5)


@metile.kernel
def inactive_init(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    acc = metile.load(X + offs, mask=offs < N)  # a carried value that starts partly inactive
    for i in metile.tile_range(0, 3, 1):
        acc = acc + 1.0
    metile.store(Out + offs, acc)


def test_carried_value_with_inactive_initial_lanes(device):
    x = np.arange(16, dtype=np.float32)
    out = np.full(16, SENTINEL, np.float32)
    inactive_init[(1,)](x, out, 9, BLOCK=16)
    np.testing.assert_array_equal(out[:9], x[:9] + 3)
    assert (out[9:] == SENTINEL).all()


@metile.kernel
def dot_inactive(A, B, Out, K, BK: metile.constexpr):
    i = metile.arange(0, 16)
    k = metile.arange(0, BK)
    a = metile.load(A + i[:, None] * BK + k[None, :], mask=k[None, :] < K)
    b = metile.load(B + k[:, None] * 16 + i[None, :], mask=k[:, None] < K)
    acc = metile.dot(a, b, metile.zeros((16, 16), metile.float32))
    metile.store(Out + i[:, None] * 16 + i[None, :], acc)


def test_dot_skips_inactive_lanes(device):
    r = np.random.default_rng(4)
    a = r.random((16, 16)).astype(np.float32)
    b = r.random((16, 16)).astype(np.float32)
    out = np.zeros((16, 16), np.float32)
    dot_inactive[(1,)](a, b, out, 10, BK=16, allow_tf32=False)  # exact f32 on GPUs too
    ref = a[:, :10].astype(np.float64) @ b[:10].astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-4)


# The seed README softmax, verbatim (seeds/003): kernels.seed_softmax.
from kernels import seed_softmax as softmax  # noqa: E402


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n", [1, 5, 64, 300, 1000, 4097])
def test_seed_softmax_is_exact_on_ragged_rows(device, n):
    r = np.random.default_rng(n)
    rows = [r.standard_normal(n) * 3,        # mixed signs
            -(1 + r.random(n) * 5),          # all negative
            np.full(n, 2.5)]                 # uniform
    x = np.stack(rows).astype(np.float32)
    blocks = [32, 64, 256, 1024]
    if device.name in ("interp", "metal-sim") and n > 1000:
        blocks = [256, 1024]  # the slow devices take the large rows in big blocks only
    for block in blocks:
        out = np.full_like(x, SENTINEL)
        softmax[(3,)](x, out, n, BLOCK=block)
        np.testing.assert_allclose(out, _softmax_ref(x), rtol=2e-5, atol=1e-7,
                                   err_msg=f"N={n} BLOCK={block}")


# Per-thread tile_range bounds (SIMT): each lane runs its own trip count, the loop runs while any
# lane is active, and lanes past their end are inactive (their stores and carried values stop).
@metile.kernel
def per_thread_rows(X, Out, Hits, N, NUM_SG: metile.constexpr):
    tid = metile.thread_id()
    lane = metile.simd_lane_id()
    sg = tid // 32
    acc = metile.zeros((128,), metile.float32) + metile.arange(0, 128) * 0  # T = 128 threads
    for r in metile.tile_range(sg, N, NUM_SG):  # simdgroup sg takes rows sg, sg+NUM_SG, ...
        acc = acc + metile.load(X + r * 32 + lane)
        metile.store(Hits + r * 32 + lane, tid)  # a lane past its end must not write
    metile.store(Out + tid, acc)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 9])
def test_per_thread_tile_range_bounds(device, n):
    num_sg = 4
    x = np.random.default_rng(n).random((max(n, 1), 32)).astype(np.float32)
    out = np.full(128, SENTINEL, np.float32)
    hits = np.full((max(n, 1) + num_sg, 32), -1, np.int32)
    per_thread_rows[(1,)](x, out, hits, n, NUM_SG=num_sg)
    ref = np.zeros((num_sg, 32))
    for r in range(n):
        ref[r % num_sg] += x[r]
    np.testing.assert_allclose(out.reshape(num_sg, 32), ref, rtol=1e-6)
    lanes = np.arange(32)
    for r in range(n):
        np.testing.assert_array_equal(hits[r], (r % num_sg) * 32 + lanes)
    assert (hits[n:] == -1).all()  # rows past N are touched by no lane


@metile.kernel
def per_thread_steps(Out, Start, End, Step):
    tid = metile.arange(0, 64)  # per-lane bounds in a plain tile kernel work the same way
    count = metile.zeros((64,), metile.int32)
    last = metile.full((64,), -1, metile.int32)
    for i in metile.tile_range(metile.load(Start + tid), metile.load(End + tid),
                               metile.load(Step + tid)):
        count = count + 1
        last = i
    metile.store(Out + tid, count)
    metile.store(Out + 64 + tid, last)


def test_per_thread_trip_counts_follow_python_range(device):
    r = np.random.default_rng(7)
    start = r.integers(-20, 20, 64).astype(np.int32)
    end = r.integers(-20, 20, 64).astype(np.int32)
    step = r.choice([-7, -3, -1, 1, 2, 5], 64).astype(np.int32)
    out = np.zeros(128, np.int32)
    per_thread_steps[(1,)](out, start, end, step)
    for t in range(64):
        iters = list(range(start[t], end[t], step[t]))
        assert out[t] == len(iters), t
        assert out[64 + t] == (iters[-1] if iters else -1), t


@metile.kernel
def persistent(X, Out, TOTAL, BLOCK: metile.constexpr):
    for tile in metile.persistent_range(TOTAL):
        offs = tile * BLOCK + metile.arange(0, BLOCK)
        metile.store(Out + offs, metile.load(X + offs) * 2.0 + tile)


@pytest.mark.parametrize("grid,total", [(1, 5), (3, 7), (4, 4), (8, 3)])
def test_persistent_range_covers_every_tile_once(device, grid, total):
    block = 32
    x = np.random.default_rng(grid).random(total * block).astype(np.float32)
    out = np.full(total * block, SENTINEL, np.float32)
    persistent[(grid,)](x, out, total, BLOCK=block)
    ref = x.reshape(total, block) * 2 + np.arange(total)[:, None]
    np.testing.assert_allclose(out.reshape(total, block), ref, rtol=1e-6)
