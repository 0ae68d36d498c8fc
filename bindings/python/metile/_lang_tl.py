"""The rest of triton.language's everyday names (issue 37 item 3), with Triton's meaning, built
from the ops the language already has so that every device and the interp oracle run them
unchanged: the loop spellings `range` / `static_range`, `zeros_like` / `full_like`, `clamp`,
`fma`, bitcasts, dtype objects, ...

This module shadows the builtins `range`, `min` and `max` on purpose (they are metile's names);
its own code uses builtins.* explicitly."""

from __future__ import annotations

import builtins

from . import _dtypes, _lang
from ._errors import TracingError
from ._lang import _plain, _static_int, tile_range
from ._trace import DTypeLike, Operand, Value, current, user_location


class range(tile_range):  # noqa: A001  (Triton's name)
    """`for i in metile.range(start, end, step):` Triton's device loop: the same as tile_range.
    The hints `num_stages`, `loop_unroll_factor`, `warp_specialize`, `flatten` and
    `disallow_acc_multi_buffer` are accepted and left to the compiler (which pipelines K loops
    on GPUs by itself)."""

    def __init__(self, start: Operand, end: Operand | None = None, step: Operand = 1,
                 num_stages: int | None = None, loop_unroll_factor: int | None = None,
                 warp_specialize: bool = False, flatten: bool = False,
                 disallow_acc_multi_buffer: bool = False) -> None:
        for name, v in (("num_stages", num_stages), ("loop_unroll_factor", loop_unroll_factor)):
            if v is not None and _static_int(v, f"range {name}") < 0:
                raise TracingError(f"{user_location()}: range: {name} must be >= 0, got {v}")
        super().__init__(start, end, step)


def static_range(start: int, end: int | None = None, step: int = 1) -> builtins.range:
    """`for i in metile.static_range(...)`: a loop unrolled at trace time; the bounds are
    compile-time ints (constexprs), and `i` is a Python int in the body."""
    if end is None:
        start, end = 0, start
    s = _static_int(start, "static_range start")
    e = _static_int(end, "static_range end")
    st = _static_int(step, "static_range step")
    if st == 0:
        raise TracingError(f"{user_location()}: static_range step must not be 0")
    return builtins.range(s, e, st)


