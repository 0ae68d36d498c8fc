"""Devices: opening by name, the current device, synchronization."""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import threading
from typing import Iterator, Union

from . import _ffi
from ._errors import check, error_for

_lock = threading.Lock()
_open: dict[str, "Device"] = {}
# The current device belongs to the running context: each thread starts with its own (so two
# threads' `use_device` blocks never see each other's device), and an asyncio task starts with a
# copy of its creator's, so tasks switch devices independently too.
_current: "contextvars.ContextVar[Device | None]" = contextvars.ContextVar("metile_device",
                                                                           default=None)


class Device:
    """An opened device ("interp", "cpu", "metal", "metal-sim", "cuda")."""

    def __init__(self, handle: "ctypes._Pointer") -> None:
        self._handle = handle
        info = _ffi.metile_device_info()
        info.struct_size = ctypes.sizeof(info)
        check(_ffi.metile_device_get_info(handle, ctypes.byref(info)), "device info")
        self.name = info.name.decode()
        self.description = info.description.decode()
        self.architecture = info.architecture.decode()
        self.simd_width = info.simd_width
        self.max_threads_per_group = info.max_threads_per_group
        self.threadgroup_memory_bytes = info.threadgroup_memory_bytes
        self.unified_memory = bool(info.unified_memory)
        self.asynchronous = bool(info.asynchronous)
        # The GPU's index on devices chosen by one (cuda:N); `label` is the name to open it by.
        self.ordinal = info.ordinal
        self.label = f"{self.name}:{self.ordinal}" if self.name == "cuda" else self.name

    def synchronize(self) -> None:
        """Waits for every launch issued on this device so far."""
        check(_ffi.metile_device_synchronize(self._handle), f"synchronize {self.name}")

    sync = synchronize

    @property
    def stream(self) -> int:
        """The CUDA stream (a CUstream as an int) launches are queued on; 0 when the device has
        none (host devices finish each launch before returning)."""
        out = ctypes.c_uint64()
        check(_ffi.metile_device_stream(self._handle, ctypes.byref(out)), "Device.stream")
        return out.value

    def wait_stream(self, stream: int) -> None:
        """Launches issued from now on wait for the work queued on another library's CUDA
        `stream` so far (e.g. torch.cuda.current_stream().cuda_stream)."""
        check(_ffi.metile_device_wait_stream(self._handle, int(stream)), "Device.wait_stream")

    def signal_stream(self, stream: int) -> None:
        """Work queued on another library's CUDA `stream` from now on waits for the launches
        issued so far (cheaper than synchronize(): the host does not wait)."""
        check(_ffi.metile_device_signal_stream(self._handle, int(stream)),
              "Device.signal_stream")

    def __repr__(self):
        return f"<metile.Device {self.label} ({self.description}, {self.architecture})>"

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_device_release(self._handle)
            self._handle = None


def open_device(name: str | None = None) -> Device:
    """Opens (once per process) the named device; None or "" opens the default. A GPU other than
    the first is named by index: "cuda:1"."""
    key = name or ""
    with _lock:
        dev = _open.get(key)
        if dev is not None:
            return dev
        h = ctypes.POINTER(_ffi.metile_device)()
        st = _ffi.metile_device_open(ctypes.byref(h), key.encode() if key else None)
        if st:
            raise error_for(st)
        dev = Device(h)
        # The default and its explicit names ("cuda", "cuda:0") are the same Device object.
        dev = _open.setdefault(dev.label, dev)
        if dev.ordinal == 0:
            dev = _open.setdefault(dev.name, dev)
        _open[key] = dev
        return dev


def _resolve(device: Union[str, Device, None]) -> Device:
    """`device` as a Device: None is the current one."""
    if device is None:
        return get_device()
    return device if isinstance(device, Device) else open_device(device)


def devices() -> list[str]:
    """Names of the devices usable on this machine (probed), e.g. ['interp', 'cpu']."""
    out = ctypes.c_char_p()
    check(_ffi.metile_devices_available(ctypes.byref(out)), "devices")
    text = _ffi.take_string(out) or ""
    return [n for n in text.split(",") if n]


def device_count(kind: str = "cuda") -> int:
    """How many devices of `kind` this machine has: for "cuda" the GPUs (open each with
    set_device("cuda:N") for N below the count), for other kinds 1 when usable here; 0 when the
    kind cannot start here (no driver, no GPU)."""
    if not isinstance(kind, str):
        raise TypeError(f"device_count takes a device kind such as 'cuda', got {type(kind).__name__}")
    out = ctypes.c_int32()
    check(_ffi.metile_device_count(kind.encode(), ctypes.byref(out)), "device_count")
    return out.value


def get_device() -> Device:
    """The device launches and new buffers use in this thread (or asyncio task): set_device()'s,
    else the library default ($METILE_DEVICE, else metal, cuda, cpu, interp)."""
    dev = _current.get()
    if dev is None:
        dev = open_device(None)
        _current.set(dev)  # the launch fast path compares the current device by identity
    return dev


def set_device(name: Union[str, Device]) -> Device:
    """Makes `name` (or a Device) the current device of this thread (or asyncio task, and the
    tasks it creates from now on) and returns it. Other threads keep theirs; a new thread starts
    on the default device."""
    dev = name if isinstance(name, Device) else open_device(name)
    _current.set(dev)
    return dev


@contextlib.contextmanager
def use_device(name: Union[str, Device]) -> Iterator[Device]:
    """`with metile.use_device("cpu"): ...` runs the block on that device, then restores this
    thread's (or task's) previous one; other threads and tasks are not affected."""
    dev = name if isinstance(name, Device) else open_device(name)
    token = _current.set(dev)
    try:
        yield dev
    finally:
        _current.reset(token)


def synchronize(device: Union[str, Device, None] = None) -> None:
    """Waits for all launches: on `device`, or on every device opened so far."""
    if device is not None:
        (device if isinstance(device, Device) else open_device(device)).synchronize()
        return
    with _lock:
        opened = list({id(d): d for d in _open.values()}.values())
    for d in opened:
        d.synchronize()
