"""Per-launch options (issue 32 items 3 and 4): `timeout=` on every device, `stream=` and
metile.Stream / metile.Event (on devices without streams: tokens and the host's clock), device
names with a GPU index, and buffers of one device refused by a launch on another. The cuda
side of the same API is tested on a GPU by test_cuda_streams.py."""

import ctypes
import math

import numpy as np
import pytest

import metile

HOST_DEVICES = ("cpu", "interp", "metal-sim")


@metile.kernel
def spin(Out, N, BLOCK: metile.constexpr):
    # Runs for ages over a huge grid; every program writes its own slot of a small output.
    pid = metile.program_id(0)
    acc = metile.zeros((BLOCK,), dtype=metile.float32)
    for i in metile.tile_range(0, N, 1):
        acc += 1.0
    metile.store(Out + (pid % 4) * BLOCK + metile.arange(0, BLOCK), acc)


@metile.kernel
def scale(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask) * 3.0, mask=mask)


def _host_only(device):
    if device.name not in HOST_DEVICES:
        pytest.skip("stopping a running launch is for the host devices")


def _usable_after():
    out = np.zeros(4 * 8, np.float32)
    spin[(4,)](out, 3, BLOCK=8)
    np.testing.assert_array_equal(out, 3)


def test_timeout_keyword_stops_a_launch(device, monkeypatch):
    _host_only(device)
    monkeypatch.delenv("METILE_TIMEOUT_S", raising=False)
    out = np.zeros(4 * 8, np.float32)
    spin[(4,)](out, 1000, BLOCK=8)  # compiled before the limited launch
    with pytest.raises(metile.DeviceError,
                       match=r"kernel spin did not finish within 0\.3 s \(the launch's timeout\)"):
        spin[(2**31 - 1,)](out, 1000, BLOCK=8, timeout=0.3)
    _usable_after()
    # The cached launch forgets the limit when a call passes none.
    spin[(4,)](out, 5, BLOCK=8)
    np.testing.assert_array_equal(out, 5)


def test_timeout_keyword_overrides_the_environment(device, monkeypatch):
    _host_only(device)
    out = np.zeros(4 * 8, np.float32)
    spin[(4,)](out, 1000, BLOCK=8)
    monkeypatch.setenv("METILE_TIMEOUT_S", "1000")
    with pytest.raises(metile.DeviceError, match=r"within 0\.2 s \(the launch's timeout\)"):
        spin[(2**31 - 1,)](out, 1000, BLOCK=8, timeout=0.2)
    monkeypatch.setenv("METILE_TIMEOUT_S", "0.2")
    spin[(4,)](out, 1000, BLOCK=8, timeout=math.inf)  # no limit, whatever the environment says
    np.testing.assert_array_equal(out, 1000)
    with pytest.raises(metile.DeviceError, match=r"within 0\.2 s \(METILE_TIMEOUT_S\)"):
        spin[(2**31 - 1,)](out, 1000, BLOCK=8)


def test_prepared_launch_keeps_its_timeout(device, monkeypatch):
    _host_only(device)
    monkeypatch.delenv("METILE_TIMEOUT_S", raising=False)
    out = np.zeros(4 * 8, np.float32)
    launch = spin[(2**31 - 1,)].prepare(out, 1000, BLOCK=8, timeout=0.2)
    for _ in range(2):
        with pytest.raises(metile.DeviceError, match="the launch's timeout"):
            launch()
    launch.set_options(timeout=None)
    _usable_after()


@pytest.mark.parametrize("bad", [0, 0.0, -0.0, -1, -math.inf, float("nan"), "2", True, [1.0]])
def test_bad_timeout_is_refused(device, bad):
    out = np.zeros(32, np.float32)
    with pytest.raises(metile.InvalidArgumentError,
                       match=r"kernel spin: timeout=.* must be None \(METILE_TIMEOUT_S\), seconds "
                             r"> 0, or math.inf \(no limit\)"):
        spin[(4,)](out, 3, BLOCK=8, timeout=bad)
    launch = spin[(4,)].prepare(out, 3, BLOCK=8)
    with pytest.raises(metile.InvalidArgumentError, match="must be None"):
        launch.set_options(timeout=bad)


def test_timeout_on_metal_without_loops_ends_the_wait_and_the_kernel_runs_on(device, monkeypatch):
    """A Metal kernel stops at its loops' checks of its stop word (test_cancel.py); one without
    loops has none, and Metal cannot stop a committed command buffer: past its limit the wait
    fails naming the kernel and the limit, and the next synchronize waits for the kernel, whose
    results are whole. (On the Linux stand-in the kernel runs on metal-sim's engine.)"""
    if device.name != "metal":
        pytest.skip("the metal device's wait")
    monkeypatch.delenv("METILE_TIMEOUT_S", raising=False)
    # Programs past N do nothing: about 1 s on the stand-in's CPU engine, longer on a Mac's GPU.
    groups = 1 << 18 if "stand-in" in device.description else 1 << 24
    x = metile.Buffer(data=np.arange(1024, dtype=np.float32))
    out = metile.Buffer(shape=(1024,))
    scale[(4,)](x, out, 1024, BLOCK=256)  # compiled, and the queue idle
    device.synchronize()
    out.numpy()[:] = 0
    scale[(groups,)](x, out, 1024, BLOCK=256, timeout=0.02)
    with pytest.raises(metile.DeviceError,
                       match=r"kernel scale did not finish within 0\.02 s \(the launch's timeout\); "
                             r"it has no loop that checks a stop word, and Metal cannot stop a "
                             r"committed command buffer"):
        device.synchronize()
    device.synchronize()  # waits for the kernel in full
    np.testing.assert_array_equal(out.numpy(), np.arange(1024, dtype=np.float32) * 3.0)
    scale[(4,)](x, out, 1024, BLOCK=256, timeout=30)  # a limit it keeps
    device.synchronize()


