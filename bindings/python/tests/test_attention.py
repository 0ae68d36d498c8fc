"""Attention written in metile's tile language (examples/python/flash_attention.py and
decode_attention.py) against float64 numpy on every device: flash attention forward (causal or
not, head_dim 64 and 128, f32/f16/bf16, sequence lengths that are not a multiple of the block;
the output and the rows' log-sum-exp the backward pass starts from)
and decode attention (MHA, GQA, MQA; single-pass and split-KV with the merge kernel; a paged
KV cache read through block tables)."""

import os
import sys

import numpy as np
import pytest

import metile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples", "python"))
import decode_attention  # noqa: E402
import flash_attention  # noqa: E402
import paged_decode_attention  # noqa: E402

# Relative to the largest |reference| value; f16/bf16 round the inputs (the reference sees the
# rounded inputs) and the probabilities fed to the second dot, f32 runs TF32 on GPU matrix units.
TOL = {"f32": 2e-3, "f16": 1e-2, "bf16": 4e-2}


def _to_bf16_bits(x):
    """Round-to-nearest-even f32 -> bf16, as uint16 bits (numpy has no bfloat16)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def _inputs(shapes, dtype):
    """Random buffers of `dtype` and the values they hold, as float64 arrays."""
    bufs, vals = [], []
    for shape in shapes:
        x = np.random.randn(*shape).astype(np.float32)
        if dtype == "bf16":
            bits = _to_bf16_bits(x)
            bufs.append(metile.Buffer(data=bits, dtype="bf16"))
            vals.append(_from_bf16_bits(bits).astype(np.float64))
        else:
            x = x.astype(np.float16 if dtype == "f16" else np.float32)
            bufs.append(metile.Buffer(data=x))
            vals.append(x.astype(np.float64))
    return bufs, vals


def _values(buf):
    a = buf.numpy()
    return _from_bf16_bits(a) if buf.metile_dtype == "bf16" else a.astype(np.float64)


def _check(got, ref, dtype):
    err = np.abs(got - ref).max() / max(1.0, np.abs(ref).max())
    assert np.isfinite(got).all() and err < TOL[dtype], f"relative error {err:.2e}"


@pytest.mark.pairwise("dtype", "causal", "head_dim")
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_flash_attention_forward(device, fast, dtype, causal, head_dim):
    bh, seq = (3, 150) if fast else (2, 37)
    block = flash_attention.default_block(head_dim)
    (q, k, v), vals = _inputs([(bh, seq, head_dim)] * 3, dtype)
    out = metile.Buffer.zeros((bh, seq, head_dim), dtype=dtype)
    lse = flash_attention.attention(q, k, v, out, causal, block_m=block, block_n=block)
    ref, ref_lse = flash_attention.reference(*vals, causal, with_lse=True)
    _check(_values(out), ref, dtype)
    _check(lse.numpy().astype(np.float64), ref_lse, "f32")   # f32: the scores' TF32 rounding


def test_flash_attention_blocks_of_different_shapes(device):
    """BLOCK_M != BLOCK_N, a sequence shorter than one block, and one row."""
    big = 2 * flash_attention.default_block(64)
    for seq, bm, bn in ((5, 16, 8), (1, 16, 16), (40, big, 16), (40, 8, big)):
        (q, k, v), vals = _inputs([(1, seq, 64)] * 3, "f32")
        out = metile.Buffer.zeros((1, seq, 64))
        lse = metile.Buffer(data=np.full((1, seq), np.nan, np.float32))
        flash_attention.attention(q, k, v, out, True, block_m=bm, block_n=bn, lse=lse)
        ref, ref_lse = flash_attention.reference(*vals, True, with_lse=True)
        _check(_values(out), ref, "f32")
        _check(lse.numpy().astype(np.float64), ref_lse, "f32")


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_default_launch(device, causal):
    """attention() without blocks takes default_launch's: on cuda 128x128 blocks over 256
    threads for f16 (both dots on sm_90's warpgroup atoms), elsewhere default_block's; a
    sequence no multiple of the blocks."""
    bm, bn, threads = flash_attention.default_launch(64, "f16")
    if device.name == "cuda":
        assert (bm, bn, threads) == (128, 128, 256)
    else:
        assert threads is None and bm == bn == flash_attention.default_block(64)
    (q, k, v), vals = _inputs([(2, 150, 64)] * 3, "f16")
    out = metile.Buffer.zeros((2, 150, 64), dtype="f16")
    lse = flash_attention.attention(q, k, v, out, causal)
    ref, ref_lse = flash_attention.reference(*vals, causal, with_lse=True)
    _check(_values(out), ref, "f16")
    _check(lse.numpy().astype(np.float64), ref_lse, "f32")


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_masks_only_the_blocks_that_need_it(device, causal):
    """whole_tiles runs the K/V blocks wholly inside seq and, causal, wholly left of the program's
    first row without the scores' mask, behind one branch (METILE_GPU_OFF=whole_blocks): a
    ragged last block, BLOCK_M != BLOCK_N both ways (several diagonal blocks a program, or a
    diagonal block reaching past the program's rows), a sequence shorter than a block, one row."""
    big = 32 if device.name.startswith("metal") else 128   # Metal: 32 KB of threadgroup memory
    for seq, bm, bn in ((2 * big + big // 2 + 3, big, big // 2), (2 * big + 5, big // 2, big),
                        (big // 2 - 5, big, big // 2), (1, big // 2, big)):
        (q, k, v), vals = _inputs([(2, seq, 32)] * 3, "f32")
        out = metile.Buffer.zeros((2, seq, 32))
        lse = flash_attention.attention(q, k, v, out, causal, block_m=bm, block_n=bn)
        ref, ref_lse = flash_attention.reference(*vals, causal, with_lse=True)
        _check(_values(out), ref, "f32")
        _check(lse.numpy().astype(np.float64), ref_lse, "f32")


@pytest.mark.parametrize("dtype,causal,off", [("f16", False, ""), ("bf16", True, ""),
                                              ("f16", True, "warpgroup_register_a"),
                                              ("bf16", False, "warpgroup_kmajor_b")])
def test_flash_attention_on_warpgroup_blocks(device, monkeypatch, dtype, causal, off):
    """BLOCK_M 128, BLOCK_N 64 over 256 threads, the blocks that put both dots on sm_90's
    warpgroup atom (K^T read K-major, P from the scores' registers: dot_choices.cpp); a sequence
    no multiple of either block. The switches (METILE_GPU_OFF) only change cuda: elsewhere the
    default form runs once. Metal's 32 KB of threadgroup memory holds no such blocks."""
    if device.name.startswith("metal"):
        pytest.skip("Metal takes the example's 16- and 32-row blocks (default_block)")
    if off and device.name != "cuda":
        pytest.skip("the wgmma switches change only cuda's compile")
    if off:  # (dtype, causal): a specialization no other case compiles, as the switch is read
        monkeypatch.setenv("METILE_GPU_OFF", off)  # when a kernel compiles
    bh, seq, dim = 2, 150, 64
    (q, k, v), vals = _inputs([(bh, seq, dim)] * 3, dtype)
    out = metile.Buffer.zeros((bh, seq, dim), dtype=dtype)
    lse = metile.Buffer.zeros((bh, seq), "f32")
    launch = flash_attention.flash_attention_fwd[(metile.cdiv(seq, 128), bh)]
    args = (q, k, v, out, lse, seq, flash_attention.LOG2E / dim ** 0.5)
    consts = dict(HEAD_DIM=dim, BLOCK_M=128, BLOCK_N=64, CAUSAL=causal, num_threads=256)
    launch(*args, **consts)
    ref, ref_lse = flash_attention.reference(*vals, causal, with_lse=True)
    _check(_values(out), ref, dtype)
    _check(lse.numpy().astype(np.float64), ref_lse, "f32")
    if device.name == "cuda":
        src = launch.compile(*args, **consts).source("cuda")
        if "wgmma.mma_async" in src:  # sm_90: K^T K-major (flag 0), P in registers (tnspB 1)
            assert (", p, 1, 1, 0, 0;" in src) == (off != "warpgroup_kmajor_b")
            assert (", p, 1, 1, 1;" in src) == (off == ""), src


@pytest.mark.pairwise("heads", "kv_heads", "splits", "dtype")
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_decode_attention(device, fast, heads, kv_heads, splits, dtype):
    batch, seq = (2, 777) if fast else (1, 101)
    (q, k, v), vals = _inputs([(batch, heads, 64), (batch, kv_heads, seq, 64),
                               (batch, kv_heads, seq, 64)], dtype)
    out = metile.Buffer.zeros((batch, heads, 64), dtype=dtype)
    decode_attention.decode(q, k, v, out, splits=splits, grouped=False)
    _check(_values(out), decode_attention.reference(*vals), dtype)


@pytest.mark.pairwise("heads", "kv_heads", "splits", "dtype")
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_decode_attention_grouped(device, fast, heads, kv_heads, splits, dtype):
    """One program per KV head serving its group of query heads (a 16-row query tile, rows past
    the group masked): the same results as one program per query head."""
    batch, seq = (2, 777) if fast else (1, 101)
    (q, k, v), vals = _inputs([(batch, heads, 64), (batch, kv_heads, seq, 64),
                               (batch, kv_heads, seq, 64)], dtype)
    out = metile.Buffer.zeros((batch, heads, 64), dtype=dtype)
    decode_attention.decode(q, k, v, out, splits=splits, grouped=True)
    _check(_values(out), decode_attention.reference(*vals), dtype)


@pytest.mark.parametrize("heads,kv_heads,seq", [(4, 4, 300), (8, 2, 1000)], ids=["mha", "gqa"])
def test_decode_attention_plans_its_own_launch(device, heads, kv_heads, seq):
    """Left to plan(): the grouped kernel with enough splits to fill a GPU on cuda, one program
    per head elsewhere; the result is the same."""
    (q, k, v), vals = _inputs([(2, heads, 128), (2, kv_heads, seq, 128),
                               (2, kv_heads, seq, 128)], "f16")
    out = metile.Buffer.zeros((2, heads, 128), dtype="f16")
    grouped, splits, block_n = decode_attention.plan(2, heads, kv_heads, seq)
    assert (grouped, splits > 1) == ((True, True) if device.name == "cuda" else (False, False))
    decode_attention.decode(q, k, v, out)
    _check(_values(out), decode_attention.reference(*vals), "f16")


def test_decode_attention_head_dim_128_more_splits_than_blocks(device):
    """More splits asked for than the cache has blocks: the count is capped, nothing is lost."""
    (q, k, v), vals = _inputs([(1, 2, 128), (1, 1, 40, 128), (1, 1, 40, 128)], "f32")
    out = metile.Buffer.zeros((1, 2, 128))
    decode_attention.decode(q, k, v, out, splits=16)
    _check(_values(out), decode_attention.reference(*vals), "f32")


def test_decode_attention_reuses_a_workspace_and_rejects_one_too_small(device):
    (q, k, v), vals = _inputs([(1, 4, 64), (1, 2, 300, 64), (1, 2, 300, 64)], "f32")
    out = metile.Buffer.zeros((1, 4, 64))
    scratch = decode_attention.workspace(1, 4, 64, 4)
    for _ in range(2):
        out.numpy()[...] = np.nan
        decode_attention.decode(q, k, v, out, splits=4, scratch=scratch)
        _check(_values(out), decode_attention.reference(*vals), "f32")
    with pytest.raises(ValueError, match="scratch holds 8 partials; 4 splits of this batch need 16"):
        decode_attention.decode(q, k, v, out, splits=4, scratch=decode_attention.workspace(1, 4, 64, 2))


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (8, 2)], ids=["mha", "gqa"])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_paged_decode_attention(device, fast, heads, kv_heads, splits, dtype):
    """Sequences of different lengths (a last page partly used) on shuffled pages of one pool."""
    rng = np.random.default_rng(7)
    batch, max_seq = (3, 300) if fast else (2, 70)
    q = rng.standard_normal((batch, heads, 64)).astype(np.float32)
    k, v, tables, lens = paged_decode_attention.random_cache(
        batch, kv_heads, max_seq, 64, 16, np.float16 if dtype == "f16" else np.float32, rng)
    out = metile.Buffer.zeros((batch, heads, 64), dtype=dtype)
    # Kept until the check: Buffers dropped while their launch may still run give wrong results
    # on the metal stand-in (a runtime issue of its own, not this kernel's).
    args = [metile.Buffer(data=x) for x in (q.astype(k.dtype), k, v, tables, lens)]
    paged_decode_attention.decode(*args, out, splits=splits)
    ref = paged_decode_attention.reference(q.astype(k.dtype), k, v, tables, lens)
    _check(_values(out), ref, dtype)


def test_paged_decode_attention_rejects_bad_lengths_and_pages(device):
    q = np.zeros((2, 4, 64), np.float32)
    kv = np.zeros((4, 2, 16, 64), np.float32)
    tables = np.arange(4, dtype=np.int32).reshape(2, 2)
    out = np.zeros_like(q)
    for lens in ([0, 5], [5, 33], [5]):
        with pytest.raises(ValueError, match=r"seq_lens must hold 2 lengths in 1\.\.32"):
            paged_decode_attention.decode(q, kv, kv, tables, np.array(lens, np.int32), out)
    with pytest.raises(ValueError, match=r"page size \(12\) must be a power of two"):
        paged_decode_attention.decode(q, np.zeros((4, 2, 12, 64), np.float32),
                                      np.zeros((4, 2, 12, 64), np.float32), tables,
                                      np.array([5, 6], np.int32), out)


def test_decode_attention_rejects_heads_not_a_multiple_of_kv_heads(device):
    q = np.zeros((1, 6, 64), np.float32)
    kv = np.zeros((1, 4, 8, 64), np.float32)
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        decode_attention.decode(q, kv, kv, np.zeros_like(q))


@metile.kernel
def _dot_trans(A, B, Out, BM: metile.constexpr, BN: metile.constexpr, K: metile.constexpr,
               SHARED: metile.constexpr):
    """Out = A @ B^T for one BM x K and one BN x K tile; SHARED: trans(B) also has another reader."""
    a = metile.tile_load(A, 0, 0, K, (BM, K))
    bt = metile.trans(metile.tile_load(B, 0, 0, K, (BN, K)))
    c = metile.dot(a, bt)
    if SHARED:
        c = c + metile.sum(bt, axis=0)[None, :]
    metile.tile_store(Out, 0, 0, BN, c, (BM, BN))


@metile.kernel
def _dot_trans_loop(A, B, Out, M, BM: metile.constexpr, BN: metile.constexpr, K: metile.constexpr):
    """Out = A @ B^T over M rows of A in BM-row blocks; trans(B) is the same in every block."""
    bt = metile.trans(metile.tile_load(B, 0, 0, K, (BN, K)))
    for m0 in metile.tile_range(0, M, BM):
        a = metile.tile_load(A, m0, 0, K, (BM, K), bounds=(M, K))
        metile.tile_store(Out, m0, 0, BN, metile.dot(a, bt), (BM, BN), bounds=(M, BN))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("k,shared", [(64, False), (64, True), (256, False)],
                         ids=["only-dot", "shared", "k-chunks"])
def test_dot_with_a_transposed_operand(device, dtype, k, shared):
    """Q @ K^T's shape: the dot stages trans(B) without a transpose of its own when it is the
    only reader (also when K is staged in chunks), else after the exchange; float64 reference."""
    (a, b), (av, bv) = _inputs([(32, k), (16, k)], dtype)
    out = metile.Buffer.zeros((32, 16))
    _dot_trans[(1,)](a, b, out, BM=32, BN=16, K=k, SHARED=shared)
    ref = av @ bv.T + (bv.sum(axis=1)[None, :] if shared else 0)
    _check(_values(out), ref, dtype if dtype != "f32" else "f16")  # f32: TF32 on GPU units


def test_dot_with_a_loop_invariant_transposed_operand(device):
    """trans(B) defined before the loop: staged once, before it, for every block of A."""
    (a, b), (av, bv) = _inputs([(70, 64), (16, 64)], "f16")
    out = metile.Buffer.zeros((70, 16))
    _dot_trans_loop[(1,)](a, b, out, 70, BM=32, BN=16, K=64)
    _check(_values(out), av @ bv.T, "f16")


@metile.kernel
def _dot_trans_rows(A, B, Out, N, BM: metile.constexpr, BN: metile.constexpr, K: metile.constexpr):
    """Out = A @ B^T, A BM x K, B N x K in BN-row blocks (attention's K^T, rows past N read 0)."""
    a = metile.tile_load(A, 0, 0, K, (BM, K))
    for n0 in metile.tile_range(0, N, BN):
        bt = metile.trans(metile.tile_load(B, n0, 0, K, (BN, K), bounds=(N, K)))
        metile.tile_store(Out, 0, n0, N, metile.dot(a, bt), (BM, BN), bounds=(BM, N))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("bn,k,warps", [(16, 64, None), (24, 128, (4, 1)), (64, 64, (2, 2))],
                         ids=["16x64", "24x128-odd-tiles", "64x64-2x2"])
def test_dot_with_a_transposed_load_copied_as_loaded(device, dtype, bn, k, warps):
    """B = trans(tile_load): on CUDA's mma.sync copied as loaded (n rows of k) and read by
    ldmatrix without .trans (lower_trans_operand.cpp); ragged rows, an odd number of 8-column
    tiles per warp (the x2 read), a 2 x 2 warp grid; float64 reference on every device. On sm_90
    the warpgroup atom reads the same copy K-major (transpose flag 0, A staged before the loop:
    dot_choices.cpp) where no warp grid is asked for."""
    n = 3 * bn - 5
    (a, b), (av, bv) = _inputs([(64, k), (n, k)], dtype)
    out = metile.Buffer(data=np.full((64, n), np.nan, dtype=np.float32))
    opts = {} if warps is None else {"warps_m": warps[0], "warps_n": warps[1]}
    launch = _dot_trans_rows[(1,)]
    launch(a, b, out, n, BM=64, BN=bn, K=k, num_threads=128, **opts)
    _check(_values(out), av @ bv.T, dtype)
    if device.name == "cuda":
        src = launch.compile(a, b, out, n, BM=64, BN=bn, K=k, num_threads=128, **opts).source("cuda")
        assert "mt_ldmatrix_x4(&mma_b" in src or "mt_ldmatrix_x2(mma_b" in src or ", p, 1, 1, 0, 0;" in src


@metile.kernel
def _gemm_nt(A, B, C, M, N, K, BM: metile.constexpr, BN: metile.constexpr, BK: metile.constexpr):
    """C = A @ B^T with B stored N x K (a K loop over trans(tile_load) blocks: pipelined on CUDA)."""
    m0 = metile.program_id(0) * BM
    n0 = metile.program_id(1) * BN
    acc = metile.zeros((BM, BN), "f32")
    for k0 in metile.tile_range(0, K, BK):
        a = metile.tile_load(A, m0, k0, K, (BM, BK), bounds=(M, K))
        bt = metile.trans(metile.tile_load(B, n0, k0, K, (BN, BK), bounds=(N, K)))
        acc = metile.dot(a, bt, acc)
    metile.tile_store(C, m0, n0, N, acc, (BM, BN), bounds=(M, N))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_k_loop_over_transposed_loads(device, dtype):
    """A @ B^T over K blocks: on CUDA both operands are copied straight to threadgroup memory, B
    as loaded (n rows of k), and the K loop is pipelined; ragged M, N and K; float64 reference."""
    m, n, k = 100, 72, 200
    (a, b), (av, bv) = _inputs([(m, k), (n, k)], dtype)
    c = metile.Buffer(data=np.full((m, n), np.nan, dtype=np.float32))
    launch = _gemm_nt[(metile.cdiv(m, 64), metile.cdiv(n, 64))]
    launch(a, b, c, m, n, k, BM=64, BN=64, BK=32, num_threads=128)
    _check(_values(c), av @ bv.T, dtype)
    if device.name == "cuda":
        src = launch.compile(a, b, c, m, n, k, BM=64, BN=64, BK=32, num_threads=128).source("cuda")
        # sm_90: wgmma reads B K-major (transpose flag 0) from the pipeline's copies.
        assert ("mt_ldmatrix_x4(&mma_b" in src and "cp.async.wait_group 1" in src) or ", p, 1, 1, 0, 0;" in src
