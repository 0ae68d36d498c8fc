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

from . import _ffi
from ._autotune import AutotunedKernel, Config, autotune
from ._buffer import Buffer, from_dlpack
from ._device import Device, devices, get_device, set_device, synchronize, use_device
from ._errors import (CompileError, DeviceError, DeviceUnavailableError, InternalError,
                      InvalidArgumentError, InvalidProgramError, MetileError, MetileIOError,
                      OutOfMemoryError, PerformanceWarning, TracingError,
                      UnsupportedError)
from ._kernel import CompiledKernel, KernelFunction, Launcher, PreparedLaunch, Program, kernel
from ._lang import (absolute as abs, arange, barrier, broadcast_to, cast, cdiv, ceil, constexpr,
                    cos, dot, erf, exp, exp2, floor, full, load, log, log2, maximum, minimum,
                    next_power_of_2, num_programs, persistent_range, program_id,
                    reduce_max as max, reduce_min as min, reduce_sum as sum, reshape, rsqrt,
                    shared, sigmoid, simd_broadcast, simd_lane_id, simd_shuffle_xor,
                    simdgroup_role, sin, sqrt, store, tanh, thread_id, tile_load, tile_range,
                    tile_store, tile_swizzle, where, zeros)
from ._lang_compat import fast_exp, reverse_bits, scalar, simd_max, simd_sum
from ._lang_triton import (argmax, argmin, atomic_add, atomic_cas, atomic_max, atomic_min,
                           atomic_xchg, cumprod, cumsum, device_print, max_contiguous,
                           multiple_of, permute, static_assert, trans)
from . import testing
from ._trace import Value

__version__ = "0.1.0"
LIBRARY_PATH = _ffi.LIBRARY_PATH

# dtype names, usable wherever a dtype is expected
float32, float16, bfloat16 = "f32", "f16", "bf16"
int32, uint32, int64, int8, uint8, bool_ = "i32", "u32", "i64", "i8", "u8", "bool"


def astype(x: Value, dtype: str) -> Value:
    """Same as cast(x, dtype)."""
    return cast(x, dtype)


def library_version() -> str:
    """The loaded libmetile's version string."""
    return _ffi.metile_version_string().decode()


__all__ = [n for n in dir() if not n.startswith("_")]
