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
import warnings
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

    def __init__(self, kwargs: dict | None = None, pre_hook: Callable | None = None,
                 **more: object) -> None:
        if kwargs is not None and not isinstance(kwargs, dict):
            raise InvalidArgumentError(f"Config takes a dict of constexprs and/or keywords, got "
                                       f"{type(kwargs).__name__}")
        if pre_hook is not None and not callable(pre_hook):
            raise InvalidArgumentError("Config: pre_hook must be callable")
        self.kwargs = {**(kwargs or {}), **more}
        # Called with the launch's named arguments (config values included) before each launch
        # with this config, trials and the tuned launches alike, as in Triton.
        self.pre_hook = pre_hook

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items()) + ")"

    def __eq__(self, other):
        return isinstance(other, Config) and self.kwargs == other.kwargs

    def __hash__(self):
        return hash(repr(self))


def autotune(configs: list[Config], key: list[str], prune_configs_by: dict | None = None,
             reset_to_zero: tuple[str, ...] = (), restore_value: tuple[str, ...] = (),
             pre_hook: Callable | None = None, post_hook: Callable | None = None,
             warmup: int = 5, rep: int = 20,
             verbose: bool | None = True) -> Callable[[KernelFunction], AutotunedKernel]:
    """Decorator over a @metile.kernel: `@metile.autotune(configs=[Config(BLOCK=128), ...],
    key=["N"])`. Launching tunes once per distinct key values (shapes for arrays/buffers)
    and constexpr values the launch passes.
    `restore_value` / `reset_to_zero` name array or Buffer parameters that trials must leave as
    they were (restored afterwards) or start from zero (zeroed before each trial).
    As in Triton: `prune_configs_by={"early_config_prune": f, "perf_model": m, "top_k": k}`
    narrows the configs before timing (f(configs, named_args, **kwargs) returns the ones to
    keep; m(**named_args, **config) estimates a time, and the k (an int, or a fraction of
    them) best estimates are timed); `pre_hook(named_args)` runs before each trial and
    `post_hook(named_args, exception)` after it (exception None when it ran). The chosen
    Config is also the kernel's `best_config` attribute after each launch."""
    configs = list(configs)
    prune = dict(prune_configs_by or {})
    unknown = set(prune) - {"early_config_prune", "perf_model", "top_k"}
    if unknown:
        raise InvalidArgumentError(f"autotune: prune_configs_by takes early_config_prune, "
                                   f"perf_model and top_k, not {', '.join(sorted(unknown))}")
    for name, hook in (("pre_hook", pre_hook), ("post_hook", post_hook)):
        if hook is not None and not callable(hook):
            raise InvalidArgumentError(f"autotune: {name} must be callable")
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
        t.prune_configs_by, t.pre_hook, t.post_hook = prune, pre_hook, post_hook
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
        self.prune_configs_by: dict = {}
        self.pre_hook = self.post_hook = None
        self.best_config: Config | None = None  # the last launch's config, as in Triton
        self._warned_in_place = False
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
    def choose(self, grid: object, args: tuple, kwargs: dict) -> Config:
        """The config for this launch (tuning once per key values); also sets best_config."""
        self.best_config = self._choose(grid, args, kwargs)
        return self.best_config

    def _choose(self, grid: object, args: tuple, kwargs: dict) -> Config:
        if self.caller_decides(kwargs):
            return Config({n: kwargs[n] for n in self.tuned_names})
        dev = _device.get_device()
        # Constexprs the caller passed (tuned or not, e.g. ACTIVATION="relu") are part of the key:
        # each value is another kernel, whose winner may differ.
        fixed = set(self.tuned_names) | set(self.kernel.constexprs)
        key_values = self._key_values(args, kwargs) + tuple(
            (n, kwargs[n]) for n in sorted(fixed) if n in kwargs)
        types = self._arg_types(args, kwargs)
        mem_key = (dev, key_values, types)
        best = self.cache.get(mem_key)
        if best is not None:
            return best
        pkey = self._persistent_key(dev, key_values, types)
        stored = _lookup(pkey)
        if stored is not None:
            # A winner stored by a tuner that pruned differently (same kernel and key) counts
            # only if this one's pruning keeps it.
            kept = self._pruned(args, kwargs) if self.prune_configs_by else range(len(self.configs))
            for i in kept:
                c = self.configs[i]
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

    def _named(self, args, kwargs) -> dict:
        k = self.kernel
        named = dict(k.defaults)
        named.update(zip(k.param_names, args))
        named.update(kwargs)
        return named

    def _pruned(self, args, kwargs) -> list[int]:
        """Indices of the configs to time after prune_configs_by."""
        idx = list(range(len(self.configs)))
        prune = self.prune_configs_by
        if not prune:
            return idx
        named = self._named(args, kwargs)
        early = prune.get("early_config_prune")
        if early is not None:
            kept = list(early(list(self.configs), named, **kwargs))
            idx = [i for i, c in enumerate(self.configs) if any(c is d or c == d for d in kept)]
            if not idx:
                raise InvalidArgumentError(f"autotune {self.kernel.fn.__name__}: "
                                           "early_config_prune kept no config")
        model, top_k = prune.get("perf_model"), prune.get("top_k")
        if model is not None and top_k is not None:
            n = int(top_k * len(idx)) if isinstance(top_k, float) and top_k <= 1 else int(top_k)
            est = {i: model(**{**named, **self.configs[i].kwargs}) for i in idx}
            idx = sorted(sorted(idx, key=est.__getitem__)[:max(n, 1)])
        return idx

    def _warn_in_place(self, grid, args, kwargs, config) -> None:
        """Once per kernel: arguments it reads and writes, which trials would change, that
        neither restore_value nor reset_to_zero covers."""
        if self._warned_in_place:
            return
        self._warned_in_place = True
        k = self.kernel
        try:
            program = k[grid].trace(*args, **{**config.kwargs, **kwargs})
        except MetileError:
            return
        covered = set(self.restore_value) | set(self.reset_to_zero)
        names = [k.runtime[i] for i in sorted(program.read_and_written)
                 if k.runtime[i] not in covered]
        if names:
            warnings.warn(
                f"autotune {k.fn.__name__}: the kernel reads and writes {', '.join(names)}, so "
                "each trial changes what the next one reads and the result depends on whether "
                "the winner was cached; pass restore_value=[" + ", ".join(map(repr, names)) +
                "] (or reset_to_zero) to autotune", UserWarning, stacklevel=6)

    def _hook(self, config, args, kwargs, trial=True) -> None:
        """Triton's order: the autotuner's pre_hook before each trial only, the config's
        before every launch with it."""
        hooks = [h for h in ((self.pre_hook if trial else None), config.pre_hook)
                 if h is not None]
        if hooks:
            named = self._named(args, {**config.kwargs, **kwargs})
            for h in hooks:
                h(named)

    def _tune(self, grid, args, kwargs, key_values) -> Config:
        k = self.kernel
        show = verbose_enabled(self.verbose)
        kv = ", ".join(f"{n}={v}" for n, v in zip(self.key, key_values))
        launches, failures = {}, {}  # by config index
        chosen = self._pruned(args, kwargs)
        if len(chosen) == 1 < len(self.configs):  # pruned to one: nothing to time
            return self.configs[chosen[0]]
        for i in chosen:
            c = self.configs[i]
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
        self._warn_in_place(grid, args, kwargs, self.configs[next(iter(launches))])
        saved = _Snapshot(k, args, kwargs, self.restore_value + self.reset_to_zero)
        times = {}
        try:
            for i, launch in launches.items():
                saved.zero(self.reset_to_zero)
                self._hook(self.configs[i], args, kwargs)
                error = None
                try:
                    times[i] = _time([launch], self.warmup, self.rep)[0]
                except Exception as e:
                    error = e
                    raise
                finally:
                    if self.post_hook is not None:
                        self.post_hook(self._named(args, {**self.configs[i].kwargs, **kwargs}),
                                       error)
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
        best = self.tuned.choose(self.grid, args, kwargs)
        self.tuned._hook(best, args, kwargs, trial=False)
        self.tuned.kernel[self.grid](*args, **{**best.kwargs, **kwargs})
        return best

    def prepare(self, *args: object, **kwargs: object) -> PreparedLaunch:
        """Tunes once and returns the winner's prepared launch (a fast dispatcher)."""
        best = self.tuned.choose(self.grid, args, kwargs)
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
