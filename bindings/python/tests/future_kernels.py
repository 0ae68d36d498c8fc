"""A kernel module written with postponed annotations (annotations are strings)."""
from __future__ import annotations

import metile
from metile import constexpr


@metile.kernel
def scale(X, Out, N, FACTOR: metile.constexpr, BLOCK: constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask) * FACTOR, mask=mask)
