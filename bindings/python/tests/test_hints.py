"""Hints behave as docs/semantics.md ("Hints and options") and the Python README say: values out
of a hint's range are ignored on every device; interp and cpu ignore num_warps; on a GPU device
the thread count num_warps asks for is acted on, so it fails a compile where the options
warps_m x warps_n do not make it up, or where a tile then needs more than 1024 elements per
thread. (An asked num_stages that does not fit threadgroup memory: kernel_resources_test.cpp.)"""

import numpy as np
import pytest

import metile
from kernels import matmul as gemm  # the suite's GEMM (tile_load, dot, tile_store, bounds)


@metile.kernel
def scale(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    metile.store(Out + offs, metile.load(X + offs, mask=offs < N) * 3, mask=offs < N)


# Outside the ranges the hints take (num_warps 1..32, num_stages 1..8): accepted, ignored.
IGNORED = [dict(num_warps=0), dict(num_warps=33), dict(num_simdgroups=-1), dict(num_stages=0),
           dict(num_stages=9), dict(num_stages=True), dict(num_warps=2.5), dict(WM=3, WN="x"),
           dict(SWIZZLE=None)]


@pytest.mark.parametrize("hints", IGNORED, ids=lambda h: ",".join(f"{k}={v}" for k, v in h.items()))
def test_hints_out_of_range_are_ignored(device, hints):
    m, n, k = 40, 24, 32
    a = np.random.standard_normal((m, k)).astype(np.float32)
    b = np.random.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    grid = (metile.cdiv(m, 32), metile.cdiv(n, 32))
    gemm[grid](a, b, c, m, n, k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, allow_tf32=False, **hints)
    metile.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_a_tiny_num_warps_is_ignored_off_gpus_and_refused_on_them(device):
    # 65536 elements over num_warps=1 (32 threads) would be 2048 per GPU thread.
    n = 65536
    x = np.random.standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    if device.name in ("interp", "cpu"):
        scale[(1,)](x, out, n, BLOCK=n, num_warps=1)
        np.testing.assert_array_equal(out, 3 * x)
        return
    with pytest.raises(metile.UnsupportedError, match="2048 elements per thread over 32 threads"):
        scale[(1,)].compile(x, out, n, BLOCK=n, num_warps=1)
    # The default thread count (a block of 4096: one of 65536 takes clang half a minute to build).
    assert scale[(1,)].compile(x, out, n, BLOCK=4096).info["threads_per_group"] == 256


def test_num_warps_that_the_warp_grid_does_not_make_up_is_refused():
    if "metal-sim" not in metile.devices():
        pytest.skip("needs metal-sim")
    a = np.zeros((64, 32), np.float16)
    b = np.zeros((32, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    with metile.use_device("metal-sim"):
        launch = gemm[(2, 2)]
        opts = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, warps_m=1, warps_n=2)
        with pytest.raises(metile.InvalidArgumentError,
                           match=r"warps_m 1 x warps_n 2 warps, but the kernel runs 8 \(num_threads 256\)"):
            launch.compile(a, b, c, 64, 64, 32, num_warps=8, **opts)
        # The same grid with the thread count it makes up compiles.
        assert launch.compile(a, b, c, 64, 64, 32, num_warps=2, **opts).info["threads_per_group"] == 64


def test_maxnreg_is_an_option_every_device_takes_and_checks(device):
    # Triton's maxnreg: a register limit a thread on cuda, ignored elsewhere; its range and type
    # are checked on every device, naming the option.
    n = 1000
    x = np.random.standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256, maxnreg=64)
    metile.synchronize()
    np.testing.assert_array_equal(out, 3 * x)
    with pytest.raises(metile.InvalidArgumentError, match=r"maxnreg 8 is out of range .*16\.\.255"):
        scale[(1,)].compile(x, out, n, BLOCK=256, maxnreg=8)
    with pytest.raises(metile.InvalidArgumentError, match="maxnreg must be an int, got 6.5"):
        scale[(1,)].compile(x, out, n, BLOCK=256, maxnreg=6.5)
