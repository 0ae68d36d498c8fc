"""Streams and events: queueing launches on a chosen CUDA stream, and timing work the way
torch.cuda.Event does. On devices without streams (interp, cpu, metal-sim, metal) a launch
finishes before it returns (metal: before an event records), so a Stream is a token launches
accept and ignore, and an Event reads the host's clock when recorded."""

from __future__ import annotations

import ctypes
from typing import Any, Union

from . import _device, _ffi
from ._errors import InvalidArgumentError, check


class Stream:
    """A stream of `device`'s (default: the current device): `kernel[grid](..., stream=s)` queues
    the launch on it. `cuda_stream` is its CUstream as an int, as torch.cuda.Stream's is."""

    def __init__(self, device: Union[str, "_device.Device", None] = None) -> None:
        self.device = _device._resolve(device)
        out = ctypes.c_uint64()
        check(_ffi.metile_stream_create(self.device._handle, ctypes.byref(out)), "Stream")
        self.cuda_stream = out.value

    def synchronize(self) -> None:
        """Waits for the work queued on this stream so far."""
        e = Event(device=self.device)
        e.record(self)
        e.synchronize()

    def __repr__(self):
        return f"<metile.Stream 0x{self.cuda_stream:x} on {self.device.label}>"

    def __del__(self):
        if _ffi is not None and getattr(self, "cuda_stream", 0):
            _ffi.metile_stream_destroy(self.device._handle, self.cuda_stream)
            self.cuda_stream = 0


def stream_handle(stream: Any, device: "_device.Device") -> int:
    """The CUstream (an int) of a launch's `stream=`: None (the device's own: 0), an int, a
    metile.Stream, or another library's stream object (torch's .cuda_stream, CuPy's .ptr)."""
    if stream is None:
        return 0
    if isinstance(stream, Stream):
        if stream.device is not device:
            raise InvalidArgumentError(f"stream {stream!r} belongs to device {stream.device.label}, "
                                       f"the launch runs on {device.label}")
        return stream.cuda_stream
    handle = stream
    if not isinstance(stream, int):
        for attr in ("cuda_stream", "ptr"):
            if hasattr(stream, attr):
                handle = getattr(stream, attr)
                break
        else:
            raise InvalidArgumentError(
                f"stream= takes None, an int CUstream, a metile.Stream or an object with "
                f".cuda_stream (torch) or .ptr (CuPy); got {type(stream).__name__}")
        # torch names the GPU as .device.index, CuPy as .device_id; the library checks the
        # stream's context as well, for plain ints.
        index = getattr(getattr(stream, "device", None), "index", getattr(stream, "device_id", None))
        if isinstance(index, int) and device.name == "cuda" and index != device.ordinal:
            raise InvalidArgumentError(f"stream {stream!r} is on cuda:{index}, the launch runs on "
                                       f"{device.label}")
    if isinstance(handle, bool) or not isinstance(handle, int) or not 0 <= handle < 2**64:
        raise InvalidArgumentError(f"stream {stream!r} is not a CUstream handle (an int in "
                                   "[0, 2**64))")
    return handle


class Event:
    """A point in a device's queue: `record()` it after some work, `synchronize()` to wait for
    that work, and `start.elapsed_time(end)` for the milliseconds between two records, as with
    torch.cuda.Event. On devices without streams the time is the host's between the records.
    `enable_timing` is accepted for torch's signature (timing is always on)."""

    def __init__(self, enable_timing: bool = True, device: Union[str, "_device.Device", None] = None,
                 **_torch_flags: Any) -> None:
        self.device = _device._resolve(device)
        h = _ffi._event()
        check(_ffi.metile_event_create(ctypes.byref(h), self.device._handle), "Event")
        self._handle = h

    def record(self, stream: Any = None) -> None:
        """Marks the work queued so far on `stream` (default: the device's own)."""
        check(_ffi.metile_event_record(self._handle, stream_handle(stream, self.device)),
              "Event.record")

    def synchronize(self) -> None:
        check(_ffi.metile_event_synchronize(self._handle), "Event.synchronize")

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event's record to `end`'s (waits for `end`)."""
        if not isinstance(end, Event):
            raise InvalidArgumentError(f"elapsed_time needs a metile.Event, got {type(end).__name__}")
        out = ctypes.c_double()
        check(_ffi.metile_event_elapsed_ms(self._handle, end._handle, ctypes.byref(out)),
              "Event.elapsed_time")
        return out.value

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_event_release(self._handle)
            self._handle = None
