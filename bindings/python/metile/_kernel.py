"""@metile.kernel, `kernel[grid](*args, **constexprs)`, argument classification, caches and
prepared launches.

Caches: traced programs per (kernel object, constexprs, argument types, options); compiled
kernels per (program, device); and, for the hot path, C launches per kernel keyed by value
(_launch_key: device, thread, argument dtypes, constexprs), which re-bind the arguments of each
call and keep none of them alive (kernel.clear_cache() drops all three).
"""

from __future__ import annotations

import ctypes
import inspect
import math
import os
import re
import threading
import warnings
import weakref
from typing import Any, Callable, Union

import numpy as np

# _lang_triton and _lang_combine install the Triton-habit Value methods (x.cumsum(), x.T,
# x.split(), ...) that live with their functions: every trace starts here, so they are there
# whenever a kernel is traced.
from . import (_device, _dtypes, _ffi, _interrupt, _lang, _lang_combine, _lang_triton,  # noqa: F401
               _loops)
from ._buffer import Buffer, from_dlpack, torch_orders_implicitly
from ._dlpack import elements_spanned
from ._constexpr import constexpr
from ._errors import (InvalidArgumentError, InvalidProgramError, PerformanceWarning, TracingError,
                      check, error_for)
from ._trace import Retrace, Trace, set_active, active, loc_file

_OPTIONS = ("num_threads", "allow_tf32", "input_precision", "opt_level", "check_bounds", "unchecked",
            "fuse_reductions", "keep_rows", "warps_m", "warps_n", "split_k", "maxnreg")
# A launch grid: 1 to 3 ints, or a callable of the launch's meta-parameters returning them.
GridLike = Union[int, tuple, Callable[[dict], Any]]
# Compiler hints from the original and from Triton (docs/semantics.md, "Hints"), accepted in a
# launch and in a Config. num_warps / num_simdgroups (1..32) ask for 32 threads each on GPU
# devices when the kernel is not SIMT and num_threads is not given (a SIMT kernel's thread count
# is its T); num_stages (1..8) sets metile_compile_options.num_stages, so the compile fails where
# the depth asked for does not fit threadgroup memory; values outside those ranges are ignored.
# WM / WN (the warp grid of a dot: the checked options warps_m / warps_n set it) and SWIZZLE (a
# kernel orders its programs with tile_swizzle) are ignored, as is Triton's num_ctas (a program is
# one threadgroup / CTA on every device).
HINTS = ("num_warps", "num_simdgroups", "num_stages", "WM", "WN", "SWIZZLE", "num_ctas")
_SCALARS = (int, float, bool)
_CONSTS = (int, float, bool, str, type(None))
_U32x3 = ctypes.c_uint32 * 3
_run = _ffi.metile_launch_run
_LaunchPtr = ctypes.POINTER(_ffi.metile_launch)
# Launch keywords that are not compile options: they change how each run goes, not the kernel.
_RUN_OPTIONS = ("timeout", "stream")
_DEFAULT_RUN = (-1.0, 0)  # metile_launch_options' defaults: METILE_TIMEOUT_S, the device's stream


def _run_options(who: str, timeout: Any, stream: Any, device) -> tuple[float, int]:
    """(timeout_s, stream handle) of a launch's `timeout=` and `stream=` keywords; `who` names
    the launch in errors."""
    from ._stream import stream_handle
    if timeout is None:
        seconds = -1.0
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)) \
            or not float(timeout) > 0:
        raise InvalidArgumentError(f"{who}: timeout={timeout!r} must be None "
                                   "(METILE_TIMEOUT_S), seconds > 0, or math.inf (no limit)")
    else:
        # The C API's 0 is "no limit", whatever METILE_TIMEOUT_S says.
        seconds = 0.0 if math.isinf(timeout) else float(timeout)
    try:
        return seconds, stream_handle(stream, device)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{who}: {e}") from None


