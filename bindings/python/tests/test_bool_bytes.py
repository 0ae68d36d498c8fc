"""A bool in memory is a byte, and every device reads any non-zero byte as true
(docs/semantics.md): a uint8 buffer viewed as bool holding 0, 1, 2, 255, ... loads as numpy's
`!= 0` through where(), casts, logic, arithmetic, masks, reductions and scans, and a stored
bool is the byte 0 or 1."""

import numpy as np
import pytest

import metile

BYTES = np.array([0, 1, 2, 255, 128, 3, 0, 254, 1, 0, 16, 0x80, 7, 0, 64, 1], np.uint8)


def _bools(n, seed=0):
    """n bytes cycling through BYTES (shuffled by `seed`), viewed as bool, and their truth."""
    raw = np.resize(np.random.default_rng(seed).permutation(BYTES), n)
    return raw.view(np.bool_), raw != 0


@metile.kernel
def _elementwise(Bp, Cp, X, Out, Stored, B: metile.constexpr):
    o = metile.arange(0, B)
    b = metile.load(Bp + o)
    c = metile.load(Cp + o)
    x = metile.load(X + o)
    metile.store(Out + o, metile.where(b, 1, 0))
    metile.store(Out + B + o, b.to(metile.int32))
    metile.store(Out + 2 * B + o, (~b).to(metile.int32))
    metile.store(Out + 3 * B + o, (b & c).to(metile.int32))
    metile.store(Out + 4 * B + o, (b | c).to(metile.int32))
    metile.store(Out + 5 * B + o, (b ^ c).to(metile.int32))
    metile.store(Out + 6 * B + o, (b == c).to(metile.int32))
    metile.store(Out + 7 * B + o, b + 5)                      # bool promotes to the int: 5 or 6
    metile.store(Out + 8 * B + o, (b.to(metile.float32) * x).to(metile.int32))
    metile.store(Out + 9 * B + o, metile.where(b, x, -x).to(metile.int32))
    metile.store(Stored + o, b)                               # a bool stored back: 0 or 1
    metile.store(Stored + B + o, b != c)


@pytest.mark.parametrize("B", [16, 1024])  # one element a thread, and vector loads on GPUs
def test_loads_read_every_nonzero_byte_as_true(device, B):
    b, tb = _bools(B, 1)
    c, tc = _bools(B, 2)
    x = np.arange(1, B + 1, dtype=np.float32)
    out = np.full(10 * B, -7, np.int32)
    stored = np.full(2 * B, 0xAA, np.uint8)
    _elementwise[(1,)](b, c, x, out, stored.view(np.bool_), B=B)
    i = lambda v: v.astype(np.int32)
    want = [i(tb), i(tb), i(~tb), i(tb & tc), i(tb | tc), i(tb ^ tc), i(tb == tc), i(tb) + 5,
            i(tb * x), i(np.where(tb, x, -x))]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(out[k * B:(k + 1) * B], w, err_msg=f"output {k}")
    np.testing.assert_array_equal(stored, np.concatenate([tb, tb != tc]).astype(np.uint8))


@metile.kernel
def _reductions(Bp, Out, R: metile.constexpr, C: metile.constexpr):
    rows = metile.arange(0, R)
    cols = metile.arange(0, C)
    b = metile.load(Bp + rows[:, None] * C + cols[None, :])
    i = b.to(metile.int32)  # reductions take numbers: a bool casts to 0 or 1
    metile.store(Out, metile.sum(i))
    metile.store(Out + 1, metile.max(i))                      # any
    metile.store(Out + 2, metile.min(i))                      # all
    metile.store(Out + 3 + rows, metile.max(i, axis=1))
    metile.store(Out + 3 + R + rows, metile.min(i, axis=1))
    metile.store(Out + 3 + 2 * R + rows, metile.sum(i, axis=1))
    metile.store(Out + 3 + 3 * R + cols, metile.sum(i, axis=0))
    metile.store(Out + 3 + 3 * R + C + rows[:, None] * C + cols[None, :], metile.cumsum(b, axis=1))


@pytest.mark.parametrize("R,C", [(4, 16), (8, 128)])
def test_reductions_and_scans_count_nonzero_bytes(device, R, C):
    b, t = _bools(R * C, 3)
    t2 = t.reshape(R, C)
    t2[1] = True   # a row that is all true (bytes 1..255) and one that is all false
    t2[2] = False
    b = b.copy()
    raw = b.view(np.uint8)
    raw[C:2 * C] = np.resize(BYTES[BYTES != 0], C)
    raw[2 * C:3 * C] = 0
    out = np.full(3 + 3 * R + C + R * C, -7, np.int32)
    _reductions[(1,)](b, out, R=R, C=C)
    want = np.concatenate([[t2.sum(), t2.any(), t2.all()], t2.any(1), t2.all(1), t2.sum(1),
                           t2.sum(0), np.cumsum(t2, axis=1).ravel()]).astype(np.int32)
    np.testing.assert_array_equal(out, want)


@metile.kernel
def _masked(M, X, Out, flag, B: metile.constexpr):
    o = metile.arange(0, B)
    m = metile.load(M + o) & flag
    metile.store(Out + o, metile.load(X + o, mask=m, other=-1.0), mask=m | (o == 0))


@pytest.mark.parametrize("flag", [True, False])  # a bool scalar parameter beside the loads
def test_a_loaded_bool_as_a_mask(device, flag):
    B = 64
    m, t = _bools(B, 4)
    t = t & flag
    x = np.arange(B, dtype=np.float32)
    out = np.full(B, 99.0, np.float32)
    _masked[(1,)](m, x, out, flag, B=B)
    want = np.where(t, x, 99.0).astype(np.float32)
    want[0] = x[0] if t[0] else -1.0
    np.testing.assert_array_equal(out, want)
