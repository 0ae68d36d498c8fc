"""`metile.math`: the names of triton.language.math, each the metile op of the same meaning
(docs/semantics.md gives every op's precision on every device)."""

from ._lang import (absolute as abs, ceil, cos, erf, exp, exp2, floor, log, log2,  # noqa: F401
                    maximum, minimum, rsqrt, sigmoid, sin, sqrt, tanh, cdiv)
from ._lang_tl import clamp, div_rn, fdiv, fma, sqrt_rn, umulhi  # noqa: F401
