"""@metile.autotune: pick the fastest Config of constexprs for each set of key values.

Each config is traced, compiled and prepared; each prepared launch is timed with
metile_autotune_time (median of `rep` synchronized runs after `warmup`) and reported on stderr
as it finishes. Configs that fail to trace or compile are reported and skipped, never silently
dropped. The winner is cached in memory per key values and persisted with
metile_autotune_store, so a new process reuses it (the persistent key covers the kernel's
source, the device, the argument types and the configs).

What the caller passes wins: a constexpr given at launch is never replaced by a config's value,
and when the caller gives every constexpr the configs tune, nothing is searched. Trials run the
kernel on the caller's arguments; `restore_value=[names]` puts those arguments back after the
trials and `reset_to_zero=[names]` zeroes them before each trial (and restores them after), as
in Triton, so an in-place kernel gives the same result whether or not the winner was cached.
"""

from __future__ import annotations

import ctypes
import hashlib
import inspect
import json
import os
import sys
import time
from typing import Callable

import numpy as np

from . import _device, _ffi
from ._buffer import Buffer
from ._errors import InvalidArgumentError, MetileError, check
from ._kernel import KernelFunction, PreparedLaunch, _classify


class Config:
    """A set of constexpr values (and compile options or hints such as num_threads,
    num_warps) to try: `Config(BLOCK=128, num_warps=4)` or, as in Triton,
    `Config({"BLOCK": 128}, num_warps=4)`."""

    def __init__(self, kwargs: dict | None = None, **more: object) -> None:
        if kwargs is not None and not isinstance(kwargs, dict):
            raise InvalidArgumentError(f"Config takes a dict of constexprs and/or keywords, got "
                                       f"{type(kwargs).__name__}")
        self.kwargs = {**(kwargs or {}), **more}

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items()) + ")"

    def __eq__(self, other):
        return isinstance(other, Config) and self.kwargs == other.kwargs

    def __hash__(self):
        return hash(repr(self))


def autotune(configs: list[Config], key: list[str], warmup: int = 5, rep: int = 20,
             verbose: bool | None = True, restore_value: tuple[str, ...] = (),
             reset_to_zero: tuple[str, ...] = ()) -> Callable[[KernelFunction], AutotunedKernel]:
    """Decorator over a @metile.kernel: `@metile.autotune(configs=[Config(BLOCK=128), ...],
    key=["N"])`. Launching tunes once per distinct key values (shapes for arrays/buffers).
    `restore_value` / `reset_to_zero` name array or Buffer parameters that trials must leave as
    they were (restored afterwards) or start from zero (zeroed before each trial)."""
    configs = list(configs)
    if not configs or not all(isinstance(c, Config) for c in configs):
        raise InvalidArgumentError("autotune: configs must be a non-empty list of metile.Config")
    key = [key] if isinstance(key, str) else list(key)
    restore = [restore_value] if isinstance(restore_value, str) else list(restore_value)
    zero = [reset_to_zero] if isinstance(reset_to_zero, str) else list(reset_to_zero)

    def wrap(k):
        if not isinstance(k, KernelFunction):
            k = KernelFunction(k)
        for name in key:
            if name not in k.param_names:
                raise InvalidArgumentError(f"autotune: key `{name}` is not a parameter of "
                                           f"{k.fn.__name__} ({', '.join(k.param_names)})")
        for what, names in (("restore_value", restore), ("reset_to_zero", zero)):
            for name in names:
                if name not in k.runtime:
                    raise InvalidArgumentError(
                        f"autotune: {what} names `{name}`, which is not a runtime parameter of "
                        f"{k.fn.__name__} ({', '.join(k.runtime)})")
        t = AutotunedKernel(k, configs, key, warmup, rep, verbose)
        t.restore_value, t.reset_to_zero = restore, zero
        return t
    return wrap


