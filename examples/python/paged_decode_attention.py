"""Decode attention over a paged KV cache (as vLLM keeps one): the cache is a pool of pages of
PAGE tokens, and each sequence's block table lists the pages that hold its tokens in order, so
sequences of different lengths share one pool without copying.

Q and Out are [batch, HEADS, HEAD_DIM]; K and V are [pages, KV_HEADS, PAGE, HEAD_DIM] (f32, f16
or bf16); block_tables is [batch, max_pages] int32 (page j of sequence b is
block_tables[b, j]); seq_lens is [batch] int32, each at least 1. `splits` programs per (batch,
head) each take a run of pages and write a partial result; decode_attention's merge kernel
combines them (a split past a sequence's end has no keys and weight 0).

Run: python3 examples/python/paged_decode_attention.py [BATCH HEADS KV_HEADS MAX_SEQ HEAD_DIM] [--page 16] [--splits 4]
"""

import argparse
import math
import sys

import numpy as np

import _path  # noqa: F401  (source checkouts)
import decode_attention
import metile


@metile.kernel
def paged_decode_partial(Q, K, V, Tables, Lens, Acc, Max, Sum, max_pages, pages_per_split,
                         qk_scale_log2, HEADS: metile.constexpr, KV_HEADS: metile.constexpr,
                         HEAD_DIM: metile.constexpr, PAGE: metile.constexpr):
    bh = metile.program_id(0)                  # batch * HEADS + head
    split = metile.program_id(1)
    b = bh // HEADS
    kv = (bh % HEADS) // (HEADS // KV_HEADS)
    seq = metile.load(Lens + b)
    d = metile.arange(0, HEAD_DIM)
    q = metile.load(Q + bh * HEAD_DIM + d).to("f32")
    first = split * pages_per_split
    last = metile.minimum(first + pages_per_split, (seq + PAGE - 1) // PAGE)

    m_i = -float("inf")
    l_i = 0.0
    acc = metile.zeros((HEAD_DIM,), "f32")
    for j in metile.tile_range(first, last, 1):
        page = metile.load(Tables + b * max_pages + j)
        base = (page * KV_HEADS + kv) * (PAGE * HEAD_DIM)
        keys = seq - j * PAGE                  # tokens of this page that the sequence holds
        k = metile.tile_load(K + base, 0, 0, HEAD_DIM, (PAGE, HEAD_DIM), bounds=(keys, HEAD_DIM))
        v = metile.tile_load(V + base, 0, 0, HEAD_DIM, (PAGE, HEAD_DIM), bounds=(keys, HEAD_DIM))
        m_i, l_i, acc = decode_attention.attend_block(q, k, v, metile.arange(0, PAGE) < keys, m_i,
                                                      l_i, acc, qk_scale_log2)
    part = bh * metile.num_programs(1) + split
    metile.store(Acc + part * HEAD_DIM + d, acc)
    metile.store(Max + part + metile.arange(0, 1), metile.full((1,), m_i, "f32"))
    metile.store(Sum + part + metile.arange(0, 1), metile.full((1,), l_i, "f32"))


def decode(q, k, v, block_tables, seq_lens, out, splits=4):
    """q, out: [batch, heads, dim]; k, v: [pages, kv_heads, page, dim]; block_tables: [batch,
    max_pages] int32; seq_lens: [batch] int32 (numpy arrays or Buffers)."""
    batch, heads, dim = q.shape
    kv_heads, page = k.shape[1], k.shape[2]
    max_pages = block_tables.shape[1]
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if page & (page - 1):
        raise ValueError(f"the page size ({page}) must be a power of two")
    lens = np.asarray(seq_lens.numpy() if isinstance(seq_lens, metile.Buffer) else seq_lens)
    if lens.shape != (batch,) or lens.min() < 1 or lens.max() > max_pages * page:
        raise ValueError(f"seq_lens must hold {batch} lengths in 1..{max_pages * page} (the block "
                         f"table's {max_pages} pages of {page}), got {lens.tolist()}")
    splits = max(1, min(splits, max_pages))
    per_split = metile.cdiv(max_pages, splits)
    acc, m, s = decode_attention.workspace(batch, heads, dim, splits)
    paged_decode_partial[(batch * heads, splits)](
        q, k, v, block_tables, seq_lens, acc, m, s, max_pages, per_split,
        decode_attention.LOG2E / math.sqrt(dim), HEADS=heads, KV_HEADS=kv_heads, HEAD_DIM=dim,
        PAGE=page)
    decode_attention.decode_attention_merge[(batch * heads,)](
        acc, m, s, out, splits, HEAD_DIM=dim, SPLITS_P2=metile.next_power_of_2(splits))


def reference(q, k, v, block_tables, seq_lens):
    """float64 numpy: each sequence's keys and values gathered from its pages."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    out = np.zeros_like(q)
    for b, n in enumerate(np.asarray(seq_lens)):
        pages = np.asarray(block_tables)[b, :metile.cdiv(int(n), k.shape[2])]
        keys = np.concatenate(list(k[pages]), axis=1)[:, :n]     # [kv_heads, n, dim]
        vals = np.concatenate(list(v[pages]), axis=1)[:, :n]
        keys, vals = np.repeat(keys, group, axis=0), np.repeat(vals, group, axis=0)
        s = np.einsum("hd,hnd->hn", q[b], keys) / math.sqrt(q.shape[-1])
        p = np.exp(s - s.max(-1, keepdims=True))
        out[b] = np.einsum("hn,hnd->hd", p / p.sum(-1, keepdims=True), vals)
    return out


def random_cache(batch, kv_heads, max_seq, dim, page, dtype, rng):
    """A shuffled page pool for `batch` sequences of random lengths 1..max_seq."""
    max_pages = metile.cdiv(max_seq, page)
    lens = rng.integers(1, max_seq + 1, size=batch).astype(np.int32)
    pool = batch * max_pages + 3                 # spare pages no sequence uses
    order = rng.permutation(pool).astype(np.int32)
    tables = order[:batch * max_pages].reshape(batch, max_pages)
    k, v = (rng.standard_normal((pool, kv_heads, page, dim)).astype(dtype) for _ in range(2))
    return k, v, tables, lens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", type=int, nargs="*", default=[3, 8, 2, 1000, 64],
                    help="BATCH HEADS KV_HEADS MAX_SEQ HEAD_DIM")
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--splits", type=int, default=4)
    a = ap.parse_args()
    if len(a.shape) != 5:
        ap.error("give all five of BATCH HEADS KV_HEADS MAX_SEQ HEAD_DIM")
    batch, heads, kv_heads, max_seq, dim = a.shape
    rng = np.random.default_rng(0)
    print(f"device: {metile.get_device().name}")
    q = rng.standard_normal((batch, heads, dim)).astype(np.float32)
    k, v, tables, lens = random_cache(batch, kv_heads, max_seq, dim, a.page, np.float32, rng)
    out = np.zeros_like(q)
    decode(q, k, v, tables, lens, out, a.splits)
    metile.synchronize()
    err = np.abs(out - reference(q, k, v, tables, lens)).max()
    print(f"batch {batch}, heads {heads}/{kv_heads}, lengths {list(lens)}, page {a.page}, "
          f"splits {a.splits}: max |error| {err:.2e}")
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
