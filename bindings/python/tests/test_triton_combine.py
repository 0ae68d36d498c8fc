"""triton.language's bitcasts, dtype objects and shape/combine names (issue 37 item 3) on every
device, against numpy: bit-exact where the op only moves or reinterprets bits, exact integer
(or integer-valued float) arithmetic where a combine function computes. Slow devices run one
dtype of each kernel."""

import numpy as np
import pytest

import metile
import metile as tl


def _bits(a):
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _same_bits(got, want):
    np.testing.assert_array_equal(_bits(np.ascontiguousarray(got)),
                                  _bits(np.ascontiguousarray(want)))


def _first_dtype_off_interp(device, dtype, first="f32"):
    # Compiling these kernels costs seconds; their other dtypes trace the same compositions.
    if device.name != "interp" and dtype != first:
        pytest.skip("the other dtypes run on interp")


# ---------------------------------------------------------------------------------- bitcast
@tl.jit
def bitcasts(X, XI, H, B, Q, O32, OU, OF, OB, OH, OQ):
    o32 = tl.arange(0, 32)
    o16 = tl.arange(0, 16)
    o8 = tl.arange(0, 256)
    x = tl.load(X + o32)
    tl.store(O32 + o32, x.to(tl.int32, bitcast=True))
    tl.store(OU + o32, tl.cast(x, tl.uint32, bitcast=True))
    tl.store(OF + o32, tl.load(XI + o32).to(tl.float32, bitcast=True))
    tl.store(OB + o16, tl.load(H + o16).to(tl.bfloat16, bitcast=True))
    tl.store(OH + o16, tl.load(B + o16).to(tl.float16, bitcast=True))
    q = tl.load(Q + o8)
    tl.store(OQ + o8, q.to(tl.float8e4nv, bitcast=True).to("i8", bitcast=True))


def test_bitcast_keeps_every_bit(device):
    x = np.random.standard_normal(32).astype(np.float32)
    x[:6] = [-0.0, np.inf, -np.inf, 1e-45, np.float32(3.4e38), -2.5]
    xi = np.random.randint(-2**31, 2**31, 32, dtype=np.int64).astype(np.int32)
    xi[:4] = np.array([0x7FC12345, 0x80000000, 0x7F800000, 1], np.uint32).view(np.int32)
    xi[4:] &= ~np.int32(0x7F800000) | np.int32(0x3F800000)  # keep the rest finite
    # 16-bit patterns whose other reading is finite too (|x| < 2: exponent bits below 0x80)
    h = np.random.uniform(-1.9, 1.9, 16).astype(np.float16)
    h[0] = -0.0
    b = np.random.randint(0, 0x3F80, 16).astype(np.uint16)
    b[1::2] |= 0x8000  # negative halves
    q = np.arange(256, dtype=np.uint8)
    q[[0x7F, 0xFF]] = [0x42, 0xC2]  # e4m3's two NaN bytes have no single value to come back as
    outs = [np.zeros(32, np.int32), np.zeros(32, np.uint32), np.zeros(32, np.float32)]
    ob = metile.Buffer(data=np.zeros(16, np.uint16), dtype="bf16")
    bb = metile.Buffer(data=b, dtype="bf16")
    oh, oq = np.zeros(16, np.float16), np.zeros(256, np.int8)
    bitcasts[(1,)](x, xi, h, bb, q, *outs, ob, oh, oq)
    _same_bits(outs[0], x.view(np.int32))
    _same_bits(outs[1], x.view(np.uint32))
    _same_bits(outs[2], xi.view(np.float32))
    _same_bits(ob.numpy(), h.view(np.uint16))
    _same_bits(oh, b.view(np.float16))
    _same_bits(oq, q.view(np.int8))


