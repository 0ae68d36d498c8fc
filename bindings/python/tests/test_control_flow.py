"""Run-time `if` / `else` and `while` in kernels (docs/semantics.md, "Control flow") on every
device (interp, cpu, metal-sim, metal and cuda lower them), against float64 numpy references."""

import numpy as np
import pytest

import metile as tl


@tl.jit
def branch_on_scalar(X, Out, Flag, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    f = tl.load(Flag + pid)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0.0)
    if f > 0:
        y = x * 2.0
        s = 1
    elif f == 0:
        y = x - 1.0
        s = 2.5
    else:
        y = tl.exp(x)
        s = 3
    tl.store(Out + offs, y + s, mask=offs < N)


def test_if_elif_else_on_a_loaded_scalar(device):
    x = np.random.rand(60).astype(np.float32)
    flag = np.array([1, 0, -2, 5], np.int32)
    out = np.zeros(60, np.float32)
    branch_on_scalar[(4,)](x, out, flag, 60, BLOCK=16)
    want = np.zeros(60)
    for p in range(4):
        xs = x[p * 16:(p + 1) * 16].astype(np.float64)
        f = flag[p]
        want[p * 16:(p + 1) * 16] = xs * 2 + 1 if f > 0 else (xs - 1 + 2.5 if f == 0 else np.exp(xs) + 3)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@tl.jit
def counted_while(X, Out, Trips, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n = tl.load(Trips + pid)
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + pid * BLOCK + offs)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    i = 0
    while i < n:
        acc = acc * 0.5 + x
        if i % 2 == 1:
            acc = acc + 1.0
        i += 1
    tl.store(Out + pid * BLOCK + offs, acc)
    tl.store(Trips + pid, i)


def test_while_with_a_data_dependent_trip_count_and_a_carried_tile(device):
    x = np.random.rand(4 * 32).astype(np.float32)
    trips = np.array([0, 1, 5, 12], np.int32)
    out = np.zeros_like(x)
    got_trips = trips.copy()
    counted_while[(4,)](x, out, got_trips, BLOCK=32)
    for p in range(4):
        acc = np.zeros(32)
        xs = x[p * 32:(p + 1) * 32].astype(np.float64)
        for i in range(trips[p]):
            acc = acc * 0.5 + xs + (1.0 if i % 2 == 1 else 0.0)
        np.testing.assert_allclose(out[p * 32:(p + 1) * 32], acc, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_trips, trips)