class AutotunedKernel:
    def __init__(self, kernel: KernelFunction, configs: list[Config], key: list[str], warmup: int,
                 rep: int, verbose: bool | None) -> None:
        self.kernel = kernel
        self.configs = configs
        self.key = key
        self.warmup, self.rep, self.verbose = warmup, rep, verbose
        self.cache: dict = {}  # (device, key values, arg types) -> Config
        self.last_timings: list = []
        self.restore_value: list = []
        self.reset_to_zero: list = []
        # The constexprs the configs set: when the caller passes all of them, nothing is tuned.
        self.tuned_names = sorted({n for c in configs for n in c.kwargs
                                   if n in kernel.constexprs})
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__

    def __getitem__(self, grid: object) -> AutotunedLauncher:
        return AutotunedLauncher(self, grid)

    def __repr__(self):
        return f"<metile.autotune {self.kernel.fn.__qualname__}: {len(self.configs)} configs>"

    # ------------------------------------------------------------------------- keys
    def _key_values(self, args, kwargs):
        k = self.kernel
        named = dict(zip(k.param_names, args))
        named.update(kwargs)
        out = []
        for name in self.key:
            if name not in named and name not in k.defaults:
                raise InvalidArgumentError(f"autotune {k.fn.__name__}: key argument `{name}` "
                                           "was not passed")
            v = named.get(name, k.defaults.get(name))
            if isinstance(v, (np.ndarray, Buffer)):
                out.append(tuple(v.shape))
            elif isinstance(v, np.generic):
                out.append(v.item())
            else:
                out.append(v)
        return tuple(out)

    def _arg_types(self, args, kwargs):
        k = self.kernel
        named = dict(zip(k.param_names, args))
        named.update(kwargs)
        return tuple(_classify(k.fn.__name__, n, named[n], None)[0] if n in named else None
                     for n in k.runtime)

    def _persistent_key(self, dev, key_values, types):
        fn = self.kernel.fn
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            src = fn.__code__.co_code.hex()
        material = json.dumps({
            "kernel": f"{fn.__module__}.{fn.__qualname__}",
            "source": hashlib.sha256(src.encode()).hexdigest(),
            "device": [dev.name, dev.architecture, dev.description],
            "key": repr(key_values), "types": repr(types),
            "configs": [repr(c) for c in self.configs],
            "library": _ffi.metile_version_string().decode(),
        }, sort_keys=True)
        return f"{fn.__name__}-{hashlib.sha256(material.encode()).hexdigest()}"

    # ----------------------------------------------------------------------- tuning
    def best_config(self, grid: object, args: tuple, kwargs: dict) -> Config:
        if self.caller_decides(kwargs):
            return Config({n: kwargs[n] for n in self.tuned_names})
        dev = _device.get_device()
        # Tuned constexprs the caller fixed are part of the key: the winner depends on them.
        key_values = self._key_values(args, kwargs) + tuple(
            (n, kwargs[n]) for n in self.tuned_names if n in kwargs)
        types = self._arg_types(args, kwargs)
        mem_key = (dev, key_values, types)
        best = self.cache.get(mem_key)
        if best is not None:
            return best
        pkey = self._persistent_key(dev, key_values, types)
        stored = _lookup(pkey)
        if stored is not None:
            for c in self.configs:
                if repr(c) == stored:
                    self.cache[mem_key] = c
                    return c
        best = self._tune(grid, args, kwargs, key_values)
        self.cache[mem_key] = best
        _store(pkey, repr(best))
        return best

    def caller_decides(self, kwargs: dict) -> bool:
        """True when the launch passes every constexpr the configs tune: no search."""
        return bool(self.tuned_names) and all(n in kwargs for n in self.tuned_names)

    def _tune(self, grid, args, kwargs, key_values) -> Config:
        k = self.kernel
        show = verbose_enabled(self.verbose)
        kv = ", ".join(f"{n}={v}" for n, v in zip(self.key, key_values))
        launches, failures = {}, {}  # by config index
        for i, c in enumerate(self.configs):
            try:
                launches[i] = k[grid].prepare(*args, **{**c.kwargs, **kwargs})
            except MetileError as e:
                failures[i] = e
                if show:
                    first = str(e).splitlines()[0] if str(e) else type(e).__name__
                    _progress(f"autotune {k.fn.__name__} [{kv}] {c!r}: FAILED "
                              f"({type(e).__name__}: {first})")
        if not launches:
            detail = "\n".join(f"  {self.configs[i]}: {type(e).__name__}: {e}"
                               for i, e in failures.items())
            raise MetileError(f"autotune {k.fn.__name__}: all {len(self.configs)} configs "
                              f"failed:\n{detail}")
        saved = _Snapshot(k, args, kwargs, self.restore_value + self.reset_to_zero)
        times = {}
        try:
            for i, launch in launches.items():
                saved.zero(self.reset_to_zero)
                times[i] = _time([launch], self.warmup, self.rep)[0]
                if show:
                    _progress(f"autotune {k.fn.__name__} [{kv}] {self.configs[i]!r}: "
                              f"{times[i]:.4f} ms")
        finally:
            saved.restore()
        best = min(times, key=times.__getitem__)
        self.last_timings = [(c, times.get(i)) for i, c in enumerate(self.configs)]
        if show:
            _progress(f"autotune {k.fn.__name__} [{kv}]: best {self.configs[best]!r}")
        return self.configs[best]


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Snapshot:
    """Copies of the named array / Buffer arguments, to put back after the trials."""

    def __init__(self, kernel, args, kwargs, names):
        named = dict(zip(kernel.param_names, args))
        named.update(kwargs)
        self.views = {}
        for name in dict.fromkeys(names):
            v = named.get(name)
            if isinstance(v, Buffer):
                view = v.numpy()
            elif isinstance(v, np.ndarray):
                view = v
            else:
                raise InvalidArgumentError(
                    f"autotune {kernel.fn.__name__}: `{name}` (restore_value/reset_to_zero) must "
                    f"be a numpy array or metile.Buffer, got {type(v).__name__}")
            self.views[name] = (view, view.copy())

    def zero(self, names):
        if names:
            _device.synchronize()
        for name in names:
            self.views[name][0][...] = 0

    def restore(self):
        if self.views:
            _device.synchronize()
        for view, copy in self.views.values():
            view[...] = copy


