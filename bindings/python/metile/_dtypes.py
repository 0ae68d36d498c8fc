"""Element types: metile names ("f32", ...), C enum values, and the exact numpy mapping.

numpy dtypes are mapped one to one; anything without a metile counterpart (float64, complex,
object, ...) is rejected, never silently turned into f32. bf16 has no numpy dtype: it is stored
as uint16 and named explicitly (Buffer(data=u16_array, dtype="bf16")); the FP8 types likewise
as uint8 (Buffer(data=u8_array, dtype="f8e4m3")).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import _ffi
from ._errors import InvalidArgumentError

# name -> (C enum, numpy storage dtype, size)
_TABLE = {
    "f32": (_ffi.METILE_DTYPE_F32, np.dtype(np.float32)),
    "f16": (_ffi.METILE_DTYPE_F16, np.dtype(np.float16)),
    "bf16": (_ffi.METILE_DTYPE_BF16, np.dtype(np.uint16)),
    "i32": (_ffi.METILE_DTYPE_I32, np.dtype(np.int32)),
    "u32": (_ffi.METILE_DTYPE_U32, np.dtype(np.uint32)),
    "i64": (_ffi.METILE_DTYPE_I64, np.dtype(np.int64)),
    "bool": (_ffi.METILE_DTYPE_BOOL, np.dtype(np.bool_)),
    "i8": (_ffi.METILE_DTYPE_I8, np.dtype(np.int8)),
    "u8": (_ffi.METILE_DTYPE_U8, np.dtype(np.uint8)),
    "f8e4m3": (_ffi.METILE_DTYPE_F8E4M3, np.dtype(np.uint8)),
    "f8e5m2": (_ffi.METILE_DTYPE_F8E5M2, np.dtype(np.uint8)),
}
NAMES = tuple(_TABLE)
_BY_ENUM = {code: name for name, (code, _) in _TABLE.items()}
_FROM_NUMPY = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
               np.dtype(np.int32): "i32", np.dtype(np.uint32): "u32", np.dtype(np.int64): "i64",
               np.dtype(np.bool_): "bool", np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8"}
_ALIASES = {"float32": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16",
            "int32": "i32", "uint32": "u32", "int64": "i64", "int8": "i8", "uint8": "u8",
            "bool_": "bool", "float": "f32", "int": "i32",
            # Triton's names (DType.name)
            "fp32": "f32", "fp16": "f16", "int1": "bool", "fp8e4nv": "f8e4m3", "fp8e5": "f8e5m2",
            # FP8: torch's and Triton's spellings too
            "float8e4m3": "f8e4m3", "float8_e4m3fn": "f8e4m3", "float8e4nv": "f8e4m3",
            "float8e5m2": "f8e5m2", "float8_e5m2": "f8e5m2", "float8e5": "f8e5m2"}

FLOATS = frozenset({"f32", "f16", "bf16", "f8e4m3", "f8e5m2"})
# Storage-only floats: arithmetic on them computes in f32.
FLOAT8 = frozenset({"f8e4m3", "f8e5m2"})
INTS = frozenset({"i32", "u32", "i64", "i8", "u8"})
SIGNED = frozenset({"i32", "i64", "i8"})
_RANGES = {"i32": (-2**31, 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-2**63, 2**63 - 1),
           "i8": (-128, 127), "u8": (0, 255), "bool": (0, 1)}


# Triton's dtype names (str(tl.float32) == "fp32"), for DType.name.
_TRITON_NAMES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "i32": "int32", "u32": "uint32",
                 "i64": "int64", "bool": "int1", "i8": "int8", "u8": "uint8",
                 "f8e4m3": "fp8e4nv", "f8e5m2": "fp8e5"}
_BITS = {"bool": 1, "i8": 8, "u8": 8, "f8e4m3": 8, "f8e5m2": 8, "f16": 16, "bf16": 16,
         "f32": 32, "i32": 32, "u32": 32, "i64": 64}


class DType(str):
    """A dtype as Triton's code inspects it (`x.dtype.is_floating()`, `x.dtype.element_ty`,
    `x.dtype == metile.float16`) that is also its metile name: DType("f16") == "f16", so every
    place that takes a dtype name takes it. A pointer value's dtype is its element's name with
    `is_ptr()` true and `element_ty` the element's DType (it still equals the element's name:
    metile code compares pointee types that way)."""

    __slots__ = ("_ptr",)

    def __new__(cls, name: str, pointer: bool = False) -> "DType":
        self = super().__new__(cls, name)
        self._ptr = pointer
        return self

    @property
    def name(self) -> str:
        """Triton's name: "fp32", "int32", "int1", ..."""
        return _TRITON_NAMES[str(self)]

    @property
    def element_ty(self) -> "DType":
        """The pointee dtype of a pointer's dtype."""
        if not self._ptr:
            raise AttributeError(f"element_ty: {str(self)} is not a pointer dtype")
        return of(str(self))

    @property
    def primitive_bitwidth(self) -> int:
        """Bits of one element (1 for bool, as Triton's int1); a pointer's are 64."""
        return 64 if self._ptr else _BITS[str(self)]

    def is_ptr(self) -> bool:
        return self._ptr

    def _is(self, names) -> bool:
        return not self._ptr and str(self) in names

    def is_floating(self) -> bool:
        return self._is(FLOATS)

    def is_int(self) -> bool:
        """Integers, bool included (Triton's int1 is an integer type)."""
        return self._is(INTS | {"bool"})

    def is_int_signed(self) -> bool:
        return self._is(SIGNED)

    def is_int_unsigned(self) -> bool:
        return self._is({"u32", "u8", "bool"})

    def is_fp8(self) -> bool:
        return self._is(FLOAT8)

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __reduce__(self):
        return (DType, (str(self), self._ptr))


