"""metile.Buffer: zero-copy wrapping, allocation, numpy views, dtypes, DLPack."""

import ctypes
import os

import numpy as np
import pytest

import metile


@metile.kernel
def inc(X, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(X + offs, metile.load(X + offs, mask=m) + 1, mask=m)


def test_buffer_from_numpy_shares_memory(device):
    arr = np.arange(1000, dtype=np.float32)
    buf = metile.Buffer(data=arr)
    if not buf.shares_memory:
        pytest.skip(f"{device.name} copies host memory")
    inc[(metile.cdiv(1000, 256),)](buf, 1000, BLOCK=256)
    metile.synchronize()
    np.testing.assert_array_equal(arr, np.arange(1000) + 1)   # the kernel wrote into `arr`
    assert np.shares_memory(buf.numpy(), arr)
    b2 = metile.Buffer.from_numpy(arr)
    assert b2.shares_memory and np.shares_memory(b2.numpy(), arr)


def test_implicit_numpy_arguments_see_kernel_writes(device):
    arr = np.zeros((7, 13), np.int32)
    inc[(1,)](arr, arr.size, BLOCK=128)
    np.testing.assert_array_equal(arr, 1)


def test_zeros_and_views(device):
    buf = metile.Buffer.zeros((4, 8))
    assert buf.shape == (4, 8) and buf.dtype == "f32" and buf.nbytes == 128 and buf.size == 32
    assert buf.ndim == 2 and len(buf) == 4 and buf.device is device
    view = buf.numpy()
    assert view.shape == (4, 8) and view.dtype == np.float32 and not view.any()
    view[1, 2] = 5
    assert buf.numpy()[1, 2] == 5 and np.shares_memory(view, np.asarray(buf))
    assert metile.Buffer.zeros(10, dtype="i64").numpy().dtype == np.int64
    assert metile.Buffer.zeros((3,), dtype=np.float16).dtype == "f16"
    assert "shape=(4, 8)" in repr(buf)
    empty = metile.Buffer.zeros((0,))
    assert empty.nbytes == 0 and empty.numpy().shape == (0,)


def test_read_only_arrays_are_copied(device):
    arr = np.arange(16, dtype=np.float32)
    arr.setflags(write=False)
    buf = metile.Buffer(data=arr)
    assert not buf.shares_memory
    np.testing.assert_array_equal(buf.numpy(), arr)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32, np.int64,
                                   np.int8, np.uint8, np.bool_])
def test_every_dtype_is_real(device, dtype):
    @metile.kernel
    def copy(X, Out, N, BLOCK: metile.constexpr):
        offs = metile.arange(0, BLOCK)
        metile.store(Out + offs, metile.load(X + offs, mask=offs < N), mask=offs < N)
    x = (np.arange(40) % 7 * 3 - 5).astype(dtype)
    out = np.zeros_like(x)
    copy[(1,)](x, out, 40, BLOCK=64)
    np.testing.assert_array_equal(out, x)
    assert metile.Buffer(data=x).dtype == {np.float32: "f32", np.float16: "f16", np.int32: "i32",
                                           np.uint32: "u32", np.int64: "i64", np.int8: "i8",
                                           np.uint8: "u8", np.bool_: "bool"}[dtype]


def _bf16_bits(values):
    f = np.asarray(values, np.float32).view(np.uint32)
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)


