"""f32 dot precision (docs/semantics.md, "dot precision"): input_precision per dot ("ieee",
"tf32", "tf32x3"), allow_tf32 as Triton's alias of "tf32", and the compile/launch option for dots
without their own. Each mode stays within its documented error of float64 on every device (the
default, f32 accuracy, at the original's 1e-4 GEMM tolerance), interp and cpu round exactly as
the mode says, and bad values are refused naming the value and the allowed ones."""

import numpy as np
import pytest

import metile
from kernels import mm_precision as gemm

# max |C - C64| / max |C64| for a K = 256 GEMM of standard normal inputs; docs/semantics.md
# gives the measured values (K = 1024).
BOUND = {"ieee": 1e-5, "tf32": 2e-3, "tf32x3": 1e-5, None: 1e-5}


@metile.kernel
def gemm_tf32(A, B, C, K: metile.constexpr):
    a = metile.tile_load(A, 0, 0, K, (32, K))
    b = metile.tile_load(B, 0, 0, 32, (K, 32))
    metile.tile_store(C, 0, 0, 32, metile.dot(a, b, allow_tf32=True), (32, 32))


def run(kernel_prec, m=96, n=80, k=256, **options):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    gemm[(metile.cdiv(m, 32), metile.cdiv(n, 32))](a, b, c, m, n, k, BLOCK_M=32, BLOCK_N=32,
                                                   BLOCK_K=32, PREC=kernel_prec, **options)
    metile.synchronize()
    want = a.astype(np.float64) @ b.astype(np.float64)
    return c, want, a, b


def error(c, want):
    return np.abs(c - want).max() / np.abs(want).max()


def tf32(x):
    """cvt.rna.tf32.f32 in numpy: nearest, ties away from zero, low 13 bits cleared."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("prec", [None, "ieee", "tf32", "tf32x3"])
def test_each_mode_is_within_its_bound(device, prec):
    c, want, _, _ = run(prec)
    assert error(c, want) <= BOUND[prec], (prec, error(c, want))


def test_the_default_passes_the_originals_gemm_tolerance(device):
    c, want, _, _ = run(None, 128, 128, 512)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_tf32_rounds_the_inputs_on_interp_and_cpu(device):
    c, want, a, b = run("tf32")
    rounded = tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)
    if device.name in ("interp", "cpu"):
        # Products of TF32 values are exact in f32: only the sums' order and rounding remain.
        assert np.abs(c - rounded).max() / np.abs(rounded).max() < 1e-5
        assert error(c, want) > 1e-5, "the inputs were rounded"
    else:
        # A device may be more accurate than the mode (metal-sim: exact simdgroup_matrix f32).
        assert min(error(c, want), error(c, rounded)) < BOUND["tf32"]


def test_the_compile_option_and_the_alias(device):
    ieee, want, _, _ = run(None, input_precision="ieee")
    assert error(ieee, want) <= BOUND["ieee"]
    fast, _, _, _ = run(None, input_precision="tf32")
    alias, _, _, _ = run(None, allow_tf32=True)
    np.testing.assert_array_equal(fast, alias)
    if device.name in ("interp", "cpu"):
        assert error(fast, want) > 1e-5
    # A dot's own precision wins over the compile's.
    own, _, _, _ = run("ieee", input_precision="tf32")
    assert error(own, want) <= BOUND["ieee"]
    a = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32)
    c = np.zeros((32, 32), np.float32)
    gemm_tf32[(1,)](a, b, c, K=64)
    metile.synchronize()
    assert error(c, a.astype(np.float64) @ b) <= BOUND["tf32"]


def test_tile_ir_names_the_precision(device):
    a = np.zeros((32, 64), np.float32)
    text = gemm_tf32[(1,)].compile(a, np.zeros((64, 32), np.float32), np.zeros((32, 32), np.float32),
                                   K=64).source("tile_ir")
    assert 'input_precision = "tf32"' in text


def test_bad_precisions_name_the_value_and_the_allowed_ones(device):
    with pytest.raises(metile.TracingError, match=r"input_precision 'fast' is not one of 'ieee', 'tf32', 'tf32x3'"):
        run("fast")
    with pytest.raises(metile.TracingError, match=r"allow_tf32=False contradicts input_precision='tf32'"):
        @metile.kernel
        def bad(A, C):
            x = metile.tile_load(A, 0, 0, 16, (16, 16))
            metile.tile_store(C, 0, 0, 16, metile.dot(x, x, input_precision="tf32", allow_tf32=False),
                              (16, 16))
        bad[(1,)](np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32))
    with pytest.raises(metile.InvalidArgumentError, match=r"input_precision 'TF32' is not one of"):
        run(None, input_precision="TF32")
    with pytest.raises(metile.InvalidArgumentError, match=r"allow_tf32=True contradicts"):
        run(None, input_precision="ieee", allow_tf32=True)