# ------------------------------------------------------------------------------ builtins
# A kernel's calls of Python's min, max and range are routed here by the source rewrite
# (_loops.rewrite), so that they mean what Triton gives them on device values.
def _flat_values(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    return args, any(isinstance(_plain(a), Value) for a in args)


def py_min(*args, **kwargs):
    """Python's min; on device values (`min(a, b)`) the element-wise minimum, as in Triton."""
    vals, device = _flat_values(args)
    if kwargs or not device:
        return builtins.min(*args, **kwargs)
    out = vals[0]
    for v in vals[1:]:
        out = _lang.minimum(out, v)
    return out


def py_max(*args, **kwargs):
    """Python's max; on device values (`max(a, b)`) the element-wise maximum, as in Triton."""
    vals, device = _flat_values(args)
    if kwargs or not device:
        return builtins.max(*args, **kwargs)
    out = vals[0]
    for v in vals[1:]:
        out = _lang.maximum(out, v)
    return out


def py_range(*args, **kwargs):
    """Python's range; on a device value it names the device loop to use instead."""
    for a in list(args) + list(kwargs.values()):
        a = _plain(a)
        if isinstance(a, Value):
            raise TracingError(
                f"{user_location()}: Python's range() unrolls at trace time and cannot run over "
                f"the device value {a.type_str()}; write `for i in metile.range(...)` (a device "
                "loop, metile.tile_range) or pass the bound as a constexpr")
    return builtins.range(*args, **kwargs)


BUILTINS = ((builtins.min, py_min), (builtins.max, py_max), (builtins.range, py_range))


# ----------------------------------------------------------------------------- creation
def _value(x, what) -> Value:
    x = _plain(x)
    if not isinstance(x, Value):
        raise TracingError(f"{user_location()}: {what} needs a traced value, got "
                           f"{type(x).__name__}")
    return x


def full_like(input: Value, value: Operand, dtype: DTypeLike | None = None) -> Value:
    """A tile of `input`'s shape (and dtype unless given) filled with `value`."""
    x = _value(input, "full_like")
    d = _dtypes.normalize(dtype, "full_like") if dtype is not None else x.dtype
    value = _plain(value)
    v = _lang.cast(value, d) if isinstance(value, Value) else current().const(value, d)
    if v.shape:
        raise TracingError(f"{user_location()}: full_like needs a scalar value, got "
                           f"{v.type_str()}")
    return _lang._broadcast(v, x.shape) if x.shape else v


def zeros_like(input: Value, dtype: DTypeLike | None = None) -> Value:
    """A tile of zeros with `input`'s shape (and dtype unless given)."""
    return full_like(input, 0, dtype)


def ones_like(input: Value, dtype: DTypeLike | None = None) -> Value:
    """A tile of ones with `input`'s shape (and dtype unless given)."""
    return full_like(input, 1, dtype)


# --------------------------------------------------------------------------------- math
def clamp(x: Operand, min: Operand, max: Operand, propagate_nan: object = None) -> Value:  # noqa: A002
    """minimum(maximum(x, min), max), element-wise (Triton's clamp). `propagate_nan` is
    accepted: a NaN `x` gives the result maximum/minimum give (docs/semantics.md)."""
    return _lang.minimum(_lang.maximum(x, min), max)


def fma(x: Operand, y: Operand, z: Operand) -> Value:
    """x * y + z, element-wise, with the rounding of that expression (docs/semantics.md)."""
    return _lang.binary("add", _lang.binary("mul", x, y), z)


def umulhi(x: Operand, y: Operand) -> Value:
    """The high 32 bits of the 64-bit product of two 32-bit integers (i32 or u32; the result
    keeps the operands' dtype)."""
    t = current()
    x, y = _plain(x), _plain(y)
    a = t.literal(x, y if isinstance(y, Value) else None)
    b = t.literal(y, a)
    if a.dtype not in ("i32", "u32") or b.dtype != a.dtype:
        raise TracingError(f"{user_location()}: umulhi needs two i32 or two u32 values, got "
                           f"{a.type_str()} and {b.type_str()}")
    return _lang.cast(_mul_wide(a, b)[0], a.dtype)


def _mul_wide(a: Value, b: Value) -> tuple[Value, Value]:
    """(high, low) 32-bit halves, as u32, of the product of two 32-bit values: an i64 product
    (integer arithmetic wraps), whose bits 32..63 are the high half however the sign falls."""
    p = _lang.cast(a, "i64") * _lang.cast(b, "i64")
    return _lang.cast((p >> 32) & 0xFFFFFFFF, "u32"), _lang.cast(p, "u32")


def div_rn(x: Operand, y: Operand) -> Value:
    """x / y rounded to nearest (the `/` of every device, docs/semantics.md)."""
    return _lang.binary("truediv", x, y)


def fdiv(x: Operand, y: Operand, ieee_rounding: bool = False) -> Value:
    """x / y (Triton's fdiv); `ieee_rounding` is accepted, the division is `/`."""
    return _lang.binary("truediv", x, y)


def sqrt_rn(x: Operand) -> Value:
    """sqrt(x) (the square root of every device, docs/semantics.md)."""
    return _lang.sqrt(x)


# ------------------------------------------------------------------------------ random
# Philox4x32-10 (Salmon et al., SC'11): counter (offset, 0, 0, 0), key (seed's low and high 32
# bits). Every step is integer arithmetic, which wraps identically on every device, so a seed
# and offsets give the same words everywhere; rand's float conversion is exact too.
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _u32(x) -> Value:
    return _lang.cast(x, "u32")


def randint4x(seed: Operand, offset: Operand, n_rounds: int = 10) -> tuple:
    """The four u32 words of Philox4x32 (n_rounds rounds, 10 by default) for counter
    (offset, 0, 0, 0) and key (low, high 32 bits of `seed`); `offset` is an integer tile."""
    t = current()
    rounds = _static_int(n_rounds, "n_rounds")
    if rounds < 1:
        raise TracingError(f"{user_location()}: n_rounds must be >= 1, got {rounds}")
    off = t.literal(_plain(offset))
    if off.dtype not in _dtypes.INTS:
        raise TracingError(f"{user_location()}: the random offsets must be integers, got "
                           f"{off.type_str()}")
    s = _lang.cast(t.literal(_plain(seed)), "i64")
    k0, k1 = _u32(s), _u32((s >> 32) & 0xFFFFFFFF)
    c0 = _u32(off)
    c1 = c2 = c3 = t.const(0, "u32")
    m0, m1 = t.const(_PHILOX_M[0], "u32"), t.const(_PHILOX_M[1], "u32")
    for r in builtins.range(rounds):
        if r:
            k0 = k0 + _PHILOX_W[0]
            k1 = k1 + _PHILOX_W[1]
        hi0, lo0 = _mul_wide(m0, c0)
        hi1, lo1 = _mul_wide(m1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    shape = off.shape
    return tuple(_lang._broadcast(c, shape) if c.shape != shape else c
                 for c in (c0, c1, c2, c3))


def randint(seed: Operand, offset: Operand, n_rounds: int = 10) -> Value:
    """The first u32 word of randint4x: a random u32 per offset."""
    return randint4x(seed, offset, n_rounds)[0]


def _uniform(word: Value, open_at_zero: bool = False) -> Value:
    # The top 24 bits as a multiple of 2**-24: exact in f32 on every device, in [0, 1)
    # (or (0, 1] for the logarithm of randn).
    v = _lang.cast(word >> 8, "f32")
    return (v + 1.0 if open_at_zero else v) * (1.0 / (1 << 24))


def rand(seed: Operand, offset: Operand, n_rounds: int = 10) -> Value:
    """Uniform f32 in [0, 1) per offset: (randint(seed, offset) >> 8) * 2**-24."""
    return _uniform(randint(seed, offset, n_rounds))


def randn(seed: Operand, offset: Operand, n_rounds: int = 10) -> Value:
    """Standard normal f32 per offset, by Box-Muller from randint4x's first two words:
    sqrt(-2 log u1) * cos(2 pi u2), u1 in (0, 1], u2 in [0, 1) (log and cos round as on each
    device, docs/semantics.md)."""
    c = randint4x(seed, offset, n_rounds)
    u1, u2 = _uniform(c[0], True), _uniform(c[1])
    return _lang.sqrt(-2.0 * _lang.log(u1)) * _lang.cos(6.283185307179586 * u2)


def device_assert(cond: Operand, msg: str = "", mask: Operand | None = None) -> None:
    """Triton's device_assert: a compile-time false condition fails the trace with `msg`; a
    device condition is accepted and not checked (Triton checks it only in debug builds)."""
    c = _plain(cond)
    if not isinstance(c, Value) and not c:
        raise TracingError(f"{user_location()}: device_assert failed" +
                           (f": {msg}" if msg else ""))
