"""numpy arrays as kernel arguments: read-only outputs are refused, device copies warn once,
and fresh arrays of a seen shape and dtype re-use the prepared launch (issue 17 item 2)."""

import warnings

import numpy as np
import pytest

import metile
from metile import _ffi, _kernel


@metile.kernel
def add_one(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m) + 1.0, mask=m)


def test_read_only_output_is_an_error_naming_the_argument(device):
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with metile.use_device(device):
        with pytest.raises(metile.InvalidArgumentError, match="`Out` is a read-only numpy array"):
            add_one[1](x, out, 8, BLOCK=8)
        assert (out == 0).all()
        ro_in = x.copy()
        ro_in.flags.writeable = False           # a read-only input is fine
        res = np.zeros(8, np.float32)
        add_one[1](ro_in, res, 8, BLOCK=8)
        np.testing.assert_array_equal(res, x + 1)


def test_arrays_a_device_copies_warn_once_per_process(monkeypatch):
    # No device here copies writable arrays (all address host memory), so pretend the wrap
    # did not share: the launch then copies in and back, as on cuda.
    monkeypatch.setattr(_ffi, "metile_buffer_shares_memory", lambda h: 0)
    monkeypatch.setattr(_kernel, "_copy_warned", False)
    add_one.clear_cache()  # the warning comes with preparing a launch, not with a cached one
    x = np.arange(8, dtype=np.float32)
    with metile.use_device("interp"):
        with pytest.warns(metile.PerformanceWarning, match="`X`.*metile.Buffer"):
            out = np.zeros(8, np.float32)
            add_one[1](x, out, 8, BLOCK=8)
        np.testing.assert_array_equal(out, x + 1)   # copied back
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            add_one[1](x.copy(), np.zeros(8, np.float32), 8, BLOCK=8)


def test_shared_arrays_do_not_warn():
    with metile.use_device("interp"), warnings.catch_warnings():
        warnings.simplefilter("error")
        add_one[1](np.ones(8, np.float32), np.zeros(8, np.float32), 8, BLOCK=8)


def test_fresh_arrays_reuse_the_cached_launch(device):
    if device.name in ("cuda", "metal"):
        pytest.skip(f"{device.name} copies these (unaligned) numpy arguments in and out: nothing "
                    "to re-point")
    with metile.use_device(device):
        add_one.clear_cache()
        x = np.arange(16, dtype=np.float32)
        for k in range(6):
            xs = x + k
            out = np.empty_like(xs)
            add_one[1](xs, out, 16, BLOCK=16)
            np.testing.assert_array_equal(out, xs + 1)
        assert len(add_one._launches) == 1
        (entry,) = add_one._launches.values()
        # A different shape re-binds the same launch; a read-only input too (the kernel only
        # reads it); a different dtype is another specialization.
        out = np.zeros(32, np.float32)
        add_one[1](np.ones(32, np.float32), out, 16, BLOCK=16)
        np.testing.assert_array_equal(out[:16], 2)
        y = np.ones(16, np.float32)
        y.flags.writeable = False
        out = np.zeros(16, np.float32)
        add_one[1](y, out, 16, BLOCK=16)
        np.testing.assert_array_equal(out, 2)
        assert list(add_one._launches.values()) == [entry]
        with pytest.raises(metile.InvalidArgumentError, match="read-only numpy array"):
            add_one[1](x, y, 16, BLOCK=16)


def _page_aligned(n):
    # A numpy array whose memory starts on a page boundary and spans whole pages: the devices
    # that can wrap host memory use it in place rather than copying it.
    raw = np.zeros(n + 4096 // 4, np.float32)
    skip = (-raw.ctypes.data % 4096) // 4
    return raw[skip:skip + n]


def test_in_place_arrays_hold_the_results_when_the_call_returns(device):
    # On an asynchronous device (metal) a kernel writing a numpy array in place must have
    # finished by the time the call returns: the array has no synchronize of its own.
    n = 1 << 14
    for i in range(3):
        x = _page_aligned(n)
        x[:] = np.arange(n, dtype=np.float32) + i
        out = _page_aligned(n)
        add_one[1](x, out, n, BLOCK=n)
        np.testing.assert_array_equal(out, x + 1)
