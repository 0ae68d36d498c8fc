"""The seed's kernels written in the metile language (reference/metile-spec.md §13), shared by
the tests, the examples and the benchmarks (bench/*.py import them from here)."""

import math

import numpy as np

import metile


@metile.kernel
def vector_add(X, Y, Out, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    offs = pid * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask) + metile.load(Y + offs, mask=mask),
                 mask=mask)


@metile.kernel
def softmax(X, Out, N, BLOCK: metile.constexpr):
    # The seed's three-pass softmax; masked-off lanes read -inf so they change neither the
    # running max nor the sum of exponentials (correct for any N).
    row = metile.program_id(0)
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        m = metile.maximum(m, x)
    m = metile.max(m)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        s = s + metile.exp(x - m)
    s = metile.sum(s)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        metile.store(Out + row * N + cols, metile.exp(x - m) / s, mask=mask)


@metile.kernel
def layernorm(X, W, B, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    s = 0.0
    ss = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        s = s + x
        ss = ss + x * x
    mean = metile.sum(s) / N
    inv_std = 1.0 / metile.sqrt(metile.sum(ss) / N - mean * mean + 1e-5)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        w = metile.load(W + cols, mask=mask)
        b = metile.load(B + cols, mask=mask)
        metile.store(Out + row * N + cols, (x - mean) * inv_std * w + b, mask=mask)


# The seed README softmax, verbatim (seeds/003): three passes over the row.
@metile.kernel
def seed_softmax(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        m = metile.maximum(m, x)
    m = metile.max(m)

    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        s = s + metile.exp(x - m)
    s = metile.sum(s)

    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        metile.store(Out + row * N + cols, metile.exp(x - m) / s, mask=mask)


# Seed-style layernorm with a loop per statistic: sum, then sum of squares, then the output.
@metile.kernel
def layernorm_loops(X, W, B, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        s = s + x
    ss = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        ss = ss + x * x
    mean = metile.sum(s) / N
    inv_std = 1.0 / metile.sqrt(metile.sum(ss) / N - mean * mean + 1e-5)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        w = metile.load(W + cols, mask=mask)
        b = metile.load(B + cols, mask=mask)
        metile.store(Out + row * N + cols, (x - mean) * inv_std * w + b, mask=mask)


# Seed-style layernorm written the textbook way: the mean, then the variance about the mean
# (the fuse_reductions pass merges the two into one pass: Youngs and Cramer's update on the sum).
@metile.kernel
def layernorm_centred(X, W, B, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        s = s + metile.load(X + row * N + cols, mask=cols < N)
    mean = metile.sum(s) / N
    v = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        v = v + (x - mean) * (x - mean)
    inv_std = 1.0 / metile.sqrt(metile.sum(v) / N + 1e-5)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        w = metile.load(W + cols, mask=mask)
        b = metile.load(B + cols, mask=mask)
        metile.store(Out + row * N + cols, (x - mean) * inv_std * w + b, mask=mask)


# Seed-style rmsnorm: a sum-of-squares pass, then the output pass (which stores: never merged).
@metile.kernel
def rmsnorm(X, W, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    ss = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N)
        ss = ss + x * x
    rms = 1.0 / metile.sqrt(metile.sum(ss) / N + 1e-5)
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        metile.store(Out + row * N + cols, x * rms * metile.load(W + cols, mask=mask), mask=mask)


@metile.kernel
def matmul(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
           BLOCK_K: metile.constexpr, EPILOGUE: metile.constexpr = "none",
           SWIZZLE: metile.constexpr = ""):
    """C = epilogue(A @ B); bounds make any M, N, K correct (edge tiles read zeros)."""
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    if SWIZZLE:
        pid_m, pid_n = metile.tile_swizzle(pid_m, pid_n, pattern=SWIZZLE, block_size=2)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    if EPILOGUE == "relu":
        acc = metile.where(acc > 0, acc, 0)
    elif EPILOGUE == "gelu":
        acc = acc / (1 + metile.exp(0 - 1.702 * acc))
    elif EPILOGUE == "silu":
        acc = acc / (1 + metile.exp(-acc))
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N),
                      bounds=(M, N))


@metile.kernel
def gelu(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    metile.store(Out + offs, x / (1 + metile.exp(0 - 1.702 * x)), mask=mask)


@metile.kernel
def silu(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    metile.store(Out + offs, x / (1 + metile.exp(-x)), mask=mask)


@metile.kernel
def geglu(Gate, Up, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    g = metile.load(Gate + offs, mask=mask)
    u = metile.load(Up + offs, mask=mask)
    metile.store(Out + offs, g / (1 + metile.exp(0 - 1.702 * g)) * u, mask=mask)


@metile.kernel
def gelu_erf(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    metile.store(Out + offs, 0.5 * x * (1 + metile.erf(x * 0.7071067811865476)), mask=mask)


# ----------------------------------------------------------------------------------- FFT
@metile.kernel
def fft(X_re, X_im, Y_re, Y_im, BIT_REV, TW_re, TW_im, N,
        NUM_STAGES: metile.constexpr, THREADS: metile.constexpr, ELEMS: metile.constexpr):
    """Radix-2 decimation-in-time FFT of one row per program, ELEMS (1 or 2) elements per
    thread: element e of thread t is index e * THREADS + t. The first stages exchange through
    simd shuffles, the middle ones through threadgroup memory in a device loop, and the last
    (for ELEMS == 2) pair a thread's own elements."""
    row = metile.program_id(0)
    tid = metile.arange(0, THREADS)
    s_re = metile.shared(THREADS * ELEMS, "f32")
    s_im = metile.shared(THREADS * ELEMS, "f32")
    w_re_s = metile.shared(THREADS * ELEMS, "f32")
    w_im_s = metile.shared(THREADS * ELEMS, "f32")
    base = row * N
    for e in range(ELEMS):
        idx = e * THREADS + tid
        has_tw = idx < N - 1
        metile.store(w_re_s + idx, metile.load(TW_re + idx, mask=has_tw), mask=has_tw)
        metile.store(w_im_s + idx, metile.load(TW_im + idx, mask=has_tw), mask=has_tw)
        rev = metile.load(BIT_REV + idx)
        metile.store(s_re + rev, metile.load(X_re + base + idx))
        metile.store(s_im + rev, metile.load(X_im + base + idx))
    metile.barrier()
    re0 = metile.load(s_re + tid)
    im0 = metile.load(s_im + tid)
    if ELEMS == 2:
        re1 = metile.load(s_re + THREADS + tid)
        im1 = metile.load(s_im + THREADS + tid)

    thread_stages = NUM_STAGES - (ELEMS - 1)
    reg_stages = min(5, thread_stages)
    for st in range(reg_stages):
        half = 1 << st
        top = (tid & half) == 0
        tw = half - 1 + (tid & (half - 1))
        w_re = metile.load(w_re_s + tw)
        w_im = metile.load(w_im_s + tw)
        re0, im0 = _butterfly(re0, im0, metile.simd_shuffle_xor(re0, half),
                              metile.simd_shuffle_xor(im0, half), w_re, w_im, top)
        if ELEMS == 2:
            re1, im1 = _butterfly(re1, im1, metile.simd_shuffle_xor(re1, half),
                                  metile.simd_shuffle_xor(im1, half), w_re, w_im, top)

    for st in metile.tile_range(reg_stages, thread_stages):
        half = 1 << st
        top = (tid & half) == 0
        tw = half - 1 + (tid & (half - 1))
        w_re = metile.load(w_re_s + tw)
        w_im = metile.load(w_im_s + tw)
        metile.store(s_re + tid, re0)
        metile.store(s_im + tid, im0)
        if ELEMS == 2:
            metile.store(s_re + THREADS + tid, re1)
            metile.store(s_im + THREADS + tid, im1)
        metile.barrier()
        p_re0 = metile.load(s_re + (tid ^ half))
        p_im0 = metile.load(s_im + (tid ^ half))
        if ELEMS == 2:
            p_re1 = metile.load(s_re + THREADS + (tid ^ half))
            p_im1 = metile.load(s_im + THREADS + (tid ^ half))
        metile.barrier()
        re0, im0 = _butterfly(re0, im0, p_re0, p_im0, w_re, w_im, top)
        if ELEMS == 2:
            re1, im1 = _butterfly(re1, im1, p_re1, p_im1, w_re, w_im, top)

    if ELEMS == 2:
        # The last stage pairs element 0 (top) with element 1 of the same thread.
        w_re = metile.load(w_re_s + (THREADS - 1) + tid)
        w_im = metile.load(w_im_s + (THREADS - 1) + tid)
        b_re = w_re * re1 - w_im * im1
        b_im = w_re * im1 + w_im * re1
        re0, im0, re1, im1 = re0 + b_re, im0 + b_im, re0 - b_re, im0 - b_im
        metile.store(Y_re + base + THREADS + tid, re1)
        metile.store(Y_im + base + THREADS + tid, im1)
    metile.store(Y_re + base + tid, re0)
    metile.store(Y_im + base + tid, im0)


def _butterfly(re, im, p_re, p_im, w_re, w_im, top):
    """One radix-2 step seen from one thread: the top element gets a + w*b, the bottom a - w*b,
    where `p` is the partner's value."""
    a_re = metile.where(top, re, p_re)
    a_im = metile.where(top, im, p_im)
    b_re = metile.where(top, p_re, re)
    b_im = metile.where(top, p_im, im)
    wb_re = w_re * b_re - w_im * b_im
    wb_im = w_re * b_im + w_im * b_re
    return (metile.where(top, a_re + wb_re, a_re - wb_re),
            metile.where(top, a_im + wb_im, a_im - wb_im))


def fft_tables(n):
    bits = n.bit_length() - 1
    rev = np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n)],
                   dtype=np.int32)
    tw = np.concatenate([np.exp(-2j * np.pi * np.arange(2**s) / 2**(s + 1))
                         for s in range(bits)] or [np.zeros(0)])
    tw = np.concatenate([tw, np.zeros(1)])  # keep the tables non-empty for n == 1
    return rev, tw.real.astype(np.float32), tw.imag.astype(np.float32)


def run_fft(x_re, x_im):
    """Batched FFT of the rows of x (power-of-two length <= 2048)."""
    batch, n = x_re.shape
    assert n & (n - 1) == 0 and 2 <= n <= 2048
    elems = 2 if n > 1024 else 1
    rev, tw_re, tw_im = fft_tables(n)
    y_re, y_im = np.zeros_like(x_re), np.zeros_like(x_im)
    fft[(batch,)](x_re, x_im, y_re, y_im, rev, tw_re, tw_im, n,
                  NUM_STAGES=int(math.log2(n)), THREADS=n // elems, ELEMS=elems)
    return y_re, y_im


# A GEMM written the Triton way (pointer tiles, masks, pointers advanced each iteration) and the
# same GEMM with tile_load: the pointer_tiles pass makes the first the second
# (test_pointer_tiles.py, bench/gemm_pointer_tiles.py).
@metile.kernel
def mm_pointers(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                stride_cm, stride_cn, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    rows = pid_m * BLOCK_M + metile.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + metile.arange(0, BLOCK_N)
    ks = metile.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype=metile.float32)
    for k in metile.tile_range(0, metile.cdiv(K, BLOCK_K), 1):
        left = K - k * BLOCK_K
        a = metile.load(a_tile, mask=(rows[:, None] < M) & (ks[None, :] < left), other=0.0)
        b = metile.load(b_tile, mask=(ks[:, None] < left) & (cols[None, :] < N), other=0.0)
        acc = metile.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    c_tile = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    metile.store(c_tile, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@metile.kernel
def mm_block_ptr(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 stride_cm, stride_cn, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                 BLOCK_K: metile.constexpr):
    """mm_pointers with block pointers (Triton's tutorial 08 idiom)."""
    row, col = metile.program_id(0) * BLOCK_M, metile.program_id(1) * BLOCK_N
    a_block = metile.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (row, 0),
                                    (BLOCK_M, BLOCK_K), (1, 0))
    b_block = metile.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, col),
                                    (BLOCK_K, BLOCK_N), (1, 0))
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype=metile.float32)
    for _ in metile.tile_range(0, K, BLOCK_K):
        a = metile.load(a_block, boundary_check=(0, 1))
        b = metile.load(b_block, boundary_check=(0, 1))
        acc = metile.dot(a, b, acc)
        a_block = metile.advance(a_block, (0, BLOCK_K))
        b_block = metile.advance(b_block, (BLOCK_K, 0))
    c_block = metile.make_block_ptr(c_ptr, (M, N), (stride_cm, stride_cn), (row, col),
                                    (BLOCK_M, BLOCK_N), (1, 0))
    metile.store(c_block, acc, boundary_check=(0, 1))


@metile.kernel
def mm_tiles(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
             BLOCK_K: metile.constexpr):
    row = metile.program_id(0) * BLOCK_M
    col = metile.program_id(1) * BLOCK_N
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype=metile.float32)
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(a_ptr, row, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(b_ptr, k, col, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(c_ptr, row, col, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))


# A GEMM whose dot names its f32 input precision (None: the compile's); tests and
# bench/gemm_precision.py.
@metile.kernel
def mm_precision(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                 BLOCK_K: metile.constexpr, PREC: metile.constexpr):
    pid_m, pid_n = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc, input_precision=PREC)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))
