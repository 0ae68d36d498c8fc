"""Triton tutorial idioms port by changing the import (issue 37, acceptance).

Each kernel below is written the way Triton's tutorials teach (vector add, fused softmax with a
persistent row loop, grouped pointer-arithmetic matmul with an activation helper and autotune
configs, low-memory dropout with tl.rand, layer norm forward and backward, fused attention
forward), but fresh for this project; in the kernels, `import metile as tl` and `@tl.jit` are the
only metile-specific lines. Every kernel runs on every device the `device` fixture gives and is
checked against a float64 numpy reference (the dropout mask also against interp's). A final
test lists the triton.language names metile provides, and fails when one disappears.

Where a tutorial idiom does not work yet, the test says so:
- Python's `range` over a run-time bound (`for off in range(0, N, BLOCK_SIZE)`) is written
  `tl.range` here; Python's range is rejected by design (test_triton_lang.py,
  test_python_range_over_a_device_value_names_metile_range).
- The layer norm backward's fused dx kernel needs run-time control flow on device values (a
  `while tl.atomic_cas(...) == 1` spin lock and `if count == 0:`): it runs on interp; on the
  compiled devices, which do not lower if/while yet, it is a strict xfail that flips when they do.

Block pointers and tensor descriptors (tutorial 08's idiom) are in test_block_pointers.py.
"""

import numpy as np
import pytest

import metile as tl


# ----------------------------------------------------------------------------- 01 vector add
@tl.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    start = pid * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def test_01_vector_add(device):
    n = 1000  # not a multiple of BLOCK_SIZE
    x = np.random.rand(n).astype(np.float32)
    y = np.random.rand(n).astype(np.float32)
    out = np.full(n + 8, -1.0, np.float32)
    grid = lambda meta: (tl.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=256)
    np.testing.assert_allclose(out[:n], x.astype(np.float64) + y, rtol=1e-6)
    assert (out[n:] == -1.0).all(), "the masked store wrote past n"


# ------------------------------------------------------------------------- 02 fused softmax
@tl.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_ptr = in_ptr + row_idx * in_row_stride
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = tl.load(row_ptr + cols, mask=mask, other=-float("inf"))
        shifted = row - tl.max(row, axis=0)
        num = tl.exp(shifted)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row_idx * out_row_stride + cols, num / den, mask=mask)


def softmax64(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_02_fused_softmax(device):
    n_rows, n_cols = 37, 100
    x = (np.random.standard_normal((n_rows, n_cols)) * 3).astype(np.float32)
    y = np.zeros_like(x)
    block = tl.next_power_of_2(n_cols)
    programs = 8  # fewer programs than rows: each walks rows pid, pid + 8, ...
    softmax_kernel[(programs, 1, 1)](y, x, x.strides[0] // 4, y.strides[0] // 4, n_rows,
                                     n_cols, BLOCK_SIZE=block, num_stages=2)
    np.testing.assert_allclose(y, softmax64(x), rtol=1e-5, atol=1e-7)


@tl.jit
def softmax_rows_kernel(out_ptr, in_ptr, n_rows, n_cols, ROWS: tl.constexpr,
                        BLOCK_SIZE: tl.constexpr):
    # Several rows per program as one 2-D tile; the reductions keep their axis (keep_dims).
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_SIZE)
    offs = rows[:, None] * n_cols + cols[None, :]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(in_ptr + offs, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=1, keep_dims=True))
    tl.store(out_ptr + offs, num / tl.sum(num, axis=1, keep_dims=True), mask=mask)


def test_02_softmax_rows_with_keep_dims(device):
    n_rows, n_cols = 21, 50
    x = (np.random.standard_normal((n_rows, n_cols)) * 3).astype(np.float32)
    y = np.zeros_like(x)
    softmax_rows_kernel[(tl.cdiv(n_rows, 4),)](y, x, n_rows, n_cols, ROWS=4, BLOCK_SIZE=64)
    np.testing.assert_allclose(y, softmax64(x), rtol=1e-5, atol=1e-7)


