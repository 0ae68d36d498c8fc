"""FP8 dots (docs/semantics.md, "FP8 dots") on every device: e4m3 x e4m3, e5m2 x e5m2 and the
mixed pairs, f32 accumulation. Inputs whose every partial sum is an f32 value give the float64
reference exactly on every device, whatever order it sums in; random codes over each format's
range stay within f32 rounding of it and match interp's. The K-major form (B given N x K) takes
cuda's FP8 wgmma atom on sm_90, exact on small integers and within its documented tolerance
elsewhere. Unsupported pairs are refused naming the operand, its dtype and shape."""

import numpy as np
import pytest

import metile
from conftest import SLOW_DEVICES

PAIRS = [("f8e4m3", "f8e4m3"), ("f8e5m2", "f8e5m2"), ("f8e4m3", "f8e5m2"), ("f8e5m2", "f8e4m3")]
MANT = {"f8e4m3": 3, "f8e5m2": 2}
BIAS = {"f8e4m3": 7, "f8e5m2": 15}


def values(fmt):
    """The value of every code (NaN where the code is one)."""
    codes = np.arange(256)
    mb, bias = MANT[fmt], BIAS[fmt]
    e, m = (codes >> mb) & ((1 << (7 - mb)) - 1), codes & ((1 << mb) - 1)
    v = np.where(e == 0, m * 2.0 ** (1 - bias - mb), (1 + m / 2 ** mb) * 2.0 ** (e - bias))
    top = (1 << (7 - mb)) - 1
    special = ((codes & 0x7F) == 0x7F) if fmt == "f8e4m3" else (e == top)
    v = np.where(special, np.nan, v)
    return np.where(codes & 0x80, -v, v)


def finite_codes(fmt, lo=None, hi=None):
    v = values(fmt)
    ok = np.isfinite(v)
    if lo is not None:
        ok &= (np.abs(v) >= lo) & (np.abs(v) <= hi)
    return np.nonzero(ok)[0].astype(np.uint8)


@metile.kernel
def fp8_dot(A, B, C, M, N, K, BM: metile.constexpr, BN: metile.constexpr,
            BK: metile.constexpr):
    pm, pn = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BM, BN), dtype="f32")
    for k in metile.tile_range(0, K, BK):
        a = metile.tile_load(A, pm * BM, k, K, (BM, BK), bounds=(M, K))
        b = metile.tile_load(B, k, pn * BN, N, (BK, BN), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pm * BM, pn * BN, N, acc, (BM, BN), bounds=(M, N))


def run(fa, fb, a_codes, b_codes):
    m, k = a_codes.shape
    n = b_codes.shape[1]
    c = metile.Buffer.zeros((m, n))
    fp8_dot[(metile.cdiv(m, 32), metile.cdiv(n, 32))](
        metile.Buffer(data=a_codes, dtype=fa), metile.Buffer(data=b_codes, dtype=fb), c, m, n, k,
        BM=32, BN=32, BK=32)
    return c.numpy().copy()


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_exact_sums_give_the_float64_result_on_every_device(device, fa, fb):
    # Magnitudes in [1/2, 15]: each product is a multiple of 2^-8 below 2^8, 70 of them stay
    # below 2^15, so every partial sum (any order) needs at most 23 bits: exact in f32.
    m, n, k = 40, 36, 70
    a = np.random.choice(finite_codes(fa, 0.5, 15), (m, k)).astype(np.uint8)
    b = np.random.choice(finite_codes(fb, 0.5, 15), (k, n)).astype(np.uint8)
    want = values(fa)[a] @ values(fb)[b]
    np.testing.assert_array_equal(run(fa, fb, a, b), want)


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_full_range_codes_match_float64_and_interp(device, fa, fb):
    m, n, k = 33, 65, 96
    # Products of the formats' extremes stay finite in f32 (E5M2: 57344^2 * 96 < 3.4e38).
    a = np.random.choice(finite_codes(fa), (m, k)).astype(np.uint8)
    b = np.random.choice(finite_codes(fb), (k, n)).astype(np.uint8)
    va, vb = values(fa)[a], values(fb)[b]
    got = run(fa, fb, a, b)
    err = np.abs(got - va @ vb) / np.maximum(np.abs(va) @ np.abs(vb), 1e-300)
    assert err.max() < k * 2.0 ** -24, err.max()
    with metile.use_device("interp"):
        oracle = run(fa, fb, a, b)
    if device.name in ("interp", "cpu"):  # k-order f32 sums, as interp's contract states
        np.testing.assert_array_equal(got, oracle)
    else:
        assert (np.abs(got - oracle) / np.maximum(np.abs(va) @ np.abs(vb), 1e-300)).max() < \
            k * 2.0 ** -23


