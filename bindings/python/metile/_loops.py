"""Loop-carried variables of `tile_range` loops, found from the kernel's source.

A tile_range body is traced once, so a variable the body updates (`m = maximum(m, x)`) must
become an explicit loop-carried value. This module parses the kernel with `ast`, runs a
liveness analysis, and for each `for v in tile_range(...)` (under any name that resolves to
metile.tile_range) carries the names that the body assigns and that are live at the start of
an iteration or after the loop. It rewrites

    for k in tile_range(a, b, c):     _l = __metile_loop__(tile_range(a, b, c), ("acc", "m"),
        body                                               locals(), 0)
                               ==>    for k in _l:
                                          acc, m = _l.carried
                                          body
                                          _l.end((acc, m))
                                      acc, m = _l.results

and compiles the result with the original file name and line numbers, so errors and the
builder's source locations still point at the user's code. LoopRuntime (the __metile_loop__
object) opens metile_builder_for_begin with the names' current values and closes the loop with
their new ones; when a value changes type in the first iteration (`m = -1e38` becoming a tile)
it records the type and asks for one more trace with the init converted (see Trace.fixups).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
import weakref

import numpy as np

from . import _lang
from ._errors import TracingError
from ._trace import Poison, Retrace, Value, current


# ------------------------------------------------------------------------------ analysis
def _loads(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _stores(node) -> set[str]:
    """Names a statement (or list) binds, not looking into nested function/class bodies."""
    out: set[str] = set()

    def visit(n):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            return
        elif isinstance(n, ast.Lambda):
            return
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.add((a.asname or a.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.NamedExpr):
            out.add(n.target.id)
        for c in ast.iter_child_nodes(n):
            visit(c)

    for n in (node if isinstance(node, list) else [node]):
        visit(n)
    return out


def _mutated(stmts) -> set[str]:
    """Names whose elements a statement list assigns (`acc[o] = ...`, `acc[o] += ...`)."""
    out: set[str] = set()
    for n in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            base = n.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
    return out


def _passed(stmts) -> set[str]:
    """Names handed to one of the user's functions (calls wrapped by _WrapCalls): a list passed
    so may have its elements assigned by the helper (`update(acc, x)`)."""
    out: set[str] = set()
    for n in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Call)
                and isinstance(n.func.func, ast.Name) and n.func.func.id == _CALL):
            for a in list(n.args) + [k.value for k in n.keywords]:
                a = a.value if isinstance(a, ast.Starred) else a
                if isinstance(a, ast.Name):
                    out.add(a.id)
    return out


class _Liveness:
    """Backward liveness over a function body; records each tile_range loop's carried names,
    and among them the ones only passed to helpers (carried when they hold a list of traced
    values, which the helper may update)."""

    def __init__(self, is_tile_range):
        self.is_tile_range = is_tile_range
        self.carried: dict[ast.For, list[str]] = {}
        self.maybe: dict[ast.For, set[str]] = {}

    def block(self, stmts, live):
        for s in reversed(stmts):
            live = self.stmt(s, live)
        return live

    def _loop(self, body, target_stores, header_loads, live_after):
        at_start: set[str] = set()
        for _ in range(50):  # to a fixed point (the sets only grow)
            body_in = self.block(body, live_after | at_start)
            new = (body_in - target_stores) | header_loads
            if new == at_start:
                break
            at_start = new
        return at_start, body_in

    def stmt(self, s, live):
        if isinstance(s, (ast.For, ast.AsyncFor)):
            after = live | self.block(s.orelse, live)
            targets = _stores(s.target)
            tgt_loads = _loads(s.target)
            at_start, body_in = self._loop(s.body, targets, tgt_loads, after)
            if isinstance(s, ast.For) and self.is_tile_range(s):
                assigned = (_stores(s.body) | _mutated(s.body)) - targets
                maybe = (_passed(s.body) - assigned - targets) & (body_in | after)
                self.carried[s] = sorted((assigned & (body_in | after)) | maybe)
                self.maybe[s] = maybe
            return at_start | after | _loads(s.iter)
        if isinstance(s, ast.While):
            after = live | self.block(s.orelse, live)
            at_start, _ = self._loop(s.body, set(), _loads(s.test), after)
            return at_start | after
        if isinstance(s, ast.If):
            return _loads(s.test) | self.block(s.body, live) | self.block(s.orelse, live)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            inner = self.block(s.body, live)
            bound = set().union(*[_stores(i.optional_vars) for i in s.items if i.optional_vars])
            return (inner - bound) | set().union(*[_loads(i) for i in s.items])
        if isinstance(s, ast.Assign):
            stored = set().union(*[_stores(t) for t in s.targets])
            return (live - stored) | _loads(s.value) | set().union(*[_loads(t) for t in s.targets])
        if isinstance(s, ast.AnnAssign):
            if s.value is None:
                return live
            return (live - _stores(s.target)) | _loads(s.value) | _loads(s.target)
        if isinstance(s, ast.AugAssign):
            return live | _loads(s.value) | _loads(s.target) | _stores(s.target)
        if isinstance(s, (ast.Return, ast.Raise)):
            return _loads(s)
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            parts = [s.body, s.orelse, s.finalbody] + [h.body for h in s.handlers]
            return live | set().union(*[self.block(p, live) for p in parts]) | _loads(s)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return (live - {s.name}) | _loads(s)
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            return live - _stores(s)
        return live | _loads(s)


def _check_body(loop: ast.For, filename: str):
    """break/continue/return/yield cannot leave a traced loop body."""
    def visit(n, in_plain_loop):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        bad = None
        if isinstance(n, (ast.Break, ast.Continue)) and not in_plain_loop:
            bad = type(n).__name__.lower()
        elif isinstance(n, ast.Return):
            bad = "return"
        elif isinstance(n, (ast.Yield, ast.YieldFrom)):
            bad = "yield"
        if bad:
            raise TracingError(
                f"{filename}:{n.lineno}: `{bad}` inside a metile.tile_range loop (line "
                f"{loop.lineno}) is not supported: the loop body is traced once and runs on the "
                "device; use a mask or metile.where instead")
        for c in ast.iter_child_nodes(n):
            nested_loop = isinstance(n, (ast.For, ast.While, ast.AsyncFor)) and c in (
                n.body if isinstance(n.body, list) else [])
            visit(c, in_plain_loop or nested_loop)

    for st in loop.body:
        visit(st, False)


# ------------------------------------------------------------------------------- rewrite
_RT = "__metile_loop__"


class _Rewriter(ast.NodeTransformer):
    def __init__(self, carried, maybe, infos):
        self.carried = carried
        self.maybe = maybe
        self.infos = infos
        self.count = 0

    def visit_For(self, node):
        self.generic_visit(node)
        if node not in self.carried:
            return node
        names = self.carried[node]
        idx = self.count
        self.count += 1
        var = f"__metile_l{idx}"
        assign_lines = {}
        for n in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            name = None
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                name = n.id
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                base = n.value
                while isinstance(base, ast.Subscript):
                    base = base.value
                name = base.id if isinstance(base, ast.Name) else None
            if name in names:
                line = getattr(n, "lineno", node.lineno)
                assign_lines[name] = builtins.max(assign_lines.get(name, 0), line)
        target = node.target.id if isinstance(node.target, ast.Name) else None
        self.infos.append({"line": node.lineno, "assign_lines": assign_lines, "target": target,
                           "maybe": self.maybe.get(node, set())})

        def tup(ctx):
            return ast.Tuple(elts=[ast.Name(id=n, ctx=ctx()) for n in names], ctx=ctx())

        def attr(name):
            return ast.Attribute(value=ast.Name(id=var, ctx=ast.Load()), attr=name, ctx=ast.Load())

        make = ast.Assign(
            targets=[ast.Name(id=var, ctx=ast.Store())],
            value=ast.Call(
                func=ast.Name(id=_RT, ctx=ast.Load()),
                args=[node.iter, ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
                      ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]),
                      ast.Constant(idx)],
                keywords=[]))
        body = []
        if names:
            body.append(ast.Assign(targets=[tup(ast.Store)], value=attr("carried")))
        body.extend(node.body)
        end_call = ast.Expr(ast.Call(func=attr("end"), args=[tup(ast.Load)], keywords=[]))
        body.append(end_call)
        loop = ast.For(target=node.target, iter=ast.Name(id=var, ctx=ast.Load()), body=body,
                       orelse=[], type_comment=None)
        out = [make, loop]
        if names:
            out.append(ast.Assign(targets=[tup(ast.Store)], value=attr("results")))
        if target:
            out.append(ast.Assign(targets=[ast.Name(id=target, ctx=ast.Store())],
                                  value=attr("after_target")))
        out.extend(node.orelse)
        for n in (make, loop, end_call) + tuple(out[2:]):
            ast.copy_location(n, node)
            ast.fix_missing_locations(n)
        return out


_IF = "__metile_if__"
_WHILE = "__metile_while__"
_EFFECTS = {"store", "tile_store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg",
            "atomic_cas", "atomic_and", "atomic_or", "atomic_xor", "device_print", "print",
            "debug_barrier", "barrier", "device_assert", "static_print"}


def _exits(stmts, loops_ok: bool):
    """The first return/yield (and break/continue outside a nested loop) in `stmts`, or None."""
    for st in stmts:
        for n in _walk_local(st):
            if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)):
                return n
            if isinstance(n, (ast.Break, ast.Continue)) and not loops_ok and not _in_loop(st, n):
                return n
    return None


def _walk_local(node):
    """ast.walk without entering nested functions, classes and lambdas."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                todo.append(c)


