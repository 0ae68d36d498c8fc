"""The kernel language: every function usable inside a @metile.kernel (their meaning on
every device: docs/semantics.md).

Each function appends ops through the C builder (which promotes and broadcasts operands);
Python literals are weakly typed (see Trace.literal). `cdiv` and `next_power_of_2` also work
outside kernels, e.g. for grid sizes.
"""

from __future__ import annotations

import builtins
import collections.abc
import ctypes

import numpy as np

from . import _dtypes, _ffi, _ops
from ._constexpr import constexpr
from ._errors import InvalidArgumentError, TracingError
from ._trace import DTypeLike, Operand, Shape, Value, current, user_location

_I64x2 = ctypes.c_int64 * 2


def _plain(x):
    return x.value if isinstance(x, constexpr) else x


def _static_int(x, what: str) -> int:
    x = _plain(x)
    if isinstance(x, (bool, Value)) or not isinstance(x, (int, np.integer)):
        raise TracingError(f"{user_location()}: {what} must be a compile-time int (a Python int "
                           f"or constexpr), got {type(x).__name__}")
    return int(x)


def _shape(shape, what: str) -> tuple[int, ...]:
    shape = _plain(shape)
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not 1 <= len(shape) <= 2:
        raise TracingError(f"{user_location()}: {what}: shape must be an int or a tuple of 1 or 2 "
                           f"compile-time ints, got {shape!r}")
    dims = tuple(_static_int(d, f"{what}: shape entries") for d in shape)
    if any(d <= 0 for d in dims):
        raise TracingError(f"{user_location()}: {what}: shape {dims} must be positive")
    return dims


def _val(x, like=None) -> Value:
    return current().literal(_plain(x), like)


