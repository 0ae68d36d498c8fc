"""Atomics (issue 17 item 7): atomic_add/max/min/xchg/cas with Triton's signatures, many
programs contending for the same elements, masked lanes touching nothing, compared with numpy.
Devices that lack an atomic (metal: no f32 max/min/xchg/cas) fail to compile with
UnsupportedError naming the op and the dtype."""

import numpy as np
import pytest

import metile

GRID = 40
BLOCK = 128
N = GRID * BLOCK - 77  # ragged: the last program's tail is masked off


@metile.kernel
def histogram(X, Hist, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask, other=0)
    metile.atomic_add(Hist + x, 1, mask=mask)


def test_histogram_with_many_programs_contending(device):
    x = np.random.default_rng(3).integers(0, 64, N).astype(np.int32)
    hist = np.zeros(64, np.int32)
    histogram[(GRID,)](x, hist, N, BLOCK=BLOCK)
    np.testing.assert_array_equal(hist, np.bincount(x, minlength=64))


@metile.kernel
def rmw(X, Out, Old, N, OP: metile.constexpr, BINS: metile.constexpr, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    if OP == "add":
        old = metile.atomic_add(Out + offs % BINS, x, mask=mask)
    elif OP == "max":
        old = metile.atomic_max(Out + offs % BINS, x, mask=mask)
    else:
        old = metile.atomic_min(Out + offs % BINS, x, mask=mask)
    metile.store(Old + offs, old, mask=mask)


def _reference(op, x, init, bins):
    out = init.astype(np.float64).copy()
    for b in range(bins):
        part = x[b::bins].astype(np.float64)
        out[b] = {"add": out[b] + part.sum(), "max": max(out[b], part.max()),
                  "min": min(out[b], part.min())}[op]
    return out


@pytest.mark.parametrize("dtype", ["i32", "u32", "i64", "f32"])
@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_add_max_min_match_numpy(device, op, dtype):
    rng = np.random.default_rng(5)
    np_t = {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "f32": np.float32}[dtype]
    if dtype == "f32":
        x = (rng.standard_normal(N) * 4).astype(np_t)
    else:
        lo = 0 if dtype == "u32" else -1000
        x = rng.integers(lo, 1000, N).astype(np_t)
    bins = 16
    init = np.full(bins, 7, np_t)
    out, old = init.copy(), np.zeros(N, np_t)
    if device.name in ("metal", "metal-sim") and (dtype == "i64" or (dtype == "f32" and op != "add")):
        with pytest.raises(metile.UnsupportedError, match=f"atomic_{op}: no atomic on {dtype}"):
            rmw[(GRID,)](x, out, old, N, OP=op, BINS=bins, BLOCK=BLOCK)
        return
    rmw[(GRID,)](x, out, old, N, OP=op, BINS=bins, BLOCK=BLOCK)
    want = _reference(op, x, init, bins)
    if dtype == "f32":
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-2)
    else:
        np.testing.assert_array_equal(out, want.astype(np_t))
    # Every old value is one the element held at some point: for max/min each lane's old value
    # lies between the initial value and the final one.
    if op != "add":
        b = np.arange(N) % bins
        lo, hi = np.minimum(init[b], out[b]), np.maximum(init[b], out[b])
        assert np.all((old >= lo) & (old <= hi))


@metile.kernel
def scalar_counter(Counter, Order, Slot, Swapped, Won):
    pid = metile.program_id(0)
    metile.store(Order + pid, metile.atomic_add(Counter, 1))
    metile.store(Swapped + pid, metile.atomic_xchg(Slot + 0, pid + 1))
    metile.store(Won + pid, metile.atomic_cas(Slot + 1, 0, pid + 1))


def test_scalar_atomics_happen_once_per_program_and_return_the_old_value(device):
    g = 64
    counter = np.zeros(1, np.int32)
    order, swapped, won = (np.full(g, -1, np.int32) for _ in range(3))
    slot = np.zeros(2, np.int32)
    scalar_counter[(g,)](counter, order, slot, swapped, won)
    assert counter[0] == g
    np.testing.assert_array_equal(np.sort(order), np.arange(g))
    # xchg: the old values and the final value are 0..g, each once.
    np.testing.assert_array_equal(np.sort(np.append(swapped, slot[0])), np.arange(g + 1))
    # cas: exactly one program found 0; the slot holds its id + 1 and everyone else saw it.
    winners = np.flatnonzero(won == 0)
    assert len(winners) == 1
    assert slot[1] == winners[0] + 1
    assert np.all(won[won != 0] == winners[0] + 1)


