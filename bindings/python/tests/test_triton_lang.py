"""triton.language names in metile (issue 37 items 3 and 6): which exist (a name that
disappears fails here), and each new one against numpy / float64 references on every device:
Python min/max/range on device values, zeros_like/full_like, clamp, fma, metile.math,
umulhi, rand/randint/randn (Philox4x32-10, checked against a pure-Python implementation), the
load/store cache hints and num_ctas, and errors that teach."""

import math

import numpy as np
import pytest

import metile
import metile as tl

# triton.language names metile has, with Triton's meaning. Add to this list; never remove.
TRITON_NAMES = """
abs arange argmax argmin atomic_add atomic_cas atomic_max atomic_min
atomic_xchg broadcast_to cast cdiv ceil clamp constexpr cos cumprod cumsum
device_assert device_print div_rn dot erf exp exp2 fdiv float16 float32 floor fma full full_like
int32 int64 int8 jit load log log2 math max max_contiguous maximum min minimum multiple_of
next_power_of_2 num_programs permute program_id rand randint randint4x randn range reshape
rsqrt sigmoid sin sqrt sqrt_rn static_assert static_range store sum tanh trans uint32 uint8
umulhi where zeros zeros_like bfloat16 make_block_ptr advance make_tensor_descriptor
split join interleave flip sort reduce associative_scan expand_dims ravel xor_sum dtype
pointer_type int1 float8e4nv float8e5
""".split()
MATH_NAMES = ("abs ceil clamp cos div_rn erf exp exp2 fdiv floor fma log log2 maximum minimum "
              "rsqrt sigmoid sin sqrt sqrt_rn tanh umulhi cdiv").split()


def test_triton_language_names_exist():
    missing = [n for n in TRITON_NAMES if not hasattr(metile, n)]
    assert not missing, f"triton.language names metile lost: {missing}"
    missing = [n for n in MATH_NAMES if not hasattr(metile.math, n)]
    assert not missing, f"triton.language.math names metile lost: {missing}"


@tl.jit
def builtins_and_likes(X, Y, Out, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(X + offs, mask=m, other=0.0)
    y = tl.load(Y + offs, mask=m, other=0.0)
    lo = min(x, y)  # Python's min and max on device values: element-wise
    hi = max(x, y, 0.5)
    z = tl.zeros_like(x) + tl.full_like(x, 2.0) + tl.full_like(offs, 3, tl.float32)
    c = tl.clamp(x, -0.5, 0.5)
    f = tl.fma(x, y, 1.0)
    e = tl.math.exp2(tl.math.log2(tl.abs(x) + 1.0))
    total = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(3):
        total += x * (i + 1)
    for k in range(2):  # Python's range on Python values still unrolls
        total += k
    rows = [lo, hi, z, c, f, e, total]
    for r in tl.static_range(len(rows)):
        tl.store(Out + r * BLOCK + offs, rows[r], mask=m, cache_modifier=".cg",
                 eviction_policy="evict_last")


def test_builtins_likes_and_math(device):
    n, block = 50, 64
    x = np.random.standard_normal(n).astype(np.float32)
    y = np.random.standard_normal(n).astype(np.float32)
    out = np.zeros((7, block), np.float32)
    builtins_and_likes[(1,)](x, y, out, n, BLOCK=block, num_ctas=1)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = [np.minimum(x64, y64), np.maximum(np.maximum(x64, y64), 0.5), np.full(n, 5.0),
           np.clip(x64, -0.5, 0.5), x64 * y64 + 1.0, np.abs(x64) + 1.0, 6 * x64 + 1.0]
    np.testing.assert_allclose(out[:, :n], np.stack(ref), rtol=2e-6, atol=2e-6)


@tl.jit
def mulhi(A, B, Out, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(A + offs, mask=m)
    b = tl.load(B + offs, mask=m)
    tl.store(Out + offs, tl.math.umulhi(a, b), mask=m)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32])
def test_umulhi(device, dtype):
    info = np.iinfo(dtype)
    r = np.random.default_rng(3)
    a = r.integers(info.min, info.max, 40, endpoint=True).astype(dtype)
    b = r.integers(info.min, info.max, 40, endpoint=True).astype(dtype)
    a[:4] = [info.max, info.min, 0, info.max]
    b[:4] = [info.max, info.min, info.max, info.min]
    out = np.zeros_like(a)
    mulhi[(1,)](a, b, out, 40, BLOCK=64)
    ref = [((int(p) * int(q)) >> 32) & 0xFFFFFFFF for p, q in zip(a, b)]
    np.testing.assert_array_equal(out.view(np.uint32), np.array(ref, np.uint64).astype(np.uint32))


