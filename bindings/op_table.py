"""The element-wise rows of the Tile IR op table (src/ir/ops.def), for the bindings' generators:
bindings/python/regen.py writes the language's unary functions from them, bindings/rust/regen.py
the Builder's unary, binary and compare methods, so that a new element-wise op reaches both
bindings by regenerating. The rows are read by docs/gen_tile_ir_ops.py's reader (one parser of
ops.def in Python). `--ops-def PATH` on a generator's command line reads another table (tests).
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
from gen_tile_ir_ops import read_ops  # noqa: E402


def ops_def():
    """The table a generator reads: --ops-def PATH when given, else src/ir/ops.def."""
    if "--ops-def" in sys.argv:
        return pathlib.Path(sys.argv[sys.argv.index("--ops-def") + 1])
    return ROOT / "src" / "ir" / "ops.def"


def elementwise(kind):
    """[(name, ENUM, pin)] of the rows with the trait `kind` (kUnary, kBinary, kCompare), in
    table order. ENUM is the row's enum name, so the C constant is METILE_OP_<ENUM>."""
    return [(op.name, op.enum, op.pin) for op in read_ops(str(ops_def())) if kind in op.traits]
