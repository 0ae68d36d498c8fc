"""Parses include/metile/metile.h into enums, structs, opaque handles, aliases and functions
(types as normalized C spellings; ctype() maps one to Rust).

Shared by the binding generators (rust/regen.py, go/metile/regen.py, python/regen.py): the bindings are generated from,
and checked against, the one header, so they cannot drift from it.
"""
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ROOT / "include" / "metile" / "metile.h"

SCALARS = {
    "void": "c_void", "char": "c_char", "int": "c_int", "double": "f64", "float": "f32",
    "size_t": "usize", "uint32_t": "u32", "int32_t": "i32", "uint64_t": "u64", "int64_t": "i64",
    "uint8_t": "u8", "int8_t": "i8",
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def parse(text):
    text = strip_comments(text)
    enums = {}
    for m in re.finditer(r"typedef enum (\w+) \{(.*?)\} \1;", text, flags=re.S):
        values = []
        for item in m.group(2).split(","):
            item = item.strip()
            if not item:
                continue
            key, _, val = item.partition("=")
            values.append((key.strip(), val.strip()))
        enums[m.group(1)] = values
    structs = {}
    for m in re.finditer(r"typedef struct (\w+) \{(.*?)\} \1;", text, flags=re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            arr = re.match(r"(.*?)(\w+)\[(\d+)\]$", decl)
            if arr:
                fields.append((arr.group(2), norm(arr.group(1)), int(arr.group(3))))
            else:
                fm = re.match(r"(.*?)(\w+)$", decl)
                fields.append((fm.group(2), norm(fm.group(1)), None))
        structs[m.group(1)] = fields
    opaque = re.findall(r"typedef struct (\w+) \1;", text)
    aliases = re.findall(r"typedef (\w+) (\w+);", text)
    funcs = []
    for m in re.finditer(r"METILE_API\s+([^;(]*?)\b(metile_\w+)\s*\(([^)]*)\)\s*;", text, flags=re.S):
        ret = " ".join(m.group(1).split())
        params = []
        raw = " ".join(m.group(3).split())
        if raw and raw != "void":
            for p in raw.split(","):
                p = p.strip()
                arr = re.match(r"(.*?)(\w+)\[\d*\]$", p)
                if arr:  # `const uint32_t grid[3]` decays to a pointer
                    params.append((arr.group(2), norm(arr.group(1) + " *")))
                else:
                    pm = re.match(r"(.*?)(\w+)$", p)
                    params.append((pm.group(2), norm(pm.group(1))))
        funcs.append((m.group(2), params, norm(ret)))
    return enums, structs, opaque, aliases, funcs


def norm(c):
    """A C type spelling with single spaces around `*`: `metile_launch * const *`."""
    return " ".join(c.replace("*", " * ").split())


def ctype(c):
    """Maps a C type spelling to Rust, e.g. `metile_launch *const *` to `*const *mut metile_launch`."""
    tokens = c.replace("*", " * ").split()
    first = tokens.index("*") if "*" in tokens else len(tokens)
    base_tokens, rest = tokens[:first], tokens[first:]
    base_const = "const" in base_tokens
    name = " ".join(t for t in base_tokens if t != "const")
    levels = []  # one entry per `*`: whether that pointer itself is const
    for t in rest:
        if t == "*":
            levels.append(False)
        elif t == "const":
            levels[-1] = True
    rust = SCALARS.get(name, name)
    if not levels:
        return "()" if rust == "c_void" else rust
    for i in range(len(levels)):
        pointee_const = base_const if i == 0 else levels[i - 1]
        rust = ("*const " if pointee_const else "*mut ") + rust
    return rust


def parse_header():
    return parse(HEADER.read_text())


def write_or_check(out, text, regen, source="include/metile/metile.h"):
    """Writes `text` to `out`, or with --check on the command line compares them: prints a diff
    and returns 1 when the checked-in file is stale. `regen` is the command that rewrites it,
    `source` the file it is generated from."""
    rel = out.relative_to(ROOT)
    if "--check" not in sys.argv:
        out.write_text(text)
        return 0
    have = out.read_text() if out.exists() else ""
    if have != text:
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                                   f"{rel} (checked in)", f"from {source}"))
        print(f"{rel} is out of date with {source}: run {regen}")
        return 1
    print(f"{rel} matches {source}")
    return 0
    have = out.read_text() if out.exists() else ""
    if have != text:
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                                   f"{rel} (checked in)", "from metile.h"))
        print(f"{rel} is out of date with metile.h: run {regen}")
        return 1
    print(f"{rel} matches include/metile/metile.h")
    return 0
