"""@metile.kernel, `kernel[grid](*args, **constexprs)`, argument classification, caches and
prepared launches.

Caches: traced programs per (kernel object, constexprs, argument types, options); compiled
kernels per (program, device); and, for the hot path, each launcher keeps the prepared C launch
of its last call and reuses it while the arguments are the same objects (buffers, arrays) or
equal scalars.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import re
import threading
import warnings
from typing import Any, Callable, Union

import numpy as np

from . import _device, _dtypes, _ffi, _loops
from ._buffer import Buffer, from_dlpack
from ._constexpr import constexpr
from ._errors import (InvalidArgumentError, InvalidProgramError, PerformanceWarning, TracingError,
                      check, error_for)
from ._trace import Retrace, Trace, set_active, active

_OPTIONS = ("num_threads", "allow_tf32", "opt_level", "check_bounds", "unchecked",
            "fuse_reductions", "keep_rows", "warps_m", "warps_n", "split_k")
# A launch grid: 1 to 3 ints, or a callable of the launch's meta-parameters returning them.
GridLike = Union[int, tuple, Callable[[dict], Any]]
# Compiler hints from the original and from Triton (docs/semantics.md, "Hints"), accepted in a
# launch and in a Config. num_warps / num_simdgroups (1..32) ask for 32 threads each on GPU
# devices when the kernel is not SIMT and num_threads is not given (a SIMT kernel's thread count
# is its T); num_stages (1..8) sets metile_compile_options.num_stages, so the compile fails where
# the depth asked for does not fit threadgroup memory; values outside those ranges are ignored.
# WM / WN (the warp grid of a dot: the checked options warps_m / warps_n set it) and SWIZZLE (a
# kernel orders its programs with tile_swizzle) are ignored.
HINTS = ("num_warps", "num_simdgroups", "num_stages", "WM", "WN", "SWIZZLE")
_SCALARS = (int, float, bool)
_CONSTS = (int, float, bool, str, type(None))
_U32x3 = ctypes.c_uint32 * 3
_run = _ffi.metile_launch_run
_LaunchPtr = ctypes.POINTER(_ffi.metile_launch)
_MAX_RETRACES = 64


def _is_constexpr_annotation(a) -> bool:
    if a is constexpr:
        return True
    return isinstance(a, str) and (a == "constexpr" or a.endswith(".constexpr"))


class Program:
    """A traced, verified Tile IR program (see `.text`)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.name = _ffi.metile_program_name(handle).decode()
        self._written = None

    @property
    def written(self) -> frozenset[int]:
        """Indices of the pointer parameters the program stores through."""
        if self._written is None:
            n, bits = ctypes.c_size_t(), ctypes.c_uint32()
            check(_ffi.metile_program_num_params(self._handle, ctypes.byref(n)))
            out = set()
            for i in range(n.value):
                check(_ffi.metile_program_param_access(self._handle, i, ctypes.byref(bits)))
                if bits.value & _ffi.METILE_PARAM_WRITE:
                    out.add(i)
            self._written = frozenset(out)
        return self._written

    @property
    def text(self) -> str:
        out = ctypes.c_char_p()
        check(_ffi.metile_program_print(self._handle, ctypes.byref(out)))
        return _ffi.take_string(out)

    def __str__(self):
        return self.text

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_program_release(self._handle)
            self._handle = None


