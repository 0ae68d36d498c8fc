"""triton.language's shape and combine names (issue 37 item 3): `split`, `join`, `interleave`,
`flip`, `sort`, `reduce` and `associative_scan` with a user combine function, `expand_dims`,
`ravel` and `xor_sum`, with Triton's meaning.

Tiles have at most 2 dimensions, so Triton's own route (a reshape to [2] * k and a permute) is
closed. Everything here is composed of ops every device already runs, the interp oracle
included: reshape and trans move elements, a select and a sum over two lanes pick one of a pair
(on the element's bits as an integer, so -0.0, infinities and NaNs come through unchanged), and
a select joins two tiles into pairs. From these: split/join of adjacent pairs; the exchange of
the elements i and i ^ s along an axis (flip composes it over every bit of the index, the
bitonic sort compares across it); a reduction tree over adjacent pairs (which keeps the order
of the operands, so an associative combine need not commute); and a scan that recurses on the
pair combinations, with the shift by one it needs built from split and interleave. Sizes along
the reduced, scanned, sorted or flipped axis are powers of two, as in Triton.
"""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from . import _dtypes, _lang, _loops
from ._errors import TracingError
from ._lang import _describe, _plain, _static_int
from ._lang_triton import trans
from ._trace import Operand, Value, current, user_location


def _tile(x, name: str, scalars: bool = False) -> Value:
    x = _plain(x)
    if not isinstance(x, Value) or x.is_ptr or (not scalars and not x.shape):
        raise TracingError(f"{user_location()}: {name} needs a 1-D or 2-D tile, got "
                           f"{_describe(x)}")
    return x


def _axis(x: Value, axis, name: str) -> int:
    rank = len(x.shape)
    a = _static_int(axis, f"{name} axis")
    if not -rank <= a < rank:
        raise TracingError(f"{user_location()}: {name}: axis {a} is invalid for a tile of shape "
                           f"{x.shape} (0{' or 1' if rank == 2 else ''})")
    return a % rank


def _power_of_two(n: int, x: Value, axis: int, name: str) -> None:
    if n & (n - 1):
        raise TracingError(f"{user_location()}: {name} needs a power-of-two size along axis "
                           f"{axis}, got {n} (shape {x.shape}); pad the tile to "
                           f"{1 << n.bit_length()}")


# ----------------------------------------------------------------------------- exact moves
def _bits(d: str):
    """(to, back): an element of dtype `d` as an integer whose sum with zeros is exact, and the
    way back. f16/bf16 go through f32 (exact), FP8 through its byte."""
    if d in ("i32", "u32", "i64"):
        return (lambda v: v), (lambda v: v)
    if d == "f32":
        return (lambda v: _lang.cast(v, "i32", bitcast=True)), \
               (lambda v: _lang.cast(v, "f32", bitcast=True))
    if d in ("f16", "bf16"):
        return (lambda v: _lang.cast(_lang.cast(v, "f32"), "i32", bitcast=True)), \
               (lambda v: _lang.cast(_lang.cast(v, "f32", bitcast=True), d))
    if d in _dtypes.FLOAT8:
        return (lambda v: _lang.cast(_lang.cast(v, "u8", bitcast=True), "i32")), \
               (lambda v: _lang.cast(_lang.cast(v, "u8"), d, bitcast=True))
    return (lambda v: _lang.cast(v, "i32")), (lambda v: _lang.cast(v, d))  # i8, u8, bool


def _pick(x: Value, k: int) -> Value:
    """Element k of each pair of x ([K, 2] -> [K], [2] -> a scalar), bit for bit."""
    to, back = _bits(x.dtype)
    b = to(x)
    col = _lang.arange(0, 2)
    if len(x.shape) == 2:
        col = _lang.reshape(col, (1, 2))
    s = _lang.reduce_sum(_lang.where(col == k, b, 0), 1 if len(x.shape) == 2 else None)
    return back(s if s.dtype == b.dtype else _lang.cast(s, b.dtype))


