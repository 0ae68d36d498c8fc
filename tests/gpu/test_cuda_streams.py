"""The cuda side of issue 32's items 3 and 4, on a GPU: cuda:N device selection (cuda:0
explicit, device_count, the clear error past the last GPU, buffers and streams of one GPU
refused on another and launches and events on the second GPU when there are two), launches on a chosen stream ordered with torch's work, events timed by the GPU, and
the watchdog that stops a hung kernel past its `timeout=` (its loop checks the stop word the
watchdog sets, and every thread leaves), and a huge grid of short programs (each acts on the
word at its loop's first back-edge), after which the device runs new launches; a Ctrl-C
(metile_cancel_launches) stops a launch the same way. Not part of CI (no GPU there): it skips without metile's cuda device, the torch test
without torch. Run it on a GPU machine:

    METILE_LIBRARY=$PWD/build/libmetile.so python3 -m pytest tests/gpu/test_cuda_streams.py -q

The two-GPU tests skip on a machine with one GPU.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings",
                          "python")
sys.path.insert(0, PYTHON_DIR)
import metile  # noqa: E402

pytestmark = pytest.mark.skipif("cuda" not in metile.devices(), reason="needs a CUDA GPU")


@metile.kernel
def scale(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask) * 3.0, mask=mask)


def _gpu_count():
    """The number of GPUs (metile.device_count, checked by test_device_count_is_the_first_index_refused)."""
    return metile.device_count("cuda")


def test_device_count_is_the_first_index_refused():
    count = metile.device_count("cuda")
    assert count >= 1
    for i in range(count):
        assert metile.set_device(f"cuda:{i}").ordinal == i
    with pytest.raises(metile.DeviceUnavailableError):
        metile.set_device(f"cuda:{count}")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        assert count == torch.cuda.device_count()


def test_cuda_0_is_the_default_gpu():
    dev = metile.set_device("cuda:0")
    assert dev is metile.set_device("cuda")
    assert dev.ordinal == 0 and dev.label == "cuda:0"
    n = 5000
    x = np.random.rand(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    scale[(metile.cdiv(n, 256),)](x, out, n, BLOCK=256)
    np.testing.assert_allclose(out, x.astype(np.float64) * 3, rtol=1e-6)


def test_cuda_index_past_the_last_gpu():
    count = _gpu_count()
    with pytest.raises(metile.DeviceUnavailableError,
                       match=rf"cuda:{count} does not exist: this machine has {count} CUDA device"):
        metile.set_device(f"cuda:{count}")


def test_second_gpu_refuses_buffers_of_the_first():
    if _gpu_count() < 2:
        pytest.skip("one GPU")
    first = metile.Buffer(data=np.ones(256, np.float32), device="cuda:0")
    dev = metile.set_device("cuda:1")
    assert dev.ordinal == 1
    out = metile.Buffer(shape=(256,), device=dev)
    with pytest.raises(metile.InvalidArgumentError, match="belongs to device cuda:0"):
        scale[(1,)](first, out, 256, BLOCK=256)
    mine = metile.Buffer(data=np.ones(256, np.float32), device=dev)
    scale[(1,)](mine, out, 256, BLOCK=256)
    dev.synchronize()
    np.testing.assert_array_equal(out.numpy(), 3)


def test_launch_on_a_torch_stream_is_ordered_with_torch_work():
    torch = pytest.importorskip("torch")
    metile.set_device("cuda:0")
    n = 1 << 22
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):  # enough queued work that an unordered launch would read stale data
            x = torch.full((n,), 2.0, device="cuda")
            x = x * 1.0 + torch.zeros_like(x)
        out = torch.empty(n, device="cuda")
        scale[(metile.cdiv(n, 1024),)](x, out, n, BLOCK=1024, stream=s)
        y = out + 1.0
    s.synchronize()
    assert torch.all(y == 7.0).item()


def test_launch_on_a_metile_stream_and_events():
    dev = metile.set_device("cuda:0")
    n = 1 << 20
    x = metile.Buffer(data=np.random.rand(n).astype(np.float32))
    out = metile.Buffer(shape=(n,))
    s = metile.Stream()
    start, end = metile.Event(), metile.Event()
    start.record(s)
    for _ in range(20):
        scale[(metile.cdiv(n, 1024),)](x, out, n, BLOCK=1024, stream=s)
    end.record(s)
    end.synchronize()
    ms = start.elapsed_time(end)
    assert ms > 0
    dev.synchronize()
    np.testing.assert_allclose(out.numpy(), x.numpy().astype(np.float64) * 3, rtol=1e-6)
    # The stream as an int (CUstream) works too.
    scale[(metile.cdiv(n, 1024),)](x, out, n, BLOCK=1024, stream=s.cuda_stream)
    s.synchronize()


_WATCHDOG = textwrap.dedent("""
    import sys, time
    import numpy as np
    sys.path.insert(0, {path!r})
    import metile
    dev = metile.set_device({device!r})

    @metile.kernel
    def spin(Out, N, BLOCK: metile.constexpr):
        acc = metile.zeros((BLOCK,), dtype=metile.float32)
        for i in metile.tile_range(0, N, 1):
            acc += 1.0
        metile.store(Out + (metile.program_id(0) % 4) * BLOCK + metile.arange(0, BLOCK), acc)

    old = metile.Buffer(shape=(32,))
    spin[(4,)](old, 3, BLOCK=8)
    dev.synchronize()
    t0 = time.monotonic()
    try:
        spin[(4096,)](old, 2**31 - 1, BLOCK=8, timeout=2)  # hours of work: hung
        dev.synchronize()
        print("finished?!")
    except metile.DeviceError as e:
        print("stopped", round(time.monotonic() - t0, 1), str(e).replace(chr(10), " "))
    old.numpy()  # nothing was reset: the buffer made before stays
    out = metile.Buffer(shape=(32,))
    spin[(4,)](out, 5, BLOCK=8)
    dev.synchronize()
    print("after", float(out.numpy()[0]))
