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
