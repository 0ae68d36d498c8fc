"""Names the original meTile added to the kernel language after the seeds (docs/semantics.md):
`scalar`, `fast_exp`, `reverse_bits`, `simd_sum`, `simd_max`.

Each is a composition of existing Tile IR ops, so every device (interp, cpu, metal-sim, cuda)
runs it through the ops it already has and the interp oracle checks it like any other kernel:
- `simd_sum` / `simd_max` are a five-step xor butterfly over `simd_shuffle_xor`. Partners add
  the same two values (a + b == b + a exactly in IEEE arithmetic), so every lane ends with the
  bit-identical result; the summation order is the butterfly's, not left to right.
- `fast_exp(x)` is `exp2(x * log2(e))` evaluated in f32: exp2 is the native exponential of GPUs
  (Metal's fast::exp and CUDA's __expf are this formula). The rounding of the product costs
  about |x| * log2(e) * 2**-24 relative error. Measured against float64 over a dense sweep of
  [-87, 88] (2**22 points on cpu, 2**18 on interp and metal-sim): maximum relative error
  3.9e-6 (near x = 87), mean 9.8e-7; tests/test_lang_compat.py pins FAST_EXP_MAX_REL_ERROR.
  Results that underflow or overflow follow exp2.
- `reverse_bits(x)` reverses the 32 bits of an i32/u32 scalar or tile with the classic swap of
  adjacent bits, pairs, nibbles, bytes and halves, and returns them as u32: the original's
  thread ids are unsigned, so its idiom `reverse_bits(i) >> (32 - bits)` (the bits-wide
  reversal of i) needs the logical shift that u32 gives.
"""

from __future__ import annotations

from . import _dtypes
from ._errors import TracingError
from ._lang import _plain, cast, exp2, maximum, thread_id, where
from ._lang import simd_shuffle_xor as _shuffle_xor
from ._trace import DTypeLike, Operand, Value, current, user_location

FAST_EXP_MAX_REL_ERROR = 1e-5
_LOG2E = 1.4426950408889634
_SIMD_WIDTH = 32


def scalar(value: Operand, dtype: DTypeLike | None = None) -> Value:
    """One explicit scalar value (`m = metile.scalar(-1e30)`): f32 for a float, i32 for an int
    unless `dtype` is given. Reassigning it in a tile_range loop carries it through the loop."""
    v = _plain(value)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TracingError(f"{user_location()}: scalar() needs an int or float, got "
                           f"{type(v).__name__}")
    name = _dtypes.normalize(dtype, "scalar") if dtype is not None else (
        "f32" if isinstance(v, float) else "i32")
    if name in _dtypes.INTS and isinstance(v, float):
        raise TracingError(f"{user_location()}: scalar({v!r}, {name}): a float value needs a "
                           "float dtype")
    if name in _dtypes.INTS and not _dtypes.int_fits(name, v):
        raise TracingError(f"{user_location()}: scalar({v!r}) does not fit in {name}")
    return current().const(v, name)


def fast_exp(x: Operand) -> Value:
    """Relaxed-accuracy e**x: exp2(x * log2(e)) in f32 (max relative error below 1e-5 on
    [-87, 88]); half-precision inputs give half-precision results like exp."""
    t = current()
    x = t.literal(_plain(x))
    out = x.dtype if x.dtype in ("f16", "bf16") else "f32"
    y = exp2(cast(x, "f32") * _LOG2E)
    return cast(y, out)


def reverse_bits(x: Operand) -> Value:
    """The 32 bits of an i32 or u32 value in reverse order (bit 0 becomes bit 31), as u32."""
    t = current()
    x = t.literal(_plain(x))
    if x.is_ptr or x.dtype not in ("i32", "u32"):
        raise TracingError(f"{user_location()}: reverse_bits needs a 32-bit integer (i32 or "
                           f"u32), got {x.type_str()}")
    u = cast(x, "u32")
    for shift, mask in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        u = ((u >> shift) & mask) | ((u & mask) << shift)
    return (u >> 16) | (u << 16)


def _per_thread(x, name) -> Value:
    t = current()
    x = t.literal(_plain(x))
    if x.is_ptr:
        raise TracingError(f"{user_location()}: {name} needs a number, got {x.type_str()}")
    if not x.shape:
        # A value uniform over the threads: the same in every lane.
        x = where(thread_id() >= 0, x, x)
    elif len(x.shape) != 1:
        raise TracingError(f"{user_location()}: {name} needs a per-thread value (a T-element "
                           f"tile or a scalar), got {x.type_str()}")
    return x


def _butterfly(x, combine) -> Value:
    step = _SIMD_WIDTH // 2
    width = x.shape[0]
    while step >= 1:
        if width < 0 or step < width:  # T < 0: not known yet, fixed at finish
            x = combine(x, _shuffle_xor(x, step))
        step //= 2
    return x


def simd_sum(value: Value) -> Value:
    """The sum of `value` over the 32 lanes of each simdgroup, in every lane."""
    return _butterfly(_per_thread(value, "simd_sum"), lambda a, b: a + b)


def simd_max(value: Value) -> Value:
    """The maximum of `value` over the 32 lanes of each simdgroup, in every lane."""
    return _butterfly(_per_thread(value, "simd_max"), maximum)