# ------------------------------------------------------------------------------ index math
def cdiv(a: Operand, b: Operand) -> Operand:
    """Ceiling division ceil(a / b); usable in kernels and for grids."""
    a, b = _plain(a), _plain(b)
    return (a + b - 1) // b


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 0)."""
    n = _static_int(n, "next_power_of_2(n)")
    return 1 if n <= 0 else 1 << (n - 1).bit_length()


def program_id(axis: int = 0) -> Value:
    """Index of this program instance along `axis` (0, 1 or 2), an i32 scalar."""
    return current().emit(_ffi.metile_builder_grid, _ffi.METILE_OP_PROGRAM_ID,
                          _static_int(axis, "program_id axis"))


def num_programs(axis: int = 0) -> Value:
    """Number of program instances along `axis`, an i32 scalar."""
    return current().emit(_ffi.metile_builder_grid, _ffi.METILE_OP_NUM_PROGRAMS,
                          _static_int(axis, "num_programs axis"))


def arange(start: Operand, size: int) -> Value:
    """`start + [0, size)` as an i32 tile; `size` is a compile-time int, `start` may be a
    runtime scalar."""
    t = current()
    n = _static_int(size, "arange size")
    start = _plain(start)
    sv = 0 if (isinstance(start, int) and start == 0) else t.literal(start).id
    return t.emit(_ffi.metile_builder_arange, sv, n)


# ------------------------------------------------------------------------- element-wise
_BINARY = {
    "add": _ffi.METILE_OP_ADD, "sub": _ffi.METILE_OP_SUB, "mul": _ffi.METILE_OP_MUL,
    "div": _ffi.METILE_OP_DIV, "floordiv": _ffi.METILE_OP_FLOORDIV, "cmod": _ffi.METILE_OP_MOD,
    "maximum": _ffi.METILE_OP_MAXIMUM, "minimum": _ffi.METILE_OP_MINIMUM,
    "and": _ffi.METILE_OP_BITAND, "or": _ffi.METILE_OP_BITOR, "xor": _ffi.METILE_OP_BITXOR,
    "shl": _ffi.METILE_OP_SHL, "shr": _ffi.METILE_OP_SHR, "fpow": _ffi.METILE_OP_POW,
    "lt": _ffi.METILE_OP_LT, "le": _ffi.METILE_OP_LE, "gt": _ffi.METILE_OP_GT,
    "ge": _ffi.METILE_OP_GE, "eq": _ffi.METILE_OP_EQ, "ne": _ffi.METILE_OP_NE,
}


def _operands(a, b):
    t = current()
    a, b = _plain(a), _plain(b)
    if not isinstance(a, Value) and not isinstance(b, Value):
        a = t.literal(a)
    a = t.literal(a, b if isinstance(b, Value) else None)
    b = t.literal(b, a)
    return t, a, b


def _emit_binary(t, name, a, b) -> Value:
    return t.emit(_ffi.metile_builder_binary, _BINARY[name], a.id, b.id)


def binary(name: str, a: Operand, b: Operand) -> Value:
    """A Python operator on traced values, with Python's meaning (true `/`, floored `//`
    and `%`, `**`)."""
    pa, pb = _plain(a), _plain(b)
    if (name == "pow" and isinstance(pa, Value) and pa.dtype in _dtypes.INTS
            and isinstance(pb, int) and not isinstance(pb, bool) and 0 <= pb <= 64):
        return _int_pow(pa, pb)  # exact, and keeps the integer dtype like numpy
    t, a, b = _operands(pa, pb)
    if name == "sub" and a.is_ptr and not b.is_ptr:
        return _emit_binary(t, "add", a, unary(_ffi.METILE_OP_NEG, b))
    if name == "truediv":
        if a.dtype not in _dtypes.FLOATS and b.dtype not in _dtypes.FLOATS:
            a, b = cast(a, "f32"), cast(b, "f32")
        return _emit_binary(t, "div", a, b)
    if name == "mod":
        return _floor_mod(t, a, b)
    if name == "pow" and a.dtype not in _dtypes.FLOATS and b.dtype not in _dtypes.FLOATS:
        raise TracingError(
            f"{user_location()}: integer ** integer is only supported with a non-negative int "
            "literal exponent (x ** 3); cast to float for other exponents")
    return _emit_binary(t, "fpow" if name == "pow" else name, a, b)


def _floor_mod(t, a, b) -> Value:
    # Python's %: the result takes the sign of the divisor (C's remainder takes the dividend's).
    r = _emit_binary(t, "cmod", a, b)
    if r.dtype in ("u32", "u8", "bool"):
        return r
    zero = t.literal(0, r)
    fix = _emit_binary(t, "and", _emit_binary(t, "ne", r, zero),
                       _emit_binary(t, "ne", _emit_binary(t, "lt", r, zero),
                                    _emit_binary(t, "lt", b, t.literal(0, b))))
    return where(fix, _emit_binary(t, "add", r, b), r)


def _int_pow(base: Value, e: int) -> Value:
    t = current()
    result, sq = None, base
    while e:
        if e & 1:
            result = sq if result is None else _emit_binary(t, "mul", result, sq)
        e >>= 1
        if e:
            sq = _emit_binary(t, "mul", sq, sq)
    return result if result is not None else t.literal(1, base)


def unary(op: int, x: Operand) -> Value:
    t = current()
    x = t.literal(_plain(x))
    return t.emit(_ffi.metile_builder_unary, op, x.id)  # the builder casts ints for exp & co.


def _make_unary(op, name, doc):
    def f(x: Operand) -> Value:
        return unary(op, x)
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = doc
    return f


# One function per unary op of the op table (_ops.py, generated from src/ir/ops.def): a new op
# needs no edit here; a sentence for its docstring is optional.
_UNARY_DOCS = {
    "exp": "Element-wise e**x.", "log": "Element-wise natural logarithm.",
    "sqrt": "Element-wise square root.", "rsqrt": "Element-wise 1 / sqrt(x).",
    "abs": "Element-wise absolute value.", "tanh": "Element-wise hyperbolic tangent.",
    "sin": "Element-wise sine.", "cos": "Element-wise cosine.", "exp2": "Element-wise 2**x.",
    "log2": "Element-wise base-2 logarithm.", "floor": "Element-wise floor.",
    "ceil": "Element-wise ceiling.", "erf": "Element-wise error function.",
    "sigmoid": "Element-wise 1 / (1 + exp(-x)).",
}
for _attr, (_name, _op) in _ops.UNARY_FUNCTIONS.items():
    globals()[_attr] = _make_unary(_op, _name, _UNARY_DOCS.get(_name, f"Element-wise {_name}."))


def maximum(a: Operand, b: Operand) -> Value:
    """Element-wise maximum."""
    return binary("maximum", a, b)


def minimum(a: Operand, b: Operand) -> Value:
    """Element-wise minimum."""
    return binary("minimum", a, b)


def where(cond: Operand, x: Operand, y: Operand) -> Value:
    """Element-wise `x if cond else y` (a Python bool condition picks statically)."""
    cond = _plain(cond)
    if isinstance(cond, (bool, np.bool_)):
        return x if cond else y
    t = current()
    if not isinstance(cond, Value):
        raise TracingError(f"{user_location()}: where() needs a bool condition, got "
                           f"{type(cond).__name__}")
    if cond.dtype != "bool":
        raise TracingError(f"{user_location()}: where() needs a bool condition, got "
                           f"{cond.type_str()} (compare it, e.g. x != 0)")
    x, y = _plain(x), _plain(y)
    if not isinstance(x, Value) and not isinstance(y, Value):
        x = t.literal(x)
    x = t.literal(x, y if isinstance(y, Value) else None)
    y = t.literal(y, x)
    return t.emit(_ffi.metile_builder_select, cond.id, x.id, y.id)


def cast(x: Operand, dtype: DTypeLike, fp_downcast_rounding: str | None = None,
         bitcast: bool = False) -> Value:
    """x converted to `dtype` ("f32", "f16", "bf16", "i32", "u32", "i64", "bool", "i8", "u8",
    "f8e4m3", "f8e5m2"; to FP8 rounds to nearest even and saturates). With bitcast=True each
    element's bits are read as `dtype` instead, which must have x's width (f32/i32/u32,
    f16/bf16, i8/u8/f8e4m3/f8e5m2, i64; not bool, not pointers). A pointer's dtype
    (`x.to(Out.dtype)`) means its element type. `fp_downcast_rounding` is Triton's: None or
    "rtne" (round to nearest even, what every cast does)."""
    t = current()
    name = _dtypes.normalize(dtype, "cast")  # a pointer's dtype (`x.to(Out.dtype)`): its element
    if fp_downcast_rounding not in (None, "rtne"):
        raise TracingError(f"{user_location()}: cast: fp_downcast_rounding="
                           f"{fp_downcast_rounding!r} is not supported (None or 'rtne')")
    x = t.literal(_plain(x))
    if _plain(bitcast):
        return _bitcast(t, x, name)
    if x.dtype == name and not x.is_ptr:
        return x
    return t.emit(_ffi.metile_builder_cast, x.id, _dtypes.to_enum(name))


def _bitcast(t, x: Value, name: str) -> Value:
    if x.is_ptr:
        raise TracingError(f"{user_location()}: bitcast cannot reinterpret the pointer "
                           f"{x.type_str()} (pointers have no element bits to read)")
    src = _dtypes.of(x.dtype)
    bits, want = src.primitive_bitwidth, _dtypes.of(name).primitive_bitwidth
    if "bool" in (x.dtype, name) or bits != want:
        raise TracingError(f"{user_location()}: bitcast from {x.dtype} ({bits} bits) to {name} "
                           f"({want} bits): a bitcast keeps every bit, so both dtypes need the "
                           "same width and neither may be bool (use cast to convert values)")
    if x.dtype == name:
        return x
    return t.emit(_ffi.metile_builder_bitcast, x.id, _dtypes.to_enum(name))


def reshape(x: Value, shape: Shape) -> Value:
    """The same elements with a new shape of the same size (row-major order)."""
    t = current()
    dims = _shape(shape, "reshape")
    x = t.literal(_plain(x))
    return t.emit(_ffi.metile_builder_reshape, x.id, len(dims),
                  _I64x2(*dims, *(0,) * (2 - len(dims))))


def broadcast_to(x: Operand, shape: Shape) -> Value:
    """x (a scalar, or a tile with size-1 dimensions) broadcast to `shape`."""
    return _broadcast(x, _shape(shape, "broadcast_to"))


def _broadcast(x, dims: tuple[int, ...]) -> Value:
    """broadcast_to without checking `dims`, which may hold -1: T, the SIMT thread count."""
    t = current()
    x = t.literal(_plain(x))
    if x.shape == dims:
        return x
    return t.emit(_ffi.metile_builder_broadcast, x.id, len(dims),
                  _I64x2(*dims, *(0,) * (2 - len(dims))))


def zeros(shape: Shape, dtype: DTypeLike = "f32") -> Value:
    """A tile of zeros (accumulator init)."""
    return full(shape, 0, dtype)


def full(shape: Shape, value: Operand, dtype: DTypeLike | None = None) -> Value:
    """A tile of `shape` filled with `value` (dtype from the value unless given)."""
    t = current()
    value = _plain(value)
    if dtype is not None:
        name = _dtypes.normalize(dtype, "full")
        v = cast(value, name) if isinstance(value, Value) else t.const(value, name)
    else:
        v = t.literal(value)
    if v.shape:
        raise TracingError(f"{user_location()}: full() needs a scalar value, got {v.type_str()}")
    return broadcast_to(v, shape)


# ---------------------------------------------------------------------------------- memory
def _pointer(ptr, what) -> Value:
    ptr = _plain(ptr)
    if not isinstance(ptr, Value) or not ptr.is_ptr:
        raise TracingError(f"{user_location()}: {what} needs a pointer (a buffer parameter, "
                           f"ptr + offsets, or metile.shared), got {_describe(ptr)}")
    return ptr


def _describe(x):
    return x.type_str() if isinstance(x, Value) else type(x).__name__


def _mask(mask):
    mask = _plain(mask)
    if mask is None or mask is True:
        return None
    t = current()
    m = t.literal(mask)
    if m.dtype != "bool":
        raise TracingError(f"{user_location()}: a mask must be bool (e.g. offs < N), got "
                           f"{m.type_str()}")
    return m


_CACHE_HINTS = {"cache_modifier": ("", ".ca", ".cg", ".cs", ".cv", ".wb", ".wt", ".lu"),
                "eviction_policy": ("", "evict_first", "evict_last", "evict_normal")}


def _cache_hints(op, hints):
    # Triton's cache hints: accepted (checked, so a typo is named) and left to the compiler.
    for k, v in hints.items():
        if k == "volatile":
            continue
        if k not in _CACHE_HINTS:
            raise TracingError(f"{user_location()}: {op}() got an unexpected keyword argument "
                               f"`{k}`")
        if _plain(v) not in _CACHE_HINTS[k]:
            raise TracingError(f"{user_location()}: {op}: {k}={v!r} is not one of "
                               f"{', '.join(repr(x) for x in _CACHE_HINTS[k] if x)}")


def load(ptr: Value, mask: Operand | None = None, other: Operand | None = None,
         boundary_check: collections.abc.Sequence[int] | int = (),
         padding_option: str | None = None, **hints: object) -> Value:
    """Reads through `ptr` (ptr + offsets). Masked-off lanes touch no memory and are inactive
    (reductions, `dot` and stores skip them; docs/semantics.md), or, with `other`, active with
    the value `other`. Triton's `cache_modifier`, `eviction_policy` and `volatile` are accepted
    as hints. A block pointer (make_block_ptr) reads its block, masked by `boundary_check`
    (the dimensions to check), reading `padding_option`'s value ('zero', 'nan') outside."""
    _cache_hints("load", hints)
    if _block_ptr(ptr, "load", mask, other, boundary_check, padding_option):
        return ptr.load(boundary_check, padding_option)
    t = current()
    p = _pointer(ptr, "load")
    m = _mask(mask)
    o = 0
    if m is not None and other is not None:
        other = _plain(other)
        o = (other if isinstance(other, Value) else t.const(other, p.dtype)).id
    return t.emit(_ffi.metile_builder_load, p.id, m.id if m is not None else 0, o)