@metile.kernel
def fp8_dot_nt(A, B, C, M, N, K, BM: metile.constexpr, BN: metile.constexpr,
               BK: metile.constexpr):
    """C = A @ B^T with B given N x K: both operands K-major, which is the form cuda's FP8 wgmma
    atom reads (sm_90; dot_choices.cpp). Every other device computes it as any FP8 dot."""
    pm, pn = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BM, BN), dtype="f32")
    for k in metile.tile_range(0, K, BK):
        a = metile.tile_load(A, pm * BM, k, K, (BM, BK), bounds=(M, K))
        b = metile.tile_load(B, pn * BN, k, K, (BN, BK), bounds=(N, K))
        acc = metile.dot(a, metile.trans(b), acc)
    metile.tile_store(C, pm * BM, pn * BN, N, acc, (BM, BN), bounds=(M, N))


def run_nt(fa, fb, a_codes, bt_codes, bk=64, stages=0):
    m, k = a_codes.shape
    n = bt_codes.shape[0]
    c = metile.Buffer.zeros((m, n))
    launch = fp8_dot_nt[(metile.cdiv(m, 64), metile.cdiv(n, 128))]
    args = (metile.Buffer(data=a_codes, dtype=fa), metile.Buffer(data=bt_codes, dtype=fb), c, m, n, k)
    launch(*args, BM=64, BN=128, BK=bk, num_threads=128, num_stages=stages)
    source = None
    if metile.get_device().name == "cuda":
        source = launch.compile(*args, BM=64, BN=128, BK=bk, num_threads=128,
                                num_stages=stages).source("cuda")
    return c.numpy().copy(), source


def one_pair_on_simulators(device, fa, fb):
    """The simulators (metal-sim, the metal stand-in) compile each pair in seconds and take the
    same f16 path for all: they run the mixed pair; interp, cpu and cuda run every pair."""
    if device.name in SLOW_DEVICES and (fa, fb) != ("f8e4m3", "f8e5m2"):
        pytest.skip("one mixed pair on the simulators; every pair on interp, cpu and cuda")


def native_fp8(source):
    """Whether cuda compiled the dot on the FP8 wgmma atom (an sm_90 GPU) or staged f16."""
    return source is not None and "k32.f32.e" in source


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_k_major_small_integers_are_exact_on_every_device(device, fa, fb):
    one_pair_on_simulators(device, fa, fb)
    # Values +-1, +-2, +-4: products are integers up to 16, 256 of them stay below 2^12, so
    # every partial sum is exact even in the FP8 wgmma's own accumulator (about 14 bits kept).
    m, n, k = 70, 130, 256
    codes = {f: np.nonzero(np.isin(np.abs(values(f)), (1.0, 2.0, 4.0)))[0].astype(np.uint8)
             for f in (fa, fb)}
    a = np.random.choice(codes[fa], (m, k)).astype(np.uint8)
    bt = np.random.choice(codes[fb], (n, k)).astype(np.uint8)
    got, source = run_nt(fa, fb, a, bt)
    np.testing.assert_array_equal(got, values(fa)[a] @ values(fb)[bt].T)
    if source is not None and device.architecture.startswith("sm_90"):
        assert native_fp8(source), "the K-major FP8 dot takes the FP8 wgmma atom on sm_90"
        assert "+= mma_p[mma_r]" in source  # the two-level accumulation


