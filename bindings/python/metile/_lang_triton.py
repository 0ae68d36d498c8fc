"""Triton habits that need no new op (issue 17): `static_assert`, and the `multiple_of` /
`max_contiguous` hints, which are accepted and return their value (the compiler derives
alignment and contiguity itself)."""

from __future__ import annotations

import numpy as np

from ._errors import TracingError
from ._lang import _plain
from ._trace import Value, user_location


def static_assert(cond, msg="") -> None:
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


def multiple_of(x, values):
    """Declares that x's elements are multiples of `values`; accepted, returns x."""
    return _hint(x, values, "multiple_of")


def max_contiguous(x, values):
    """Declares runs of `values` contiguous elements in x; accepted, returns x."""
    return _hint(x, values, "max_contiguous")
