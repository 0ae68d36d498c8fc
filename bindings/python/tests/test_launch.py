"""Launch mechanics: grids, argument passing, caches, prepared launches, the hot path,
devices and METILE_DEBUG."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import metile


@metile.kernel
def fill(Out, N, value, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    metile.store(Out + offs, value, mask=offs < N)


def test_grid_forms(device):
    out = np.zeros(100, np.float32)
    fill[4](out, 100, 1.0, BLOCK=32)                      # an int
    assert (out == 1).all()
    fill[(4,)](out, 100, 2.0, BLOCK=32)                   # a 1-tuple
    assert (out == 2).all()
    fill[(4, 1, 1)](out, 100, 3.0, BLOCK=32)              # a 3-tuple
    assert (out == 3).all()
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (metile.cdiv(meta["N"], meta["BLOCK"]),)
    fill[grid](out, 100, 4.0, BLOCK=16)                   # a callable of the launch's meta
    assert (out == 4).all()
    assert seen["N"] == 100 and seen["BLOCK"] == 16 and seen["value"] == 4.0
    assert seen["Out"] is out
    fill[(0,)](out, 100, 5.0, BLOCK=32)                   # an empty grid launches nothing
    assert (out == 4).all()
    with pytest.raises(metile.InvalidArgumentError, match="grid"):
        fill[(1, 2, 3, 4)](out, 100, 1.0, BLOCK=32)
    with pytest.raises(metile.InvalidArgumentError, match="grid"):
        fill["x"](out, 100, 1.0, BLOCK=32)


def test_same_name_kernels_do_not_collide(device):
    def make(factor):
        @metile.kernel
        def scale(X, Out, N, BLOCK: metile.constexpr):
            offs = metile.arange(0, BLOCK)
            metile.store(Out + offs, metile.load(X + offs, mask=offs < N) * factor, mask=offs < N)
        return scale
    k2, k3 = make(2.0), make(3.0)
    assert k2.__name__ == k3.__name__
    x = np.arange(10, dtype=np.float32)
    o2, o3 = np.zeros_like(x), np.zeros_like(x)
    k2[(1,)](x, o2, 10, BLOCK=16)
    k3[(1,)](x, o3, 10, BLOCK=16)
    np.testing.assert_array_equal(o2, 2 * x)
    np.testing.assert_array_equal(o3, 3 * x)


@metile.kernel
def copy(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m), mask=m)


def test_specializations_are_cached_per_constexpr_and_dtype(device):
    copy._programs.clear()
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    copy[(1,)](x, out, 64, BLOCK=64)
    copy[(2,)](x, out, 64, BLOCK=32)
    copy[(1,)](x, out, 64, BLOCK=64)
    assert len(copy._programs) == 2
    xi = np.arange(64, dtype=np.int32)
    oi = np.zeros_like(xi)
    copy[(1,)](xi, oi, 64, BLOCK=64)
    assert len(copy._programs) == 3
    np.testing.assert_array_equal(oi, xi)
    copy[(1,)](x, out, 2**33, BLOCK=64)  # an i64 scalar is another specialization
    assert len(copy._programs) == 4


def test_hot_path_reuses_only_identical_arguments(device):
    x = np.arange(100, dtype=np.float32)
    outs = [np.zeros_like(x) for _ in range(3)]
    launcher = copy[(4,)]
    for o in outs:                       # different output arrays each time
        launcher(x, o, 100, BLOCK=32)
    for o in outs:
        np.testing.assert_array_equal(o, x)
    y = x * 2
    launcher(y, outs[0], 100, BLOCK=32)  # same output, new input
    np.testing.assert_array_equal(outs[0], y)
    launcher(y, outs[1], 50, BLOCK=32)   # same arrays, another scalar value
    np.testing.assert_array_equal(outs[1][:50], y[:50])
    np.testing.assert_array_equal(outs[1][50:], x[50:])
    x[:] = 7                             # in-place change of a reused array is seen
    launcher(x, outs[2], 100, BLOCK=32)
    launcher(x, outs[2], 100, BLOCK=32)
    np.testing.assert_array_equal(outs[2], 7)
    launcher(X=x, Out=outs[0], N=100, BLOCK=32)  # arrays by keyword take the full path
    np.testing.assert_array_equal(outs[0], 7)


def test_prepare_returns_a_dispatcher(device):
    x = metile.Buffer(data=np.arange(100, dtype=np.float32))
    out = metile.Buffer.zeros((100,))
    run = copy[(4,)].prepare(x, out, 100, BLOCK=32)
    assert isinstance(run, metile.PreparedLaunch)
    assert not out.numpy().any(), "prepare() does not launch"
    run()
    np.testing.assert_array_equal(out.numpy(), np.arange(100))
    x.numpy()[:] = 5
    run()
    np.testing.assert_array_equal(out.numpy(), 5)


def test_devices_and_synchronize(device):
    names = metile.devices()
    assert device.name in names and "interp" in names
    assert metile.get_device() is device
    metile.synchronize()
    metile.synchronize(device.name)
    device.synchronize()
    from metile.runtime.metal_device import MetalDevice
    MetalDevice.get().sync()
    assert MetalDevice.get() is MetalDevice.get()
    with metile.use_device("interp") as d:
        assert metile.get_device().name == "interp" and d.name == "interp"
    assert metile.get_device() is device


def test_unknown_device():
    with pytest.raises(metile.InvalidArgumentError, match="unknown device"):
        metile.set_device("no-such-device")


def test_source_locations_point_at_the_kernel(device):
    x = np.zeros(10, np.float32)
    text = copy[(1,)].trace(x, x, 10, BLOCK=16).text
    src = copy.fn.__code__
    store_line = src.co_firstlineno + 3
    assert f'loc("{src.co_filename}":{store_line})' in text


def test_compiled_kernel_sources(device):
    x = np.zeros(10, np.float32)
    k = copy[(1,)].compile(x, x, 10, BLOCK=16)
    assert "kernel @copy" in k.source("tile_ir")
    assert k.info["threads_per_group"] >= 1
    with pytest.raises(metile.InvalidArgumentError, match="available"):
        k.source("no-such-stage")


def _run(code, **env):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    e = dict(os.environ, PYTHONPATH=root, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=e, timeout=300)


_TWICE = """
    import numpy as np, metile
    metile.set_device("interp")
    @metile.kernel
    def twice(X, N, BLOCK: metile.constexpr):
        offs = metile.arange(0, BLOCK)
        metile.store(X + offs, metile.load(X + offs, mask=offs < N) * 2, mask=offs < N)
    x = np.ones(8, np.float32)
    twice[(1,)](x, 8, BLOCK=8)
    assert (x == 2).all()