def _set_run_options(handle, options: tuple[float, int]) -> int:
    o = _ffi.metile_launch_options(ctypes.sizeof(_ffi.metile_launch_options), *options)
    return _ffi.metile_launch_set_options(handle, ctypes.byref(o))


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
        return self._access()[0]

    @property
    def read_and_written(self) -> frozenset[int]:
        """Indices of the pointer parameters the program both loads from and stores through."""
        return self._access()[1]

    def _access(self) -> tuple[frozenset[int], frozenset[int]]:
        if self._written is None:
            n, bits = ctypes.c_size_t(), ctypes.c_uint32()
            check(_ffi.metile_program_num_params(self._handle, ctypes.byref(n)))
            written, both = set(), set()
            for i in range(n.value):
                check(_ffi.metile_program_param_access(self._handle, i, ctypes.byref(bits)))
                if bits.value & _ffi.METILE_PARAM_WRITE:
                    written.add(i)
                    if bits.value & _ffi.METILE_PARAM_READ:
                        both.add(i)
            self._written = (frozenset(written), frozenset(both))
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
                 "copy_back", "sync_after", "context", "file", "written", "__weakref__")

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
        self.written = frozenset()  # pointer parameters the kernel stores through

    def __call__(self) -> None:
        for arr, buf in self.copy_in:
            ctypes.memmove(buf._ptr, *_view_span(arr))
        st = _run(self._handle)
        if st:
            raise error_for(st, self.context, self.file)
        if self.sync_after:
            self.device.synchronize()
            for arr, buf in self.copy_back:
                address, nbytes = _view_span(arr)
                ctypes.memmove(address, buf._ptr, nbytes)

    run = __call__

    def set_options(self, timeout: Any = None, stream: Any = None) -> None:
        """The time limit (seconds; math.inf: none; None: METILE_TIMEOUT_S) and the stream of every
        later run (see Launcher.__call__)."""
        st = _set_run_options(self._handle, _run_options(self.context, timeout, stream,
                                                         self.device))
        if st:
            raise error_for(st, self.context, self.file)

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
        self._launches: dict = {}  # _launch_key -> _CachedLaunch
        # The launch hot path: runtime arguments given positionally, keywords that are
        # constexprs, options and hints only.
        n = len(self.runtime)
        self._positional = n if self.param_names[:n] == self.runtime else -1
        self._keywords = frozenset(self.constexprs) | frozenset(_OPTIONS) | frozenset(HINTS)
        # timeout= and stream=, unless the kernel has parameters of those names
        self._run_keywords = frozenset(_RUN_OPTIONS) - frozenset(self.param_names)
        self._const_defaults = {c: self.defaults[c] for c in self.constexprs
                                if c in self.defaults}
        self._lock = threading.RLock()  # tracing and compiling from several threads
        self._traceable = None
        self._loop_infos = None

    def __repr__(self):
        return f"<metile.kernel {self.fn.__qualname__} at {self.location}>"

    def __getitem__(self, grid: GridLike) -> "Launcher":
        return Launcher(self, grid)

    def clear_cache(self) -> None:
        """Drops this kernel's cached launches, traced programs and compiled kernels (the
        process-wide compile cache keeps its binaries): the next launch traces again."""
        with self._lock:
            self._launches.clear()
            self._programs.clear()

    # Called from a kernel being traced, a kernel is a device function: its body is inlined
    # (as Triton's @triton.jit helpers are), its loops carried like the caller's.
    __metile_inline__ = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if active() is not None:
            return _loops._helper(self.fn)(*args, **kwargs)
        raise TracingError(f"kernel {self.fn.__name__} is launched with a grid: "
                           f"{self.fn.__name__}[grid](...) (e.g. [(metile.cdiv(N, BLOCK),)]); "
                           "called without one, it is a device function, usable only inside "
                           "another kernel")

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
                check(_ffi.metile_builder_set_loc(t.builder, loc_file(code.co_filename),
                                                  code.co_firstlineno))
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
                # Integer arguments equal to 1 are the constant (after every parameter: the
                # builder takes those first); the parameter stays, so launches pass it as before.
                kwargs.update((n, t.const(1, "i32")) for n, s in zip(self.runtime, specs)
                              if s[0] == "one")
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
        # The default precision of dots without their own (allow_tf32: Triton's alias).
        tf32 = o.get("allow_tf32")
        opts.dot_precision = _lang.dot_precision_code(
            o.get("input_precision"), None if tf32 is None else bool(tf32),
            f"kernel {self.fn.__name__} at {self.location}")
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
        for name in ("warps_m", "warps_n", "split_k", "maxnreg"):  # the C API checks their ranges
            if name in o:
                v = o[name]
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                    raise InvalidArgumentError(f"kernel {self.fn.__name__} at {self.location}: "
                                               f"{name} must be an int, got {v!r}")
                setattr(opts, name, int(v))
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
                f"kernel {kernel_name}: argument `{name}` is a buffer on device {v.device.label} "
                f"but the launch runs on {dev.label}")
        return ("ptr", v.metile_dtype), v._arg, v, None
    if isinstance(v, np.ndarray):
        what = f"kernel {kernel_name}: argument `{name}`"
        dtype = _dtypes.from_numpy(v.dtype, what)
        if v.flags.c_contiguous:
            if dev is None:
                return ("ptr", dtype), None, None, None
            buf = Buffer(data=v, device=dev)
        else:
            # A view (a.T, a[:, 2:7], a[::2]) is passed in place, as Triton passes a tensor's
            # data pointer: the kernel indexes it with the strides it is given, and the bounds
            # guard allows the bytes from its first element to its highest addressed one.
            if any(s < 0 and d > 1 for d, s in zip(v.shape, v.strides)):
                raise InvalidArgumentError(
                    f"{what}: the view has negative strides {v.strides} (as a[::-1]); kernels "
                    "index pointers upwards from the first element, so pass "
                    "np.ascontiguousarray(...) (a copy) or the view's reverse")
            if not v.flags.aligned:
                raise InvalidArgumentError(f"{what}: the view's elements are not aligned to "
                                           f"their {v.itemsize}-byte size (strides {v.strides})")
            if dev is None:
                return ("ptr", dtype), None, None, None
            address, nbytes = _view_span(v)
            if not nbytes:
                buf = Buffer.zeros(v.shape, dtype, dev)
            else:
                buf = Buffer._over_view(v, dtype, dev, address, nbytes)
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
        if v == 1:  # Triton's specialization: traced as the constant 1 (a unit stride, mostly)
            return ("one", "i32"), arg, None, None
        return ("scalar", "i32" if _dtypes.int_fits("i32", v) else "i64"), arg, None, None
    if isinstance(v, float):
        arg.kind, arg.f = _ffi.METILE_ARG_F64, v
        return ("scalar", "f32"), arg, None, None
    if hasattr(v, "__dlpack__"):
        return _classify(kernel_name, name, from_dlpack(v, dev, view=True), dev)
    raise InvalidArgumentError(
        f"kernel {kernel_name}: argument `{name}` is a {type(v).__name__}; expected a numpy "
        "array, metile.Buffer, DLPack tensor, int, float, bool or numpy scalar")


