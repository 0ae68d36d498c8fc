"""Program order between threads (src/passes/order_device_memory.cpp): a tile program that
stores into a buffer and then reads or overwrites elements another thread stored (or read)
gets the result of running its ops in order, on every device, as interp computes it; float64
references check interp. On the GPUs the GPU IR shows the barrier ordering device memory, and
none where every thread touches only its own elements (a row kernel's whole and partial tiles)."""

import numpy as np
import pytest

import metile
from kernels import rmsnorm, seed_softmax


@metile.kernel
def shift_up(X, N, BLOCK: metile.constexpr):
    """Each tile reads X[i:i+BLOCK] and writes X[i+1:i+BLOCK+1]: the next tile reads what this
    one stored, and within a tile each element is read before a neighbour's thread overwrites it."""
    for i in metile.tile_range(0, N - 1, BLOCK):
        offs = i + metile.arange(0, BLOCK)
        mask = offs < N - 1
        x = metile.load(X + offs, mask=mask)
        metile.store(X + offs + 1, x * 0.5 + 1.0, mask=mask)


def shift_up_reference(x, block):
    x = x.astype(np.float64)
    n = len(x)
    for i in range(0, n - 1, block):
        hi = min(i + block, n - 1)
        tile = x[i:hi].copy()
        x[i + 1:hi + 1] = tile * 0.5 + 1.0
    return x


@metile.kernel
def transpose_in_place(X, BLOCK: metile.constexpr):
    r = metile.arange(0, BLOCK)
    x = metile.load(X + r[:, None] * BLOCK + r[None, :])
    metile.store(X + r[None, :] * BLOCK + r[:, None], x)


@metile.kernel
def gemm_writing_ahead(A, B, C, K, BLOCK: metile.constexpr):
    """Each K step overwrites the block of A the next step reads."""
    acc = metile.zeros((BLOCK, BLOCK), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK):
        a = metile.tile_load(A, 0, k, K, (BLOCK, BLOCK))
        b = metile.tile_load(B, k, 0, BLOCK, (BLOCK, BLOCK))
        acc = metile.dot(a, b, acc)
        metile.tile_store(A, 0, k + BLOCK, K, acc * 0.125, (BLOCK, BLOCK), bounds=(BLOCK, K))
    metile.tile_store(C, 0, 0, BLOCK, acc, (BLOCK, BLOCK))


def gemm_writing_ahead_reference(a, b, block):
    a = a.astype(np.float64)
    k_total = a.shape[1]
    acc = np.zeros((block, block))
    for k in range(0, k_total, block):
        acc = acc + a[:, k:k + block] @ b[k:k + block, :]
        hi = min(k + 2 * block, k_total)
        if k + block < hi:
            a[:, k + block:hi] = acc[:, :hi - k - block] * 0.125
    return acc, a


def on(device_name, fn):
    with metile.use_device(device_name):
        return fn()


def gpu_ir(device, kernel, grid, *args, **constexprs):
    if device.name in ("interp", "cpu"):
        return None
    return kernel[grid].compile(*args, **constexprs).source("gpu_ir_opt")


@pytest.mark.parametrize("n,block", [(1000, 128), (257, 64), (64, 64), (2, 32)])
def test_each_tile_reads_what_the_previous_one_stored(device, n, block):
    x0 = np.random.standard_normal(n).astype(np.float32)
    x = x0.copy()
    shift_up[(1,)](x, n, BLOCK=block)
    ref = x0.copy()
    on("interp", lambda: shift_up[(1,)](ref, n, BLOCK=block))
    np.testing.assert_allclose(ref, shift_up_reference(x0, block), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x, ref, rtol=1e-6, atol=1e-6)
    ir = gpu_ir(device, shift_up, (1,), x0.copy(), n, BLOCK=block)
    if ir is not None:
        assert "barrier memory=1" in ir, ir


@pytest.mark.parametrize("block", [16, 64])
def test_a_transpose_in_place_reads_every_element_before_it_is_overwritten(device, block):
    x0 = np.arange(block * block, dtype=np.float32)
    x = x0.copy()
    transpose_in_place[(1,)](x, BLOCK=block)
    np.testing.assert_array_equal(x.reshape(block, block), x0.reshape(block, block).T)
    ir = gpu_ir(device, transpose_in_place, (1,), x0.copy(), BLOCK=block)
    if ir is not None:
        assert "barrier memory=1" in ir, ir


