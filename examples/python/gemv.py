"""GEMV and batched GEMV: Y[M, N] = X[M, K] . W[N, K]^T (+ bias[N]), for M = 1..16 (torch's
F.linear layout: W is [N, K] row-major; x may be a vector [K], giving y [N]).

Contract: W, X, bias and the output are f32, f16 or bf16 (each its own dtype); products are
summed in f32 and the output is rounded once to its dtype (by default X's). Each program owns
BLOCK_N rows of W and reads them once in [BLOCK_N, BLOCK_K] tiles (K is W's contiguous axis).
Two methods:
- "fma" (gemv_kernel), for one or two rows of x: no matrix units. Each W tile is multiplied by
  every row of X's matching chunk and summed along K. The sum `acc = acc + sum(w * x, axis=1)`
  is carried as the unreduced tile and reduced once after the loop on GPUs (the
  defer_reductions pass), so the loop exchanges nothing between threads.
- "dot" (gemv_dot_kernel), for more rows: each W element would cost M FMAs, so the tile goes
  through the matrix units against X's rows padded with zeros to 16 (the atoms' height).

Split-K: when N / BLOCK_N programs do not fill the device, the K range is cut into `split_k`
parts; each part writes its f32 partial sums to a workspace and a second kernel adds the parts
in part order, adds the bias and rounds: the same bits on every run (no atomics), at the cost of
M x N x split_k x 8 bytes of extra traffic.

Run: python3 examples/python/gemv.py [N K [M]] [--dtype f32|f16|bf16] [--bias] [--split-k S]
                                   [--method fma|dot]
"""

import argparse
import os
import sys
import time
import weakref

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile

MAX_M = 16
M_TILE = 16   # the "dot" method's rows of x, padded: the matrix atoms' height
DOT_MIN_M = 3  # rows of x from which GPUs take the "dot" method by default
DOT_BLOCK_N, DOT_BLOCK_K = 64, 128
# A "dot" program pays a fixed prologue (its pipeline's first stages) and epilogue (the partial
# sums, and with split-K the merge kernel) around the W it streams. On an H100 (f16, [64, 128],
# bench/results/gemv_h100.md) programs reading 16-32 KB of W reached 25-28% of copy, 64-128 KB
# 52-59%, 256-512 KB 79-83%, with 1024 or 2048 programs alike: the bytes a program reads decide,
# not how many programs there are once every SM has one. So the dot method splits K only until
# every SM has a program, and where its programs still read less than DOT_MIN_PROGRAM_BYTES
# (a small W) the fma method, at most FMA_MAX_M FMAs per element of W, is the faster path
# (4096^2, 4 rows, 32 KB a program: fma 40-45% of copy, dot 28%).
DOT_MIN_PROGRAM_BYTES = 64 * 1024
FMA_MAX_M = 4
METHODS = ("fma", "dot")
DTYPES = ("f32", "f16", "bf16")


@metile.kernel
def gemv_kernel(W, X, Bias, Y, Part, N, K, k_chunk, M: metile.constexpr,
                BLOCK_N: metile.constexpr, BLOCK_K: metile.constexpr,
                HAS_BIAS: metile.constexpr, SPLIT: metile.constexpr):
    """Rows [pid * BLOCK_N, +BLOCK_N) of Y for the K range of split program_id(1): the finished
    rows (bias added, rounded to Y's dtype) when SPLIT is false, else f32 partial sums into
    Part[split, m, n]."""
    pid = metile.program_id(0)
    split = metile.program_id(1)
    n0 = pid * BLOCK_N
    k_start = split * k_chunk
    k_end = metile.minimum(k_start + k_chunk, K)
    acc = [metile.zeros((BLOCK_N,), "f32") for _ in range(M)]
    for k in metile.tile_range(k_start, k_end, BLOCK_K):
        w = metile.tile_load(W, n0, k, K, (BLOCK_N, BLOCK_K), bounds=(N, k_end)).to("f32")
        cols = k + metile.arange(0, BLOCK_K)
        for m in range(M):      # unrolled while tracing: W's tile is read once for all rows
            x = metile.load(X + m * K + cols, mask=cols < k_end, other=0.0).to("f32")
            acc[m] = acc[m] + metile.sum(w * x[None, :], axis=1)
    rows = n0 + metile.arange(0, BLOCK_N)
    live = rows < N
    for m in range(M):
        if SPLIT:
            metile.store(Part + (split * M + m) * N + rows, acc[m], mask=live)
        else:
            y = acc[m]
            if HAS_BIAS:
                y = y + metile.load(Bias + rows, mask=live, other=0.0).to("f32")
            metile.store(Y + m * N + rows, y.to(Y.dtype), mask=live)


