"""Block-scaled and 4-bit formats read through explicit decode ops (docs/semantics.md, "Packed
4-bit values and E8M0 scales"), and Triton's `dot_scaled` on top of them.

The storage is plain `u8`: two 4-bit codes a byte, the **low nibble first** (element 2i in bits
0-3 of byte i, element 2i+1 in bits 4-7: the order of the OCP MX reference code, Triton and
torch), and E8M0 scales one byte each. Every op here is a composition of existing Tile IR ops
(shifts, masks, bitcasts of built f32 bits, selects, broadcasts, reshapes, transposes), chosen over
new IR ops because each is exact in integer arithmetic and the ops it uses already mean the
same on every device, interp included: the decodes are bit-exact everywhere with no per-backend
code. The low/high interleave is a broadcast along a new size-2 axis and a reshape (a reshape
moves no data on GPUs; the broadcast may stage values through shared memory where layouts
differ). dot_scaled's e2m1 decode repeats the bytes instead and picks the nibble by the K
index's parity, so everything after the repeat is element-wise where the bytes were loaded.
"""

from __future__ import annotations

from ._errors import TracingError
from ._lang import _describe, _plain, arange, broadcast_to, cast, dot, reshape, where
from ._lang_triton import trans
from ._trace import DTypeLike, Value, user_location

# OCP MX: 32 elements share one E8M0 scale along the reduction axis.
SCALE_BLOCK = 32
_DECODED = ("f32", "f16", "bf16")
_FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
_FORMAT_DTYPE = {"e4m3": "f8e4m3", "e5m2": "f8e5m2", "bf16": "bf16", "fp16": "f16"}


def _tile(x, what, op) -> Value:
    x = _plain(x)
    if not isinstance(x, Value) or x.is_ptr or len(x.shape) not in (1, 2):
        raise TracingError(f"{user_location()}: {op}: {what} must be a 1-D or 2-D tile, got "
                           f"{_describe(x)}")
    return x


def _bytes(x, what, op) -> Value:
    x = _tile(x, what, op)
    if x.dtype != "u8":
        raise TracingError(f"{user_location()}: {op}: {what} must be a u8 tile (packed storage), "
                           f"got {x.type_str()}")
    return x


def _decoded_dtype(dtype, op) -> str:
    from . import _dtypes
    name = _dtypes.normalize(dtype, op)
    if name not in _DECODED:
        raise TracingError(f"{user_location()}: {op}: dtype must be one of "
                           f"{', '.join(_DECODED)}, got {name}")
    return name


def _interleave(lo: Value, hi: Value, axis: int) -> Value:
    """A tile twice as long on `axis` whose elements alternate lo[i], hi[i]."""
    shape = lo.shape
    if len(shape) == 2 and axis == 0:
        return trans(_interleave(trans(lo), trans(hi), 1))
    n = 1
    for d in shape:
        n *= d
    pair = broadcast_to(reshape(arange(0, 2), (1, 2)), (n, 2))
    lo2 = broadcast_to(reshape(lo, (n, 1)), (n, 2))
    hi2 = broadcast_to(reshape(hi, (n, 1)), (n, 2))
    both = where(pair == 0, lo2, hi2)
    out = (shape[0] * 2,) if len(shape) == 1 else (shape[0], shape[1] * 2)
    return reshape(both, out)


def _axis(x: Value, axis, op) -> int:
    if not isinstance(axis, int) or not -len(x.shape) <= axis < len(x.shape):
        raise TracingError(f"{user_location()}: {op}: axis {axis!r} is out of range for a "
                           f"{len(x.shape)}-D tile")
    return axis % len(x.shape)


def unpack_uint4(packed: Value, axis: int = -1) -> Value:
    """The 4-bit unsigned codes (0..15, as i32) of a u8 tile holding two a byte, low nibble
    first: twice as long on `axis` (element 2i = bits 0-3 of byte i, 2i+1 = bits 4-7)."""
    x = _bytes(packed, "packed", "unpack_uint4")
    ax = _axis(x, axis, "unpack_uint4")
    b = cast(x, "i32")
    return _interleave(b & 15, b >> 4, ax)


def _e2m1_bits(c: Value) -> Value:
    """The f32 bits (i32) of the E2M1 value of the low 4 bits of i32 tile c, built field by
    field (no table, no select on the value): sign to bit 31; a normal code (e > 0) is
    2^(e - 1) * (1 + m / 2), biased exponent e + 126 and m as the top mantissa bit; the
    subnormal codes are 0 and 0.5 (exponent field 126, mantissa 0)."""
    e = (c >> 1) & 3
    m = c & 1
    normal = ((e + 126) << 23) | (m << 22)
    return ((c & 8) << 28) | where(e == 0, m * (126 << 23), normal)


