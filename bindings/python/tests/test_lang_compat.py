"""The names the original meTile added after the seeds (scalar, simd_sum, simd_max, fast_exp,
reverse_bits, Buffer(shape=)), every tile_swizzle pattern as a permutation of any grid, and the
Config/launch hints (num_warps, num_simdgroups, num_stages, WM, WN, SWIZZLE)."""

import itertools

import numpy as np
import pytest

import metile
from metile._lang_compat import FAST_EXP_MAX_REL_ERROR


@metile.kernel
def simd_reduce(X, Sum, Max, Uniform, T: metile.constexpr):
    x = metile.load(X + metile.arange(0, T))
    tid = metile.thread_id()
    metile.store(Sum + tid, metile.simd_sum(x))
    metile.store(Max + tid, metile.simd_max(x))
    metile.store(Uniform + tid, metile.simd_sum(metile.scalar(1.5)))


@pytest.mark.parametrize("t", [32, 96])
def test_simd_sum_and_max_reduce_each_simdgroup(device, t):
    x = np.random.default_rng(t).standard_normal(t).astype(np.float32)
    x[40 % t] = -np.inf if t > 40 else x[40 % t]
    s, m, u = (np.zeros(t, np.float32) for _ in range(3))
    simd_reduce[(1,)](x, s, m, u, T=t)
    groups = x.reshape(-1, 32).astype(np.float64)
    np.testing.assert_allclose(s, np.repeat(groups.sum(1), 32), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, np.repeat(x.reshape(-1, 32).max(1), 32))
    np.testing.assert_array_equal(u, np.full(t, 48.0, np.float32))
    # Every lane of a simdgroup holds the bit-identical sum (the butterfly is symmetric).
    assert all(len(set(row)) == 1 for row in s.reshape(-1, 32).tolist())


@metile.kernel
def scalar_loop(Out, N):
    acc = metile.scalar(0.0)
    count = metile.scalar(0)
    wide = metile.scalar(3, dtype="i64")
    for i in metile.tile_range(0, N):
        acc = acc + 0.5
        count = count + 1
    metile.store(Out, acc + metile.cast(count, "f32") + metile.cast(wide, "f32"))


def test_scalar_is_a_loop_carried_scalar(device):
    out = np.zeros(1, np.float32)
    scalar_loop[(1,)](out, 7)
    assert out[0] == 3.5 + 7 + 3


def test_scalar_rejects_what_is_not_a_number():
    @metile.kernel
    def bad(Out):
        metile.store(Out, metile.scalar("x"))

    with pytest.raises(metile.TracingError, match="scalar\\(\\) needs an int or float"):
        bad[(1,)](np.zeros(1, np.float32))

    @metile.kernel
    def bad_dtype(Out):
        metile.store(Out, metile.scalar(1.5, dtype="i32"))

    with pytest.raises(metile.TracingError, match="needs a float dtype"):
        bad_dtype[(1,)](np.zeros(1, np.float32))


