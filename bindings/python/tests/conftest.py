"""Test setup: import the package from this checkout (so no install is needed), use a private
compile/autotune cache, and run device tests on every device metile knows, skipping the ones
this machine cannot start.

Run everything with:  /usr/bin/python3 -m pytest bindings/python/tests -q
"""

import os
import sys
import tempfile
import zlib

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))
if "METILE_LIBRARY" not in os.environ:
    _lib = os.path.join(_HERE, "..", "..", "..", "build", "libmetile.so")
    if os.path.exists(_lib):
        os.environ["METILE_LIBRARY"] = os.path.abspath(_lib)
# A fresh cache for every run (inside $METILE_CACHE_DIR when it is set): the autotune tests
# expect to time their configurations, which a record from an earlier run would skip.
# METILE_TEST_CACHE_DIR names the cache to use as it is: scripts/test.sh gives its two pytest
# steps (every device, then the stand-in `metal`) one new directory, so the stand-in finds
# metal-sim's builds of the same MSL there.
if os.environ.get("METILE_TEST_CACHE_DIR"):
    os.makedirs(os.environ["METILE_TEST_CACHE_DIR"], exist_ok=True)
    os.environ["METILE_CACHE_DIR"] = os.environ["METILE_TEST_CACHE_DIR"]
else:
    _cache_parent = os.environ.get("METILE_CACHE_DIR") or None
    if _cache_parent:
        os.makedirs(_cache_parent, exist_ok=True)
    os.environ["METILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="metile-pytest-cache-",
                                                      dir=_cache_parent)
os.environ.setdefault("METILE_AUTOTUNE_QUIET", "0")

import metile  # noqa: E402

pytest_plugins = ("pytester",)  # test_pairwise_cover.py runs the marker in a pytest of its own

KNOWN_DEVICES = ["interp", "cpu", "metal", "metal-sim", "cuda"]
# METILE_TEST_DEVICES=cpu,interp runs the device tests on those devices only (the quick loop of
# scripts/test.sh); a name metile does not know is an error, not an empty run.
_only = [d for d in os.environ.get("METILE_TEST_DEVICES", "").split(",") if d]
for _d in _only:
    if _d not in KNOWN_DEVICES:
        raise pytest.UsageError(f"METILE_TEST_DEVICES names {_d!r}; known: {', '.join(KNOWN_DEVICES)}")
if _only:
    KNOWN_DEVICES = [d for d in KNOWN_DEVICES if d in _only]
AVAILABLE = metile.devices()
# Devices that execute slowly (reference interpreters/simulators) get the smaller shape lists.
SLOW_DEVICES = {"interp", "metal-sim"}
# `metal` on the Linux stand-in Metal.framework (tests/metal_standin) runs on the metal-sim engine.
if os.environ.get("METILE_METAL_FRAMEWORK"):
    SLOW_DEVICES.add("metal")


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", KNOWN_DEVICES, indirect=True)


@pytest.fixture(autouse=True)
def _seeded_numpy(request):
    """Every test draws the same random inputs on every run (a failure reproduces); set
    METILE_TEST_SEED to draw other ones."""
    import numpy as np
    base = int(os.environ.get("METILE_TEST_SEED", "0"))
    np.random.seed((base + zlib.crc32(request.node.nodeid.encode())) % 2**32)


@pytest.fixture
def device(request):
    name = request.param
    if name not in AVAILABLE:
        pytest.skip(f"device {name} is not available here (available: {', '.join(AVAILABLE)})")
    with metile.use_device(name) as dev:
        yield dev


@pytest.fixture
def bench_flush(device, monkeypatch):
    """do_bench clears 256 MiB before each timed call on a GPU device. On the stand-in Metal
    (tests/metal_standin, a CPU simulator) each clear takes seconds, so there it clears 1 MiB:
    the same path, at a size the simulator runs in milliseconds."""
    if device.name in SLOW_DEVICES:
        from metile import testing
        monkeypatch.setattr(testing, "_L2_FLUSH_BYTES", 1 << 20)
        monkeypatch.setattr(testing, "_flush", {})