def store(ptr: Value, value: Operand, mask: Operand | None = None,
          boundary_check: collections.abc.Sequence[int] | int = (), **hints: object) -> None:
    """Writes `value` through `ptr` (cast to the pointee type); masked-off lanes are skipped.
    Triton's `cache_modifier` and `eviction_policy` are accepted as hints. A block pointer
    (make_block_ptr) writes its block, skipping what `boundary_check`'s dimensions leave out."""
    _cache_hints("store", hints)
    if _block_ptr(ptr, "store", mask, None, boundary_check, None):
        ptr.store(value, boundary_check)
        return
    t = current()
    p = _pointer(ptr, "store")
    value = _plain(value)
    v = value if isinstance(value, Value) else t.const(value, p.dtype)
    m = _mask(mask)
    t.call(_ffi.metile_builder_store, p.id, v.id, m.id if m is not None else 0)


def _block_ptr(ptr, what, mask, other, boundary_check, padding_option) -> bool:
    """Whether `ptr` is a block pointer; the arguments only one kind of pointer takes are
    errors with the other."""
    from ._block_ptr import BlockPointer  # a late import: _block_ptr builds on this module

    if isinstance(ptr, BlockPointer):
        if mask is not None or other is not None:
            raise TracingError(f"{user_location()}: {what} of a block pointer takes boundary_check "
                               "(and padding_option), not mask/other")
        return True
    if boundary_check or padding_option is not None:
        raise TracingError(f"{user_location()}: {what}: boundary_check and padding_option need a "
                           f"block pointer (metile.make_block_ptr), got {_describe(_plain(ptr))}")
    return False


