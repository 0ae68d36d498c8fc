"""split_k (metile_compile_options.split_k): the suite's GEMM with its K loop in 1, 2, 4 parts or
the compiler's choice (0) computes what float64 numpy computes, through every epilogue, ragged
shapes, f16/bf16/f32 inputs and a block swizzle, on interp and cpu (which ignore the option),
metal-sim and cuda; the split shows in the Tile IR on GPUs; results are the same bits run to
run; a negative or too large split_k is refused, and one larger than the K loop's iterations
fails the launch naming the loop."""

import numpy as np
import pytest

import metile
from kernels import matmul as gemm

GPUS = ("metal-sim", "metal", "cuda")  # the devices that split; interp and cpu ignore split_k
EPILOGUES = {"none": lambda x: x, "relu": lambda x: np.maximum(x, 0),
             "gelu": lambda x: x / (1 + np.exp(-1.702 * x)), "silu": lambda x: x / (1 + np.exp(-x))}


def bf16(x):
    """x rounded to bf16 (nearest even) as a bf16 Buffer, and the values it holds."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return metile.Buffer(data=bits, dtype="bf16"), (bits.astype(np.uint32) << 16).view(np.float32)


def gpu_only(device):
    if device.name not in GPUS:
        pytest.skip("split_k applies on GPU devices")


def run(device, m, n, k, split_k, dtype=np.float16, epilogue="none", block=(32, 32, 16), **extra):
    rng = np.random.default_rng(m * 131 + n * 7 + k)
    x, y = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    bm, bn, bk = block
    grid = (metile.cdiv(m, bm), metile.cdiv(n, bn))
    with metile.use_device(device.name):
        if dtype == "bf16":
            (a, av), (b, bv) = bf16(x), bf16(y)
        else:
            a, b = x.astype(dtype), y.astype(dtype)
            av, bv = a, b
        c = np.full((m, n), np.nan, dtype=np.float32)
        gemm[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, EPILOGUE=epilogue,
                   split_k=split_k, **extra)
        metile.synchronize()
        kernel = gemm[grid].compile(a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                    EPILOGUE=epilogue, split_k=split_k, **extra)
    want = EPILOGUES[epilogue](av.astype(np.float64) @ bv.astype(np.float64))
    return c, want, kernel


def close(c, want, tol):
    assert not np.isnan(c).any()
    assert np.linalg.norm(c - want) / max(np.linalg.norm(want), 1e-30) < tol


@pytest.mark.parametrize("split_k", [1, 2, 4, 0])
def test_every_split_computes_the_product(device, split_k):
    # Ragged M, N and K (K = 70: 5 iterations of 16, the last partial), 2x2 programs.
    c, want, kernel = run(device, 40, 50, 70, split_k)
    close(c, want, 1e-5)
    split = "split_k_workspace" in kernel.source("tile_ir_opt")
    assert split == (device.name in GPUS and split_k > 1)  # 0, the compiler's choice: no split


@pytest.mark.parametrize("epilogue", ["relu", "gelu", "silu"])
def test_the_epilogue_runs_once_on_the_sum(device, epilogue):
    c, want, _ = run(device, 33, 64, 96, 3, epilogue=epilogue)
    close(c, want, 1e-5)


@pytest.mark.parametrize("dtype,tf32", [(np.float32, False), (np.float32, True), (np.float16, None),
                                        ("bf16", None)])
def test_input_types(device, dtype, tf32):
    extra = {} if tf32 is None else {"allow_tf32": tf32}
    c, want, _ = run(device, 16, 64, 128, 4, dtype=dtype, **extra)
    close(c, want, 5e-3 if tf32 else 1e-5)


def test_a_swizzle(device):
    c, want, _ = run(device, 64, 96, 64, 2, SWIZZLE="morton")
    close(c, want, 1e-5)


def test_results_are_the_same_bits_run_to_run(device):
    gpu_only(device)
    first, _, _ = run(device, 16, 64, 256, 4)
    for _ in range(2):
        again, _, _ = run(device, 16, 64, 256, 4)
        assert np.array_equal(first, again)


def test_gpu_off_split_k_leaves_the_loop_alone(device, monkeypatch):
    gpu_only(device)
    monkeypatch.setenv("METILE_GPU_OFF", "split_k")
    # BLOCK_K 32: a specialization no other test compiles (METILE_GPU_OFF is read at compile).
    c, want, kernel = run(device, 40, 50, 70, 2, block=(32, 32, 32))
    close(c, want, 1e-5)
    assert "split_k_workspace" not in kernel.source("tile_ir_opt")


def test_bad_split_k_is_refused(device):
    for bad in (-1, 65):
        with pytest.raises(metile.InvalidArgumentError, match=f"split_k {bad} is out of range"):
            run(device, 32, 32, 32, bad)


def test_more_parts_than_iterations_fails_the_launch(device):
    gpu_only(device)
    # K = 32, BLOCK_K = 16: 2 iterations, 3 parts.
    with pytest.raises(metile.DeviceError, match=r"kernels.py:\d+: for: split_k 3 is more than "
                                                 r"the loop's iterations"):
        run(device, 32, 32, 32, 3)


def test_a_thread_count_option_still_splits(device):
    # num_threads (an option, not SIMT ops) leaves the program GEMM-shaped.
    gpu_only(device)
    c, want, kernel = run(device, 16, 64, 128, 4, num_threads=64)
    close(c, want, 1e-5)
    assert "split_k_workspace" in kernel.source("tile_ir_opt")
