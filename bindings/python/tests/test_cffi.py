"""metile from cffi's ABI mode (issue 17 item 8): include/metile/metile.cdef, installed beside
metile.h, is what `ffi.cdef()` reads; it is generated from the header (and checked here to be
in sync), and vector add runs through it on every host device, checked against numpy."""

import os
import subprocess
import sys

import numpy as np
import pytest

import metile

cffi = pytest.importorskip("cffi")  # Debian: python3-cffi (scripts/install-deps.sh)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CDEF = os.path.join(ROOT, "include", "metile", "metile.cdef")


def test_cdef_matches_the_header():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bindings", "cffi", "regen.py"),
                        "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def lib():
    ffi = cffi.FFI()
    with open(CDEF, encoding="utf-8") as f:
        ffi.cdef(f.read())
    return ffi, ffi.dlopen(metile.LIBRARY_PATH)


def _ok(ffi, lib, status):
    assert status == lib.METILE_OK, ffi.string(lib.metile_last_error()).decode()


def _vector_add(ffi, lib, block):
    """Out[i] = X[i] + Y[i] for i < N, `block` elements per program, built with the builder."""
    ok = lambda st: _ok(ffi, lib, st)  # noqa: E731
    b = ffi.new("metile_builder **")
    ok(lib.metile_builder_create(b, b"vadd"))
    b = b[0]
    f32p = ffi.new("metile_type *", {"dtype": lib.METILE_DTYPE_F32, "is_pointer": 1})
    i32 = ffi.new("metile_type *", {"dtype": lib.METILE_DTYPE_I32})
    v = {n: ffi.new("metile_value *") for n in
         ("x", "y", "out", "n", "pid", "blk", "base", "lanes", "offs", "mask", "px", "py", "po",
          "xs", "ys", "sum")}
    ok(lib.metile_builder_param(b, b"X", f32p, v["x"]))
    ok(lib.metile_builder_param(b, b"Y", f32p, v["y"]))
    ok(lib.metile_builder_param(b, b"Out", f32p, v["out"]))
    ok(lib.metile_builder_param(b, b"N", i32, v["n"]))
    ok(lib.metile_builder_grid(b, lib.METILE_OP_PROGRAM_ID, 0, v["pid"]))
    ok(lib.metile_builder_const_int(b, lib.METILE_DTYPE_I32, block, v["blk"]))
    ok(lib.metile_builder_binary(b, lib.METILE_OP_MUL, v["pid"][0], v["blk"][0], v["base"]))
    ok(lib.metile_builder_arange(b, 0, block, v["lanes"]))
    ok(lib.metile_builder_binary(b, lib.METILE_OP_ADD, v["base"][0], v["lanes"][0], v["offs"]))
    ok(lib.metile_builder_binary(b, lib.METILE_OP_LT, v["offs"][0], v["n"][0], v["mask"]))
    for ptr, base in (("px", "x"), ("py", "y"), ("po", "out")):
        ok(lib.metile_builder_ptr_offset(b, v[base][0], v["offs"][0], v[ptr]))
    ok(lib.metile_builder_load(b, v["px"][0], v["mask"][0], 0, v["xs"]))
    ok(lib.metile_builder_load(b, v["py"][0], v["mask"][0], 0, v["ys"]))
    ok(lib.metile_builder_binary(b, lib.METILE_OP_ADD, v["xs"][0], v["ys"][0], v["sum"]))
    ok(lib.metile_builder_store(b, v["po"][0], v["sum"][0], v["mask"][0]))
    prog = ffi.new("metile_program **")
    ok(lib.metile_builder_finish(b, prog))
    ok(lib.metile_builder_release(b))
    return prog[0]


@pytest.mark.parametrize("device_name", ["interp", "cpu", "metal-sim"])
def test_vector_add_through_cffi_abi_mode(lib, device_name):
    ffi, lib = lib
    if device_name not in metile.devices():
        pytest.skip(f"{device_name} is not available here")
    ok = lambda st: _ok(ffi, lib, st)  # noqa: E731
    n, block = 1000, 128
    rng = np.random.default_rng(17)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    dev = ffi.new("metile_device **")
    ok(lib.metile_device_open(dev, device_name.encode()))
    dev = dev[0]
    prog = _vector_add(ffi, lib, block)
    kern = ffi.new("metile_kernel **")
    opts = ffi.new("metile_compile_options *")
    lib.metile_compile_options_init(opts)
    ok(lib.metile_kernel_compile(kern, dev, prog, opts))
    bufs = []
    args = ffi.new("metile_arg[4]")
    for i, arr in enumerate((x, y, out)):
        h = ffi.new("metile_buffer **")
        ok(lib.metile_buffer_wrap(h, dev, ffi.cast("void *", arr.ctypes.data), arr.nbytes))
        bufs.append(h[0])
        args[i].kind = lib.METILE_ARG_BUFFER
        args[i].buffer = h[0]
    args[3].kind = lib.METILE_ARG_I64
    args[3].i = n
    grid = ffi.new("uint32_t[3]", [(n + block - 1) // block, 1, 1])
    ok(lib.metile_kernel_launch(kern[0], grid, args, 4))
    ok(lib.metile_device_synchronize(dev))
    result = out.copy()
    if not lib.metile_buffer_shares_memory(bufs[2]):
        p = ffi.new("void **")
        ok(lib.metile_buffer_contents(bufs[2], p))
        result = np.frombuffer(ffi.buffer(p[0], out.nbytes), np.float32).copy()
    reference = (x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(result, reference)
    # A bad call reports through the same error channel.
    assert lib.metile_kernel_launch(kern[0], grid, args, 3) == lib.METILE_ERROR_INVALID_ARGUMENT
    assert b"takes 4 arguments" in ffi.string(lib.metile_last_error())
    for h in bufs:
        ok(lib.metile_buffer_release(h))
    ok(lib.metile_kernel_release(kern[0]))
    ok(lib.metile_program_release(prog))
    ok(lib.metile_device_release(dev))