def _bounds(bounds, what):
    if bounds is None:
        return 0, 0
    bounds = _plain(bounds)
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise TracingError(
            f"{user_location()}: {what}: bounds must be (rows, cols), got {bounds!r}")
    return _val(bounds[0]).id, _val(bounds[1]).id


def tile_load(ptr: Value, row: Operand, col: Operand, stride: Operand, shape: Shape,
              bounds: tuple[Operand, Operand] | None = None) -> Value:
    """The rows x cols tile at (row, col) of a row-major matrix with leading dimension
    `stride`. The matrix is bounds=(R, C) when given, else (extent(ptr) // stride, stride):
    elements outside it read 0."""
    t = current()
    p = _pointer(ptr, "tile_load")
    dims = _shape(shape, "tile_load")
    if len(dims) != 2:
        raise TracingError(f"{user_location()}: tile_load: shape must be (rows, cols), got {dims}")
    br, bc = _bounds(bounds, "tile_load")
    return t.emit(_ffi.metile_builder_tile_load, p.id, _val(row).id, _val(col).id,
                  _val(stride).id, dims[0], dims[1], br, bc)


def tile_store(ptr: Value, row: Operand, col: Operand, stride: Operand, value: Value,
               shape: Shape, bounds: tuple[Operand, Operand] | None = None) -> None:
    """Writes a rows x cols tile like tile_load reads one; elements outside the matrix (bounds,
    else (extent(ptr) // stride, stride)) are skipped."""
    t = current()
    p = _pointer(ptr, "tile_store")
    dims = _shape(shape, "tile_store")
    if len(dims) != 2:
        raise TracingError(f"{user_location()}: tile_store: shape must be (rows, cols), got {dims}")
    value = _plain(value)
    v = value if isinstance(value, Value) else t.const(value, p.dtype)
    if v.shape != dims:
        if v.shape:
            raise TracingError(f"{user_location()}: tile_store: the value's shape {v.shape} "
                               f"differs from shape={dims}")
        v = broadcast_to(v, dims)
    br, bc = _bounds(bounds, "tile_store")
    t.call(_ffi.metile_builder_tile_store, p.id, _val(row).id, _val(col).id, _val(stride).id,
           v.id, br, bc)