class CompiledKernel:
    """A program compiled for one device."""

    def __init__(self, handle: Any, device: "_device.Device", where: str) -> None:
        self._handle = handle
        self.device = device
        self.where = where

    def source(self, stage: str = "tile_ir") -> str:
        """A stage's text: "tile_ir", "tile_ir_opt", "layouts", "gpu_ir", "gpu_ir_opt", "msl",
        "cuda", "cpp"."""
        out = ctypes.c_char_p()
        check(_ffi.metile_kernel_source(self._handle, stage.encode(), ctypes.byref(out)))
        return _ffi.take_string(out)

    @property
    def info(self) -> dict:
        i = _ffi.metile_kernel_info()
        i.struct_size = ctypes.sizeof(i)
        check(_ffi.metile_kernel_get_info(self._handle, ctypes.byref(i)))
        return {"threads_per_group": i.threads_per_group,
                "threadgroup_memory_bytes": i.threadgroup_memory_bytes,
                "threadgroup_memory_limit": i.threadgroup_memory_limit,
                "registers_per_thread": i.registers_per_thread,
                "from_cache": bool(i.from_cache), "compile_seconds": i.compile_seconds}

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_kernel_release(self._handle)
            self._handle = None


# Environment variables the library reads when it compiles (src/driver/compile.cpp,
# src/runtime/cuda): a compiled kernel answers only while they keep the values it was built under.
_COMPILE_ENVIRONMENT = ("METILE_CHECK", "METILE_GPU_OFF", "METILE_CUDA_WGMMA")


try:  # every launch asks: read the mapping os.environ writes through (0.1 us, not 1-2 us)
    _ENV_DATA = os.environ._data
    _ENV_KEYS = tuple(map(os.environ.encodekey, _COMPILE_ENVIRONMENT))

    def _compile_environment() -> tuple:
        return tuple(map(_ENV_DATA.get, _ENV_KEYS))
except AttributeError:  # not CPython's os.environ
    def _compile_environment() -> tuple:
        return tuple(map(os.environ.get, _COMPILE_ENVIRONMENT))


class PreparedLaunch:
    """A launch whose arguments were checked once; calling it launches again (asynchronous
    on GPU devices). Arguments are captured: buffers are reused and scalars are frozen.
    numpy arrays the device had to copy are copied in before and back after each run.
    Like the C object behind it, it runs on one thread at a time: threads that launch
    concurrently each prepare their own."""

    __slots__ = ("_handle", "device", "kernel", "args", "kwargs", "kwtypes", "keep", "copy_in",
                 "copy_back", "sync_after", "context", "file", "owner", "rewrap", "__weakref__")

    def __init__(self, handle: Any, device: "_device.Device", kernel: CompiledKernel,
                 args: tuple, kwargs: dict, keep: list, copy_in: list, copy_back: list,
                 context: str, file: str) -> None:
        self._handle = handle
        self.device = device
        self.kernel = kernel
        self.args, self.kwargs = args, kwargs
        self.kwtypes = tuple(map(type, kwargs.values()))
        self.keep = keep
        self.copy_in, self.copy_back = copy_in, copy_back
        # A numpy array has no synchronize of its own: on an asynchronous device (metal) a launch
        # that reads or writes one in place finishes before the call returns, as when it is copied.
        self.sync_after = bool(copy_back) or (
            device.asynchronous and any(isinstance(a, np.ndarray) for a in args))
        self.context = context
        self.file = file
        self.owner = threading.get_ident()  # the thread whose k[grid](...) calls reuse it
        # Whether fresh arrays may be swapped in (_rewrap): the device uses them in place and
        # runs launches to completion before returning.
        self.rewrap = not copy_in and not device.asynchronous

    def __call__(self) -> None:
        for arr, buf in self.copy_in:
            ctypes.memmove(buf._ptr, arr.ctypes.data, arr.nbytes)
        st = _run(self._handle)
        if st:
            raise error_for(st, self.context, self.file)
        if self.sync_after:
            self.device.synchronize()
            for arr, buf in self.copy_back:
                ctypes.memmove(arr.ctypes.data, buf._ptr, arr.nbytes)

    run = __call__

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_launch_release(self._handle)
            self._handle = None


class _Specialization:
    """One traced program and its compiled kernels (per device and compile environment)."""

    __slots__ = ("program", "kernels", "options")

    def __init__(self, program: Program, options: dict) -> None:
        self.program = program
        self.kernels = {}
        self.options = options