def test_nan_timeout_is_refused_by_the_c_api(device):
    from metile import _ffi
    out = np.zeros(32, np.float32)
    launch = spin[(4,)].prepare(out, 3, BLOCK=8)
    o = _ffi.metile_launch_options(ctypes.sizeof(_ffi.metile_launch_options), math.nan, 0)
    assert _ffi.metile_launch_set_options(launch._handle, ctypes.byref(o)) == \
        _ffi.METILE_ERROR_INVALID_ARGUMENT
    assert "NaN" in _ffi.metile_last_error().decode()
    small = _ffi.metile_launch_options(4, -1.0, 0)
    assert _ffi.metile_launch_set_options(launch._handle, ctypes.byref(small)) == \
        _ffi.METILE_ERROR_INVALID_ARGUMENT
    assert _ffi.metile_launch_set_options(launch._handle, None) == _ffi.METILE_OK


def test_streams_and_events_on_devices_without_streams(device):
    if device.name == "cuda":
        pytest.skip("test_cuda_streams.py")
    n = 1000
    x = np.random.rand(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    s = metile.Stream()
    assert s.cuda_stream != 0 and s.device is device
    start, end = metile.Event(), metile.Event()
    with pytest.raises(metile.InvalidArgumentError, match="both events recorded"):
        start.elapsed_time(end)
    start.record()
    scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256, stream=s)
    end.record(s)
    end.synchronize()
    np.testing.assert_allclose(out, x.astype(np.float64) * 3, rtol=1e-6)
    assert start.elapsed_time(end) >= 0
    s.synchronize()
    # Other libraries' stream objects and plain ints are accepted (and ignored) too.
    class TorchLike:
        cuda_stream = 7
    scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256, stream=TorchLike())
    scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256, stream=0)
    with pytest.raises(metile.InvalidArgumentError, match="stream= takes None"):
        scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256, stream="default")
    with pytest.raises(metile.InvalidArgumentError, match="not a CUstream handle"):
        scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256, stream=-1)


def test_events_of_two_devices_are_not_compared(device):
    other = "interp" if device.name != "interp" else "cpu"
    if other not in metile.devices():
        pytest.skip(f"{other} is not available")
    a, b = metile.Event(), metile.Event(device=other)
    a.record()
    b.record()
    with pytest.raises(metile.InvalidArgumentError, match="different devices"):
        a.elapsed_time(b)


def test_a_stream_of_another_device_is_refused(device):
    other = "interp" if device.name != "interp" else "cpu"
    if other not in metile.devices():
        pytest.skip(f"{other} is not available")
    s = metile.Stream(other)
    out = np.zeros(32, np.float32)
    with pytest.raises(metile.InvalidArgumentError, match=f"belongs to device {other}"):
        spin[(4,)](out, 3, BLOCK=8, stream=s)


def test_a_buffer_of_another_device_is_refused(device):
    other = "interp" if device.name != "interp" else "cpu"
    if other not in metile.devices():
        pytest.skip(f"{other} is not available")
    foreign = metile.Buffer(data=np.ones(64, np.float32), device=other)
    out = np.zeros(64, np.float32)
    with pytest.raises(metile.InvalidArgumentError,
                       match=rf"argument `X` is a buffer on device {other} but the launch runs "
                             rf"on {device.label}"):
        scale[(1,)](foreign, out, 64, BLOCK=64)
    # The library refuses it too, for callers that reach it without the binding's check.
    launch = scale[(1,)].prepare(np.ones(64, np.float32), out, 64, BLOCK=64)
    st = metile._ffi.metile_launch_set_arg(launch._handle, 0, ctypes.byref(foreign._arg))
    assert st == metile._ffi.METILE_ERROR_INVALID_ARGUMENT
    assert (f"argument `X`: the buffer belongs to device {other}, the kernel scale runs on "
            f"{device.label}") in metile._ffi.metile_last_error().decode()


@pytest.mark.parametrize("name, error, message", [
    ("cpu:1", metile.InvalidArgumentError, "cpu is not chosen by index"),
    ("cuda:x", metile.InvalidArgumentError, "must be a GPU index"),
    ("cuda:", metile.InvalidArgumentError, "must be a GPU index"),
    ("cuda:-1", metile.InvalidArgumentError, "must be a GPU index"),
    ("nosuch:1", metile.InvalidArgumentError, "unknown device"),
])
def test_bad_device_index(name, error, message):
    with pytest.raises(error, match=message):
        metile.set_device(name)


def test_cuda_index_without_a_gpu():
    if "cuda" in metile.devices():
        pytest.skip("test_cuda_streams.py covers the GPU")
    with pytest.raises(metile.DeviceUnavailableError, match="cuda:1 is unavailable"):
        metile.set_device("cuda:1")


def test_device_label_and_ordinal(device):
    assert device.ordinal == 0
    assert device.label == ("cuda:0" if device.name == "cuda" else device.name)