DOT_PRECISIONS = ("ieee", "tf32", "tf32x3")


def dot_precision_code(value: str | None, allow_tf32: bool | None, where: str) -> int:
    """The metile_dot_precision of `input_precision` (None: none of its own) and Triton's
    `allow_tf32` alias (True: "tf32", False: "ieee"); a bad or contradicting value is an
    InvalidArgumentError naming it."""
    if allow_tf32 is not None:
        alias = "tf32" if allow_tf32 else "ieee"
        if value is not None and value != alias:
            raise InvalidArgumentError(f"{where}: allow_tf32={allow_tf32!r} contradicts "
                                       f"input_precision={value!r}")
        value = alias
    if value is None:
        return 0
    if not isinstance(value, str) or value not in DOT_PRECISIONS:
        raise InvalidArgumentError(f"{where}: input_precision {value!r} is not one of "
                                   f"{', '.join(repr(p) for p in DOT_PRECISIONS)}")
    return DOT_PRECISIONS.index(value) + 1


def dot(a: Value, b: Value, acc: Value | None = None, input_precision: str | None = None,
        allow_tf32: bool | None = None) -> Value:
    """acc + a @ b for a: M x K, b: K x N, acc: M x N (zeros in f32 when omitted).

    `input_precision` says how f32 inputs round (docs/semantics.md, "dot precision"): "ieee"
    (f32 products), "tf32" (inputs rounded to TF32: the fast tensor-core path) or "tf32x3"
    (each input split into two TF32 parts, three products: close to f32). None takes the
    compile's `input_precision` option, whose default gives f32 accuracy on every device.
    `allow_tf32=True` is Triton's alias of "tf32" (False: "ieee")."""
    t = current()
    a, b = _plain(a), _plain(b)
    for x, n in ((a, "a"), (b, "b")):
        if not isinstance(x, Value) or len(x.shape) != 2:
            raise TracingError(f"{user_location()}: dot: `{n}` must be a 2-D tile, got "
                               f"{_describe(x)}")
    try:
        prec = dot_precision_code(input_precision, allow_tf32, "dot")
    except InvalidArgumentError as e:
        raise TracingError(f"{user_location()}: {e}") from None
    if acc is None:
        acc = zeros((a.shape[0], b.shape[1]), "f32" if a.dtype in _dtypes.FLOATS else "i32")
    if prec == 0:
        return t.emit(_ffi.metile_builder_dot, a.id, b.id, _val(acc).id)
    return t.emit(_ffi.metile_builder_dot_with_precision, a.id, b.id, _val(acc).id, prec)


def _reduce(op, x, axis, name):
    x = _plain(x)
    if not isinstance(x, Value):
        if axis is None:
            return x  # a Python number is its own reduction
        raise TracingError(f"{user_location()}: {name}(axis={axis}) needs a 2-D tile")
    if axis is None:
        if not x.shape:
            return x
        c_axis = -1
    else:
        axis = _static_int(axis, f"{name} axis")
        if len(x.shape) == 1 and axis in (0, -1):  # Triton's habit: the only axis of a 1-D tile
            return current().emit(_ffi.metile_builder_reduce, op, x.id, -1)
        if len(x.shape) != 2 or not -2 <= axis <= 1:
            raise TracingError(f"{user_location()}: {name}: axis {axis} is invalid for a tile of "
                               f"shape {x.shape} (use axis=None, 0 on 1-D tiles, or 0/1 on 2-D "
                               "tiles)")
        c_axis = axis % 2
    return current().emit(_ffi.metile_builder_reduce, op, x.id, c_axis)