def e2m1_to_float(codes: Value, dtype: DTypeLike = "f32") -> Value:
    """The E2M1 (FP4: sign, 2 exponent bits with bias 1, 1 mantissa bit) value of each 4-bit
    code in the low bits of an integer tile: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives
    (code 8 is -0). Exact in f32, f16 and bf16."""
    x = _tile(codes, "codes", "e2m1_to_float")
    name = _decoded_dtype(dtype, "e2m1_to_float")
    return cast(cast(_e2m1_bits(cast(x, "i32")), "f32", bitcast=True), name)


def unpack_e2m1(packed: Value, axis: int = -1, dtype: DTypeLike = "f32") -> Value:
    """The E2M1 values of a u8 tile packing two a byte, low nibble first, as `dtype`: twice as
    long on `axis` (Triton's e2m1 operands of dot_scaled are packed this way along K)."""
    x = _bytes(packed, "packed", "unpack_e2m1")
    ax = _axis(x, axis, "unpack_e2m1")
    b = cast(x, "i32")
    name = _decoded_dtype(dtype, "unpack_e2m1")
    return _interleave(e2m1_to_float(b & 15, name), e2m1_to_float(b >> 4, name), ax)


def _e8m0_f32(x: Value) -> Value:
    """2^(byte - 127) in f32 of each byte of u8 tile x, its bits built directly: the byte is
    f32's biased exponent, except 0 (2^-127, the subnormal 0x00400000) and 255 (NaN)."""
    b = cast(x, "i32")
    bits = where(b == 0, 0x00400000, where(b == 255, 0x7FC00000, b << 23))
    return cast(bits, "f32", bitcast=True)


def e8m0_to_float(scales: Value, dtype: DTypeLike = "f32") -> Value:
    """The E8M0 scale of each byte of a u8 tile: 2^(byte - 127), byte 255 = NaN (OCP MX). Exact
    in f32 and bf16 (2^-127 is subnormal in both); f16 rounds as a cast does (beyond its range:
    inf or 0)."""
    x = _bytes(scales, "scales", "e8m0_to_float")
    name = _decoded_dtype(dtype, "e8m0_to_float")
    return cast(_e8m0_f32(x), name)


def _repeat(x: Value, r: int) -> Value:
    """2-D tile x with each element repeated r times along axis 1 ([a, b] -> [a, b * r])."""
    n = x.shape[0] * x.shape[1]
    return reshape(broadcast_to(reshape(x, (n, 1)), (n, r)), (x.shape[0], x.shape[1] * r))


def _scaled_e2m1(x: Value, scale: Value | None) -> Value:
    """The f32 values of e2m1 tile x (u8 [other, K / 2], two codes a byte along axis 1) times
    its scale (u8 [other, K / 32] or None), decoded element by element in one [other, K] tile:
    each byte is repeated once along K (as u8, the narrowest thing to move between threads),
    the nibble picked by the K index's parity, the value's bits built in place and the scale
    (also repeated along K) multiplied in."""
    k = x.shape[1] * 2
    codes = (cast(_repeat(x, 2), "i32") >> ((arange(0, k) & 1) * 4)) & 15
    v = cast(_e2m1_bits(codes), "f32", bitcast=True)
    return v if scale is None else v * _repeat(_e8m0_f32(scale), SCALE_BLOCK)


# ------------------------------------------------------------------------------ dot_scaled