def test_bitcast_refuses_other_widths_bool_and_pointers():
    @tl.jit
    def wide(X):
        x = tl.load(X + tl.arange(0, 8))
        tl.store(X + tl.arange(0, 8), x.to(tl.float16, bitcast=True).to(tl.float32))

    @tl.jit
    def boolean(X):
        x = tl.load(X + tl.arange(0, 8))
        tl.store(X + tl.arange(0, 8), (x > 0).to(tl.int8, bitcast=True).to(tl.float32))

    @tl.jit
    def pointer(X):
        tl.store(X, tl.cast(X, tl.int64, bitcast=True).to(tl.float32))

    a = np.zeros(8, np.float32)
    with metile.use_device("interp"):
        with pytest.raises(metile.TracingError,
                           match=r"test_triton_combine.py:\d+: bitcast from f32 \(32 bits\) to f16 "
                                 r"\(16 bits\).*same width"):
            wide[(1,)](a)
        with pytest.raises(metile.TracingError, match=r"bitcast from bool.*neither may be bool"):
            boolean[(1,)](a)
        with pytest.raises(metile.TracingError, match=r"bitcast cannot reinterpret the pointer"):
            pointer[(1,)](a)


# ----------------------------------------------------------------------------- dtype objects
@tl.jit
def dtype_facts(X, P, Out):
    x = tl.load(X)
    h = x.to(tl.float16)
    i = x.to(tl.int32)
    facts = [X.dtype.element_ty == tl.float32, X.dtype.is_ptr(), x.dtype.is_floating(),
             not x.dtype.is_int(), h.dtype.is_fp16(), not h.dtype.is_bf16(), i.dtype.is_int(),
             x.dtype.primitive_bitwidth == 32, h.dtype.primitive_bitwidth == 16,
             P.dtype.element_ty == tl.int64, i.dtype == tl.int32, i.dtype == "i32",
             (x > 0).dtype.primitive_bitwidth == 1, X.dtype == tl.pointer_type(tl.float32)]
    for k in tl.static_range(len(facts)):
        tl.store(Out + k, 1 if facts[k] else 0)
    # a dtype object works wherever a dtype name does
    tl.store(Out + len(facts), tl.sum(tl.zeros((4,), x.dtype).to(i.dtype)) + 7)


def test_dtype_objects_answer_tritons_questions():
    assert metile.float32 == "f32" and metile.float16.is_fp16() and metile.bfloat16.is_bf16()
    assert metile.int8.is_int_signed() and metile.uint8.primitive_bitwidth == 8
    assert str(metile.float32.name) == "fp32" and metile.int1 == metile.bool_
    with pytest.raises(AttributeError, match="not a pointer dtype"):
        metile.float32.element_ty
    out = np.zeros(15, np.int32)
    with metile.use_device("interp"):
        dtype_facts[(1,)](np.ones(1, np.float32), np.zeros(1, np.int64), out)
    assert out[:14].tolist() == [1] * 14
    assert out[14] == 7


# ----------------------------------------------------------- split, join, interleave, flip
@tl.jit
def pairs(X, P, J, I, F, S0, S1, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    y = tl.load(X + N + offs)
    rc = tl.arange(0, N)[:, None] * 2 + tl.arange(0, 2)[None, :]
    tl.store(J + rc, tl.join(x, y))
    tl.store(I + tl.arange(0, 2 * N), tl.interleave(x, y))
    a, b = tl.split(tl.load(P + rc))
    tl.store(S0 + offs, a)
    tl.store(S1 + offs, b)
    tl.store(F + offs, tl.flip(x))


_SPECIAL = {"f32": [-0.0, np.inf, -np.inf, np.nan, 1e-45], "f16": [-0.0, np.inf, -np.inf, 6e-8],
            "bf16": [-0.0, np.inf, -np.inf], "i32": [-2**31, 2**31 - 1, -1, 0]}


def _values(dtype, n):
    if dtype in _STORED:  # random bit patterns
        v = np.random.randint(0, 256 ** _STORED[dtype].itemsize, n, dtype=np.uint64)
        v = v.astype(np.dtype(f"u{_STORED[dtype].itemsize}")).view(_STORED[dtype])
        if dtype == "f8e4m3":
            v[(v & 0x7F) == 0x7F] = 0x80  # the NaN bytes come back as one NaN; -0.0 instead
        return (v & 1).astype(np.bool_) if dtype == "bool" else v
    if dtype == "i32":
        v = np.random.randint(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    else:
        v = np.random.standard_normal(n).astype(np.float32)
    v[:len(_SPECIAL[dtype])] = _SPECIAL[dtype]
    if dtype == "f32" and n > 8:
        v[5] = np.array([0x7FC0BEEF], np.uint32).view(np.float32)[0]  # a NaN payload
    if dtype == "f16":
        return v.astype(np.float16)
    if dtype == "bf16":
        return (v.view(np.uint32) >> 16).astype(np.uint16)
    return v


_STORED = {"i64": np.dtype(np.int64), "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8),
           "f8e4m3": np.dtype(np.uint8), "bool": np.dtype(np.uint8)}


def _arg(v, dtype):
    return metile.Buffer(data=v, dtype=dtype) if dtype in ("bf16", "f8e4m3") else v


def _read(a):
    return a.numpy() if isinstance(a, metile.Buffer) else a


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32", "i64", "i8", "u8", "f8e4m3",
                                   "bool"])
