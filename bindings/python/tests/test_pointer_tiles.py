"""The pointer_tiles Tile IR pass: a GEMM written the Triton way, with pointer arithmetic
(`a_ptr + rows[:, None] * stride_am + cols[None, :] * stride_ak`, loads masked by the matrix
bounds, pointers advanced by BLOCK_K columns or rows each iteration), compiles to the same tile
loads as the tile_load form: the same threadgroup memory on metal-sim for every one of Triton
tutorial 03's eight tile configurations, and float64 results on every device. Integer arguments
equal to 1 (the unit strides) are constants in the compiled kernel, which is what lets the pass
see a unit column stride; the pass's IR-level cases are in tests/unit/pointer_tiles_test.cpp."""

import os

import numpy as np
import pytest

import metile
from kernels import mm_pointers, mm_tiles

# Tutorial 03's CUDA configurations (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps).
CONFIGS = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
           (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]


class pass_off:
    """METILE_GPU_OFF=pointer_tiles while compiling (read when a kernel is compiled)."""

    def __enter__(self):
        self.old = os.environ.get("METILE_GPU_OFF")
        os.environ["METILE_GPU_OFF"] = "pointer_tiles"

    def __exit__(self, *exc):
        if self.old is None:
            del os.environ["METILE_GPU_OFF"]
        else:
            os.environ["METILE_GPU_OFF"] = self.old


def _problem(m, n, k, dtype=np.float16):
    r = np.random.default_rng(m * 10007 + n * 101 + k)
    a = (r.standard_normal((m, k)) * 0.5).astype(dtype)
    b = (r.standard_normal((k, n)) * 0.5).astype(dtype)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _pointer_args(a, b, c):
    (m, k), n = a.shape, b.shape[1]
    return (a, b, c, m, n, k, k, 1, n, 1, n, 1)


@pytest.mark.parametrize("bm,bn,bk", [(32, 32, 16), (16, 32, 32)])
def test_pointer_gemm_matches_float64_on_every_device(device, bm, bn, bk):
    m, n, k = 50, 40, 70  # ragged in every dimension
    a, b, want = _problem(m, n, k, np.float32)
    grid = (metile.cdiv(m, bm), metile.cdiv(n, bn))
    c = np.full((m, n), -7.0, np.float32)
    mm_pointers[grid](*_pointer_args(a, b, c), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
    tiles = np.full((m, n), -7.0, np.float32)
    mm_tiles[grid](a, b, tiles, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    np.testing.assert_allclose(c, tiles, rtol=1e-5, atol=1e-5)


def test_the_pointer_form_becomes_tile_loads():
    a, b, _ = _problem(64, 64, 64)
    c = np.zeros((64, 64), np.float16)
    with metile.use_device("interp"):
        k = mm_pointers[(2, 2)].compile(*_pointer_args(a, b, c), BLOCK_M=32, BLOCK_N=32,
                                        BLOCK_K=32)
        opt = k.source("tile_ir_opt")
    assert opt.count("tile_load ") == 2 and opt.count("tile_store ") == 1, opt
    assert " load " not in opt and "ptr_offset" not in opt, opt
    # A stride that is not 1 stays a run-time value: nothing to prove, the loads stay.
    prog = mm_pointers[(2, 2)].trace(a, b, c, 64, 64, 64, 64, 2, 64, 1, 64, 1, BLOCK_M=32,
                                     BLOCK_N=32, BLOCK_K=32)
    assert "%stride_ak" in prog.text.split("{", 1)[1], prog.text


def test_unit_arguments_are_part_of_the_specialization():
    """1 and 2 as the same argument compile apart and both compute right."""
    m, n, k = 24, 16, 20
    a, b, want = _problem(m, n, k, np.float32)
    with metile.use_device("cpu"):
        c = np.zeros((m, n), np.float32)
        mm_pointers[(1, 1)](*_pointer_args(a, b, c), BLOCK_M=32, BLOCK_N=16, BLOCK_K=16)
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
        # Every other column of a (m, 2k) array: stride_ak = 2.
        wide = np.zeros((m, 2 * k), np.float32)
        wide[:, ::2] = a
        c2 = np.zeros((m, n), np.float32)
        mm_pointers[(1, 1)](wide, b, c2, m, n, k, 2 * k, 2, n, 1, n, 1, BLOCK_M=32, BLOCK_N=16,
                            BLOCK_K=16)
        np.testing.assert_allclose(c2, want, rtol=1e-4, atol=1e-4)


def _tg_bytes(kernel, args, bm, bn, bk, stages, warps):
    k = kernel[(1, 1)].compile(*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages,
                               num_warps=warps)
    info = k.info
    return info["threadgroup_memory_bytes"], info["threadgroup_memory_limit"]


def test_tutorial_configs_fit_metal_sim_like_the_tile_load_form():
    """Three configs (the largest tile, the issue's 128x64x32, a two-warp one: each metal-sim
    compile of a GEMM takes seconds) compile on metal-sim within its threadgroup memory with
    exactly the bytes of the tile_load form; one more runs against float64. Without the pass
    the pointer form needs more than metal-sim has."""
    m = n = k = 256
    a, b, want = _problem(m, n, k)
    c = np.zeros((m, n), np.float16)
    with metile.use_device("metal-sim"):
        for i in (0, 3, 6):
            bm, bn, bk, stages, warps = CONFIGS[i]
            got, limit = _tg_bytes(mm_pointers, _pointer_args(a, b, c), bm, bn, bk, stages, warps)
            assert got <= limit, (bm, bn, bk, got, limit)
            tiles, _ = _tg_bytes(mm_tiles, (a, b, c, m, n, k), bm, bn, bk, stages, warps)
            assert got == tiles, (bm, bn, bk, got, tiles)
        with pass_off():
            off = metile.kernel(mm_pointers.fn)
            with pytest.raises(metile.UnsupportedError, match="threadgroup memory"):
                _tg_bytes(off, _pointer_args(a, b, c), 128, 128, 32, 4, 4)
        bm, bn, bk, stages, warps = CONFIGS[4]
        mm_pointers[(m // bm, n // bn)](*_pointer_args(a, b, c), BLOCK_M=bm, BLOCK_N=bn,
                                        BLOCK_K=bk, num_stages=stages, num_warps=warps)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-2, atol=2e-2)
