"""Exceptions: one MetileError subclass per C status, plus the frontend's own errors."""

from __future__ import annotations

from . import _ffi


class MetileError(Exception):
    """Base class of every error metile raises. `status` is the C status name."""

    status = "METILE_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgumentError(MetileError, ValueError, TypeError):
    """A bad argument: wrong count, type, dtype, layout, value, or launch argument."""
    status = "METILE_ERROR_INVALID_ARGUMENT"


class InvalidProgramError(MetileError):
    """The kernel is ill-formed (verifier or builder error); the message names file:line."""
    status = "METILE_ERROR_INVALID_PROGRAM"


class TracingError(InvalidProgramError, TypeError):
    """Python code inside a kernel did something that cannot be traced (e.g. `if` on a value)."""


class CompileError(MetileError):
    """A backend compiler failed; the message carries its log."""
    status = "METILE_ERROR_COMPILE"


class UnsupportedError(MetileError):
    """A valid kernel uses something the device cannot run yet."""
    status = "METILE_ERROR_UNSUPPORTED"


class DeviceUnavailableError(MetileError):
    """The device cannot start on this machine; the message says why."""
    status = "METILE_ERROR_DEVICE_UNAVAILABLE"


class DeviceError(MetileError):
    """A launch or device operation failed at run time."""
    status = "METILE_ERROR_DEVICE"


class OutOfMemoryError(MetileError, MemoryError):
    status = "METILE_ERROR_OUT_OF_MEMORY"


class MetileIOError(MetileError, OSError):
    status = "METILE_ERROR_IO"


class InternalError(MetileError):
    """A bug in metile; please report it with the message."""
    status = "METILE_ERROR_INTERNAL"


class PerformanceWarning(UserWarning):
    """Something works but costs much more than it needs to (e.g. numpy arrays a device copies
    on every launch)."""


_BY_STATUS = {
    _ffi.METILE_ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    _ffi.METILE_ERROR_INVALID_PROGRAM: InvalidProgramError,
    _ffi.METILE_ERROR_COMPILE: CompileError,
    _ffi.METILE_ERROR_UNSUPPORTED: UnsupportedError,
    _ffi.METILE_ERROR_DEVICE_UNAVAILABLE: DeviceUnavailableError,
    _ffi.METILE_ERROR_DEVICE: DeviceError,
    _ffi.METILE_ERROR_OUT_OF_MEMORY: OutOfMemoryError,
    _ffi.METILE_ERROR_IO: MetileIOError,
    _ffi.METILE_ERROR_INTERNAL: InternalError,
}


def error_for(status: int, context: str = "", unless: str = "") -> MetileError:
    """The exception for a failed C call, with the library's message; `context` is appended
    unless the message already mentions `unless` (e.g. the kernel's file)."""
    cls = _BY_STATUS.get(status, InternalError)
    msg = _ffi.last_error() or _ffi.metile_status_name(status).decode()
    if context and context not in msg and not (unless and unless in msg):
        msg = f"{msg}\n  ({context})"
    return cls(msg)


def check(status: int, context: str = "") -> None:
    if status:
        raise error_for(status, context)
