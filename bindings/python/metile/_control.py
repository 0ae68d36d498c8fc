"""Run-time `if` and `while` in kernels (docs/semantics.md, "Control flow").

_loops.rewrite turns

    if test:                      _c = __metile_if__(test, ("x", "y"), locals(), LINE, EFFECTS)
        then                      if _c.then:
    else:                             then
        other              ==>        _c.end_then(locals())
                                  if _c.other:
                                      x, y = _c.restore
                                      other
                                      _c.end_else(locals())
                                  x, y = _c.results

A Python (constexpr) test runs one branch at trace time, as before. A device bool scalar traces
both branches into a Tile IR `if` whose results are the names either branch assigns. A tile
condition traces both branches too and selects each name with `where` (branches with stores or
atomics are an error then). `while test:` is always a device loop (scf.while): see WhileRange.
"""

from __future__ import annotations


import numpy as np

from . import _ffi, _lang
from ._errors import TracingError
from ._trace import Poison, Retrace, Value, current

_MISSING = object()


def _weak(v) -> bool:
    return isinstance(v, (int, float, bool, np.generic)) and not isinstance(v, Value)


def _ids(vs):
    n = len(vs)
    return (_ffi.metile_value * max(n, 1))(*[v.id for v in vs]), n


def _one_branch(filename, line, name):
    return Poison(f"{filename}:{line}: `{name}` is assigned in only one branch of the `if` at "
                  f"line {line} but used after it; give it a value before the `if` or in both "
                  "branches")


class IfRuntime:
    def __init__(self, test, names, env, line, effects, *, filename):
        self.filename, self.line, self.names = filename, line, names
        self.before = {n: env.get(n, _MISSING) for n in names}
        self.mode = "python"
        if isinstance(test, Value):
            t = current()
            self.key = ("if", t.loop_index)
            t.loop_index += 1
            if test.shape:
                if effects:
                    raise TracingError(
                        f"{filename}:{line}: `if` on a tile condition ({test.type_str()}) whose "
                        "branches store, print or run atomics: each lane would need its own "
                        "branch; use a scalar condition (e.g. a reduction) or masks")
                self.mode = "tile"
            else:
                self.mode = "device"
                cond = test if test.dtype == "bool" else test != 0
                t.locate()
                t._check(_ffi.metile_builder_if_begin(t.builder, cond.id))
            self.cond = test if test.dtype == "bool" else test != 0
            self.then = self.other = True
        else:
            self.then = bool(test)
            self.other = not self.then
        self.then_values = None
        self.results = tuple(self.before[n] for n in names)

    @property
    def restore(self):
        return tuple(v if v is not _MISSING else Poison(
            f"{self.filename}:{self.line}: `{n}` has no value before this `if`")
            for n, v in self.before.items())

    def _fill(self, env):
        return {n: env.get(n, _MISSING) for n in self.names}

    def end_then(self, env):
        vals = self._fill(env)
        if self.mode == "python":
            self._python(vals)
            return
        self.then_values = vals
        if self.mode == "device":
            t = current()
            self.carried = [n for n in self.names if self._joins(vals[n], None)
                            and t.fixups.get((self.key, n)) != "one branch"]
            ys = [self._fixed(n, vals[n]) for n in self.carried]
            arr, k = _ids(ys)
            t.locate()
            t._check(_ffi.metile_builder_if_else(t.builder, arr, k))
            self.then_types = ys

    def _python(self, vals):
        self.results = tuple(v if v is not _MISSING else Poison(
            f"{self.filename}:{self.line}: `{n}` has no value here") for n, v in vals.items())

    @staticmethod
    def _joins(a, b) -> bool:
        """Whether a name's branch values make an if result (traced values or numbers)."""
        return isinstance(a, Value) or (_weak(a) and a is not None)

    def _fixed(self, name, v):
        t = current()
        fix = t.fixups.get((self.key, name))
        if isinstance(v, Value):
            if fix is not None:
                v = _lang.cast(v, fix[0]) if v.dtype != fix[0] else v
                v = _lang._broadcast(v, fix[1]) if fix[1] != v.shape else v
            return v
        if fix is not None:
            c = t.const(v.item() if isinstance(v, np.generic) else v, fix[0])
            return _lang._broadcast(c, fix[1]) if fix[1] else c
        return t.literal(v)

    def end_else(self, env):
        vals = self._fill(env)
        if self.mode == "python":
            self._python(vals)
            return
        t = current()
        where = f"{self.filename}:{self.line}"
        results = {}
        if self.mode == "tile":
            for n in self.names:
                a, b = self.then_values[n], vals[n]
                if a is _MISSING or b is _MISSING:
                    results[n] = _one_branch(self.filename, self.line, n)
                elif a is b:
                    results[n] = a
                elif (isinstance(a, Value) or _weak(a)) and (isinstance(b, Value) or _weak(b)):
                    results[n] = _lang.where(self.cond, a, b)
                else:
                    raise TracingError(f"{where}: `{n}` is a {type(a).__name__} in one branch "
                                       f"and a {type(b).__name__} in the other")
            self.results = tuple(results[n] for n in self.names)
            return
        ys = []
        retrace = False
        for n, a in zip(self.carried, self.then_types):
            b = vals[n]
            if b is _MISSING or isinstance(b, Poison):
                # Assigned in the then branch only: traced again without it as a result.
                t.fixups[(self.key, n)] = "one branch"
                retrace = True
                continue
            if _weak(b):
                c = t.const(b.item() if isinstance(b, np.generic) else b, a.dtype)
                ys.append(_lang._broadcast(c, a.shape) if a.shape else c)
                continue
            if not isinstance(b, Value):
                raise TracingError(f"{where}: `{n}` is a traced value in one branch and a "
                                   f"{type(b).__name__} in the other")
            if b.dtype == a.dtype and b.shape == a.shape:
                ys.append(b)
                continue
            then_weak = _weak(self.then_values[n])
            if b.dtype != a.dtype and not then_weak:
                raise TracingError(f"{where}: `{n}` is {a.type_str()} after one branch of the "
                                   f"`if` and {b.type_str()} after the other; cast one of them")
            try:
                shape = tuple(np.broadcast_shapes(a.shape, b.shape))
            except ValueError:
                raise TracingError(f"{where}: `{n}` is {a.type_str()} after one branch of the "
                                   f"`if` and {b.type_str()} after the other") from None
            if shape == a.shape and b.dtype == a.dtype:  # b a scalar where then gave a tile
                ys.append(_lang._broadcast(b, shape))
                continue
            # The then branch's value takes b's dtype (it was a Python number) or shape: traced
            # again with it converted (Trace.fixups).
            key = (self.key, n)
            fix = (b.dtype if then_weak else a.dtype, shape)
            if t.fixups.get(key) == fix:
                raise TracingError(f"{where}: the type of `{n}` in the `if` does not settle")
            t.fixups[key] = fix
            retrace = True
        if retrace:
            raise Retrace()
        for n in self.names:
            if n not in self.carried:
                a, b = self.then_values[n], vals[n]
                one = t.fixups.get((self.key, n)) == "one branch" or a is _MISSING or b is _MISSING
                if a is not b and not one and (isinstance(b, Value) or isinstance(a, Value)):
                    raise TracingError(f"{where}: `{n}` is a {type(a).__name__} in one branch "
                                       f"and a {type(b).__name__} in the other")
                results[n] = _one_branch(self.filename, self.line, n) if one else (
                    a if a is b else b)
        arr, k = _ids(ys)
        out = (_ffi.metile_value * max(k, 1))()
        t.locate()
        t._check(_ffi.metile_builder_if_end(t.builder, arr, k, out))
        for i, n in enumerate(self.carried):
            results.setdefault(n, t.value(out[i]))
        self.results = tuple(results[n] for n in self.names)