"""


def test_metile_debug_prints_stages(tmp_path):
    code = _TWICE
    r = _run(code, METILE_DEBUG="tile_ir", METILE_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "tile_ir" in r.stderr and "kernel @twice" in r.stderr
    r = _run(code, METILE_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0 and "kernel @twice" not in r.stderr


def test_metile_debug_shows_stages_of_other_devices(tmp_path):
    # interp builds nothing, yet the MSL, CUDA and C++ the kernel becomes are dumped on request.
    code = _TWICE
    r = _run(code, METILE_DEBUG="msl,cuda,cpp,no_such_stage", METILE_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "[[kernel]] void twice(" in r.stderr
    assert "__global__" in r.stderr and 'extern "C"' in r.stderr
    assert "kernel @twice" not in r.stderr  # tile_ir was not named
    assert "unknown stage 'no_such_stage'" in r.stderr
    assert "tile_ir, tile_ir_opt, layouts, gpu_ir, gpu_ir_opt, msl, cuda, cpp" in r.stderr


def test_launching_from_several_threads(device):
    import threading

    @metile.kernel
    def scaled(X, Out, N, F: metile.constexpr, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        m = offs < N
        metile.store(Out + offs, metile.load(X + offs, mask=m) * F, mask=m)
    x = np.arange(300, dtype=np.float32)
    outs = [np.zeros_like(x) for _ in range(8)]
    errors = []

    def work(i):
        try:
            with metile.use_device(device.name):
                for _ in range(3):
                    scaled[(metile.cdiv(300, 64),)](x, outs[i], 300, F=i % 3 + 1, BLOCK=64)
        except Exception as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    metile.synchronize()
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, x * (i % 3 + 1))
    assert len(scaled._programs) == 3


@metile.kernel
def numpy_scalar_literals(X, Out, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs)
    metile.store(Out + offs, np.float32(0.5) * x + np.int32(1))


def test_numpy_scalars_inside_kernels(device):
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    numpy_scalar_literals[(1,)](x, out, BLOCK=16)
    np.testing.assert_array_equal(out, 0.5 * x + 1)


def test_ping_pong_arguments_reuse_one_cached_launch(device):
    a = np.arange(64, dtype=np.float32)
    b = np.zeros_like(a)
    copy.clear_cache()
    for i in range(6):                       # alternate source and destination
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        src[0] = i
        copy[(1,)](src, dst, 64, BLOCK=64)
        assert dst[0] == i
    for n in range(10):                      # other scalar values re-bind, too
        b[:] = 0
        copy[(1,)](a, b, n, BLOCK=64)
        assert (b[:n] == a[:n]).all() and (b[n:] == 0).all()
    # Arrays a GPU device copies in and out are prepared for each call, never cached.
    cached = 0 if device.asynchronous else 1
    assert len(copy._launches) == 2 * cached  # n == 1 is traced as the constant 1: its own
    copy[(1,)](a, b, 2**40, BLOCK=64)        # an i64 scalar is another specialization
    assert len(copy._launches) == 3 * cached


def test_failed_float_grid_does_not_poison_the_int_grid():
    # (4.0,) == (4,) in Python: a launcher cache keyed by value alone would hand the failing
    # float-grid launcher back for the int grid forever (issue 12 item 6).
    @metile.kernel
    def fill_once(Out, N, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        metile.store(Out + offs, 1.0, mask=offs < N)

    out = np.zeros(64, np.float32)
    with metile.use_device("interp"):
        for _ in range(2):
            with pytest.raises(metile.InvalidArgumentError, match="grid"):
                fill_once[(4.0,)](out, 64, BLOCK=16)
        fill_once[(4,)](out, 64, BLOCK=16)
        assert (out == 1).all()
        with pytest.raises(metile.InvalidArgumentError, match="grid"):
            fill_once[4.0](out, 64, BLOCK=16)
        out[:] = 0
        fill_once[4](out, 64, BLOCK=16)
        assert (out == 1).all()


def test_constexpr_types_key_the_program_cache():
    @metile.kernel
    def put(Out, V: metile.constexpr):
        metile.store(Out + metile.arange(0, 4), V)

    out = np.zeros(4, np.float32)
    with metile.use_device("interp"):
        put[1](out, V=2.5)
        assert (out == 2.5).all()
        a = put[1].trace(out, V=1)
        b = put[1].trace(out, V=1.0)
        c = put[1].trace(out, V=True)
        assert a is not b and a is not c and b is not c