def _in_loop(root, target) -> bool:
    """Whether `target` sits in the body of a loop nested in `root` (a break that stays inside)."""
    for n in _walk_local(root):
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor)) and n is not root:
            if any(target is m for b in n.body for m in _walk_local(b)):
                return True
    return False


def _names(stmts) -> list[str]:
    return sorted(n for n in _stores(stmts) | _mutated(stmts) if not n.startswith("__metile"))


class _ControlRewriter(ast.NodeTransformer):
    """`if` and `while` statements into IfRuntime / LoopRuntime(WhileRange) calls (_control.py).
    An `if` that returns, breaks or continues stays Python's: its test must be a Python value."""

    def __init__(self, infos, filename):
        self.infos = infos
        self.filename = filename
        self.count = 0

    def visit_FunctionDef(self, node):
        if getattr(self, "_top", None) is None:
            self._top = node
            self.generic_visit(node)
        return node

    def _tup(self, names, ctx):
        return ast.Tuple(elts=[ast.Name(id=n, ctx=ctx()) for n in names], ctx=ctx())

    def _attr(self, var, name):
        return ast.Attribute(value=ast.Name(id=var, ctx=ast.Load()), attr=name, ctx=ast.Load())

    def _call(self, var, name, *args):
        return ast.Call(func=self._attr(var, name), args=list(args), keywords=[])

    def _locals(self):
        return ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[])

    def visit_If(self, node):
        self.generic_visit(node)
        if _exits(node.body + node.orelse, loops_ok=False) is not None:
            return node
        names = _names(node.body + node.orelse)
        var = f"__metile_c{self.count}"
        self.count += 1
        effects = any(isinstance(n, ast.Call) and (
            (isinstance(n.func, ast.Name) and n.func.id in _EFFECTS) or
            (isinstance(n.func, ast.Attribute) and n.func.attr in _EFFECTS))
            for st in node.body + node.orelse for n in _walk_local(st))
        make = ast.Assign(targets=[ast.Name(id=var, ctx=ast.Store())], value=ast.Call(
            func=ast.Name(id=_IF, ctx=ast.Load()),
            args=[node.test, ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
                  self._locals(), ast.Constant(node.lineno), ast.Constant(effects)],
            keywords=[]))
        then = ast.If(test=self._attr(var, "then"), orelse=[], body=list(node.body) + [
            ast.Expr(self._call(var, "end_then", self._locals()))])
        other_body = []
        if names:
            other_body.append(ast.Assign(targets=[self._tup(names, ast.Store)],
                                         value=self._attr(var, "restore")))
        other_body += list(node.orelse) + [ast.Expr(self._call(var, "end_else", self._locals()))]
        other = ast.If(test=self._attr(var, "other"), body=other_body, orelse=[])
        out = [make, then, other]
        if names:
            out.append(ast.Assign(targets=[self._tup(names, ast.Store)],
                                  value=self._attr(var, "results")))
        for n in out:
            ast.copy_location(n, node)
            ast.fix_missing_locations(n)
        return out

    def visit_While(self, node):
        self.generic_visit(node)
        bad = _exits(node.body, loops_ok=False)
        if bad is not None or node.orelse:
            what = "an `else:` clause" if bad is None else f"`{type(bad).__name__.lower()}`"
            raise TracingError(
                f"{self.filename}:{getattr(bad, 'lineno', node.lineno)}: {what} in the `while` "
                f"loop at line {node.lineno} is not supported: a kernel's while loop runs on the "
                "device and leaves only when its condition is false; fold the exit into the "
                "condition (a carried flag)")
        names = _names(node.body)
        idx = len(self.infos)
        self.infos.append({"line": node.lineno, "assign_lines": {}, "target": None,
                           "maybe": set()})
        var = f"__metile_w{self.count}"
        self.count += 1
        rng = ast.Call(func=ast.Name(id=_WHILE, ctx=ast.Load()), args=[ast.Constant(node.lineno)],
                       keywords=[])
        make = ast.Assign(targets=[ast.Name(id=var, ctx=ast.Store())], value=ast.Call(
            func=ast.Name(id=_RT, ctx=ast.Load()),
            args=[rng, ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
                  self._locals(), ast.Constant(idx)], keywords=[]))
        out = [make]
        body = []
        if names:
            out.append(ast.Assign(targets=[self._tup(names, ast.Store)], value=self._attr(var, "carried")))
            body.append(ast.Assign(targets=[self._tup(names, ast.Store)], value=self._attr(var, "carried")))
        body += list(node.body)
        body.append(ast.Expr(self._call(var, "end", self._tup(names, ast.Load))))
        test = ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                             kw_defaults=[], kwarg=None, defaults=[]),
                          body=node.test)
        out.append(ast.While(test=self._call(var, "test", test), body=body, orelse=[]))
        if names:
            out.append(ast.Assign(targets=[self._tup(names, ast.Store)], value=self._attr(var, "results")))
        for n in out:
            ast.copy_location(n, node)
            ast.fix_missing_locations(n)
        return out


