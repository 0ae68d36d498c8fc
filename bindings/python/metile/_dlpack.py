"""DLPack (v0.8 ABI) structures and PyCapsule plumbing, through ctypes.

Export builds a DLManagedTensor over a metile buffer (or asks the library for one when it has
metile_buffer_to_dlpack); import reads a producer's DLManagedTensor and wraps its memory.
Capsule protocol: a capsule named "dltensor" owns the tensor; the consumer renames it to
"used_dltensor" and becomes responsible for calling the tensor's deleter.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint64, c_void_p)

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_METAL = 8
KDL_CUDA_MANAGED = 13

KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 0, 1, 2, 4, 6

# metile dtype name <-> (code, bits)
_DL = {"f32": (KDL_FLOAT, 32), "f16": (KDL_FLOAT, 16), "bf16": (KDL_BFLOAT, 16),
       "i32": (KDL_INT, 32), "u32": (KDL_UINT, 32), "i64": (KDL_INT, 64), "bool": (KDL_BOOL, 8),
       "i8": (KDL_INT, 8), "u8": (KDL_UINT, 8)}
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


_Deleter = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", _Deleter)]

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_SetName.restype = c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
# The destructor runs while the capsule is being freed: it must not touch it as a Python
# object (no incref), so it works on the raw pointer.
_raw_is_valid = ctypes.PYFUNCTYPE(c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))

_NAME = b"dltensor"
_USED = b"used_dltensor"


@ctypes.PYFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule):
    # Never consumed: the producer side must release the tensor itself.
    if _raw_is_valid(capsule, _NAME):
        p = _raw_get_pointer(capsule, _NAME)
        m = ctypes.cast(p, POINTER(DLManagedTensor))
        if m.contents.deleter:
            m.contents.deleter(m)


_DESTRUCTOR_PTR = ctypes.cast(_capsule_destructor, c_void_p).value

# Exports built in Python: manager_ctx -> what must stay alive until the deleter runs.
_live: dict[int, tuple] = {}
_live_lock = threading.Lock()
_ids = itertools.count(1)


@_Deleter
def _python_deleter(managed):
    with _live_lock:
        _live.pop(managed.contents.manager_ctx or 0, None)


def dtype_from_dl(code: int, bits: int, lanes: int) -> str | None:
    if lanes != 1:
        return None
    return _FROM_DL.get((code, bits))


def capsule_from_managed(address: int):
    return _api.PyCapsule_New(address, _NAME, _DESTRUCTOR_PTR)


def build_managed(owner, data: int, dtype: str, shape: tuple[int, ...], device_type: int) -> int:
    """A DLManagedTensor over `data` that keeps `owner` alive until its deleter runs."""
    ndim = len(shape)
    shape_arr = (c_int64 * max(ndim, 1))(*shape)
    m = DLManagedTensor()
    code, bits = _DL[dtype]
    m.dl_tensor.data = data
    m.dl_tensor.device = DLDevice(device_type, 0)
    m.dl_tensor.ndim = ndim
    m.dl_tensor.dtype = DLDataType(code, bits, 1)
    m.dl_tensor.shape = ctypes.cast(shape_arr, POINTER(c_int64))
    m.dl_tensor.strides = None  # compact row-major
    m.dl_tensor.byte_offset = 0
    key = next(_ids)
    m.manager_ctx = key
    m.deleter = _python_deleter
    with _live_lock:
        _live[key] = (owner, shape_arr, m)
    return ctypes.addressof(m)


def take_capsule(capsule) -> int:
    """The DLManagedTensor address of an unconsumed capsule (does not consume it)."""
    if not _api.PyCapsule_IsValid(capsule, _NAME):
        raise ValueError("not a DLPack capsule (expected an unconsumed 'dltensor' capsule)")
    return _api.PyCapsule_GetPointer(capsule, _NAME)


def mark_consumed(capsule) -> None:
    _api.PyCapsule_SetName(capsule, _USED)


def managed(address: int) -> DLManagedTensor:
    return DLManagedTensor.from_address(address)


def delete_managed(address: int) -> None:
    m = ctypes.cast(address, POINTER(DLManagedTensor))
    if m.contents.deleter:
        m.contents.deleter(m)
