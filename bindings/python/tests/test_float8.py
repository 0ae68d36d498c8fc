"""FP8 (metile.float8e4m3, metile.float8e5m2) on every device: all 256 codes of each format
decode to a table computed here from the format definition in float64, casts from f32, f16 and
bf16 round to nearest even and saturate to the finite range (the codes a brute-force float64
search picks), and a kernel that loads FP8, computes in f32 and stores FP8 matches a float64
reference. The same bits on every device: each result is also compared with interp's."""

import ctypes
import math

import numpy as np
import pytest

import metile

FORMATS = {  # exponent bits, mantissa bits, bias
    "f8e4m3": (4, 3, 7),
    "f8e5m2": (5, 2, 15),
}
CODES = np.arange(256, dtype=np.uint8)


def decode(code: int, fmt: str) -> float:
    """The value of one code, from the format definition (E4M3 is the "fn" variant: no
    infinities, NaN only as S.1111.111)."""
    e_bits, m_bits, bias = FORMATS[fmt]
    sign = -1.0 if code & 0x80 else 1.0
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if fmt == "f8e4m3" and e == top and m == (1 << m_bits) - 1:
        return math.copysign(math.nan, sign)
    if fmt == "f8e5m2" and e == top:
        return sign * math.inf if m == 0 else math.copysign(math.nan, sign)
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)


def table(fmt: str) -> np.ndarray:
    return np.array([decode(c, fmt) for c in range(256)], np.float64)


