"""Triton's testing helpers: do_bench (time budgets in milliseconds, L2 flush on GPUs,
quantiles), assert_close, and perf_report / Benchmark for tables of benchmark results."""

from __future__ import annotations

import csv
import os
import time
from typing import Any, Callable, Sequence

import numpy as np

from . import _device
from ._autotune import _time
from ._errors import InvalidArgumentError
from ._kernel import PreparedLaunch

_MODES = ("mean", "median", "min", "max", "all")
_L2_FLUSH_BYTES = 256 << 20  # larger than any GPU's L2 (H200: 50 MiB)
_flush = {}  # device name -> (buffer, launch) clearing _L2_FLUSH_BYTES


def _flusher(dev):
    """A prepared launch zeroing 256 MiB on a GPU device, so each timed call starts with a cold
    L2 as in Triton; None on host devices (their caches are not flushed)."""
    if dev.name not in ("cuda", "metal"):
        return None
    got = _flush.get(dev.name)
    if got is None:
        from . import _lang as ml  # only where a GPU needs the flush kernel
        from ._buffer import Buffer
        from ._kernel import kernel

        @kernel
        def _zero_l2(Out, N, BLOCK: ml.constexpr):
            offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
            ml.store(Out + offs, 0, mask=offs < N)

        n = _L2_FLUSH_BYTES // 4
        buf = Buffer.zeros((n,), "i32", dev)
        got = _flush[dev.name] = (buf, _zero_l2[((n + 1023) // 1024,)].prepare(buf, n,
                                                                               BLOCK=1024))
    return got[1]


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
             grad_to_none: Any = None, quantiles: Sequence[float] | None = None,
             return_mode: str = "mean") -> Any:
    """Milliseconds per call of `fn`, as Triton's do_bench: `warmup` and `rep` are time budgets
    in milliseconds (the number of calls is estimated from 5 timed calls), each timed call is
    synchronized and, on GPU devices, starts with the L2 cache flushed (256 MiB cleared,
    outside the timing). `quantiles=[0.5, 0.2, 0.8]` returns those quantiles of the samples;
    otherwise `return_mode` picks mean (the default), median, min, max or all (the list).
    A PreparedLaunch on a host device with return_mode="median" is timed inside the library
    (metile_autotune_time). `grad_to_none` is accepted for Triton's signature and ignored
    (metile has no autograd)."""
    del grad_to_none
    if not callable(fn):
        raise InvalidArgumentError(f"do_bench needs a callable, got {type(fn).__name__}")
    if return_mode not in _MODES:
        raise InvalidArgumentError(f"do_bench: return_mode must be one of {', '.join(_MODES)}, "
                                   f"got {return_mode!r}")
    if not warmup >= 0 or not rep > 0:
        raise InvalidArgumentError(f"do_bench: needs warmup >= 0 and rep > 0 milliseconds, got "
                                   f"{warmup}, {rep}")
    dev = _device.get_device()
    flush = _flusher(dev)
    fn()
    _device.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    _device.synchronize()
    estimate = max((time.perf_counter() - t0) * 1e3 / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate))
    n_repeat = max(1, int(rep / estimate))
    if (isinstance(fn, PreparedLaunch) and flush is None and quantiles is None
            and return_mode == "median"):
        return _time([fn], n_warmup, n_repeat)[0]
    for _ in range(n_warmup):
        fn()
    _device.synchronize()
    samples = []
    for _ in range(n_repeat):
        if flush is not None:
            flush()
            dev.synchronize()
        t0 = time.perf_counter()
        fn()
        _device.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    s = np.asarray(samples)
    if quantiles is not None:
        qs = [float(q) for q in np.quantile(s, list(quantiles))]
        return qs[0] if len(qs) == 1 else qs
    if return_mode == "all":
        return [float(v) for v in s]
    return float(getattr(np, return_mode)(s))


def _host_array(x: Any, what: str) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    numpy = getattr(x, "numpy", None)  # metile.Buffer (synchronizes), a CPU torch tensor
    if callable(numpy) and hasattr(x, "__dlpack__") and not hasattr(x, "cpu"):
        return numpy()
    cpu = getattr(x, "cpu", None)  # torch tensors on any device
    if callable(cpu):
        t = cpu()
        t = t.detach() if hasattr(t, "detach") else t
        return np.asarray(t.float().numpy() if str(getattr(t, "dtype", "")) == "torch.bfloat16"
                          else t.numpy())
    try:
        return np.asarray(x)
    except Exception as e:
        raise InvalidArgumentError(f"assert_close: cannot read {what} ({type(x).__name__}) as "
                                   "an array") from e