@metile.kernel
def gemv_dot_kernel(W, X, Bias, Y, Part, N, K, M, k_chunk, BLOCK_N: metile.constexpr,
                    BLOCK_K: metile.constexpr, M_TILE: metile.constexpr,
                    HAS_BIAS: metile.constexpr, SPLIT: metile.constexpr):
    """gemv_kernel's rows with the matrix units: Y^T's tile [BLOCK_N, M_TILE] = W's rows times
    X's M rows (padded with zeros to M_TILE, the atoms' height) transposed, so each element of W
    costs a share of one matrix instruction instead of M FMAs."""
    pid = metile.program_id(0)
    split = metile.program_id(1)
    n0 = pid * BLOCK_N
    k_start = split * k_chunk
    k_end = metile.minimum(k_start + k_chunk, K)
    acc = metile.zeros((BLOCK_N, M_TILE), "f32")
    for k in metile.tile_range(k_start, k_end, BLOCK_K):
        w = metile.tile_load(W, n0, k, K, (BLOCK_N, BLOCK_K), bounds=(N, k_end))
        x = metile.tile_load(X, 0, k, K, (M_TILE, BLOCK_K), bounds=(M, k_end))
        acc = metile.dot(w, metile.trans(x), acc)
    rows = n0 + metile.arange(0, BLOCK_N)
    ms = metile.arange(0, M_TILE)
    live = (rows[:, None] < N) & (ms[None, :] < M)
    if SPLIT:
        metile.store(Part + (split * M + ms[None, :]) * N + rows[:, None], acc, mask=live)
    else:
        if HAS_BIAS:
            acc = acc + metile.load(Bias + rows, mask=rows < N, other=0.0).to("f32")[:, None]
        metile.store(Y + ms[None, :] * N + rows[:, None], acc.to(Y.dtype), mask=live)


@metile.kernel
def gemv_merge(Part, Bias, Y, N, splits, M: metile.constexpr, BLOCK: metile.constexpr,
               HAS_BIAS: metile.constexpr):
    """Y[m, rows] = sum over the splits of Part[split, m, rows], in split order (+ bias)."""
    pid = metile.program_id(0)
    m = metile.program_id(1)
    rows = pid * BLOCK + metile.arange(0, BLOCK)
    live = rows < N
    y = metile.zeros((BLOCK,), "f32")
    for s in metile.tile_range(0, splits):
        y = y + metile.load(Part + (s * M + m) * N + rows, mask=live, other=0.0)
    if HAS_BIAS:
        y = y + metile.load(Bias + rows, mask=live, other=0.0).to("f32")
    metile.store(Y + m * N + rows, y.to(Y.dtype), mask=live)


# ----------------------------------------------------------------------------- host side

# Streaming multiprocessors (or cores) per architecture, to size the grid: the device info does
# not report them. Unknown GPUs count as 64.
_UNITS = {"sm_90": 132, "sm_90a": 132, "sm_80": 108, "sm_86": 84, "sm_89": 128}


def compute_units(device=None):
    """How many programs run at once, roughly: SMs on cuda, cores on host devices."""
    device = device or metile.get_device()
    if device.name == "cuda":
        return _UNITS.get(device.architecture, 64)
    if device.name.startswith("metal"):
        return 16
    return os.cpu_count() or 1


