"""The FP8 e4m3 GEMM with per-row / per-column f32 scales (examples/python/fp8_gemm.py) against
float64 numpy on every device: ragged M, N, K against the blocks, f16/bf16/f32 outputs, B given
[K, N] or transposed [N, K] (cuda's FP8 wgmma form), agreement with interp, and bad arguments
(a scale buffer of the wrong shape or dtype) named."""

import os
import sys

import numpy as np
import pytest

import metile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples", "python"))
import fp8_gemm as F  # noqa: E402

CONFIG = (32, 32, 32)


def _inputs(m, n, k):
    rng = np.random.default_rng(m * 10000 + n * 100 + k)
    a, sa = F.quantize(rng.standard_normal((m, k)).astype(np.float32) * 3, axis=1)
    b, sb = F.quantize(rng.standard_normal((k, n)).astype(np.float32) / 5, axis=0)
    return a, b, sa, sb


def _run(a, b, sa, sb, out_dtype):
    c = F.fp8_gemm(metile.Buffer(data=a, dtype="f8e4m3"), metile.Buffer(data=b, dtype="f8e4m3"),
                   metile.Buffer(data=sa), metile.Buffer(data=sb), out_dtype, config=CONFIG)
    got = c.numpy()
    return F.from_bf16_bits(got) if out_dtype == "bf16" else got.astype(np.float32)


@pytest.mark.parametrize("out_dtype", F.OUT_DTYPES)
@pytest.mark.parametrize("m,n,k", [(70, 45, 100), (1, 33, 31), (64, 64, 64)])
def test_matches_float64(device, out_dtype, m, n, k):
    a, b, sa, sb = _inputs(m, n, k)
    got = _run(a, b, sa, sb, out_dtype)
    va, vb = F.e4m3_values()[a], F.e4m3_values()[b]
    scale = sa.astype(np.float64)[:, None] * sb.astype(np.float64)[None, :]
    ref, size = (va @ vb) * scale, (np.abs(va) @ np.abs(vb)) * scale
    # f32 sums (k roundings at most), the two scale products, then the store's rounding.
    unit = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[out_dtype]
    assert (np.abs(got - ref) / size).max() < k * 2.0 ** -24 + 4 * 2.0 ** -24 + unit
    with metile.use_device("interp"):
        oracle = _run(a, b, sa, sb, out_dtype)
    ulps = 0 if device.name in ("interp", "cpu") else 1
    assert (np.abs(got - oracle) / size).max() <= ulps * (k * 2.0 ** -23 + unit)


@pytest.mark.parametrize("out_dtype", ["f32", "bf16"])
@pytest.mark.parametrize("m,n,k", [(200, 136, 320), (64, 128, 64)])
def test_b_transposed_matches_float64(device, out_dtype, m, n, k):
    # B given [N, K]: on an sm_90 cuda device the FP8 wgmma atom (64 x 128 tiles, one warpgroup)
    # with its documented tolerance (docs/semantics.md, "FP8 dots"): 2^-9 of sum |a b|. The
    # other devices take the example's small tiles (Metal's threadgroup memory).
    a, b, sa, sb = _inputs(m, n, k)
    bt = np.ascontiguousarray(b.T)
    cuda = device.name == "cuda"

    def run():
        c = F.fp8_gemm(metile.Buffer(data=a, dtype="f8e4m3"), metile.Buffer(data=bt, dtype="f8e4m3"),
                       metile.Buffer(data=sa), metile.Buffer(data=sb), out_dtype,
                       config=(64, 128, 64) if cuda else CONFIG, b_transposed=True,
                       num_threads=128 if cuda else None)
        got = c.numpy()
        return F.from_bf16_bits(got) if out_dtype == "bf16" else got.astype(np.float32)

    got = run()
    va, vb = F.e4m3_values()[a], F.e4m3_values()[b]
    scale = sa.astype(np.float64)[:, None] * sb.astype(np.float64)[None, :]
    ref, size = (va @ vb) * scale, (np.abs(va) @ np.abs(vb)) * scale
    unit = {"f32": 2.0 ** -24, "bf16": 2.0 ** -8}[out_dtype]
    sums = 2.0 ** -9 if cuda else k * 2.0 ** -24
    assert (np.abs(got - ref) / size).max() < sums + 4 * 2.0 ** -24 + unit
    with metile.use_device("interp"):
        oracle = run()
    ulps = 0 if device.name in ("interp", "cpu") else 1
    assert (np.abs(got - oracle) / size).max() <= ulps * (max(sums, k * 2.0 ** -23) + unit)


def test_the_example_quantizes_to_the_nearest_code():
    x = np.array([[0.0, 1.0, -448.0, 3.3, 1e-3, -17.0]], np.float32)
    codes, s = F.quantize(x, axis=1)
    assert s[0] == np.float32(448.0 / 448.0)
    table = F.e4m3_values()
    for v, c in zip(x[0] / s[0], codes[0]):
        best = np.nanmin(np.abs(table - v))
        assert abs(table[c] - v) == best, (v, c)


def test_bad_arguments_are_named():
    with metile.use_device("interp"):
        a = metile.Buffer.zeros((8, 16), "f8e4m3")
        b = metile.Buffer.zeros((16, 12), "f8e4m3")
        sa, sb = metile.Buffer.zeros(8), metile.Buffer.zeros(12)
        with pytest.raises(ValueError, match=r"scale_a \(one per row of a\) must have shape "
                                             r"\(8,\), got \(12,\)"):
            F.fp8_gemm(a, b, sb, sb)
        with pytest.raises(ValueError, match=r"scale_b \(one per column of b\) must have shape "
                                             r"\(12,\), got \(8,\)"):
            F.fp8_gemm(a, b, sa, sa)
        with pytest.raises(ValueError, match=r"scale_b .* must have shape \(12,\), got \(1, 12\)"):
            F.fp8_gemm(a, b, sa, metile.Buffer.zeros((1, 12)))
        with pytest.raises(TypeError, match=r"scale_a .* must be f32, got f16"):
            F.fp8_gemm(a, b, metile.Buffer.zeros(8, "f16"), sb)
        with pytest.raises(TypeError, match=r"fp8_gemm: a must be f8e4m3, got f16"):
            F.fp8_gemm(metile.Buffer.zeros((8, 16), "f16"), b, sa, sb)
        with pytest.raises(ValueError, match=r"b must be \[K, N\] with K = 16"):
            F.fp8_gemm(a, metile.Buffer.zeros((15, 12), "f8e4m3"), sa, sb)
        with pytest.raises(ValueError, match=r"b must be \[N, K\] with K = 16"):
            F.fp8_gemm(a, metile.Buffer.zeros((12, 15), "f8e4m3"), sa, sb, b_transposed=True)
        with pytest.raises(ValueError, match=r"out_dtype must be one of"):
            F.fp8_gemm(a, b, sa, sb, "f8e4m3")