class KernelFunction:
    """A @metile.kernel function. Launch with kernel[grid](*args, **constexprs)."""

    def __init__(self, fn: Callable[..., None]) -> None:
        if not inspect.isfunction(fn):
            raise InvalidArgumentError(f"@metile.kernel needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.name = re.sub(r"\W", "_", fn.__name__) or "kernel"
        if self.name[0].isdigit():
            self.name = "k_" + self.name
        self.location = f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"
        self.params = list(inspect.signature(fn).parameters.values())
        for p in self.params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise InvalidArgumentError(
                    f"{self.location}: kernel {fn.__name__}: parameter `{p.name}` must be a plain "
                    "named parameter (no *args, **kwargs or positional-only parameters)")
        self.param_names = [p.name for p in self.params]
        self.constexprs = [p.name for p in self.params if _is_constexpr_annotation(p.annotation)]
        self.runtime = [p.name for p in self.params if p.name not in self.constexprs]
        self.defaults = {p.name: p.default for p in self.params if p.default is not p.empty}
        self._programs: dict = {}
        self._launchers: dict = {}
        self._lock = threading.RLock()  # tracing and compiling from several threads
        self._traceable = None
        self._loop_infos = None

    def __repr__(self):
        return f"<metile.kernel {self.fn.__qualname__} at {self.location}>"

    def __getitem__(self, grid: GridLike) -> "Launcher":
        # Keyed by the values' types too: (4.0,) == (4,), but only the second is a valid grid,
        # and a launcher made for the first must never answer for the second.
        key = (grid, tuple(map(type, grid)) if type(grid) is tuple else type(grid))
        try:
            launcher = self._launchers.get(key)
        except TypeError:  # an unhashable grid (a list)
            return Launcher(self, grid)
        if launcher is None:
            if len(self._launchers) >= 256:
                self._launchers.clear()
            launcher = self._launchers[key] = Launcher(self, grid)
        return launcher

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TracingError(f"kernel {self.fn.__name__} is launched with a grid: "
                           f"{self.fn.__name__}[grid](...) (e.g. [(metile.cdiv(N, BLOCK),)])")

    # ------------------------------------------------------------------------ arguments
    def bind(self, args: tuple, kwargs: dict) -> tuple[list, dict, dict]:
        """Splits a launch's arguments: runtime values (parameter order), constexprs, options."""
        if len(args) > len(self.params):
            raise InvalidArgumentError(
                f"kernel {self.fn.__name__} takes {len(self.runtime)} runtime arguments "
                f"({', '.join(self.runtime)}) but {len(args)} were given positionally")
        values, consts, options = {}, {}, {}
        for p, a in zip(self.params, args):
            if p.name in self.constexprs:
                raise InvalidArgumentError(
                    f"kernel {self.fn.__name__}: `{p.name}` is a constexpr and must be passed by "
                    f"keyword ({p.name}=...), not positionally")
            values[p.name] = a
        for k, v in kwargs.items():
            if k in values:
                raise InvalidArgumentError(
                    f"kernel {self.fn.__name__}: got multiple values for argument `{k}`")
            if k in self.constexprs:
                consts[k] = v.value if isinstance(v, constexpr) else v
            elif k in self.runtime:
                values[k] = v
            elif k in _OPTIONS or k in HINTS:
                options[k] = v
            else:
                raise InvalidArgumentError(
                    f"kernel {self.fn.__name__} got an unexpected keyword argument `{k}` "
                    f"(parameters: {', '.join(self.param_names)}; compile options: "
                    f"{', '.join(_OPTIONS)}; hints: {', '.join(HINTS)})")
        missing = [n for n in self.runtime if n not in values and n not in self.defaults]
        missing_c = [n for n in self.constexprs if n not in consts and n not in self.defaults]
        if missing or missing_c:
            parts = []
            if missing:
                parts.append("runtime argument(s) " + ", ".join(f"`{n}`" for n in missing))
            if missing_c:
                parts.append("constexpr(s) " + ", ".join(f"`{n}`" for n in missing_c) +
                             " (pass them by keyword)")
            raise InvalidArgumentError(f"kernel {self.fn.__name__} is missing " +
                                       " and ".join(parts))
        runtime = [values[n] if n in values else self.defaults[n] for n in self.runtime]
        for n in self.constexprs:
            if n not in consts:
                consts[n] = self.defaults[n]
        for n, v in consts.items():
            if isinstance(v, np.generic):
                consts[n] = v.item()
        return runtime, consts, options

    # --------------------------------------------------------------------- specialization
    def specialize(self, specs: list, consts: dict, options: dict) -> _Specialization:
        try:
            # Types are part of the key: BLOCK=4 and BLOCK=4.0 (or True and 1) compare equal
            # but trace different programs.
            key = (tuple(specs), tuple(sorted((k, type(v), v) for k, v in consts.items())),
                   tuple(sorted((k, type(v), v) for k, v in options.items())))
            hash(key)
        except TypeError:
            bad = [n for n, v in consts.items() if not _hashable(v)]
            raise InvalidArgumentError(
                f"kernel {self.fn.__name__}: constexpr {', '.join(bad)} must be hashable "
                "(int, float, bool, str, tuple)") from None
        spec = self._programs.get(key)
        if spec is None:
            with self._lock:
                spec = self._programs.get(key)
                if spec is None:
                    spec = _Specialization(self._trace(specs, consts, options), options)
                    self._programs[key] = spec
        return spec

    def _trace(self, specs, consts, options) -> Program:
        if self._traceable is None:
            self._traceable, self._loop_infos = _loops.rewrite(self.fn)
        fn = self._traceable
        code = self.fn.__code__
        fixups: dict = {}
        for _ in range(_MAX_RETRACES):
            t = Trace(self.name, fixups)
            outer = active()
            set_active(t)
            try:
                _ffi.metile_builder_set_loc(t.builder, code.co_filename.encode(),
                                            code.co_firstlineno)
                for n, v in consts.items():
                    check(_ffi.metile_builder_set_constexpr(t.builder, n.encode(),
                                                            repr(v).encode()))
                if options.get("num_threads"):
                    check(_ffi.metile_builder_set_num_threads(t.builder,
                                                              int(options["num_threads"])))
                kwargs = dict(consts)
                for name, (kind, dtype) in zip(self.runtime, specs):
                    ty = _ffi.metile_type()
                    ty.dtype = _dtypes.to_enum(dtype)
                    ty.is_pointer = kind == "ptr"
                    out = _ffi.metile_value()
                    check(_ffi.metile_builder_param(t.builder, name.encode(), ctypes.byref(ty),
                                                    ctypes.byref(out)))
                    kwargs[name] = t.value(out.value)
                result = fn(**kwargs)
                if result is not None:
                    raise TracingError(f"{self.location}: kernel {self.fn.__name__} returned a "
                                       "value; kernels write results through pointers (store)")
                prog = ctypes.POINTER(_ffi.metile_program)()
                st = _ffi.metile_builder_finish(t.builder, ctypes.byref(prog))
                if st:
                    raise error_for(st)
                return Program(prog)
            except Retrace:
                continue
            except InvalidProgramError as e:
                if "not in scope" in str(e):
                    raise InvalidProgramError(
                        f"{e}\n  (a variable assigned inside a metile.tile_range loop leaves the "
                        "loop only when the loop is written in the kernel function or in a "
                        "function it calls by name, and its source is available to "
                        "inspect.getsource)") from None
                raise
            finally:
                set_active(outer)
                t.release()
        raise TracingError(f"{self.location}: kernel {self.fn.__name__}: loop-carried types did "
                           "not settle")

    def compiled(self, spec: _Specialization, dev: "_device.Device") -> CompiledKernel:
        key = (dev, _compile_environment())
        k = spec.kernels.get(key)
        if k is None:
            with self._lock:
                k = spec.kernels.get(key)
                if k is None:
                    k = spec.kernels[key] = self._compile(spec, dev)
        return k

    def _compile(self, spec: _Specialization, dev) -> CompiledKernel:
        opts = _ffi.metile_compile_options()
        _ffi.metile_compile_options_init(ctypes.byref(opts))
        o = spec.options
        if "num_threads" in o:
            opts.num_threads = int(o["num_threads"])
        else:
            opts.num_threads = _threads_hint(o, spec.program)
        if "allow_tf32" in o:
            opts.allow_tf32 = -1 if o["allow_tf32"] is None else int(bool(o["allow_tf32"]))
        if "opt_level" in o:
            opts.opt_level = int(o["opt_level"])
        for flag in ("check_bounds", "unchecked"):
            if flag in o:
                setattr(opts, flag, int(bool(o[flag])))
        if "fuse_reductions" in o:
            opts.no_fuse_reductions = int(not o["fuse_reductions"])
        if "keep_rows" in o:
            opts.keep_rows = int(bool(o["keep_rows"]))
        stages = o.get("num_stages")  # a hint: acted on where it is a depth the option takes
        if isinstance(stages, (int, np.integer)) and not isinstance(stages, bool) and 1 <= stages <= 8:
            opts.num_stages = int(stages)
        for name in ("warps_m", "warps_n", "split_k"):  # options: the C API checks them
            if name in o:
                setattr(opts, name, int(o[name]))
        h = ctypes.POINTER(_ffi.metile_kernel)()
        st = _ffi.metile_kernel_compile(ctypes.byref(h), dev._handle, spec.program._handle,
                                        ctypes.byref(opts))
        if st:
            raise error_for(st, f"kernel {self.fn.__name__} at {self.location}, device "
                                f"{dev.name}", self.fn.__code__.co_filename)
        return CompiledKernel(h, dev, self.location)


def _threads_hint(options, program) -> int:
    """The thread count that num_warps / num_simdgroups ask for, or 0 (the compiler chooses):
    only for kernels without the SIMT view, and only counts a GPU can run (32..1024)."""
    for name in ("num_warps", "num_simdgroups"):
        n = options.get(name)
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and 1 <= n <= 32:
            if " num_threads(" in program.text.split("\n", 1)[0]:
                return 0
            return 32 * int(n)
    return 0


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


# ---------------------------------------------------------------------- classification
def _classify(kernel_name, name, v, dev):
    """(spec, metile_arg or None, buffer to keep, copied-array pair or None) for one value;
    `dev` None means "types only" (tracing without a launch)."""
    if isinstance(v, Buffer):
        if dev is not None and v.device is not dev:
            raise InvalidArgumentError(
                f"kernel {kernel_name}: argument `{name}` is a buffer on device {v.device.name} "
                f"but the launch runs on {dev.name}")
        return ("ptr", v.metile_dtype), v._arg, v, None
    if isinstance(v, np.ndarray):
        what = f"kernel {kernel_name}: argument `{name}`"
        dtype = _dtypes.from_numpy(v.dtype, what)
        if not v.flags.c_contiguous:
            raise InvalidArgumentError(
                f"{what}: the array is not C-contiguous (shape {v.shape}, strides {v.strides}); "
                "pass np.ascontiguousarray(...) (a copy) so results are not lost")
        if dev is None:
            return ("ptr", dtype), None, None, None
        buf = Buffer(data=v, device=dev)
        return ("ptr", dtype), buf._arg, buf, None if buf.shares_memory else (v, buf)
    arg = _ffi.metile_arg()
    if isinstance(v, np.generic):
        if isinstance(v, np.floating) and v.dtype == np.float64:
            raise InvalidArgumentError(
                f"kernel {kernel_name}: argument `{name}` is a numpy float64 scalar, which has "
                "no metile dtype; pass float(x) (f32) or np.float32(x)")
        dtype = _dtypes.from_numpy(v.dtype, f"kernel {kernel_name}: argument `{name}`")
        v = v.item()
        if dtype in _dtypes.FLOATS:
            arg.kind, arg.f = _ffi.METILE_ARG_F64, float(v)
        else:
            arg.kind, arg.i = _ffi.METILE_ARG_I64, int(v)
        return ("scalar", dtype), arg, None, None
    if isinstance(v, bool):
        arg.kind, arg.i = _ffi.METILE_ARG_I64, int(v)
        return ("scalar", "bool"), arg, None, None
    if isinstance(v, int):
        if not _dtypes.int_fits("i64", v):
            raise InvalidArgumentError(f"kernel {kernel_name}: argument `{name}` = {v} does not "
                                       "fit in 64 bits")
        arg.kind, arg.i = _ffi.METILE_ARG_I64, v
        return ("scalar", "i32" if _dtypes.int_fits("i32", v) else "i64"), arg, None, None
    if isinstance(v, float):
        arg.kind, arg.f = _ffi.METILE_ARG_F64, v
        return ("scalar", "f32"), arg, None, None
    if hasattr(v, "__dlpack__"):
        return _classify(kernel_name, name, from_dlpack(v, dev), dev)
    raise InvalidArgumentError(
        f"kernel {kernel_name}: argument `{name}` is a {type(v).__name__}; expected a numpy "
        "array, metile.Buffer, DLPack tensor, int, float, bool or numpy scalar")


_copy_warned = False


def _check_arrays(k, program, runtime, copied, dev):
    """A read-only array the kernel stores to is an error (its writes would be lost); an array
    the device cannot address in place is copied on every launch, which is worth a warning
    (once per process: it fires in loops)."""
    global _copy_warned
    written = program.written
    for i, (n, v) in enumerate(zip(k.runtime, runtime)):
        if not isinstance(v, np.ndarray):
            continue
        if i in written and not v.flags.writeable:
            raise InvalidArgumentError(
                f"kernel {k.fn.__name__}: argument `{n}` is a read-only numpy array but the "
                "kernel stores to it, so its results would be lost; pass a writable array "
                "(arr.copy()) or a metile.Buffer")
        # Read-only arrays are always copied (kernels must not write into them); only on an
        # asynchronous device does that copy also cost a synchronization.
        if (not _copy_warned and any(a is v for a, _ in copied)
                and (v.flags.writeable or dev.asynchronous)):
            _copy_warned = True
            warnings.warn(
                f"kernel {k.fn.__name__}: argument `{n}` is a numpy array that the {dev.name} "
                "device cannot use in place, so every launch copies it in"
                + (" and back, and synchronizes" if i in written else "")
                + "; pass a metile.Buffer (metile.Buffer(data=arr) once, reused across "
                "launches) instead. (Shown once per process.)", PerformanceWarning, stacklevel=4)


def _grid3(grid, meta, kernel_name) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, (int, np.integer)):
        grid = (grid,)
    try:
        dims = tuple(grid)
    except TypeError:
        raise InvalidArgumentError(
            f"kernel {kernel_name}: the grid must be an int, a tuple of 1 to 3 ints, or a "
            f"callable returning one; got {grid!r}") from None
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                          for d in dims):
        raise InvalidArgumentError(f"kernel {kernel_name}: the grid must be 1 to 3 ints, got "
                                   f"{grid!r}")
    if any(d < 0 or d >= 2**32 for d in dims):
        raise InvalidArgumentError(f"kernel {kernel_name}: grid {dims} is out of range")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _matches(launch, args, kwargs) -> bool:
    """The hot-path test: the same device, equal plain-constant keywords of the same types,
    and the same buffer/array objects and equal scalars as `launch` was prepared with."""
    if (launch.device is not _device._current or len(args) != len(launch.args)
            or kwargs != launch.kwargs or tuple(map(type, kwargs.values())) != launch.kwtypes):
        return False
    for a, b in zip(args, launch.args):
        if a is not b and (type(a) is not type(b) or type(a) not in _SCALARS or a != b):
            return False
    return True