""")


# The kernel spins in its loop; past the limit the watchdog sets its stop word, every thread
# leaves at its loop's next check (every 1024 back-edges) and the launch ends: the wait reports
# the stop, nothing is reset, and the next launch runs.
@pytest.mark.parametrize("device", ["cuda:0", "cuda:1"])
def test_watchdog_stops_a_hung_kernel_and_the_device_runs_again(tmp_path, device):
    if int(device[-1]) >= _gpu_count():
        pytest.skip("one GPU")
    script = tmp_path / "watchdog.py"  # a file: tracing reads the kernel's source
    script.write_text(_WATCHDOG.format(path=os.path.abspath(PYTHON_DIR), device=device))
    env = dict(os.environ)
    env.pop("METILE_TIMEOUT_S", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=60)
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stdout + r.stderr
    stopped = [line for line in lines if line.startswith("stopped")]
    assert stopped and "kernel spin did not finish within 2 s (the launch's timeout)" in stopped[0], \
        r.stdout + r.stderr
    assert "and was stopped; its outputs are partly written" in stopped[0], stopped[0]
    assert "reset" not in stopped[0], stopped[0]
    assert float(stopped[0].split()[1]) < 4, stopped[0]  # the limit, then microseconds
    assert "after 5.0" in lines, r.stdout + r.stderr


_HUGE_GRID = textwrap.dedent("""
    import sys, threading, time
    sys.path.insert(0, {path!r})
    import metile
    from metile import _ffi
    dev = metile.set_device("cuda:0")

    @metile.kernel
    def short_spin(Out, N, BLOCK: metile.constexpr):
        acc = metile.zeros((BLOCK,), dtype=metile.float32)
        for i in metile.tile_range(0, N, 1):
            acc += 1.0
        metile.store(Out + (metile.program_id(0) % 4) * BLOCK + metile.arange(0, BLOCK), acc)

    old = metile.Buffer(shape=(128,))
    short_spin[(4,)](old, 3, BLOCK=32)
    dev.synchronize()
    t0 = time.monotonic()
    try:
        # 1000 turns are about 10k instructions a warp: 2**24 programs finished in 0.25 s on an H100,
        # 2**30 take about 12 s, so the limit stops them.
        short_spin[(2**30,)](old, 1000, BLOCK=32, timeout=0.5)
        dev.synchronize()
        print("finished", round(time.monotonic() - t0, 2))
    except metile.DeviceError as e:
        print("stopped", round(time.monotonic() - t0, 2), str(e).replace(chr(10), " "))
    old.numpy()  # nothing was reset: the buffer made before stays
    short_spin[(2**30,)](old, 1000, BLOCK=32)  # no limit: the wait blocks until the cancel
    threading.Timer(0.3, _ffi.metile_cancel_launches).start()
    t0 = time.monotonic()
    try:
        dev.synchronize()
        print("finished", round(time.monotonic() - t0, 2))
    except metile.DeviceError as e:
        print("cancelled", round(time.monotonic() - t0, 2), str(e).replace(chr(10), " "))
    out = metile.Buffer(shape=(128,))
    short_spin[(4,)](out, 5, BLOCK=32)
    dev.synchronize()
    print("after", float(out.numpy()[0]))