def encode(x: float, fmt: str) -> int:
    """The code a cast gives: the nearest finite value (ties to the even code), finite magnitudes
    beyond the largest finite value saturate to it, an infinity stays one in E5M2 and saturates
    in E4M3, NaN is S.1..1 with its sign."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign | 0x7F
    if math.isinf(x) and fmt == "f8e5m2":
        return sign | 0x7C
    values = table(fmt)[:128]
    finite = [c for c in range(128) if math.isfinite(values[c])]
    a = abs(x)
    biggest = max(finite, key=lambda c: values[c])
    if a >= values[biggest]:
        return sign | biggest
    best = min(finite, key=lambda c: (abs(values[c] - a), c & 1))
    return sign | best


def bits_f32(u: int) -> float:
    return float(np.array([u], np.uint32).view(np.float32)[0])


# Ties, subnormals, the largest values and just beyond, overflow, NaN of both signs, ±0.
def f32_cases(fmt: str) -> np.ndarray:
    _, m_bits, bias = FORMATS[fmt]
    biggest = 448.0 if fmt == "f8e4m3" else 57344.0
    sub = 2.0 ** (1 - bias - m_bits)  # the smallest subnormal
    one_ulp = 2.0 ** -m_bits
    vals = [0.0, -0.0, 1.0, -1.0, 1 + one_ulp / 2, 1 + 3 * one_ulp / 2, -(1 + one_ulp / 2),
            1 + one_ulp / 2 + 2.0 ** -20, 1 + one_ulp / 2 - 2.0 ** -20, 3.3, -0.1, 0.3,
            sub, sub / 2, 3 * sub / 2, sub / 2 + sub / 64, sub / 4, -sub / 2, 2.0 ** -30,
            (2 ** m_bits - 0.5) * sub,
            biggest, -biggest, biggest * (1 + one_ulp / 4), biggest * (1 + one_ulp / 2),
            biggest * (1 + one_ulp), biggest * (1 - one_ulp / 4), 1e6, -1e30, math.inf,
            -math.inf, bits_f32(0x7FC00000), bits_f32(0xFFC00000), bits_f32(0x7F800001),
            bits_f32(0x00000001), 2.0 ** -126]
    return np.array(vals, np.float32)


def f8_buffer(codes, fmt):
    return metile.Buffer(data=np.asarray(codes, np.uint8), dtype=fmt)


@metile.kernel
def convert(X, Y, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Y + offs, metile.load(X + offs, mask=m), mask=m)  # the store casts


@metile.kernel
def scale(X, Y, N, s, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    x = metile.load(X + offs, mask=m, other=0.0)
    metile.store(Y + offs, x * s, mask=m)  # f32 arithmetic, rounded and saturated to FP8


def run_convert(src, dst):
    n = len(src)
    convert[(1,)](src, dst, n, BLOCK=1 << max(0, (n - 1).bit_length()))
    return (dst.numpy() if isinstance(dst, metile.Buffer) else dst).copy()


def on_interp(fn):
    with metile.use_device("interp"):
        return fn()


def assert_same_values(got, want, what):
    got = np.asarray(got, np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)), what
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok], err_msg=what)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]), err_msg=what)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_code_decodes_exactly(device, fmt):
    want = table(fmt)
    got = run_convert(f8_buffer(CODES, fmt), np.zeros(256, np.float32))
    assert_same_values(got, want, f"{fmt} -> f32")
    assert_same_values(run_convert(f8_buffer(CODES, fmt), np.zeros(256, np.float16)), want,
                       f"{fmt} -> f16")
    bf = run_convert(f8_buffer(CODES, fmt), metile.Buffer.zeros(256, "bf16"))
    bf32 = (bf.astype(np.uint32) << 16).view(np.float32)
    assert_same_values(bf32, want, f"{fmt} -> bf16")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_f32_encodes_with_round_to_nearest_even_and_saturation(device, fmt):
    x = f32_cases(fmt)
    want = np.array([encode(float(v), fmt) for v in x], np.uint8)
    got = run_convert(x, metile.Buffer.zeros(len(x), fmt))
    for v, g, w in zip(x, got, want):
        bits = np.float32(v).view(np.uint32)
        assert g == w, f"{fmt}({v!r} = {bits:#010x}): {g:#04x}, want {w:#04x}"
    np.testing.assert_array_equal(
        got, on_interp(lambda: run_convert(x, metile.Buffer.zeros(len(x), fmt))))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_f16_and_bf16_encode_like_their_f32_values(device, fmt):
    x = f32_cases(fmt)
    with np.errstate(over="ignore"):  # 1e6 and beyond become f16 infinities
        h = x.astype(np.float16)  # the f16 value is what is converted
    want = np.array([encode(float(v), fmt) for v in h], np.uint8)
    got = run_convert(h, metile.Buffer.zeros(len(h), fmt))
    # A NaN's sign is not kept through an f16 value on every device (cuda's f16 -> f32 gives
    # the canonical NaN), so NaN codes compare without their sign bit.
    nan = np.isnan(h)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    np.testing.assert_array_equal(got[nan] & 0x7F, want[nan] & 0x7F)
    b_bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation: a bf16 value per case
    b_vals = (b_bits.astype(np.uint32) << 16).view(np.float32)
    want = np.array([encode(float(v), fmt) for v in b_vals], np.uint8)
    got = run_convert(metile.Buffer(data=b_bits, dtype="bf16"), metile.Buffer.zeros(len(x), fmt))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_fp8_copies_keep_every_code(device, fmt):
    got = run_convert(f8_buffer(CODES, fmt), metile.Buffer.zeros(256, fmt))
    want = CODES.copy()
    if fmt == "f8e5m2":  # NaN payloads are not kept: every NaN is S.11111.11
        nan = np.isnan(table(fmt))
        want[nan] = (CODES[nan] & 0x80) | 0x7F
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src,dst", [("f8e4m3", "f8e5m2"), ("f8e5m2", "f8e4m3")])
def test_fp8_to_fp8(device, src, dst):
    got = run_convert(f8_buffer(CODES, src), metile.Buffer.zeros(256, dst))
    want = np.array([encode(v, dst) for v in table(src)], np.uint8)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("factor", [2.0, -0.3])
def test_load_compute_in_f32_store_fp8(device, fmt, factor):
    n = 200  # ragged: not a multiple of the block
    codes = np.random.randint(0, 256, n).astype(np.uint8)
    out = metile.Buffer.zeros(n, fmt)
    scale[(1,)](f8_buffer(codes, fmt), out, n, factor, BLOCK=256)
    f = float(np.float32(factor))
    want = np.array([encode(float(np.float32(decode(int(c), fmt) * f)), fmt) for c in codes],
                    np.uint8)
    got = out.numpy()
    # The sign of a NaN that arithmetic makes is the device's (GPUs give a positive one).
    nan = np.isnan(table(fmt)[codes])
    np.testing.assert_array_equal(got[~nan], want[~nan])
    np.testing.assert_array_equal(got[nan] & 0x7F, 0x7F)


@metile.kernel
def moves(X, T, S, C, BLOCK: metile.constexpr):
    r = metile.arange(0, BLOCK)
    tile = metile.tile_load(X, 0, 0, BLOCK, (BLOCK, BLOCK))
    metile.tile_store(T, 0, 0, BLOCK, metile.trans(tile), (BLOCK, BLOCK))
    a = metile.load(X + r)
    b = metile.load(X + BLOCK + r)
    metile.store(S + r, metile.where(r % 3 == 0, a, b))
    c = metile.load(X + r)
    for i in range(1, 4):
        c = metile.where(r >= i, metile.load(X + i * BLOCK + r), c)  # an FP8 loop-carried value
    metile.store(C + r, c)


def test_fp8_values_move_through_tiles_selects_and_loops(device):
    n = 16
    codes = np.random.randint(0, 256, n * n).astype(np.uint8)
    t, s, c = (metile.Buffer.zeros(k, "f8e5m2") for k in (n * n, n, n))
    moves[(1,)](f8_buffer(codes, "f8e5m2"), t, s, c, BLOCK=n)
    # Moves keep every code but the E5M2 NaN payloads.
    keep = np.where(np.isnan(table("f8e5m2")[codes]), (codes & 0x80) | 0x7F, codes).reshape(n, n)
    r = np.arange(n)
    np.testing.assert_array_equal(t.numpy().reshape(n, n), keep.T)
    np.testing.assert_array_equal(s.numpy(), np.where(r % 3 == 0, keep[0], keep[1]))
    np.testing.assert_array_equal(c.numpy(), keep[np.minimum(r, 3), r])


@metile.kernel
def arithmetic(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    x = metile.load(X + offs, mask=m, other=0.0)
    metile.store(Out + offs, x + x * 0.1, mask=m)             # f32 (0.1 is not rounded to FP8)
    metile.store(Out + N + offs, metile.exp(x * 0.01), mask=m)
    metile.store(Out + 2 * N + offs, (x > 1.0).to("f32"), mask=m)
    metile.store(Out + 3 * N + offs, metile.sum(metile.where(m, x, 0.0), axis=0), mask=offs == 0)


def test_arithmetic_on_fp8_computes_in_f32(device):
    n = 50
    vals = np.array([decode(c, "f8e4m3") for c in range(0, 100, 2)])
    codes = np.arange(0, 100, 2, dtype=np.uint8)
    out = np.zeros(4 * n, np.float32)
    arithmetic[(1,)](f8_buffer(codes, "f8e4m3"), out, n, BLOCK=64)
    x = vals.astype(np.float32)
    np.testing.assert_allclose(out[:n], x + x * np.float32(0.1), rtol=1e-6)
    np.testing.assert_allclose(out[n:2 * n], np.exp(x * np.float32(0.01)), rtol=1e-5)
    np.testing.assert_array_equal(out[2 * n:3 * n], (x > 1).astype(np.float32))
    np.testing.assert_allclose(out[3 * n], vals.sum(), rtol=1e-6)


def test_names_and_buffers():
    assert metile.float8e4m3 == metile.float8e4nv == "f8e4m3"
    assert metile.float8e5m2 == metile.float8e5 == "f8e5m2"
    b = metile.Buffer(data=CODES, dtype=metile.float8e4nv, device="interp")
    assert b.metile_dtype == "f8e4m3" and b.dtype == np.uint8 and b.nbytes == 256
    assert metile.Buffer.zeros(4, "float8_e5m2", device="interp").metile_dtype == "f8e5m2"
    with pytest.raises(metile.InvalidArgumentError, match="f8e4m3 needs uint8 storage"):
        metile.Buffer(data=np.zeros(4, np.float32), dtype="f8e4m3", device="interp")


@metile.kernel
def store_scalar(X, s):
    metile.store(X, s)


def test_an_f32_scalar_stores_into_fp8(device):
    # Kernel parameters are never FP8 scalars (the builder refuses them): an f32 scalar
    # argument is cast by the store.
    x = metile.Buffer.zeros(1, "f8e4m3")
    store_scalar[(1,)](x, 3.3)
    assert x.numpy()[0] == encode(float(np.float32(3.3)), "f8e4m3")


@metile.kernel
def fp8_dot(X, Out):
    r = metile.arange(0, 16)
    a = metile.load(X + r[:, None] * 16 + r[None, :])
    metile.store(Out + r[:, None] * 16 + r[None, :], metile.dot(a, a))


def test_an_fp8_dot_accumulates_in_f32():
    # Every device and format pair against float64: test_fp8_dot.py.
    with metile.use_device("interp"):
        codes = np.full(256, 0x38, np.uint8)  # 1.0
        out = np.zeros(256, np.float32)
        fp8_dot[(1,)](f8_buffer(codes, "f8e4m3"), out)
        np.testing.assert_array_equal(out, 16.0)


@pytest.mark.parametrize("fmt,code", [("f8e4m3", 10), ("f8e5m2", 12)])
@pytest.mark.parametrize("versioned", [False, True])
def test_dlpack_export_and_import(fmt, code, versioned):
    from metile import _dlpack
    buf = metile.Buffer(data=CODES.copy(), dtype=fmt, device="interp")
    cap = buf.__dlpack__(max_version=(1, 2) if versioned else None)
    address, is_versioned = _dlpack.open_capsule(cap)
    assert is_versioned == versioned
    m = _dlpack.managed(address, versioned)
    t = m.dl_tensor
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, 8, 1)
    if versioned:
        assert (m.version.major, m.version.minor) == (1, 1)  # the FP8 codes are DLPack 1.1's
    with metile.use_device("interp"):
        back = metile.from_dlpack(_Capsule(cap))
    assert back.metile_dtype == fmt
    np.testing.assert_array_equal(back.numpy(), CODES)


class _Capsule:
    """A producer that hands over an existing capsule."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, stream=None, max_version=None):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_import_of_a_foreign_fp8_tensor():
    """A tensor described by another producer (torch.float8_e4m3fn's code) imports as f8e4m3."""
    from metile import _dlpack
    data = CODES.copy()
    shape = (ctypes.c_int64 * 1)(256)
    m = _dlpack.DLManagedTensorVersioned()
    m.version = _dlpack.DLPackVersion(1, 1)
    t = m.dl_tensor
    t.data, t.device, t.ndim = data.ctypes.data, _dlpack.DLDevice(1, 0), 1
    t.dtype, t.shape = _dlpack.DLDataType(_dlpack.KDL_FLOAT8_E4M3FN, 8, 1), shape
    deleted = []
    cb = dict(type(m)._fields_)["deleter"](lambda _: deleted.append(1))
    m.deleter = cb
    cap = _dlpack.capsule(ctypes.addressof(m), True)
    with metile.use_device("interp"):
        buf = metile.from_dlpack(_Capsule(cap))
        assert buf.metile_dtype == "f8e4m3"
        out = np.zeros(256, np.float32)
        convert[(1,)](buf, out, 256, BLOCK=256)
        assert_same_values(out, table("f8e4m3"), "imported f8e4m3")
        del buf
    assert deleted == [1]
