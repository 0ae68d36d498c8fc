"""Numerics every device agrees on: maximum / minimum (and their reductions) treat quiet and
signalling NaNs alike as missing values (docs/semantics.md), for f32 and f16; erf is within
2 ulp of libm over the whole range."""

import math

import numpy as np
import pytest

import metile


@metile.kernel
def _max_min(X, Y, Out, B: metile.constexpr):
    o = metile.arange(0, B)
    x = metile.load(X + o)
    y = metile.load(Y + o)
    metile.store(Out + o, metile.maximum(x, y))
    metile.store(Out + B + o, metile.minimum(x, y))
    metile.store(Out + 2 * B, metile.max(x, axis=0))
    metile.store(Out + 2 * B + 1, metile.min(x, axis=0))


def _nans(dtype):
    if dtype == np.float32:
        bits = np.array([0x7f800001, 0xff800001, 0x7fc00000, 0x7fa00000], np.uint32)
        return bits.view(np.float32)
    return np.array([0x7c01, 0xfc01, 0x7e00, 0x7d00], np.uint16).view(np.float16)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_maximum_minimum_ignore_quiet_and_signalling_nans(device, dtype):
    B = 8
    nans = _nans(dtype)  # two signalling (with either sign), two quiet with payloads
    x = np.concatenate([nans, nans]).astype(dtype, copy=False)
    y = np.array([2.5, -1.0, 3.0, 0.5] + list(nans), dtype)
    out = np.zeros(2 * B + 2, dtype)
    _max_min[(1,)](x, y, out, B=B)
    np.testing.assert_array_equal(out[:4], y[:4])     # NaN vs number: the number
    np.testing.assert_array_equal(out[B:B + 4], y[:4])
    assert np.isnan(out[4:B]).all() and np.isnan(out[B + 4:2 * B]).all()  # NaN vs NaN: NaN
    # Reductions over NaNs only: the identity (-inf for max, +inf for min).
    assert out[2 * B] == -np.inf and out[2 * B + 1] == np.inf


@metile.kernel
def _erf(X, Out, B: metile.constexpr):
    o = metile.arange(0, B)
    metile.store(Out + o, metile.erf(metile.load(X + o)))


def test_erf_is_within_two_ulp_of_libm(device):
    rng = np.random.default_rng(7)
    x = np.concatenate([
        np.linspace(0, 4.5, 4096),                       # the polynomial pieces and their seams
        10.0 ** rng.uniform(-45, 1.5, 4096),             # tiny (subnormal too) to large
        rng.uniform(0.9, 2.1, 2048), rng.uniform(1.9, 4.1, 2048),
        [1e-7, 1e-6, 1e-5, 1.0, 2.0, 4.0, 3.92, 1e30, np.inf, np.finfo(np.float32).tiny / 8],
    ]).astype(np.float32)
    x = np.concatenate([x, -x])
    x = np.concatenate([x, np.zeros((-len(x)) % 1024, np.float32)])
    out = np.zeros_like(x)
    for start in range(0, len(x), 1024):
        _erf[(1,)](x[start:start + 1024], out[start:start + 1024], B=1024)
    want = np.array([math.erf(float(v)) for v in x], np.float32)
    ulps = np.abs(out.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    worst = int(np.argmax(ulps))
    assert ulps[worst] <= 2, f"erf({x[worst]!r}) = {out[worst]!r}, libm {want[worst]!r}"
    assert math.isnan(_one_erf(np.nan))


def _one_erf(v):
    x = np.full(1024, v, np.float32)
    out = np.zeros_like(x)
    _erf[(1,)](x, out, B=1024)
    return float(out[0])