def verbose_enabled(v: bool | None) -> bool:
    return bool(v) and os.environ.get("METILE_AUTOTUNE_QUIET", "") in ("", "0")


class AutotunedLauncher:
    def __init__(self, tuned: AutotunedKernel, grid: object) -> None:
        self.tuned = tuned
        self.grid = grid

    def __call__(self, *args: object, **kwargs: object) -> Config:
        """Tunes (once per key values), launches the winner and returns its Config."""
        best = self.tuned.best_config(self.grid, args, kwargs)
        self.tuned.kernel[self.grid](*args, **{**best.kwargs, **kwargs})
        return best

    def prepare(self, *args: object, **kwargs: object) -> PreparedLaunch:
        """Tunes once and returns the winner's prepared launch (a fast dispatcher)."""
        best = self.tuned.best_config(self.grid, args, kwargs)
        return self.tuned.kernel[self.grid].prepare(*args, **{**best.kwargs, **kwargs})


def _time(launches, warmup, rep) -> list[float]:
    """Median milliseconds per launch of each prepared launch."""
    if _ffi.has("metile_autotune_time"):
        n = len(launches)
        arr = (ctypes.POINTER(_ffi.metile_launch) * n)(*[l._handle for l in launches])
        out = (ctypes.c_double * n)()
        check(_ffi.metile_autotune_time(arr, n, int(warmup), int(rep), out), "autotune timing")
        return list(out)
    result = []
    for launch in launches:
        for _ in range(warmup):
            launch()
        launch.device.synchronize()
        samples = []
        for _ in range(max(rep, 1)):
            t0 = time.perf_counter()
            launch()
            launch.device.synchronize()
            samples.append((time.perf_counter() - t0) * 1e3)
        result.append(float(np.median(samples)))
    return result


# ------------------------------------------------------------------------- persistence
def _cache_root() -> str:
    if _ffi.has("metile_cache_get_dir"):
        out = ctypes.c_char_p()
        if _ffi.metile_cache_get_dir(ctypes.byref(out)) == 0:
            return _ffi.take_string(out)
    env = os.environ.get("METILE_CACHE_DIR")
    if env:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg, "metile") if xdg else os.path.join(os.path.expanduser("~"),
                                                                 ".cache", "metile")


def _fallback_path(key: str) -> str:
    return os.path.join(_cache_root(), "autotune", key + ".txt")


def _lookup(key: str):
    if _ffi.has("metile_autotune_lookup"):
        out = ctypes.c_char_p()
        check(_ffi.metile_autotune_lookup(key.encode(), ctypes.byref(out)), "autotune lookup")
        return _ffi.take_string(out)
    try:
        with open(_fallback_path(key), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def _store(key: str, winner: str) -> None:
    if _ffi.has("metile_autotune_store"):
        check(_ffi.metile_autotune_store(key.encode(), winner.encode()), "autotune store")
        return
    path = _fallback_path(key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(winner)
        os.replace(tmp, path)
    except OSError as e:
        import warnings
        warnings.warn(f"metile: cannot persist the autotune result ({e}); it is kept in memory")
