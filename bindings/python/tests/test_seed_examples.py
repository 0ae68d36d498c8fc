"""Every example of the seed documents, verbatim (code lines copied unchanged; where a seed
shows a fragment, it is placed inside a kernel or around a launch), checked against numpy.

Seed documents: API reference (000), language reference (001), tutorial (002), README (003),
memory model (004).
"""

import numpy as np
import pytest

import metile

# ---------------------------------------------------------------- tutorial (002): vector add


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    offs = pid * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    y = metile.load(Y + offs, mask=mask)
    metile.store(Out + offs, x + y, mask=mask)


def test_tutorial_vector_add(device, capsys):
    N = 1024
    x = metile.Buffer(data=np.random.randn(N).astype(np.float32))
    y = metile.Buffer(data=np.random.randn(N).astype(np.float32))
    out = metile.Buffer.zeros((N,))

    grid = (metile.cdiv(N, 256),)   # ceil(1024 / 256) = 4 program instances
    add[grid](x, y, out, N, BLOCK=256)

    print(out.numpy()[:5])

    assert grid == (4,)
    np.testing.assert_array_equal(out.numpy(), x.numpy() + y.numpy())
    printed = capsys.readouterr().out
    assert printed.startswith("[") and len(printed.split()) >= 5


# ------------------------------------------------------------------------ README (003): GEMM
@metile.kernel
def gemm(A, B, C, M, N, K,
         BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
         BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N))


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (128, 64, 96)])
def test_readme_gemm(device, M, N, K):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
    gemm[(M // 32, N // 32)](A, B, C, M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, allow_tf32=0)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------- README (003): softmax
# The seed README softmax, verbatim: kernels.seed_softmax.
from kernels import seed_softmax as softmax  # noqa: E402


# The seed's own shapes (N a multiple of BLOCK). Masked-off lanes are inactive, so the same
# kernel is exact on ragged N too: test_activity.py runs it on ragged N x BLOCK.
@pytest.mark.parametrize("rows,N", [(32, 64), (16, 512), (4, 1024)])
def test_readme_softmax(device, rows, N):
    X = np.random.default_rng(1).standard_normal((rows, N), dtype=np.float32)
    out = np.zeros_like(X)
    softmax[(rows,)](X, out, N, BLOCK=64)
    ref = np.exp(X - X.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- memory model (004)
def test_memory_model_buffers(device):
    # Create from numpy (zero-copy, the GPU reads the same memory)
    x = metile.Buffer(data=np.random.randn(1024).astype(np.float32))

    # Allocate zeroed
    out = metile.Buffer.zeros((1024,))

    # Allocate from existing numpy array
    arr = np.zeros(1024, dtype=np.float32)
    buf = metile.Buffer.from_numpy(arr)

    # Read results back to numpy (also zero-copy)
    result = out.numpy()

    assert x.shape == (1024,) and x.metile_dtype == "f32" and x.dtype == np.float32
    assert result.dtype == np.float32 and not result.any()
    assert buf.shape == (1024,)
    assert np.shares_memory(result, out.numpy())


@metile.kernel
def kernel(X, Out, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    # Element-wise access with pointer arithmetic
    offs = pid * BLOCK + metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    metile.store(Out + offs, x * 2.0, mask=offs < N)


def test_memory_model_sync_and_read(device, capsys):
    N = 1000
    x = metile.Buffer(data=np.random.randn(N).astype(np.float32))
    out = metile.Buffer.zeros((N,))
    grid = (metile.cdiv(N, 256),)
    from metile.runtime.metal_device import MetalDevice

    kernel[grid](x, out, N, BLOCK=256)
    MetalDevice.get().sync()   # wait for GPU to finish
    print(out.numpy())         # read results

    np.testing.assert_array_equal(out.numpy(), 2 * x.numpy())
    assert capsys.readouterr().out.startswith("[")


@metile.kernel
def tile_copy(A, C, stride, ROWS: metile.constexpr, COLS: metile.constexpr):
    row = metile.program_id(0) * ROWS
    col = metile.program_id(1) * COLS
    # 2D tile access for matrix operations
    a = metile.tile_load(A, row, col, stride, (ROWS, COLS))
    result = a * 3.0
    metile.tile_store(C, row, col, stride, result, (ROWS, COLS))


def test_memory_model_tile_access(device):
    A = np.arange(64 * 48, dtype=np.float32).reshape(64, 48)
    C = np.zeros_like(A)
    tile_copy[(4, 3)](A, C, 48, ROWS=16, COLS=16)
    np.testing.assert_array_equal(C, 3 * A)


@metile.kernel
def masking(X, Out, Probe, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    offs = pid * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N    # boolean mask: True for valid elements

    x = metile.load(X + offs, mask=mask)       # masked-off lanes read 0
    metile.store(Out + offs, x, mask=mask)      # masked-off lanes are skipped
    metile.store(Probe + offs, x)              # x's masked-off lanes are inactive: skipped


def test_memory_model_masking(device):
    # N = 10, BLOCK = 4, pid = 2 (last instance): offs = [8, 9, 10, 11], mask = [T, T, F, F]
    N, BLOCK = 10, 4
    x = np.arange(1, 13, dtype=np.float32)          # X has 12 readable elements
    out = np.full(12, -1.0, np.float32)
    probe = np.full(12, -1.0, np.float32)
    masking[(metile.cdiv(N, BLOCK),)](x, out, probe, N, BLOCK=BLOCK)
    np.testing.assert_array_equal(out[:10], x[:10])
    np.testing.assert_array_equal(out[10:], [-1, -1])      # store: skips indices 10, 11
    np.testing.assert_array_equal(probe[:10], x[:10])
    # Masked-off lanes are inactive (docs/semantics.md), so even the unmasked store skips 10, 11.
    np.testing.assert_array_equal(probe[10:], [-1, -1])


@metile.kernel
def shared_reverse(X, Out):
    offs = metile.arange(0, 256)
    buf = metile.shared(size=256, dtype="f32")
    metile.store(buf + offs, metile.load(X + offs))
    metile.barrier()   # synchronize all threads in the threadgroup
    metile.store(Out + offs, metile.load(buf + (255 - offs)))


def test_memory_model_shared_memory(device):
    x = np.random.randn(256).astype(np.float32)
    out = np.zeros_like(x)
    shared_reverse[(1,)](x, out)
    np.testing.assert_array_equal(out, x[::-1])


# ----------------------------------------------------------------- language reference (001)
@metile.kernel
def my_kernel(ptr_a, ptr_b, N, BLOCK: metile.constexpr):
    ...


def test_language_kernel_definition_and_launch(device):
    a = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    N = 16
    grid = (1,)
    my_kernel[grid](a, b, N, BLOCK=256)
    prog = my_kernel[grid].trace(a, b, N, BLOCK=256)
    assert "kernel @my_kernel(%ptr_a: ptr<f32>, %ptr_b: ptr<f32>, %N: i32)" in prog.text
    assert 'BLOCK = "256"' in prog.text


@metile.kernel
def where_am_i(Out, GX: metile.constexpr, GY: metile.constexpr):
    pid_x = metile.program_id(0)   # threadgroup X index
    pid_y = metile.program_id(1)   # threadgroup Y index
    pid_z = metile.program_id(2)
    metile.store(Out + (pid_z * GY + pid_y) * GX + pid_x, pid_x + 10 * pid_y + 100 * pid_z)


def test_language_grids(device):
    N = 5
    M = 3
    X, Y, Z = 2, 3, 2
    kernel = where_am_i
    out1 = np.zeros(N, np.int32)
    kernel[(N,)](out1, GX=N, GY=1)           # 1D grid
    np.testing.assert_array_equal(out1, np.arange(N))
    out2 = np.zeros((N, M), np.int32)
    kernel[(M, N)](out2, GX=M, GY=N)         # 2D grid
    np.testing.assert_array_equal(out2, np.arange(M)[None, :] + 10 * np.arange(N)[:, None])
    out3 = np.zeros((Z, Y, X), np.int32)
    kernel[(X, Y, Z)](out3, GX=X, GY=Y)     # 3D grid
    expect = (np.arange(X)[None, None, :] + 10 * np.arange(Y)[None, :, None]
              + 100 * np.arange(Z)[:, None, None])
    np.testing.assert_array_equal(out3, expect)


@metile.kernel
def index_generation(Idx, Grid, N, BLOCK: metile.constexpr):
    idx = metile.arange(0, 256)   # [0, 1, 2, ..., 255]
    grid_size = metile.cdiv(N, BLOCK)   # ceil(N / BLOCK)
    metile.store(Idx + idx, idx)
    metile.store(Grid, grid_size)


def test_language_index_generation(device):
    idx = np.zeros(256, np.int32)
    g = np.zeros(1, np.int32)
    index_generation[(1,)](idx, g, 1000, BLOCK=64)
    np.testing.assert_array_equal(idx, np.arange(256))
    assert g[0] == 16 == metile.cdiv(1000, 64)
    assert metile.next_power_of_2(100) == 128 and metile.next_power_of_2(1) == 1


@metile.kernel
def lang_gemm(A, B, C, K, N, BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    acc = metile.zeros((128, 128), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * 128, k, K, (128, BLOCK_K))
        b = metile.tile_load(B, k, pid_n * 128, N, (BLOCK_K, 128))
        acc = metile.dot(a, b, acc)
    BLOCK_M = BLOCK_N = 128
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N))


def test_language_matrix_multiply(device):
    K, N = 64, 128
    A = np.random.randn(128, K).astype(np.float32)
    B = np.random.randn(K, N).astype(np.float32)
    C = np.zeros((128, N), np.float32)
    lang_gemm[(1, 1)](A, B, C, K, N, BLOCK_K=32, allow_tf32=0)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


@metile.kernel
def math_ops(X, Y, Out, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    offs = pid * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    y = metile.load(Y + offs, mask=mask)
    metile.store(Out + 0 * N + offs, metile.exp(x), mask=mask)
    metile.store(Out + 1 * N + offs, metile.log(metile.abs(x) + 1.0), mask=mask)
    metile.store(Out + 2 * N + offs, metile.sqrt(metile.abs(x)), mask=mask)
    metile.store(Out + 3 * N + offs, metile.abs(x), mask=mask)
    metile.store(Out + 4 * N + offs, metile.tanh(x), mask=mask)
    metile.store(Out + 5 * N + offs, metile.where(x > y, x, y), mask=mask)
    metile.store(Out + 6 * N + offs, metile.maximum(x, y), mask=mask)
    metile.store(Out + 7 * N + offs, metile.minimum(x, y), mask=mask)
    metile.store(Out + 8 * N + offs, x * y - x / (y * y + 1.0), mask=mask)


def test_language_math_operations(device):
    N = 300
    x = np.random.randn(N).astype(np.float32)
    y = np.random.randn(N).astype(np.float32)
    out = np.zeros((9, N), np.float32)
    math_ops[(metile.cdiv(N, 128),)](x, y, out, N, BLOCK=128)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    refs = [np.exp(x64), np.log(np.abs(x64) + 1), np.sqrt(np.abs(x64)), np.abs(x64),
            np.tanh(x64), np.where(x > y, x64, y64), np.maximum(x64, y64), np.minimum(x64, y64),
            x64 * y64 - x64 / (y64 * y64 + 1)]
    for i, ref in enumerate(refs):
        np.testing.assert_allclose(out[i], ref, rtol=2e-6, atol=2e-6, err_msg=f"op {i}")


@metile.kernel
def reductions(X, Out, BLOCK: metile.constexpr):
    x = metile.load(X + metile.arange(0, BLOCK))
    metile.store(Out, metile.sum(x))
    metile.store(Out + 1, metile.max(x))
    metile.store(Out + 2, metile.min(x))


def test_language_reductions(device):
    r = np.random.randn(128).astype(np.float32)
    for x in (r, -np.abs(r) - 1, np.abs(r) + 1):   # mixed, all negative, all positive
        out = np.zeros(3, np.float32)
        reductions[(1,)](x, out, BLOCK=128)
        np.testing.assert_allclose(out, [x.astype(np.float64).sum(), x.max(), x.min()],
                                   rtol=1e-5, atol=1e-5)


@metile.kernel
def two_pass_max(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    # Two-pass softmax: find max, then compute normalized exponentials
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        m = metile.maximum(m, x)
    m = metile.max(m)   # reduce across the tile
    metile.store(Out + row, m)


def test_language_two_pass_softmax_max(device):
    rows, N = 8, 512
    X = np.random.randn(rows, N).astype(np.float32)
    X[3] = -np.abs(X[3]) - 5  # all negative: the running max must not start from 0
    out = np.zeros(rows, np.float32)
    two_pass_max[(rows,)](X, out, N, BLOCK=128)
    np.testing.assert_array_equal(out, X.max(1))


@metile.kernel
def roles_verbatim(X, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    with metile.simdgroup_role(role=0, num_roles=2):
        # Only the first half of simdgroups run this
        ...
    with metile.simdgroup_role(role=1, num_roles=2):
        # Only the second half run this
        ...


@metile.kernel
def roles(X, Out0, Out1, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs)
    with metile.simdgroup_role(role=0, num_roles=2):
        # Only the first half of simdgroups run this
        metile.store(Out0 + offs, x * 2.0)
    with metile.simdgroup_role(role=1, num_roles=2):
        # Only the second half run this
        metile.store(Out1 + offs, x * 3.0)


def test_language_simdgroup_role(device):
    x = np.random.randn(256).astype(np.float32)
    roles_verbatim[(1,)](x, BLOCK=256)
    o0 = np.full(256, -1, np.float32)
    o1 = np.full(256, -1, np.float32)
    roles[(1,)](x, o0, o1, BLOCK=256)
    np.testing.assert_array_equal(o0[:128], 2 * x[:128])
    np.testing.assert_array_equal(o0[128:], -1)
    np.testing.assert_array_equal(o1[128:], 3 * x[128:])
    np.testing.assert_array_equal(o1[:128], -1)


@metile.kernel
def simd_ops(X, Out):
    x = metile.load(X + metile.arange(0, 128))
    tid = metile.thread_id()
    lane = metile.simd_lane_id()
    metile.store(Out + tid, metile.simd_shuffle_xor(x, 5))
    metile.store(Out + 128 + tid, metile.simd_broadcast(x, 3))
    metile.store(Out + 256 + tid, lane.to("f32"))
    metile.store(Out + 384 + tid, tid.to("f32"))


def test_language_simdgroup_operations(device):
    x = np.random.randn(128).astype(np.float32)
    out = np.zeros(512, np.float32)
    simd_ops[(1,)](x, out)
    i = np.arange(128)
    np.testing.assert_array_equal(out[:128], x[i ^ 5])
    np.testing.assert_array_equal(out[128:256], x[(i & ~31) + 3])
    np.testing.assert_array_equal(out[256:384], i % 32)
    np.testing.assert_array_equal(out[384:], i)


@metile.kernel
def swizzled_ids(Out, GN: metile.constexpr):
    pid_m, pid_n = metile.tile_swizzle(
        metile.program_id(0), metile.program_id(1),
        pattern="morton", block_size=2,
    )
    orig = metile.program_id(0) * GN + metile.program_id(1)
    metile.store(Out + 2 * orig, pid_m)
    metile.store(Out + 2 * orig + 1, pid_n)


@pytest.mark.parametrize("gm,gn", [(4, 4), (2, 3), (5, 3), (1, 7)])
def test_language_tile_swizzle(device, gm, gn):
    out = np.full((gm * gn, 2), -1, np.int32)
    swizzled_ids[(gm, gn)](out, GN=gn)
    pairs = {tuple(p) for p in out}
    assert pairs == {(m, n) for m in range(gm) for n in range(gn)}, "not a bijection"
    if (gm, gn) == (4, 4):
        assert tuple(out[1]) != (0, 1), "morton order should differ from row-major"
