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


def _public_callables():
    """Every public function of the package (metile.__all__) and of _lang, _autotune and _trace,
    and every public method (with __init__, __call__, __getitem__) of its public classes."""
    import types
    from metile import _autotune, _lang, _trace
    seen = set()
    special = ("__init__", "__call__", "__getitem__")

    def methods(cls):
        for name, v in vars(cls).items():
            if name.startswith("_") and name not in special:
                continue
            f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
            if inspect.isfunction(f):
                yield f"{cls.__module__}.{cls.__qualname__}.{name}", f

    found = []
    for name in metile.__all__:
        obj = getattr(metile, name)
        if isinstance(obj, types.ModuleType) or not getattr(obj, "__module__", "").startswith("metile"):
            continue
        if inspect.isclass(obj):
            found += list(methods(obj))
        elif inspect.isfunction(inspect.unwrap(obj)):
            found.append((f"metile.{name}", obj))
    for mod in (_lang, _autotune, _trace):
        for name, obj in vars(mod).items():
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == mod.__name__:
                found.append((f"{mod.__name__}.{name}", obj))
            elif not name.startswith("_") and inspect.isclass(obj) and obj.__module__ == mod.__name__:
                found += list(methods(obj))
    for qual, f in found:
        if id(f) not in seen:
            seen.add(id(f))
            yield qual, inspect.unwrap(f)


def test_every_public_callable_is_annotated_and_its_annotations_resolve():
    import typing
    missing, unresolved, count = [], [], 0
    for qual, fn in _public_callables():
        count += 1
        sig = inspect.signature(fn)
        for name, p in sig.parameters.items():
            if name not in ("self", "cls") and p.annotation is p.empty:
                missing.append(f"{qual}({name})")
        if sig.return_annotation is sig.empty:
            missing.append(f"{qual} -> ?")
        try:
            typing.get_type_hints(fn)
        except Exception as e:  # a misspelled or unimported name in a string annotation
            unresolved.append(f"{qual}: {e}")
    assert count > 120, count  # the discovery itself works
    assert not missing, missing
    assert not unresolved, unresolved


def _run_import(code):
    import subprocess
    import sys
    pkg = os.path.dirname(os.path.dirname(metile.__file__))
    env = dict(os.environ, PYTHONPATH=pkg)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_import_runs_no_subprocess_and_loads_no_submodule_it_does_not_need():
    # Every way a process can start another is patched before the import; importing, and then
    # resolving every public name, must not use one.
    code = """
import os, subprocess, sys
def refuse(*a, **k):
    raise AssertionError("a subprocess during import: %r" % (a[:1],))
for mod, names in ((os, ("system", "popen", "posix_spawn", "posix_spawnp", "fork", "execv",
                         "execve", "execvp", "spawnv", "spawnve")),
                   (subprocess, ("Popen", "run", "call", "check_call", "check_output"))):
    for n in names:
        if hasattr(mod, n):
            setattr(mod, n, refuse)
import metile
lazy = sorted(m for m in sys.modules if m.startswith("metile.") and m not in
              ("metile._ffi", "metile._enums", "metile._ops", "metile._installed"))
print("LOADED", lazy)
for name in metile.__all__:
    getattr(metile, name)
print("OK")
"""
    r = _run_import(code)
    assert r.returncode == 0, r.stderr
    assert "LOADED []" in r.stdout, r.stdout  # the language, kernels, buffers load on first use
    assert r.stdout.strip().endswith("OK")


def test_lazy_names_are_the_submodules_objects():
    from metile import _kernel, _lang
    assert metile.kernel is _kernel.kernel and metile.sum is _lang.reduce_sum
    assert metile.abs is _lang.absolute and "Buffer" in dir(metile)
    import pytest
    with pytest.raises(AttributeError, match="no_such_name"):
        metile.no_such_name