_copy_warned = False


def _read_only_error(kernel_name, name) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"kernel {kernel_name}: argument `{name}` is a read-only numpy array but the kernel "
        "stores to it, so its results would be lost; pass a writable array (arr.copy()) or a "
        "metile.Buffer")


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
            raise _read_only_error(k.fn.__name__, n)
        # Read-only arrays are always copied (kernels must not write into them); only on an
        # asynchronous device does that copy also cost a synchronization.
        if (not _copy_warned and v.size and any(a is v for a, _ in copied)
                and (v.flags.writeable or dev.asynchronous)):
            _copy_warned = True
            warnings.warn(
                f"kernel {k.fn.__name__}: argument `{n}` is a numpy array that the {dev.name} "
                "device cannot use in place, so every launch copies it in"
                + (" and back, and synchronizes" if i in written else "")
                + "; pass a metile.Buffer (metile.Buffer(data=arr) once, reused across "
                "launches) instead. (Shown once per process.)", PerformanceWarning, stacklevel=4)


def _grid3(grid, kernel_name) -> tuple[int, int, int]:
    if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int and 0 <= grid[0] < 2**32:
        return (grid[0], 1, 1)  # the common case, checked in 0.1 us
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


_set_arg = _ffi.metile_launch_set_arg
_set_arg_memory = _ffi.metile_launch_set_arg_memory
_set_arg_device_memory = _ffi.metile_launch_set_arg_device_memory
_set_grid = _ffi.metile_launch_set_grid
_ndarray = np.ndarray
_char_at = ctypes.c_char.from_buffer
_addressof = ctypes.addressof
_byref = ctypes.byref
_current_device = _device._current.get  # this thread's (task's) device, None before first use
_weakref = weakref.ref
_thread_id = threading.get_ident
_CACHE_SIZE = 64  # cached launches per kernel; each holds a C launch, never a caller's array
# What a host device's launch points a Buffer or DLPack argument at between calls, so the cached
# launch drops its reference to the caller's memory once the run is over.
_PLACEHOLDER = (ctypes.c_uint64 * 16)()
_PLACEHOLDER_ADDR = ctypes.addressof(_PLACEHOLDER)