@tl.jit
def keep_dims_kernel(X, V, Out, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(X + r[:, None] * C + c[None, :])
    v = tl.load(V + c)
    out = (tl.sum(x, axis=0, keep_dims=True) + tl.max(x, axis=1, keep_dims=True)
           + tl.min(x, keep_dims=True) + tl.sum(v, axis=0, keep_dims=True)[None, :]
           + tl.max(v, keep_dims=True)[:, None])
    tl.store(Out + r[:, None] * C + c[None, :], out)


def test_reductions_keep_dims(device):
    x = np.random.standard_normal((8, 16)).astype(np.float32)
    v = np.random.standard_normal(16).astype(np.float32)
    out = np.zeros_like(x)
    keep_dims_kernel[(1,)](x, v, out, R=8, C=16)
    x64, v64 = x.astype(np.float64), v.astype(np.float64)
    want = (x64.sum(axis=0, keepdims=True) + x64.max(axis=1, keepdims=True) + x64.min()
            + v64.sum() + v64.max())
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- 03 matmul
@tl.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@tl.autotune(
    configs=[
        tl.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2},
                  num_stages=3, num_warps=4),
        tl.Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
                  num_stages=4, num_warps=2),
    ],
    key=["M", "N", "K"],
)
@tl.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                  ACTIVATION: tl.constexpr):
    # Grouped ordering: consecutive programs share rows of A (better reuse of cached tiles).
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pids_per_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // pids_per_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_rows = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % pids_per_group) % group_rows)
    pid_n = (pid % pids_per_group) // group_rows

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    c = acc.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def matmul(a, b, activation="", **meta):
    (M, K), (_, N) = a.shape, b.shape
    c = np.zeros((M, N), np.float16)
    grid = lambda META: (  # noqa: E731
        tl.cdiv(M, META["BLOCK_SIZE_M"]) * tl.cdiv(N, META["BLOCK_SIZE_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.strides[0] // 2, a.strides[1] // 2,
                        b.strides[0] // 2, b.strides[1] // 2, c.strides[0] // 2,
                        c.strides[1] // 2, ACTIVATION=activation, **meta)
    return c


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_03_grouped_matmul_f16(device, activation):
    M, N, K = 70, 50, 40  # ragged in every dimension, K not a multiple of BLOCK_SIZE_K
    a = np.random.standard_normal((M, K)).astype(np.float16)
    b = np.random.standard_normal((K, N)).astype(np.float16)
    c = matmul(a, b, activation)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if activation == "leaky_relu":
        want = np.where(want >= 0, want, 0.01 * want)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-3, atol=2e-2)
    assert len(matmul_kernel.last_timings) == 2, "autotune timed both configs"
    assert matmul_kernel.best_config in matmul_kernel.configs
    for cfg in matmul_kernel.configs:  # every config, not only the winner, is right
        c = matmul(a, b, activation, **cfg.kwargs)
        np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-3, atol=2e-2)


# -------------------------------------------------------------------- 04 low-memory dropout
@tl.jit
def seeded_dropout_kernel(x_ptr, out_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    r = tl.rand(seed, offsets)
    keep = r > p
    out = tl.where(keep, x / (1 - p), 0.0)
    tl.store(out_ptr + offsets, out, mask=mask)


def seeded_dropout(x, p, seed):
    out = np.zeros_like(x)
    n = x.size
    grid = lambda meta: (tl.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    seeded_dropout_kernel[grid](x, out, n, p, seed, BLOCK_SIZE=512)
    return out


_interp_dropout = {}


def test_04_low_memory_dropout(device):
    n, p = 3000, 0.3
    x = (np.random.rand(n) + 0.5).astype(np.float32)  # no zeros: a zero output means dropped
    a = seeded_dropout(x, p, seed=123)
    b = seeded_dropout(x, p, seed=123)
    other = seeded_dropout(x, p, seed=321)
    np.testing.assert_array_equal(a, b)  # same seed, same mask
    assert ((a == 0) != (other == 0)).any(), "another seed gives another mask"
    kept = a != 0
    np.testing.assert_allclose(a[kept], x[kept].astype(np.float64) / (1 - p), rtol=1e-6)
    assert abs((~kept).mean() - p) < 0.04, (~kept).mean()
    # The Philox stream is the same on every device: the mask equals the interpreter's.
    if "interp" not in _interp_dropout:
        with tl.use_device("interp"):
            _interp_dropout["interp"] = seeded_dropout(x, p, seed=123)
    np.testing.assert_array_equal(a == 0, _interp_dropout["interp"] == 0)


# ------------------------------------------------------------------- 05 layer norm forward
@tl.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    # Tutorial 05 writes `for off in range(0, N, BLOCK_SIZE)`; a run-time N needs tl.range here.
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in tl.range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc2 = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in tl.range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        acc2 += x * x
    var = tl.sum(acc2, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in tl.range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


def test_05_layer_norm_forward(device):
    M, N, eps = 9, 300, 1e-5
    x = (np.random.standard_normal((M, N)) * 2 + 1).astype(np.float32)
    w = np.random.rand(N).astype(np.float32)
    b = np.random.rand(N).astype(np.float32)
    y = np.zeros_like(x)
    mean = np.zeros(M, np.float32)
    rstd = np.zeros(M, np.float32)
    layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, x.strides[0] // 4, N, eps, BLOCK_SIZE=128)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1)
    rs = 1 / np.sqrt(x64.var(axis=1) + eps)
    np.testing.assert_allclose(mean, mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, rs, rtol=1e-5)
    want = (x64 - mu[:, None]) * rs[:, None] * w + b
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ 05 layer norm backward
@tl.jit
def layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                            GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    # One program per row: dx directly, and this row's dw/db added into one of GROUP_SIZE_M
    # partial rows, each guarded by a spin lock (Lock[g]) with a first-writer flag (Count[g]).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = tl.where(mask, w * dy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(DX + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
    partial_dw = dy * xhat
    partial_db = dy
    while tl.atomic_cas(Lock, 0, 1) == 1:  # run-time `while` on a device value
        pass
    count = tl.load(Count)
    if count == 0:  # run-time `if` on a device scalar
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@tl.jit
def layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr,
                        BLOCK_SIZE_N: tl.constexpr):
    # Sums the M partial rows of DW and DB, one column block per program.
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in tl.range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.0)
        db += tl.load(DB + offs, mask=mask, other=0.0)
    tl.store(FINAL_DW + cols, tl.sum(dw, axis=0), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(db, axis=0), mask=cols < N)


def test_05_layer_norm_backward_dwdb_reduction(device):
    groups, N = 13, 300
    dw = np.random.standard_normal((groups, N)).astype(np.float32)
    db = np.random.standard_normal((groups, N)).astype(np.float32)
    fdw, fdb = np.zeros(N, np.float32), np.zeros(N, np.float32)
    grid = lambda meta: (tl.cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    layer_norm_bwd_dwdb[grid](dw, db, fdw, fdb, groups, N, BLOCK_SIZE_M=8, BLOCK_SIZE_N=64)
    np.testing.assert_allclose(fdw, dw.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fdb, db.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5)


def test_05_layer_norm_backward(device):
    M, N, eps, groups = 12, 300, 1e-5, 4
    x = (np.random.standard_normal((M, N)) * 2 + 1).astype(np.float32)
    w = np.random.rand(N).astype(np.float32)
    b = np.random.rand(N).astype(np.float32)
    dy = np.random.standard_normal((M, N)).astype(np.float32)
    y = np.zeros_like(x)
    mean, rstd = np.zeros(M, np.float32), np.zeros(M, np.float32)
    layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, N, N, eps, BLOCK_SIZE=128)
    dx = np.zeros_like(x)
    pdw, pdb = np.zeros((groups, N), np.float32), np.zeros((groups, N), np.float32)
    locks = np.zeros(2 * groups, np.int32)
    block_n = tl.next_power_of_2(N)
    layer_norm_bwd_dx_fused[(M,)](dx, dy, pdw, pdb, x, w, mean, rstd, locks, N, N,
                                  GROUP_SIZE_M=groups, BLOCK_SIZE_N=block_n)
    dw, db = np.zeros(N, np.float32), np.zeros(N, np.float32)
    layer_norm_bwd_dwdb[(tl.cdiv(N, 64),)](pdw, pdb, dw, db, groups, N, BLOCK_SIZE_M=8,
                                           BLOCK_SIZE_N=64)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    rs = 1 / np.sqrt(x64.var(axis=1, keepdims=True) + eps)
    xhat = (x64 - mu) * rs
    wdy = w * dy64
    want_dx = (wdy - (xhat * (xhat * wdy).mean(axis=1, keepdims=True)
                      + wdy.mean(axis=1, keepdims=True))) * rs
    np.testing.assert_allclose(dx, want_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, (dy64 * xhat).sum(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, dy64.sum(axis=0), rtol=1e-4, atol=1e-4)
    assert (locks[:groups] == 0).all() and (locks[groups:] == 1).all()


@tl.jit
def barrier_between(X, Out, Rev, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(X + offs) * 2)
    tl.debug_barrier()  # every lane's store is visible to the whole program after it
    tl.store(Rev + offs, tl.load(Out + (BLOCK - 1 - offs)))


def test_debug_barrier(device):
    x = np.arange(32, dtype=np.float32)
    out, rev = np.zeros(32, np.float32), np.zeros(32, np.float32)
    barrier_between[(1,)](x, out, rev, BLOCK=32)
    np.testing.assert_array_equal(out, 2 * x)
    np.testing.assert_array_equal(rev, (2 * x)[::-1])


# ---------------------------------------------------------- 06 fused attention forward
@tl.jit
def attn_fwd(Q, K, V, Out, sm_scale, N_CTX, stride_qm, stride_kn, stride_vn, stride_om,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # exp2 with log2(e) folded into the scale
    hi = min((start_m + 1) * BLOCK_M, N_CTX) if CAUSAL else N_CTX
    for start_n in tl.range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        # K loaded transposed by its pointers: kT[d, n] = K[n, d].
        kT = tl.load(K + cols[None, :] * stride_kn + offs_d[:, None],
                     mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, kT) * qk_scale
        valid = cols[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, -float("inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_ij[:, None])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + cols[:, None] * stride_vn + offs_d[None, :],
                    mask=cols[:, None] < N_CTX, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(tl.float16),
             mask=offs_m[:, None] < N_CTX)


@pytest.mark.parametrize("n_ctx,head_dim,causal", [(64, 32, False), (100, 64, True)])
def test_06_fused_attention_forward(device, n_ctx, head_dim, causal):
    q, k, v = (np.random.standard_normal((n_ctx, head_dim)).astype(np.float16) for _ in range(3))
    out = np.zeros_like(q)
    scale = head_dim ** -0.5
    block_m, block_n = 32, 32
    attn_fwd[(tl.cdiv(n_ctx, block_m),)](q, k, v, out, scale, n_ctx, head_dim, head_dim,
                                         head_dim, head_dim, HEAD_DIM=head_dim,
                                         BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal)
    s = q.astype(np.float64) @ k.astype(np.float64).T * scale
    if causal:
        s = np.where(np.tril(np.ones((n_ctx, n_ctx), bool)), s, -np.inf)
    want = softmax64(s) @ v.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ triton.language names
# The triton.language names (plus triton.jit/autotune/Config) that metile provides today, each
# with Triton's meaning. Add to this list as names arrive; a name that disappears fails here.
PROVIDED = """
abs arange argmax argmin atomic_add atomic_cas atomic_max atomic_min atomic_xchg bfloat16
broadcast_to cast cdiv ceil clamp constexpr cos cumprod cumsum debug_barrier device_assert
device_print div_rn dot erf exp exp2 fdiv float16 float32 floor fma full full_like int32 int64
int8 load log log2 math max max_contiguous maximum min minimum multiple_of next_power_of_2
num_programs ones_like permute program_id rand randint randint4x randn range reshape rsqrt
sigmoid sin sqrt sqrt_rn static_assert static_range store sum tanh trans uint32 uint8 umulhi
where zeros zeros_like jit autotune Config
""".split()


def test_triton_language_names_metile_provides():
    missing = [n for n in PROVIDED if not hasattr(tl, n)]
    assert not missing, f"triton.language names metile no longer provides: {missing}"