@metile.kernel
def bf16_roundtrip(X, Out, Back, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    x = metile.load(X + offs, mask=m)
    metile.store(Out + offs, x.to("f32") * 2, mask=m)
    metile.store(Back + offs, x * 2, mask=m)


def test_bf16_through_uint16_storage(device):
    vals = np.array([1.0, -2.5, 3.140625, 1024.0, 0.0078125], np.float32)
    x = metile.Buffer(data=_bf16_bits(vals), dtype="bf16")
    back = metile.Buffer.zeros((5,), dtype="bf16")
    out = np.zeros(5, np.float32)
    bf16_roundtrip[(1,)](x, out, back, 5, BLOCK=8)
    np.testing.assert_array_equal(out, vals * 2)
    assert back.numpy().dtype == np.uint16
    np.testing.assert_array_equal(back.numpy(), _bf16_bits(vals * 2))
    with pytest.raises(metile.InvalidArgumentError, match="bf16 needs uint16 storage"):
        metile.Buffer(data=vals, dtype="bf16")


def test_bad_buffers():
    with pytest.raises(metile.InvalidArgumentError, match="float64"):
        metile.Buffer(data=np.zeros(4))
    with pytest.raises(metile.InvalidArgumentError, match="data="):
        metile.Buffer()
    with pytest.raises(metile.InvalidArgumentError, match="unknown dtype"):
        metile.Buffer.zeros(4, dtype="f8")
    with pytest.raises(metile.InvalidArgumentError, match="negative"):
        metile.Buffer.zeros((-1,))


def test_array_interface(device):
    buf = metile.Buffer(data=np.arange(6, dtype=np.int32).reshape(2, 3))
    a = np.asarray(buf)
    assert a.shape == (2, 3) and a.dtype == np.int32
    np.testing.assert_array_equal(a, [[0, 1, 2], [3, 4, 5]])


@pytest.fixture(params=["library", "ctypes"])
def dlpack_impl(request, monkeypatch):
    """DLPack through the library's metile_buffer_to/from_dlpack, and through the binding's
    own ctypes implementation (used with libraries that lack them)."""
    from metile import _buffer, _ffi
    if request.param == "ctypes":
        real = _ffi.has
        monkeypatch.setattr(_buffer._ffi, "has", lambda n: "dlpack" not in n and real(n))
    elif not _ffi.has("metile_buffer_to_dlpack"):
        pytest.skip("the library has no DLPack functions")
    return request.param


def test_dlpack_export_to_numpy(device, dlpack_impl):
    if device.name == "cuda":
        pytest.skip("cuda buffers are CUDA managed memory (kDLCUDAManaged): numpy imports only "
                    "CPU tensors, and host arrays are not device memory (use buf.numpy())")
    buf = metile.Buffer(data=np.arange(12, dtype=np.float32).reshape(3, 4))
    assert buf.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(buf)
    assert a.shape == (3, 4) and a.dtype == np.float32
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4))
    buf.numpy()[0, 0] = 42   # (numpy marks DLPack imports read-only)
    assert a[0, 0] == 42, "the exported tensor shares the buffer's memory"
    del buf
    assert a[0, 0] == 42 and a.sum() == 42 + 66   # the export keeps the memory alive


def test_dlpack_import_from_numpy(device, dlpack_impl):
    if device.name == "cuda":
        pytest.skip("cuda buffers are CUDA managed memory (kDLCUDAManaged): numpy imports only "
                    "CPU tensors, and host arrays are not device memory (use buf.numpy())")
    arr = np.arange(24, dtype=np.int32).reshape(4, 6)
    buf = metile.from_dlpack(arr)
    assert buf.shape == (4, 6) and buf.dtype == "i32"
    inc[(1,)](buf, 24, BLOCK=32)
    metile.synchronize()
    np.testing.assert_array_equal(buf.numpy(), np.arange(24).reshape(4, 6) + 1)
    if buf.shares_memory:
        np.testing.assert_array_equal(arr, np.arange(24).reshape(4, 6) + 1)
    with pytest.raises(metile.InvalidArgumentError, match="not compact row-major"):
        metile.from_dlpack(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(metile.InvalidArgumentError, match="no __dlpack__"):
        metile.from_dlpack([1, 2, 3])


def test_dlpack_round_trip(device, dlpack_impl):
    a = metile.Buffer(data=np.linspace(0, 1, 10, dtype=np.float32))
    b = metile.from_dlpack(a)
    assert b.shape == (10,) and b.dtype == "f32"
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    if b.shares_memory:
        b.numpy()[3] = -1
        assert a.numpy()[3] == -1


def test_dlpack_objects_are_accepted_as_kernel_arguments(device, dlpack_impl):
    if device.name == "cuda":
        pytest.skip("cuda buffers are CUDA managed memory (kDLCUDAManaged): numpy imports only "
                    "CPU tensors, and host arrays are not device memory (use buf.numpy())")
    class Tensor:  # any producer with the DLPack protocol
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, stream=None):
            return self.arr.__dlpack__()

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()
    arr = np.zeros(10, np.float32)
    t = Tensor(arr)
    inc[(1,)](t, 10, BLOCK=16)
    metile.synchronize()
    if metile.Buffer(data=arr).shares_memory:
        np.testing.assert_array_equal(arr, 1)