@metile.kernel
def tile_cas(Data, Cmp, Val, Old, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    old = metile.atomic_cas(Data + offs, metile.load(Cmp + offs), metile.load(Val + offs))
    metile.store(Old + offs, old)


@pytest.mark.parametrize("dtype", ["i32", "f32"])
def test_tile_cas_swaps_only_where_equal(device, dtype):
    np_t = np.int32 if dtype == "i32" else np.float32
    data = np.arange(32).astype(np_t)
    cmp = data.copy()
    cmp[::3] += 1  # these lanes do not match
    val = (np.arange(32) + 100).astype(np_t)
    old = np.zeros(32, np_t)
    want = np.where(cmp == data, val, data)
    if device.name in ("metal", "metal-sim") and dtype == "f32":
        with pytest.raises(metile.UnsupportedError, match="atomic_cas: no atomic on f32"):
            tile_cas[(1,)](data, cmp, val, old, BLOCK=32)
        return
    tile_cas[(1,)](data, cmp, val, old, BLOCK=32)
    np.testing.assert_array_equal(old, np.arange(32).astype(np_t))
    np.testing.assert_array_equal(data, want)


@metile.kernel
def masked(Hist, Old, K, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    old = metile.atomic_add(Hist + offs, 5, mask=offs < K)
    metile.store(Old + offs, old)


def test_masked_lanes_touch_nothing_and_are_inactive(device):
    # Hist has 4 elements: an unmasked lane past it would be an out-of-bounds access (interp
    # reports those as device errors).
    hist = np.array([1, 2, 3, 4], np.int32)
    old = np.full(32, -1, np.int32)
    masked[(1,)](hist, old, 4, BLOCK=32)
    np.testing.assert_array_equal(hist, [6, 7, 8, 9])
    # The old values of masked-off lanes are inactive (as a load without `other`): the
    # unmasked store skips them.
    np.testing.assert_array_equal(old, [1, 2, 3, 4] + [-1] * 28)


def test_unmasked_out_of_bounds_atomic_is_a_device_error():
    hist = np.zeros(4, np.int32)
    with metile.use_device("interp"):
        with pytest.raises(metile.DeviceError, match=r"atomic_add: access of element 4 outside"):
            masked[(1,)](hist, np.zeros(32, np.int32), 32, BLOCK=32)


def test_out_of_range_lanes_are_dropped_on_devices_that_do_not_check(device):
    # docs/semantics.md "No access leaves its buffer": the bounds pass guards atomics like stores.
    if device.name == "interp":
        pytest.skip("interp reports out-of-range accesses (test above)")
    big = np.array([1, 2, 3, 4, 100, 100, 100, 100], np.int32)
    old = np.full(32, -1, np.int32)
    masked[(1,)](big[:4], old, 32, BLOCK=32)  # a 4-element view: lanes 4..31 are outside it
    np.testing.assert_array_equal(big, [6, 7, 8, 9, 100, 100, 100, 100])
    np.testing.assert_array_equal(old, [1, 2, 3, 4] + [0] * 28)  # as an out-of-range load reads 0


def test_bad_atomics_are_named():
    @metile.kernel
    def half(X):
        metile.atomic_add(X + metile.arange(0, 32), 1.0)

    with pytest.raises(metile.InvalidProgramError, match="atomic_add.*no atomic on f16"):
        half[(1,)](np.zeros(32, np.float16))

    @metile.kernel
    def not_a_pointer(X):
        metile.atomic_max(metile.arange(0, 32), 1)

    with pytest.raises(metile.TracingError, match="atomic_max needs a pointer"):
        not_a_pointer[(1,)](np.zeros(32, np.int32))

    @metile.kernel
    def tile_into_scalar(X):
        metile.atomic_xchg(X, metile.arange(0, 32))

    with pytest.raises(metile.InvalidProgramError, match="atomic_xchg.*needs a tile of pointers"):
        tile_into_scalar[(1,)](np.zeros(32, np.int32))

    @metile.kernel
    def shared_atomic(X):
        s = metile.shared(32, "i32")
        metile.atomic_add(s + metile.arange(0, 32), 1)

    with pytest.raises(metile.InvalidProgramError, match="atomic_add.*not shared memory"):
        shared_atomic[(1,)](np.zeros(32, np.int32))