def _pairs(x: Value) -> tuple[Value, Value]:
    """The even and odd elements of a flat tile of even length L, as two [L/2] tiles."""
    n = x.shape[0]
    return _pick(_lang.reshape(x, (n // 2, 2)), 0), _pick(_lang.reshape(x, (n // 2, 2)), 1)


def _ravel(x: Value) -> Value:
    return x if len(x.shape) == 1 else _lang.reshape(x, (x.shape[0] * x.shape[1],))


def split(a: Value) -> tuple[Value, Value]:
    """The two halves of a tile whose last dimension has size 2: [N, 2] -> two [N] tiles,
    [2] -> two scalars (Triton's split; the inverse of join). Exact for every dtype."""
    x = _tile(a, "split")
    if x.shape[-1] != 2:
        raise TracingError(f"{user_location()}: split needs a last dimension of size 2, got "
                           f"shape {x.shape}")
    return _pick(x, 0), _pick(x, 1)


def join(a: Operand, b: Operand) -> Value:
    """A new last dimension of size 2 holding a and b (Triton's join): scalars -> [2], [N] ->
    [N, 2]. a and b have one shape and dtype (a Python number takes the other's dtype); 2-D
    tiles cannot be joined, as tiles have at most 2 dimensions."""
    t = current()
    pa, pb = _plain(a), _plain(b)
    if not isinstance(pa, Value) and not isinstance(pb, Value):
        raise TracingError(f"{user_location()}: join needs at least one traced value")
    va = t.literal(pa, pb if isinstance(pb, Value) else None)
    vb = t.literal(pb, va)
    if va.is_ptr or vb.is_ptr or va.shape != vb.shape or va.dtype != vb.dtype:
        raise TracingError(f"{user_location()}: join needs two values of one shape and dtype, "
                           f"got {va.type_str()} and {vb.type_str()}")
    if len(va.shape) == 2:
        raise TracingError(f"{user_location()}: join of the 2-D tiles {va.type_str()} would make "
                           "a 3-D tile; tiles have at most 2 dimensions (ravel them first)")
    col = _lang.arange(0, 2)
    if not va.shape:
        return _lang.where(col == 0, va, vb)
    n = va.shape[0]
    pair = (n, 2)
    return _lang.where(_lang.reshape(col, (1, 2)) == 0,
                       _lang._broadcast(_lang.reshape(va, (n, 1)), pair),
                       _lang._broadcast(_lang.reshape(vb, (n, 1)), pair))


def interleave(a: Operand, b: Operand) -> Value:
    """a and b interleaved along their last dimension (Triton's interleave): [N] -> [2N] as
    a0 b0 a1 b1 ..., [M, N] -> [M, 2N]."""
    t = current()
    pa, pb = _plain(a), _plain(b)
    va = t.literal(pa, pb if isinstance(pb, Value) else None)
    vb = t.literal(pb, va)
    if len(va.shape) == 2 and va.shape == vb.shape:
        m, n = va.shape
        return _lang.reshape(join(_ravel(va), _ravel(vb)), (m, 2 * n))
    j = join(va, vb)
    return _lang.reshape(j, (2 * va.shape[0],)) if va.shape else j


def _exchange_flat(x: Value, s: int) -> Value:
    """out[i] = x[i ^ s] for a flat tile whose length is a multiple of 2s."""
    n = x.shape[0]
    if s == 1:
        e, o = _pairs(x)
        return _lang.reshape(join(o, e), (n,))
    # Blocks of 2s as rows; their first and second halves become the two rows of a [2, n/2]
    # tile, whose transpose is split into the halves and joined back the other way round.
    halves = _lang.reshape(trans(_lang.reshape(x, (n // (2 * s), 2 * s))), (2, n // 2))
    first, second = split(trans(halves))
    back = _lang.reshape(trans(join(second, first)), (2 * s, n // (2 * s)))
    return _lang.reshape(trans(back), (n,))


def _exchange(x: Value, axis: int, s: int) -> Value:
    """out[..., i, ...] = x[..., i ^ s, ...] along `axis` (s a power of two below its size)."""
    if len(x.shape) == 1:
        return _exchange_flat(x, s)
    if axis == 0:
        return trans(_exchange(trans(x), 1, s))
    return _lang.reshape(_exchange_flat(_ravel(x), s), x.shape)


def _last_axis(x: Value, dim, name: str) -> int:
    return len(x.shape) - 1 if _plain(dim) is None else _axis(x, dim, name)


def flip(x: Value, dim: int | None = None) -> Value:
    """x reversed along `dim` (the last dimension when None), whose size is a power of two
    (Triton's flip)."""
    v = _tile(x, "flip")
    axis = _last_axis(v, dim, "flip")
    n = v.shape[axis]
    _power_of_two(n, v, axis, "flip")
    s = n // 2
    while s:  # i ^ (n - 1) == n - 1 - i: exchange across every bit of the index
        v = _exchange(v, axis, s)
        s //= 2
    return v


def sort(x: Value, dim: int | None = None, descending: bool = False) -> Value:
    """x sorted along `dim` (the last dimension when None; its size a power of two), ascending
    unless `descending` (Triton's sort). A bitonic network: the result is a permutation of x."""
    v = _tile(x, "sort")
    axis = _last_axis(v, dim, "sort")
    n = v.shape[axis]
    _power_of_two(n, v, axis, "sort")
    desc = _plain(descending)
    if not isinstance(desc, (bool, int)):
        raise TracingError(f"{user_location()}: sort: descending must be a compile-time bool")
    i = _lang.arange(0, n)
    if len(v.shape) == 2:
        i = _lang.reshape(i, (n, 1) if axis == 0 else (1, n))
    k = 2
    while k <= n:
        j = k // 2
        while j:
            p = _exchange(v, axis, j)
            lower = (i & j) == 0
            up = ((i & k) == 0) if not desc else ((i & k) != 0)
            lo, hi = _lang.where(lower, v, p), _lang.where(lower, p, v)
            # One predicate for both lanes of a pair, so they swap together (or not at all):
            # the result stays a permutation even where comparisons are false (NaN).
            swap = _lang.where(up, hi < lo, lo < hi)
            v = _lang.where(swap, p, v)
            j //= 2
        k *= 2
    return v


# ----------------------------------------------------------------------- combine functions
def _inputs(input, name: str) -> tuple[list[Value], bool]:
    single = not isinstance(input, (tuple, list))
    vals = [_tile(v, name, scalars=False) for v in ((input,) if single else input)]
    if not vals:
        raise TracingError(f"{user_location()}: {name} needs at least one input")
    if any(v.shape != vals[0].shape for v in vals):
        raise TracingError(f"{user_location()}: {name}: the inputs have different shapes: "
                           f"{', '.join(v.type_str() for v in vals)}")
    return vals, single


def _combiner(fn: Callable, n: int, name: str) -> Callable:
    """combine_fn as the trace calls it (a helper's loops and `if`s rewritten, as any helper's);
    a signature that cannot take the 2n values is named before it is called."""
    if not callable(fn):
        raise TracingError(f"{user_location()}: {name}: combine_fn must be a function, got "
                           f"{type(fn).__name__}")
    f = _loops._helper(fn)
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return f
    try:
        sig.bind(*range(2 * n))
    except TypeError:
        raise TracingError(
            f"{user_location()}: {name}: combine_fn{sig} cannot take the {2 * n} values it is "
            f"called with: for {n} input{'s' if n != 1 else ''} it takes the two operands' "
            f"values (a0, ..., b0, ...) and returns {n}") from None
    return f


def _combine(fn: Callable, lhs: list[Value], rhs: list[Value], name: str) -> list[Value]:
    out = fn(*lhs, *rhs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(lhs):
        raise TracingError(f"{user_location()}: {name}: combine_fn returned {len(outs)} "
                           f"value{'s' if len(outs) != 1 else ''} for {len(lhs)} input"
                           f"{'s' if len(lhs) != 1 else ''} (it takes {2 * len(lhs)} values "
                           f"and returns {len(lhs)})")
    t = current()
    shape = lhs[0].shape
    res = []
    for o in outs:
        v = t.literal(_plain(o))
        if v.is_ptr or (v.shape and v.shape != shape):
            raise TracingError(f"{user_location()}: {name}: combine_fn returned "
                               f"{v.type_str()} where an element-wise value of shape {shape} "
                               "was expected")
        res.append(_lang._broadcast(v, shape) if not v.shape else v)
    return res


def _scalar(x: Value) -> Value:
    """The element of a 1-element tile as a scalar, bit for bit."""
    to, back = _bits(x.dtype)
    b = to(x)
    s = _lang.reduce_sum(b)
    return back(s if s.dtype == b.dtype else _lang.cast(s, b.dtype))


def _rows(vals: list[Value], axis: int) -> tuple[list[Value], int, int]:
    """The inputs as [R, N] with the combined axis last."""
    if len(vals[0].shape) == 1:
        return [_lang.reshape(v, (1, v.shape[0])) for v in vals], 1, vals[0].shape[0]
    if axis == 0:
        vals = [trans(v) for v in vals]
    return vals, vals[0].shape[0], vals[0].shape[1]


def reduce(input: Value | Sequence[Value], axis: int | None, combine_fn: Callable,
           keep_dims: bool = False) -> Value | tuple:
    """Reduces `input` (a tile, or a tuple of tiles of one shape reduced together) along
    `axis` (all axes when None) with `combine_fn` (Triton's reduce). combine_fn takes the two
    operands' values (a0, a1, ..., b0, b1, ...) as tiles and returns as many (a tuple for
    several); a @metile.jit helper or a plain function, inlined. Adjacent elements combine
    first, so the combine must be associative but need not commute. The size along the axis
    is a power of two."""
    vals, single = _inputs(input, "reduce")
    shape = vals[0].shape
    if _plain(axis) is None:
        vals, ax = [_ravel(v) for v in vals], 0
    else:
        ax = _axis(vals[0], axis, "reduce")
    rows, r, n = _rows(vals, ax)
    _power_of_two(n, vals[0], ax, "reduce")
    flat = [_ravel(v) for v in rows]
    combine_fn = _combiner(combine_fn, len(vals), "reduce")
    while n > 1:
        pairs = [_pairs(v) for v in flat]
        flat = _combine(combine_fn, [p[0] for p in pairs], [p[1] for p in pairs], "reduce")
        n //= 2
    # flat: [r], one result per row
    if len(shape) == 1 or _plain(axis) is None:
        out = [_scalar(v) for v in flat]
    else:
        out = flat
    if _plain(keep_dims):
        if _plain(axis) is None:
            dims = (1,) * len(shape)
        elif len(shape) == 1:
            dims = (1,)
        else:
            dims = (1, shape[1]) if ax == 0 else (shape[0], 1)
        out = [_lang._broadcast(v, dims) if not v.shape else _lang.reshape(v, dims)
               for v in out]
    return out[0] if single else tuple(out)


def _shift1(z: Value) -> Value:
    """out[:, k] = z[:, k - 1] along the last axis of [R, M] (column 0 holds some element of
    its row: the callers mask it)."""
    r, m = z.shape
    if m == 1:
        return z
    e, o = _pairs(_ravel(z))
    t = _shift1(_lang.reshape(o, (r, m // 2)))
    return interleave(t, _lang.reshape(e, (r, m // 2)))


def _scan(vals: list[Value], fn: Callable) -> list[Value]:
    r, n = vals[0].shape
    if n == 1:
        return vals
    pairs = [_pairs(_ravel(v)) for v in vals]
    evens = [_lang.reshape(p[0], (r, n // 2)) for p in pairs]
    odds = [_lang.reshape(p[1], (r, n // 2)) for p in pairs]
    # s[k] = x[0] + ... + x[2k + 1] (the scan of the pair sums); out[2k + 1] = s[k] and
    # out[2k] = s[k - 1] + x[2k] (out[0] = x[0]).
    s = _scan(_combine(fn, evens, odds, "associative_scan"), fn)
    before = _combine(fn, [_shift1(v) for v in s], evens, "associative_scan")
    first = _lang.reshape(_lang.arange(0, n // 2), (1, n // 2)) == 0
    return [interleave(_lang.where(first, e, b), sv) for e, b, sv in zip(evens, before, s)]


def associative_scan(input: Value | Sequence[Value], axis: int, combine_fn: Callable,
                     reverse: bool = False) -> Value | tuple:
    """The inclusive scan of `input` (a tile or a tuple of tiles of one shape) along `axis`
    with `combine_fn` (Triton's associative_scan): element k combines elements 0..k in order
    (with reverse=True, elements k..end from the end: combine(later, earlier)). combine_fn is
    as in reduce; the size along the axis is a power of two."""
    vals, single = _inputs(input, "associative_scan")
    shape = vals[0].shape
    ax = _axis(vals[0], axis, "associative_scan")
    _power_of_two(shape[ax], vals[0], ax, "associative_scan")
    rows, _, _ = _rows(vals, ax)
    combine_fn = _combiner(combine_fn, len(vals), "associative_scan")
    rev = bool(_plain(reverse))
    if rev:
        rows = [flip(v, 1) for v in rows]
    out = _scan(rows, combine_fn)
    if rev:
        out = [flip(v, 1) for v in out]
    if len(shape) == 1:
        out = [_lang.reshape(v, shape) for v in out]
    elif ax == 0:
        out = [trans(v) for v in out]
    return out[0] if single else tuple(out)


def _xor(a: Value, b: Value) -> Value:
    return a ^ b


def xor_sum(input: Value, axis: int | None = None, keep_dims: bool = False) -> Value:
    """The bitwise xor of the elements of an integer tile, along `axis` (all when None)."""
    x = _tile(input, "xor_sum")
    if x.dtype not in _dtypes.INTS:
        raise TracingError(f"{user_location()}: xor_sum needs an integer tile, got "
                           f"{x.type_str()}")
    return reduce(x, axis, _xor, keep_dims)


# ------------------------------------------------------------------------------ reshaping
def expand_dims(input: Operand, axis: int | Sequence[int]) -> Value:
    """`input` with a size-1 dimension inserted at `axis` (or at each axis of a sequence),
    counted in the result's dimensions (Triton's expand_dims); tiles have at most 2."""
    x = current().literal(_plain(input))
    axes = _plain(axis)
    axes = [_static_int(a, "expand_dims axis")
            for a in (axes if isinstance(axes, (tuple, list)) else (axes,))]
    rank = len(x.shape) + len(axes)
    if rank > 2:
        raise TracingError(f"{user_location()}: expand_dims of {x.type_str()} at {axes} would "
                           "make a 3-D tile; tiles have at most 2 dimensions")
    norm = sorted(a % rank if -rank <= a < rank else -1 for a in axes)
    if -1 in norm or len(set(norm)) != len(norm):
        raise TracingError(f"{user_location()}: expand_dims: axes {axes} are invalid for a "
                           f"result of {rank} dimensions")
    dims, rest = [], list(x.shape)
    for d in range(rank):
        dims.append(1 if d in norm else rest.pop(0))
    return _lang.reshape(x, tuple(dims)) if x.shape else _lang._broadcast(x, tuple(dims))


def ravel(x: Value, can_reorder: bool = False) -> Value:
    """The tile's elements as a 1-D tile, in row-major order (Triton's ravel)."""
    return _ravel(_tile(x, "ravel"))


Value.split = split
Value.join = join
Value.interleave = interleave
Value.flip = flip
Value.sort = sort
Value.reduce = reduce
Value.associative_scan = associative_scan
Value.xor_sum = xor_sum
Value.expand_dims = expand_dims
Value.ravel = ravel
