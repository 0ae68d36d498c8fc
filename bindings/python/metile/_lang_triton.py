"""Triton habits that need no new op (issue 17): `static_assert`, the `multiple_of` /
`max_contiguous` hints (accepted, returning their value: the compiler derives alignment and
contiguity itself), and `argmax` / `argmin` as compositions of reductions, so every device and
the interp oracle run them through ops they already have; the scans (`cumsum`, `cumprod`),
`trans` / `permute` and `device_print`, which are ops of their own, and the Value methods
Triton's tensors have for them (x.cumsum(), x.trans(), x.T, ...)."""

from __future__ import annotations

import numpy as np

from . import _dtypes, _ffi, _lang
from ._errors import TracingError
from ._lang import _describe, _plain, _static_int, reduce_max, reduce_min
from typing import Sequence

from ._trace import DTypeLike, Operand, Value, current, user_location


def static_assert(cond: object, msg: str = "") -> None:
    """Fails the trace with `msg` (and the kernel's source line) when a compile-time condition
    (Python values, constexprs) is false."""
    c = _plain(cond)
    if isinstance(c, Value):
        raise TracingError(f"{user_location()}: static_assert needs a compile-time condition "
                           f"(constexprs, Python values), got the traced {c.type_str()}")
    if not c:
        raise TracingError(f"{user_location()}: static_assert failed" +
                           (f": {msg}" if msg else ""))


def _hint(x, values, name):
    vals = values if isinstance(values, (tuple, list)) else (values,)
    for v in vals:
        v = _plain(v)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise TracingError(f"{user_location()}: {name} needs positive compile-time ints, "
                               f"got {v!r}")
    return x


def multiple_of(x: Operand, values: int | Sequence[int]) -> Operand:
    """Declares that x's elements are multiples of `values`; accepted, returns x."""
    return _hint(x, values, "multiple_of")


def max_contiguous(x: Operand, values: int | Sequence[int]) -> Operand:
    """Declares runs of `values` contiguous elements in x; accepted, returns x."""
    return _hint(x, values, "max_contiguous")


def _arg_reduce(x, axis, pick, name):
    x = _plain(x)
    if not isinstance(x, Value) or not x.shape:
        raise TracingError(f"{user_location()}: {name} needs a tile, got "
                           f"{x.type_str() if isinstance(x, Value) else type(x).__name__}")
    if axis is None:
        if len(x.shape) != 1:
            x = _lang.reshape(x, (x.shape[0] * x.shape[1],))
        axis = 0
    axis = int(_plain(axis))
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise TracingError(f"{user_location()}: {name}: axis {axis} is invalid for a tile of "
                           f"shape {x.shape}")
    axis %= rank
    n = x.shape[axis]
    idx = _lang.arange(0, n)
    if rank == 2:
        idx = _lang.reshape(idx, (n, 1) if axis == 0 else (1, n))
    best = pick(x, axis)
    if rank == 2:
        best = _lang.reshape(best, (1, x.shape[1]) if axis == 0 else (x.shape[0], 1))
    # The first index holding the extreme value, as numpy's argmax/argmin. numpy also treats NaN
    # as the extreme: the first NaN wins (an all-NaN tile gives 0), where the max/min reductions
    # skip NaNs; an index past the tile would feed pointer arithmetic.
    past = current().literal(n)
    along = axis if rank == 2 else None
    first = _lang.reduce_min(_lang.where(x == best, idx, past), along)
    if x.dtype not in _dtypes.FLOATS:
        return first
    first_nan = _lang.reduce_min(_lang.where(x != x, idx, past), along)
    return _lang.where(first_nan < past, first_nan, first)


def argmax(x: Value, axis: int | None = None) -> Value:
    """Index of the (first) maximum: of the whole tile (row-major) with axis=None, else along
    `axis`; i32."""
    return _arg_reduce(x, axis, lambda v, a: reduce_max(v, a if len(v.shape) == 2 else None),
                       "argmax")


