"""Operators and literals inside kernels mean what they mean in Python/numpy (and none of the
original's bugs, reference/metile-spec.md §18): 2*x_f32 stays f32, `/` is true division, `//`
and `%` floor, unary minus, `**`, reflected operators, x[:, None] broadcasting, casts."""

import numpy as np
import pytest

import metile

BLOCK = 64


def _launch(kern, *args, n=BLOCK, **kw):
    kern[(metile.cdiv(n, BLOCK),)](*args, n, BLOCK=BLOCK, **kw)


@metile.kernel
def int_ops(A, B, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    a = metile.load(A + offs, mask=m)
    b = metile.load(B + offs, mask=m, other=1)
    results = [a + b, a - b, a * b, a // b, a % b, -a, ~a, abs(a), a & b, a | b, a ^ b,
               a << 2, a >> 1, 7 - a, 100 // b, 17 % b, a ** 3, 2 * a, a // 4, a % 5]
    for i, r in enumerate(results):
        metile.store(Out + i * N + offs, r, mask=m)


def test_integer_operators_follow_python(device):
    n = 50
    r = np.random.default_rng(0)
    a = r.integers(-100, 100, n).astype(np.int32)
    b = r.integers(-9, 10, n).astype(np.int32)
    b[b == 0] = 3
    out = np.zeros((20, n), np.int32)
    int_ops[(1,)](a, b, out, n, BLOCK=BLOCK)
    A, B = a.astype(np.int64), b.astype(np.int64)
    refs = [A + B, A - B, A * B, A // B, A % B, -A, ~A, np.abs(A), A & B, A | B, A ^ B,
            A << 2, A >> 1, 7 - A, 100 // B, 17 % B, A ** 3, 2 * A, A // 4, A % 5]
    for i, ref in enumerate(refs):
        np.testing.assert_array_equal(out[i], ref, err_msg=f"operator #{i}")


@metile.kernel
def float_ops(X, Y, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    x = metile.load(X + offs, mask=m)
    y = metile.load(Y + offs, mask=m, other=1.0)
    results = [x / y, x // y, x % y, -x, x ** 2, x ** y, 2 ** x, 1 / y, 3 - x, 2 * x, +x,
               metile.exp2(x), metile.log2(abs(x) + 1), metile.floor(x), metile.ceil(x),
               metile.sin(x), metile.cos(x), metile.rsqrt(abs(x) + 1), metile.sigmoid(x),
               metile.erf(x)]
    for i, r in enumerate(results):
        metile.store(Out + i * N + offs, r, mask=m)


def test_float_operators_follow_python(device):
    n = 60
    r = np.random.default_rng(1)
    x = (r.standard_normal(n) * 3).astype(np.float32)
    y = (r.standard_normal(n) * 2).astype(np.float32)
    y[np.abs(y) < 0.1] = 0.5
    out = np.zeros((20, n), np.float32)
    float_ops[(1,)](x, y, out, n, BLOCK=BLOCK)
    X, Y = x.astype(np.float64), y.astype(np.float64)
    from math import erf
    refs = [X / Y, X // Y, X % Y, -X, X ** 2, np.abs(X) ** Y * np.where(X < 0, np.nan, 1),
            2 ** X, 1 / Y, 3 - X, 2 * X, X, np.exp2(X), np.log2(np.abs(X) + 1), np.floor(X),
            np.ceil(X), np.sin(X), np.cos(X), 1 / np.sqrt(np.abs(X) + 1), 1 / (1 + np.exp(-X)),
            np.array([erf(v) for v in X])]
    for i, ref in enumerate(refs):
        if i in (1, 2):  # floor division and modulo are discontinuous: compare via identity
            continue
        ok = ~np.isnan(ref)
        np.testing.assert_allclose(out[i][ok], ref[ok], rtol=2e-5, atol=2e-5,
                                   err_msg=f"operator #{i}")
    q, rem = out[1], out[2]
    np.testing.assert_array_equal(q, np.floor(q))
    np.testing.assert_allclose(q * Y + rem, X, rtol=1e-5, atol=1e-4)
    assert np.all((rem == 0) | (np.sign(rem) == np.sign(Y))), "% takes the divisor's sign"


@metile.kernel
def int_true_div(A, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    a = metile.load(A + offs, mask=offs < N)
    metile.store(Out + offs, a / 4, mask=offs < N)


def test_int_true_division_is_float(device):
    a = np.arange(-10, 10, dtype=np.int32)
    out = np.zeros(20, np.float32)
    int_true_div[(1,)](a, out, 20, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, a / 4)
    assert "div" in int_true_div[(1,)].trace(a, out, 20, BLOCK=BLOCK).text


@metile.kernel
def literal_types(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    metile.store(Out + offs, 2 * x + 1, mask=offs < N)


@pytest.mark.parametrize("dtype,name", [(np.float32, "f32"), (np.float16, "f16"),
                                        (np.int32, "i32"), (np.uint8, "u8"), (np.int64, "i64")])
def test_literals_never_change_a_tile_dtype(device, dtype, name):
    x = np.arange(40).astype(dtype)
    out = np.zeros(40, dtype)
    literal_types[(1,)](x, out, 40, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, 2 * x + 1)
    text = literal_types[(1,)].trace(x, out, 40, BLOCK=BLOCK).text
    assert f"mul" in text and f": tile<64x{name}>" in text
    for line in text.splitlines():
        if " mul " in line or " add " in line and "ptr" not in line:
            assert f"x{name}>" in line, line


@metile.kernel
def outer(A, B, Out, M, N, BM: metile.constexpr, BN: metile.constexpr):
    rows = metile.arange(0, BM)
    cols = metile.arange(0, BN)
    a = metile.load(A + rows, mask=rows < M)
    b = metile.load(B + cols, mask=cols < N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    metile.store(Out + rows[:, None] * N + cols[None, :], a[:, None] * b[None, :], mask=mask)
    metile.store(Out + M * N + rows, metile.sum(a[:, None] * b[None, :], axis=1), mask=rows < M)
    metile.store(Out + M * N + M + cols, metile.max(a[:, None] + b[None, :], axis=0),
                 mask=cols < N)
    metile.store(Out + M * N + M + N + cols, metile.min(a[:, None] + b[None, :], axis=-2),
                 mask=cols < N)


def test_broadcasting_with_none_indexing_and_axis_reductions(device):
    m, n = 5, 7
    a = np.random.randn(m).astype(np.float32)
    b = np.random.randn(n).astype(np.float32)
    out = np.zeros(m * n + m + 2 * n, np.float32)
    outer[(1,)](a, b, out, m, n, BM=8, BN=8)
    np.testing.assert_allclose(out[:m * n].reshape(m, n), np.outer(a, b), rtol=1e-6)
    A, B = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(out[m * n:m * n + m], np.outer(A, B).sum(1), rtol=1e-5, atol=1e-6)
    # masked-off rows are inactive (docs/semantics.md): the max/min over axis 0 skip them
    np.testing.assert_allclose(out[m * n + m:m * n + m + n], (A[:, None] + B).max(0), rtol=1e-6)
    np.testing.assert_allclose(out[m * n + m + n:], (A[:, None] + B).min(0), rtol=1e-6)


@metile.kernel
def casts(X, F16, I32, U8, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    x = metile.load(X + offs, mask=m)
    metile.store(F16 + offs, x.to("f16"), mask=m)
    metile.store(I32 + offs, metile.cast(x, metile.int32), mask=m)
    metile.store(U8 + offs, (x > 0).astype("u8"), mask=m)
    metile.store(Out + offs, metile.where(x > 0, x, 0), mask=m)
    metile.store(Out + N + offs, metile.full((BLOCK,), 2.5) + metile.zeros(BLOCK), mask=m)


def test_casts_and_constructors(device):
    x = (np.random.randn(30) * 10).astype(np.float32)
    f16 = np.zeros(30, np.float16)
    i32 = np.zeros(30, np.int32)
    u8 = np.zeros(30, np.uint8)
    out = np.zeros(60, np.float32)
    casts[(1,)](x, f16, i32, u8, out, 30, BLOCK=BLOCK)
    np.testing.assert_array_equal(f16, x.astype(np.float16))
    np.testing.assert_array_equal(i32, x.astype(np.int32))
    np.testing.assert_array_equal(u8, (x > 0).astype(np.uint8))
    np.testing.assert_array_equal(out[:30], np.where(x > 0, x, 0))
    np.testing.assert_array_equal(out[30:], 2.5)


@metile.kernel
def scalars(Out, a, b, c, d, e, f):
    metile.store(Out, a.to("f32"))
    metile.store(Out + 1, b.to("f32"))
    metile.store(Out + 2, c)
    metile.store(Out + 3, d.to("f32"))
    metile.store(Out + 4, (e + 0).to("f32"))
    metile.store(Out + 5, f.to("f32"))


def test_scalar_arguments(device):
    out = np.zeros(6, np.float32)
    big = 2**40 + 3
    scalars[(1,)](out, 7, np.int64(-5), np.float32(2.5), True, big, np.uint8(200))
    np.testing.assert_array_equal(out[:4], [7, -5, 2.5, 1])
    assert out[4] == np.float32(big)
    assert out[5] == 200
    text = scalars[(1,)].trace(out, 7, np.int64(-5), np.float32(2.5), True, big, np.uint8(200)).text
    assert "%a: i32, %b: i64, %c: f32, %d: bool, %e: i64, %f: u8" in text
    assert "%c: f32" in scalars[(1,)].trace(out, 1, 1, 2.5, 1, 1, 1).text  # Python float -> f32


@metile.kernel
def programs(Out):
    metile.store(Out + metile.program_id(0) + metile.program_id(1) * metile.num_programs(0),
                 metile.num_programs(0) * 100 + metile.num_programs(1))


def test_num_programs(device):
    out = np.zeros(12, np.int32)
    programs[(3, 4)](out)
    np.testing.assert_array_equal(out, 304)


def test_constexprs_with_postponed_annotations(device):
    import future_kernels
    assert future_kernels.scale.constexprs == ["FACTOR", "BLOCK"]
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    future_kernels.scale[(2,)](x, out, 100, FACTOR=3, BLOCK=64)
    np.testing.assert_array_equal(out, 3 * x)


@metile.kernel
def defaults(X, Out, N, BLOCK: metile.constexpr = 32, SCALE: metile.constexpr = 2.0):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m) * SCALE, mask=m)


def test_constexpr_defaults_and_wrappers(device):
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    defaults[(4,)](x, out, 100)
    np.testing.assert_array_equal(out, 2 * x)
    defaults[(2,)](x, out, 100, BLOCK=metile.constexpr(64), SCALE=0.5)
    np.testing.assert_array_equal(out, 0.5 * x)
    defaults[(2,)](x, out, N=100, BLOCK=64)   # a runtime argument by keyword
    np.testing.assert_array_equal(out, 2 * x)


@metile.kernel
def sized_roles(X, Out, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs)
    with metile.simdgroup_role(0, num_roles=2, num_sgs=2):    # simdgroups 0-1
        metile.store(Out + offs, x + 1)
    with metile.simdgroup_role(1, num_roles=2, num_sgs=6):    # simdgroups 2-7
        metile.store(Out + offs, x + 2)


def test_simdgroup_roles_with_sizes_take_consecutive_ranges(device):
    x = np.zeros(256, np.float32)
    out = np.zeros(256, np.float32)
    sized_roles[(1,)](x, out, BLOCK=256)
    np.testing.assert_array_equal(out[:64], 1)
    np.testing.assert_array_equal(out[64:], 2)
    text = sized_roles[(1,)].trace(x, out, BLOCK=256).text
    assert "first_sg = 0" in text and "first_sg = 2" in text
