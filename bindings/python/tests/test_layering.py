"""The package's import graph runs one way: the language (_lang) uses the tracer (_trace), never
the reverse, and `constexpr` lives in a leaf module every layer can import."""

import ast
import pathlib

import metile

PKG = pathlib.Path(metile.__file__).parent


def _imports(module):
    tree = ast.parse((PKG / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):  # function-local imports count too
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.add(node.module or "")
            names.update(a.name for a in node.names if node.module is None)
    return names


def test_the_tracer_does_not_import_the_language():
    assert "_lang" not in _imports("_trace")
    assert "_trace" in _imports("_lang")


def test_constexpr_is_a_leaf():
    assert _imports("_constexpr") == set()
    assert metile.constexpr is metile._constexpr.constexpr


def test_value_operators_are_installed():
    for name in ("__add__", "__radd__", "__lt__", "__eq__", "__neg__", "__getitem__", "to"):
        assert getattr(metile.Value, name).__module__ == "metile._lang", name


def _cycles():
    """Pairs (a, b) of the package's modules where a imports b and b reaches a back."""
    graph = {p.stem: _imports(p.stem) for p in PKG.glob("*.py")}

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for n in graph.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    return {(a, b) for a in graph for b in graph[a] if a in reach(b)}


def test_the_triton_habits_build_on_the_language_one_way():
    assert "_lang" in _imports("_lang_triton")
    assert "_lang_triton" not in _imports("_lang")
    assert not {c for c in _cycles() if "_lang_triton" in c}
    # The one cycle left: _lang checks for a block pointer, which _block_ptr builds from _lang.
    assert _cycles() <= {("_lang", "_block_ptr"), ("_block_ptr", "_lang")}


def test_triton_habit_methods_are_there_whenever_a_kernel_traces():
    # Only _kernel starts a trace; it loads the methods' module, in a fresh interpreter too.
    import subprocess
    import sys
    code = ("import sys, metile._kernel, metile._trace as t; "
            "assert 'metile._lang_triton' in sys.modules; "
            "print(t.Value.T.fget.__module__, t.Value.cumsum.__module__)")
    import os
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PKG.parent)] + sys.path)}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=env)
    assert out.stdout.split() == ["metile._lang_triton", "metile._lang_triton"]


@metile.kernel
def _transposed_cumsum(X, Out):
    rows, cols = metile.arange(0, 4)[:, None] * 4, metile.arange(0, 4)[None, :]
    metile.store(Out + rows + cols, metile.load(X + rows + cols).T.cumsum(1))


def test_triton_habit_methods_trace_on_every_device(device):
    import numpy as np
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = np.zeros_like(x)
    _transposed_cumsum[(1,)](x, out)
    np.testing.assert_allclose(out, np.cumsum(x.T.astype(np.float64), axis=1))