def test_split_join_interleave_flip_are_exact(device, dtype):
    # each dtype takes its own route through the integer bits; the 16- and 32-bit ones on every
    # device, the rest on interp
    if dtype in _STORED:
        _first_dtype_off_interp(device, dtype)
    n = 16
    x = _values(dtype, 2 * n)
    p = np.random.permutation(_values(dtype, 2 * n))
    outs = [np.zeros_like(x), np.zeros_like(x), np.zeros(n, x.dtype), np.zeros(n, x.dtype),
            np.zeros(n, x.dtype)]
    args = [_arg(o, dtype) for o in outs]
    pairs[(1,)](_arg(x, dtype), _arg(p, dtype), *args, N=n)
    j, i, f, s0, s1 = (_read(a) for a in args)
    xa, ya = x[:n], x[n:]
    _same_bits(j, np.stack([xa, ya], 1).ravel())
    _same_bits(i, np.stack([xa, ya], 1).ravel())
    _same_bits(f, xa[::-1])
    _same_bits(s0, p[0::2])
    _same_bits(s1, p[1::2])


# ------------------------------------------------------------ 2-D flips, sorts and reshapes
@tl.jit
def grid2d(X, V, FR, FC, SR, SC, SD, SV, E, M: tl.constexpr, N: tl.constexpr):
    rc = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(X + rc)
    tl.store(FR + rc, tl.flip(x, 0))
    tl.store(FC + rc, x.flip())
    tl.store(SR + rc, tl.sort(x, 0))
    tl.store(SC + rc, tl.sort(x))
    tl.store(SD + rc, x.sort(1, descending=True))
    v = tl.load(V + tl.arange(0, 2 * N))
    tl.store(SV + tl.arange(0, 2 * N), tl.sort(v, descending=True))
    col = tl.expand_dims(tl.sum(x, 1), 1)        # [M, 1]
    row = tl.expand_dims(tl.arange(0, N), 0)      # [1, N]
    tl.store(E + tl.arange(0, M * N), tl.ravel(col + row))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_flip_sort_expand_ravel_2d(device, dtype):
    _first_dtype_off_interp(device, np.dtype(dtype).name, "float32")
    m, n = 4, 8
    if dtype == np.int32:
        x = np.random.randint(-1000, 1000, (m, n)).astype(dtype)
        v = np.random.randint(-1000, 1000, 2 * n).astype(dtype)
    else:
        x = np.random.standard_normal((m, n)).astype(dtype)
        v = np.random.standard_normal(2 * n).astype(dtype)
        x[0, :3] = [np.inf, -np.inf, -0.0]
    x[1, 2] = x[1, 5]  # a tie
    outs = [np.zeros_like(x) for _ in range(5)] + [np.zeros_like(v), np.zeros((m, n), dtype)]
    grid2d[(1,)](x, v, *outs, M=m, N=n)
    fr, fc, sr, sc, sd, sv, e = outs
    _same_bits(fr, x[::-1])
    _same_bits(fc, x[:, ::-1])
    np.testing.assert_array_equal(sr, np.sort(x, 0))
    np.testing.assert_array_equal(sc, np.sort(x, 1))
    np.testing.assert_array_equal(sd, -np.sort(-x, 1))
    np.testing.assert_array_equal(sv, np.sort(v)[::-1])
    with np.errstate(invalid="ignore"):  # inf + -inf
        total = x.astype(np.float64).sum(1, keepdims=True) + np.arange(n)
    np.testing.assert_allclose(e.astype(np.float64), total,
                               rtol=2e-3 if dtype == np.float16 else 1e-5)