@metile.kernel
def fast_exp_kernel(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    keep = offs < N
    metile.store(Out + offs, metile.fast_exp(metile.load(X + offs, mask=keep)), mask=keep)


def test_fast_exp_error_bound_over_a_dense_sweep(device, fast):
    n = 1 << 20 if fast else 1 << 14
    x = np.linspace(-87.0, 88.0, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    fast_exp_kernel[(metile.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    ref = np.exp(x.astype(np.float64))
    rel = np.abs(out.astype(np.float64) - ref) / ref
    assert rel.max() < FAST_EXP_MAX_REL_ERROR, rel.max()
    h = np.linspace(-8, 8, 257).astype(np.float16)
    hout = np.zeros(257, np.float16)
    fast_exp_kernel[(1,)](h, hout, 257, BLOCK=512)
    np.testing.assert_allclose(hout, np.exp(h.astype(np.float64)), rtol=2e-3)


@metile.kernel
def reverse_kernel(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    keep = offs < N
    metile.store(Out + offs, metile.reverse_bits(metile.load(X + offs, mask=keep)), mask=keep)
    metile.store(Out + N, metile.reverse_bits(6) >> 28)  # u32: a logical shift


def _reverse32(v):
    return int(f"{v & 0xFFFFFFFF:032b}"[::-1], 2)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_reverse_bits_matches_a_bit_string_reversal(device, dtype):
    vals = [0, 1, 2, 3, 0x80000000, 0xFFFFFFFF, 0x12345678, 0xF0F0F0F0, 7, 1 << 16]
    vals += list(np.random.default_rng(3).integers(0, 1 << 32, 54, dtype=np.uint64))
    x = np.array(vals, np.uint64).astype(np.uint32).view(dtype)
    out = np.zeros(len(x) + 1, np.uint32)  # the result is u32 whatever the input's sign
    reverse_kernel[(1,)](x, out, len(x), BLOCK=64)
    expect = np.array([_reverse32(int(v)) for v in x.view(np.uint32)], np.uint32)
    np.testing.assert_array_equal(out[:-1], expect)
    assert out[-1] == 6


def test_reverse_bits_rejects_other_types():
    @metile.kernel
    def bad(X, Out):
        metile.store(Out, metile.reverse_bits(metile.load(X)))

    with pytest.raises(metile.TracingError, match="reverse_bits needs a 32-bit integer"):
        bad[(1,)](np.zeros(1, np.float32), np.zeros(1, np.float32))


def test_buffer_shape_dtype_form(device):
    b = metile.Buffer(shape=(3, 4), dtype=np.int32)
    assert b.shape == (3, 4) and b.numpy().dtype == np.int32 and not b.numpy().any()
    assert metile.Buffer(shape=5).numpy().dtype == np.float32
    with pytest.raises(metile.InvalidArgumentError, match="data= or shape=, not both"):
        metile.Buffer(np.zeros(2), shape=(2,))
    with pytest.raises(metile.InvalidArgumentError, match="negative dimension"):
        metile.Buffer(shape=(-1,))


# ------------------------------------------------------------------------------ swizzle
PATTERNS = [("linear", 2), ("morton", 2), ("morton", 4), ("diagonal", 2), ("hilbert", 2),
            ("hilbert", 4), ("grouped", 3), ("grouped2", 1), ("grouped4", 1), ("grouped8", 1),
            ("auto", 2)]


def _swizzle_kernel(pattern, block):
    @metile.kernel
    def swz(Out, GN):
        pm, pn = metile.tile_swizzle(metile.program_id(0), metile.program_id(1),
                                     pattern=pattern, block_size=block)
        metile.store(Out + 2 * (metile.program_id(0) * GN + metile.program_id(1)), pm)
        metile.store(Out + 2 * (metile.program_id(0) * GN + metile.program_id(1)) + 1, pn)
    return swz


GRIDS = [(1, 1), (1, 7), (7, 1), (2, 2), (3, 5), (4, 4), (5, 3), (8, 8), (9, 6), (6, 13),
         (16, 3)]


@pytest.mark.parametrize("pattern,block", PATTERNS)
def test_tile_swizzle_is_a_permutation_of_any_grid(device, fast, pattern, block):
    swz = _swizzle_kernel(pattern, block)
    for gm, gn in (GRIDS if fast else GRIDS[::2]):
        out = np.full(gm * gn * 2, -1, np.int32)
        swz[(gm, gn)](out, gn)
        pairs = out.reshape(-1, 2)
        assert ((pairs[:, 0] >= 0) & (pairs[:, 0] < gm)).all(), (pattern, gm, gn, pairs)
        assert ((pairs[:, 1] >= 0) & (pairs[:, 1] < gn)).all(), (pattern, gm, gn, pairs)
        assert len({tuple(p) for p in pairs.tolist()}) == gm * gn, (pattern, gm, gn, pairs)
        if pattern == "linear":
            np.testing.assert_array_equal(
                pairs, np.array(list(itertools.product(range(gm), range(gn)))))


def test_hilbert_walks_a_full_square_along_the_curve(device):
    # Consecutive launch indices inside a 4x4 square are neighbours on the grid.
    swz = _swizzle_kernel("hilbert", 4)
    out = np.zeros(4 * 4 * 2, np.int32)
    swz[(4, 4)](out, 4)
    pairs = out.reshape(4, 4, 2)
    walk = [tuple(pairs[l % 4, l // 4]) for l in range(16)]  # column-major launch order
    steps = [abs(a[0] - b[0]) + abs(a[1] - b[1]) for a, b in zip(walk, walk[1:])]
    assert steps == [1] * 15, walk


def test_unknown_swizzle_pattern_is_named():
    swz = _swizzle_kernel("spiral", 2)
    with pytest.raises(metile.MetileError, match="unknown pattern \"spiral\".*hilbert.*grouped8"):
        swz[(2, 2)](np.zeros(8, np.int32), 2)


# --------------------------------------------------------------------------------- hints
@metile.kernel
def copy_kernel(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    metile.store(Out + offs, metile.load(X + offs, mask=offs < N) * 2, mask=offs < N)


HINTS = dict(num_warps=4, num_simdgroups=2, num_stages=3, WM=2, WN=4, SWIZZLE="hilbert")


def test_hints_are_accepted_at_launch_and_in_configs(device):
    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    copy_kernel[(metile.cdiv(300, 128),)](x, out, 300, BLOCK=128, **HINTS)
    np.testing.assert_array_equal(out, 2 * x)
    for name, value in HINTS.items():
        out[:] = 0
        copy_kernel[(metile.cdiv(300, 64),)](x, out, 300, BLOCK=64, **{name: value})
        np.testing.assert_array_equal(out, 2 * x)
    tuned = metile.autotune(configs=[metile.Config({"BLOCK": 64}, num_warps=2, WM=1),
                                     metile.Config(BLOCK=128, num_stages=2, SWIZZLE="morton")],
                            key=["N"], verbose=False)(copy_kernel)
    out[:] = 0
    tuned[lambda m: (metile.cdiv(300, m["BLOCK"]),)](x, out, 300)
    np.testing.assert_array_equal(out, 2 * x)


def test_num_warps_sets_the_gpu_thread_count():
    # On a GPU device num_warps asks for 32 threads per warp; the lowering reports the count.
    if "metal-sim" not in metile.devices():
        pytest.skip("needs metal-sim")
    with metile.use_device("metal-sim"):
        x = np.zeros(512, np.float32)
        k = copy_kernel[(1,)].compile(x, x, 512, BLOCK=512, num_warps=8)
        assert k.info["threads_per_group"] == 256
        k = copy_kernel[(1,)].compile(x, x, 512, BLOCK=512, num_warps=2)
        assert k.info["threads_per_group"] == 64


def test_unknown_keyword_still_names_the_hints():
    with pytest.raises(metile.InvalidArgumentError, match="hints: num_warps"):
        copy_kernel[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), 4, BLOCK=4,
                          num_wraps=4)