_set_arg_memory = _ffi.metile_launch_set_arg_memory
_ndarray = np.ndarray
_char_at = ctypes.c_char.from_buffer
_byref = ctypes.byref


def _rewrap(launch, args, kwargs) -> bool:
    """Re-points `launch` (one whose arrays the device uses in place) at `args` when they differ
    from its own only by numpy arrays of the same shape, dtype and flags; False (launch
    untouched) otherwise, and also when the library declines (the slow path explains)."""
    old = launch.args
    if (launch.device is not _device._current or len(args) != len(old)
            or kwargs != launch.kwargs or tuple(map(type, kwargs.values())) != launch.kwtypes):
        return False
    fresh = []
    i = -1
    for a in args:
        i += 1
        b = old[i]
        if a is b:
            continue
        t = type(a)
        if t is _ndarray and type(b) is _ndarray:
            if a.shape != b.shape or a.dtype != b.dtype or not a.nbytes:
                return False
            fa = a.flags
            if not fa.c_contiguous or fa.writeable != b.flags.writeable:
                return False
            fresh.append(i)
        elif t is not type(b) or t not in _SCALARS or a != b:
            return False
    if not fresh:
        return False
    for n, i in enumerate(fresh):
        a = args[i]
        # byref(c_char.from_buffer(a)) is a's data pointer, got 5x faster than a.ctypes.data
        # (a is writable: the launch's own array was, or it would have been copied).
        if _set_arg_memory(launch._handle, i, _byref(_char_at(a)), a.nbytes):
            if n:  # some arguments were re-pointed already: this launch is stale now
                launch.rewrap = False
                launch.args = ()
            return False
        launch.keep[i] = a
    launch.args = args
    return True


