"""Loop-carried variables of tile_range loops are found from the kernel's source: several at
once, through any op (where, unary ops, casts), scalars and tiles, nested loops, aliases of
tile_range, closures; literal inits that become tiles; and clear errors otherwise."""

import inspect

import numpy as np
import pytest

import metile
import metile as mt
from metile import tile_range as trange

HERE = __file__
my_range = metile.tile_range


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, l in enumerate(lines) if text in l)


@metile.kernel
def stats(X, Out, N, BLOCK: metile.constexpr):
    s = 0.0
    ss = 0.0
    mx = -1e38
    mn = 1e38
    count = 0
    total = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        offs = i + metile.arange(0, BLOCK)
        valid = offs < N
        x = metile.load(X + offs, mask=valid)
        s = s + x
        ss += x * x
        mx = metile.where(valid & (x > mx), x, mx)
        mn = -metile.maximum(-mn, metile.where(valid, -x, -1e38))
        count = count + 1
        total = total + metile.sum(x)
    metile.store(Out, metile.sum(s))
    metile.store(Out + 1, metile.sum(ss))
    metile.store(Out + 2, metile.max(mx))
    metile.store(Out + 3, metile.min(mn))
    metile.store(Out + 4, count.to("f32"))
    metile.store(Out + 5, total)


@pytest.mark.parametrize("n", [0, 1, 100, 256, 1000])
def test_several_carried_values_through_any_op(device, n):
    x = np.random.default_rng(n).standard_normal(max(n, 1)).astype(np.float32)
    out = np.zeros(6, np.float32)
    stats[(1,)](x, out, n, BLOCK=64)
    x = x[:n].astype(np.float64)
    iters = -(-n // 64)
    expect = [x.sum(), (x * x).sum(), x.max() if n else -1e38, x.min() if n else 1e38, iters,
              x.sum()]
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-4)


def test_carried_types_are_inferred_from_the_body(device):
    x = np.zeros(8, np.float32)
    text = stats[(1,)].trace(x, x, 8, BLOCK=64).text
    loop = next(l for l in text.splitlines() if " = for " in l)
    # Carried in sorted order: count (an i32 scalar), mn, mx, s, ss (f32 tiles: their literal
    # inits were broadcast) and total (an f32 scalar).
    assert "-> (i32, tile<64xf32>, tile<64xf32>, tile<64xf32>, tile<64xf32>, f32)" in loop, loop


@metile.kernel
def grid_sum(X, Out, R, C, BR: metile.constexpr, BC: metile.constexpr):
    """Sum of a R x C matrix with nested device loops over row and column blocks."""
    acc = metile.zeros((BR, BC))
    rows_seen = 0
    for r in trange(0, R, BR):
        rows = r + metile.arange(0, BR)
        for c in mt.tile_range(0, C, BC):
            cols = c + metile.arange(0, BC)
            mask = (rows[:, None] < R) & (cols[None, :] < C)
            acc = acc + metile.load(X + rows[:, None] * C + cols[None, :], mask=mask)
        rows_seen = rows_seen + metile.sum((rows < R).to("i32"))
    metile.store(Out, metile.sum(acc))
    metile.store(Out + 1, rows_seen.to("f32"))


@pytest.mark.parametrize("r,c", [(1, 1), (7, 9), (32, 64), (50, 33)])
def test_nested_loops_and_aliases(device, r, c):
    x = np.random.default_rng(3).standard_normal((r, c)).astype(np.float32)
    out = np.zeros(2, np.float32)
    grid_sum[(1,)](x, out, r, c, BR=8, BC=16)
    np.testing.assert_allclose(out, [x.astype(np.float64).sum(), r], rtol=1e-5, atol=1e-4)


@metile.kernel
def python_loop_around(X, Out, N, BLOCK: metile.constexpr, REPS: metile.constexpr):
    for rep in range(REPS):                  # unrolled at trace time
        acc = metile.zeros(BLOCK)
        for i in my_range(0, N, BLOCK):      # a module-level alias
            offs = i + metile.arange(0, BLOCK)
            acc = acc + metile.load(X + offs, mask=offs < N) * (rep + 1)
        metile.store(Out + rep, metile.sum(acc))


def test_device_loops_inside_python_loops(device):
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(3, np.float32)
    python_loop_around[(1,)](x, out, 100, BLOCK=32, REPS=3)
    np.testing.assert_allclose(out, [x.sum(), 2 * x.sum(), 3 * x.sum()])


