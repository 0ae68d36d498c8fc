"""Any legal name works as a kernel, parameter or variable name on every device: the cpu, Metal
and CUDA emitters rename what would collide with a C++/MSL/CUDA keyword, a type, a macro of the
preludes' headers, a prelude helper or a spelling they generate (`mt_pid`, `<scalar>_arg`).
The kernels are written out as a module and imported, as a user's file would be."""

import importlib.util
import itertools
import os

import numpy as np
import pytest

NAMES = [
    # C++20 keywords and alternative tokens Python allows as names
    "alignas", "alignof", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "char", "char8_t",
    "char16_t", "compl", "concept", "const", "consteval", "constinit", "const_cast", "co_await",
    "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast", "enum",
    "explicit", "export", "extern", "float", "friend", "goto", "inline", "int", "long", "mutable",
    "namespace", "new", "noexcept", "not_eq", "nullptr", "operator", "or_eq", "private",
    "register", "reinterpret_cast", "requires", "restrict", "short", "signed", "sizeof", "static",
    "static_assert", "struct", "switch", "template", "this", "thread_local", "throw", "typedef",
    "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "xor_eq", "final", "main",
    # types: stdint, MSL/CUDA scalars, vectors, matrices, atomics
    "int8_t", "int64_t", "uint8_t", "uint32_t", "size_t", "ptrdiff_t", "uintptr_t", "half",
    "bfloat", "uint", "uchar", "ulong", "float2", "float4", "half4", "uint3", "packed_float2",
    "longlong2", "float4x4", "simdgroup_float8x8", "dim3", "atomic_uint", "memory_order_relaxed",
    # MSL qualifiers
    "kernel", "device", "threadgroup", "constant", "thread", "vertex",
    # macros of the preludes' headers
    "NULL", "EOF", "BUFSIZ", "NAN", "INFINITY", "MAXFLOAT", "FLT_MAX", "HUGE_VALF", "M_PI_F",
    "INT64_C", "UINT32_MAX", "MT_INLINE", "MT_NT_BYTES", "METILE_PRINT_FN", "SEEK_SET", "stdin",
    "stdout", "stderr", "offsetof", "errno",
    # the preludes' helpers and the emitters' own spellings
    "mt_pid", "mt_npg", "mt_r", "mt_range", "mt_fault", "mt_program", "mt_arg_N",
    "metile_stack_bytes", "metile_entry", "mt_wrap_add", "N_arg", "tid", "lane", "sg", "tgpig",
    "tiitg", "threadIdx", "blockIdx", "blockDim", "warpSize", "_Bool", "__restrict", "fmaxf",
    "make_float4", "sqrt", "exp", "select", "fmax", "rsqrt", "abs", "isnan", "as_type",
    "simd_sum", "N", "i", "r", "c", "j", "m", "v", "t", "v1", "x_vec", "mt_s", "mt_scalars",
]
# Metal binds every pointer, its hidden extent and every scalar to one of 31 buffer slots: X and
# Out take 4, a group of 6 pointers and 6 scalars 18.
GROUP = 12


def _module(tmp_path, source):
    path = tmp_path / "names_kernels.py"
    path.write_text("import metile\n\n" + source)
    spec = importlib.util.spec_from_file_location(f"names_kernels_{abs(hash(source))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _skip_standin_metal(device):
    if device == "metal" and os.environ.get("METILE_METAL_FRAMEWORK"):
        pytest.skip("the stand-in runs metal-sim's MSL, already checked on metal-sim")


def _groups(names, size):
    it = iter(names)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _params_kernel(pointers, scalars):
    """Out = X + each pointer's values + each scalar, every parameter named from NAMES."""
    body = ["    offs = metile.arange(0, BLOCK)",
            "    acc = metile.load(X + offs)"]
    body += [f"    acc = acc + metile.load({p} + offs)" for p in pointers]
    body += [f"    acc = acc + {s}" for s in scalars]
    body += ["    metile.store(Out + offs, acc)"]
    params = ", ".join(["X", "Out"] + pointers + scalars + ["BLOCK: metile.constexpr"])
    return f"@metile.kernel\ndef params_kernel({params}):\n" + "\n".join(body) + "\n"


@pytest.mark.parametrize("scalar_first", [False, True])
def test_parameter_names(device, tmp_path, scalar_first):
    _skip_standin_metal(device)
    names = [n for n in NAMES if n not in ("X", "Out", "BLOCK")]
    for group in _groups(names, GROUP):
        half = len(group) // 2
        pointers, scalars = (group[half:], group[:half]) if scalar_first else (group[:half], group[half:])
        k = _module(tmp_path, _params_kernel(pointers, scalars)).params_kernel
        x = np.arange(32, dtype=np.float32)
        arrays = [np.full(32, j + 1, np.float32) for j in range(len(pointers))]
        values = [np.int32(10 * (j + 1)) for j in range(len(scalars))]
        out = np.zeros(32, np.float32)
        k[(1,)](x, out, *arrays, *values, BLOCK=32)
        want = x + sum(float(a[0]) for a in arrays) + sum(int(v) for v in values)
        np.testing.assert_array_equal(out, want, err_msg=f"parameters {pointers} / {scalars}")


def test_variable_names(device, tmp_path):
    _skip_standin_metal(device)
    lines, prev = ["    offs = metile.arange(0, BLOCK)"], "metile.load(X + offs)"
    for n in NAMES:
        lines.append(f"    {n} = {prev} + 1.0")
        prev = n
    lines.append(f"    metile.store(Out + offs, {prev})")
    src = "@metile.kernel\ndef locals_kernel(X, Out, BLOCK: metile.constexpr):\n" + "\n".join(lines)
    k = _module(tmp_path, src + "\n").locals_kernel
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    k[(1,)](x, out, BLOCK=64)
    np.testing.assert_array_equal(out, x + len(NAMES))


# One of each kind: a keyword, a type, a vector type, a macro, a lowercase macro, a prelude helper
# and the cpu program function's own name.
KERNEL_NAMES = ["decltype", "int64_t", "float4", "NULL", "stdout", "mt_pid", "mt_program",
                "metile_entry", "kernel", "main"]


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_names(device, tmp_path, name):
    _skip_standin_metal(device)
    src = (f"@metile.kernel\ndef {name}(X, Out, N, BLOCK: metile.constexpr):\n"
           "    offs = metile.arange(0, BLOCK)\n"
           "    metile.store(Out + offs, metile.load(X + offs) * N, mask=offs < N)\n")
    k = getattr(_module(tmp_path, src), name)
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    k[(1,)](x, out, 16, BLOCK=16)
    np.testing.assert_array_equal(out, x * 16)