def _resolver(fn):
    closure = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass

    def resolve(expr):
        if isinstance(expr, ast.Name):
            for scope in (closure, fn.__globals__, builtins.__dict__):
                if expr.id in scope:
                    return scope[expr.id]
            return None
        if isinstance(expr, ast.Attribute):
            base = resolve(expr.value)
            return getattr(base, expr.attr, None) if base is not None else None
        return None

    return resolve


_CALL = "__metile_call__"
_helpers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _helper(f):
    """A Python function the kernel calls, rewritten (once) when it holds tile_range loops, so
    a loop written in a helper carries its variables as one written in the kernel does."""
    if getattr(type(f), "__metile_inline__", False) is True:
        f = f.__wrapped__  # a @metile.jit device function
    from ._lang_tl import BUILTINS
    for builtin, wrapper in BUILTINS:  # Python's min / max / range, with Triton's meaning
        if f is builtin:
            return wrapper
    if not isinstance(f, types.FunctionType):
        return f
    new = _helpers.get(f)
    if new is None:
        new = rewrite(f)[0]
        _helpers[f] = new
    return new


class _WrapCalls(ast.NodeTransformer):
    """`helper(...)` -> `__metile_call__(helper)(...)` for calls of the user's own functions."""

    def __init__(self, is_helper):
        self.is_helper = is_helper
        self.count = 0

    def visit_Call(self, node):
        self.generic_visit(node)
        if self.is_helper(node.func):
            self.count += 1
            node.func = ast.copy_location(ast.Call(func=ast.Name(id=_CALL, ctx=ast.Load()),
                                                   args=[node.func], keywords=[]), node.func)
        return node


