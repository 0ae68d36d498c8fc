"""The docs cannot go stale. The project states its contract in its own files
(docs/semantics.md, docs/tile-ir.md, docs/ARCHITECTURE.md): no tracked file may cite the design
notes kept outside the repository, whose name is spelled below in pieces so that this file does
not cite it either. docs/tile-ir.md's op reference is generated from src/ir/ops.def
(docs/gen_tile_ir_ops.py --check), its hand-written rules name every op, and its example
programs parse and print back as written."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_CITATION = re.compile("DES" + r"IGN(\.md\b|\s*§)")


def _tracked_files():
    try:
        out = subprocess.run(["git", "-C", REPO, "ls-files", "-z"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [f for f in out.stdout.decode().split("\0") if f]


def test_no_tracked_file_cites_the_design_notes():
    files = _tracked_files()
    assert len(files) > 100, f"only {len(files)} tracked files: the check would pass vacuously"
    hits = []
    for rel in files:
        path = os.path.join(REPO, rel)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data[:4096]:
            continue  # binary
        for no, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if _CITATION.search(line):
                hits.append(f"{rel}:{no}: {line.strip()}")
    assert not hits, ("cite docs/semantics.md, docs/tile-ir.md or docs/ARCHITECTURE.md instead:\n" +
                      "\n".join(hits))


def test_the_citation_pattern_matches_what_it_must():
    # The pattern itself, so that the check above cannot pass because it matches nothing.
    d = "DES" + "IGN"
    for cited in (f"see {d}.md §3", f"({d} §3 identities)", f"{d}.md"):
        assert _CITATION.search(cited), cited
    for fine in ("docs/semantics.md", "design.md", f"{d}ER", "REDESIGNED"):
        assert not _CITATION.search(fine), fine


# ------------------------------------------------------------- docs/tile-ir.md stays current
GEN = os.path.join(REPO, "docs", "gen_tile_ir_ops.py")
TILE_IR_DOC = os.path.join(REPO, "docs", "tile-ir.md")


def _gen(*args):
    return subprocess.run([sys.executable, GEN, *args], capture_output=True, text=True)


def test_tile_ir_op_reference_is_generated_from_the_op_table():
    r = _gen("--check")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(REPO, "src", "ir", "ops.def"), encoding="utf-8") as f:
        names = re.findall(r"^OP\(\s*\w+,\s*(\w+),", f.read(), re.M)
    with open(TILE_IR_DOC, encoding="utf-8") as f:
        doc = f.read()
    assert len(names) > 60
    for name in names:  # each op in the generated table and in the hand-written rules
        assert doc.count(f"| `{name}` |") == 2, name


def _edited_copy(tmp_path, old, new):
    with open(TILE_IR_DOC, encoding="utf-8") as f:
        doc = f.read()
    assert old in doc
    path = tmp_path / "tile-ir.md"
    path.write_text(doc.replace(old, new, 1), encoding="utf-8")
    return str(path)


def test_tile_ir_check_fails_on_a_stale_op_reference(tmp_path):
    path = _edited_copy(tmp_path, "`METILE_OP_DOT` = 80", "`METILE_OP_DOT` = 81")
    r = _gen("--check", "--doc", path)
    assert r.returncode == 1 and "is stale" in r.stderr, r.stderr
    assert _gen("--doc", path).returncode == 0  # regenerating repairs it
    assert _gen("--check", "--doc", path).returncode == 0


def test_tile_ir_check_fails_on_an_op_without_rules(tmp_path):
    path = _edited_copy(tmp_path, "| `trans` | x |", "| `transpose` | x |")
    r = _gen("--check", "--doc", path)
    assert r.returncode == 1, r.stderr
    assert "no rules row for op `trans`" in r.stderr
    assert "rules row for unknown op `transpose`" in r.stderr


def test_tile_ir_examples_parse():
    # Every `kernel @...` block of the page is a program the parser and verifier accept, and
    # prints back as written (the page shows the canonical form).
    import ctypes
    from metile import _ffi
    with open(TILE_IR_DOC, encoding="utf-8") as f:
        blocks = re.findall(r"```\n(kernel @.*?)```", f.read(), re.S)
    assert blocks, "no example program in docs/tile-ir.md"
    for text in blocks:
        prog = ctypes.POINTER(_ffi.metile_program)()
        st = _ffi.metile_program_parse(ctypes.byref(prog), text.encode())
        assert st == 0, _ffi.last_error()
        out = ctypes.c_char_p()
        assert _ffi.metile_program_print(prog, ctypes.byref(out)) == 0
        assert _ffi.take_string(out) == text
        _ffi.metile_program_release(prog)


def test_tile_ir_check_fails_on_a_new_op_and_on_an_unreadable_row(tmp_path):
    with open(os.path.join(REPO, "src", "ir", "ops.def"), encoding="utf-8") as f:
        table = f.read()
    grown = tmp_path / "grown.def"
    grown.write_text(table.replace("#undef OP", 'OP(FMA, fma, 140, 3, 3, 1, "", kPure)\n\n#undef OP'))
    r = _gen("--check", "--ops-def", str(grown))
    assert r.returncode == 1 and "is stale" in r.stderr and "no rules row for op `fma`" in r.stderr
    odd = tmp_path / "odd.def"
    odd.write_text(re.sub(r"^OP\(TRANS,.*$", 'OP(TRANS, trans, 132, 1, 1, 1, /* none */ "", kPure)',
                          table, count=1, flags=re.M))
    r = _gen("--check", "--ops-def", str(odd))
    assert r.returncode == 1 and "a row this script cannot read" in r.stderr, r.stderr