""")


# A huge grid of programs whose loops are shorter than the period of a check's read (1024
# turns): each program reads the stop word's copy when it starts and acts on it at every
# back-edge, so past the limit, or on a cancel, the programs still to run leave after one turn
# and the running ones finish theirs: stopped, not reset. Only scheduling the rest of the grid
# takes time: on an H100 the stop at 0.5 s returned at 2.27 s (2026-12-07), within the drain
# grace the host gives a kernel that answered (kDrainGrace, 30 s), so the bounds below are loose.
def test_a_huge_grid_of_short_programs_stops_past_its_limit(tmp_path):
    script = tmp_path / "huge_grid.py"  # a file: tracing reads the kernel's source
    script.write_text(_HUGE_GRID.format(path=os.path.abspath(PYTHON_DIR)))
    env = dict(os.environ)
    env.pop("METILE_TIMEOUT_S", None)
    env.pop("METILE_GPU_OFF", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=120)
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stdout + r.stderr
    stopped = [line for line in lines if line.startswith("stopped")]
    assert stopped, r.stdout + r.stderr
    assert "kernel short_spin did not finish within 0.5 s (the launch's timeout) and was stopped; " \
        "its outputs are partly written" in stopped[0], stopped[0]
    assert "reset" not in stopped[0], stopped[0]
    assert float(stopped[0].split()[1]) < 10, stopped[0]
    # A cancel during a blocking wait reaches the GPU through the runtime's thread.
    cancelled = [line for line in lines if line.startswith("cancelled")]
    assert cancelled, r.stdout + r.stderr
    assert "kernel short_spin (the last launched) was cancelled" in cancelled[0], cancelled[0]
    assert "its outputs are partly written" in cancelled[0] and "reset" not in cancelled[0], \
        cancelled[0]
    assert float(cancelled[0].split()[1]) < 10, cancelled[0]
    assert "after 5.0" in lines, r.stdout + r.stderr


def test_streams_of_one_gpu_are_refused_on_the_other():
    if _gpu_count() < 2:
        pytest.skip("one GPU")
    metile.set_device("cuda:1")
    x = metile.Buffer(data=np.ones(256, np.float32))
    out = metile.Buffer(shape=(256,))
    s0 = metile.Stream("cuda:0")
    with pytest.raises(metile.InvalidArgumentError, match="belongs to device cuda:0, the launch runs on cuda:1"):
        scale[(1,)](x, out, 256, BLOCK=256, stream=s0)
    # A bare CUstream: the library asks the driver for its context.
    with pytest.raises(metile.InvalidArgumentError,
                       match=rf"stream 0x{s0.cuda_stream:x} belongs to cuda:0, but this launch or event is on cuda:1"):
        scale[(1,)](x, out, 256, BLOCK=256, stream=s0.cuda_stream)
    e1 = metile.Event(device="cuda:1")
    with pytest.raises(metile.InvalidArgumentError, match="belongs to cuda:0"):
        e1.record(s0.cuda_stream)
    torch = sys.modules.get("torch") or pytest.importorskip("torch")
    t0 = torch.cuda.Stream(device=0)
    with pytest.raises(metile.InvalidArgumentError, match="is on cuda:0, the launch runs on cuda:1"):
        scale[(1,)](x, out, 256, BLOCK=256, stream=t0)
    with pytest.raises(metile.InvalidArgumentError, match="belongs to cuda:0"):
        scale[(1,)](x, out, 256, BLOCK=256, stream=t0.cuda_stream)


def test_launches_streams_and_events_on_the_second_gpu():
    if _gpu_count() < 2:
        pytest.skip("one GPU")
    n = 1 << 20
    dev1 = metile.set_device("cuda:1")
    x1 = metile.Buffer(data=np.random.rand(n).astype(np.float32))
    out1 = metile.Buffer(shape=(n,))
    dev0 = metile.set_device("cuda:0")
    x0 = metile.Buffer(data=np.random.rand(n).astype(np.float32))
    out0 = metile.Buffer(shape=(n,))
    s1 = metile.Stream(dev1)
    start, end = metile.Event(device=dev1), metile.Event(device=dev1)
    with metile.use_device(dev1):
        start.record(s1)
        for _ in range(10):
            scale[(metile.cdiv(n, 1024),)](x1, out1, n, BLOCK=1024, stream=s1)
        end.record(s1)
    scale[(metile.cdiv(n, 1024),)](x0, out0, n, BLOCK=1024)  # both GPUs busy at once
    end.synchronize()
    assert start.elapsed_time(end) > 0
    metile.synchronize()
    np.testing.assert_allclose(out1.numpy(), x1.numpy().astype(np.float64) * 3, rtol=1e-6)
    np.testing.assert_allclose(out0.numpy(), x0.numpy().astype(np.float64) * 3, rtol=1e-6)
    e0 = metile.Event(device=dev0)
    e0.record()
    with pytest.raises(metile.InvalidArgumentError, match=r"different devices \(cuda:0 and cuda:1\)"):
        e0.elapsed_time(end)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_bad_timeouts_are_refused_on_cuda(bad):
    metile.set_device("cuda:0")
    x = metile.Buffer(data=np.ones(256, np.float32))
    out = metile.Buffer(shape=(256,))
    with pytest.raises(metile.InvalidArgumentError, match="must be None"):
        scale[(1,)](x, out, 256, BLOCK=256, timeout=bad)
    scale[(1,)](x, out, 256, BLOCK=256, timeout=5.0)  # a limit it keeps
    metile.synchronize("cuda:0")
    np.testing.assert_array_equal(out.numpy(), 3)