@pytest.mark.parametrize("k_total", [96, 70])
def test_a_gemm_reads_the_block_its_previous_step_stored(device, k_total):
    block = 32
    rng = np.random.default_rng(k_total)
    # Small integers: every product and sum is exact in tf32 and f32, so devices agree exactly.
    a0 = rng.integers(-2, 3, (block, k_total)).astype(np.float32)
    b = rng.integers(-2, 3, (k_total, block)).astype(np.float32) * 0.25
    a, c = a0.copy(), np.zeros((block, block), np.float32)
    gemm_writing_ahead[(1,)](a, b, c, k_total, BLOCK=block)
    a_ref, c_ref = a0.copy(), np.zeros_like(c)
    on("interp", lambda: gemm_writing_ahead[(1,)](a_ref, b, c_ref, k_total, BLOCK=block))
    acc64, a64 = gemm_writing_ahead_reference(a0, b, block)
    np.testing.assert_allclose(c_ref, acc64, rtol=1e-6)
    np.testing.assert_allclose(a_ref, a64, rtol=1e-6)
    np.testing.assert_array_equal(c, c_ref)
    np.testing.assert_array_equal(a, a_ref)


@metile.kernel
def double_then_gemm(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                     BLOCK_K: metile.constexpr):
    """One program: doubles A's first K block in place, then multiplies (on sm_90 the K loop's
    A copies are TMA's, which read through the async proxy)."""
    a0 = metile.tile_load(A, 0, 0, K, (BLOCK_M, BLOCK_K))
    metile.tile_store(A, 0, 0, K, metile.cast(a0 * 2.0, "f16"), (BLOCK_M, BLOCK_K))
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, 0, k, K, (BLOCK_M, BLOCK_K))
        b = metile.tile_load(B, k, 0, N, (BLOCK_K, BLOCK_N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, 0, 0, N, acc, (BLOCK_M, BLOCK_N))


def test_a_gemm_reads_what_the_program_stored_before_its_k_loop(device):
    m, n, k = 128, 128, 256
    rng = np.random.default_rng(3)
    a0 = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = (rng.integers(-3, 4, (k, n)) * 0.5).astype(np.float16)
    a, c = a0.copy(), np.full((m, n), np.nan, np.float32)
    options = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=3)
    double_then_gemm[(1,)](a, b, c, m, n, k, **options)
    metile.synchronize()
    want_a = a0.astype(np.float64)
    want_a[:, :64] *= 2
    np.testing.assert_array_equal(a, want_a.astype(np.float16))
    np.testing.assert_array_equal(c, want_a @ b.astype(np.float64))  # small integers: exact
    if device.name == "cuda" and device.architecture.startswith("sm_90"):
        src = double_then_gemm[(1,)].compile(a0, b, c, m, n, k, **options).source("cuda")
        assert "mt_tma_load_2d(" in src and "fence.proxy.async.global" in src, src


def barriers(device, kernel, grid, *args, **constexprs):
    return gpu_ir(device, kernel, grid, *args, **constexprs).count("barrier memory=1")


@pytest.mark.parametrize("order", ["", "last_first"])
@pytest.mark.parametrize("n", [31, 64, 250])
def test_a_row_kernels_whole_and_partial_tiles_store_without_a_barrier(device, monkeypatch, n,
                                                                      order):
    """whole_tiles splits each row loop in two (src/passes/tile/peel_partial_tiles.cpp); both
    store an element from the thread that owns it, so the split adds no barrier (it added one per
    row program before), last-first or in order (METILE_GPU_OFF=last_first)."""
    if order:
        monkeypatch.setenv("METILE_GPU_OFF", order)
    rows = 3
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
    w = np.linspace(0.5, 1.5, n).astype(np.float32)
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(1, keepdims=True))
    cases = [(seed_softmax, (x,), e / e.sum(1, keepdims=True)),
             (rmsnorm, (x, w), xd / np.sqrt((xd * xd).mean(1, keepdims=True) + 1e-5) * w)]
    for kernel, inputs, want in cases:
        # New kernel objects: compiled kernels are cached per program, and METILE_GPU_OFF is read
        # when one compiles.
        kernel = metile.kernel(kernel.fn)
        out, ref = np.full_like(x, np.nan), np.full_like(x, np.nan)
        kernel[(rows,)](*inputs, out, n, BLOCK=32)
        metile.synchronize()
        on("interp", lambda: kernel[(rows,)](*inputs, ref, n, BLOCK=32))
        np.testing.assert_allclose(ref, want, rtol=2e-5, atol=1e-6, err_msg=kernel.fn.__name__)
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-6, err_msg=kernel.fn.__name__)
        if device.name in ("interp", "cpu"):
            continue
        split = barriers(device, kernel, (rows,), *inputs, out, n, BLOCK=32)
        with monkeypatch.context() as m:
            m.setenv("METILE_GPU_OFF", ",".join(filter(None, [order, "whole_tiles"])))
            one_loop = barriers(device, metile.kernel(kernel.fn), (rows,), *inputs, out, n,
                                BLOCK=32)
        assert split == one_loop == 0, (kernel.fn.__name__, split, one_loop)
