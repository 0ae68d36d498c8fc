"""DLPack structures and PyCapsule plumbing, through ctypes.

Export asks the library for a tensor (metile_buffer_to_dlpack[_versioned]) and wraps it in a
capsule whose destructor is the library's own (metile_dlpack_capsule_destructor): a destructor
written with ctypes cannot run while a consumer's exception is pending. Import reads a
producer's tensor and hands it to the library, which runs its deleter when the buffer goes.
Capsule protocol: a capsule named "dltensor" (legacy v0.8 ABI) or "dltensor_versioned" (1.x)
owns the tensor; the consumer renames it "used_..." and becomes responsible for the deleter.
"""

from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint32, c_uint64, c_void_p)

from . import _ffi
from ._errors import InvalidArgumentError

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_METAL = 8
KDL_CUDA_MANAGED = 13

KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 0, 1, 2, 4, 6
KDL_FLOAT8_E4M3FN, KDL_FLOAT8_E5M2 = 10, 12  # DLPack 1.1 (torch.float8_e4m3fn, float8_e5m2)

FLAG_READ_ONLY = 1
VERSION = (1, 0)  # the versioned ABI metile writes and reads

# metile dtype name <-> (code, bits)
_DL = {"f32": (KDL_FLOAT, 32), "f16": (KDL_FLOAT, 16), "bf16": (KDL_BFLOAT, 16),
       "i32": (KDL_INT, 32), "u32": (KDL_UINT, 32), "i64": (KDL_INT, 64), "bool": (KDL_BOOL, 8),
       "i8": (KDL_INT, 8), "u8": (KDL_UINT, 8), "f8e4m3": (KDL_FLOAT8_E4M3FN, 8),
       "f8e5m2": (KDL_FLOAT8_E5M2, 8)}
_FROM_DL = {v: k for k, v in _DL.items()}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", CFUNCTYPE(None, POINTER(DLManagedTensor)))]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", c_void_p),
    ("deleter", CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))), ("flags", c_uint64),
    ("dl_tensor", DLTensor)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_SetName.restype = c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]

NAME, VERSIONED = b"dltensor", b"dltensor_versioned"
# The capsule keeps the name's pointer: these bytes objects live as long as the module.
_USED, _USED_VERSIONED = b"used_dltensor", b"used_dltensor_versioned"
_DESTRUCTOR = (ctypes.cast(_ffi.lib.metile_dlpack_capsule_destructor, c_void_p).value
               if _ffi.has("metile_dlpack_capsule_destructor") else None)


def dtype_from_dl(code: int, bits: int, lanes: int) -> str | None:
    if lanes != 1:
        return None
    return _FROM_DL.get((code, bits))


def elements_spanned(shape, strides) -> int | None:
    """The elements from a view's first to its last, inclusive; None where a dimension longer
    than 1 has a negative stride (the first element is then not the lowest addressed)."""
    last = 0
    for d, s in zip(shape, strides):
        if d != 1:
            if s < 0:
                return None
            last += (d - 1) * s
    return last + 1


def strided_span(t: DLTensor, shape: tuple) -> int | None:
    """The elements a strided tensor spans (elements_spanned), or None when it is compact
    row-major (NULL strides, or strides that say so) or empty. A negative stride is refused here,
    before any copy of a read-only tensor could read the span from the wrong end."""
    if not t.strides or 0 in shape:
        return None
    strides = tuple(t.strides[i] for i in range(t.ndim))
    expect = 1
    compact = True
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != expect:
            compact = False
        expect *= d
    if compact:
        return None
    span = elements_spanned(shape, strides)
    if span is None:
        raise InvalidArgumentError(
            f"from_dlpack: dl_tensor.strides {strides} (shape {shape}) has a negative stride; only "
            "views with non-negative strides are imported in place")
    return span


def capsule(address: int, versioned: bool):
    """A capsule owning the library-made tensor at `address`."""
    if _DESTRUCTOR is None:
        delete_managed(address, versioned)
        raise BufferError(f"metile: the library at {_ffi.LIBRARY_PATH} has no "
                          "metile_dlpack_capsule_destructor (it is older than this binding)")
    return _api.PyCapsule_New(address, VERSIONED if versioned else NAME, _DESTRUCTOR)


def open_capsule(obj) -> tuple[int, bool]:
    """(tensor address, versioned?) of an unconsumed capsule (does not consume it)."""
    for name, versioned in ((VERSIONED, True), (NAME, False)):
        if _api.PyCapsule_IsValid(obj, name):
            return _api.PyCapsule_GetPointer(obj, name), versioned
    raise ValueError("not a DLPack capsule (expected an unconsumed 'dltensor' or "
                     "'dltensor_versioned' capsule)")


def mark_consumed(obj, versioned: bool) -> None:
    _api.PyCapsule_SetName(obj, _USED_VERSIONED if versioned else _USED)


def managed(address: int, versioned: bool):
    return (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(address)


def delete_managed(address: int, versioned: bool) -> None:
    m = managed(address, versioned)
    if m.deleter:
        m.deleter(ctypes.cast(address, POINTER(type(m))))
