"""Tracing: a kernel's Python body runs once with `Value`s standing in for its runtime
arguments; every operation on them appends an op through the C builder API.

Before each op the builder is told the user's source line (the first stack frame outside this
package), so verifier, compile and run-time errors point at the kernel's own code.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import types
from typing import Callable, Sequence, Union

import numpy as np

from . import _dtypes, _ffi
from ._constexpr import constexpr
from ._errors import TracingError, error_for

# Code objects carry the path the module was imported by (possibly relative or with ".."),
# so recognise the package under each spelling.
_PKG_DIRS = tuple({os.path.dirname(p) + os.sep for p in
                   (__file__, os.path.abspath(__file__), os.path.realpath(__file__))})
_state = threading.local()
_V = _ffi.metile_value


def user_frame(depth: int = 1) -> "types.FrameType":
    """The innermost frame that is not metile's own code."""
    f = sys._getframe(depth)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIRS):
        f = f.f_back
    return f


def user_location() -> str:
    f = user_frame(2)
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"


class Poison:
    """Stands for a variable with no usable value (see the message)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def fail(self, *_args: object, **_kwargs: object) -> None:
        raise TracingError(self.message)

    def __repr__(self):
        return "<metile: no value>"


for _name in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow "
              "rpow and rand or ror xor rxor lshift rlshift rshift rrshift lt le gt ge neg pos "
              "invert abs bool index int float getitem iter len").split():
    setattr(Poison, f"__{_name}__", Poison.fail)


class Retrace(Exception):
    """A loop-carried value changed type in the first iteration; trace again with the fix."""


# The C API refuses control characters and non-UTF-8 bytes in a source file name (they could end a
# comment line in generated code); such a name is spelled with visible escapes instead, so every
# location survives and still points at the file.
_LOC_FILE_BYTES = 4096  # kMaxTextBytes


def loc_file(name: str) -> bytes:
    """`name` (a code object's file name) as the C API accepts it for a source location."""
    out = []
    for ch in name:
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif cp < 0x20 or cp == 0x7F or 0x80 <= cp < 0xA0 or 0xD800 <= cp <= 0xDFFF:
            out.append(f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}")
        else:
            out.append(ch)
    data = "".join(out).encode()
    if len(data) > _LOC_FILE_BYTES:  # keep the tail: the file's own name is the useful part
        data = b"..." + data[-(_LOC_FILE_BYTES - 3):]
        while data[3] & 0xC0 == 0x80:  # do not start inside a UTF-8 sequence
            data = b"..." + data[4:]
    return data


class Trace:
    """One tracing pass over a kernel: owns the C builder until finish()."""

    def __init__(self, name: str, fixups: dict) -> None:
        self.builder = ctypes.POINTER(_ffi.metile_builder)()
        self._check(_ffi.metile_builder_create(ctypes.byref(self.builder), name.encode()))
        self.fixups = fixups  # (loop index, variable) -> (dtype, shape), from earlier passes
        self.loop_index = 0
        self.role_next_sg = 0
        self._loc = None

    # ------------------------------------------------------------------- builder plumbing
    def _check(self, status):
        if status:
            raise error_for(status)

    def locate(self) -> None:
        f = user_frame(2)
        if f is None:
            return
        loc = (f.f_code.co_filename, f.f_lineno)
        if loc != self._loc:
            self._loc = loc
            self._check(_ffi.metile_builder_set_loc(self.builder, loc_file(loc[0]), loc[1]))

    def emit(self, fn: Callable[..., int], *args: object) -> "Value":
        """Calls builder function `fn(builder, *args, &out)` and wraps the result."""
        self.locate()
        out = _V()
        st = fn(self.builder, *args, ctypes.byref(out))
        if st:
            raise error_for(st)
        return self.value(out.value)

    def call(self, fn: Callable[..., int], *args: object) -> None:
        self.locate()
        st = fn(self.builder, *args)
        if st:
            raise error_for(st)

    def value(self, vid: int) -> "Value":
        t = _ffi.metile_type()
        self._check(_ffi.metile_builder_value_type(self.builder, vid, ctypes.byref(t)))
        return Value(self, vid, t)

    def release(self) -> None:
        if self.builder:
            _ffi.metile_builder_release(self.builder)
            self.builder = None

    # -------------------------------------------------------------------------- constants
    def const(self, v: int | float | bool, dtype: str) -> "Value":
        code = _dtypes.to_enum(dtype)
        if dtype in _dtypes.FLOATS:
            return self.emit(_ffi.metile_builder_const_float, code, float(v))
        if isinstance(v, float) and not float(v).is_integer():
            raise TracingError(f"{user_location()}: {v!r} is not a {dtype} value")
        iv = int(v)
        if not _dtypes.int_fits(dtype, iv):
            raise TracingError(f"{user_location()}: {iv} does not fit in {dtype}")
        return self.emit(_ffi.metile_builder_const_int, code, iv)

    def literal(self, x: object, like: "Value | None" = None) -> "Value":
        """A Python value as a Value. Literals are weakly typed: they take the dtype of the
        value they meet when it is of the same kind, so a literal never changes a tile's dtype
        (2 * x_f16 stays f16); alone, ints are i32 (i64 when too large) and floats f32."""
        if isinstance(x, Value):
            return x
        if isinstance(x, np.generic):
            if isinstance(x, np.floating) and x.dtype == np.float64:
                x = float(x)
            else:
                return self.const(x.item(), _dtypes.from_numpy(x.dtype, "a numpy scalar"))
        if isinstance(x, bool):
            return self.const(int(x), "bool")
        ld = like.dtype if like is not None and not like.is_ptr else None
        if ld in _dtypes.FLOAT8:
            ld = "f32"  # arithmetic on FP8 computes in f32: 0.1 stays 0.1, 1000.0 fits
        if isinstance(x, int):
            if ld in _dtypes.FLOATS:
                return self.const(x, ld)
            if ld in _dtypes.INTS:
                if not _dtypes.int_fits(ld, x):  # numpy (NEP 50) refuses too
                    raise TracingError(
                        f"{user_location()}: the literal {x} does not fit the {ld} value it "
                        f"meets; convert that value first (e.g. .to(\"i64\"))")
                return self.const(x, ld)
            return self.const(x, "i32" if _dtypes.int_fits("i32", x) else "i64")
        if isinstance(x, float):
            return self.const(x, ld if ld in _dtypes.FLOATS else "f32")
        if isinstance(x, Poison):
            x.fail()
        if isinstance(x, constexpr):
            return self.literal(x.value, like)
        raise TracingError(
            f"{user_location()}: cannot use a {type(x).__name__} in a kernel expression "
            "(expected a traced value, int, float, bool or numpy scalar)")


def current() -> Trace:
    t = getattr(_state, "trace", None)
    if t is None:
        raise RuntimeError("this metile function must be called inside a @metile.kernel "
                           "(while it is being traced)")
    return t


def active() -> Trace | None:
    return getattr(_state, "trace", None)


def set_active(t: Trace | None) -> Trace | None:
    _state.trace = t


_NO_BOOL = (
    "a traced value (computed on the device) has no Python truth value, so `and`, `or`, `not` "
    "and an `if` whose body returns, breaks or continues cannot branch on it (a device `if` "
    "or `while` without those can). Use metile.where(cond, a, b) to select, a mask for "
    "load/store, and `&`, `|`, `~` to combine conditions")


# Annotation spellings of the language functions' arguments: a traced value or a Python number,
# a tile shape, a dtype (a name such as "f32", a numpy dtype or scalar type).
Operand = Union["Value", int, float, bool]
Shape = Union[int, Sequence[int]]
DTypeLike = Union[str, "np.dtype", type]


class Value:
    """A scalar, tile or pointer being traced (the result of an op or a kernel parameter).
    Its arithmetic, comparison and indexing operators are installed by _lang, next to the ops."""

    __slots__ = ("trace", "id", "dtype", "shape", "is_ptr", "space")
    __array_ufunc__ = None  # until _lang installs its handler (next to the operators)
    __hash__ = object.__hash__

    def __init__(self, trace: Trace, vid: int, t: "_ffi.metile_type") -> None:
        self.trace = trace
        self.id = vid
        self.is_ptr = bool(t.is_pointer)
        self.dtype = _dtypes.of(_dtypes.from_enum(t.dtype), self.is_ptr)
        self.shape = tuple(t.shape[i] for i in range(t.rank))
        self.space = t.address_space

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def type_str(self) -> str:
        s = f"{self.dtype}[{','.join(map(str, self.shape))}]" if self.shape else self.dtype
        return f"ptr<{s}>" if self.is_ptr else s

    def __repr__(self):
        return f"<metile value %{self.id}: {self.type_str()}>"

    # -------------------------------------------------------------- no Python control flow
    def __bool__(self):
        raise TracingError(f"{user_location()}: {_NO_BOOL}")

    def __index__(self):
        raise TracingError(
            f"{user_location()}: a traced value cannot be used where Python needs a plain int "
            "(range(), a shape, an index); pass it as a constexpr, or loop on the device with "
            "metile.range (metile.tile_range)")

    __int__ = __index__

    def __float__(self):
        raise TracingError(f"{user_location()}: a traced value cannot be converted to a Python "
                           "float at trace time")

    def __iter__(self):
        raise TracingError(f"{user_location()}: a traced tile cannot be iterated in Python; "
                           "use metile.range (metile.tile_range) for device loops")

    def __len__(self):
        raise TracingError(f"{user_location()}: len() of a traced value; use .shape")
