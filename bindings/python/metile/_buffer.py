"""metile.Buffer: memory the host and the device both address (DESIGN.md §7).

Buffer(data=arr) wraps arr's memory in place when the device can address it (cpu and interp
always; metal for page-aligned memory): kernel writes then land in `arr` itself and
`buf.shares_memory` is True. Otherwise the device copies, and results are read through
`buf.numpy()`. `buf.numpy()` synchronizes the device and returns a view, never a copy.
"""

from __future__ import annotations

import ctypes
import math
import weakref

import numpy as np

from . import _dlpack, _dtypes, _ffi
from ._device import Device, get_device, open_device
from ._errors import InvalidArgumentError, check, error_for

_BufPtr = ctypes.POINTER(_ffi.metile_buffer)


def _shape_of(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise InvalidArgumentError(
            f"shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise InvalidArgumentError(f"shape {shape} has a negative dimension")
    return shape


def _release(handle, after, keep):
    # `keep` (the wrapped array) stays referenced until the library lets go of its memory.
    _ffi.metile_buffer_release(handle)
    if after is not None:
        after()


class _Memory:
    """Owns a buffer's handle: the last of the Buffer and its numpy() views to go releases it.
    Views keep this object alive, not the Buffer, so a Buffer caching its view is no cycle
    (numpy arrays are not cycle-collected: a cycle through one would never be freed)."""

    __slots__ = ("__array_interface__", "__weakref__")


def _device_of(device) -> Device:
    if device is None:
        return get_device()
    return device if isinstance(device, Device) else open_device(device)


class Buffer:
    """A typed, shaped block of unified memory usable as a kernel pointer argument."""

    __slots__ = ("_handle", "_arg", "device", "shape", "dtype", "nbytes", "_ptr", "_source",
                 "shares_memory", "_memory", "_view", "__weakref__")

    def __init__(self, data=None, *, shape=None, dtype=None, device=None):
        if shape is not None:
            # The original's form, Buffer(shape=..., dtype=...): a new zero-filled buffer.
            if data is not None:
                raise InvalidArgumentError("metile.Buffer takes data= or shape=, not both")
            self._init_zeros(shape, "f32" if dtype is None else dtype, device,
                             "Buffer(shape=...)")
            return
        if data is None:
            raise InvalidArgumentError(
                "metile.Buffer needs data=<numpy array> or shape=(...) (with dtype=, default "
                "float32)")
        arr = data if isinstance(data, np.ndarray) else np.asarray(data)
        name = _array_dtype(arr, dtype, "Buffer(data=...)")
        if not arr.flags.c_contiguous:
            raise InvalidArgumentError(
                "Buffer(data=...): the array is not C-contiguous (strides "
                f"{arr.strides} for shape {arr.shape}); pass np.ascontiguousarray(arr)")
        dev = _device_of(device)
        self._init_common(dev, name, tuple(arr.shape))
        if arr.nbytes == 0 or not arr.flags.writeable:
            # Nothing to share, or memory a kernel must not write into: use a private copy.
            self._alloc(max(arr.nbytes, 1), after=None)
            if arr.nbytes:
                ctypes.memmove(self._ptr, arr.ctypes.data, arr.nbytes)
            self._source = None
            self.shares_memory = False
            return
        h = _BufPtr()
        check(_ffi.metile_buffer_wrap(ctypes.byref(h), dev._handle, arr.ctypes.data, arr.nbytes),
              "Buffer(data=...)")
        self._adopt(h, after=None, keep=arr)
        self.shares_memory = bool(_ffi.metile_buffer_shares_memory(h))
        self._source = arr

    # -------------------------------------------------------------------------- constructors
    @classmethod
    def zeros(cls, shape, dtype="f32", device=None) -> "Buffer":
        """A zero-filled buffer of `shape` and `dtype` (default float32)."""
        self = cls.__new__(cls)
        self._init_zeros(shape, dtype, device, "Buffer.zeros")
        return self

    def _init_zeros(self, shape, dtype, device, what):
        shape = _shape_of(shape)
        name = _dtypes.normalize(dtype, what)
        self._init_common(_device_of(device), name, shape)
        self._alloc(max(self.nbytes, 1), after=None)
        self._source = None
        self.shares_memory = False

    empty = zeros

    @classmethod
    def from_numpy(cls, arr, dtype=None, device=None) -> "Buffer":
        """Same as Buffer(data=arr): shares arr's memory when the device can address it."""
        return cls(data=arr, dtype=dtype, device=device)

    @classmethod
    def _from_handle(cls, handle, dev, dtype, shape, after=None) -> "Buffer":
        self = cls.__new__(cls)
        self._init_common(dev, dtype, shape)
        self._adopt(handle, after)
        self._source = None
        self.shares_memory = bool(_ffi.metile_buffer_shares_memory(handle))
        return self

    def _init_common(self, dev, dtype, shape):
        self.device = dev
        self.dtype = dtype
        self.shape = shape
        self.nbytes = math.prod(shape) * _dtypes.itemsize(dtype)
        self._view = None

    def _alloc(self, nbytes, after):
        h = _BufPtr()
        check(_ffi.metile_buffer_alloc(ctypes.byref(h), self.device._handle, nbytes),
              "Buffer allocation")
        self._adopt(h, after)

    def _adopt(self, h, after, keep=None):
        self._handle = h
        self._memory = _Memory()
        weakref.finalize(self._memory, _release, h, after, keep)
        ptr = ctypes.c_void_p()
        check(_ffi.metile_buffer_contents(h, ctypes.byref(ptr)))
        self._ptr = ptr.value
        arg = _ffi.metile_arg()
        arg.kind = _ffi.METILE_ARG_BUFFER
        arg.buffer = h
        self._arg = arg

    # ----------------------------------------------------------------------------- access
    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d buffer")
        return self.shape[0]

    @property
    def __array_interface__(self):
        # Does not synchronize (numpy reads it implicitly); numpy() does.
        return {"version": 3, "shape": self.shape, "typestr": _dtypes.storage(self.dtype).str,
                "data": (self._ptr, False), "strides": None}

    def numpy(self) -> np.ndarray:
        """A numpy view of the contents (uint16 storage for bf16). Synchronizes the device
        first when launches are asynchronous, so results of earlier launches are visible."""
        if self.device.asynchronous:
            self.device.synchronize()
        if self._view is None:
            self._memory.__array_interface__ = self.__array_interface__
            self._view = np.asarray(self._memory)
        return self._view

    def __repr__(self):
        share = ", shares memory" if self.shares_memory else ""
        return (f"metile.Buffer(shape={self.shape}, dtype={self.dtype}, "
                f"device={self.device.name}{share})")

    # ------------------------------------------------------------------------------ DLPack
    def __dlpack_device__(self):
        if self.device.name == "cuda":
            return (_dlpack.KDL_CUDA_MANAGED, 0)
        return (_dlpack.KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("metile.Buffer.__dlpack__ shares memory; copy=True is not supported")
        if self.device.asynchronous:
            self.device.synchronize()
        dev_type = self.__dlpack_device__()[0]
        if _ffi.has("metile_buffer_to_dlpack"):
            shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
            out = ctypes.c_void_p()
            check(_ffi.metile_buffer_to_dlpack(self._handle, _dtypes.to_enum(self.dtype),
                                               len(self.shape), shape, ctypes.byref(out)),
                  "__dlpack__")
            return _dlpack.capsule_from_managed(out.value)
        address = _dlpack.build_managed(self, self._ptr, self.dtype, self.shape, dev_type)
        return _dlpack.capsule_from_managed(address)


def _array_dtype(arr: np.ndarray, dtype, what: str) -> str:
    if dtype is None:
        return _dtypes.from_numpy(arr.dtype, what)
    name = _dtypes.normalize(dtype, what)
    if _dtypes.storage(name) != arr.dtype:
        raise InvalidArgumentError(
            f"{what}: dtype={name} needs {_dtypes.storage(name)} storage, got a {arr.dtype} array")
    return name


def from_dlpack(obj, device=None) -> Buffer:
    """Imports a DLPack tensor (anything with __dlpack__, e.g. a numpy array) without a copy when
    the device can address its memory. The tensor must be compact row-major."""
    if not hasattr(obj, "__dlpack__"):
        raise InvalidArgumentError(f"from_dlpack: {type(obj).__name__} has no __dlpack__ method")
    dev = _device_of(device)
    native = _ffi.has("metile_buffer_from_dlpack")  # it also accepts CUDA device memory
    if hasattr(obj, "__dlpack_device__") and not native:
        dev_type, _ = obj.__dlpack_device__()
        if int(dev_type) not in (_dlpack.KDL_CPU, _dlpack.KDL_CUDA_HOST, _dlpack.KDL_CUDA_MANAGED):
            raise InvalidArgumentError(
                f"from_dlpack: tensors on DLPack device type {int(dev_type)} are not "
                "host-addressable; only CPU, CUDA-host and CUDA-managed memory can be imported")
    capsule = obj.__dlpack__()
    address = _dlpack.take_capsule(capsule)
    t = _dlpack.managed(address).dl_tensor
    dtype = _dlpack.dtype_from_dl(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if dtype is None:
        raise InvalidArgumentError(
            f"from_dlpack: DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits, "
            f"{t.dtype.lanes} lanes) has no metile counterpart")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        expect = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expect:
                raise InvalidArgumentError(
                    f"from_dlpack: the tensor is not compact row-major (shape {shape}, strides "
                    f"{tuple(t.strides[i] for i in range(t.ndim))}); make it contiguous first")
            expect *= shape[i]
    nbytes = math.prod(shape) * _dtypes.itemsize(dtype)
    h = _BufPtr()
    if native and nbytes:
        st = _ffi.metile_buffer_from_dlpack(ctypes.byref(h), dev._handle, address)
        if st:
            raise error_for(st, "from_dlpack")
        _dlpack.mark_consumed(capsule)  # the library runs the deleter when the buffer goes
        return Buffer._from_handle(h, dev, dtype, shape)
    if nbytes == 0:
        _dlpack.mark_consumed(capsule)
        _dlpack.delete_managed(address)
        return Buffer.zeros(shape, dtype, dev)
    data = (t.data or 0) + t.byte_offset
    check(_ffi.metile_buffer_wrap(ctypes.byref(h), dev._handle, data, nbytes), "from_dlpack")
    _dlpack.mark_consumed(capsule)
    return Buffer._from_handle(h, dev, dtype, shape,
                               after=lambda: _dlpack.delete_managed(address))
