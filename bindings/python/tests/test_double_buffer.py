"""Metal's double-buffered K loop (src/passes/lower_double_buffer.cpp): the suite GEMM on the
Metal devices with the piece on (the default) and off (METILE_GPU_OFF=double_buffer) computes
the same bits, and both agree with interp and with float64: ragged M, N and K, K not a multiple
of BLOCK_K, epilogues, f16/bf16/f32 inputs, 1-row and 1-column tiles. The GPU IR shows which
loops are double buffered (registers named *_next carry the next iteration's tiles)."""

import numpy as np
import pytest

import metile
from kernels import matmul as gemm
from test_memory_order import gemm_writing_ahead  # each K step writes what the next reads
from test_split_k import EPILOGUES, bf16

METAL = ("metal-sim", "metal")

# (dtype, M, N, K, (BLOCK_M, BLOCK_N, BLOCK_K), epilogue, double buffered on an M1-class GPU)
CASES = [
    (np.float16, 70, 45, 100, (32, 32, 16), "none", True),    # K = 6 x 16 + 4
    (np.float16, 130, 70, 50, (64, 64, 32), "relu", True),
    (np.float32, 33, 31, 65, (32, 32, 32), "gelu", True),     # tf32 products
    (np.float32, 50, 70, 37, (32, 32, 16), "silu", True),
    ("bf16", 45, 77, 20, (32, 32, 16), "relu", False),        # operands converted in registers
    (np.float32, 64, 40, 40, (64, 32, 32), "none", False),    # two stages exceed 3/4 of 32 KB
    (np.float16, 5, 40, 20, (1, 32, 16), "none", False),      # 1-row tiles: exact FMAs
    (np.float16, 40, 5, 20, (32, 1, 16), "none", False),      # 1-column tiles
]


@pytest.fixture(params=METAL)
def metal(request):
    if request.param not in metile.devices():
        pytest.skip("no %s device" % request.param)
    return request.param


def run(device, dtype, m, n, k, block, epilogue, **options):
    rng = np.random.default_rng(m * 131 + n * 7 + k)
    x, y = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    bm, bn, bk = block
    grid = (metile.cdiv(m, bm), metile.cdiv(n, bn))
    with metile.use_device(device):
        if dtype == "bf16":
            (a, av), (b, bv) = bf16(x), bf16(y)
        else:
            a, b = x.astype(dtype), y.astype(dtype)
            av, bv = a, b
        c = np.full((m, n), np.nan, dtype=np.float32)
        args = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, EPILOGUE=epilogue, **options)
        gemm[grid](a, b, c, m, n, k, **args)
        metile.synchronize()
        gpu_ir = "" if device == "interp" else gemm[grid].compile(a, b, c, m, n, k, **args).source("gpu_ir")
    want = EPILOGUES[epilogue](av.astype(np.float64) @ bv.astype(np.float64))
    return c, want, gpu_ir


def close(c, want, tol):
    assert not np.isnan(c).any()
    assert np.linalg.norm(c - want) / max(np.linalg.norm(want), 1e-30) < tol


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%dx%dx%d-%s" % (
    c[0] if isinstance(c[0], str) else np.dtype(c[0]).name, c[1], c[2], c[3], "x".join(map(str, c[4]))))
def test_on_and_off_compute_the_same_product(metal, monkeypatch, case):
    dtype, m, n, k, block, epilogue, doubled = case
    tol = 2e-3 if dtype == np.float32 else 1e-5  # f32 inputs: TF32 products
    on, want, ir_on = run(metal, dtype, m, n, k, block, epilogue)
    close(on, want, tol)
    ref, _, _ = run("interp", dtype, m, n, k, block, epilogue)
    close(on, ref, tol)
    assert ("%a_next" in ir_on) == doubled, ir_on
    # num_stages 7 (two on Metal): a specialization no other test compiles, since launchers
    # keep compiled kernels and METILE_GPU_OFF is read when a kernel compiles.
    monkeypatch.setenv("METILE_GPU_OFF", "double_buffer")
    off, _, ir_off = run(metal, dtype, m, n, k, block, epilogue, num_stages=7)
    assert "_next" not in ir_off, ir_off
    np.testing.assert_array_equal(on, off)  # the same products in the same order


def test_one_stage_is_the_single_buffer(metal):
    _, _, ir = run(metal, np.float16, 70, 45, 100, (32, 32, 16), "none", num_stages=1)
    assert "_next" not in ir
    assert ir.count("barrier") >= 2


def test_a_loop_that_writes_memory_keeps_the_single_buffer(metal):
    # Only the choice is checked here; test_memory_order.py checks such a kernel's results (its
    # stores are ordered before the next iteration's loads by a device barrier).
    a = np.zeros((32, 96), dtype=np.float32)
    b = np.zeros((96, 32), dtype=np.float32)
    c = np.zeros((32, 32), dtype=np.float32)
    with metile.use_device(metal):
        ir = gemm_writing_ahead[(1,)].compile(a, b, c, 96, BLOCK=32).source("gpu_ir")
        plain = gemm[(1, 1)].compile(a, b, c, 32, 32, 96, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32).source("gpu_ir")
    assert "%a_next" in plain
    assert "_next" not in ir, ir