def make_closure_kernel(scale):
    @metile.kernel
    def scaled_sum(X, Out, N, BLOCK: metile.constexpr):
        acc = 0.0
        for i in metile.tile_range(N // N - 1 + 0, N, step=BLOCK):
            offs = i + metile.arange(0, BLOCK)
            acc = acc + metile.load(X + offs, mask=offs < N) * scale
        metile.store(Out, metile.sum(acc))
    return scaled_sum


def test_closures_and_keyword_step(device):
    k = make_closure_kernel(3.0)
    x = np.arange(50, dtype=np.float32)
    out = np.zeros(1, np.float32)
    k[(1,)](x, out, 50, BLOCK=16)
    assert out[0] == 3 * x.sum()


@metile.kernel
def pointer_walk(X, Out, N, BLOCK: metile.constexpr):
    # A value only used inside the loop (the running offset) is carried too; one that is
    # recomputed every iteration (`offs`) is not.
    base = 0
    acc = metile.zeros(BLOCK, dtype="i32")
    for _ in metile.tile_range(N):
        offs = base + metile.arange(0, BLOCK)
        acc = acc + metile.load(X + offs)
        base = base + BLOCK
    metile.store(Out + metile.arange(0, BLOCK), acc)


def test_single_argument_tile_range_and_running_offsets(device):
    x = np.arange(4 * 16, dtype=np.int32)
    out = np.zeros(16, np.int32)
    pointer_walk[(1,)](x, out, 4, BLOCK=16)
    np.testing.assert_array_equal(out, x.reshape(4, 16).sum(0))
    text = pointer_walk[(1,)].trace(x, out, 4, BLOCK=16).text
    assert "-> (tile<16xi32>, i32)" in text


@metile.kernel
def dtype_change(X, Out, N, BLOCK: metile.constexpr):
    acc = metile.zeros(BLOCK, dtype="f16")
    for i in metile.tile_range(0, N, BLOCK):
        x = metile.load(X + i + metile.arange(0, BLOCK))
        acc = acc + x
    metile.store(Out + metile.arange(0, BLOCK), acc)


def test_a_genuine_dtype_change_is_an_error_at_the_assignment(device):
    x = np.zeros(64, np.float32)
    with pytest.raises(metile.TracingError) as e:
        dtype_change[(1,)](x, x, 64, BLOCK=16)
    msg = str(e.value)
    assert f"{HERE}:{line_of(dtype_change.fn, 'acc = acc + x')}" in msg
    assert "enters the tile_range loop" in msg and "f16" in msg and "f32" in msg
    assert 'to("f16")' in msg


@metile.kernel
def f32_scalar_sums_f16(X, Out, N, BLOCK: metile.constexpr):
    acc = metile.scalar(0.0)
    for i in metile.tile_range(0, N, BLOCK):
        acc = acc + metile.load(X + i + metile.arange(0, BLOCK)).to("f16")
    metile.store(Out + metile.arange(0, BLOCK), acc)


def test_a_scalar_widened_to_a_tile_keeps_its_dtype(device):
    # While acc is a scalar, acc + x_f16 is f16 (a tile's dtype wins over a scalar's); once the
    # loop carries acc as a tile it is f32 + f16 = f32, so the sums stay in f32.
    x = (1 + np.arange(256) % 7 * 2.0**-10).astype(np.float32)
    out = np.zeros(16, np.float32)
    f32_scalar_sums_f16[(1,)](x, out, 256, BLOCK=16)
    ref = x.astype(np.float16).astype(np.float64).reshape(-1, 16).sum(0)
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    text = f32_scalar_sums_f16[(1,)].trace(x, out, 256, BLOCK=16).text
    loop = next(l for l in text.splitlines() if " = for " in l)
    assert "-> (tile<16xf32>)" in loop, loop


@metile.kernel
def undefined_before(X, Out, N, BLOCK: metile.constexpr):
    for i in metile.tile_range(0, N, BLOCK):
        last = metile.load(X + i + metile.arange(0, BLOCK))
    metile.store(Out + metile.arange(0, BLOCK), last)


@metile.kernel
def loop_variable_after(X, N, BLOCK: metile.constexpr):
    for i in metile.tile_range(0, N, BLOCK):
        metile.store(X + i + metile.arange(0, BLOCK), 1.0)
    metile.store(X + i, 2.0)


@metile.kernel
def breaks(X, N, BLOCK: metile.constexpr):
    for i in metile.tile_range(0, N, BLOCK):
        if BLOCK > 4:
            break
        metile.store(X + i, 1.0)


@metile.kernel
def inner_python_break_is_fine(X, N, BLOCK: metile.constexpr):
    for i in metile.tile_range(0, N, BLOCK):
        for j in range(10):
            if j == 2:
                break
            metile.store(X + i + j, 1.0)


def test_clear_errors_for_values_that_cannot_escape(device):
    x = np.zeros(64, np.float32)
    with pytest.raises(metile.TracingError) as e:
        undefined_before[(1,)](x, x, 64, BLOCK=16)
    assert "`last` is assigned in the tile_range loop" in str(e.value)
    assert "no value before the loop" in str(e.value)
    with pytest.raises(metile.TracingError, match="loop variable `i` exists only inside the loop"):
        loop_variable_after[(1,)](x, 64, BLOCK=16)
    with pytest.raises(metile.TracingError) as e:
        breaks[(1,)](x, 64, BLOCK=16)
    break_line = line_of(breaks.fn, "break\n")
    assert f"{HERE}:{break_line}" in str(e.value)
    inner_python_break_is_fine[(1,)](x, 64, BLOCK=16)
    assert (x[[0, 1, 16, 17]] == 1).all() and x[2] == 0


@metile.kernel
def conditional_update(X, Out, N, BLOCK: metile.constexpr, SQUARE: metile.constexpr):
    acc = 0
    for i in metile.tile_range(0, N, BLOCK):
        x = metile.load(X + i + metile.arange(0, BLOCK))
        if SQUARE:
            acc = acc + x * x
        else:
            acc = acc + x
    metile.store(Out, metile.sum(acc))


def test_int_literal_init_becomes_a_float_tile(device):
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(1, np.float32)
    conditional_update[(1,)](x, out, 32, BLOCK=16, SQUARE=True)
    assert out[0] == (x * x).sum()
    conditional_update[(1,)](x, out, 32, BLOCK=16, SQUARE=False)
    assert out[0] == x.sum()


def _helper_loop(X, N, BLOCK):
    acc = metile.zeros(BLOCK)
    for i in metile.tile_range(0, N, BLOCK):   # in a helper called by name: carried too
        acc = acc + _inner_helper(X, i, BLOCK)
    return acc


def _inner_helper(X, i, BLOCK):
    parts = [0.0, 0.0]
    for j in metile.tile_range(i, i + BLOCK, BLOCK // 2):
        parts[0] += metile.sum(metile.load(X + j + metile.arange(0, BLOCK // 2)))
    return metile.load(X + i + metile.arange(0, BLOCK)) + parts[0] * 0.0 + parts[1]


@metile.kernel
def uses_helper(X, Out, N, BLOCK: metile.constexpr):
    metile.store(Out + metile.arange(0, BLOCK), _helper_loop(X, N, BLOCK))


def test_loops_in_helpers_carry_their_variables(device):
    x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    out = np.zeros(16, np.float32)
    uses_helper[(1,)](x, out, 64, BLOCK=16)
    np.testing.assert_allclose(out, x.astype(np.float64).reshape(4, 16).sum(0), rtol=1e-6,
                               atol=1e-6)


HELPERS = {"loop": _helper_loop}


@metile.kernel
def uses_helper_through_a_dict(X, Out, N, BLOCK: metile.constexpr):
    metile.store(Out + metile.arange(0, BLOCK), HELPERS["loop"](X, N, BLOCK))


def test_loops_in_unresolvable_helpers_explain_the_limit(device):
    x = np.zeros(64, np.float32)
    with pytest.raises(metile.InvalidProgramError) as e:
        uses_helper_through_a_dict[(1,)](x, x, 64, BLOCK=16)
    assert "not in scope" in str(e.value) and "calls by name" in str(e.value)


@metile.kernel
def list_accumulators(X, Out, N, PARTS: metile.constexpr, BLOCK: metile.constexpr):
    # Element o of a Python list is carried: a scalar literal, a traced scalar and a tile.
    acc = [0.0, metile.scalar(0.0), metile.zeros(BLOCK)]
    count = [0]
    for i in metile.tile_range(0, N, BLOCK):
        offs = i + metile.arange(0, BLOCK)
        x = metile.load(X + offs, mask=offs < N)
        for o in range(PARTS):
            acc[o] = acc[o] + x * (o + 1)
        count[0] += 1
    metile.store(Out + metile.arange(0, BLOCK), acc[0] + acc[1] + acc[2])
    metile.store(Out + BLOCK, count[0].to("f32"))


@pytest.mark.parametrize("n", [0, 5, 100])
def test_list_elements_are_carried(device, n):
    x = np.random.default_rng(n).standard_normal(max(n, 1)).astype(np.float32)
    out = np.zeros(17, np.float32)
    list_accumulators[(1,)](x, out, n, PARTS=3, BLOCK=16)
    xs = np.zeros(-(-n // 16) * 16)
    xs[:n] = x[:n]
    np.testing.assert_allclose(out[:16], 6 * xs.reshape(-1, 16).sum(0) if n else 0, rtol=1e-5,
                               atol=1e-5)
    assert out[16] == -(-n // 16)


def _accumulate(acc, x, scale):
    # Assigns the elements of a list the kernel's loop carries.
    for o in range(len(acc)):
        acc[o] = acc[o] + x * (o + 1) * scale


def _readonly_sum(parts):
    return parts[0] + parts[1]


@metile.kernel
def list_updated_by_helper(X, Out, N, BLOCK: metile.constexpr):
    acc = [metile.zeros(BLOCK), metile.zeros(BLOCK), metile.zeros(BLOCK)]
    pair = (metile.zeros(BLOCK), 0.0)  # a tuple rebound whole in the loop
    consts = [2.0, 3.0]  # a list of Python numbers passed to a helper stays Python numbers
    shape = [BLOCK]
    for i in metile.tile_range(0, N, BLOCK):
        offs = i + metile.arange(0, BLOCK)
        x = metile.load(X + offs, mask=offs < N, other=0.0)
        _accumulate(acc, x, _readonly_sum(consts) - 4.0)
        pair = (pair[0] + x * x, pair[1] + 1.0)
        acc[0] = acc[0] + metile.zeros(shape)
    metile.store(Out + metile.arange(0, BLOCK), acc[0] + acc[1] + acc[2] + pair[0])
    metile.store(Out + BLOCK, pair[1])


@pytest.mark.parametrize("n", [0, 7, 100])
def test_lists_passed_to_helpers_and_tuples_are_carried(device, n):
    x = np.random.default_rng(n + 1).standard_normal(max(n, 1)).astype(np.float32)
    out = np.zeros(17, np.float32)
    list_updated_by_helper[(1,)](x, out, n, BLOCK=16)
    xs = np.zeros(-(-n // 16) * 16)
    xs[:n] = x[:n]
    rows = xs.reshape(-1, 16)
    ref = (6 * rows.sum(0) + (rows * rows).sum(0)) if n else np.zeros(16)
    np.testing.assert_allclose(out[:16], ref, rtol=1e-5, atol=1e-5)
    assert out[16] == -(-n // 16)


@metile.kernel
def list_grows(X, Out, N, BLOCK: metile.constexpr):
    acc = [metile.zeros(BLOCK)]
    for i in metile.tile_range(0, N, BLOCK):
        acc[0] = acc[0] + metile.load(X + i + metile.arange(0, BLOCK))
        acc.append(acc[0])
    metile.store(Out + metile.arange(0, BLOCK), acc[0])


def test_a_carried_list_keeps_its_length(device):
    x = np.zeros(64, np.float32)
    with pytest.raises(metile.TracingError, match="keeps its length") as e:
        list_grows[(1,)](x, x, 64, BLOCK=16)
    assert f"{HERE}:" in str(e.value)


@metile.kernel
def count_steps(Out, A, B, S):
    c = 0.0
    for _ in metile.tile_range(A, B, S):
        c = c + 1.0
    metile.store(Out, c)


def test_runtime_zero_step_is_an_error_on_every_device(device):
    """A step of 0 at run time is the same DEVICE error naming the loop on every device (interp
    and cpu report it as they run; GPU devices through the hidden error flag)."""
    with metile.use_device(device):
        out = metile.Buffer.zeros((1,))
        count_steps[(1,)](out, 0, 10, 3)
        assert out.numpy()[0] == 4
        for start in (0, 20):
            with pytest.raises(metile.DeviceError, match="step"):
                count_steps[(1,)](out, start, 10, 0)
                metile.synchronize()
        count_steps[(1,)](out, 10, 0, -2)          # still runs correctly afterwards
        assert out.numpy()[0] == 5
