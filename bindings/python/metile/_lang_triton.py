"""Triton habits that need no new op (issue 17): `static_assert`, the `multiple_of` /
`max_contiguous` hints (accepted, returning their value: the compiler derives alignment and
contiguity itself), and `argmax` / `argmin` as compositions of reductions, so every device and
the interp oracle run them through ops they already have."""

from __future__ import annotations

import numpy as np

from ._errors import TracingError
from ._lang import _plain
from typing import Sequence

from ._trace import Operand, Value, user_location


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
    from . import _lang
    from ._trace import current
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
    # The first index holding the extreme value, as numpy's argmax/argmin.
    hits = _lang.where(x == best, idx, current().literal(n))
    return _lang.reduce_min(hits, axis if rank == 2 else None)


def argmax(x: Value, axis: int | None = None) -> Value:
    """Index of the (first) maximum: of the whole tile (row-major) with axis=None, else along
    `axis`; i32."""
    from ._lang import reduce_max
    return _arg_reduce(x, axis, lambda v, a: reduce_max(v, a if len(v.shape) == 2 else None),
                       "argmax")


def argmin(x: Value, axis: int | None = None) -> Value:
    """Index of the (first) minimum, like argmax."""
    from ._lang import reduce_min
    return _arg_reduce(x, axis, lambda v, a: reduce_min(v, a if len(v.shape) == 2 else None),
                       "argmin")


# ------------------------------------------------------------------------------------- atomics
def _atomic(op, name, ptr, cmp, val, mask):
    from . import _ffi, _lang
    from ._trace import current
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