def _byte_span(a) -> tuple[int, int] | None:
    """(address, bytes) of the memory array `a`'s elements occupy, or None when a launch cannot
    point at it in place (no elements)."""
    n = a.nbytes
    if not n:
        return None
    if a.flags.c_contiguous:
        try:
            return _addressof(_char_at(a)), n  # 5x faster than a.ctypes.data
        except TypeError:  # read-only memory
            return a.__array_interface__["data"][0], n
    if not a.flags.aligned or any(s < 0 and d > 1 for d, s in zip(a.shape, a.strides)):
        return None  # refused with a message by _classify
    return _view_span(a)


def _view_span(a) -> tuple[int, int]:
    """(address, bytes) from the first element of `a` (a view without negative strides, so
    that is its lowest addressed byte) to the end of its highest addressed element."""
    address = a.__array_interface__["data"][0]
    if not a.size:
        return address, 0
    return address, a.itemsize + sum((d - 1) * s for d, s in zip(a.shape, a.strides))


def _launch_key(args: tuple, kwargs: dict, device) -> tuple | None:
    """The key of a cached launch: the device, the calling thread (a C launch runs on one thread
    at a time), the compile environment, each runtime argument's specialization (the dtype of
    an array, buffer or tensor; the dtype a scalar is passed as; whether an int is 1) and the constexpr and option
    keywords with their types (BLOCK=4 and BLOCK=4.0 trace different programs). Argument
    values (addresses, scalars) are not part of it: a hit re-binds them. None when an argument
    has no key; such launches are prepared afresh each call."""
    sig = []
    for a in args:
        t = type(a)
        if t is _ndarray:
            sig.append(a.dtype)  # read-only arrays a kernel writes are refused at binding
        elif t is int:
            if a == 1:
                sig.append(1)  # traced as the constant 1 (_classify): a specialization of its own
            elif -2147483648 <= a < 2147483648:
                sig.append(int)
            elif -2**63 <= a < 2**63:
                sig.append("i64")
            else:
                return None
        elif t is float or t is bool:
            sig.append(t)
        elif t is Buffer:
            sig.append((a.metile_dtype, a.device))
        elif isinstance(a, np.generic):
            sig.append(t)
        elif isinstance(a, _ndarray):  # a subclass (np.memmap)
            sig.append((t, a.dtype))
        elif hasattr(a, "__dlpack__"):
            dtype = getattr(a, "dtype", None)
            if dtype is None:
                return None
            sig.append((t, dtype))
        else:
            return None
    if kwargs:
        return (device, _thread_id(), _compile_environment(), *sig, *kwargs.items(),
                *map(type, kwargs.values()))
    return (device, _thread_id(), _compile_environment(), *sig)


