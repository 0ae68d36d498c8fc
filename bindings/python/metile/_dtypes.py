"""Element types: metile names ("f32", ...), C enum values, and the exact numpy mapping.

numpy dtypes are mapped one to one; anything without a metile counterpart (float64, complex,
object, ...) is rejected, never silently turned into f32. bf16 has no numpy dtype: it is stored
as uint16 and named explicitly (Buffer(data=u16_array, dtype="bf16")); the FP8 types likewise
as uint8 (Buffer(data=u8_array, dtype="f8e4m3")).
"""

from __future__ import annotations

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


def to_enum(name: str) -> int:
    return _TABLE[name][0]


def from_enum(code: int) -> str:
    return _BY_ENUM[code]


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
