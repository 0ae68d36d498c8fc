"""Flash attention, forward (prefill): softmax(Q K^T * scale) V in one kernel, streaming K and V
in BLOCK_N-row tiles with an online softmax, so the seq x seq score matrix never exists.

Q, K, V and Out are [batch * heads, seq, HEAD_DIM] (f32, f16 or bf16), accumulation in f32.
One program computes BLOCK_M query rows of one (batch, head). Causal attention stops each
program's K/V loop at its last query row (the loop bound depends on the program, so the blocks
wholly above the diagonal are never visited) and masks the diagonal tile. Any seq works: rows
and columns past seq read zeros and take no weight.
The weights are exp2(s * qk_scale_log2 - m) with log2(e) folded into the scale: the raw scores
s are masked and their row max taken before scaling (the scale is positive, so the max of the
scaled scores is the scaled max, bit for bit), which leaves one multiply-add per score ahead of
exp2, the form GPU compilers fuse into one FMA. Lse receives each row's log-sum-exp in those base-2
units, m + log2(l) ([batch * heads, seq], f32): the backward pass (flash_attention_bwd.py)
recomputes the weights from it.

Run: python3 examples/python/flash_attention.py [BATCH*HEADS SEQ HEAD_DIM] [--causal] [--f16]
"""

import math
import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile

LOG2E = 1.4426950408889634


@metile.kernel
def flash_attention_fwd(Q, K, V, Out, Lse, seq, qk_scale_log2,
                        HEAD_DIM: metile.constexpr, BLOCK_M: metile.constexpr,
                        BLOCK_N: metile.constexpr, CAUSAL: metile.constexpr):
    start_m = metile.program_id(0) * BLOCK_M
    bh = metile.program_id(1)
    base = bh * seq * HEAD_DIM                       # this (batch, head)'s matrices
    rows = start_m + metile.arange(0, BLOCK_M)
    q = metile.tile_load(Q + base, start_m, 0, HEAD_DIM, (BLOCK_M, HEAD_DIM), bounds=(seq, HEAD_DIM))

    m_i = metile.full((BLOCK_M,), -float("inf"), "f32")   # running row max (log2 units)
    l_i = metile.zeros((BLOCK_M,), "f32")                  # running row sum of weights
    acc = metile.zeros((BLOCK_M, HEAD_DIM), "f32")
    end = metile.minimum(start_m + BLOCK_M, seq) if CAUSAL else seq
    for start_n in metile.tile_range(0, end, BLOCK_N):
        k = metile.tile_load(K + base, start_n, 0, HEAD_DIM, (BLOCK_N, HEAD_DIM),
                             bounds=(seq, HEAD_DIM))
        v = metile.tile_load(V + base, start_n, 0, HEAD_DIM, (BLOCK_N, HEAD_DIM),
                             bounds=(seq, HEAD_DIM))
        s = metile.dot(q, metile.trans(k))              # raw scores, scaled below
        cols = start_n + metile.arange(0, BLOCK_N)
        keep = cols[None, :] < seq
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = metile.where(keep, s, -float("inf"))
        m_new = metile.maximum(m_i, metile.max(s, axis=1) * qk_scale_log2)
        alpha = metile.exp2(m_i - m_new)          # rescales what was summed under the old max
        p = metile.exp2(s * qk_scale_log2 - m_new[:, None])     # one FMA a score
        l_i = l_i * alpha + metile.sum(p, axis=1)
        acc = metile.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    metile.tile_store(Out + base, start_m, 0, HEAD_DIM, out.to(Out.dtype),
                      (BLOCK_M, HEAD_DIM), bounds=(seq, HEAD_DIM))
    metile.store(Lse + bh * seq + rows, m_i + metile.log2(l_i), mask=rows < seq)


def default_block(dim):
    """Square blocks that fit the device: Metal has 32 KB of threadgroup memory."""
    return 16 if metile.get_device().name.startswith("metal") or dim > 64 else 32


def default_launch(dim, dtype):
    """(BLOCK_M, BLOCK_N, num_threads or None for the kernel's default) when the caller names no
    blocks: on cuda, f16/bf16 at head_dim 64 or 128 take 128x128 blocks over 256 threads, the
    form whose two dots run on Hopper's warpgroup atoms and the fastest measured on an H100
    (bench/results/attention_h100.md); elsewhere default_block's square blocks."""
    if metile.get_device().name == "cuda" and dtype in ("f16", "bf16") and dim in (64, 128):
        return 128, 128, 256
    return default_block(dim), default_block(dim), None


DTYPES = ("f32", "f16", "bf16")


