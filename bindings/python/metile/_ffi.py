"""ctypes declarations of the C ABI in include/metile/metile.h, and locating libmetile.

Every METILE_API function and struct of the header is declared here; the test
tests/test_ffi_header.py parses the header and checks these declarations against it, so the
binding cannot drift. The enum constants are generated from the header into _enums.py
(bindings/python/regen.py; scripts/test.sh checks it is current). Functions the loaded library
does not export (an older build) are bound to a stub that raises a clear error when called;
`has(name)` tells whether a symbol is present.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (POINTER, Structure, c_char_p, c_double, c_int32, c_int64, c_size_t,
                    c_uint32, c_uint64, c_void_p)

# ------------------------------------------------------------------------------------------ enums
# C enums are 32-bit ints (each has a _FORCE32 sentinel).
metile_status = c_int32
metile_dtype = c_int32
metile_address_space = c_int32
metile_op = c_int32
metile_dot_precision = c_int32
metile_arg_kind = c_int32
metile_value = c_uint32

# The constants (METILE_OK, METILE_OP_TANH, ...) and ENUMS come from the generated _enums.
from ._enums import *  # noqa: E402,F401,F403


# ---------------------------------------------------------------------------- opaque handles
class metile_device(Structure):
    pass


class metile_buffer(Structure):
    pass


class metile_builder(Structure):
    pass


class metile_program(Structure):
    pass


class metile_kernel(Structure):
    pass


class metile_launch(Structure):
    pass


class metile_event(Structure):
    pass


# ---------------------------------------------------------------------------------- structs
class metile_type(Structure):
    _fields_ = [
        ("dtype", metile_dtype),
        ("rank", c_int32),
        ("shape", c_int64 * 2),
        ("is_pointer", c_int32),
        ("address_space", metile_address_space),
    ]


class metile_device_info(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("name", c_char_p),
        ("description", c_char_p),
        ("architecture", c_char_p),
        ("simd_width", c_int32),
        ("max_threads_per_group", c_int32),
        ("threadgroup_memory_bytes", c_uint64),
        ("unified_memory", c_int32),
        ("asynchronous", c_int32),
        ("ordinal", c_int32),
    ]


class metile_compile_options(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("num_threads", c_int32),
        ("allow_tf32", c_int32),
        ("opt_level", c_int32),
        ("no_cache", c_int32),
        ("check_bounds", c_int32),
        ("unchecked", c_int32),
        ("no_fuse_reductions", c_int32),
        ("keep_rows", c_int32),
        ("num_stages", c_int32),
        ("warps_m", c_int32),
        ("warps_n", c_int32),
        ("split_k", c_int32),
        ("dot_precision", c_int32),
        ("maxnreg", c_int32),
    ]


class metile_kernel_info(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("threads_per_group", c_int32),
        ("threadgroup_memory_bytes", c_uint64),
        ("from_cache", c_int32),
        ("compile_seconds", c_double),
        ("threadgroup_memory_limit", c_uint64),
        ("registers_per_thread", c_int32),
    ]


class metile_arg(Structure):
    _fields_ = [
        ("kind", metile_arg_kind),
        ("reserved", c_int32),
        ("buffer", POINTER(metile_buffer)),
        ("offset", c_uint64),
        ("i", c_int64),
        ("f", c_double),
    ]


class metile_cache_stats(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("memory_hits", c_uint64),
        ("disk_hits", c_uint64),
        ("misses", c_uint64),
        ("bytes_read", c_uint64),
        ("bytes_written", c_uint64),
        ("compile_seconds_saved", c_double),
    ]


class metile_launch_options(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("timeout_s", c_double),
        ("stream", c_uint64),
    ]


STRUCTS = [metile_type, metile_device_info, metile_compile_options, metile_kernel_info,
           metile_arg, metile_cache_stats, metile_launch_options]

# ------------------------------------------------------------------------------- functions
_P = POINTER
_dev, _buf, _bld = _P(metile_device), _P(metile_buffer), _P(metile_builder)
_prog, _kern, _launch = _P(metile_program), _P(metile_kernel), _P(metile_launch)
_event = _P(metile_event)
_st = metile_status
_val = metile_value

# (name, return type, argument types), in header order.
FUNCTIONS = [
    ("metile_version", c_uint32, []),
    ("metile_version_string", c_char_p, []),
    ("metile_status_name", c_char_p, [metile_status]),
    ("metile_last_error", c_char_p, []),
    ("metile_free", None, [c_void_p]),
    ("metile_dtype_size", c_size_t, [metile_dtype]),
    ("metile_dtype_name", c_char_p, [metile_dtype]),
    # devices
    ("metile_device_open", _st, [_P(_dev), c_char_p]),
    ("metile_device_retain", _st, [_dev]),
    ("metile_device_release", _st, [_dev]),
    ("metile_devices_available", _st, [_P(c_char_p)]),
    ("metile_device_count", _st, [c_char_p, _P(c_int32)]),
    ("metile_device_get_info", _st, [_dev, _P(metile_device_info)]),
    ("metile_device_synchronize", _st, [_dev]),
    ("metile_device_stream", _st, [_dev, _P(c_uint64)]),
    ("metile_device_wait_stream", _st, [_dev, c_uint64]),
    ("metile_device_signal_stream", _st, [_dev, c_uint64]),
    ("metile_stream_create", _st, [_dev, _P(c_uint64)]),
    ("metile_stream_destroy", _st, [_dev, c_uint64]),
    ("metile_event_create", _st, [_P(_event), _dev]),
    ("metile_event_record", _st, [_event, c_uint64]),
    ("metile_event_synchronize", _st, [_event]),
    ("metile_event_elapsed_ms", _st, [_event, _event, _P(c_double)]),
    ("metile_event_release", _st, [_event]),
    # buffers
    ("metile_buffer_alloc", _st, [_P(_buf), _dev, c_size_t]),
    ("metile_buffer_wrap", _st, [_P(_buf), _dev, c_void_p, c_size_t]),
    ("metile_buffer_retain", _st, [_buf]),
    ("metile_buffer_release", _st, [_buf]),
    ("metile_buffer_contents", _st, [_buf, _P(c_void_p)]),
    ("metile_buffer_size", _st, [_buf, _P(c_size_t)]),
    ("metile_buffer_shares_memory", c_int32, [_buf]),
    ("metile_buffer_to_dlpack", _st, [_buf, metile_dtype, c_int32, _P(c_int64), _P(c_void_p)]),
    ("metile_buffer_from_dlpack", _st, [_P(_buf), _dev, c_void_p]),
    ("metile_buffer_to_dlpack_versioned", _st,
     [_buf, metile_dtype, c_int32, _P(c_int64), _P(c_void_p)]),
    ("metile_buffer_from_dlpack_versioned", _st, [_P(_buf), _dev, c_void_p]),
    ("metile_dlpack_capsule_destructor", None, [c_void_p]),
    ("metile_op_name", c_char_p, [metile_op]),
    # builder
    ("metile_builder_create", _st, [_P(_bld), c_char_p]),
    ("metile_builder_release", _st, [_bld]),
    ("metile_builder_set_loc", _st, [_bld, c_char_p, c_int32]),
    ("metile_builder_set_constexpr", _st, [_bld, c_char_p, c_char_p]),
    ("metile_builder_set_num_threads", _st, [_bld, c_int32]),
    ("metile_builder_param", _st, [_bld, c_char_p, _P(metile_type), _P(_val)]),
    ("metile_builder_value_type", _st, [_bld, _val, _P(metile_type)]),
    ("metile_builder_const_int", _st, [_bld, metile_dtype, c_int64, _P(_val)]),
    ("metile_builder_const_float", _st, [_bld, metile_dtype, c_double, _P(_val)]),
    ("metile_builder_grid", _st, [_bld, metile_op, c_int32, _P(_val)]),
    ("metile_builder_arange", _st, [_bld, _val, c_int64, _P(_val)]),
    ("metile_builder_cast", _st, [_bld, _val, metile_dtype, _P(_val)]),
    ("metile_builder_bitcast", _st, [_bld, _val, metile_dtype, _P(_val)]),
    ("metile_builder_broadcast", _st, [_bld, _val, c_int32, _P(c_int64), _P(_val)]),
    ("metile_builder_reshape", _st, [_bld, _val, c_int32, _P(c_int64), _P(_val)]),
    ("metile_builder_unary", _st, [_bld, metile_op, _val, _P(_val)]),
    ("metile_builder_binary", _st, [_bld, metile_op, _val, _val, _P(_val)]),
    ("metile_builder_select", _st, [_bld, _val, _val, _val, _P(_val)]),
    ("metile_builder_ptr_offset", _st, [_bld, _val, _val, _P(_val)]),
    ("metile_builder_load", _st, [_bld, _val, _val, _val, _P(_val)]),
    ("metile_builder_store", _st, [_bld, _val, _val, _val]),
    ("metile_builder_atomic", _st, [_bld, metile_op, _val, _val, _val, _val, _P(_val)]),
    ("metile_builder_tile_load", _st,
     [_bld, _val, _val, _val, _val, c_int64, c_int64, _val, _val, _P(_val)]),
    ("metile_builder_tile_store", _st, [_bld, _val, _val, _val, _val, _val, _val, _val]),
    ("metile_builder_dot", _st, [_bld, _val, _val, _val, _P(_val)]),
    ("metile_builder_dot_with_precision", _st, [_bld, _val, _val, _val, metile_dot_precision, _P(_val)]),
    ("metile_builder_reduce", _st, [_bld, metile_op, _val, c_int32, _P(_val)]),
    ("metile_builder_scan", _st, [_bld, metile_op, _val, c_int32, c_int32, _P(_val)]),
    ("metile_builder_trans", _st, [_bld, _val, _P(_val)]),
    ("metile_builder_device_print", _st, [_bld, c_char_p, _P(_val), c_size_t]),
    ("metile_builder_for_begin", _st,
     [_bld, _val, _val, _val, _P(_val), c_size_t, _P(_val), _P(_val)]),
    ("metile_builder_for_end", _st, [_bld, _P(_val), c_size_t, _P(_val)]),
    ("metile_builder_if_begin", _st, [_bld, _val]),
    ("metile_builder_if_else", _st, [_bld, _P(_val), c_size_t]),
    ("metile_builder_if_end", _st, [_bld, _P(_val), c_size_t, _P(_val)]),
    ("metile_builder_while_begin", _st, [_bld, _P(_val), c_size_t, _P(_val)]),
    ("metile_builder_while_do", _st, [_bld, _val, _P(_val), c_size_t, _P(_val)]),
    ("metile_builder_while_end", _st, [_bld, _P(_val), c_size_t, _P(_val)]),
    ("metile_builder_role_begin", _st, [_bld, c_int32, c_int32, c_int32, c_int32]),
    ("metile_builder_role_end", _st, [_bld]),
    ("metile_builder_simt", _st, [_bld, metile_op, _P(_val)]),
    ("metile_builder_simd", _st, [_bld, metile_op, _val, _val, _P(_val)]),
    ("metile_builder_shared", _st, [_bld, c_int64, metile_dtype, _P(_val)]),
    ("metile_builder_tile_swizzle", _st,
     [_bld, _val, _val, c_char_p, c_int32, _P(_val), _P(_val)]),
    ("metile_builder_finish", _st, [_bld, _P(_prog)]),
    # programs
    ("metile_program_parse", _st, [_P(_prog), c_char_p]),
    ("metile_program_print", _st, [_prog, _P(c_char_p)]),
    ("metile_program_retain", _st, [_prog]),
    ("metile_program_release", _st, [_prog]),
    ("metile_program_name", c_char_p, [_prog]),
    ("metile_program_num_params", _st, [_prog, _P(c_size_t)]),
    ("metile_program_param", _st, [_prog, c_size_t, _P(c_char_p), _P(metile_type)]),
    ("metile_program_param_access", _st, [_prog, c_size_t, _P(c_uint32)]),
    # kernels
    ("metile_compile_options_init", None, [_P(metile_compile_options)]),
    ("metile_kernel_compile", _st, [_P(_kern), _dev, _prog, _P(metile_compile_options)]),
    ("metile_kernel_retain", _st, [_kern]),
    ("metile_kernel_release", _st, [_kern]),
    ("metile_kernel_source", _st, [_kern, c_char_p, _P(c_char_p)]),
    ("metile_kernel_cache_key", _st, [_kern, c_char_p]),
    ("metile_kernel_get_info", _st, [_kern, _P(metile_kernel_info)]),
    # launches
    ("metile_kernel_launch", _st, [_kern, _P(c_uint32), _P(metile_arg), c_size_t]),
    ("metile_launch_create", _st, [_P(_launch), _kern, _P(c_uint32), _P(metile_arg), c_size_t]),
    ("metile_launch_set_arg", _st, [_launch, c_size_t, _P(metile_arg)]),
    ("metile_launch_set_arg_memory", _st, [_launch, c_size_t, c_void_p, c_size_t]),
    ("metile_launch_set_arg_device_memory", _st, [_launch, c_size_t, c_uint64, c_size_t]),
    ("metile_launch_set_grid", _st, [_launch, _P(c_uint32)]),
    ("metile_launch_set_options", _st, [_launch, _P(metile_launch_options)]),
    ("metile_launch_run", _st, [_launch]),
    ("metile_launch_release", _st, [_launch]),
    ("metile_cancel_launches", None, []),
    # compile cache
    ("metile_cache_set_dir", _st, [c_char_p]),
    ("metile_cache_get_dir", _st, [_P(c_char_p)]),
    ("metile_cache_set_enabled", _st, [c_int32]),
    ("metile_cache_set_max_bytes", _st, [c_uint64]),
    ("metile_cache_get_stats", _st, [_P(metile_cache_stats)]),
    ("metile_cache_clear", _st, []),
    # autotuning
    ("metile_autotune_time", _st, [_P(_launch), c_size_t, c_int32, c_int32, _P(c_double)]),
    ("metile_autotune_store", _st, [c_char_p, c_char_p]),
    ("metile_autotune_lookup", _st, [c_char_p, _P(c_char_p)]),
]

# ----------------------------------------------------------------------------- the library
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


_NAMES = {"linux": ["libmetile.so", "libmetile.so.0"], "darwin": ["libmetile.dylib",
                                                                   "libmetile.0.dylib"],
          "win32": ["metile.dll"]}.get(sys.platform, ["libmetile.so", "libmetile.so.0"])


def _installed_library() -> str | None:
    """The library `pip install` found when it built this package (see setup.py)."""
    try:
        from . import _installed  # written by setup.py's build step; absent in a checkout
    except ImportError:
        return None
    return _installed.LIBRARY


def _pc_libdir(pc_file: str) -> str | None:
    """libdir of a pkg-config file, its ${var} references expanded (no pkg-config process)."""
    variables = {"pcfiledir": os.path.dirname(pc_file)}
    try:
        with open(pc_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        name, eq, value = line.partition("=")
        if not eq or not name.strip().isidentifier() or ":" in name:
            continue
        for k, v in variables.items():
            value = value.replace("${" + k + "}", v)
        variables[name.strip()] = value.strip()
    return variables.get("libdir")


def _candidates():
    """(where, library path, or a "... not found" / "no ..." note) in lookup order. No
    subprocess runs: importing stays cheap."""
    env = os.environ.get("METILE_LIBRARY")
    if env:
        yield "$METILE_LIBRARY", env
        return
    for n in _NAMES:
        yield "the package folder", os.path.join(_PKG_DIR, n)
    recorded = _installed_library()
    if recorded:
        yield "the library recorded by pip install", recorded
    # A development checkout: <repo>/bindings/python/metile, library in <repo>/build*/.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(_PKG_DIR)))
    if os.path.exists(os.path.join(repo, "include", "metile", "metile.h")):
        for build in ("build", "build-release", "build-debug"):
            for n in _NAMES:
                yield "the build tree", os.path.join(repo, build, n)
    pc_dirs = [d for d in os.environ.get("PKG_CONFIG_PATH", "").split(os.pathsep) if d]
    found_pc = False
    for d in pc_dirs:
        libdir = _pc_libdir(os.path.join(d, "metile.pc"))
        if libdir:
            found_pc = True
            for n in _NAMES:
                yield f"$PKG_CONFIG_PATH ({os.path.join(d, 'metile.pc')})", os.path.join(libdir, n)
    if not found_pc:
        yield "$PKG_CONFIG_PATH", "no metile.pc found" if pc_dirs else "no $PKG_CONFIG_PATH set"
    # Last, the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, /usr/lib, ...).
    yield "the system library path", _NAMES[-1]


_NOT_FOUND = (
    "\nBuild it (cmake -S . -B build -G Ninja && ninja -C build metile) and reinstall "
    "(pip install ./bindings/python records the library it finds: $METILE_LIBRARY, the "
    "checkout's build/, or pkg-config), or point at one: METILE_LIBRARY=/path/to/"
    "libmetile.so, or for an installed prefix PKG_CONFIG_PATH=<prefix>/lib/pkgconfig "
    "(LD_LIBRARY_PATH=<prefix>/lib also works).")


def _locate():
    """(path, loaded library or None): the first candidate that exists. A path is only checked
    here and opened on first use (dlopen is most of what importing would cost); a bare name for
    the loader's own search can only be tried by opening it."""
    tried = []
    for where, path in _candidates():
        if path.endswith("not found") or path.startswith("no "):
            tried.append(f"{where}: {path}")
            continue
        if os.sep in path:
            if os.path.exists(path):
                return path, None
            tried.append(f"{where}: {path} (missing)")
            continue
        try:
            return path, ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{where}: {path} ({e})")
    raise ImportError("metile: cannot find the libmetile shared library. Looked in:\n  "
                      + "\n  ".join(tried) + _NOT_FOUND)