def test_dlpack_exports_are_released(device, monkeypatch):
    from metile import _buffer, _dlpack, _ffi
    real = _ffi.has
    monkeypatch.setattr(_buffer._ffi, "has", lambda n: "dlpack" not in n and real(n))
    base = len(_dlpack._live)
    buf = metile.Buffer.zeros((8,))
    cap = buf.__dlpack__()          # never consumed: the capsule's destructor frees it
    assert len(_dlpack._live) == base + 1
    del cap
    assert len(_dlpack._live) == base
    a = np.from_dlpack(buf)         # consumed: numpy calls the deleter when the array dies
    assert len(_dlpack._live) == base + 1
    del a
    assert len(_dlpack._live) == base


@pytest.fixture
def copying_device(device, monkeypatch):
    """Makes buffer wrapping copy (as metal does for memory it cannot address in place)."""
    from metile import _ffi
    real_shares = _ffi.metile_buffer_shares_memory
    copies = set()

    def wrap(out, dev, host, nbytes):
        st = _ffi.metile_buffer_alloc(out, dev, nbytes)
        if st == 0:
            ptr = ctypes.c_void_p()
            _ffi.metile_buffer_contents(out._obj, ctypes.byref(ptr))
            ctypes.memmove(ptr.value, host, nbytes)
            copies.add(ctypes.addressof(out._obj.contents))
        return st

    def shares(h):
        return 0 if ctypes.addressof(h.contents) in copies else real_shares(h)
    monkeypatch.setattr(_ffi, "metile_buffer_wrap", wrap)
    monkeypatch.setattr(_ffi, "metile_buffer_shares_memory", shares)
    return device


def test_copied_arrays_are_copied_in_and_back(copying_device):
    arr = np.arange(100, dtype=np.float32)
    buf = metile.Buffer(data=arr)
    assert not buf.shares_memory
    launcher = inc[(1,)]
    launcher(arr, 100, BLOCK=128)
    np.testing.assert_array_equal(arr, np.arange(100) + 1)   # copied back after the launch
    launcher(arr, 100, BLOCK=128)                            # the hot path copies both ways too
    np.testing.assert_array_equal(arr, np.arange(100) + 2)
    arr[:] = 10                                              # host writes are copied in
    launcher(arr, 100, BLOCK=128)
    np.testing.assert_array_equal(arr, 11)
    run = inc[(1,)].prepare(arr, 100, BLOCK=128)
    run()
    run()
    np.testing.assert_array_equal(arr, 13)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_numpy_view_does_not_leak_the_buffer():
    # The cached view must not hold the Buffer (a Buffer -> view -> Buffer cycle is never
    # collected because numpy arrays are not tracked by the cycle collector): issue 12 item 2.
    import gc
    import weakref
    buf = metile.Buffer.zeros(16, "f32", device="cpu")
    view = buf.numpy()
    assert view.base is not buf and buf.numpy() is view
    ref = weakref.ref(buf)
    del buf
    assert ref() is None                      # gone without a gc pass
    view[:] = 3                               # the memory lives as long as the view does
    gc.collect()
    assert (view == 3).all()
    del view

    n = 64 * 1024                             # 256 KiB per buffer: a leak would be 500 MiB
    for _ in range(50):                       # warm up allocator caches before measuring
        metile.Buffer.zeros(n, "f32", device="cpu").numpy()[:] = 1
    before = _rss_bytes()
    for _ in range(2000):
        b = metile.Buffer.zeros(n, "f32", device="cpu")
        b.numpy()[:] = 1                      # touch every page
        del b
    grown = _rss_bytes() - before
    assert grown < 64 << 20, f"RSS grew by {grown >> 20} MiB over 2000 buffers"