def dtype_name(x):
    """The metile dtype of a metile Buffer or a numpy array ("f32", "f16", "bf16", ...)."""
    name = getattr(x, "metile_dtype", None)
    if name is None:
        name = {"float32": "f32", "float16": "f16"}.get(str(x.dtype), str(x.dtype))
    return name


def check_args(who, shape, named, lse=None):
    """Raises a ValueError or TypeError naming the argument unless every array in `named`
    (name -> array) is shaped `shape` ([batch*heads, seq, head_dim], head_dim a power of two
    from 16 to 256: the dots' matrix atoms are 16 wide) with one dtype of DTYPES, and `lse`
    (name, array), when given, is f32 shaped [batch*heads, seq]."""
    if len(shape) != 3:
        raise ValueError(f"{who}: q must be [batch*heads, seq, head_dim]; got shape {tuple(shape)}")
    dim = shape[2]
    if dim < 16 or dim > 256 or dim & (dim - 1):
        raise ValueError(f"{who}: head_dim {dim} must be a power of two from 16 to 256")
    first = next(iter(named))
    dtype = dtype_name(named[first])
    if dtype not in DTYPES:
        raise TypeError(f"{who}: {first} is {dtype}; attention takes {', '.join(DTYPES)}")
    for name, x in named.items():
        if tuple(x.shape) != tuple(shape):
            raise ValueError(f"{who}: {name} has shape {tuple(x.shape)}; expected "
                             f"{tuple(shape)}, the shape of {first}")
        if dtype_name(x) != dtype:
            raise TypeError(f"{who}: {name} is {dtype_name(x)} but {first} is {dtype}; "
                            f"{', '.join(named)} must share one dtype")
    if lse is not None:
        name, x = lse
        if tuple(x.shape) != tuple(shape[:2]):
            raise ValueError(f"{who}: {name} has shape {tuple(x.shape)}; expected "
                             f"{tuple(shape[:2])} [batch*heads, seq]")
        if dtype_name(x) != "f32":
            raise TypeError(f"{who}: {name} is {dtype_name(x)}; the log-sum-exp is f32")


def attention(q, k, v, out, causal=False, block_m=None, block_n=None, lse=None):
    """Launches the kernel over numpy arrays or metile Buffers shaped [batch*heads, seq, dim].
    Returns the rows' log-sum-exp (base 2, see above) in `lse`, an f32 [batch*heads, seq]
    array or Buffer, allocated when not given; flash_attention_bwd.attention_backward takes it."""
    check_args("flash_attention", q.shape, {"q": q, "k": k, "v": v, "out": out},
               None if lse is None else ("lse", lse))
    bh, seq, dim = q.shape
    if lse is None:
        lse = metile.Buffer.zeros((bh, seq), "f32")
    dflt_m, dflt_n, threads = default_launch(dim, dtype_name(q))
    if block_m or block_n:
        threads = None  # the caller's blocks take the kernel's default thread count
    block_m = block_m or dflt_m
    block_n = block_n or dflt_n
    scale = LOG2E / math.sqrt(dim)
    grid = (metile.cdiv(seq, block_m), bh)
    extra = {} if threads is None else {"num_threads": threads}
    flash_attention_fwd[grid](q, k, v, out, lse, seq, scale, HEAD_DIM=dim, BLOCK_M=block_m,
                              BLOCK_N=block_n, CAUSAL=causal, **extra)
    return lse


def reference(q, k, v, causal=False, with_lse=False):
    """float64 numpy attention, the check for every device; with_lse: (out, the rows'
    log-sum-exp of the scaled scores in base 2, as the kernel writes Lse)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    out = (p / p.sum(-1, keepdims=True)) @ v
    if not with_lse:
        return out
    return out, (m[..., 0] + np.log(p.sum(-1))) * LOG2E


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    bh, seq, dim = (int(a) for a in args[:3]) if len(args) >= 3 else (4, 200, 64)
    causal = "--causal" in sys.argv
    dtype = np.float16 if "--f16" in sys.argv else np.float32
    print(f"device: {metile.get_device().name}")
    q, k, v = (np.random.randn(bh, seq, dim).astype(dtype) for _ in range(3))
    out = np.zeros_like(q)
    t0 = time.perf_counter()
    attention(q, k, v, out, causal)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    err = np.abs(out - reference(q, k, v, causal)).max()
    print(f"{bh}x{seq}x{dim} causal={causal} {np.dtype(dtype).name}: {ms:.1f} ms "
          f"(first call: trace, compile, run), max |error| {err:.2e}")
    tol = 2e-2 if dtype == np.float16 else 5e-3 if metile.get_device().name == "cuda" else 1e-3  # TF32
    return 0 if err < tol else 1


if __name__ == "__main__":
    sys.exit(main())