LIBRARY_PATH, _lib = _locate()


def _library():
    global _lib
    if _lib is None:
        try:
            _lib = ctypes.CDLL(LIBRARY_PATH)
        except OSError as e:
            raise ImportError(f"metile: cannot load the libmetile shared library {LIBRARY_PATH}: "
                              f"{e}" + _NOT_FOUND) from None
    return _lib


_missing: set[str] = set()


def _missing_stub(name):
    def stub(*_args):
        raise RuntimeError(f"metile: the library at {LIBRARY_PATH} does not export {name} "
                           "(it is older than this binding; rebuild libmetile)")
    stub.__name__ = name
    return stub


_SIGNATURES = {name: (restype, argtypes) for name, restype, argtypes in FUNCTIONS}


def _bind(name):
    """Declares one function on first use (declaring all ~100 at import cost milliseconds)."""
    restype, argtypes = _SIGNATURES[name]
    try:
        fn = getattr(_library(), name)
    except AttributeError:
        _missing.add(name)
        fn = _missing_stub(name)
    else:
        fn.restype = restype
        fn.argtypes = argtypes
    globals()[name] = fn  # later lookups are plain attribute reads
    return fn


def __getattr__(name: str):
    if name in _SIGNATURES:
        return _bind(name)
    if name == "lib":  # the ctypes library itself, opened on first use
        return _library()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def has(name: str) -> bool:
    """True when the loaded library exports `name`."""
    if name not in _SIGNATURES:
        return False
    if name not in globals():
        _bind(name)
    return name not in _missing


def take_string(p: c_char_p) -> str:
    """Reads and frees a string the library returned through a `char **` out-parameter."""
    addr = ctypes.cast(p, c_void_p).value
    if not addr:
        return None
    try:
        return ctypes.string_at(addr).decode("utf-8", "replace")
    finally:
        __getattr__("metile_free")(addr)


def last_error() -> str:
    return __getattr__("metile_last_error")().decode("utf-8", "replace")


if sys.byteorder != "little":  # the DLPack/launch paths assume it, like every supported target
    raise ImportError("metile supports little-endian hosts only")
