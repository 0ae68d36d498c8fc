"""`constexpr`, the compile-time-constant marker: a leaf module, so the tracer, the language
and the kernel wrapper can all recognise it without importing each other."""

from __future__ import annotations


class constexpr:
    """Marks a kernel parameter as a compile-time constant (`BLOCK: metile.constexpr`), or
    wraps a value (`constexpr(256)`) that launch unwraps. Constexprs are passed by keyword."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr({self.value!r})"

    def __hash__(self):
        return hash(self.value)

    def __eq__(self, other):
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __index__(self):
        return int(self.value)

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __bool__(self):
        return bool(self.value)