def assert_close(x: Any, y: Any, atol: float | None = None, rtol: float | None = None,
                 err_msg: str = "") -> None:
    """Triton's assert_close: x and y (numpy arrays, metile Buffers, torch tensors, scalars)
    agree within atol (default 1e-2) + rtol (default 0) * |y| elementwise; raises
    AssertionError naming the mismatches otherwise."""
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    a = _host_array(x, "x")
    b = _host_array(y, "y")
    if a.dtype == np.bool_:
        a = a.astype(np.int8)
    if b.dtype == np.bool_:
        b = b.astype(np.int8)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=rtol,
                               err_msg=err_msg, equal_nan=True)


class Benchmark:
    """Triton's Benchmark: the grid of a perf_report. Each x in `x_vals` (one value for every
    name in `x_names`, or a tuple of them) is run with each `line_vals` value passed as
    `line_arg`, plus the fixed `args`."""

    def __init__(self, x_names: Sequence[str], x_vals: Sequence[Any], line_arg: str,
                 line_vals: Sequence[Any], line_names: Sequence[str], plot_name: str,
                 args: dict | None = None, xlabel: str = "", ylabel: str = "",
                 x_log: bool = False, y_log: bool = False, styles: Any = None,
                 color: Any = None) -> None:
        if len(line_names) != len(line_vals):
            raise InvalidArgumentError(f"Benchmark {plot_name!r}: {len(line_names)} line_names "
                                       f"for {len(line_vals)} line_vals")
        self.x_names, self.x_vals = list(x_names), list(x_vals)
        self.line_arg, self.line_vals, self.line_names = line_arg, list(line_vals), list(line_names)
        self.plot_name, self.args = plot_name, dict(args or {})
        self.xlabel, self.ylabel, self.x_log, self.y_log = xlabel, ylabel, x_log, y_log
        self.styles, self.color = styles, color


class Mark:
    """What @perf_report makes: `.run(print_data=True, save_path=..., show_plots=...)`."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Any) -> None:
        self.fn = fn
        self.benchmarks = benchmarks

    def _rows(self, bench: Benchmark) -> list[dict]:
        rows = []
        for x in bench.x_vals:
            xs = x if isinstance(x, (tuple, list)) else [x] * len(bench.x_names)
            point = dict(zip(bench.x_names, xs))
            row = dict(point)
            for name, lv in zip(bench.line_names, bench.line_vals):
                r = self.fn(**point, **{bench.line_arg: lv}, **bench.args)
                row[name] = float(r[0] if isinstance(r, (tuple, list)) else r)
            rows.append(row)
        return rows

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "",
            return_df: bool = False, **kwargs: Any) -> Any:
        benches = self.benchmarks if isinstance(self.benchmarks, list) else [self.benchmarks]
        tables = []
        for bench in benches:
            rows = self._rows(bench)
            cols = list(bench.x_names) + list(bench.line_names)
            if print_data:
                print(f"{bench.plot_name}:")
                print("  ".join(f"{c:>14}" for c in cols))
                for r in rows:
                    print("  ".join(f"{r[c]:>14.6g}" if isinstance(r[c], float) else
                                    f"{r[c]!s:>14}" for c in cols))
            if save_path:
                os.makedirs(save_path, exist_ok=True)
                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w",
                          newline="") as f:
                    w = csv.DictWriter(f, fieldnames=cols)
                    w.writeheader()
                    w.writerows(rows)
            if show_plots or save_path:
                _plot(bench, rows, show_plots, save_path)
            tables.append(rows)
        if return_df:
            try:
                import pandas as pd
                frames = [pd.DataFrame(t) for t in tables]
            except ImportError:
                frames = tables  # lists of row dicts where pandas is not installed
            return frames[0] if len(frames) == 1 else frames
        return None


def _plot(bench: Benchmark, rows: list[dict], show: bool, save_path: str) -> None:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return  # the CSV (and print_data) carry the results
    fig, ax = plt.subplots()
    x = [r[bench.x_names[0]] for r in rows]
    for i, name in enumerate(bench.line_names):
        style = bench.styles[i] if bench.styles else {}
        kw = ({"color": style[0], "linestyle": style[1]} if isinstance(style, tuple) else {})
        ax.plot(x, [r[name] for r in rows], label=name, **kw)
    ax.set_xlabel(bench.xlabel or bench.x_names[0])
    ax.set_ylabel(bench.ylabel)
    ax.set_xscale("log" if bench.x_log else "linear")
    ax.set_yscale("log" if bench.y_log else "linear")
    ax.legend()
    ax.set_title(bench.plot_name)
    if save_path:
        fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show:
        plt.show()
    plt.close(fig)


def perf_report(benchmarks: Any) -> Callable[[Callable[..., Any]], Mark]:
    """Triton's perf_report: `@perf_report(Benchmark(...))` on a function of the x names, the
    line argument and `args`, returning milliseconds (or a (value, min, max) tuple)."""
    return lambda fn: Mark(fn, benchmarks)
