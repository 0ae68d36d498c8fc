"""Triton's block pointers and tensor descriptors (issue 37 item 4): `make_block_ptr`, `advance`,
`load`/`store` of a block pointer with `boundary_check`, and `make_tensor_descriptor` with its
`load`/`store`. A block is read and written as the pointer tile `base + rows[:, None] * s0 +
cols[None, :] * s1` masked by the checked bounds, which the compiler's pointer_tiles pass turns
into the same tile loads and stores as `tile_load`/`tile_store` where the strides allow; any
strides work (a transposed view included). A loop carries a block pointer's offsets
(`p = metile.advance(p, (0, BLOCK_K))` in a tile_range body)."""

from __future__ import annotations

from collections.abc import Sequence

from . import _lang
from ._errors import TracingError
from ._lang import _plain, _static_int
from ._trace import Operand, Value, user_location

_PADDINGS = {None: 0.0, "": 0.0, "zero": 0.0, "nan": float("nan")}

Dims = "Sequence[Operand] | Operand"  # one entry per dimension (a bare value for 1-D)


def _ints(xs, what, n=None):
    xs = _plain(xs)
    if isinstance(xs, (int, Value)) and not isinstance(xs, bool):
        xs = (xs,)
    if (not isinstance(xs, (tuple, list)) or not 1 <= len(xs) <= 2
            or (n is not None and len(xs) != n)):
        want = f"{n} entries" if n is not None else "1 or 2 entries"
        raise TracingError(f"{user_location()}: {what} must be a tuple of {want}, got {xs!r}")
    return tuple(_plain(x) for x in xs)


class BlockPointer:
    """A `block_shape` window at `offsets` of a 1-D or 2-D tensor at `base` with `shape` and
    `strides` in elements (make_block_ptr). `order` is Triton's layout hint: checked, and
    meaningless here (the strides say everything)."""

    _loop_fields = ("offsets",)  # what a tile_range loop carries; the rest stays fixed

    def __init__(self, base: Value, shape, strides, offsets, block_shape, order):
        self.base, self.shape, self.strides = base, shape, strides
        self.offsets, self.block_shape, self.order = offsets, block_shape, order

    def _with(self, offsets) -> "BlockPointer":
        return BlockPointer(self.base, self.shape, self.strides, offsets, self.block_shape,
                            self.order)

    def _pointers_and_mask(self, boundary_check, what):
        checks = _plain(boundary_check)
        checks = (checks,) if isinstance(checks, int) else tuple(checks or ())
        rank = len(self.block_shape)
        for d in checks:
            if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < rank:
                raise TracingError(f"{user_location()}: {what}: boundary_check {boundary_check!r} "
                                   f"names a dimension outside 0..{rank - 1}")
        ptrs, mask = self.base, None
        for d, (size, off, stride) in enumerate(zip(self.block_shape, self.offsets, self.strides)):
            idx = off + _lang.arange(0, size)
            if rank == 2:
                idx = idx[:, None] if d == 0 else idx[None, :]
            ptrs = ptrs + idx * stride
            if d in checks:
                inside = (idx >= 0) & (idx < self.shape[d])
                mask = inside if mask is None else mask & inside
        if rank == 2 and mask is not None and tuple(mask.shape) != tuple(self.block_shape):
            mask = mask & _lang.full(self.block_shape, True, "bool")
        return ptrs, mask

    def load(self, boundary_check: Sequence[int] | int = (),
             padding_option: str | None = None) -> Value:
        if padding_option not in _PADDINGS:
            raise TracingError(f"{user_location()}: load: padding_option {padding_option!r} is not "
                               "'zero' or 'nan'")
        ptrs, mask = self._pointers_and_mask(boundary_check, "load")
        if mask is None:
            return _lang.load(ptrs)
        return _lang.load(ptrs, mask=mask, other=_PADDINGS[padding_option])

    def store(self, value: Operand, boundary_check: Sequence[int] | int = ()) -> None:
        ptrs, mask = self._pointers_and_mask(boundary_check, "store")
        _lang.store(ptrs, value, mask=mask)

    def __repr__(self) -> str:
        return f"BlockPointer(block_shape={self.block_shape}, order={self.order})"