def rewrite(fn):
    """Returns (function to trace, loop infos). The function is `fn` itself when it has no
    tile_range loop to rewrite, calls none of the user's functions, or its source is
    unavailable."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return fn, []
    tree = ast.parse(src)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        return fn, []
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    filename = fn.__code__.co_filename
    resolve = _resolver(fn)

    def is_tile_range(node):
        it = node.iter
        if not isinstance(it, ast.Call):
            return False
        f = resolve(it.func)  # tile_range or a form of it (persistent_range)
        return isinstance(f, type) and issubclass(f, _lang.tile_range)

    def is_helper(expr):
        f = resolve(expr)
        if getattr(type(f), "__metile_inline__", False) is True:
            return True
        if f is builtins.min or f is builtins.max or f is builtins.range:
            return True
        return (isinstance(f, types.FunctionType) and f is not fn and
                (f.__module__ or "").split(".")[0] != "metile")

    loops = [n for n in ast.walk(fdef) if isinstance(n, ast.For) and is_tile_range(n)]
    control = any(isinstance(n, (ast.If, ast.While)) for n in _walk_local(fdef))
    wrap = _WrapCalls(is_helper)
    fdef = wrap.visit(fdef)
    if not loops and not wrap.count and not control:
        return fn, []
    for loop in loops:
        if not isinstance(loop.target, ast.Name):
            raise TracingError(f"{filename}:{loop.lineno}: a tile_range loop variable must be a "
                               "single name")
        _check_body(loop, filename)
    live = _Liveness(is_tile_range)
    live.block(fdef.body, set())
    infos: list[dict] = []
    fdef = _Rewriter(live.carried, live.maybe, infos).visit(fdef)
    fdef = _ControlRewriter(infos, filename).visit(fdef)
    # The def is re-executed without decorators, defaults or annotations (they belong to the
    # original function), inside a factory that supplies the loop helper and closure values.
    fdef.decorator_list = []
    fdef.returns = None
    args = fdef.args
    args.defaults, args.kw_defaults = [], [None] * len(args.kwonlyargs)
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    freevars = list(fn.__code__.co_freevars)
    factory = ast.FunctionDef(
        name="__metile_factory__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in [_RT, _CALL, _IF, _WHILE] + freevars],
                           vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=[fdef, ast.Return(ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    ast.copy_location(factory, fdef)
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    code = compile(module, filename, "exec")
    ns: dict = {}
    exec(code, fn.__globals__, ns)
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:
            cells.append(None)
    from ._control import IfRuntime, WhileRange
    new = ns["__metile_factory__"](lambda *a: LoopRuntime(*a, infos=infos, filename=filename),
                                   _helper,
                                   lambda *a: IfRuntime(*a, filename=filename),
                                   lambda line: WhileRange(filename, line), *cells)
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    return new, infos


# -------------------------------------------------------------------------------- runtime
def _weak(v) -> bool:
    return isinstance(v, (int, float, bool, np.generic)) and not isinstance(v, Value)


def _unify_shapes(a, b):
    """numpy broadcasting of two shapes where -1 (T, the SIMT thread count not fixed yet) meets
    any size; the builder checks T against the concrete size. None when they do not broadcast."""
    n = builtins.max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif -1 in (x, y):
            out.append(y if x == -1 else x)
        else:
            return None
    return tuple(out)


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def _leaves(v, path=()):
    """(path, value) of the traced values and Python numbers in v and its nested lists/tuples:
    what a loop carries for a name (a list's elements, as in `acc[o] = acc[o] + x`)."""
    if isinstance(v, (list, tuple)):
        for i, e in enumerate(v):
            yield from _leaves(e, path + (i,))
    elif hasattr(v, "_loop_fields"):  # a block pointer: its offsets (paths name the field)
        for f in v._loop_fields:
            yield from _leaves(getattr(v, f), path + (f,))
    elif isinstance(v, Value) or _weak(v):
        yield path, v


def _structure(v):
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_structure(e) for e in v))
    if hasattr(v, "_loop_fields"):
        return (type(v), tuple(_structure(getattr(v, f)) for f in v._loop_fields))
    return None