class _CachedLaunch:
    """A C launch kept for the calls whose _launch_key matches. It holds no reference to a
    caller's array: each call binds the pointer arguments anew (numpy memory by address, which
    the launch does not own; on host devices a Buffer by address too) and remembers them only
    through weak references, so an array dropped by its caller is freed. A Buffer or DLPack
    tensor the launch must own while it runs (GPU devices, or memory the host device cannot
    address) stays referenced by the C launch until its next call on host devices is over,
    and on asynchronous devices until the next call binds another or clear_cache()."""

    __slots__ = ("_handle", "compiled", "device", "grid", "bound", "ptrs", "scalars", "context",
                 "file", "asynchronous", "written", "names", "kernel_name", "options", "tensors")

    def __init__(self, launch: PreparedLaunch, grid: tuple, ptrs: list, scalars: list,
                 names: list, kernel_name: str) -> None:
        self._handle, launch._handle = launch._handle, None
        self.compiled = launch.kernel
        self.device = launch.device
        self.asynchronous = launch.device.asynchronous
        self.grid = grid
        self.bound = [None] * len(ptrs + scalars)  # per argument: a weak reference or a scalar
        self.tensors = {}  # argument -> _tensor_guard of the torch tensor the launch imported there
        self.ptrs, self.scalars = ptrs, scalars
        self.context, self.file = launch.context, launch.file
        self.names, self.kernel_name = names, kernel_name
        self.written = frozenset(i for i, n in enumerate(names) if n in launch.written)
        self.options = None  # set by the first run

    def run(self, args: tuple, grid: tuple, options: tuple = _DEFAULT_RUN) -> bool:
        """Binds `args` and launches; False (nothing launched) when an array cannot be used in
        place here, so the caller prepares a launch that copies it."""
        h = self._handle
        if options != self.options:
            st = _set_run_options(h, options)
            if st:
                raise error_for(st, self.context, self.file)
            self.options = options
        if grid != self.grid:
            st = _set_grid(h, _U32x3(*grid))
            if st:
                raise error_for(st, self.context, self.file)
            self.grid = grid
        bound = self.bound
        host = not self.asynchronous
        sync = False
        owned = None
        for i in self.ptrs:
            a = args[i]
            b = bound[i]
            if b is not None and b() is a:
                if i not in self.tensors:
                    sync = sync or isinstance(a, _ndarray)
                    continue
                if _tensor_guard(a) == self.tensors[i]:
                    continue  # the launch still holds this tensor's import: nothing to redo
            if i in self.tensors:
                del self.tensors[i]
            if isinstance(a, _ndarray):
                if i in self.written and not a.flags.writeable:
                    raise _read_only_error(self.kernel_name, self.names[i])
                span = _byte_span(a)
                if span is None or _set_arg_memory(h, i, span[0], span[1]):
                    bound[i] = None
                    return False
                bound[i] = _weakref(a)
                sync = True
                continue
            if type(a) is not Buffer:
                guard = _tensor_guard(a) if not host else None
                if guard is not None and _bind_tensor_memory(h, i, a, guard, self.device):
                    bound[i] = _weakref(a)
                    self.tensors[i] = guard
                    continue
                buf = from_dlpack(a, self.device, view=True)  # owned by the C launch from here on
                st = _set_arg(h, i, _byref(buf._arg))
                # A torch tensor on the legacy stream is bound again by reference while it
                # keeps its memory and shape (its import, held by the launch, stays valid).
                bound[i] = _weakref(a) if guard is not None and not st else None
                if bound[i] is not None:
                    self.tensors[i] = guard
                a = buf
            elif host and a._ptr and not _set_arg_memory(h, i, a._ptr, max(a.nbytes, 1)):
                bound[i] = _weakref(a)
                continue
            else:
                st = _set_arg(h, i, _byref(a._arg))
                bound[i] = _weakref(a)
            if st:
                bound[i] = None
                raise error_for(st, self.context, self.file)
            if host:
                owned = owned or []
                owned.append(i)
        for i in self.scalars:
            a = args[i]
            b = bound[i]
            if a is b or (type(a) is type(b) and a == b):
                continue
            st = _set_arg(h, i, _byref(_scalar_arg(a)))
            if st:
                bound[i] = None
                raise error_for(st, self.context, self.file)
            bound[i] = a
        try:
            st = _run(h)
        finally:
            if owned:
                for i in owned:
                    _set_arg_memory(h, i, _PLACEHOLDER_ADDR, ctypes.sizeof(_PLACEHOLDER))
                    bound[i] = None
        if st:
            raise error_for(st, self.context, self.file)
        if sync and not host:
            # A numpy array has no synchronize of its own: a launch that uses one in place
            # finishes before the call returns.
            self.device.synchronize()
        return True

    def __del__(self):
        if _ffi is not None and getattr(self, "_handle", None):
            _ffi.metile_launch_release(self._handle)
            self._handle = None