# Tolerance of cuda's FP8 wgmma path (docs/semantics.md, "FP8 dots"): the wgmma keeps about 14
# significant bits while it sums a 128-element run of K, which is then added into f32.
NATIVE_TOL = 2.0 ** -9


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_k_major_full_range_codes_match_float64_and_interp(device, fa, fb):
    one_pair_on_simulators(device, fa, fb)
    m, n, k = 65, 129, 320
    a = np.random.choice(finite_codes(fa), (m, k)).astype(np.uint8)
    bt = np.random.choice(finite_codes(fb), (n, k)).astype(np.uint8)
    va, vb = values(fa)[a], values(fb)[bt].T
    got, source = run_nt(fa, fb, a, bt)
    size = np.maximum(np.abs(va) @ np.abs(vb), 1e-300)
    tol = NATIVE_TOL if native_fp8(source) else k * 2.0 ** -24
    assert (np.abs(got - va @ vb) / size).max() < tol
    with metile.use_device("interp"):
        oracle, _ = run_nt(fa, fb, a, bt)
    if device.name in ("interp", "cpu"):
        np.testing.assert_array_equal(got, oracle)
    else:
        assert (np.abs(got - oracle) / size).max() < max(tol, k * 2.0 ** -23)


def test_k_major_fast_accumulation_is_the_switch(device, monkeypatch):
    # METILE_GPU_OFF=fp8_promote: cuda's FP8 wgmma accumulates straight into the accumulator
    # (no mma_p); a long K then keeps fewer bits, which bench/fp8_gemm.py measures. Elsewhere
    # the piece changes nothing (checked on interp and cpu; the simulators' compile of a K of
    # 1024 costs seconds for nothing new). num_stages=2: a specialization no other test compiles.
    if device.name in SLOW_DEVICES and device.name != "interp":
        pytest.skip("fp8_promote changes only cuda's FP8 wgmma; interp and cpu check the rest")
    monkeypatch.setenv("METILE_GPU_OFF", "fp8_promote")
    m, n, k = 64, 128, 1024
    a = np.random.choice(finite_codes("f8e4m3", 0.25, 4), (m, k)).astype(np.uint8)
    bt = np.random.choice(finite_codes("f8e4m3", 0.25, 4), (n, k)).astype(np.uint8)
    va, vb = values("f8e4m3")[a], values("f8e4m3")[bt].T
    got, source = run_nt("f8e4m3", "f8e4m3", a, bt, bk=128, stages=2)
    size = np.abs(va) @ np.abs(vb)
    if native_fp8(source):
        assert "mma_p" not in source
        assert (np.abs(got - va @ vb) / size).max() < 2.0 ** -5
    else:
        assert (np.abs(got - va @ vb) / size).max() < k * 2.0 ** -24


@metile.kernel
def mixed_dot(A, B, C, acc_dtype: metile.constexpr):
    r = metile.arange(0, 16)
    a = metile.load(A + r[:, None] * 16 + r[None, :])
    b = metile.load(B + r[:, None] * 16 + r[None, :])
    acc = metile.zeros((16, 16), dtype=acc_dtype)
    metile.store(C + r[:, None] * 16 + r[None, :], metile.dot(a, b, acc))


@pytest.mark.parametrize("fb,acc,message", [
    ("f16", "f32", r"dot: operand b is tile<16x16xf16> but operand a is tile<16x16xf8e4m3>: an "
                   r"FP8 dot takes f8e4m3 or f8e5m2 on both sides"),
    ("f32", "f32", r"dot: operand b is tile<16x16xf32> but operand a is tile<16x16xf8e4m3>"),
    ("f8e4m3", "f16", r"dot: accumulator tile<16x16xf16> does not fit FP8 inputs \(f8e4m3 x "
                      r"f8e4m3\): FP8 dots accumulate in f32"),
])
def test_unsupported_pairs_are_refused_naming_the_operand(device, fb, acc, message):
    a = metile.Buffer.zeros(256, "f8e4m3")
    b = metile.Buffer.zeros(256, fb)
    c = metile.Buffer.zeros(256, acc)
    with pytest.raises(metile.InvalidProgramError, match=r"test_fp8_dot.py:\d+: " + message):
        mixed_dot[(1,)](a, b, c, acc_dtype=acc)