def _replace(v, values, path=()):
    """v with the leaves at `values`' paths replaced; lists are updated in place, so other
    references to a carried list see the loop's values as Python's own loop would leave them."""
    if isinstance(v, list):
        for i, e in enumerate(v):
            v[i] = _replace(e, values, path + (i,))
        return v
    if isinstance(v, tuple):
        return tuple(_replace(e, values, path + (i,)) for i, e in enumerate(v))
    if hasattr(v, "_loop_fields"):
        return v._with(**{f: _replace(getattr(v, f), values, path + (f,)) for f in v._loop_fields})
    return values.get(path, v)


def _get(v, path):
    for i in path:
        v = getattr(v, i) if isinstance(i, str) else v[i]
    return v


def _label(name, path) -> str:
    return name + "".join(f".{i}" if isinstance(i, str) else f"[{i}]" for i in path)


class LoopRuntime:
    """Runs one rewritten tile_range loop during a trace (see the module docstring)."""

    def __init__(self, rng, names, env, index, *, infos, filename):
        from ._control import WhileRange
        self.rng = rng
        self.what = "while loop" if isinstance(rng, WhileRange) else "tile_range loop"
        self.tested = False
        if not isinstance(rng, (_lang.tile_range, WhileRange)):
            raise TracingError(f"{filename}:{infos[index]['line']}: this loop was compiled as a "
                               "metile.tile_range loop but its iterator is a "
                               f"{type(rng).__name__}")
        t = current()
        self.trace = t
        self.info = infos[index]
        self.filename = filename
        self.names = names
        self.key = t.loop_index
        t.loop_index += 1
        loc = f"{filename}:{self.info['line']}"
        # Per name: ("carry", (object, [(path, weak), ...], structure)) for traced values and
        # lists of them, ("pass", obj) for Python objects the loop cannot carry (None, a
        # module, ...), and ("poison", Poison) when unbound before the loop.
        self.slots = []
        inits = []
        for n in names:
            v = env.get(n, _MISSING)
            if v is _MISSING or isinstance(v, Poison):
                line = self.info["assign_lines"].get(n, self.info["line"])
                self.slots.append(("poison", Poison(
                    f"{filename}:{line}: `{n}` is assigned in the {self.what} at {loc} but "
                    "has no value before the loop; give it an initial value before the loop "
                    "(e.g. 0.0 or metile.zeros(...))")))
                continue
            leaves = list(_leaves(v))
            if not leaves or (n in self.info["maybe"] and not (
                    isinstance(v, list) and any(isinstance(x, Value) for _, x in leaves))):
                self.slots.append(("pass", v))
                continue
            kinds = []
            for path, leaf in leaves:
                init, weak = self._init(_label(n, path), leaf)
                kinds.append((path, weak))
                inits.append(init)
            self.slots.append(("carry", (v, kinds, _structure(v))))
        self.iv, carried = rng.open(inits)
        self.inits = carried
        self._bind(carried)
        self.results = None

    def _bind(self, values):
        it = iter(values)
        self.carried = tuple(
            _replace(extra[0], {path: next(it) for path, _ in extra[1]}) if kind == "carry"
            else extra for kind, extra in self.slots)

    def test(self, cond):
        """A rewritten `while`'s condition: traced once (`cond()` builds the condition block),
        then the body is traced once with the values the condition passes on."""
        if self.tested:
            return False
        self.tested = True
        self._bind(self.rng.do(cond()))
        return True

    def _init(self, label, v):
        t = self.trace
        fix = t.fixups.get((self.key, label))
        if isinstance(v, Value):
            if fix is not None:
                v = _lang.cast(v, fix[0])
                v = _lang._broadcast(v, fix[1]) if fix[1] else v
            return v, False
        if fix is not None:
            v = t.const(v.item() if isinstance(v, np.generic) else v, fix[0])
            return (_lang._broadcast(v, fix[1]) if fix[1] else v), True
        return t.literal(v), True

    def __iter__(self):
        yield self.iv

    def end(self, values):
        yields = []
        it = iter(self.inits)
        for n, (kind, extra), y in zip(self.names, self.slots, values):
            if kind != "carry":
                continue
            obj, kinds, structure = extra
            if kinds[0][0] and _structure(y) != structure:
                line = self.info["assign_lines"].get(n, self.info["line"])
                raise TracingError(
                    f"{self.filename}:{line}: `{n}` is carried through the {self.what} at "
                    f"{self.filename}:{self.info['line']} as a {type(obj).__name__} of "
                    f"{len(structure[1])} but the body changes its structure; a carried list "
                    "keeps its length (assign its elements)")
            for path, weak in kinds:
                yields.append(self._yield_value(n, path, next(it), weak, _get(y, path)))
        if any(v is None for v in yields):
            raise Retrace()  # every changed type is recorded: one more trace settles them all
        out = iter(self.rng.close(yields))
        results = []
        for (kind, extra), y in zip(self.slots, values):
            if kind == "carry":
                results.append(_replace(y, {path: next(out) for path, _ in extra[1]}))
            else:
                results.append(y if kind == "pass" else extra)
        self.results = tuple(results)

    def _yield_value(self, name, path, init: Value, weak: bool, y):
        t = self.trace
        line = self.info["assign_lines"].get(name, self.info["line"])
        where = f"{self.filename}:{line}"
        loop = f"the {self.what} at {self.filename}:{self.info['line']}"
        label = _label(name, path)
        if isinstance(y, Poison):
            y.fail()
        if _weak(y):
            c = t.const(y.item() if isinstance(y, np.generic) else y, init.dtype)
            return _lang._broadcast(c, init.shape) if init.shape else c
        if not isinstance(y, Value):
            raise TracingError(f"{where}: `{label}` is carried through {loop} but the body "
                               f"leaves it as a {type(y).__name__}, not a traced value")
        if (y.dtype, y.is_ptr) == (init.dtype, init.is_ptr) and _same_shape(y.shape, init.shape):
            return y  # a T dimension meeting a size: the builder checks it against T
        shape = _unify_shapes(init.shape, y.shape)
        # A scalar that the body widens to a tile is traced again as a tile of its own dtype
        # first: `acc_f32 + x_f16` is f16 while acc is a scalar (a tile's dtype wins) but f32
        # once acc is a tile, so only a dtype that still differs at the same shape is an error.
        widens = shape is not None and not _same_shape(shape, init.shape)
        if y.is_ptr != init.is_ptr or shape is None or (
                not weak and y.dtype != init.dtype and not widens):
            hint = (f"cast the update back (`{label} = (...).to(\"{init.dtype}\")`) or "
                    f"initialize it as {y.dtype}" if y.dtype != init.dtype else
                    "a carried value must keep its shape")
            raise TracingError(f"{where}: `{label}` enters {loop} as {init.type_str()} but the "
                               f"body makes it {y.type_str()}; {hint}")
        fix = (y.dtype if weak else init.dtype, shape)
        key = (self.key, label)
        if t.fixups.get(key) == fix:
            raise TracingError(f"{where}: the type of `{label}` in {loop} does not settle "
                               f"({init.type_str()} -> {y.type_str()})")
        t.fixups[key] = fix
        return None

    @property
    def after_target(self):
        target = self.info["target"]
        return Poison(f"{self.filename}:{self.info['line']}: the tile_range loop variable "
                      f"`{target}` exists only inside the loop")


_MISSING = object()
