#!/usr/bin/env python3
"""Checks every #include under src/ and capi/ against the library's layers.

A file may include a header of its own layer or of a lower one, never of a higher one, and never
one of a sibling at its own rank (the devices do not include each other or the cache). The
layers, lowest first, are LAYERS below; docs/ARCHITECTURE.md ("What may include what") states
the same order in words. A header of include/ (the public C header) may be included anywhere.
Most layers are folders; inside src/passes, lowering and the GPU pipeline that runs it are layers
of their own files above the rest, so layout assignment, which lowering reads, never includes
lowering back.

Usage: scripts/check_includes.py [--root DIR]   (DIR: the project root; default: this checkout)
Prints one line per offending #include (file:line, the include, the two layers) and exits 1;
prints nothing and exits 0 when every include goes down.
"""
import argparse
import fnmatch
import os
import re
import sys

# (rank, layer, places). Lowest rank first; equal ranks are siblings. A place is a folder (it
# holds every file under it) or a pattern with a wildcard (fnmatch, on the root-relative path).
# The first place that holds a file decides its layer, so a device folder is listed before
# runtime/ and lowering's files before src/passes.
LAYERS = [
    (0, "support", ["src/support"]),
    (1, "ir", ["src/ir"]),
    (2, "target", ["src/target"]),
    (3, "frontend", ["src/frontend"]),
    # Lowering: lower.h, its shared state lower_internal.h and the lower*.cpp files (not
    # lower_options.h, the switches layout assignment reads too).
    (4, "lowering", ["src/passes/lower.h", "src/passes/lower_internal.h", "src/passes/lower*.cpp"]),
    (5, "gpu_pipeline", ["src/passes/pipeline.*"]),  # layout assignment, lowering, the GPU IR passes
    (3, "passes", ["src/passes"]),  # Tile IR passes, layout assignment and its choices, GPU IR passes
    # A dialect's own spelling (CUDA's PTX, wgmma, TMA; MSL) sits in its folder above the shared
    # emitter, which reaches it through the GpuDialect hooks only; dialects never include each other.
    (6, "codegen/cuda", ["src/codegen/cuda"]),
    (6, "codegen/metal", ["src/codegen/metal"]),
    (5, "codegen", ["src/codegen"]),
    (8, "runtime/cpu", ["src/runtime/cpu"]),
    (8, "runtime/cuda", ["src/runtime/cuda"]),
    (8, "runtime/interp", ["src/runtime/interp"]),
    (8, "runtime/metal", ["src/runtime/metal"]),
    (8, "runtime/metal_sim", ["src/runtime/metal_sim"]),
    (7, "runtime", ["src/runtime"]),  # the Device interface, artifacts, registry, runtime/host
    (8, "cache", ["src/cache"]),
    (9, "driver", ["src/driver"]),
    (10, "capi", ["capi"]),
]
PUBLIC = "include"  # the public header: below every layer
# Where a quoted include is looked up, in the compiler's order after the including folder.
SEARCH = ["src", "capi", "include"]
INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')
SOURCE = (".h", ".cpp", ".def", ".inc")


def holds(place, path):
    """Whether a LAYERS place (a folder, a file or a wildcard pattern) holds a root-relative path."""
    if any(c in place for c in "*?["):
        return fnmatch.fnmatchcase(path, place)
    return path == place or path.startswith(place + "/")


def layer_of(path):
    """(rank, name) of a root-relative path, or None outside the layers."""
    for rank, name, places in LAYERS:
        if any(holds(place, path) for place in places):
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
                            problems.append(f"{where}: {target} is in no layer (add its place to LAYERS)")
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
