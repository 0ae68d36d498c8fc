"""tf32 on Hopper's warpgroup atom (src/passes/dot_choices.cpp): an f32 GEMM whose B is given
N x K, dot(a, trans(b)), computes what float64 numpy computes on every device (ragged M, N and K,
K not a multiple of BLOCK_K, an epilogue, one and two warpgroups, rows TMA can and cannot copy);
on an sm_90 GPU it takes wgmma .tf32 and stays within tf32's error of float64 (the operands'
low 13 mantissa bits dropped by the tensor cores), allow_tf32=False keeps exact f32 (FMAs, no
matrix atom). The same GEMM with B given K x N takes the transposed form (C^T = B^T A^T) on
sm_90, checked the same way on every device."""

import numpy as np
import pytest

import metile


@metile.kernel
def gemm_nt(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
            BLOCK_K: metile.constexpr, RELU: metile.constexpr):
    pid_m, pid_n = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, pid_n * BLOCK_N, k, K, (BLOCK_N, BLOCK_K), bounds=(N, K))
        acc = metile.dot(a, metile.trans(b), acc)
    if RELU:
        acc = metile.where(acc > 0, acc, 0.0)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))


def run(m, n, k, block, threads=0, relu=False, **options):
    rng = np.random.default_rng(m * 131 + n * 7 + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    bm, bn, bk = block
    grid = (metile.cdiv(m, bm), metile.cdiv(n, bn))
    extra = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, RELU=relu, **options)
    if threads:
        extra["num_threads"] = threads
    gemm_nt[grid](a, b, c, m, n, k, **extra)
    metile.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64).T
    if relu:
        want = np.maximum(want, 0)
    kernel = gemm_nt[grid].compile(a, b, c, m, n, k, **extra)
    assert not np.isnan(c).any(), "every element written"
    return np.linalg.norm(c - want) / np.linalg.norm(want), kernel


def hopper(device):
    return device.name == "cuda" and device.architecture.startswith("sm_90")


# (m, n, k, block, threads): whole tiles; ragged M/N/K with 16-byte rows (TMA on sm_90); K = 45
# (rows of 180 bytes: the async copies); two warpgroups over 128 rows; two side by side (64 x 256).
SHAPES = [(128, 128, 96, (64, 64, 32), 0), (136, 72, 40, (64, 64, 16), 0), (100, 77, 45, (64, 64, 16), 0),
          (256, 128, 64, (128, 128, 32), 256), (64, 512, 64, (64, 256, 32), 256)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%dx%d" % s[:3])
def test_transposed_b_gemm_matches_float64(device, shape):
    m, n, k, block, threads = shape
    err, kernel = run(m, n, k, block, threads, relu=(k == 45), allow_tf32=True)
    # tf32 keeps 10 mantissa bits of each operand: ~3e-4 relative (rounded), up to ~1e-3
    # (truncated); exact f32 devices land far below.
    assert err < 2e-3, err
    if hopper(device):
        cuda = kernel.source("cuda")
        # No mma.sync call in the kernel (the prelude defines mt_mma_tf32 for tf32x3's use).
        assert "wgmma.mma_async" in cuda and ".f32.tf32.tf32" in cuda and "mt_mma_tf32(&" not in cuda


def test_tf32_off_keeps_exact_f32(device):
    if device.name != "cuda":
        pytest.skip("the cuda lowering")
    err, kernel = run(136, 72, 40, (64, 64, 16), allow_tf32=False)
    assert err < 1e-5, err
    gpu_ir = kernel.source("gpu_ir")
    assert "wgmma" not in gpu_ir and " mma " not in gpu_ir


@metile.kernel
def gemm_nn(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
            BLOCK_K: metile.constexpr, RELU: metile.constexpr):
    pid_m, pid_n = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    if RELU:
        acc = metile.where(acc > 0, acc, 0.0)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%dx%d" % s[:3])
def test_b_given_k_by_n_takes_the_transposed_form(device, shape):
    # B N-major: on sm_90 C^T = B^T A^T (B^T's fragments from registers); the accumulator's
    # layout maps C^T's registers back to C for the epilogue and the store.
    m, n, k, (bm, bn, bk), threads = shape
    rng = np.random.default_rng(m * 31 + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    grid = (metile.cdiv(m, bm), metile.cdiv(n, bn))
    extra = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, RELU=(k == 45), allow_tf32=True)
    if threads:
        extra["num_threads"] = threads
    gemm_nn[grid](a, b, c, m, n, k, **extra)
    metile.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64)
    if k == 45:
        want = np.maximum(want, 0)
    assert not np.isnan(c).any()
    err = np.linalg.norm(c - want) / np.linalg.norm(want)
    assert err < 2e-3, err
    if hopper(device):
        cuda = gemm_nn[grid].compile(a, b, c, m, n, k, **extra).source("cuda")
        assert "wgmma.mma_async" in cuda and "k8.f32.tf32.tf32" in cuda and "mt_mma_tf32(&" not in cuda
