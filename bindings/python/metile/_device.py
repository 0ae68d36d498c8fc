"""Devices: opening by name, the current device, synchronization."""

from __future__ import annotations

import contextlib
import ctypes
import threading

from . import _ffi
from ._errors import check, error_for

_lock = threading.Lock()
_open: dict[str, "Device"] = {}
_current: "Device | None" = None


class Device:
    """An opened device ("interp", "cpu", "metal", "metal-sim", "cuda")."""

    def __init__(self, handle):
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

    def synchronize(self) -> None:
        """Waits for every launch issued on this device so far."""
        check(_ffi.metile_device_synchronize(self._handle), f"synchronize {self.name}")

    sync = synchronize

    def __repr__(self):
        return f"<metile.Device {self.name} ({self.description}, {self.architecture})>"

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_device_release(self._handle)
            self._handle = None


def open_device(name: str | None = None) -> Device:
    """Opens (once per process) the named device; None or "" opens the default."""
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
        # The default and its explicit name are the same Device object.
        dev = _open.setdefault(dev.name, dev)
        _open[key] = dev
        return dev


def devices() -> list[str]:
    """Names of the devices usable on this machine (probed), e.g. ['interp', 'cpu']."""
    out = ctypes.c_char_p()
    check(_ffi.metile_devices_available(ctypes.byref(out)), "devices")
    text = _ffi.take_string(out) or ""
    return [n for n in text.split(",") if n]


def get_device() -> Device:
    """The device launches and new buffers use: set_device()'s, else the library default
    ($METILE_DEVICE, else metal, cuda, cpu, interp)."""
    global _current
    if _current is None:
        _current = open_device(None)
    return _current


def set_device(name) -> Device:
    """Makes `name` (or a Device) the current device and returns it."""
    global _current
    _current = name if isinstance(name, Device) else open_device(name)
    return _current


@contextlib.contextmanager
def use_device(name):
    """`with metile.use_device("cpu"): ...` runs the block on that device, then restores."""
    global _current
    previous = _current
    try:
        yield set_device(name)
    finally:
        _current = previous


def synchronize(device=None) -> None:
    """Waits for all launches: on `device`, or on every device opened so far."""
    if device is not None:
        (device if isinstance(device, Device) else open_device(device)).synchronize()
        return
    with _lock:
        opened = list({id(d): d for d in _open.values()}.values())
    for d in opened:
        d.synchronize()
