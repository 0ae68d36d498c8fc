"""Decode attention: one new query token per head against a KV cache, for MHA, GQA and MQA
(HEADS query heads share KV_HEADS key/value heads), f32 accumulation, any cache length.

Q and Out are [batch, HEADS, HEAD_DIM]; K and V are [batch, KV_HEADS, seq, HEAD_DIM] (f32, f16 or
bf16). Short caches run single-pass: one program per (batch, head) streams the cache with an
online softmax. Long caches split the sequence: `splits` programs per (batch, head) each write a
partial result (unnormalized output, running max, running sum), and a merge kernel rescales the
partials to the global max and combines them. Scores use exp2 with log2(e) folded into the scale.

Run: python3 examples/python/decode_attention.py [BATCH HEADS KV_HEADS SEQ HEAD_DIM] [--splits S] [--f16]
"""

import argparse
import math
import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile

LOG2E = 1.4426950408889634


def attend_block(q, k, v, keep, m_i, l_i, acc, qk_scale_log2):
    """One [BLOCK_N, HEAD_DIM] block of keys `k` and values `v` folded into one query's online
    softmax: returns the new running max, sum of weights and unnormalized output. `keep` marks
    the block's keys that exist; the others weigh 0. Called from the kernels while tracing."""
    s = metile.sum(k.to("f32") * q[None, :], axis=1) * qk_scale_log2
    s = metile.where(keep, s, -float("inf"))
    m_new = metile.maximum(m_i, metile.max(s))
    alpha = metile.exp2(m_i - m_new)
    p = metile.exp2(s - m_new)
    return (m_new, l_i * alpha + metile.sum(p),
            acc * alpha + metile.sum(p[:, None] * v.to("f32"), axis=0))