def make_block_ptr(base: Value, shape: Dims, strides: Dims, offsets: Dims, block_shape: Dims,
                   order: Dims) -> BlockPointer:
    """Triton's make_block_ptr: the `block_shape` block at `offsets` of the tensor at `base`
    (`shape` and `strides` in elements, run-time values or ints; `block_shape` and `order`
    compile-time). load/store take it with `boundary_check` (the dimensions to mask against
    0 <= index < shape; outside reads `padding_option`'s value, 'zero' by default)."""
    base = _lang._pointer(base, "make_block_ptr")
    block = tuple(_static_int(b, "make_block_ptr block_shape entries")
                  for b in _ints(block_shape, "make_block_ptr block_shape"))
    rank = len(block)
    shape = _ints(shape, "make_block_ptr shape", rank)
    strides = _ints(strides, "make_block_ptr strides", rank)
    offsets = _ints(offsets, "make_block_ptr offsets", rank)
    order = tuple(_static_int(o, "make_block_ptr order entries")
                  for o in _ints(order, "make_block_ptr order", rank))
    if sorted(order) != list(range(rank)):
        raise TracingError(f"{user_location()}: make_block_ptr: order {order} is not a permutation "
                           f"of 0..{rank - 1}")
    if any(b <= 0 for b in block):
        raise TracingError(f"{user_location()}: make_block_ptr: block_shape {block} must be "
                           "positive")
    return BlockPointer(base, shape, strides, offsets, block, order)


def advance(ptr: BlockPointer, offsets: Dims) -> BlockPointer:
    """The block pointer moved by `offsets` (one per dimension, run-time values or ints)."""
    if not isinstance(ptr, BlockPointer):
        raise TracingError(f"{user_location()}: advance needs a block pointer (make_block_ptr), "
                           f"got {type(ptr).__name__}")
    delta = _ints(offsets, "advance offsets", len(ptr.block_shape))
    return ptr._with(tuple(o if isinstance(d, int) and d == 0 else o + d
                           for o, d in zip(ptr.offsets, delta)))


class TensorDescriptor:
    """make_tensor_descriptor's result: loads and stores `block_shape` blocks of the tensor at any
    offsets, every dimension bounds-checked (outside reads 0, writes nothing)."""

    def __init__(self, base: Value, shape, strides, block_shape):
        self.base, self.shape, self.strides, self.block_shape = base, shape, strides, block_shape

    def _block(self, offsets) -> BlockPointer:
        offsets = _ints(offsets, "tensor descriptor offsets", len(self.block_shape))
        return BlockPointer(self.base, self.shape, self.strides, offsets, self.block_shape,
                            tuple(reversed(range(len(self.block_shape)))))

    def load(self, offsets: Dims) -> Value:
        return self._block(offsets).load(boundary_check=tuple(range(len(self.block_shape))))

    def store(self, offsets: Dims, value: Operand) -> None:
        self._block(offsets).store(value, boundary_check=tuple(range(len(self.block_shape))))


def make_tensor_descriptor(base: Value, shape: Dims, strides: Dims,
                           block_shape: Dims) -> TensorDescriptor:
    """Triton's make_tensor_descriptor: `desc.load([i, j])` / `desc.store([i, j], x)` read and
    write the `block_shape` block at element offsets (i, j) of the tensor at `base` (`shape`
    and `strides` in elements, any strides)."""
    rank = len(_ints(block_shape, "make_tensor_descriptor block_shape"))
    bp = make_block_ptr(base, shape, strides, (0,) * rank, block_shape, tuple(range(rank)))
    return TensorDescriptor(bp.base, bp.shape, bp.strides, bp.block_shape)