@pytest.fixture
def fast(device):
    """True on devices that run the full (large) shape lists."""
    return device.name not in SLOW_DEVICES


# Ops a GPU backend does not lower yet (dot, before the matrix-unit work) fail to compile with
# METILE_ERROR_UNSUPPORTED naming the op and the device, by design. Tests that use such an op
# report that as a skip with the library's message, as the C++ device suite does; interp and cpu
# run everything, so a skip there is still a failure.
FULL_DEVICES = {"interp", "cpu"}


def _unsupported_here(exc, device):
    return (device not in FULL_DEVICES and isinstance(exc, metile.MetileError)
            and "is not supported on" in str(exc))


# A test marked `@pytest.mark.pairwise("a", "b", ...)` runs, on every device but cuda, only a set
# of its (a, b, ...) combinations in which every pair of values of two of them appears at least
# once (each value on every device, each pair of values together), not their full product: the
# host devices' compiles make the full products most of the suite's time. cuda runs the product;
# METILE_TEST_FULL=1 runs it everywhere.
FULL_PRODUCTS = os.environ.get("METILE_TEST_FULL") == "1"
PRODUCT_DEVICES = {"cuda"}


def pytest_configure(config):
    config.addinivalue_line("markers", "pairwise(*names): on devices other than cuda, only a "
                                       "pairwise-covering set of the named parameters' values")


def pairwise_cover(combos):
    """A small subset of `combos` (tuples of equal length) holding every pair of values of two
    positions, and every single value, that appears in `combos`: greedy, the same on every run."""
    def pairs(c):
        return ({(i, c[i], j, c[j]) for i in range(len(c)) for j in range(i + 1, len(c))}
                | {(i, c[i]) for i in range(len(c))})
    combos = list(dict.fromkeys(combos))
    uncovered = set().union(*(pairs(c) for c in combos)) if combos else set()
    chosen = []
    while uncovered:
        best = max(combos, key=lambda c: len(pairs(c) & uncovered))
        chosen.append(best)
        uncovered -= pairs(best)
    return set(chosen)


def _deselect_outside_pairwise_covers(config, items):
    groups = {}
    for item in items:
        mark = item.get_closest_marker("pairwise")
        params = getattr(getattr(item, "callspec", None), "params", {})
        if mark is None or FULL_PRODUCTS or params.get("device") in PRODUCT_DEVICES:
            continue
        names = mark.args
        unknown = [n for n in names if n not in params]
        if not names or unknown:
            raise pytest.UsageError(f"{item.nodeid}: pytest.mark.pairwise names parameters of the test "
                                    f"({', '.join(sorted(params))}), got {list(names)}")
        rest = tuple(sorted((k, repr(v)) for k, v in params.items() if k not in names))
        groups.setdefault((item.originalname, rest), []).append(item)
    drop = set()
    for members in groups.values():
        names = members[0].get_closest_marker("pairwise").args
        keys = [tuple(repr(m.callspec.params[n]) for n in names) for m in members]
        keep = pairwise_cover(keys)
        drop.update(m for m, k in zip(members, keys) if k not in keep)
    if drop:
        config.hook.pytest_deselected(items=[i for i in items if i in drop])
        items[:] = [i for i in items if i not in drop]


def pytest_collection_modifyitems(config, items):
    _deselect_outside_pairwise_covers(config, items)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        dev = params.get("device")
        if dev is None or dev in FULL_DEVICES or not hasattr(item, "obj"):
            continue
        test = item.obj

        def run(*args, __test=test, __dev=dev, **kwargs):
            try:
                return __test(*args, **kwargs)
            except metile.MetileError as e:
                if _unsupported_here(e, __dev):
                    pytest.skip(f"{__dev}: {str(e).splitlines()[0]}")
                raise

        item.obj = run
