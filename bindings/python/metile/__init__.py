"""metile: tile kernels in Python, compiled by libmetile for Apple GPUs, NVIDIA GPUs, the host
CPU or the `interp` reference device.

    import numpy as np, metile

    @metile.kernel
    def add(X, Y, Out, N, BLOCK: metile.constexpr):
        pid = metile.program_id(0)
        offs = pid * BLOCK + metile.arange(0, BLOCK)
        mask = offs < N
        x = metile.load(X + offs, mask=mask)
        metile.store(Out + offs, x + metile.load(Y + offs, mask=mask), mask=mask)

    add[(metile.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
"""

import numpy as _np  # noqa: F401  (every submodule uses it; "over numpy" is what import costs)

from . import _ffi, _ops

# Public names resolve on first use (PEP 562): `import metile` loads the library and declares
# nothing else, so a program that imports metile without tracing a kernel pays almost nothing.
# name -> (submodule, attribute in it)
_LAZY = {}
for _mod, _names in {
    "_autotune": "AutotunedKernel Config autotune",
    "_buffer": "Buffer from_dlpack",
    "_device": "Device device_count devices get_device set_device synchronize use_device",
    "_errors": "CompileError DeviceError DeviceUnavailableError InternalError "
               "InvalidArgumentError InvalidProgramError MetileError MetileIOError "
               "OutOfMemoryError PerformanceWarning TracingError UnsupportedError",
    "_kernel": "CompiledKernel KernelFunction Launcher PreparedLaunch Program jit kernel",
    "_lang": "arange barrier broadcast_to cast cdiv constexpr dot full load maximum minimum "
             "next_power_of_2 num_programs persistent_range program_id reshape shared "
             "simd_broadcast simd_lane_id simd_shuffle_xor simdgroup_role store thread_id "
             "tile_load tile_range tile_store tile_swizzle where zeros",
    "_lang_lowp": "dot_scaled e2m1_to_float e8m0_to_float unpack_e2m1 unpack_uint4",
    "_lang_compat": "fast_exp reverse_bits scalar simd_max simd_sum",
    "_lang_triton": "argmax argmin atomic_add atomic_cas atomic_max atomic_min atomic_xchg "
                    "cumprod cumsum device_print max_contiguous multiple_of permute "
                    "static_assert trans",
    "_lang_tl": "clamp div_rn fdiv fma full_like ones_like range sqrt_rn static_range "
                "umulhi zeros_like rand randn randint randint4x device_assert",
    "_lang_combine": "associative_scan expand_dims flip interleave join ravel reduce sort split "
                     "xor_sum",
    "_block_ptr": "advance make_block_ptr make_tensor_descriptor",
    "_trace": "Value",
    # dtypes, usable wherever a dtype is expected: each is its metile name ("f32", ...) and a
    # Triton-style dtype object (is_floating(), primitive_bitwidth, ...) equal to a value's dtype.
    # FP8 types are storage types (arithmetic on them computes in f32).
    "_dtypes": "dtype pointer_type float32 float16 bfloat16 int32 uint32 int64 int8 uint8 "
               "bool_ int1 float8e4m3 float8e4nv float8e5m2 float8e5",
    "_stream": "Event Stream",
}.items():
    for _name in _names.split():
        _LAZY[_name] = (_mod, _name)
_LAZY.update({"abs": ("_lang", "absolute"), "max": ("_lang", "reduce_max"),
              "min": ("_lang", "reduce_min"), "sum": ("_lang", "reduce_sum"),
              # Triton's name for the barrier between the threads of one program instance
              "debug_barrier": ("_lang", "barrier")})
# The unary functions, one per op of the op table (_ops.py, generated from src/ir/ops.def).
for _attr, (_name, _op) in _ops.UNARY_FUNCTIONS.items():
    _LAZY.setdefault(_name, ("_lang", _attr))
del _mod, _names, _name, _attr, _op

__version__ = "0.1.0"
LIBRARY_PATH = _ffi.LIBRARY_PATH


def astype(x: "Value", dtype: str) -> "Value":
    """Same as cast(x, dtype)."""
    return __getattr__("cast")(x, dtype)


def library_version() -> str:
    """The loaded libmetile's version string."""
    return _ffi.metile_version_string().decode()


def __getattr__(name: str):
    import importlib
    if name == "testing":
        value = importlib.import_module(".testing", __name__)
    elif name == "math":
        value = importlib.import_module("._lang_math", __name__)
    elif name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module("." + module, __name__), attr)
    else:
        raise AttributeError(f"module 'metile' has no attribute {name!r}")
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))


__all__ = sorted([n for n in globals() if not n.startswith("_")] + list(_LAZY) +
                 ["math", "testing"])