def argmin(x: Value, axis: int | None = None) -> Value:
    """Index of the (first) minimum, like argmax."""
    return _arg_reduce(x, axis, lambda v, a: reduce_min(v, a if len(v.shape) == 2 else None),
                       "argmin")


# ------------------------------------------------------------------------------------- atomics
def _atomic(op, name, ptr, cmp, val, mask):
    t = current()
    p = _lang._pointer(ptr, name)

    def operand(x):
        x = _plain(x)
        return x if isinstance(x, Value) else t.const(x, p.dtype)

    c = operand(cmp).id if cmp is not None else 0
    m = _lang._mask(mask)
    return t.emit(_ffi.metile_builder_atomic, op, p.id, c, operand(val).id,
                  m.id if m is not None else 0)


def atomic_add(pointer: Value, val: Operand, mask: Operand | None = None, sem: str | None = None,
               scope: str | None = None) -> Value:
    """Atomically adds `val` at each active lane's address; returns the old values (inactive
    where masked off, like a load without `other`). `sem`/`scope` are accepted for Triton
    compatibility (the order is relaxed)."""
    from ._enums import METILE_OP_ATOMIC_ADD
    return _atomic(METILE_OP_ATOMIC_ADD, "atomic_add", pointer, None, val, mask)


def atomic_max(pointer: Value, val: Operand, mask: Operand | None = None, sem: str | None = None,
               scope: str | None = None) -> Value:
    """Atomic maximum (fmax on floats); returns the old values."""
    from ._enums import METILE_OP_ATOMIC_MAX
    return _atomic(METILE_OP_ATOMIC_MAX, "atomic_max", pointer, None, val, mask)


def atomic_min(pointer: Value, val: Operand, mask: Operand | None = None, sem: str | None = None,
               scope: str | None = None) -> Value:
    """Atomic minimum (fmin on floats); returns the old values."""
    from ._enums import METILE_OP_ATOMIC_MIN
    return _atomic(METILE_OP_ATOMIC_MIN, "atomic_min", pointer, None, val, mask)


def atomic_xchg(pointer: Value, val: Operand, mask: Operand | None = None, sem: str | None = None,
                scope: str | None = None) -> Value:
    """Atomically writes `val`; returns the old values."""
    from ._enums import METILE_OP_ATOMIC_XCHG
    return _atomic(METILE_OP_ATOMIC_XCHG, "atomic_xchg", pointer, None, val, mask)


def atomic_cas(pointer: Value, cmp: Operand, val: Operand, mask: Operand | None = None,
               sem: str | None = None, scope: str | None = None) -> Value:
    """Writes `val` where the stored value equals `cmp` (bitwise); returns the old values."""
    from ._enums import METILE_OP_ATOMIC_CAS
    return _atomic(METILE_OP_ATOMIC_CAS, "atomic_cas", pointer, cmp, val, mask)


# ------------------------------------------------------------------ scans, transpose, printing
def _tile_arg(x, name):
    x = _plain(x)
    if not isinstance(x, Value) or not x.shape or x.is_ptr:
        raise TracingError(f"{user_location()}: {name} needs a 1-D or 2-D tile, got "
                           f"{_describe(x)}")
    return x


def _scan(op, name, x, axis, reverse, dtype):
    x = _tile_arg(x, name)
    if dtype is not None:
        x = _lang.cast(x, dtype)
    axis = _lang._static_int(axis, f"{name} axis")
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise TracingError(f"{user_location()}: {name}: axis {axis} is invalid for a tile of "
                           f"shape {x.shape} (0{' or 1' if rank == 2 else ''})")
    rev = _plain(reverse)
    if not isinstance(rev, (bool, int, np.integer)):
        raise TracingError(f"{user_location()}: {name}: reverse must be a compile-time bool")
    return current().emit(_ffi.metile_builder_scan, op, x.id, axis % rank, int(bool(rev)))