class WhileRange:
    """The `range` a rewritten `while` hands to _loops.LoopRuntime: open() starts the condition
    block, test() ends it, close() ends the body. The condition is evaluated once per trace
    (it may hold an atomic, as a spin lock does)."""

    def __init__(self, filename, line):
        self.filename, self.line = filename, line

    def open(self, inits):
        t = current()
        arr, n = _ids(inits)
        out = (_ffi.metile_value * max(n, 1))()
        t.locate()
        t._check(_ffi.metile_builder_while_begin(t.builder, arr, n, out))
        self.before = [t.value(out[i]) for i in range(n)]
        return None, self.before

    def do(self, cond):
        t = current()
        if isinstance(cond, (bool, np.bool_)):
            cond = t.const(bool(cond), "bool")
        if not isinstance(cond, Value):
            raise TracingError(f"{self.filename}:{self.line}: a `while` condition must be a "
                               f"bool, got {type(cond).__name__}")
        if cond.shape:
            raise TracingError(f"{self.filename}:{self.line}: a `while` condition must be a "
                               f"scalar (uniform per program), got {cond.type_str()}; reduce "
                               "it first (e.g. metile.max(cond.to('i32')) != 0)")
        if cond.dtype != "bool":
            cond = cond != 0
        arr, n = _ids(self.before)
        out = (_ffi.metile_value * max(n, 1))()
        t.locate()
        t._check(_ffi.metile_builder_while_do(t.builder, cond.id, arr, n, out))
        return [t.value(out[i]) for i in range(n)]

    @staticmethod
    def close(yields):
        t = current()
        arr, n = _ids(yields)
        out = (_ffi.metile_value * max(n, 1))()
        t.locate()
        t._check(_ffi.metile_builder_while_end(t.builder, arr, n, out))
        return [t.value(out[i]) for i in range(n)]