def _is_one(name: str) -> Callable[[DType], bool]:
    def check(self: DType) -> bool:
        return self._is({name})

    check.__name__ = check.__qualname__ = f"is_{_TRITON_NAMES[name]}"
    check.__doc__ = f"Whether this is {name} (Triton's {_TRITON_NAMES[name]})."
    return check


def _never(self: DType) -> bool:
    """Always False: metile has no such dtype."""
    return False


for _n, _tn in _TRITON_NAMES.items():  # is_fp32(), is_int32(), ..., is_int1()
    setattr(DType, f"is_{_tn}", _is_one(_n))
DType.is_bool = DType.is_int1
DType.is_fp64 = DType.is_void = _never
_OBJECTS = {(n, p): DType(n, p) for n in _TRITON_NAMES for p in (False, True)}


def of(name: str, pointer: bool = False) -> DType:
    """The DType object of a metile dtype name (of its pointer type with pointer=True)."""
    return _OBJECTS[(str(name), pointer)]


dtype = DType  # Triton's class name (tl.dtype)
float32, float16, bfloat16 = of("f32"), of("f16"), of("bf16")
int32, uint32, int64, int8, uint8 = of("i32"), of("u32"), of("i64"), of("i8"), of("u8")
bool_ = int1 = of("bool")
float8e4m3 = float8e4nv = of("f8e4m3")  # float8e4nv and float8e5 are Triton's names
float8e5m2 = float8e5 = of("f8e5m2")


def pointer_type(element_ty: "str | np.dtype | type", address_space: int = 1) -> DType:
    """Triton's pointer_type(element_ty): the dtype of a pointer to `element_ty`; it may be
    compared with a pointer value's dtype. `address_space` is accepted."""
    return of(normalize(element_ty, "pointer_type"), True)


def to_enum(name: str) -> int:
    return _TABLE[name][0]


def from_enum(code: int) -> DType:
    return of(_BY_ENUM[code])


def storage(name: str) -> np.dtype:
    """The numpy dtype that holds `name`'s bits (uint16 for bf16)."""
    return _TABLE[name][1]


def itemsize(name: str) -> int:
    return _TABLE[name][1].itemsize


def int_fits(name: str, value: int) -> bool:
    lo, hi = _RANGES[name]
    return lo <= value <= hi


def normalize(dtype, what: str = "dtype") -> str:
    """Accepts "f32", "float32", np.float32, np.dtype(...), or a traced value's dtype name."""
    if isinstance(dtype, str):
        dtype = str(dtype)  # a pointer's DType names its element type
        name = _ALIASES.get(dtype, dtype)
        if name in _TABLE:
            return name
        raise InvalidArgumentError(
            f"{what}: unknown dtype {dtype!r} (use one of {', '.join(NAMES)})")
    try:
        npd = np.dtype(dtype)
    except TypeError:
        raise InvalidArgumentError(f"{what}: {dtype!r} is not a dtype") from None
    return from_numpy(npd, what)


def from_numpy(npd: np.dtype, what: str) -> str:
    name = _FROM_NUMPY.get(np.dtype(npd))
    if name is None:
        raise InvalidArgumentError(
            f"{what}: numpy dtype {np.dtype(npd)} has no metile counterpart (supported: "
            "float32, float16, int32, uint32, int64, int8, uint8, bool; bf16 as uint16 and "
            "f8e4m3/f8e5m2 as uint8 storage via metile.Buffer(data=..., dtype='bf16')); convert "
            "it explicitly, e.g. "
            ".astype(np.float32)")
    return name
