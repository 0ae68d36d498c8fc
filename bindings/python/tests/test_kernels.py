"""The seed's kernels at the seed's shapes and tolerances (reference/metile-spec.md §14), plus
ragged shapes (sizes that are not multiples of the block), on every available device.
Slow devices (interp, metal-sim) skip the largest shapes; cpu, cuda and metal run them all."""

import numpy as np
import pytest

import kernels as K
import metile

ROW_SHAPES = [(32, 64), (64, 128), (128, 512), (256, 1024), (512, 2048), (64, 300), (1, 512),
              (3, 1), (5, 1000)]
BIG_ROWS = {(512, 2048)}


def _rows(fast, rows, n):
    if not fast and (rows, n) in BIG_ROWS:
        pytest.skip("large shape: run on fast devices only")


def _rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("n", [1, 100, 256, 1000, 4097, 1 << 16, 1 << 20])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_vector_add(device, fast, n, dtype):
    if not fast and n > 1 << 16:
        pytest.skip("large shape: run on fast devices only")
    r = _rng()
    x = (r.standard_normal(n) * 100).astype(dtype)
    y = (r.standard_normal(n) * 100).astype(dtype)
    out = np.zeros(n, dtype)
    K.vector_add[(metile.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("rows,n", ROW_SHAPES)
def test_softmax(device, fast, rows, n):
    _rows(fast, rows, n)
    x = _rng(1).standard_normal((rows, n), dtype=np.float32)
    out = np.zeros_like(x)
    K.softmax[(rows,)](x, out, n, BLOCK=256)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.sum(1), 1, atol=1e-4)
    assert out.min() >= 0 and out.max() <= 1


def test_softmax_uniform(device):
    x = np.full((32, 128), 3.0, np.float32)
    out = np.zeros_like(x)
    K.softmax[(32,)](x, out, 128, BLOCK=256)
    np.testing.assert_allclose(out, 1 / 128, rtol=1e-6)


def _layernorm_ref(x, w, b):
    x = x.astype(np.float64)
    mean = x.mean(1, keepdims=True)
    var = x.var(1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


@pytest.mark.parametrize("rows,n", ROW_SHAPES)
def test_layernorm(device, fast, rows, n):
    _rows(fast, rows, n)
    r = _rng(2)
    x = r.standard_normal((rows, n), dtype=np.float32)
    w = r.standard_normal(n, dtype=np.float32)
    b = r.standard_normal(n, dtype=np.float32)
    out = np.zeros_like(x)
    K.layernorm[(rows,)](x, w, b, out, n, BLOCK=256)
    tol = 1e-5 if n > 1 else 1e-3  # one element: 0 * inv_std, inv_std ~ 316
    np.testing.assert_allclose(out, _layernorm_ref(x, w, b), rtol=tol, atol=tol)


def test_layernorm_identity_and_constant(device):
    x = _rng(3).standard_normal((32, 256), dtype=np.float32)
    out = np.zeros_like(x)
    K.layernorm[(32,)](x, np.ones(256, np.float32), np.zeros(256, np.float32), out, 256, BLOCK=256)
    np.testing.assert_allclose(out, _layernorm_ref(x, 1.0, 0.0), rtol=1e-5, atol=1e-5)
    x = np.full((16, 128), 5.0, np.float32)
    b = _rng(4).standard_normal(128, dtype=np.float32)
    out = np.zeros_like(x)
    K.layernorm[(16,)](x, np.ones(128, np.float32), b, out, 128, BLOCK=256)
    np.testing.assert_allclose(out, np.broadcast_to(b, x.shape), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows,n", ROW_SHAPES)
def test_rmsnorm(device, fast, rows, n):
    _rows(fast, rows, n)
    r = _rng(5)
    x = r.standard_normal((rows, n), dtype=np.float32)
    w = r.standard_normal(n, dtype=np.float32)
    out = np.zeros_like(x)
    K.rmsnorm[(rows,)](x, w, out, n, BLOCK=256)
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_rmsnorm_unit_weights_and_zeros(device):
    x = _rng(6).standard_normal((32, 256), dtype=np.float32)
    out = np.zeros_like(x)
    K.rmsnorm[(32,)](x, np.ones(256, np.float32), out, 256, BLOCK=256)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out, x64 / np.sqrt((x64 ** 2).mean(1, keepdims=True) + 1e-5),
                               rtol=1e-5, atol=1e-5)
    z = np.zeros((16, 128), np.float32)
    out = np.ones_like(z)
    K.rmsnorm[(16,)](z, np.ones(128, np.float32), out, 128, BLOCK=256)
    np.testing.assert_allclose(out, 0, atol=1e-5)


# ------------------------------------------------------------------------------------- GEMM
NAIVE = [(32, 32, 32), (64, 64, 64), (64, 32, 32), (32, 64, 32), (32, 32, 128), (128, 128, 128)]
SIMDGROUP = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (128, 64, 64), (64, 128, 64),
             (64, 64, 256), (512, 512, 512)]
RAGGED = [(1, 1, 1), (33, 17, 5), (100, 70, 50), (65, 129, 31), (7, 300, 64)]


def _gemm(a, b, c, blocks, **kw):
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = blocks
    K.matmul[(metile.cdiv(m, bm), metile.cdiv(n, bn))](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn,
                                                      BLOCK_K=bk, **kw)


def _gemm_case(fast, m, n, k, dtype, blocks, tol, **kw):
    if not fast and m * n * k > 256 ** 3:
        pytest.skip("large shape: run on fast devices only")
    r = _rng(7)
    a = r.standard_normal((m, k)).astype(dtype)
    b = r.standard_normal((k, n)).astype(dtype)
    c = np.zeros((m, n), dtype)
    _gemm(a, b, c, blocks, **kw)
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype)
    np.testing.assert_allclose(c.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("m,n,k", NAIVE)
def test_gemm_naive_blocks(device, fast, m, n, k):
    _gemm_case(fast, m, n, k, np.float32, (32, 32, 32), 1e-4, allow_tf32=0)


@pytest.mark.parametrize("m,n,k", SIMDGROUP)
def test_gemm_simdgroup_blocks(device, fast, m, n, k):
    _gemm_case(fast, m, n, k, np.float32, (64, 64, 32), 1e-4, allow_tf32=0)


@pytest.mark.parametrize("m,n,k", [(32, 32, 32), (64, 64, 64), (128, 128, 128)])
def test_gemm_f16_naive(device, fast, m, n, k):
    _gemm_case(fast, m, n, k, np.float16, (32, 32, 32), 1e-3 * 8)


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512)])
def test_gemm_f16_simdgroup(device, fast, m, n, k):
    _gemm_case(fast, m, n, k, np.float16, (64, 64, 32), 1e-3 * 8)