def dot_split(n, k, units):
    """The "dot" method's split-K on `units` SMs: the least power of two that gives every SM a
    program (each part keeping at least two BLOCK_K steps), so each program reads the most W
    (DOT_MIN_PROGRAM_BYTES says why)."""
    programs = metile.cdiv(n, DOT_BLOCK_N)
    split = 1
    while programs * split < units and k // (split * 2) >= 2 * DOT_BLOCK_K:
        split *= 2
    return split


def default_config(n, k, m, dtype, device=None):
    """(block_n, block_k, num_warps, split_k, method) for W [n, k] of `dtype` times m rows of x.
    GPUs: 4 warps. From three rows of a 16-bit W, "dot": 64 rows of W a program against the rows
    of x padded to 16 (the matrix units' height), K split until every SM has a program
    (dot_split); for up to four rows, only where each program then reads at least
    DOT_MIN_PROGRAM_BYTES of W, else "fma". "fma" (one or two rows, f32, small W): W tiles of 16
    elements a thread for one row of x, 8 for up to four, 4 beyond (each row carries a
    [BLOCK_N, BLOCK_K] f32 tile through the K loop), split-K until the programs number about 4
    per SM. Host devices: small tiles, no split, "fma"."""
    device = device or metile.get_device()
    if device.name != "cuda" and not device.name.startswith("metal"):
        return 4, 256, 4, 1, "fma"
    num_warps = 4
    units = compute_units(device)
    if m >= DOT_MIN_M and dtype != "f32":
        split = dot_split(n, k, units)
        program_bytes = min(n, DOT_BLOCK_N) * metile.cdiv(k, split) * 2
        if m > FMA_MAX_M or program_bytes >= DOT_MIN_PROGRAM_BYTES:
            return DOT_BLOCK_N, DOT_BLOCK_K, num_warps, split, "dot"
    per_thread = 16 if m == 1 else 8 if m <= 4 else 4
    # [4, 512] for one row of x: on an H100 76-84% of copy from 4096^2 to 16384^2, where
    # [2, 1024] (16-byte runs along K for every thread) measured 52-58% and [8, 256] 49-66%
    # (bench/results/gemv_h100.md).
    block_k = 512 if dtype != "f32" else 256
    block_n = max(1, per_thread * 32 * num_warps // block_k)
    programs = metile.cdiv(n, block_n)
    want = 4 * units
    split = 1
    while programs * split < want and k // (split * 2) >= 2 * block_k:
        split *= 2
    return block_n, block_k, num_warps, split, "fma"


def _dtype_of(a, what):
    if isinstance(a, metile.Buffer):
        return a.metile_dtype
    if isinstance(a, np.ndarray):
        name = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}.get(a.dtype)
        if name is None:
            raise TypeError(f"gemv: {what} has numpy dtype {a.dtype}; use float32 or float16, "
                            "or a metile.Buffer(data=uint16_bits, dtype='bf16') for bf16")
        return name
    raise TypeError(f"gemv: {what} must be a metile.Buffer, a numpy array or a DLPack tensor, "
                    f"got {type(a).__name__}")


def _arg(a, what):
    """(a as a launch argument, its shape, its dtype)."""
    if a is not None and not isinstance(a, (metile.Buffer, np.ndarray)) and hasattr(a, "__dlpack__"):
        a = metile.from_dlpack(a)
    dtype = _dtype_of(a, what)
    if dtype not in DTYPES:
        raise TypeError(f"gemv: {what} is {dtype}; W, x, bias and out must be one of "
                        f"{', '.join(DTYPES)}")
    return a, tuple(a.shape), dtype


_workspaces = weakref.WeakKeyDictionary()


def _workspace(count):
    """An f32 buffer of at least `count` elements for split-K partials, kept per device (the
    launches of one device run in order, so one buffer serves every call on it)."""
    dev = metile.get_device()
    buf = _workspaces.get(dev)
    if buf is None or buf.shape[0] < count:
        buf = metile.Buffer.zeros((count,), "f32", device=dev)
        _workspaces[dev] = buf
    return buf


