"""num_stages (a hint acted on) and warps_m / warps_n (checked options) on a GEMM: the warp grid
shows in the GPU IR, every choice computes the same product as float64 numpy, and a grid that
cannot tile the dot, or half of one, is an InvalidArgumentError naming the values. metal-sim runs
the GPU lowering here (cuda is measured in bench/gemm_vs_cublas.py)."""

import numpy as np
import pytest

import metile
from kernels import matmul as gemm  # the suite's GEMM (tile_load, dot, tile_store, bounds)


@pytest.fixture
def sim():
    if "metal-sim" not in metile.devices():
        pytest.skip("no metal-sim device")
    with metile.use_device("metal-sim"):
        yield


def run(m, n, k, **options):
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, dtype=np.float32)
    grid = (metile.cdiv(m, 32), metile.cdiv(n, 32))
    gemm[grid](a, b, c, m, n, k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, **options)
    metile.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - want) / np.linalg.norm(want) < 1e-5
    return gemm[grid].compile(a, b, c, m, n, k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, **options)


@pytest.mark.parametrize("options", [{}, {"num_stages": 1}, {"num_stages": 2},
                                     {"warps_m": 2, "warps_n": 2}, {"warps_m": 4, "warps_n": 1},
                                     {"warps_m": 1, "warps_n": 2, "num_stages": 3}])
def test_every_choice_computes_the_product(sim, options):
    k = run(70, 45, 40, **options)
    if "warps_m" in options:
        grid = "warps_m=%d warps_n=%d" % (options["warps_m"], options["warps_n"])
        assert grid in k.source("gpu_ir")


def test_a_grid_that_cannot_tile_the_dot_is_refused(sim):
    with pytest.raises(metile.InvalidArgumentError, match="warps_m 3 x warps_n 1 does not tile"):
        run(64, 64, 32, warps_m=3, warps_n=1)
    with pytest.raises(metile.InvalidArgumentError, match="warps_m 2 and warps_n 0: set both"):
        run(64, 64, 32, warps_m=2)
    with pytest.raises(metile.InvalidArgumentError, match="warps_m 33 is out of range"):
        run(64, 64, 32, warps_m=33, warps_n=1)


def test_gpu_off_takes_pass_names_and_pieces_in_one_list(sim, monkeypatch):
    # Lowering pieces, GPU IR passes and a Tile IR pass in one comma list, each switched off:
    # the product is the same, and the GPU IR shows cse's and dce's work undone.
    # num_stages=5: a specialization no other test compiles (METILE_GPU_OFF is read at compile).
    on = run(70, 45, 40, num_stages=5).source("gpu_ir_opt")
    monkeypatch.setenv("METILE_GPU_OFF", "double_buffer,fold-constants,cse,dce,whole_tiles,"
                                         "vectorize-access,stage_counter")
    off = run(70, 45, 40, num_stages=6).source("gpu_ir_opt")
    assert len(off) > len(on)


def test_gpu_off_names_its_pieces(sim, monkeypatch):
    # num_stages=4: a specialization no other test compiles (launchers keep compiled kernels,
    # and METILE_GPU_OFF is read when a kernel compiles).
    monkeypatch.setenv("METILE_GPU_OFF", "ldmatrix,bogus")
    with pytest.raises(metile.InvalidArgumentError,
                       match=r'unknown pass "bogus" to disable \(METILE_GPU_OFF / disabled_passes; '
                             r'Tile IR passes: activity, .*split_k, .*whole_tiles, .*; GPU IR passes: '
                             r'hoist-invariant-staging, issue-copies-early, ldmatrix-fragments, serpentine-mma, preload-fragments, release-stages, '
                             r'specialize-warps, fold-constants, cse, dce, .*; '
                             r'pieces: async_copy, aligned_body, .*tma, .*'
                             r'one_align, last_first, wide_chunks, fp8_promote, broadcast_loads, warpgroup_kmajor_b, '
                             r'warpgroup_register_a, warpgroup_stored_b, running_sums, two_counts, whole_blocks, threadgroup_rows\)'):
        run(64, 64, 32, num_stages=4)


@metile.kernel
def softmax_of_scores(A, B, P, N: metile.constexpr):
    """P = softmax(A @ B) by rows: the dot's rows are reduced, which makes the compiler give
    each warp whole rows unless a warp grid is asked for."""
    a = metile.tile_load(A, 0, 0, N, (N, N))
    b = metile.tile_load(B, 0, 0, N, (N, N))
    s = metile.dot(a, b, metile.zeros((N, N), dtype="f32"))
    e = metile.exp(s - metile.max(s, axis=1)[:, None])
    metile.tile_store(P, 0, 0, N, e / metile.sum(e, axis=1)[:, None], (N, N))


@pytest.mark.parametrize("options", [{}, {"warps_m": 2, "warps_n": 2}, {"warps_m": 1, "warps_n": 4}])
def test_an_asked_grid_wins_over_whole_rows(sim, options):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((32, 32)) / 4).astype(np.float16)
    b = (rng.standard_normal((32, 32)) / 4).astype(np.float16)
    p = np.full((32, 32), np.nan, dtype=np.float32)
    softmax_of_scores[(1,)](a, b, p, N=32, num_threads=128, **options)
    metile.synchronize()
    s = a.astype(np.float64) @ b.astype(np.float64)
    want = np.exp(s - s.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(p, want, rtol=1e-5, atol=1e-6)
    gpu_ir = softmax_of_scores[(1,)].compile(a, b, p, N=32, num_threads=128, **options).source("gpu_ir")
    if options:
        assert "warps_m=%d warps_n=%d" % (options["warps_m"], options["warps_n"]) in gpu_ir
    else:
        assert "warps_m=4 warps_n=1" in gpu_ir  # the compiler's whole rows


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("stages,off", [(2, ""), (3, "preload-fragments"), (4, "serpentine"),
                                        (5, "preload,serpentine,ldmatrix"), (6, "stage_counter")])
def test_cuda_pieces_switched_off_compute_the_same_product(monkeypatch, dtype, stages, off):
    # Differential test of the mma.sync pieces on the device that has them; each case its own
    # num_stages so the launcher compiles it afresh (METILE_GPU_OFF is read at compile time).
    if "cuda" not in metile.devices():
        pytest.skip("no cuda device")
    monkeypatch.setenv("METILE_GPU_OFF", off)
    m, n, k = 200, 136, 264
    rng = np.random.default_rng(stages)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    with metile.use_device("cuda"):
        c = np.full((m, n), np.nan, dtype=np.float32)
        grid = (metile.cdiv(m, 64), metile.cdiv(n, 64))
        gemm[grid](a, b, c, m, n, k, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_stages=stages)
        metile.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dtype == np.float16 else 2e-3  # f32 inputs: TF32 products
    assert np.linalg.norm(c - want) / np.linalg.norm(want) < tol
