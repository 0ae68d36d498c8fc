"""Test setup: import the package from this checkout (so no install is needed), use a private
compile/autotune cache, and run device tests on every device metile knows, skipping the ones
this machine cannot start.

Run everything with:  /usr/bin/python3 -m pytest bindings/python/tests -q
"""

import os
import sys
import tempfile

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))
if "METILE_LIBRARY" not in os.environ:
    _lib = os.path.join(_HERE, "..", "..", "..", "build", "libmetile.so")
    if os.path.exists(_lib):
        os.environ["METILE_LIBRARY"] = os.path.abspath(_lib)
os.environ.setdefault("METILE_CACHE_DIR", tempfile.mkdtemp(prefix="metile-pytest-cache-"))
os.environ.setdefault("METILE_AUTOTUNE_QUIET", "0")

import metile  # noqa: E402

KNOWN_DEVICES = ["interp", "cpu", "metal", "metal-sim", "cuda"]
AVAILABLE = metile.devices()
# Devices that execute slowly (reference interpreters/simulators) get the smaller shape lists.
SLOW_DEVICES = {"interp", "metal-sim"}


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", KNOWN_DEVICES, indirect=True)


@pytest.fixture
def device(request):
    name = request.param
    if name not in AVAILABLE:
        pytest.skip(f"device {name} is not available here (available: {', '.join(AVAILABLE)})")
    with metile.use_device(name) as dev:
        yield dev


@pytest.fixture
def fast(device):
    """True on devices that run the full (large) shape lists."""
    return device.name not in SLOW_DEVICES
