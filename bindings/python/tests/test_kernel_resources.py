"""What a compiled kernel reports about its resources (Kernel.info) and the threadgroup-memory
limit compiling enforces: checked on every device against the device's own limit."""
import numpy as np
import pytest

import metile


@metile.kernel
def stage_twice(X, Out, N: metile.constexpr, S: metile.constexpr):
    """Out = 2 X (N elements) through a threadgroup array of S >= N f32."""
    s = metile.shared(S, "f32")
    i = metile.arange(0, N)
    metile.store(s + i, metile.load(X + i))
    metile.barrier()
    metile.store(Out + i, metile.load(s + i) * 2.0)


def test_info_reports_threadgroup_memory_and_its_limit(device):
    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    k = stage_twice[(1,)].compile(x, out, N=256, S=1000)
    info = k.info
    assert info["threadgroup_memory_bytes"] >= 1000 * 4
    assert info["threadgroup_memory_limit"] == device.threadgroup_memory_bytes
    assert info["threadgroup_memory_limit"] >= info["threadgroup_memory_bytes"]
    # Only cuda reports registers; elsewhere they are unknown (0).
    if device.name == "cuda":
        assert info["registers_per_thread"] > 0
    else:
        assert info["registers_per_thread"] == 0
    stage_twice[(1,)](x, out, N=256, S=1000)
    metile.synchronize()
    np.testing.assert_array_equal(out, 2 * x)


def test_a_kernel_over_the_limit_names_itself_the_bytes_and_the_limit(device):
    limit = device.threadgroup_memory_bytes
    n = limit // 4 + 4  # f32: 16 bytes past the limit
    x = np.zeros(64, np.float32)
    if device.name == "interp":
        want = (rf"kernel stage_twice needs more than the interp device's {limit} bytes of "
                rf"threadgroup memory \({n * 4} bytes")
    elif device.name == "cpu":  # shared arrays live on the worker's stack with the tiles
        want = rf"kernel stage_twice keeps \d+ MiB .* the cpu device allows {limit >> 20} MiB"
    else:
        want = (rf"stage_twice\S* needs {n * 4} bytes of threadgroup memory; "
                rf"{device.name} allows {limit}")
    with pytest.raises(metile.UnsupportedError, match=want):
        stage_twice[(1,)].compile(x, x, N=64, S=n)