def _keep_dims(r, x, axis, keep_dims):
    """A reduction's result `r` of the tile `x` with the reduced dimensions kept as size 1."""
    x = _plain(x)
    if not keep_dims or not isinstance(x, Value) or not x.shape:
        return r
    if axis is None or len(x.shape) == 1:
        return _broadcast(r, (1,) * len(x.shape))
    dims = list(x.shape)
    dims[_static_int(axis, "keep_dims axis") % 2] = 1
    return reshape(r, tuple(dims))


def reduce_sum(x: Value, axis: int | None = None, keep_dims: bool = False) -> Value:
    """Sum of a whole tile (a scalar), or along `axis` of a 2-D tile; `keep_dims=True` keeps
    the reduced dimensions with size 1 (Triton's keep_dims)."""
    return _keep_dims(_reduce(_ffi.METILE_OP_REDUCE_SUM, x, axis, "sum"), x, axis, keep_dims)


def reduce_max(x: Value, axis: int | None = None, keep_dims: bool = False) -> Value:
    """Maximum of a whole tile (a scalar), or along `axis` of a 2-D tile; `keep_dims` as in
    sum."""
    return _keep_dims(_reduce(_ffi.METILE_OP_REDUCE_MAX, x, axis, "max"), x, axis, keep_dims)


def reduce_min(x: Value, axis: int | None = None, keep_dims: bool = False) -> Value:
    """Minimum of a whole tile (a scalar), or along `axis` of a 2-D tile; `keep_dims` as in
    sum."""
    return _keep_dims(_reduce(_ffi.METILE_OP_REDUCE_MIN, x, axis, "min"), x, axis, keep_dims)


# -------------------------------------------------------------------------------- SIMT view
def thread_id() -> Value:
    """Thread index within the program instance (a T-element i32 tile)."""
    return current().emit(_ffi.metile_builder_simt, _ffi.METILE_OP_THREAD_ID)


def simd_lane_id() -> Value:
    """Lane index within the simdgroup, 0-31 (a T-element i32 tile)."""
    return current().emit(_ffi.metile_builder_simt, _ffi.METILE_OP_SIMD_LANE_ID)


def barrier() -> None:
    """Threadgroup barrier with a threadgroup-memory fence."""
    t = current()
    t.locate()
    out = _ffi.metile_value()
    st = _ffi.metile_builder_simt(t.builder, _ffi.METILE_OP_BARRIER, ctypes.byref(out))
    if st:
        t._check(st)


def simd_shuffle_xor(value: Value, mask: Operand) -> Value:
    """Lane i receives lane (i ^ mask)'s value, within each 32-lane simdgroup."""
    t = current()
    return t.emit(_ffi.metile_builder_simd, _ffi.METILE_OP_SIMD_SHUFFLE_XOR, _val(value).id,
                  t.literal(_plain(mask)).id)


def simd_broadcast(value: Value, lane: Operand) -> Value:
    """Every lane receives lane `lane`'s value of its simdgroup."""
    t = current()
    return t.emit(_ffi.metile_builder_simd, _ffi.METILE_OP_SIMD_BROADCAST, _val(value).id,
                  t.literal(_plain(lane)).id)


def shared(size: int, dtype: DTypeLike = "f32") -> Value:
    """Threadgroup memory of `size` elements; returns a threadgroup pointer."""
    t = current()
    n = _plain(size)
    if isinstance(n, Value) or not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TracingError(f"{user_location()}: shared() size must be a compile-time constant "
                           f"int, got {_describe(n)}")
    return t.emit(_ffi.metile_builder_shared, int(n),
                  _dtypes.to_enum(_dtypes.normalize(dtype, "shared")))


class simdgroup_role:
    """`with metile.simdgroup_role(role, num_roles=2):` runs the block's side effects only on
    simdgroup range `role` of `num_roles` (even split). With num_sgs > 0 the roles take
    consecutive ranges of num_sgs simdgroups in textual order (role 0 starts at simdgroup 0).
    Values defined inside do not escape the block."""

    def __init__(self, role: int, num_roles: int = 2, num_sgs: int = 0) -> None:
        self.role = _static_int(role, "simdgroup_role role")
        self.num_roles = _static_int(num_roles, "simdgroup_role num_roles")
        self.num_sgs = _static_int(num_sgs, "simdgroup_role num_sgs")

    def __enter__(self):
        t = current()
        first = 0
        if self.num_sgs > 0:
            if self.role == 0:
                t.role_next_sg = 0
            first = t.role_next_sg
            t.role_next_sg += self.num_sgs
        t.call(_ffi.metile_builder_role_begin, self.role, self.num_roles, first, self.num_sgs)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            current().call(_ffi.metile_builder_role_end)
        return False