def _launches(W, x, bias, out, block_n, block_k, split_k, num_warps, method):
    """gemv's arguments checked: (out, [(kernel, grid, args, kwargs), ...]) to run in order."""
    W, wshape, wdtype = _arg(W, "W")
    x, xshape, xdtype = _arg(x, "x")
    if len(wshape) != 2:
        raise ValueError(f"gemv: W must be 2-D [N, K], got shape {wshape}")
    n, k = wshape
    if len(xshape) not in (1, 2) or xshape[-1] != k:
        raise ValueError(f"gemv: x must be [K] or [M, K] with K = {k} (W's columns), got shape "
                         f"{xshape}")
    m = 1 if len(xshape) == 1 else xshape[0]
    if not 1 <= m <= MAX_M:
        raise ValueError(f"gemv: x has {m} rows; gemv takes 1 to {MAX_M} (use a GEMM beyond)")
    if n == 0 or k == 0:
        raise ValueError(f"gemv: W has an empty dimension (shape {wshape})")
    yshape = xshape[:-1] + (n,)
    if bias is not None:
        bias, bshape, _ = _arg(bias, "bias")
        if bshape != (n,):
            raise ValueError(f"gemv: bias must be [N] = ({n},), got shape {bshape}")
    if out is None:
        out = metile.Buffer.zeros(yshape, xdtype)
    else:
        out, oshape, _ = _arg(out, "out")
        if oshape != yshape:
            raise ValueError(f"gemv: out must have shape {yshape}, got {oshape}")
    bn, bk, nw, sk, how = default_config(n, k, m, wdtype)
    how = how if method is None else method
    if how not in METHODS:
        raise ValueError(f"gemv: method must be one of {', '.join(METHODS)}, got {method!r}")
    bn = bn if block_n is None else block_n
    bk = bk if block_k is None else block_k
    nw = nw if num_warps is None else num_warps
    sk = sk if split_k is None else split_k
    for name, v in (("block_n", bn), ("block_k", bk), ("num_warps", nw)):
        if not isinstance(v, int) or v < 1 or v & (v - 1):
            raise ValueError(f"gemv: {name} must be a power of two, got {v!r}")
    if not isinstance(sk, int) or sk < 1:
        raise ValueError(f"gemv: split_k must be a positive int, got {sk!r}")
    # Each part a whole number of BLOCK_K steps, and no empty part.
    sk = max(1, min(sk, metile.cdiv(k, bk)))
    chunk = metile.cdiv(metile.cdiv(k, sk), bk) * bk
    sk = metile.cdiv(k, chunk)
    has_bias = bias is not None
    b = bias if has_bias else out
    grid_n = metile.cdiv(n, bn)
    if how == "dot":
        kernel, args = gemv_dot_kernel, (W, x, b, out, out, n, k, m, chunk)
        consts = dict(M_TILE=M_TILE, BLOCK_N=bn, BLOCK_K=bk, HAS_BIAS=has_bias,
                      num_threads=32 * nw)
    else:
        kernel, args = gemv_kernel, (W, x, b, out, out, n, k, chunk)
        consts = dict(M=m, BLOCK_N=bn, BLOCK_K=bk, HAS_BIAS=has_bias, num_threads=32 * nw)
    if sk == 1:
        return out, [(kernel, (grid_n, 1), args, dict(consts, SPLIT=False))]
    part = _workspace(sk * m * n)
    merge_block = min(1024, metile.next_power_of_2(n))
    args = args[:4] + (part,) + args[5:]
    return out, [(kernel, (grid_n, sk), args, dict(consts, SPLIT=True)),
                 (gemv_merge, (metile.cdiv(n, merge_block), m), (part, b, out, n, sk),
                  dict(M=m, BLOCK=merge_block, HAS_BIAS=has_bias))]


