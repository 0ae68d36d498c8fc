"""Triton habits (issue 17 item 7) that work today: axis=0 reductions of 1-D tiles,
static_assert, multiple_of / max_contiguous hints, Config({...}), num_warps, and
metile.testing.do_bench."""

import numpy as np
import pytest

import metile


@metile.kernel
def reduce_axis0(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    offs = metile.multiple_of(metile.max_contiguous(offs, BLOCK), 1)
    metile.static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of 32")
    x = metile.load(X + offs, mask=offs < N, other=0.0)
    metile.store(Out + 0, metile.sum(x, axis=0))
    metile.store(Out + 1, metile.max(x, axis=0))
    metile.store(Out + 2, metile.min(x, axis=-1))


def test_axis0_reductions_of_a_1d_tile(device):
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32) + 3
    out = np.zeros(3, np.float32)
    reduce_axis0[(1,)](x, out, 64, BLOCK=64, num_warps=2)
    np.testing.assert_allclose(out, [x.astype(np.float64).sum(), x.max(), x.min()], rtol=1e-5)


def test_bad_axis_on_a_1d_tile_is_named():
    @metile.kernel
    def bad(X, Out):
        metile.store(Out, metile.sum(metile.load(X + metile.arange(0, 32)), axis=1))

    with pytest.raises(metile.TracingError, match="axis 1 is invalid .* 0 on 1-D tiles"):
        bad[(1,)](np.zeros(32, np.float32), np.zeros(1, np.float32))


def test_static_assert_fails_the_trace_with_the_message():
    with pytest.raises(metile.TracingError, match="static_assert failed: BLOCK must be a "
                                                  "multiple of 32"):
        reduce_axis0[(1,)](np.zeros(48, np.float32), np.zeros(3, np.float32), 48, BLOCK=48)

    @metile.kernel
    def traced(X, N):
        metile.static_assert(N > 0)

    with pytest.raises(metile.TracingError, match="static_assert needs a compile-time condition"):
        traced[(1,)](np.zeros(1, np.float32), 3)


def test_hints_reject_what_is_not_a_positive_int():
    @metile.kernel
    def bad(X):
        metile.multiple_of(metile.arange(0, 4), 0)

    with pytest.raises(metile.TracingError, match="multiple_of needs positive compile-time ints"):
        bad[(1,)](np.zeros(4, np.float32))


@metile.kernel
def scale_kernel(X, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    metile.store(X + offs, metile.load(X + offs, mask=offs < N) * 1.0, mask=offs < N)


def test_do_bench_times_prepared_launches_and_callables(device, bench_flush):
    x = metile.Buffer(np.ones(4096, np.float32))
    run = scale_kernel[(16,)].prepare(x, 4096, BLOCK=256)
    ms = metile.testing.do_bench(run, warmup=1, rep=5)
    assert isinstance(ms, float) and ms > 0
    qs = metile.testing.do_bench(lambda: scale_kernel[(16,)](x, 4096, BLOCK=256), warmup=1,
                                 rep=5, quantiles=[0.2, 0.5, 0.8])
    assert len(qs) == 3 and 0 < qs[0] <= qs[1] <= qs[2]
    assert metile.testing.do_bench(run, warmup=0, rep=3, return_mode="min") > 0
    np.testing.assert_array_equal(x.numpy(), 1)


def test_do_bench_rejects_bad_arguments():
    with pytest.raises(metile.InvalidArgumentError, match="needs a callable"):
        metile.testing.do_bench(3)
    with pytest.raises(metile.InvalidArgumentError, match="return_mode must be one of"):
        metile.testing.do_bench(lambda: None, return_mode="p99")
    with pytest.raises(metile.InvalidArgumentError, match="rep > 0 milliseconds"):
        metile.testing.do_bench(lambda: None, rep=0)


@metile.kernel
def arg_kernel(X, Out, R: metile.constexpr, C: metile.constexpr):
    r = metile.arange(0, R)
    c = metile.arange(0, C)
    x = metile.load(X + r[:, None] * C + c[None, :])
    metile.store(Out + 0, metile.argmax(x))
    metile.store(Out + 1, metile.argmin(x))
    metile.store(Out + 2 + c, metile.argmax(x, axis=0))
    metile.store(Out + 2 + C + r, metile.argmin(x, axis=1))
    row = metile.load(X + c)
    metile.store(Out + 2 + C + R, metile.argmax(row, axis=0))


def test_argmax_argmin_give_numpys_first_index(device):
    rows, cols = 8, 16
    x = np.random.default_rng(5).integers(-4, 4, (rows, cols)).astype(np.float32)  # ties
    out = np.full(2 + cols + rows + 1, -1, np.int32)
    arg_kernel[(1,)](x, out, R=rows, C=cols)
    assert out[0] == np.argmax(x) and out[1] == np.argmin(x)
    np.testing.assert_array_equal(out[2:2 + cols], np.argmax(x, axis=0))
    np.testing.assert_array_equal(out[2 + cols:2 + cols + rows], np.argmin(x, axis=1))
    assert out[-1] == np.argmax(x[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_argmax_argmin_with_nans_follow_numpy(device, dtype):
    # numpy: the first NaN wins, along either axis and over the whole tile; all-NaN gives 0.
    rows, cols = 8, 16
    x = np.random.default_rng(6).integers(-4, 4, (rows, cols)).astype(dtype)
    snan = np.array([0x7f800001], np.uint32).view(np.float32)[0].astype(dtype) \
        if dtype == np.float32 else np.array([0x7c01], np.uint16).view(np.float16)[0]
    x[1, :] = np.nan                # a whole row of NaNs
    x[3, 5] = np.nan                # one NaN in a row and a column
    x[5, 9] = -np.nan               # a negative NaN further on
    x[6, 2] = snan                  # a signalling NaN
    x[:, 12] = np.nan               # a whole column
    for grid_x in (x, np.full_like(x, np.nan)):
        out = np.full(2 + cols + rows + 1, -1, np.int32)
        arg_kernel[(1,)](grid_x.astype(np.float32) if dtype == np.float32 else grid_x, out,
                         R=rows, C=cols)
        with np.errstate(invalid="ignore"):
            assert out[0] == np.argmax(grid_x) and out[1] == np.argmin(grid_x)
            np.testing.assert_array_equal(out[2:2 + cols], np.argmax(grid_x, axis=0))
            np.testing.assert_array_equal(out[2 + cols:2 + cols + rows], np.argmin(grid_x, axis=1))
            assert out[-1] == np.argmax(grid_x[0])


def test_argmax_of_a_scalar_is_an_error():
    @metile.kernel
    def bad(X, Out):
        metile.store(Out, metile.argmax(metile.load(X)))

    with pytest.raises(metile.TracingError, match="argmax needs a tile"):
        bad[(1,)](np.zeros(1, np.float32), np.zeros(1, np.int32))
