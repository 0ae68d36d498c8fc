"""metile.Buffer: zero-copy wrapping, allocation, numpy views, dtypes, DLPack."""

import ctypes
import mmap
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
    assert buf.shape == (4, 8) and buf.dtype == np.float32 and buf.metile_dtype == "f32" and len(buf) == 4 and buf.nbytes == 128 and buf.size == 32
    assert buf.ndim == 2 and len(buf) == 4 and buf.device is device
    view = buf.numpy()
    assert view.shape == (4, 8) and view.dtype == np.float32 and not view.any()
    view[1, 2] = 5
    assert buf.numpy()[1, 2] == 5 and np.shares_memory(view, np.asarray(buf))
    assert metile.Buffer.zeros(10, dtype="i64").numpy().dtype == np.int64
    assert metile.Buffer.zeros((3,), dtype=np.float16).metile_dtype == "f16"
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
    assert metile.Buffer(data=x).metile_dtype == {np.float32: "f32", np.float16: "f16", np.int32: "i32",
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


@pytest.fixture
def dlpack_impl():
    """DLPack through the library's metile_buffer_to/from_dlpack."""
    return "library"


def test_dlpack_export_to_numpy(device, dlpack_impl):
    if device.name == "cuda":
        pytest.skip("cuda buffers are exported as CUDA device memory (kDLCUDA): numpy imports "
                    "only CPU tensors (use buf.numpy())")
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
        pytest.skip("cuda buffers are exported as CUDA device memory (kDLCUDA): numpy imports "
                    "only CPU tensors (use buf.numpy())")
    arr = np.arange(24, dtype=np.int32).reshape(4, 6)
    if _metal_refuses_in_place(device, dlpack_impl):
        with pytest.raises(metile.UnsupportedError, match="cannot use this memory in place"):
            metile.from_dlpack(arr)
        page = mmap.PAGESIZE
        raw = np.zeros(2 * page, np.uint8)
        start = (-raw.ctypes.data) % page
        arr = raw[start:start + page].view(np.int32).reshape(4, -1)
        arr[...] = np.arange(arr.size).reshape(arr.shape)
    n = arr.size
    buf = metile.from_dlpack(arr)
    assert buf.shape == arr.shape and buf.dtype == np.int32 and buf.metile_dtype == "i32"
    inc[((n + 31) // 32,)](buf, n, BLOCK=32)
    metile.synchronize()
    np.testing.assert_array_equal(buf.numpy(), np.arange(n).reshape(arr.shape) + 1)
    if buf.shares_memory:
        np.testing.assert_array_equal(arr, np.arange(n).reshape(arr.shape) + 1)
    with pytest.raises(metile.InvalidArgumentError, match="not compact row-major"):
        metile.from_dlpack(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(metile.InvalidArgumentError, match="no __dlpack__"):
        metile.from_dlpack([1, 2, 3])


def _metal_refuses_in_place(device, dlpack_impl):
    """metal imports DLPack memory in place only when it is page-aligned (pointer and length);
    the library's import never copies, so it refuses smaller tensors (the ctypes path copies)."""
    return device.name == "metal" and dlpack_impl == "library"


def test_dlpack_round_trip(device, dlpack_impl):
    a = metile.Buffer(data=np.linspace(0, 1, 10, dtype=np.float32))
    if _metal_refuses_in_place(device, dlpack_impl):
        with pytest.raises(metile.UnsupportedError, match="cannot use this memory in place"):
            metile.from_dlpack(a)
        return
    b = metile.from_dlpack(a)
    assert b.shape == (10,) and b.metile_dtype == "f32"
    if device.name == "cuda":  # exported as kDLCUDA: the import is device memory, no host view
        with pytest.raises(metile.UnsupportedError, match="host cannot address"):
            b.numpy()
        return
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    if b.shares_memory:
        b.numpy()[3] = -1
        assert a.numpy()[3] == -1


def test_dlpack_objects_are_accepted_as_kernel_arguments(device, dlpack_impl):
    if device.name == "cuda":
        pytest.skip("cuda buffers are exported as CUDA device memory (kDLCUDA): numpy imports "
                    "only CPU tensors (use buf.numpy())")
    class Tensor:  # any producer with the DLPack protocol
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, stream=None):
            return self.arr.__dlpack__()

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()
    arr = np.zeros(10, np.float32)
    t = Tensor(arr)
    if _metal_refuses_in_place(device, dlpack_impl):
        with pytest.raises(metile.UnsupportedError, match="cannot use this memory in place"):
            inc[(1,)](t, 10, BLOCK=16)
        return
    inc[(1,)](t, 10, BLOCK=16)
    metile.synchronize()
    if metile.Buffer(data=arr).shares_memory:
        np.testing.assert_array_equal(arr, 1)


class _FakeProducer:
    """A DLPack producer built by hand: its tensor's deleter counts its calls, and its capsule
    carries the library's destructor (metile_dlpack_capsule_destructor)."""

    def __init__(self, versioned, dtype_code=2, bits=32, n=4, device_type=1):
        from metile import _dlpack
        self.deleted = 0
        self.data = np.arange(n, dtype=np.float32 if bits == 32 else np.uint16)
        self.shape = (ctypes.c_int64 * 1)(n)
        cls = _dlpack.DLManagedTensorVersioned if versioned else _dlpack.DLManagedTensor
        self.tensor = cls()
        t = self.tensor.dl_tensor
        t.data = self.data.ctypes.data
        t.device = _dlpack.DLDevice(device_type, 0)
        t.ndim = 1
        t.dtype = _dlpack.DLDataType(dtype_code, bits, 1)
        t.shape = self.shape
        if versioned:
            self.tensor.version = _dlpack.DLPackVersion(1, 0)

        def deleter(_):
            self.deleted += 1
        self._cb = dict(cls._fields_)["deleter"](deleter)
        self.tensor.deleter = self._cb
        self.versioned = versioned

    def capsule(self):
        from metile import _dlpack
        return _dlpack.capsule(ctypes.addressof(self.tensor), self.versioned)

    def __dlpack__(self, stream=None, max_version=None):
        return self.capsule()

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("versioned", [False, True])
def test_library_capsule_destructor_runs_the_deleter(versioned, capfd):
    p = _FakeProducer(versioned)
    cap = p.capsule()
    del cap                                  # never consumed: the destructor runs the deleter
    assert p.deleted == 1
    if versioned and np.lib.NumpyVersion(np.__version__) < "2.1.0":
        return                               # older numpy reads only legacy capsules
    bf16 = _FakeProducer(versioned, dtype_code=4, bits=16)
    # numpy refuses bf16 (BufferError in numpy 2, RuntimeError in 1.x) and leaves that
    # exception pending while the capsule dies: the destructor must not disturb it.
    with pytest.raises((BufferError, RuntimeError), match="dtype"):
        np.from_dlpack(bf16)
    import gc
    gc.collect()
    assert bf16.deleted == 1
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "SystemError" not in err, err


@pytest.mark.parametrize("versioned", [False, True])
def test_consumed_capsules_leave_the_deleter_to_the_consumer(versioned):
    p = _FakeProducer(versioned)
    with metile.use_device("interp"):
        buf = metile.from_dlpack(p)          # metile consumes it and owns the tensor now
        assert p.deleted == 0 and buf.shares_memory
        np.testing.assert_array_equal(buf.numpy(), np.arange(4))
        del buf
    assert p.deleted == 1


def test_bf16_buffer_to_numpy_is_a_clean_buffer_error(capfd):
    buf = metile.Buffer.zeros((8,), "bf16", device="interp")
    assert buf.dtype == np.uint16 and buf.metile_dtype == "bf16"
    with pytest.raises((BufferError, RuntimeError), match="dtype"):  # not a SystemError
        np.from_dlpack(buf)
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "SystemError" not in err, err


def test_versioned_dlpack_export(device):
    from metile import _dlpack
    buf = metile.Buffer(data=np.arange(6, dtype=np.float32).reshape(2, 3))
    cap = buf.__dlpack__(max_version=(1, 2))
    addr, versioned = _dlpack.open_capsule(cap)
    assert versioned
    m = _dlpack.managed(addr, True)
    assert (m.version.major, m.version.minor) == (1, 0) and m.flags == 0
    assert m.dl_tensor.ndim == 2 and tuple(m.dl_tensor.shape[i] for i in range(2)) == (2, 3)
    expect = 2 if device.name == "cuda" else 1   # kDLCUDA / kDLCPU, never kDLCUDAManaged
    assert m.dl_tensor.device.device_type == expect == buf.__dlpack_device__()[0]
    legacy = buf.__dlpack__(max_version=(0, 8))
    assert _dlpack.open_capsule(legacy)[1] is False
    if device.name == "metal" and buf.nbytes % mmap.PAGESIZE:
        # metal imports in place only page-aligned memory (pointer and length), never copies
        with pytest.raises(metile.UnsupportedError, match="in place"):
            metile.from_dlpack(buf)
    else:
        back = metile.from_dlpack(buf)       # metile's own import asks for the versioned ABI
        if device.name != "cuda":            # cuda: device memory, no host view (see above)
            np.testing.assert_array_equal(back.numpy(), buf.numpy())
    with pytest.raises(BufferError, match="copy=True"):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="DLPack device"):
        buf.__dlpack__(dl_device=(7, 0))


def test_dlpack_stream_argument(device):
    buf = metile.Buffer.zeros((4,))
    # Host devices have no streams: any stream is accepted, -1 means "no ordering".
    for s in (None, -1, 1, 2):
        assert _dlpack_open(buf.__dlpack__(stream=s))
    seen = {}

    class Producer:                          # records what metile asks a producer for
        def __init__(self):
            self.arr = np.ones(4, np.float32)

        def __dlpack__(self, **kw):
            seen.update(kw)
            return self.arr.__dlpack__()     # a legacy capsule although 1.0 was offered
    if device.name in ("cuda", "metal"):     # unaligned host memory: the import never copies
        with pytest.raises(metile.UnsupportedError, match="in place"):
            metile.from_dlpack(Producer())
        assert seen["max_version"] == (1, 0)
        return
    b = metile.from_dlpack(Producer())
    np.testing.assert_array_equal(b.numpy(), 1)
    assert seen["max_version"] == (1, 0)
    assert ("stream" in seen) == device.asynchronous


def _dlpack_open(cap):
    from metile import _dlpack
    return _dlpack.open_capsule(cap)[0]


def test_read_only_versioned_tensors_are_copied():
    p = _FakeProducer(True)
    p.tensor.flags = 1                       # DLPACK_FLAG_BITMASK_READ_ONLY
    with metile.use_device("interp"):
        buf = metile.from_dlpack(p)
        assert not np.shares_memory(buf.numpy(), p.data)
        np.testing.assert_array_equal(buf.numpy(), np.arange(4))
    import gc
    gc.collect()
    assert p.deleted == 1                    # the producer's capsule freed it


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


def test_view_reinterprets_in_place(device):
    packed = np.arange(24, dtype=np.uint8).reshape(2, 12)
    buf = metile.Buffer(data=packed.copy())
    words = buf.view("i32")
    assert words.shape == (2, 3) and words.metile_dtype == "i32" and words.nbytes == buf.nbytes
    np.testing.assert_array_equal(words.numpy(), packed.view(np.int32))
    inc[(1,)](words, 6, BLOCK=8)         # a kernel writing the view writes the buffer's bytes
    metile.synchronize()
    np.testing.assert_array_equal(buf.numpy(), (packed.view(np.int32) + 1).view(np.uint8))
    del buf                              # the view keeps the memory alive
    np.testing.assert_array_equal(words.numpy(), packed.view(np.int32) + 1)
    with pytest.raises(metile.InvalidArgumentError, match="does not divide"):
        metile.Buffer.zeros((2, 6), "u8").view("i32")
