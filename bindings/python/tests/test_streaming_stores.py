"""Streamed stores on the cpu device: a launch whose buffers exceed METILE_CPU_STREAM_MIN_BYTES
(default: the last-level cache) writes 1-D tiles of consecutive addresses with non-temporal
stores, piece by piece, falling back to the masked loop where a piece has masked-off elements.
The tests set the threshold to 0 so every launch streams, and compare with the interp device and
numpy (float64 where arithmetic is involved)."""

import numpy as np
import pytest

import metile


@pytest.fixture
def streaming(monkeypatch):
    monkeypatch.setenv("METILE_CPU_STREAM_MIN_BYTES", "0")


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask) + metile.load(Y + offs, mask=mask),
                 mask=mask)


@metile.kernel
def positive_only(X, Out, N, BLOCK: metile.constexpr):
    """A mask that depends on the data: pieces with some elements masked off."""
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    metile.store(Out + offs, x * 2, mask=(offs < N) & (x > 0))


@metile.kernel
def every_other(X, Out, N, BLOCK: metile.constexpr):
    """Addresses two elements apart: never streamed."""
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    metile.store(Out + offs * 2, metile.load(X + offs, mask=offs < N), mask=offs < N)


@metile.kernel
def scale_rows(X, Out, N, BLOCK: metile.constexpr):
    """A store inside a tile_range loop, in half precision."""
    row = metile.program_id(0)
    for start in metile.tile_range(0, N, BLOCK):
        cols = start + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        metile.store(Out + row * N + cols, (x * 0.5).to("f16"), mask=cols < N)


def run(device_name, kernel, grid, arrays, *scalars, **meta):
    with metile.use_device(device_name):
        bufs = [metile.Buffer(data=a.copy()) for a in arrays]
        kernel[grid](*bufs, *scalars, **meta)
        metile.synchronize()
        return [b.numpy() for b in bufs]


def both(kernel, grid, arrays, *scalars, **meta):
    if "cpu" not in metile.devices():
        pytest.skip("the cpu device is not available here")
    return (run("cpu", kernel, grid, arrays, *scalars, **meta),
            run("interp", kernel, grid, arrays, *scalars, **meta))


@pytest.mark.parametrize("n", [4096, 4096 + 64, 4096 + 37, 100, 63])
def test_vector_add_streamed_matches(streaming, n):
    rng = np.random.default_rng(n)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, -7, np.float32)
    cpu, interp = both(add, (metile.cdiv(n, 1024),), [x, y, out], n, BLOCK=1024)
    np.testing.assert_array_equal(cpu[2], (x.astype(np.float64) + y).astype(np.float32))
    np.testing.assert_array_equal(cpu[2], interp[2])


def test_streamed_store_is_in_the_cpp_only_for_consecutive_addresses(streaming):
    if "cpu" not in metile.devices():
        pytest.skip("the cpu device is not available here")
    with metile.use_device("cpu"):
        x, o = metile.Buffer(data=np.zeros(2048, np.float32)), metile.Buffer.zeros((4096,))
        assert "mt_stream_fence();" in add[(1,)].compile(x, x, o, 2048, BLOCK=1024).source("cpp")
        assert "mt_stream_fence();" not in every_other[(1,)].compile(x, o, 2048,
                                                                    BLOCK=1024).source("cpp")


def test_data_dependent_mask_leaves_masked_elements(streaming):
    n = 5000
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    x[:1024] = np.abs(x[:1024]) + 1  # whole pieces unmasked, then mixed ones
    out = np.full(n, 3, np.float32)
    cpu, interp = both(positive_only, (metile.cdiv(n, 512),), [x, out], n, BLOCK=512)
    np.testing.assert_array_equal(cpu[1], np.where(x > 0, x * 2, 3).astype(np.float32))
    np.testing.assert_array_equal(cpu[1], interp[1])


def test_strided_store_is_unchanged(streaming):
    n = 3000
    x = np.arange(n, dtype=np.float32)
    out = np.full(2 * n, -1, np.float32)
    cpu, interp = both(every_other, (metile.cdiv(n, 256),), [x, out], n, BLOCK=256)
    want = out.copy()
    want[0::2] = x
    np.testing.assert_array_equal(cpu[1], want)
    np.testing.assert_array_equal(cpu[1], interp[1])


def test_half_precision_store_in_a_loop(streaming):
    rows, n = 3, 1000
    x = np.random.default_rng(2).standard_normal(rows * n).astype(np.float32)
    out = np.zeros(rows * n, np.float16)
    cpu, interp = both(scale_rows, (rows,), [x, out], n, BLOCK=256)
    np.testing.assert_array_equal(cpu[1], (x.astype(np.float64) * 0.5).astype(np.float16))
    np.testing.assert_array_equal(cpu[1], interp[1])
