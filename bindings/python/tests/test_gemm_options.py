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


def test_gpu_off_names_its_pieces(sim, monkeypatch):
    # num_stages=4: a specialization no other test compiles (launchers keep compiled kernels,
    # and METILE_GPU_OFF is read when a kernel compiles).
    monkeypatch.setenv("METILE_GPU_OFF", "ldmatrix,bogus")
    with pytest.raises(metile.InvalidArgumentError,
                       match=r'METILE_GPU_OFF: unknown piece "bogus" \(async_copy, ldmatrix, '
                             r'aligned_body, pipeline, split_k\)'):
        run(64, 64, 32, num_stages=4)
