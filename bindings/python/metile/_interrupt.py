"""Ctrl-C during a launch. Python runs a signal handler only between bytecodes, never while the
main thread waits in a C launch, so a long cpu, interp or metal-sim launch used to ignore
Ctrl-C. The C half of Python's handler also writes the signal's number to the wakeup fd
(signal.set_wakeup_fd) at once: a daemon thread reads it and calls metile_cancel_launches(),
the launch returns (cancelled), and the handler then runs as the user set it (by default
raising KeyboardInterrupt). The handler itself is never replaced.

Installed on the first launch made from the main thread, unless another wakeup fd is set
(asyncio sets one; then Ctrl-C waits for the launch as before) or SIGINT is not handled by
Python (SIG_IGN, SIG_DFL).
"""

from __future__ import annotations

import os
import signal
import threading

from . import _ffi

_tried = False
_lock = threading.Lock()


def install() -> None:
    """Sets up cancellation on SIGINT once per process (a no-op off the main thread)."""
    global _tried
    if _tried or threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        if _tried:
            return
        _tried = True
        if not _ffi.has("metile_cancel_launches"):
            return
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            return
        r, w = os.pipe()
        os.set_blocking(w, False)  # set_wakeup_fd requires it
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(r)
            os.close(w)
            return
        if old != -1:  # someone else's (asyncio's): leave it in place
            signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            return
        threading.Thread(target=_watch, args=(r,), daemon=True,
                         name="metile-sigint-cancel").start()


def _watch(fd: int) -> None:
    cancel = _ffi.metile_cancel_launches
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            cancel()
