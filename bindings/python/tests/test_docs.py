"""The project states its contract in its own files (docs/semantics.md, docs/tile-ir.md,
docs/ARCHITECTURE.md): no tracked file may cite the design notes kept outside the repository,
whose name is spelled below in pieces so that this file does not cite it either."""

import os
import re
import subprocess

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