@tl.jit
def locked_sum(X, Total, Lock, Count, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(X + pid * BLOCK + tl.arange(0, BLOCK))
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
        total = tl.sum(x, axis=0)
    else:
        total = tl.load(Total) + tl.sum(x, axis=0)
    tl.store(Total, total)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


def test_spin_lock_with_atomic_cas_across_programs(device):
    x = np.random.rand(16 * 32).astype(np.float32)
    total, lock, count = np.zeros(1, np.float32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    locked_sum[(16,)](x, total, lock, count, BLOCK=32)
    np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=1e-5)
    assert lock[0] == 0 and count[0] == 1


@tl.jit
def tile_condition(X, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    if x > 0.5:
        y = x * 10.0
    else:
        y = -x
    tl.store(Out + offs, y)


def test_if_on_a_tile_is_a_select(device):
    x = np.random.rand(32).astype(np.float32)
    out = np.zeros_like(x)
    tile_condition[(1,)](x, out, BLOCK=32)  # no run-time branch: every device runs it
    np.testing.assert_allclose(out, np.where(x > 0.5, x.astype(np.float64) * 10, -x), rtol=1e-6)


@tl.jit
def constexpr_if(X, Out, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    if MODE == 1:
        x = x + 1.0
    tl.store(Out + offs, x)


def test_a_python_condition_still_selects_at_trace_time(device):
    x = np.random.rand(16).astype(np.float32)
    out = np.zeros_like(x)
    constexpr_if[(1,)](x, out, MODE=1, BLOCK=16)
    np.testing.assert_allclose(out, x + 1, rtol=1e-6)
    constexpr_if[(1,)](x, out, MODE=0, BLOCK=16)
    np.testing.assert_array_equal(out, x)


# ------------------------------------------------------------------------------ bad input
@tl.jit
def one_branch_only(X, Out):
    v = tl.load(X)
    if v > 0:
        w = v * 2.0
    tl.store(Out, w)


@tl.jit
def store_under_tile_if(X, Out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs)
    if x > 0:
        tl.store(Out + offs, x)


@tl.jit
def while_with_break(X, Out):
    i = 0
    while i < tl.load(X):
        i += 1
        if i == 3:
            break
    tl.store(Out, i)


@tl.jit
def dtype_change_in_branches(X, Out):
    v = tl.load(X)
    if v > 0:
        w = v * 2.0
    else:
        w = v.to(tl.int32)
    tl.store(Out, w)


@tl.jit
def shape_change_in_while(X, Out, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    i = 0
    while i < tl.load(X + 0).to(tl.int32):
        acc = tl.sum(acc, axis=0)
        i += 1
    tl.store(Out, acc)


@pytest.mark.parametrize("kernel, args, pattern", [
    (one_branch_only, {}, r"test_control_flow.py:\d+: `w` is assigned in only one branch"),
    (store_under_tile_if, {"BLOCK": 16},
     r"test_control_flow.py:\d+: `if` on a tile condition .* store"),
    (while_with_break, {}, r"test_control_flow.py:\d+: `break` in the `while` loop"),
    (dtype_change_in_branches, {}, r"`w` is f32 after one branch of the `if` and i32"),
    (shape_change_in_while, {"BLOCK": 16}, r"test_control_flow.py:\d+: the type of `acc` in the while loop .* does not settle"),
])
def test_bad_control_flow_is_a_tracing_error_naming_the_line(kernel, args, pattern, device):
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    with pytest.raises(tl.TracingError, match=pattern):
        kernel[(1,)](x, out, **args)


@tl.jit
def nested_in_a_loop(X, Out, Sel, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in tl.range(0, N):
        x = tl.load(X + k * BLOCK + offs)
        s = tl.load(Sel + k)
        if s > 0:
            j = 0
            while j < s:
                acc = acc + x
                j += 1
        else:
            acc = tl.maximum(acc, x)
    tl.store(Out + offs, acc)


def test_if_and_while_nested_in_a_tile_range_loop(device):
    n = 6
    x = np.random.standard_normal(n * 16).astype(np.float32)
    sel = np.array([2, 0, 1, 3, -1, 1], np.int32)
    out = np.zeros(16, np.float32)
    nested_in_a_loop[(1,)](x, out, sel, n, BLOCK=16)
    acc = np.zeros(16)
    for k in range(n):
        xs = x[k * 16:(k + 1) * 16].astype(np.float64)
        acc = acc + sel[k] * xs if sel[k] > 0 else np.maximum(acc, xs)
    np.testing.assert_allclose(out, acc, rtol=1e-5, atol=1e-5)


@tl.jit
def masked_values_through_an_if(X, Out, Flag, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N)  # inactive lanes past N
    if tl.load(Flag) > 0:
        y = x * 2.0
    else:
        y = x + 1.0
    tl.store(Out, tl.max(y, axis=0))  # the max of the active lanes only


def test_inactive_lanes_stay_inactive_through_an_if(device):
    x = -np.random.rand(16).astype(np.float32) - 1  # all negative: a 0 lane would win the max
    out = np.zeros(1, np.float32)
    for flag, f in ((1, lambda v: v * 2), (0, lambda v: v + 1)):
        masked_values_through_an_if[(1,)](x, out, np.array([flag], np.int32), 10, BLOCK=16)
        np.testing.assert_allclose(out[0], f(x[:10].astype(np.float64)).max(), rtol=1e-6)


@tl.jit
def exchanges_in_branches(X, Out, Flag, M: tl.constexpr, N: tl.constexpr):
    # Reductions and broadcasts in the blocks move data between threads (threadgroup memory and
    # barriers on the GPUs): legal because every thread of a program takes the same branch.
    pid = tl.program_id(0)
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    x = tl.load(X + pid * M * N + rows[:, None] * N + cols[None, :])
    total = 0.0
    k = 0
    while k < tl.load(Flag + pid):
        if k % 2 == 0:
            x = x - tl.max(x, axis=1)[:, None]
            total += tl.sum(x)
        else:
            x = x * 0.5 + tl.sum(x, axis=0)[None, :] / M
        k += 1
    tl.store(Out + pid * M * N + rows[:, None] * N + cols[None, :], x + total)


def test_reductions_and_broadcasts_inside_if_and_while(device):
    M, N = 8, 32
    x = np.random.standard_normal((3, M, N)).astype(np.float32)
    trips = np.array([0, 3, 4], np.int32)
    out = np.zeros_like(x)
    exchanges_in_branches[(3,)](x, out, trips, M=M, N=N)
    for p in range(3):
        v, total = x[p].astype(np.float64), 0.0
        for k in range(trips[p]):
            if k % 2 == 0:
                v = v - v.max(axis=1, keepdims=True)
                total += v.sum()
            else:
                v = v * 0.5 + v.sum(axis=0, keepdims=True) / M
        np.testing.assert_allclose(out[p], v + total, rtol=1e-4, atol=1e-4)


@tl.jit
def if_yields_a_dot(A, B, Out, Flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(A + offs[:, None] * BLOCK + offs[None, :])
    b = tl.load(B + offs[:, None] * BLOCK + offs[None, :])
    if tl.load(Flag) != 0:
        c = tl.dot(a, b)
    else:
        c = a + b
    tl.store(Out + offs[:, None] * BLOCK + offs[None, :], c)


def test_if_yields_a_dot_accumulator_or_an_element_wise_tile(device):
    a = np.random.rand(32, 32).astype(np.float32)
    b = np.random.rand(32, 32).astype(np.float32)
    out = np.zeros_like(a)
    for flag in (1, 0):
        if_yields_a_dot[(1,)](a, b, out, np.array([flag], np.int32), BLOCK=32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        np.testing.assert_allclose(out, a64 @ b64 if flag else a64 + b64, rtol=1e-4, atol=1e-4)