_RECENT = 4  # prepared launches each launcher keeps (ping-pong buffers hit them)
_thread_id = threading.get_ident


class Launcher:
    """kernel[grid]: call it with the kernel's arguments to launch."""

    __slots__ = ("kernel", "grid", "_recent", "_environment", "_rewrapping")

    def __init__(self, kernel: KernelFunction, grid: GridLike) -> None:
        self.kernel = kernel
        self.grid = grid
        self._recent = []  # most recent first
        self._environment = _compile_environment()  # the one _recent's launches were compiled under
        self._rewrapping = False

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        recent = self._recent
        me = _thread_id()
        env = _compile_environment()
        if env != self._environment:  # launches compiled under other METILE_* settings
            recent = self._recent = []
            self._environment = env
        if self._rewrapping and recent:
            # The last call re-pointed recent[0] at fresh arrays: the next one likely does too.
            launch = recent[0]
            if launch.owner == me and launch.rewrap and _rewrap(launch, args, kwargs):
                st = _run(launch._handle)
                if st:
                    raise error_for(st, launch.context, launch.file)
                return
            self._rewrapping = False
        for i, launch in enumerate(recent):
            # Only the thread that prepared a launch reuses it (C launches are single-owner).
            if launch.owner == me and _matches(launch, args, kwargs):
                if launch.copy_in:
                    launch()
                else:
                    st = _run(launch._handle)
                    if st:
                        raise error_for(st, launch.context, launch.file)
                if i:
                    recent.insert(0, recent.pop(i))
                return
        # Fresh arrays like the ones a launch was prepared with (out = np.empty_like(x) each
        # call): once the launcher keeps all the launches it can (so alternating between a few
        # arrays still finds exact matches above), re-point one instead of preparing anew.
        for i, launch in enumerate(recent if len(recent) >= _RECENT else ()):
            if launch.owner == me and launch.rewrap and _rewrap(launch, args, kwargs):
                st = _run(launch._handle)
                if st:
                    raise error_for(st, launch.context, launch.file)
                if i:
                    recent.insert(0, recent.pop(i))
                self._rewrapping = True
                return
        launch = self._prepare(args, kwargs)
        if launch is not None:
            launch()
            # Reused only while kwargs hold plain constants (equality of arrays is not identity).
            if all(type(v) in _CONSTS for v in kwargs.values()):
                recent.insert(0, launch)
                del recent[_RECENT:]

    def prepare(self, *args: Any, **kwargs: Any) -> PreparedLaunch:
        """Traces and compiles (if needed) and returns a PreparedLaunch: calling it launches
        with these arguments, skipping all per-call checks. It does not launch by itself."""
        launch = self._prepare(args, kwargs)
        if launch is None:
            raise InvalidArgumentError(f"kernel {self.kernel.fn.__name__}: cannot prepare a "
                                       "launch over an empty grid")
        return launch

    def trace(self, *args: Any, **kwargs: Any) -> Program:
        """The traced Tile IR program for these arguments (nothing is compiled or launched)."""
        k = self.kernel
        runtime, consts, options = k.bind(args, kwargs)
        specs = [_classify(k.fn.__name__, n, v, None)[0] for n, v in zip(k.runtime, runtime)]
        return k.specialize(specs, consts, options).program

    def compile(self, *args: Any, **kwargs: Any) -> CompiledKernel:
        """The kernel compiled for the current device, for these arguments (no launch)."""
        k = self.kernel
        runtime, consts, options = k.bind(args, kwargs)
        dev = _device.get_device()
        specs = [_classify(k.fn.__name__, n, v, dev)[0] for n, v in zip(k.runtime, runtime)]
        return k.compiled(k.specialize(specs, consts, options), dev)

    def _prepare(self, args, kwargs) -> PreparedLaunch | None:
        k = self.kernel
        runtime, consts, options = k.bind(args, kwargs)
        dev = _device.get_device()
        specs, cargs, keep, copied = [], [], [], []
        for n, v in zip(k.runtime, runtime):
            spec, arg, obj, pair = _classify(k.fn.__name__, n, v, dev)
            specs.append(spec)
            cargs.append(arg)
            keep.append(obj)  # one slot per argument: _rewrap replaces entries
            if pair is not None:
                copied.append(pair)
        meta = dict(zip(k.runtime, runtime))
        meta.update(options)
        meta.update(consts)
        grid = _grid3(self.grid, meta, k.fn.__name__)
        spec = k.specialize(specs, consts, options)
        _check_arrays(k, spec.program, runtime, copied, dev)
        compiled = k.compiled(spec, dev)
        if 0 in grid:
            return None
        n = len(cargs)
        arr = (_ffi.metile_arg * max(n, 1))()
        for i, a in enumerate(cargs):
            arr[i] = a
        h = _LaunchPtr()
        context = f"kernel {k.fn.__name__} at {k.location}, device {dev.name}"
        st = _ffi.metile_launch_create(ctypes.byref(h), compiled._handle, _U32x3(*grid), arr, n)
        file = k.fn.__code__.co_filename
        if st:
            raise error_for(st, context, file)
        # Arrays the device copied (not addressable in place) are copied in before each run
        # and, when writable, back after it, so no kernel write is lost.
        copy_back = [(a, b) for a, b in copied if a.flags.writeable]
        return PreparedLaunch(h, dev, compiled, args, dict(kwargs), keep, copied, copy_back,
                              context, file)


def kernel(fn: Callable[..., None] | None = None) -> Any:
    """Decorator: `@metile.kernel` turns a function into a launchable tile kernel."""
    if fn is None:
        return kernel
    return KernelFunction(fn)