def tile_swizzle(pid_m: Operand, pid_n: Operand, pattern: str = "morton",
                 block_size: int = 2) -> tuple[Value, Value]:
    """Remaps 2-D program ids for locality; returns the new (pid_m, pid_n). Patterns: "morton"
    and "hilbert" (space-filling walks of block_size x block_size squares), "diagonal",
    "grouped" (groups of block_size rows), "grouped2"/"grouped4"/"grouped8", "linear" (the
    identity) and "auto" (morton). Each maps every grid shape onto itself."""
    t = current()
    pattern = _plain(pattern)
    if not isinstance(pattern, str):
        raise TracingError(f"{user_location()}: tile_swizzle pattern must be a string")
    m, n = _val(pid_m), _val(pid_n)
    t.locate()
    om, on = _ffi.metile_value(), _ffi.metile_value()
    st = _ffi.metile_builder_tile_swizzle(t.builder, m.id, n.id, pattern.encode(),
                                          _static_int(block_size, "tile_swizzle block_size"),
                                          ctypes.byref(om), ctypes.byref(on))
    t._check(st)
    return t.value(om.value), t.value(on.value)


# --------------------------------------------------------------------------------- loops
def _bound(x) -> Value:
    x = _plain(x)
    t = current()
    if isinstance(x, Value):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        x = int(x)
        return t.const(x, "i32" if _dtypes.int_fits("i32", x) else "i64")
    raise TracingError(f"{user_location()}: tile_range bounds must be integers, got "
                       f"{type(x).__name__}")


class tile_range:
    """`for k in metile.tile_range(start, end, step=1):` a counted device loop (the body is
    traced once). Variables the body updates (`acc = dot(a, b, acc)`, `m = maximum(m, x)`)
    are carried through the loop automatically. In a SIMT kernel the bounds may be per-thread
    tiles (`tile_range(thread_id() // 32, N, num_simdgroups)`): each lane runs its own trip
    count and is inactive once past its end; the loop runs while any lane is active."""

    def __init__(self, start: Operand, end: Operand | None = None, step: Operand = 1,
                 num_stages: int | None = None) -> None:
        # num_stages: the original's software-pipelining hint; accepted, and left to the
        # compiler (which pipelines K loops on GPUs by itself).
        if end is None:
            start, end = 0, start
        self.start, self.end, self.step = start, end, step

    def open(self, inits: list[Value]) -> tuple[Value, list[Value]]:
        t = current()
        s, e, st = _bound(self.start), _bound(self.end), _bound(self.step)
        n = len(inits)
        arr = (_ffi.metile_value * builtins.max(n, 1))(*[v.id for v in inits])
        iv = _ffi.metile_value()
        carried = (_ffi.metile_value * builtins.max(n, 1))()
        t.locate()
        t._check(_ffi.metile_builder_for_begin(t.builder, s.id, e.id, st.id, arr, n,
                                               ctypes.byref(iv), carried))
        return t.value(iv.value), [t.value(carried[i]) for i in range(n)]

    @staticmethod
    def close(yields: list[Value]) -> list[Value]:
        t = current()
        n = len(yields)
        arr = (_ffi.metile_value * builtins.max(n, 1))(*[v.id for v in yields])
        out = (_ffi.metile_value * builtins.max(n, 1))()
        t.locate()
        t._check(_ffi.metile_builder_for_end(t.builder, arr, n, out))
        return [t.value(out[i]) for i in range(n)]

    def __iter__(self):
        # Reached only when the loop was not rewritten (no carried variables were found, or
        # the source is unavailable): a loop without carried values.
        current().loop_index += 1
        iv, _ = self.open([])
        yield iv
        self.close([])


# ------------------------------------------------------------------ Value's Python operators
# Installed here, next to the ops they call, so the tracer (which defines Value) never imports
# the language: the dependency runs _lang -> _trace only.
def _is_operand(o) -> bool:
    return isinstance(o, (Value, int, float, np.generic, constexpr))


def _operator(name, reflected=False):
    if reflected:
        return lambda self, o: binary(name, o, self)
    return lambda self, o: binary(name, self, o)


def _eq(self, o):
    return binary("eq", self, o) if _is_operand(o) else NotImplemented


def _ne(self, o):
    return binary("ne", self, o) if _is_operand(o) else NotImplemented


