"""The ctypes declarations in metile/_ffi.py must match include/metile/metile.h exactly:
every METILE_API function (argument and return types), every struct field, every enum value."""

import ctypes
import os
import re

import pytest

from metile import _ffi

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "metile", "metile.h")


def _header_text():
    if not os.path.exists(HEADER):
        pytest.skip("metile.h is not next to this checkout (installed package)")
    text = open(HEADER, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


_BASIC = {
    "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "double": ctypes.c_double,
    "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16, "int": ctypes.c_int,
}


def _enum_names(text):
    return set(re.findall(r"typedef\s+enum\s+\w+\s*\{[^}]*\}\s*(\w+)\s*;", text))


def _expected_ctype(ctype: str, text: str):
    """Translates a C declaration's type (without the name) to the ctypes type the binding
    must use. Rules: enums are int32; `const char *` and `char *` are c_char_p; arrays
    (`T x[3]`) decay to pointers; a handle type is its opaque Structure."""
    ctype = ctype.replace("const", " ").strip()
    stars = ctype.count("*")
    base = ctype.replace("*", " ").split()
    assert len(base) == 1, f"cannot parse type {ctype!r}"
    base = base[0]
    if base == "void":
        if stars == 0:
            return None
        t = ctypes.c_void_p
        stars -= 1
    elif base == "char":
        assert stars >= 1, ctype
        t = ctypes.c_char_p
        stars -= 1
    elif base in _BASIC:
        t = _BASIC[base]
    elif base in _enum_names(text):
        t = ctypes.c_int32
    elif base == "metile_value":
        t = ctypes.c_uint32
    else:
        t = getattr(_ffi, base)
    for _ in range(stars):
        t = ctypes.POINTER(t)
    return t


def _split_param(p: str):
    """'const metile_type *type' -> ('const metile_type *', 'type'); arrays become pointers."""
    p = p.strip()
    m = re.match(r"(.*?)(\w+)\s*(\[\s*\d*\s*\])?$", p, flags=re.S)
    ctype, name, array = m.group(1), m.group(2), m.group(3)
    if array:
        ctype += "*"
    return ctype, name


def _functions(text):
    out = {}
    for m in re.finditer(r"METILE_API\s+([^;{]*?)\b(metile_\w+)\s*\(([^)]*)\)\s*;", text, re.S):
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        args = [] if params in ("void", "") else [_split_param(p)[0] for p in params.split(",")]
        out[name] = (" ".join(ret.split()), [" ".join(a.split()) for a in args])
    return out


def _same(a, b):
    if a is None or b is None:
        return a is b
    if a is b:
        return True
    # POINTER(X) types are cached per X, but compare structurally to be safe.
    if hasattr(a, "_type_") and hasattr(b, "_type_") and issubclass(a, ctypes._Pointer) \
            and issubclass(b, ctypes._Pointer):
        return _same(a._type_, b._type_)
    return False


def test_every_header_function_is_declared_with_the_same_types():
    text = _header_text()
    funcs = _functions(text)
    assert len(funcs) > 60, "the header parser found too few functions"
    declared = {name: (ret, args) for name, ret, args in _ffi.FUNCTIONS}
    assert set(funcs) == set(declared), (
        f"missing from _ffi: {sorted(set(funcs) - set(declared))}; "
        f"not in the header: {sorted(set(declared) - set(funcs))}")
    for name, (ret, args) in funcs.items():
        dret, dargs = declared[name]
        assert _same(_expected_ctype(ret, text), dret), f"{name}: return type {ret}"
        assert len(args) == len(dargs), f"{name}: {len(args)} parameters in the header"
        for i, (a, d) in enumerate(zip(args, dargs)):
            assert _same(_expected_ctype(a, text), d), \
                f"{name}: parameter {i} is `{a}`, bound as {d}"


def test_declaration_order_follows_the_header():
    funcs = list(_functions(_header_text()))
    assert [n for n, _, _ in _ffi.FUNCTIONS] == funcs


def test_struct_fields_match():
    text = _header_text()
    structs = {m.group(1): m.group(2) for m in
               re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", text, re.S)}
    assert {s.__name__ for s in _ffi.STRUCTS} == set(structs)
    for cls in _ffi.STRUCTS:
        fields = []
        for decl in structs[cls.__name__].split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            ctype, name = _split_param(decl)
            m = re.search(r"\[\s*(\d+)\s*\]$", decl)
            t = _expected_ctype(ctype.rstrip("*") if m else ctype, text)
            if m:
                t = t * int(m.group(1))
            fields.append((name, t))
        got = cls._fields_
        assert [f[0] for f in got] == [f[0] for f in fields], cls.__name__
        for (n, want), (_, have) in zip(fields, got):
            if hasattr(want, "_length_"):
                assert have._length_ == want._length_ and have._type_ is want._type_, (cls, n)
            else:
                assert _same(want, have), f"{cls.__name__}.{n}"


def test_enum_values_match():
    text = _header_text()
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", text, re.S):
        name, body = m.group(1), m.group(2)
        values = {k: int(v, 0) for k, v in re.findall(r"(METILE_\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)",
                                                     body)}
        assert _ffi.ENUMS[name] == values, name
    assert set(_ffi.ENUMS) == _enum_names(text)


def test_version_macros_match():
    text = _header_text()
    for part in ("MAJOR", "MINOR", "PATCH"):
        v = int(re.search(rf"#define METILE_VERSION_{part} (\d+)", text).group(1))
        assert getattr(_ffi, f"METILE_VERSION_{part}") == v
    assert _ffi.metile_version() == (_ffi.METILE_VERSION_MAJOR * 10000
                                     + _ffi.METILE_VERSION_MINOR * 100 + _ffi.METILE_VERSION_PATCH)


def test_library_version_is_reported():
    import metile
    v = metile.library_version()
    assert v == ".".join(str(getattr(_ffi, f"METILE_VERSION_{p}")) for p in
                         ("MAJOR", "MINOR", "PATCH"))


def test_the_parser_catches_a_wrong_declaration():
    # The checks above must be able to fail: a changed parameter type is detected.
    text = _header_text()
    ret, args = _functions(text)["metile_buffer_alloc"]
    assert not _same(_expected_ctype(args[2], text), ctypes.c_int32)
    assert _same(_expected_ctype(args[2], text), ctypes.c_size_t)