def group_rows(heads, kv_heads):
    """decode_attention_grouped's GROUP_P2: the query heads of one KV head, at least 16 rows (the
    dots' matrix atoms are 16 rows high)."""
    return max(16, metile.next_power_of_2(heads // kv_heads))


@metile.kernel
def decode_attention_partial(Q, K, V, Out, Acc, Max, Sum, seq, chunk, qk_scale_log2,
                             HEADS: metile.constexpr, KV_HEADS: metile.constexpr,
                             HEAD_DIM: metile.constexpr, BLOCK_N: metile.constexpr,
                             SPLIT: metile.constexpr):
    bh = metile.program_id(0)                  # batch * HEADS + head
    split = metile.program_id(1)
    kv = (bh // HEADS) * KV_HEADS + (bh % HEADS) // (HEADS // KV_HEADS)
    kv_base = kv * seq * HEAD_DIM
    d = metile.arange(0, HEAD_DIM)
    q = metile.load(Q + bh * HEAD_DIM + d).to("f32")
    start = split * chunk
    end = metile.minimum(start + chunk, seq)

    m_i = -float("inf")
    l_i = 0.0
    acc = metile.zeros((HEAD_DIM,), "f32")
    for n in metile.tile_range(start, end, BLOCK_N):
        k = metile.tile_load(K + kv_base, n, 0, HEAD_DIM, (BLOCK_N, HEAD_DIM), bounds=(end, HEAD_DIM))
        v = metile.tile_load(V + kv_base, n, 0, HEAD_DIM, (BLOCK_N, HEAD_DIM), bounds=(end, HEAD_DIM))
        m_i, l_i, acc = attend_block(q, k, v, n + metile.arange(0, BLOCK_N) < end, m_i, l_i, acc,
                                     qk_scale_log2)
    if SPLIT:
        part = bh * metile.num_programs(1) + split
        metile.store(Acc + part * HEAD_DIM + d, acc)
        metile.store(Max + part + metile.arange(0, 1), metile.full((1,), m_i, "f32"))
        metile.store(Sum + part + metile.arange(0, 1), metile.full((1,), l_i, "f32"))
    else:
        metile.store(Out + bh * HEAD_DIM + d, (acc / l_i).to(Out.dtype))


@metile.kernel
def decode_attention_grouped(Q, K, V, Acc, Max, Sum, seq, chunk, qk_scale_log2,
                             HEADS: metile.constexpr, KV_HEADS: metile.constexpr,
                             HEAD_DIM: metile.constexpr, BLOCK_N: metile.constexpr,
                             GROUP_P2: metile.constexpr):
    """GQA/MQA: one program per (batch, KV head, split) serves the HEADS // KV_HEADS query heads
    that share the KV head (rows of a [GROUP_P2, HEAD_DIM] query tile, the rows past the group
    masked), so each K/V block is read once for all of them; its partials go where
    decode_attention_partial's would."""
    bk = metile.program_id(0)                  # batch * KV_HEADS + kv head
    split = metile.program_id(1)
    group = HEADS // KV_HEADS
    g = metile.arange(0, GROUP_P2)
    live = g < group
    heads = (bk // KV_HEADS) * HEADS + (bk % KV_HEADS) * group + g
    d = metile.arange(0, HEAD_DIM)
    q = metile.load(Q + heads[:, None] * HEAD_DIM + d[None, :], mask=live[:, None], other=0.0)
    kv_base = bk * seq * HEAD_DIM
    start = split * chunk
    end = metile.minimum(start + chunk, seq)

    m_i = metile.full((GROUP_P2,), -float("inf"), "f32")
    l_i = metile.zeros((GROUP_P2,), "f32")
    acc = metile.zeros((GROUP_P2, HEAD_DIM), "f32")
    for n in metile.tile_range(start, end, BLOCK_N):
        k = metile.tile_load(K + kv_base, n, 0, HEAD_DIM, (BLOCK_N, HEAD_DIM), bounds=(end, HEAD_DIM))
        v = metile.tile_load(V + kv_base, n, 0, HEAD_DIM, (BLOCK_N, HEAD_DIM), bounds=(end, HEAD_DIM))
        s = metile.dot(q, metile.trans(k)) * qk_scale_log2
        s = metile.where((n + metile.arange(0, BLOCK_N) < end)[None, :], s, -float("inf"))
        m_new = metile.maximum(m_i, metile.max(s, axis=1))
        alpha = metile.exp2(m_i - m_new)
        p = metile.exp2(s - m_new[:, None])
        l_i = l_i * alpha + metile.sum(p, axis=1)
        acc = metile.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    part = heads * metile.num_programs(1) + split
    metile.store(Acc + part[:, None] * HEAD_DIM + d[None, :], acc, mask=live[:, None])
    metile.store(Max + part, m_i, mask=live)
    metile.store(Sum + part, l_i, mask=live)


@metile.kernel
def decode_attention_merge(Acc, Max, Sum, Out, splits,
                           HEAD_DIM: metile.constexpr, SPLITS_P2: metile.constexpr):
    bh = metile.program_id(0)
    s = metile.arange(0, SPLITS_P2)
    live = s < splits
    m = metile.load(Max + bh * splits + s, mask=live, other=-float("inf"))
    l_part = metile.load(Sum + bh * splits + s, mask=live, other=0.0)
    m_all = metile.max(m)
    w = metile.where(live, metile.exp2(m - m_all), 0.0)   # a split with no keys has weight 0
    acc = metile.tile_load(Acc + bh * splits * HEAD_DIM, 0, 0, HEAD_DIM, (SPLITS_P2, HEAD_DIM),
                           bounds=(splits, HEAD_DIM))
    out = metile.sum(acc * w[:, None], axis=0) / metile.sum(l_part * w)
    metile.store(Out + bh * HEAD_DIM + metile.arange(0, HEAD_DIM), out.to(Out.dtype))


def split_plan(seq, splits, block_n):
    """(splits, chunk): at most one split per block of keys, each split a whole number of blocks."""
    splits = max(1, min(splits, metile.cdiv(seq, block_n)))
    return splits, metile.cdiv(metile.cdiv(seq, splits), block_n) * block_n


def workspace(batch, heads, dim, splits):
    """The partials of split-KV decoding: unnormalized outputs, running maxima, running sums."""
    parts = batch * heads * splits
    return (metile.Buffer.zeros((parts, dim)), metile.Buffer.zeros((parts,)),
            metile.Buffer.zeros((parts,)))


# Two programs per SM of an H100/H200 (132 SMs) keep enough K/V bytes in flight: with the
# grouped kernel at 64-key blocks the cache streams at 94-100% of copy bandwidth for MHA and
# 83-97% for GQA 32/8 (8k and 32k tokens, bench/results/decode_h100.md).
GPU_PROGRAMS = 2 * 132
SPLIT_KEYS = 4096  # and no split longer than this, so long caches still spread out


def plan(batch, heads, kv_heads, seq):
    """(grouped, splits, block_n) that decode() uses on the current device when not given."""
    if metile.get_device().name == "cuda":
        return True, max(GPU_PROGRAMS // (batch * kv_heads), metile.cdiv(seq, SPLIT_KEYS), 1), 64
    # Host devices run a program per head on their own cores; Metal is not measured yet, so
    # it keeps the per-head kernel.
    return False, 1, 32


def decode(q, k, v, out, splits=None, block_n=None, scratch=None, grouped=None):
    """q, out: [batch, heads, dim]; k, v: [batch, kv_heads, seq, dim] (numpy arrays or Buffers).
    splits > 1 runs the split-KV form with its merge kernel; `scratch` (from workspace() with
    the same splits) saves allocating the partials on every call. grouped=True runs
    decode_attention_grouped (one K/V read per group of query heads) and the merge kernel.
    What is left as None comes from plan()."""
    batch, heads, dim = q.shape
    kv_heads, seq = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    auto = plan(batch, heads, kv_heads, seq)
    grouped = auto[0] if grouped is None else grouped
    splits = auto[1] if splits is None else splits
    block_n = auto[2] if block_n is None else block_n
    if grouped and metile.get_device().name.startswith("metal"):
        # Metal's 32 KB of threadgroup memory holds the grouped kernel's staged operands for
        # blocks of 16 keys (8 at 128 dims).
        block_n = min(block_n, 16 if dim <= 64 else 8)
    asked = splits
    splits, chunk = split_plan(seq, splits, block_n)
    acc, m, s = scratch if scratch is not None else workspace(batch, heads, dim, splits)
    if acc.shape[0] < batch * heads * splits:
        raise ValueError(f"scratch holds {acc.shape[0]} partials; {asked} splits of this batch "
                         f"need {batch * heads * splits} (use workspace() with the same splits)")
    scale = LOG2E / math.sqrt(dim)
    if grouped:
        decode_attention_grouped[(batch * kv_heads, splits)](
            q, k, v, acc, m, s, seq, chunk, scale, HEADS=heads, KV_HEADS=kv_heads, HEAD_DIM=dim,
            BLOCK_N=block_n, GROUP_P2=group_rows(heads, kv_heads))
        decode_attention_merge[(batch * heads,)](acc, m, s, out, splits, HEAD_DIM=dim,
                                                 SPLITS_P2=metile.next_power_of_2(splits))
        return
    decode_attention_partial[(batch * heads, splits)](
        q, k, v, out, acc, m, s, seq, chunk, scale, HEADS=heads, KV_HEADS=kv_heads,
        HEAD_DIM=dim, BLOCK_N=block_n, SPLIT=splits > 1)
    if splits > 1:
        decode_attention_merge[(batch * heads,)](acc, m, s, out, splits, HEAD_DIM=dim,
                                                 SPLITS_P2=metile.next_power_of_2(splits))


def reference(q, k, v):
    """float64 numpy decode attention (GQA by repeating the KV heads)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhd,bhnd->bhn", q, k) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhn,bhnd->bhd", p / p.sum(-1, keepdims=True), v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", type=int, nargs="*", default=[2, 8, 2, 1000, 64],
                    help="BATCH HEADS KV_HEADS SEQ HEAD_DIM")
    ap.add_argument("--splits", type=int, default=None, help="default: plan()'s choice")
    ap.add_argument("--f16", action="store_true")
    a = ap.parse_args()
    if len(a.shape) != 5:
        ap.error("give all five of BATCH HEADS KV_HEADS SEQ HEAD_DIM")
    batch, heads, kv_heads, seq, dim = a.shape
    grouped, splits, _ = plan(batch, heads, kv_heads, seq)
    splits = a.splits or splits
    dtype = np.float16 if a.f16 else np.float32
    print(f"device: {metile.get_device().name}")
    q = np.random.randn(batch, heads, dim).astype(dtype)
    k, v = (np.random.randn(batch, kv_heads, seq, dim).astype(dtype) for _ in range(2))
    out = np.zeros_like(q)
    t0 = time.perf_counter()
    decode(q, k, v, out, splits)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    err = np.abs(out - reference(q, k, v)).max()
    print(f"batch {batch}, heads {heads}/{kv_heads}, seq {seq}, dim {dim}, splits {splits}"
          f"{' (grouped)' if grouped else ''}, "
          f"{np.dtype(dtype).name}: {ms:.1f} ms (first call), max |error| {err:.2e}")
    return 0 if err < (1e-2 if dtype == np.float16 else 1e-4) else 1


if __name__ == "__main__":
    sys.exit(main())
