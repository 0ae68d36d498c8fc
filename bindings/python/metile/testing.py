"""metile.testing.do_bench: Triton's benchmarking helper over the C API's timing."""

from __future__ import annotations

import time

import numpy as np

from . import _device
from ._autotune import _time
from ._errors import InvalidArgumentError
from ._kernel import PreparedLaunch

_MODES = ("median", "mean", "min", "max")


def do_bench(fn, warmup=25, rep=100, quantiles=None, return_mode="median"):
    """Milliseconds per call of `fn`, after `warmup` calls, over `rep` synchronized calls.

    A PreparedLaunch (`kernel[grid].prepare(...)`) is timed by metile_autotune_time in the
    library (the median of `rep` synchronized runs); any other callable is timed here, one
    device synchronization per call. `quantiles=[0.5, 0.2, 0.8]` returns those quantiles
    instead; `return_mode` is one of median, mean, min, max (Python-timed when not median)."""
    if not callable(fn):
        raise InvalidArgumentError(f"do_bench needs a callable, got {type(fn).__name__}")
    if return_mode not in _MODES:
        raise InvalidArgumentError(f"do_bench: return_mode must be one of {', '.join(_MODES)}, "
                                   f"got {return_mode!r}")
    warmup, rep = int(warmup), int(rep)
    if warmup < 0 or rep < 1:
        raise InvalidArgumentError(f"do_bench: needs warmup >= 0 and rep >= 1, got {warmup}, "
                                   f"{rep}")
    if isinstance(fn, PreparedLaunch) and quantiles is None and return_mode == "median":
        return _time([fn], warmup, rep)[0]
    for _ in range(warmup):
        fn()
    _device.synchronize()
    samples = []
    for _ in range(rep):
        t0 = time.perf_counter()
        fn()
        _device.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    s = np.asarray(samples)
    if quantiles is not None:
        return [float(q) for q in np.quantile(s, list(quantiles))]
    return float(getattr(np, return_mode)(s))