def cumsum(input: Value, axis: int = 0, reverse: bool = False,
           dtype: DTypeLike | None = None) -> Value:
    """Inclusive running sum along `axis` of a 1-D or 2-D tile (Triton's tl.cumsum): element k
    is the sum of elements 0..k (k..end with reverse=True). Masked-off lanes count as 0 and stay
    inactive; f16/bf16 accumulate in f32; bool counts as i32. `dtype` casts the input first."""
    from ._enums import METILE_OP_CUMSUM
    return _scan(METILE_OP_CUMSUM, "cumsum", input, axis, reverse, dtype)


def cumprod(input: Value, axis: int = 0, reverse: bool = False,
            dtype: DTypeLike | None = None) -> Value:
    """Inclusive running product along `axis`, like cumsum (masked-off lanes count as 1)."""
    from ._enums import METILE_OP_CUMPROD
    return _scan(METILE_OP_CUMPROD, "cumprod", input, axis, reverse, dtype)


def _dims(dims, name):
    if len(dims) == 1 and isinstance(_plain(dims[0]), (tuple, list)):
        dims = tuple(_plain(dims[0]))
    return tuple(_static_int(d, f"{name} dims") for d in dims)


def permute(input: Value, *dims: int | Sequence[int]) -> Value:
    """The tile with its dimensions reordered: `dims` is a permutation of range(ndim) (as
    varargs or one tuple). Tiles have at most 2 dimensions, so (1, 0) transposes and the
    identity returns the tile."""
    x = _plain(input)
    d = _dims(dims, "permute")
    rank = len(x.shape) if isinstance(x, Value) else 0
    if not isinstance(x, Value) or x.is_ptr or sorted(d) != list(range(rank)) or not rank:
        raise TracingError(f"{user_location()}: permute: dims {d} are not a permutation of the "
                           f"dimensions of {_describe(x)}")
    if d == tuple(range(rank)):
        return x
    return current().emit(_ffi.metile_builder_trans, x.id)


def trans(input: Value, *dims: int | Sequence[int]) -> Value:
    """The transpose of a 2-D tile (Triton's tl.trans); with `dims`, the same as permute."""
    if dims:
        return permute(input, *dims)
    x = _plain(input)
    if not isinstance(x, Value) or x.is_ptr or len(x.shape) != 2:
        raise TracingError(f"{user_location()}: trans needs a 2-D tile, got {_describe(x)} "
                           "(use reshape for 1-D tiles)")
    return current().emit(_ffi.metile_builder_trans, x.id)


def device_print(prefix: str, *args: Operand, hex: bool = False) -> None:
    """Prints from the kernel (Triton's tl.device_print): for each program, one line per active
    element of each value, "FILE:LINE: pid (x, y, z) idx (i) PREFIX VALUE", to the process's
    stdout (interp, cpu, metal-sim) or CUDA's printf buffer (shown at the next synchronize). The
    order between programs and between a program's elements is unspecified. `prefix` is plain
    text (no control characters, at most 256 bytes)."""
    import ctypes

    prefix = _plain(prefix)
    if not isinstance(prefix, str):
        raise TracingError(f"{user_location()}: device_print: the prefix must be a str, got "
                           f"{type(prefix).__name__}")
    if _plain(hex):
        raise TracingError(f"{user_location()}: device_print: hex=True is not supported")
    t = current()
    vals = []
    for a in args:
        v = t.literal(_plain(a))
        if v.is_ptr:
            raise TracingError(f"{user_location()}: device_print cannot print the pointer "
                               f"{_lang._describe(v)}")
        vals.append(v.id)
    arr = (_ffi.metile_value * max(1, len(vals)))(*vals)
    t.call(_ffi.metile_builder_device_print, prefix.encode(), arr, len(vals))


Value.cumsum = cumsum
Value.cumprod = cumprod
Value.trans = trans
Value.permute = permute


def _transposed(self: Value) -> Value:
    """x.T: the transpose of a 2-D tile (trans(x))."""
    return trans(self)


Value.T = property(_transposed)
