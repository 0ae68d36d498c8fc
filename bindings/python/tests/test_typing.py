"""The package is typed (PEP 561 `py.typed`) and its runtime-facing callables are annotated."""

import inspect
import os

import metile

ANNOTATED = [metile.Buffer.__init__, metile.Buffer.zeros, metile.Buffer.from_numpy,
             metile.Buffer.numpy, metile.Buffer.__dlpack__, metile.Buffer.__len__,
             metile.from_dlpack, metile.kernel, metile.KernelFunction.__getitem__,
             metile.Launcher.__call__, metile.Launcher.prepare, metile.Launcher.trace,
             metile.Launcher.compile, metile.PreparedLaunch.__call__, metile.set_device,
             metile.get_device, metile.use_device, metile.synchronize, metile.devices,
             metile.Device.synchronize, metile.Device.wait_stream, metile.Device.signal_stream,
             metile.astype]


def test_py_typed_ships_with_the_package():
    assert os.path.exists(os.path.join(os.path.dirname(metile.__file__), "py.typed"))


def test_public_callables_are_annotated():
    missing = []
    for fn in ANNOTATED:
        fn = inspect.unwrap(fn)
        sig = inspect.signature(fn)
        for name, p in sig.parameters.items():
            if name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.annotation is p.empty:
                    missing.append(f"{fn.__qualname__}(*{name})")
                continue
            if p.annotation is p.empty:
                missing.append(f"{fn.__qualname__}({name})")
        if sig.return_annotation is sig.empty:
            missing.append(f"{fn.__qualname__} -> ?")
    assert not missing, missing


def test_buffer_dtype_is_a_numpy_dtype():
    import numpy as np
    b = metile.Buffer.zeros((3, 2), "i32", device="interp")
    assert isinstance(b.dtype, np.dtype) and b.dtype == np.int32
    assert b.metile_dtype == "i32" and len(b) == 3
    assert metile.Buffer.zeros(4, "bf16", device="interp").dtype == np.uint16