def _tensor_guard(t) -> tuple | None:
    """What must not change for a cached launch to keep a torch tensor's import: its address,
    shape and strides, and the implicit ordering of torch's stream with metile's
    (torch_orders_implicitly); None when that ordering does not hold or `t` is no torch tensor."""
    if not torch_orders_implicitly(t):
        return None
    return (t.data_ptr(), t.shape, t.stride())


def _bind_tensor_memory(h, i, t, guard, dev) -> bool:
    """Points argument `i` of launch `h` at the bytes a torch CUDA tensor's elements span, by
    address: no DLPack import (about 17 us of Python a tensor on an H100, against one C call).
    Only under torch_orders_implicitly (the caller's guard): torch's later work on the legacy
    stream, reuse of the tensor's memory by its allocator included, waits for the launch, so the
    launch need not hold the tensor. The library checks that the range lies inside one
    allocation of the device's GPU; False (bind through DLPack instead) where it cannot."""
    address, shape, strides = guard
    if not address or 0 in shape or t.device.index != dev.ordinal:
        return False
    n = elements_spanned(shape, strides)
    return n is not None and _set_arg_device_memory(h, i, address, n * t.element_size()) == 0


def _scalar_arg(v) -> "_ffi.metile_arg":
    arg = _ffi.metile_arg()
    if isinstance(v, np.generic):
        v = v.item()
        if isinstance(v, float):
            arg.kind, arg.f = _ffi.METILE_ARG_F64, v
        else:
            arg.kind, arg.i = _ffi.METILE_ARG_I64, int(v)
    elif isinstance(v, float):
        arg.kind, arg.f = _ffi.METILE_ARG_F64, v
    else:
        arg.kind, arg.i = _ffi.METILE_ARG_I64, int(v)
    return arg