# ------------------------------------------------------------------------------ random
def philox4x32(seed, counter, rounds=10):
    """Philox4x32 in pure Python: key = (seed low, seed high), counter = (counter, 0, 0, 0)."""
    mask = 0xFFFFFFFF
    k0, k1 = seed & mask, (seed >> 32) & mask
    c = [counter & mask, 0, 0, 0]
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & mask, (p0 >> 32) ^ c[3] ^ k1, p0 & mask]
    return c


@tl.jit
def random_streams(Words, Uniform, Normal, Ints, seed, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    w = tl.randint4x(seed, offs)
    for i in tl.static_range(4):
        tl.store(Words + i * N + offs, w[i], mask=m)
    tl.store(Uniform + offs, tl.rand(seed, offs), mask=m)
    tl.store(Normal + offs, tl.randn(seed, offs), mask=m)
    tl.store(Ints + offs, tl.randint(seed, offs, n_rounds=7), mask=m)


@pytest.mark.parametrize("seed", [0, 12345, 2**40 + 17])
def test_philox_is_the_same_stream_on_every_device(device, seed):
    n = 300
    words = np.zeros((4, n), np.uint32)
    uni, nrm = np.zeros(n, np.float32), np.zeros(n, np.float32)
    ints = np.zeros(n, np.uint32)
    random_streams[(metile.cdiv(n, 128),)](words, uni, nrm, ints, seed, n, BLOCK=128)
    ref = np.array([philox4x32(seed, i) for i in range(n)], np.uint64).T
    np.testing.assert_array_equal(words, ref.astype(np.uint32))
    np.testing.assert_array_equal(ints, [philox4x32(seed, i, 7)[0] for i in range(n)])
    u = (ref[0] >> 8).astype(np.float64) * 2.0 ** -24
    np.testing.assert_array_equal(uni, u.astype(np.float32))
    assert uni.min() >= 0 and uni.max() < 1
    u1 = ((ref[0] >> 8) + 1).astype(np.float64) * 2.0 ** -24
    u2 = (ref[1] >> 8).astype(np.float64) * 2.0 ** -24
    z = np.sqrt(-2 * np.log(u1)) * np.cos(2 * math.pi * u2)
    np.testing.assert_allclose(nrm, z, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------ teaching errors
def test_python_range_over_a_device_value_names_metile_range():
    @tl.jit
    def bad(X, N):
        for i in range(N):
            tl.store(X + i, 1.0)

    with pytest.raises(metile.TracingError, match=r"Python's range\(\).*metile.range"):
        bad[(1,)](np.zeros(4, np.float32), 4)


def test_numpy_ufunc_on_a_tile_names_the_metile_op():
    @tl.jit
    def bad(X):
        x = tl.load(X + tl.arange(0, 16))
        tl.store(X + tl.arange(0, 16), np.exp(x))

    with pytest.raises(metile.TracingError, match=r"numpy.exp .*use metile.exp"):
        bad[(1,)](np.zeros(16, np.float32))

    @tl.jit
    def bad_where(X):
        x = tl.load(X + tl.arange(0, 16))
        tl.store(X + tl.arange(0, 16), np.where(x > 0, x, 0.0))

    with pytest.raises(metile.TracingError, match=r"numpy.where .*use metile.where"):
        bad_where[(1,)](np.zeros(16, np.float32))


@tl.jit
def numpy_scalars(X, Out):
    offs = tl.arange(0, 16)
    x = tl.load(X + offs)
    tl.store(Out + offs, np.float32(2) * x + np.float32(1) - (np.int32(3) < x))


def test_numpy_scalars_still_combine_with_tiles(device):
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    numpy_scalars[(1,)](x, out)
    np.testing.assert_array_equal(out, 2 * x + 1 - (x > 3))


def test_bad_hints_and_ranges_are_named():
    @tl.jit
    def bad(X):
        for i in tl.range(0, 4, num_stages=-1):
            tl.store(X + i, 1.0)

    with pytest.raises(metile.TracingError, match="num_stages must be >= 0"):
        bad[(1,)](np.zeros(4, np.float32))

    @tl.jit
    def bad_static(X, N):
        for i in tl.static_range(N):
            tl.store(X + i, 1.0)

    with pytest.raises(metile.TracingError, match="static_range end must be a compile-time"):
        bad_static[(1,)](np.zeros(4, np.float32), 4)
