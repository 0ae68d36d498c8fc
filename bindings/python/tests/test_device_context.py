"""The current device is per thread and per asyncio task: `use_device` / `set_device` in one
never move another's buffers or launches, and leave no trace once its block ends."""

import asyncio
import threading

import numpy as np
import pytest

import metile
from conftest import KNOWN_DEVICES, AVAILABLE


def _two_devices():
    usable = [d for d in KNOWN_DEVICES if d in AVAILABLE and d in ("interp", "cpu", "metal-sim")]
    if len(usable) < 2:
        pytest.skip(f"needs two host devices among interp, cpu, metal-sim (have {usable})")
    return usable[0], usable[1]


@metile.kernel
def _plus_one(X, B: metile.constexpr):
    o = metile.arange(0, B)
    metile.store(X + o, metile.load(X + o) + 1.0)


def _default_name():
    """The library default device, as a thread that never chose one sees it."""
    got = []
    t = threading.Thread(target=lambda: got.append(metile.get_device().name))
    t.start()
    t.join(60)
    return got[0]


def _work():
    """A buffer and a launch on the current device; returns the devices they used."""
    dev = metile.get_device()
    buf = metile.Buffer(np.zeros(32, np.float32))
    _plus_one[(1,)](buf, B=32)
    metile.synchronize(dev)
    assert buf.numpy()[0] == 1.0
    return dev.name, buf.device.name


def test_threads_in_use_device_blocks_are_independent():
    a, b = _two_devices()
    before = metile.get_device()
    # A enters its block, then B enters its own, then A works and leaves while B is still inside,
    # then B works: the interleaving that crossed devices when the current device was global.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}
    errors = []

    def thread_a():
        try:
            with metile.use_device(a):
                a_in.set()
                b_in.wait(10)
                seen["a"] = _work()
            seen["a_after"] = metile.get_device().name
        except Exception as e:  # reported by the main thread
            errors.append(e)
        finally:
            a_in.set()
            a_out.set()

    def thread_b():
        try:
            a_in.wait(10)
            with metile.use_device(b):
                b_in.set()
                a_out.wait(10)
                seen["b"] = _work()
        except Exception as e:
            errors.append(e)
        finally:
            b_in.set()

    ts = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors
    assert seen["a"] == (a, a)
    assert seen["b"] == (b, b)
    assert seen["a_after"] == _default_name()  # a thread starts on the default
    assert metile.get_device() is before  # nothing leaked into this thread


def test_set_device_in_a_thread_stays_in_that_thread():
    a, b = _two_devices()
    with metile.use_device(a):
        got = []
        t = threading.Thread(target=lambda: got.append((metile.set_device(b).name, _work())))
        t.start()
        t.join(60)
        assert got == [(b, (b, b))]
        assert metile.get_device().name == a
        assert _work() == (a, a)


def test_asyncio_tasks_switch_devices_independently():
    a, b = _two_devices()
    before = metile.get_device()

    async def task(name, other_inside, me_inside):
        with metile.use_device(name):
            me_inside.set()
            await other_inside.wait()  # both tasks are inside their blocks now
            await asyncio.sleep(0)
            result = _work()
            await asyncio.sleep(0)
            assert metile.get_device().name == name
        return result

    async def main():
        ea, eb = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(task(a, eb, ea), task(b, ea, eb))

    assert asyncio.run(main()) == [(a, a), (b, b)]
    assert metile.get_device() is before


def test_a_task_inherits_its_creators_device():
    a, b = _two_devices()

    async def child():
        return metile.get_device().name

    async def main():
        with metile.use_device(b):
            inside = await asyncio.create_task(child())
        return inside, await asyncio.create_task(child())

    with metile.use_device(a):
        assert asyncio.run(main()) == (b, a)
