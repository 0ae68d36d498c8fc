"""Several GPUs through Python without a GPU: the cuda device on tests/cuda_standin's driver
(METILE_CUDA_DRIVER; METILE_STANDIN_CUDA_DEVICES sets how many GPUs it has). Kernels compile for
real (NVRTC) but do not run there, so this checks the API: device_count, set_device("cuda:N"),
bad device names, buffers and streams of one GPU refused on another (metile.Stream, torch- and
CuPy-like stream objects, plain CUstream ints, which the library checks by the stream's
context), events, and timeout= values. test_cuda_streams.py (tests/gpu) runs the same API on
real GPUs. Each case runs in a child process: a process opens its CUDA driver once."""

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent("""
    import math, os, sys, types
    sys.path.insert(0, {path!r})
    import numpy as np
    import metile

    gpus = int(os.environ["METILE_STANDIN_CUDA_DEVICES"])

    def raises(kind, part, fn, *args, **kwargs):
        try:
            fn(*args, **kwargs)
        except kind as e:
            assert part in " ".join(str(e).split()), (part, str(e))
            return
        raise AssertionError(f"no {{kind.__name__}} ({{part}})")

    @metile.kernel
    def scale(X, Out, N, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        metile.store(Out + offs, metile.load(X + offs, mask=offs < N) * 3.0, mask=offs < N)

    assert metile.device_count("cuda") == gpus and metile.device_count() == gpus
    assert metile.device_count("interp") == 1
    for bad in ("gpu", "cuda:1", ""):
        raises(metile.InvalidArgumentError, "unknown device kind", metile.device_count, bad)
    raises(TypeError, "device kind", metile.device_count, 0)
    for name, kind, part in [
            ("gpu", metile.InvalidArgumentError, 'unknown device "gpu"'),
            ("cuda:-1", metile.InvalidArgumentError, "must be a GPU index"),
            ("cuda:1.0", metile.InvalidArgumentError, "must be a GPU index"),
            ("cuda:9", metile.DeviceUnavailableError,
             f"cuda:9 does not exist: this machine has {{gpus}} CUDA device"),
            (f"cuda:{{gpus}}", metile.DeviceUnavailableError,
             f"cuda:{{gpus}} does not exist: this machine has {{gpus}} CUDA device")]:
        raises(kind, part, metile.set_device, name)

    d0 = metile.set_device("cuda:0")
    assert d0 is metile.set_device("cuda") and d0.label == "cuda:0"
    x0 = metile.Buffer(data=np.ones(64, np.float32), device="cuda:0")
    out0 = metile.Buffer(shape=(64,))
    scale[(1,)](x0, out0, 64, BLOCK=64, timeout=5)
    scale[(1,)](x0, out0, 64, BLOCK=64, timeout=math.inf)
    for bad in (0, -2.5, float("nan")):
        raises(metile.InvalidArgumentError, "must be None (METILE_TIMEOUT_S), seconds > 0",
               scale[(1,)], x0, out0, 64, BLOCK=64, timeout=bad)
    d0.synchronize()
    if gpus >= 2:
        d1 = metile.set_device("cuda:1")
        assert metile.get_device() is d1 and d1.ordinal == 1 and d1.label == "cuda:1"
        assert d1.description == "stand-in GPU 1", d1.description
        out1 = metile.Buffer(shape=(64,))
        assert out1.device is d1
        raises(metile.InvalidArgumentError,
               "argument `X` is a buffer on device cuda:0 but the launch runs on cuda:1",
               scale[(1,)], x0, out1, 64, BLOCK=64)
        x1 = metile.Buffer(data=np.ones(64, np.float32))
        scale[(1,)](x1, out1, 64, BLOCK=64)

        # Streams: metile's own, torch's and CuPy's shapes, and a bare CUstream int.
        s0, s1 = metile.Stream("cuda:0"), metile.Stream()
        assert s1.device is d1
        raises(metile.InvalidArgumentError, "belongs to device cuda:0, the launch runs on cuda:1",
               scale[(1,)], x1, out1, 64, BLOCK=64, stream=s0)
        torch_like = types.SimpleNamespace(cuda_stream=s0.cuda_stream,
                                           device=types.SimpleNamespace(index=0))
        cupy_like = types.SimpleNamespace(ptr=s0.cuda_stream, device_id=0)
        for other in (torch_like, cupy_like):
            raises(metile.InvalidArgumentError, "is on cuda:0, the launch runs on cuda:1",
                   scale[(1,)], x1, out1, 64, BLOCK=64, stream=other)
        raises(metile.InvalidArgumentError,
               f"stream 0x{{s0.cuda_stream:x}} belongs to cuda:0, but this launch or event is on cuda:1",
               scale[(1,)], x1, out1, 64, BLOCK=64, stream=s0.cuda_stream)
        scale[(1,)](x1, out1, 64, BLOCK=64, stream=s1)
        scale[(1,)](x1, out1, 64, BLOCK=64, stream=types.SimpleNamespace(ptr=s1.cuda_stream,
                                                                          device_id=1))

        # Events: timed on their GPU; one of each GPU cannot be compared; a stream of the
        # other GPU is refused when recording.
        start, end = metile.Event(), metile.Event()
        start.record(s1)
        scale[(1,)](x1, out1, 64, BLOCK=64, stream=s1)
        end.record(s1)
        end.synchronize()
        assert start.elapsed_time(end) == 0.25  # the stand-in's answer, passed through
        e0 = metile.Event(device="cuda:0")
        e0.record()
        raises(metile.InvalidArgumentError, "different devices (cuda:0 and cuda:1)",
               e0.elapsed_time, end)
        raises(metile.InvalidArgumentError, "belongs to cuda:1, but this launch or event is on cuda:0",
               e0.record, s1.cuda_stream)
        s1.synchronize()
        metile.synchronize()
    print("ok")
""")


def _driver():
    lib = os.environ.get("METILE_LIBRARY", "")
    path = os.path.join(os.path.dirname(lib), "tests", "cuda_standin", "libmetile_standin_cuda.so")
    if not os.path.exists(path):
        pytest.skip("the stand-in CUDA driver is not built next to METILE_LIBRARY")
    return path


@pytest.mark.parametrize("gpus", [1, 3])
def test_several_gpus_streams_and_events_on_the_stand_in_driver(tmp_path, gpus):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "child.py"  # a file: tracing reads the kernel's source
    script.write_text(_CHILD.format(path=root))
    env = dict(os.environ, METILE_CUDA_DRIVER=_driver(), METILE_STANDIN_CUDA_DEVICES=str(gpus))
    env.pop("METILE_TIMEOUT_S", None)
    env.pop("METILE_DEVICE", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=300)
    if "NVRTC" in r.stderr and r.returncode != 0:
        pytest.skip("NVRTC is not installed")
    assert r.returncode == 0 and r.stdout.splitlines() == ["ok"], r.stdout + r.stderr