class Launcher:
    """kernel[grid]: call it with the kernel's arguments to launch.

    Launches are cached on the kernel by value (_launch_key), not on this object: a grid
    callable is evaluated on every call and a new Launcher per call (kernel[lambda meta: ...])
    costs no more than a kept one."""

    __slots__ = ("kernel", "grid")

    def __init__(self, kernel: KernelFunction, grid: GridLike) -> None:
        self.kernel = kernel
        self.grid = grid

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Launches over the grid. Besides the kernel's arguments, constexprs and compile
        options: `timeout=` seconds (> 0; math.inf: none; default METILE_TIMEOUT_S) after which
        the launch fails naming the kernel and the limit (on cuda and metal: when the host next
        waits for it; cuda's kernel leaves at its next check, metal's at its next loop check),
        and `stream=` (cuda) the stream to queue on: a metile.Stream, a torch or CuPy stream, or
        a CUstream int."""
        k = self.kernel
        run = None
        if kwargs and not k._run_keywords.isdisjoint(kwargs):
            kwargs = dict(kwargs)
            run = (kwargs.pop("timeout", None) if "timeout" in k._run_keywords else None,
                   kwargs.pop("stream", None) if "stream" in k._run_keywords else None)
        if len(args) != k._positional or (kwargs and not kwargs.keys() <= k._keywords):
            runtime, consts, options = k.bind(args, kwargs)
            args, kwargs = tuple(runtime), {**consts, **options}
        dev = _current_device() or _device.get_device()
        run = _DEFAULT_RUN if run is None else _run_options(f"kernel {k.fn.__name__}", *run, dev)
        grid = self.grid
        if callable(grid):
            meta = dict(zip(k.runtime, args))
            meta.update(k._const_defaults)
            meta.update(kwargs)
            grid = grid(meta)
        g = _grid3(grid, k.fn.__name__)
        try:
            key = _launch_key(args, kwargs, dev)
            entry = k._launches.get(key) if key is not None else None
        except TypeError:  # an unhashable keyword value
            key = entry = None
        if entry is not None:
            if g[0] and g[1] and g[2] and entry.run(args, g, run):
                return
            if not (g[0] and g[1] and g[2]):
                return
        launch = self._prepare(args, kwargs, g)
        if launch is None:
            return
        if key is None or (launch.copy_in and launch.device.asynchronous):
            if run != _DEFAULT_RUN:
                st = _set_run_options(launch._handle, run)
                if st:
                    raise error_for(st, launch.context, launch.file)
            launch()  # prepared for this call only: it copies arrays, or has no key
            return
        ptrs = [i for i, (n, v) in enumerate(zip(k.runtime, args))
                if not isinstance(v, _SCALARS + (np.generic,))]
        scalars = [i for i in range(len(args)) if i not in ptrs]
        entry = _CachedLaunch(launch, g, ptrs, scalars, k.runtime, k.fn.__name__)
        del launch
        if not entry.run(args, g, run):
            launch = self._prepare(args, kwargs, g)
            if run != _DEFAULT_RUN:
                st = _set_run_options(launch._handle, run)
                if st:
                    raise error_for(st, launch.context, launch.file)
            launch()
            return
        launches = k._launches
        if len(launches) >= _CACHE_SIZE:
            try:
                del launches[next(iter(launches))]
            except (KeyError, StopIteration, RuntimeError):  # another thread got there first
                pass
        launches[key] = entry

    def prepare(self, *args: Any, **kwargs: Any) -> PreparedLaunch:
        """Traces and compiles (if needed) and returns a PreparedLaunch: calling it launches
        with these arguments, skipping all per-call checks. It does not launch by itself.
        `timeout=` and `stream=` apply to each of its runs (see __call__)."""
        k = self.kernel
        run = {n: kwargs.pop(n) for n in list(kwargs) if n in k._run_keywords}
        launch = self._prepare(args, kwargs)
        if launch is None:
            raise InvalidArgumentError(f"kernel {self.kernel.fn.__name__}: cannot prepare a "
                                       "launch over an empty grid")
        if run:
            launch.set_options(**run)
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

    def _prepare(self, args, kwargs, grid=None) -> PreparedLaunch | None:
        k = self.kernel
        _interrupt.install()
        runtime, consts, options = k.bind(args, kwargs)
        dev = _device.get_device()
        specs, cargs, keep, copied = [], [], [], []
        for n, v in zip(k.runtime, runtime):
            spec, arg, obj, pair = _classify(k.fn.__name__, n, v, dev)
            specs.append(spec)
            cargs.append(arg)
            keep.append(obj)
            if pair is not None:
                copied.append(pair)
        meta = dict(zip(k.runtime, runtime))
        meta.update(options)
        meta.update(consts)
        if grid is None:
            grid = self.grid
            grid = _grid3(grid(meta) if callable(grid) else grid, k.fn.__name__)
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
        launch = PreparedLaunch(h, dev, compiled, args, dict(kwargs), keep, copied, copy_back,
                                context, file)
        launch.written = frozenset(k.runtime[i] for i in spec.program.written)
        return launch


def kernel(fn: Callable[..., None] | None = None, *, do_not_specialize: Any = (),
           debug: bool | None = None, noinline: bool = False) -> Any:
    """Decorator: `@metile.kernel` (or `@metile.jit`) turns a function into a launchable tile
    kernel; called from another kernel it is a device function, inlined at trace time.
    Triton's decorator options `do_not_specialize`, `debug` and `noinline` are accepted and
    change nothing (metile picks its specializations itself; device functions are always
    inlined)."""
    if fn is None:
        return lambda f: kernel(f, do_not_specialize=do_not_specialize, debug=debug,
                                noinline=noinline)
    return KernelFunction(fn)


jit = kernel