def gemv(W, x, bias=None, out=None, block_n=None, block_k=None, split_k=None, num_warps=None,
         method=None):
    """out = x . W^T (+ bias): W [N, K]; x [K] or [M, K] with 1 <= M <= 16; bias [N]; out [N]
    or [M, N] (x's leading shape), allocated as a metile.Buffer of x's dtype when not given.
    Arguments are metile Buffers, numpy arrays (f32/f16) or DLPack tensors (torch), contiguous.
    block_n/block_k/num_warps/split_k/method default to default_config(); split_k=1 turns
    split-K off; method "fma" (gemv_kernel) or "dot" (gemv_dot_kernel). Returns out."""
    out, launches = _launches(W, x, bias, out, block_n, block_k, split_k, num_warps, method)
    for kernel, grid, args, kwargs in launches:
        kernel[grid](*args, **kwargs)
    return out


def prepare_gemv(W, x, bias=None, out=None, block_n=None, block_k=None, split_k=None,
                 num_warps=None, method=None):
    """gemv's launches checked and compiled once: (run, out), where run() computes out from what
    W, x and bias hold at the time (the arguments are captured; for repeated calls on the same
    buffers, as a decoding loop makes, without gemv's per-call checks)."""
    out, launches = _launches(W, x, bias, out, block_n, block_k, split_k, num_warps, method)
    prepared = [kernel[grid].prepare(*args, **kwargs) for kernel, grid, args, kwargs in launches]

    def run():
        for launch in prepared:
            launch()
    return run, out


# ------------------------------------------------------------------------------ checking

def to_bf16_bits(x):
    """Round-to-nearest-even f32 -> bf16, as uint16 bits (numpy has no bfloat16)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(u):
    return (np.asarray(u).astype(np.uint32) << 16).view(np.float32)


def make(values, dtype):
    """A Buffer of `dtype` holding `values` rounded to it, and the rounded values in float64."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "bf16":
        bits = to_bf16_bits(values)
        return metile.Buffer(data=bits, dtype="bf16"), from_bf16_bits(bits).astype(np.float64)
    a = values.astype(np.float16 if dtype == "f16" else np.float32)
    return metile.Buffer(data=a), a.astype(np.float64)


def values(buf):
    """A Buffer's contents as float64."""
    a = buf.numpy()
    return from_bf16_bits(a).astype(np.float64) if buf.metile_dtype == "bf16" else a.astype(np.float64)


def reference(w, x, bias=None):
    """float64 x . w^T (+ bias)."""
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64).T
    return y if bias is None else y + np.asarray(bias, np.float64)


def tolerance(dtype, k):
    """Bound on |error| / (sum over K of |w x|) for an output of `dtype`: the output's rounding
    plus f32 sums over K."""
    return {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}[dtype] + 1e-7 * k ** 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", type=int, nargs="*", default=[1000, 3000, 3], help="N K [M]")
    ap.add_argument("--dtype", default="f16", choices=DTYPES)
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--split-k", type=int, default=None)
    ap.add_argument("--method", default=None, choices=METHODS)
    a = ap.parse_args()
    if len(a.shape) not in (2, 3):
        ap.error("give N K [M]")
    n, k = a.shape[:2]
    m = a.shape[2] if len(a.shape) == 3 else 1
    print(f"device: {metile.get_device().name}")
    rng = np.random.default_rng(0)
    w, w64 = make(rng.standard_normal((n, k)), a.dtype)
    x, x64 = make(rng.standard_normal((m, k)), a.dtype)
    b, b64 = make(rng.standard_normal(n), a.dtype) if a.bias else (None, None)
    t0 = time.perf_counter()
    y = gemv(w, x, b, split_k=a.split_k, method=a.method)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    scale = np.abs(x64) @ np.abs(w64).T + (0 if b64 is None else np.abs(b64))
    err = (np.abs(values(y) - reference(w64, x64, b64)) / scale).max()
    print(f"{m}x{k} . ({n}x{k})^T, {a.dtype}{', bias' if a.bias else ''}: {ms:.1f} ms (first "
          f"call), max relative error {err:.2e}")
    return 0 if err < tolerance(a.dtype, k) else 1


if __name__ == "__main__":
    sys.exit(main())