# ---------------------------------------------------------------- user combine functions
@tl.jit
def _argmax(v0, i0, v1, i1):
    take = (v1 > v0) | ((v1 == v0) & (i1 < i0))
    return tl.where(take, v1, v0), tl.where(take, i1, i0)


def _add(a, b):
    return a + b


def _both(a, b):
    return a, b


def _sum_both(a0, b0, a1, b1):
    return a0 + a1 + b0 + b1


def _affine(a0, b0, a1, b1):
    # x -> a * x + b; (a0, b0) first, then (a1, b1): associative, not commutative
    return a0 * a1, b0 * a1 + b1


@tl.jit
def combines(X, A, B, RV, RI, CV, CI, W, K, SR, SC, RA, RB, SA, SB, XS, XC,
             M: tl.constexpr, N: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(X + rows * N + cols)
    v, i = tl.reduce((x, tl.broadcast_to(cols, (M, N))), 1, _argmax)
    tl.store(RV + tl.arange(0, M), v)
    tl.store(RI + tl.arange(0, M), i)
    cv, ci = tl.reduce((x, tl.broadcast_to(rows, (M, N))), 0, _argmax)
    tl.store(CV + tl.arange(0, N), cv)
    tl.store(CI + tl.arange(0, N), ci)
    tl.store(W, tl.reduce(x, None, _add))
    tl.store(K + tl.arange(0, M)[:, None], x.reduce(1, _add, keep_dims=True))
    tl.store(SR + rows * N + cols, tl.associative_scan(x, 1, _add))
    tl.store(SC + rows * N + cols, tl.associative_scan(x, 0, _add, reverse=True))
    a = tl.load(A + tl.arange(0, N))
    b = tl.load(B + tl.arange(0, N))
    ra, rb = tl.reduce((a, b), 0, _affine)
    tl.store(RA, ra)
    tl.store(RB, rb)
    sa, sb = tl.associative_scan((a, b), 0, _affine)
    tl.store(SA + tl.arange(0, N), sa)
    tl.store(SB + tl.arange(0, N), sb)
    bits = tl.load(A + tl.arange(0, N)) * 7919 + b
    tl.store(XS, tl.xor_sum(bits))
    tl.store(XC + tl.arange(0, N), tl.xor_sum(x.to(tl.int32), 0))


def test_reduce_and_scan_with_user_combines(device):
    m, n = 4, 8
    x = np.random.randint(-50, 50, (m, n)).astype(np.float32)  # integer-valued: sums are exact
    x[2, 1] = x[2, 6] = 60  # a tie: the first index wins
    a = np.random.choice([-1, 1], n).astype(np.int32)
    b = np.random.randint(-5, 6, n).astype(np.int32)
    out = dict(RV=np.zeros(m, np.float32), RI=np.zeros(m, np.int32), CV=np.zeros(n, np.float32),
               CI=np.zeros(n, np.int32), W=np.zeros(1, np.float32), K=np.zeros(m, np.float32),
               SR=np.zeros((m, n), np.float32), SC=np.zeros((m, n), np.float32),
               RA=np.zeros(1, np.int32), RB=np.zeros(1, np.int32), SA=np.zeros(n, np.int32),
               SB=np.zeros(n, np.int32), XS=np.zeros(1, np.int32), XC=np.zeros(n, np.int32))
    combines[(1,)](x, a, b, *out.values(), M=m, N=n)
    np.testing.assert_array_equal(out["RV"], x.max(1))
    np.testing.assert_array_equal(out["RI"], x.argmax(1))
    np.testing.assert_array_equal(out["CV"], x.max(0))
    np.testing.assert_array_equal(out["CI"], x.argmax(0))
    assert out["W"][0] == x.sum()
    np.testing.assert_array_equal(out["K"], x.sum(1))
    np.testing.assert_array_equal(out["SR"], np.cumsum(x, 1))
    np.testing.assert_array_equal(out["SC"], np.cumsum(x[::-1], 0)[::-1])
    ca, cb = [], []
    acc = (1, 0)
    for k in range(n):
        acc = (acc[0] * int(a[k]), acc[1] * int(a[k]) + int(b[k])) if k else (int(a[0]), int(b[0]))
        ca.append(acc[0])
        cb.append(acc[1])
    assert (out["RA"][0], out["RB"][0]) == (ca[-1], cb[-1])
    np.testing.assert_array_equal(out["SA"], ca)
    np.testing.assert_array_equal(out["SB"], cb)
    assert out["XS"][0] == np.bitwise_xor.reduce(a * 7919 + b)
    np.testing.assert_array_equal(out["XC"], np.bitwise_xor.reduce(x.astype(np.int32), 0))


# --------------------------------------------------------------------------------- bad input
def _fails(kernel, match, *args):
    with metile.use_device("interp"):
        with pytest.raises(metile.TracingError, match=r"test_triton_combine.py:\d+: " + match):
            kernel[(1,)](*args)


def test_bad_input_names_the_problem_and_the_line():
    a = np.zeros(16, np.float32)

    @tl.jit
    def split3(X):
        tl.split(tl.reshape(tl.load(X + tl.arange(0, 12)), (4, 3)))

    @tl.jit
    def join_shapes(X):
        tl.join(tl.load(X + tl.arange(0, 8)), tl.load(X + tl.arange(0, 4)))

    @tl.jit
    def join_2d(X):
        x = tl.reshape(tl.load(X + tl.arange(0, 16)), (4, 4))
        tl.join(x, x)

    @tl.jit
    def sort_odd(X):
        tl.sort(tl.reshape(tl.load(X + tl.arange(0, 12)), (2, 6)))

    @tl.jit
    def arity(X):
        x = tl.load(X + tl.arange(0, 8))
        tl.reduce((x, x), 0, _add)

    @tl.jit
    def returns(X):
        x = tl.load(X + tl.arange(0, 8))
        tl.reduce((x, x), 0, _sum_both)

    @tl.jit
    def scan_arity(X):
        x = tl.load(X + tl.arange(0, 8))
        tl.associative_scan(x, 0, _both)

    @tl.jit
    def xor_float(X):
        tl.xor_sum(tl.load(X + tl.arange(0, 8)))

    @tl.jit
    def expand_3d(X):
        tl.expand_dims(tl.reshape(tl.load(X + tl.arange(0, 16)), (4, 4)), 0)

    _fails(split3, r"split needs a last dimension of size 2, got shape \(4, 3\)", a)
    _fails(join_shapes,
           r"join needs two values of one shape and dtype, got f32\[8\] and f32\[4\]", a)
    _fails(join_2d, r"join of the 2-D tiles f32\[4,4\] would make a 3-D tile", a)
    _fails(sort_odd, r"sort needs a power-of-two size along axis 1, got 6", a)
    _fails(arity, r"reduce: combine_fn\(a, b\) cannot take the 4 values it is called with: for "
           r"2 inputs", a)
    _fails(returns, r"reduce: combine_fn returned 1 value for 2 inputs", a)
    _fails(scan_arity, r"associative_scan: combine_fn returned 2 values for 1 input", a)
    _fails(xor_float, r"xor_sum needs an integer tile, got f32\[8\]", a)
    _fails(expand_3d, r"expand_dims of f32\[4,4\] at \[0\] would make a 3-D tile", a)
