"""The bindings' element-wise op lists are generated from the op table (src/ir/ops.def): Python's
unary functions (metile/_ops.py) and Rust's Builder methods (src/ops.rs). Both generators' --check
passes on the checked-in files and fails, naming the op, once the table has a row they lack."""

import os
import pathlib
import subprocess
import sys

import pytest

import metile

ROOT = pathlib.Path(__file__).resolve().parents[3]
GENERATORS = {"python": ROOT / "bindings" / "python" / "regen.py",
              "rust": ROOT / "bindings" / "rust" / "regen.py"}


def _check(gen, *extra):
    return subprocess.run([sys.executable, str(GENERATORS[gen]), "--check", *extra],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("gen", sorted(GENERATORS))
def test_checked_in_lists_match_the_op_table(gen):
    r = _check(gen)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("gen", sorted(GENERATORS))
def test_a_new_table_row_makes_the_lists_stale(gen, tmp_path):
    table = (ROOT / "src" / "ir" / "ops.def").read_text()
    row = 'OP(SIGMOID,          sigmoid,         55, 1, 1, 1, "",                     kPure | kUnary | kFloatOnly)\n'
    assert row in table
    new = row.replace("SIGMOID,  ", "SOFTSIGN, ").replace("sigmoid, ", "softsign,").replace(" 55,", "250,")
    copy = tmp_path / "ops.def"
    copy.write_text(table.replace(row, row + new))
    r = _check(gen, "--ops-def", str(copy))
    assert r.returncode == 1, r.stdout
    assert "+" in r.stdout and "softsign" in r.stdout and "out of date with src/ir/ops.def" in r.stdout


def test_every_unary_op_is_a_function_of_the_language():
    # The table's unary rows but the operators (-x, ~x), by their op name, with its value.
    from metile import _ops
    assert {n for n, _ in _ops.UNARY_FUNCTIONS.values()} >= {"exp", "tanh", "erf", "abs", "sigmoid"}
    for attr, (name, value) in _ops.UNARY_FUNCTIONS.items():
        fn = getattr(metile, name)
        assert fn.__name__ == name and fn.__doc__, name
        assert value == getattr(metile._ffi, f"METILE_OP_{name.upper()}")
    assert not hasattr(metile, "neg") and metile.abs is metile._lang.absolute
    assert metile.tanh.__doc__ == "Element-wise hyperbolic tangent."


def test_unary_functions_compute_on_a_device(device):
    import numpy as np

    @metile.kernel
    def unary_all(X, Out, N: metile.constexpr):
        offs = metile.arange(0, N)
        x = metile.load(X + offs)
        metile.store(Out + offs, metile.tanh(x) + metile.erf(x) + metile.abs(x) + metile.floor(x))

    x = np.linspace(-2, 2, 64).astype(np.float32)
    out = np.zeros_like(x)
    unary_all[(1,)](x, out, N=64)
    import math
    ref = [math.tanh(v) + math.erf(v) + abs(v) + math.floor(v) for v in x.astype(np.float64)]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
