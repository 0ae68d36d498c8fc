"""Launches cached by value (issue 32 item 1): the Triton tutorial wrapper (a new grid lambda and
a new output per call) reuses one cached launch, and nothing cached keeps a caller's array,
buffer or grid alive once the call returns."""

import gc
import threading
import weakref

import numpy as np
import pytest

import metile


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m) + metile.load(Y + offs, mask=m),
                 mask=m)


def _wrapper(x, y):
    out = np.empty_like(x)
    n = x.size
    grid = lambda meta: (metile.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    add[grid](x, y, out, n, BLOCK=32)
    return out, grid


def _in_place(device):
    if device.name in ("cuda", "metal"):
        pytest.skip(f"{device.name} copies unaligned numpy arrays: each call prepares anew")


def test_tutorial_wrapper_keeps_nothing_alive(device):
    _in_place(device)
    add.clear_cache()
    x = np.arange(100, dtype=np.float32)
    y = np.ones(100, np.float32)
    refs = []
    for i in range(20):
        xi = x + i
        out, grid = _wrapper(xi, y)
        np.testing.assert_array_equal(out, xi + 1)
        refs.append((weakref.ref(out), weakref.ref(xi), weakref.ref(grid)))
        del out, grid, xi
    gc.collect()
    assert all(r() is None for trio in refs for r in trio)
    assert len(add._launches) == 1


def test_buffers_and_views_are_not_kept(device):
    add.clear_cache()
    n = 64
    x = metile.Buffer(data=np.arange(n, dtype=np.float32))
    y = metile.Buffer(data=np.ones(n, np.float32))
    for i in range(3):
        out = metile.Buffer.zeros((n,))
        add[(2,)](x, y, out, n, BLOCK=32)
        np.testing.assert_array_equal(out.numpy(), np.arange(n) + 1)
        if device.asynchronous:
            metile.synchronize()
        r = weakref.ref(out)
        del out
        gc.collect()
        assert r() is None


def test_arguments_rebind_between_calls(device):
    _in_place(device)
    add.clear_cache()
    a = np.arange(64, dtype=np.float32)
    b = np.full(64, 2, np.float32)
    o1, o2 = np.zeros(64, np.float32), np.zeros(64, np.float32)
    add[(2,)](a, b, o1, 64, BLOCK=32)
    add[(1,)](b, b, o2, 40, BLOCK=32)           # other arrays, scalar and grid
    np.testing.assert_array_equal(o1, a + 2)
    np.testing.assert_array_equal(o2[:32], 4)
    assert (o2[32:] == 0).all()
    add[(2,)](a, b, o1, 64, BLOCK=16)           # another constexpr: another launch
    assert len(add._launches) == 2
    add[(0,)](a, b, o1, 64, BLOCK=16)           # an empty grid launches nothing
    add.clear_cache()
    assert not add._launches and not add._programs
    add[(2,)](a, b, o1, 64, BLOCK=32)
    np.testing.assert_array_equal(o1, a + 2)


def test_cached_launch_is_per_thread(device):
    _in_place(device)
    add.clear_cache()
    errors = []

    def work(k):
        try:
            for i in range(10):
                x = np.full(64, k + i, np.float32)
                out, _ = _wrapper(x, x)
                np.testing.assert_array_equal(out, 2 * (k + i))
        except Exception as e:  # reported in the main thread
            errors.append(e)

    with metile.use_device(device):
        threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert len(add._launches) >= 1


def test_bad_arguments_still_fail_on_a_cached_launch(device):
    _in_place(device)
    add.clear_cache()
    a = np.zeros(64, np.float32)
    add[(2,)](a, a, a, 64, BLOCK=32)
    with pytest.raises(metile.InvalidArgumentError, match="does not fit in 64 bits"):
        add[(2,)](a, a, a, 2**70, BLOCK=32)
    with pytest.raises(metile.InvalidArgumentError, match="grid"):
        add[(2.0,)](a, a, a, 64, BLOCK=32)
    ro = np.zeros(64, np.float32)
    ro.flags.writeable = False
    with pytest.raises(metile.InvalidArgumentError, match="`Out` is a read-only"):
        add[(2,)](a, a, ro, 64, BLOCK=32)