def _operand(x, scale, fmt, side, k_axis, dt):
    """(one dot_scaled operand decoded, its scale applied, as dt; K), checked. The decode and the
    scale work with K on axis 1 (where both repeat along K); a K x N operand is transposed there
    and back, the pair cancelling for bytes that were transposed from an N x K load (the usual
    weight layout) and the way back read by the dot as a transposed operand."""
    op = "dot_scaled"
    if fmt not in _FORMATS:
        raise TracingError(f"{user_location()}: {op}: {side}_format {fmt!r} is not one of "
                           f"{', '.join(_FORMATS)}")
    x = _plain(x)
    if not isinstance(x, Value) or x.is_ptr or len(x.shape) != 2:
        raise TracingError(f"{user_location()}: {op}: {side} must be a 2-D tile, got "
                           f"{_describe(x)}")
    if fmt == "e2m1":
        if x.dtype != "u8":
            raise TracingError(f"{user_location()}: {op}: {side} in e2m1 must be a u8 tile "
                               f"(two codes a byte along K), got {x.type_str()}")
        k = x.shape[k_axis] * 2
    else:
        want = _FORMAT_DTYPE[fmt]
        if x.dtype != want:
            raise TracingError(f"{user_location()}: {op}: {side} in {fmt} must be a {want} tile, "
                               f"got {x.type_str()}")
        k = x.shape[k_axis]
    s = None if scale is None else _plain(scale)
    if s is not None:
        other = x.shape[1 - k_axis]
        want = (other, k // SCALE_BLOCK)
        if not isinstance(s, Value) or s.dtype != "u8" or s.shape != want or k % SCALE_BLOCK:
            kk = (f"K = {k} is not a multiple of {SCALE_BLOCK}" if k % SCALE_BLOCK else
                  f"need u8[{want[0]},{want[1]}]: one E8M0 byte per {SCALE_BLOCK} K values of "
                  f"each {'row' if k_axis == 1 else 'column'}")
            raise TracingError(f"{user_location()}: {op}: {side}_scale {_describe(s)} does not "
                               f"fit {side} {x.type_str()} in {fmt}: {kk}")
    if fmt != "e2m1" and s is None:                # element-wise: in the orientation given;
        return (x if x.dtype == dt else cast(cast(x, "f32"), dt)), k   # a load stays a load
    xk = x if k_axis == 1 else trans(x)
    if fmt == "e2m1":
        v = _scaled_e2m1(xk, s)
    else:
        v = cast(xk, "f32") * _repeat(_e8m0_f32(s), SCALE_BLOCK)
    v = cast(v, dt)
    return (v if k_axis == 1 else trans(v)), k


def dot_scaled(lhs: Value, lhs_scale: Value | None, lhs_format: str, rhs: Value,
               rhs_scale: Value | None, rhs_format: str, acc: Value | None = None,
               fast_math: bool = False, lhs_k_pack: bool = True, rhs_k_pack: bool = True,
               out_dtype: DTypeLike = "f32") -> Value:
    """acc + (lhs * 2^lhs_scale) @ (rhs * 2^rhs_scale), Triton's tl.dot_scaled: lhs [M, K]
    (e2m1: u8 [M, K/2], two codes a byte along K), rhs [K, N] (e2m1: u8 [K/2, N]); formats
    e2m1, e4m3, e5m2 (f8e4m3/f8e5m2 tiles), bf16, fp16; scales None or u8 E8M0 tiles [M, K/32]
    and [N, K/32], one per 32 consecutive K values. The scales are applied in registers (decode
    to f32, multiply: exact), the scaled values rounded to bf16 (to f16 when a format is fp16;
    values of e2m1, e4m3 and e5m2 times a power of two are exact in bf16) and multiplied by an
    ordinary `dot` accumulating in f32."""
    if fast_math or not lhs_k_pack or not rhs_k_pack:
        raise TracingError(f"{user_location()}: dot_scaled: fast_math and packing along M/N "
                           "are not supported (leave them at their defaults)")
    from . import _dtypes
    if _dtypes.normalize(out_dtype, "dot_scaled") != "f32":
        raise TracingError(f"{user_location()}: dot_scaled: out_dtype must be f32, got "
                           f"{out_dtype!r}")
    if "fp16" in (lhs_format, rhs_format) and "bf16" in (lhs_format, rhs_format):
        raise TracingError(f"{user_location()}: dot_scaled: the pair {lhs_format} x "
                           f"{rhs_format} is not supported (cast one side first)")
    dt = "f16" if "fp16" in (lhs_format, rhs_format) else "bf16"
    a, ka = _operand(lhs, lhs_scale, lhs_format, "lhs", 1, dt)
    b, kb = _operand(rhs, rhs_scale, rhs_format, "rhs", 0, dt)
    if ka != kb:
        packed = [s for s, f in (("lhs", lhs_format), ("rhs", rhs_format)) if f == "e2m1"]
        note = (f" ({' and '.join(packed)} in e2m1 hold two K values a byte, so K is even)"
                if packed else "")
        raise TracingError(f"{user_location()}: dot_scaled: lhs has K = {ka} but rhs has "
                           f"K = {kb}{note}")
    return dot(a, b, acc)
