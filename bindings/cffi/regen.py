"""Writes include/metile/metile.cdef: the declarations of metile.h in the subset of C that cffi's
`ffi.cdef()` accepts (no preprocessor lines, no METILE_API, no comments), for Python users of
cffi's ABI mode:

    ffi = cffi.FFI()
    ffi.cdef(open("<prefix>/include/metile/metile.cdef").read())
    lib = ffi.dlopen("libmetile.so.0")

It is installed beside metile.h. `python3 bindings/cffi/regen.py --check` fails when the
checked-in file no longer matches the header (scripts/test.sh runs it with the other generators).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from c_header import HEADER, ROOT, parse_header, write_or_check  # noqa: E402

OUT = ROOT / "include" / "metile" / "metile.cdef"


def decl(ctype, name):
    """`const char *` + `name` -> `const char *name`."""
    return f"{ctype}{'' if ctype.endswith('*') else ' '}{name}"


def generate():
    enums, structs, opaque, aliases, funcs = parse_header()
    out = [f"/* Generated from {HEADER.relative_to(ROOT)} by bindings/cffi/regen.py: do not edit. */"]
    for name, values in enums.items():
        items = ", ".join(f"{k} = {v}" if v else k for k, v in values)
        out.append(f"typedef enum {name} {{ {items} }} {name};")
    for base, name in aliases:
        out.append(f"typedef {base} {name};")
    for name in opaque:
        out.append(f"typedef struct {name} {name};")
    for name, fields in structs.items():
        body = " ".join(f"{decl(t, n)}[{a}];" if a else f"{decl(t, n)};" for n, t, a in fields)
        out.append(f"typedef struct {name} {{ {body} }} {name};")
    for name, params, ret in funcs:
        args = ", ".join(decl(t, n) for n, t in params) or "void"
        out.append(f"{decl(ret, name)}({args});")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(write_or_check(OUT, generate(), "python3 bindings/cffi/regen.py"))