def test_gemm_default_precision(device):
    # TF32 / relaxed matrix units are allowed by default on GPUs (the seed's 5e-2 tolerance).
    _gemm_case(True, 128, 128, 128, np.float32, (64, 64, 32), 5e-2)


@pytest.mark.parametrize("m,n,k", RAGGED)
def test_gemm_ragged(device, m, n, k):
    _gemm_case(True, m, n, k, np.float32, (32, 32, 16), 1e-4, allow_tf32=0)


@pytest.mark.parametrize("epilogue", ["relu", "gelu", "silu"])
@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (100, 70, 50)])
def test_gemm_epilogues(device, epilogue, m, n, k):
    r = _rng(8)
    a = r.standard_normal((m, k), dtype=np.float32)
    b = r.standard_normal((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    _gemm(a, b, c, (32, 32, 32), EPILOGUE=epilogue, allow_tf32=0)
    acc = a.astype(np.float64) @ b
    ref = {"relu": np.maximum(acc, 0), "gelu": acc / (1 + np.exp(-1.702 * acc)),
           "silu": acc / (1 + np.exp(-acc))}[epilogue]
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pattern", ["morton", "diagonal", "grouped"])
def test_gemm_swizzled(device, pattern):
    r = _rng(9)
    a = r.standard_normal((96, 64), dtype=np.float32)
    b = r.standard_normal((64, 160), dtype=np.float32)
    c = np.zeros((96, 160), np.float32)
    _gemm(a, b, c, (32, 32, 32), SWIZZLE=pattern, allow_tf32=0)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ element-wise
def _sigmoid_gelu(x):
    return x / (1 + np.exp(-1.702 * x))


@pytest.mark.parametrize("n", [1, 1000, 4096, 65537, 1 << 20])
def test_elementwise_activations(device, fast, n):
    if not fast and n > 65537:
        pytest.skip("large shape: run on fast devices only")
    r = _rng(10)
    x = r.standard_normal(n, dtype=np.float32) * 4
    up = r.standard_normal(n, dtype=np.float32)
    grid = (metile.cdiv(n, 256),)
    x64 = x.astype(np.float64)
    out = np.zeros_like(x)
    K.gelu[grid](x, out, n, BLOCK=256)
    np.testing.assert_allclose(out, _sigmoid_gelu(x64), rtol=1e-5, atol=1e-5)
    K.silu[grid](x, out, n, BLOCK=256)
    np.testing.assert_allclose(out, x64 / (1 + np.exp(-x64)), rtol=1e-5, atol=1e-5)
    K.geglu[grid](x, up, out, n, BLOCK=256)
    np.testing.assert_allclose(out, _sigmoid_gelu(x64) * up, rtol=1e-5, atol=1e-5)
    K.gelu_erf[grid](x, out, n, BLOCK=256)
    from math import erf
    ref = np.array([0.5 * v * (1 + erf(v / np.sqrt(2))) for v in x64])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------- FFT
FFT_CASES = [(1, 8), (1, 16), (1, 64), (1, 256), (1, 1024), (32, 256), (64, 1024), (1, 2048),
             (32, 2048), (3, 2), (5, 32)]


@pytest.mark.parametrize("batch,n", FFT_CASES)
def test_fft(device, fast, batch, n):
    if not fast and batch * n > 16 * 1024:
        pytest.skip("large shape: run on fast devices only")
    x = _rng(11).standard_normal((batch, n), dtype=np.float32)
    y_re, y_im = K.run_fft(x, np.zeros_like(x))
    ref = np.fft.fft(x.astype(np.float64), axis=-1)
    np.testing.assert_allclose(y_re, ref.real, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(y_im, ref.imag, rtol=1e-3, atol=1e-3)


def test_fft_complex_input(device):
    r = _rng(12)
    x_re = r.standard_normal((4, 128), dtype=np.float32)
    x_im = r.standard_normal((4, 128), dtype=np.float32)
    y_re, y_im = K.run_fft(x_re, x_im)
    ref = np.fft.fft(x_re.astype(np.float64) + 1j * x_im, axis=-1)
    np.testing.assert_allclose(y_re, ref.real, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(y_im, ref.imag, rtol=1e-3, atol=1e-3)
