#!/usr/bin/env python3
"""Checks every #include under src/ and capi/ against the library's layers.

A file may include a header of its own layer or of a lower one, never of a higher one, and never
one of a sibling at its own rank (the devices do not include each other or the cache). The
layers, lowest first, are LAYERS below; docs/ARCHITECTURE.md ("What may include what") states
the same order in words. A header of include/ (the public C header) may be included anywhere.

Usage: scripts/check_includes.py [--root DIR]   (DIR: the project root; default: this checkout)
Prints one line per offending #include (file:line, the include, the two layers) and exits 1;
prints nothing and exits 0 when every include goes down.
"""
import argparse
import os
import re
import sys

# (rank, layer, folders). Lowest rank first; equal ranks are siblings. The first folder that
# prefixes a file's path decides its layer, so a device folder is listed before runtime/.
LAYERS = [
    (0, "support", ["src/support"]),
    (1, "ir", ["src/ir"]),
    (2, "target", ["src/target"]),
    (3, "frontend", ["src/frontend"]),
    (3, "passes", ["src/passes"]),
    (4, "codegen", ["src/codegen"]),
    (6, "runtime/cpu", ["src/runtime/cpu"]),
    (6, "runtime/cuda", ["src/runtime/cuda"]),
    (6, "runtime/interp", ["src/runtime/interp"]),
    (6, "runtime/metal", ["src/runtime/metal"]),
    (6, "runtime/metal_sim", ["src/runtime/metal_sim"]),
    (5, "runtime", ["src/runtime"]),  # the Device interface, artifacts, registry, runtime/host
    (6, "cache", ["src/cache"]),
    (7, "driver", ["src/driver"]),
    (8, "capi", ["capi"]),
]
PUBLIC = "include"  # the public header: below every layer
# Where a quoted include is looked up, in the compiler's order after the including folder.
SEARCH = ["src", "capi", "include"]
INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')
SOURCE = (".h", ".cpp", ".def", ".inc")


def layer_of(path):
    """(rank, name) of a root-relative path, or None outside the layers."""
    for rank, name, folders in LAYERS:
        for folder in folders:
            if path == folder or path.startswith(folder + "/"):
                return rank, name
    return None


def resolve(root, including, name):
    """Root-relative path of the file `#include "name"` in `including` reaches, or None."""
    candidates = [os.path.join(os.path.dirname(including), name)]
    candidates += [os.path.join(base, name) for base in SEARCH]
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def check(root):
    problems = []
    for top in ("src", "capi"):
        for folder, _, files in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(files):
                if not f.endswith(SOURCE):
                    continue
                path = os.path.relpath(os.path.join(folder, f), root)
                mine = layer_of(path)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
                    for number, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        where = f"{path}:{number}: {line.strip()}"
                        target = resolve(root, path, m.group(1))
                        if target is None:
                            problems.append(f"{where}: no such file under {', '.join(SEARCH)}")
                            continue
                        if target.startswith(PUBLIC + "/"):
                            continue
                        theirs = layer_of(target)
                        if mine is None or theirs is None:
                            problems.append(f"{where}: {target} is in no layer (add its folder to LAYERS)")
                        elif theirs[1] != mine[1] and theirs[0] >= mine[0]:
                            how = "a sibling" if theirs[0] == mine[0] else "a higher layer"
                            problems.append(f"{where}: {mine[1]} (rank {mine[0]}) includes {how}, "
                                            f"{theirs[1]} (rank {theirs[0]})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    problems = check(args.root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_includes: {len(problems)} include(s) against the layers "
              "(docs/ARCHITECTURE.md, \"What may include what\")", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
