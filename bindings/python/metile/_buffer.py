"""metile.Buffer: memory the host and the device both address (one allocation, no copies
between them: page-aligned host memory on cpu and interp, shared storage on metal, managed memory
on cuda).

Buffer(data=arr) wraps arr's memory in place when the device can address it (cpu and interp
always; metal for page-aligned memory): kernel writes then land in `arr` itself and
`buf.shares_memory` is True. Otherwise the device copies, and results are read through
`buf.numpy()`. `buf.numpy()` synchronizes the device and returns a view, never a copy.
"""

from __future__ import annotations

import ctypes
import math
import sys
import weakref
from typing import Any, Sequence, Union

import numpy as np

from . import _dlpack, _dtypes, _ffi
from ._device import Device, get_device, open_device
from ._errors import InvalidArgumentError, UnsupportedError, check, error_for

_BufPtr = ctypes.POINTER(_ffi.metile_buffer)

# What a dtype or device argument accepts.
DTypeLike = Union[str, np.dtype, type]
DeviceLike = Union[str, Device, None]
ShapeLike = Union[int, Sequence[int]]


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

    __slots__ = ("_handle", "_arg", "device", "shape", "metile_dtype", "nbytes", "_ptr", "_source",
                 "shares_memory", "_memory", "_view", "__weakref__")

    def __init__(self, data: Any = None, *, shape: ShapeLike | None = None,
                 dtype: DTypeLike | None = None, device: DeviceLike = None) -> None:
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
    def zeros(cls, shape: ShapeLike, dtype: DTypeLike = "f32",
              device: DeviceLike = None) -> "Buffer":
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
    def from_numpy(cls, arr: np.ndarray, dtype: DTypeLike | None = None,
                   device: DeviceLike = None) -> "Buffer":
        """Same as Buffer(data=arr): shares arr's memory when the device can address it."""
        return cls(data=arr, dtype=dtype, device=device)

    @classmethod
    def _over_view(cls, arr: np.ndarray, dtype: str, dev: Device, address: int,
                   nbytes: int) -> "Buffer":
        """A buffer over the `nbytes` bytes from `address` (the lowest) that the strided view
        `arr` spans, for a launch: the kernel indexes it with the view's strides. In place when
        the device can address it and `arr` is writable, else a private copy of the span."""
        self = cls.__new__(cls)
        self._init_common(dev, dtype, (nbytes // arr.itemsize,))
        self.nbytes = nbytes
        if not arr.flags.writeable:
            self._alloc(nbytes, after=None)
            ctypes.memmove(self._ptr, address, nbytes)
            self._source = None
            self.shares_memory = False
            return self
        h = _BufPtr()
        check(_ffi.metile_buffer_wrap(ctypes.byref(h), dev._handle, address, nbytes),
              "a strided array argument")
        self._adopt(h, after=None, keep=arr)
        self.shares_memory = bool(_ffi.metile_buffer_shares_memory(h))
        self._source = arr
        return self

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
        self.metile_dtype = dtype  # the metile dtype name ("f32", "bf16", ...)
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
    def dtype(self) -> np.dtype:
        """The numpy dtype of the elements as stored (uint16 for bf16, which numpy lacks);
        `metile_dtype` is the metile name ("f32", "bf16", ...)."""
        return _dtypes.storage(self.metile_dtype)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d buffer")
        return self.shape[0]

    @property
    def __array_interface__(self):
        # Does not synchronize (numpy reads it implicitly); numpy() does.
        if not self._ptr:
            raise UnsupportedError(
                f"this {self.device.name} buffer is device memory the host cannot address (a "
                "DLPack import of device memory); read it through its producer, or copy it into "
                "a metile.Buffer")
        return {"version": 3, "shape": self.shape, "typestr": self.dtype.str,
                "data": (self._ptr, False), "strides": None}

    def numpy(self) -> np.ndarray:
        """A numpy view of the contents (uint16 storage for bf16). Synchronizes the device
        first when launches are asynchronous, so results of earlier launches are visible."""
        if self.device.asynchronous:
            self.device.synchronize()
            # After a cuda reset (a launch past its time limit) the memory is gone: the library
            # says so rather than letting the view read freed pages.
            check(_ffi.metile_buffer_contents(self._handle, ctypes.byref(ctypes.c_void_p())),
                  "Buffer.numpy")
        if self._view is None:
            self._memory.__array_interface__ = self.__array_interface__
            self._view = np.asarray(self._memory)
        return self._view

    def view(self, dtype: DTypeLike) -> "Buffer":
        """The same memory as elements of `dtype`, never a copy (numpy's ndarray.view): the
        last dimension scales by the ratio of the item sizes, so its bytes must divide into the
        new items. Kernels see one buffer through either; e.g. packed u8 codes read as u32
        words."""
        name = _dtypes.normalize(dtype, "Buffer.view")
        old, new = _dtypes.itemsize(self.metile_dtype), _dtypes.itemsize(name)
        if not self.shape or self.shape[-1] * old % new:
            raise InvalidArgumentError(
                f"Buffer.view: a {self.metile_dtype} buffer of shape {self.shape} has "
                f"{self.shape[-1] * old if self.shape else old} bytes a row, which "
                f"{name} ({new} bytes) does not divide")
        v = Buffer.__new__(Buffer)
        v._init_common(self.device, name, self.shape[:-1] + (self.shape[-1] * old // new,))
        check(_ffi.metile_buffer_retain(self._handle), "Buffer.view")
        # The view's release keeps this buffer's memory owner (and what it wraps) alive.
        v._adopt(self._handle, after=None, keep=self._memory)
        v._source = self._source
        v.shares_memory = self.shares_memory
        return v

    def __repr__(self) -> str:
        share = ", shares memory" if self.shares_memory else ""
        return (f"metile.Buffer(shape={self.shape}, dtype={self.metile_dtype}, "
                f"device={self.device.name}{share})")

    # ------------------------------------------------------------------------------ DLPack
    def __dlpack_device__(self) -> tuple[int, int]:
        # cuda buffers are managed memory, which consumers take as plain device memory.
        if self.device.name == "cuda":
            return (_dlpack.KDL_CUDA, self.device.ordinal)
        return (_dlpack.KDL_CPU, 0)

    def __dlpack__(self, *, stream: int | None = None,
                   max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """The DLPack protocol: a capsule over this buffer's memory (never a copy). `stream` is
        the consumer's CUDA stream: its later work waits for this device's launches (-1: no
        ordering; None: this device is synchronized). A `max_version` of 1.0 or later gets a
        versioned (DLPack 1.0) tensor, else the legacy one."""
        if copy:
            raise BufferError("metile.Buffer.__dlpack__ shares memory; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"metile.Buffer.__dlpack__: the buffer lives on DLPack device "
                              f"{self.__dlpack_device__()}, not {tuple(dl_device)}")
        if stream is None:
            if self.device.asynchronous:
                self.device.synchronize()
        elif stream != -1:
            check(_ffi.metile_device_signal_stream(self.device._handle, int(stream)),
                  "__dlpack__(stream=...)")
        versioned = max_version is not None and tuple(max_version) >= _dlpack.VERSION
        export = (_ffi.metile_buffer_to_dlpack_versioned if versioned
                  else _ffi.metile_buffer_to_dlpack)
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        out = ctypes.c_void_p()
        check(export(self._handle, _dtypes.to_enum(self.metile_dtype), len(self.shape), shape,
                     ctypes.byref(out)), "__dlpack__")
        return _dlpack.capsule(out.value, versioned)


def _array_dtype(arr: np.ndarray, dtype, what: str) -> str:
    if dtype is None:
        return _dtypes.from_numpy(arr.dtype, what)
    name = _dtypes.normalize(dtype, what)
    if _dtypes.storage(name) != arr.dtype:
        raise InvalidArgumentError(
            f"{what}: dtype={name} needs {_dtypes.storage(name)} storage, got a {arr.dtype} array")
    return name


def torch_orders_implicitly(obj) -> bool:
    """Whether `obj` is a torch CUDA tensor whose device's current torch stream is the legacy
    default stream. metile queues on a blocking stream of its own (metile_device_stream), which
    the legacy stream orders both ways by itself, so neither a DLPack stream handshake nor a
    fresh import is needed to order torch's earlier work before a launch. One C call
    (torch's own raw-stream query, as Triton's launcher makes)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor) or not obj.is_cuda:
        return False
    try:
        return torch._C._cuda_getCurrentRawStream(obj.device.index) == 0
    except (AttributeError, RuntimeError):  # another torch build: take the handshake
        return False


def _dlpack_capsule(obj, dev):
    """obj.__dlpack__ asked, as the protocol says, for the newest ABI metile reads and for the
    producer to order its work before `dev`'s stream (older producers take fewer keywords)."""
    kwargs = {}
    # A stream only means something for CUDA memory (numpy, for one, refuses any but None).
    producer = getattr(obj, "__dlpack_device__", None)
    on_cuda = producer is not None and producer()[0] in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED)
    if dev.asynchronous and on_cuda:
        if torch_orders_implicitly(obj):
            kwargs["stream"] = -1  # DLPack's "no synchronization": the streams order themselves
        else:
            stream = ctypes.c_uint64()
            check(_ffi.metile_device_stream(dev._handle, ctypes.byref(stream)), "from_dlpack")
            kwargs["stream"] = stream.value or 1  # 0 would mean "no stream given" to DLPack
    try:
        return obj.__dlpack__(max_version=_dlpack.VERSION, **kwargs)
    except TypeError:
        return obj.__dlpack__(**kwargs)


def from_dlpack(obj: Any, device: DeviceLike = None, *, view: bool = False) -> Buffer:
    """Imports a DLPack tensor (anything with __dlpack__: a numpy array, a torch tensor) without
    a copy when the device can address its memory. The tensor must be compact row-major; with
    view=True (a kernel argument) a strided view is imported as a flat buffer over the elements it
    spans, which the kernel indexes with the strides it is given. On cuda the producer orders its
    pending work before the device's launches (DLPack `stream=`)."""
    if not hasattr(obj, "__dlpack__"):
        raise InvalidArgumentError(f"from_dlpack: {type(obj).__name__} has no __dlpack__ method")
    dev = _device_of(device)
    capsule = _dlpack_capsule(obj, dev)
    address, versioned = _dlpack.open_capsule(capsule)
    m = _dlpack.managed(address, versioned)
    t = m.dl_tensor
    dtype = _dlpack.dtype_from_dl(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if dtype is None:
        raise InvalidArgumentError(
            f"from_dlpack: DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits, "
            f"{t.dtype.lanes} lanes) has no metile counterpart")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    span = _dlpack.strided_span(t, shape)  # elements a strided view spans; None when compact
    if span is not None:
        if not view:
            raise InvalidArgumentError(
                f"from_dlpack: the tensor is not compact row-major (strides "
                f"{tuple(t.strides[i] for i in range(t.ndim))} for shape {shape}); make it "
                "contiguous first, or pass it to a kernel, which takes strided tensors in place")
        shape = (span,)
    if versioned and m.flags & _dlpack.FLAG_READ_ONLY:
        # Kernels may write any buffer: a read-only tensor is copied into a new one.
        if t.device.device_type not in (_dlpack.KDL_CPU, _dlpack.KDL_CUDA_HOST):
            raise InvalidArgumentError("from_dlpack: the tensor is read-only device memory; "
                                       "copy it first")
        n = math.prod(shape) * _dtypes.itemsize(dtype)
        raw = (np.frombuffer((ctypes.c_uint8 * n).from_address((t.data or 0) + t.byte_offset),
                             np.uint8) if n else np.zeros(0, np.uint8))
        host = raw.view(_dtypes.storage(dtype)).reshape(shape).copy()
        return Buffer(data=host, dtype=dtype, device=dev)  # the capsule frees the tensor
    nbytes = math.prod(shape) * _dtypes.itemsize(dtype)
    if nbytes == 0:
        return Buffer.zeros(shape, dtype, dev)  # the capsule frees the tensor
    h = _BufPtr()
    imp = (_ffi.metile_buffer_from_dlpack_versioned if versioned
           else _ffi.metile_buffer_from_dlpack)
    st = imp(ctypes.byref(h), dev._handle, address)
    if st:
        raise error_for(st, "from_dlpack")
    _dlpack.mark_consumed(capsule, versioned)  # the library runs the deleter when the buffer goes
    return Buffer._from_handle(h, dev, dtype, shape)