def _getitem(self: Value, key: object) -> Value:
    """x[:, None] / x[None, :] insert a size-1 axis (for broadcasting); x[:] is x."""
    if not isinstance(key, tuple):
        key = (key,)
    new_shape, dims = [], list(self.shape)
    for k in key:
        if k is None:
            new_shape.append(1)
        elif isinstance(k, slice) and k == slice(None):
            if not dims:
                raise TracingError(f"{user_location()}: too many `:` for shape {self.shape}")
            new_shape.append(dims.pop(0))
        elif k is Ellipsis:
            new_shape.extend(dims)
            dims = []
        else:
            raise TracingError(
                f"{user_location()}: only x[:, None] / x[None, :] style indexing (adding "
                f"size-1 axes) is supported on traced values, got [{k!r}]")
    new_shape.extend(dims)
    if tuple(new_shape) == self.shape:
        return self
    return reshape(self, tuple(new_shape))


for _py, _name in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                   ("floordiv", "floordiv"), ("mod", "mod"), ("pow", "pow"), ("and", "and"),
                   ("or", "or"), ("xor", "xor"), ("lshift", "shl"), ("rshift", "shr")):
    setattr(Value, f"__{_py}__", _operator(_name))
    setattr(Value, f"__r{_py}__", _operator(_name, reflected=True))
for _py in ("lt", "le", "gt", "ge"):
    setattr(Value, f"__{_py}__", _operator(_py))
Value.__eq__ = _eq
Value.__ne__ = _ne
Value.__neg__ = lambda self: unary(_ffi.METILE_OP_NEG, self)
Value.__pos__ = lambda self: self
Value.__invert__ = lambda self: unary(_ffi.METILE_OP_NOT, self)
Value.__abs__ = lambda self: absolute(self)
Value.__getitem__ = _getitem
def _to(self: Value, dtype: DTypeLike, fp_downcast_rounding: str | None = None,
        bitcast: bool = False) -> Value:
    """Same as cast(self, dtype, fp_downcast_rounding, bitcast)."""
    return cast(self, dtype, fp_downcast_rounding, bitcast)


Value.to = Value.astype = _to


class persistent_range(tile_range):
    """`for pid in metile.persistent_range(total):` the grid-stride loop of a persistent
    kernel: this program runs ids program_id(axis), + num_programs(axis), ... below `total`."""

    def __init__(self, total: Operand, axis: int = 0) -> None:
        super().__init__(program_id(axis), total, num_programs(axis))


# numpy meets a traced value: a numpy scalar operand (np.float32(2) * x) computes through the
# matching operator; any other ufunc (np.exp(x)) cannot run at trace time and the error
# names the metile op to call instead.
_UFUNC_OPERATORS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "truediv",
    "divide": "truediv", "floor_divide": "floordiv", "remainder": "mod", "power": "pow",
    "bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor", "left_shift": "shl",
    "right_shift": "shr", "less": "lt", "less_equal": "le", "greater": "gt",
    "greater_equal": "ge", "equal": "eq", "not_equal": "ne",
}
_UFUNC_NAMES = {"absolute": "abs", "fabs": "abs", "fmax": "maximum", "fmin": "minimum",
                "negative": "-x", "invert": "~x", "logical_not": "~x", "sign": "where(x > 0, ...)",
                "clip": "clamp", "sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "log": "log",
                "log2": "log2", "sin": "sin", "cos": "cos", "tanh": "tanh", "floor": "floor",
                "ceil": "ceil", "maximum": "maximum", "minimum": "minimum"}


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    name = getattr(ufunc, "__name__", str(ufunc))
    inputs = tuple(i[()] if isinstance(i, np.ndarray) and i.ndim == 0 else i for i in inputs)
    if method == "__call__" and not kwargs and len(inputs) == 2 and name in _UFUNC_OPERATORS:
        return binary(_UFUNC_OPERATORS[name], *inputs)
    metile_name = _UFUNC_NAMES.get(name)
    hint = (f"use metile.{metile_name}" if metile_name and metile_name[0].isalpha() and
            "(" not in metile_name else f"write {metile_name}" if metile_name else
            "the metile language has no op of that name (docs/semantics.md lists them)")
    raise TracingError(f"{user_location()}: numpy.{name} cannot run on the traced value "
                       f"{self.type_str()}: it runs at trace time, on host arrays; {hint}")


def _array_function(self, func, types, args, kwargs):
    name = getattr(func, "__name__", str(func))
    import metile
    hint = (f"use metile.{name}" if name in metile.__all__ else
            "the metile language lists its ops in docs/semantics.md")
    raise TracingError(f"{user_location()}: numpy.{name} cannot run on a traced value (it runs "
                       f"at trace time, on host arrays); {hint}")


Value.__array_ufunc__ = _array_ufunc
Value.__array_function__ = _array_function
