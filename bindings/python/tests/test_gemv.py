"""GEMV and batched GEMV written in metile's tile language (examples/python/gemv.py) against
float64 numpy on every device: M = 1, 3, 16 rows of x, f32/f16/bf16, N and K that are not
multiples of the blocks, bias, split-K on and off (its ordered merge gives the same bits on every
run), a vector x, numpy arguments, agreement with interp, bad arguments named, and on GPUs the
K loop carrying the unreduced product tile (defer_reductions: no exchange between threads in the
loop)."""

import os
import sys

import numpy as np
import pytest

import metile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples", "python"))
import gemv as G  # noqa: E402

N, K = 37, 300           # ragged against BLOCK_N = 4 and BLOCK_K = 64 (5 K steps, the last short)
CONFIG = {"block_n": 4, "block_k": 64, "num_warps": 2}


def _inputs(m, k, n, dtype, bias, x_dtype=None):
    rng = np.random.default_rng(m * 1000 + k + n)
    w, w64 = G.make(rng.standard_normal((n, k)), dtype)
    x, x64 = G.make(rng.standard_normal((m, k)), x_dtype or dtype)
    b, b64 = G.make(rng.standard_normal(n), dtype) if bias else (None, None)
    return (w, x, b), (w64, x64, b64)


def _check(y, vals, dtype):
    w64, x64, b64 = vals
    scale = np.abs(x64) @ np.abs(w64).T + (0 if b64 is None else np.abs(b64))
    err = (np.abs(G.values(y) - G.reference(w64, x64, b64)) / scale).max()
    assert err < G.tolerance(dtype, w64.shape[1]), f"relative error {err:.2e}"


@pytest.mark.pairwise("dtype", "m", "split_k")
@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_gemv_matches_float64(device, dtype, m, split_k):
    (w, x, b), vals = _inputs(m, K, N, dtype, bias=m != 3)
    y = G.gemv(w, x, b, split_k=split_k, **CONFIG)
    assert y.shape == (m, N) and y.metile_dtype == dtype
    _check(y, vals, dtype)


@pytest.mark.pairwise("dtype", "m", "split_k")
@pytest.mark.parametrize("split_k", [1, 3])
@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_dot_method_matches_float64(device, dtype, m, split_k):
    """The matrix-unit method: W's rows against x's rows padded to 16, ragged N and K."""
    (w, x, b), vals = _inputs(m, K, N, dtype, bias=m != 5)
    y = G.gemv(w, x, b, split_k=split_k, method="dot", block_n=16, block_k=64, num_warps=2)
    assert y.shape == (m, N) and y.metile_dtype == dtype
    _check(y, vals, dtype)


class _Gpu:
    name, architecture = "cuda", "sm_90"  # an H100: 132 SMs (compute_units)


def test_default_method_by_rows():
    """GPUs take the matrix units from three rows of a 16-bit W, for up to four rows only where
    each program reads at least DOT_MIN_PROGRAM_BYTES of W; f32 and host devices never."""
    assert [G.default_config(8192, 8192, m, "f16", _Gpu())[4] for m in (1, 2, 3, 16)] == \
        ["fma", "fma", "dot", "dot"]
    assert [G.default_config(4096, 4096, m, "f16", _Gpu())[4] for m in (3, 4, 5, 16)] == \
        ["dot", "dot", "dot", "dot"]
    # 4096 x 256: one part of 64 rows x 256 is 32 KB a program: fma up to four rows.
    assert [G.default_config(4096, 256, m, "bf16", _Gpu())[4] for m in (3, 4, 5, 16)] == \
        ["fma", "fma", "dot", "dot"]
    assert G.default_config(4096, 4096, 16, "f32", _Gpu())[4] == "fma"
    with metile.use_device("interp"):
        assert G.default_config(4096, 4096, 16, "f16")[4] == "fma"


@pytest.mark.parametrize("n, k, split", [(4096, 4096, 4), (8192, 8192, 2), (16384, 16384, 1),
                                         (4096, 14336, 4), (14336, 4096, 1), (1000, 3000, 8),
                                         (64, 256, 1), (1, 1 << 20, 256)])
def test_dot_split_gives_every_sm_one_long_program(n, k, split):
    """The dot method's split-K: the least power of two with a program for each of the 132 SMs,
    two BLOCK_K steps a part at least (64 programs of 64 rows at 4096^2: 4 parts of 1024)."""
    assert G.dot_split(n, k, 132) == split
    cfg = G.default_config(n, k, 16, "f16", _Gpu())
    assert cfg == (G.DOT_BLOCK_N, G.DOT_BLOCK_K, 4, split, "dot")
    programs = -(-n // G.DOT_BLOCK_N) * split
    assert programs >= 132 or k // (2 * split) < 2 * G.DOT_BLOCK_K
    assert split == 1 or -(-n // G.DOT_BLOCK_N) * split // 2 < 132


def test_split_k_gives_the_same_bits_every_run(device):
    (w, x, b), _ = _inputs(4, 700, 50, "f32", bias=True)
    first = G.gemv(w, x, b, split_k=5, **CONFIG).numpy().copy()
    again = metile.Buffer.zeros((4, 50))
    for _ in range(2):
        G.gemv(w, x, b, out=again, split_k=5, **CONFIG)
        assert np.array_equal(again.numpy(), first)


def test_vector_x_default_config_and_mixed_dtypes(device):
    """x of shape [K] gives y of shape [N]; W bf16 times x f32 into a given f16 out; the config
    the device would pick (default_config), split-K included where the device asks for it."""
    (w, x, b), (w64, x64, b64) = _inputs(1, 520, 70, "bf16", bias=True, x_dtype="f32")
    xv = metile.Buffer(data=x.numpy().reshape(520))
    out = metile.Buffer.zeros((70,), "f16")
    assert G.gemv(w, xv, b, out=out) is out
    _check(metile.Buffer(data=out.numpy().reshape(1, 70)), (w64, x64, b64), "f16")


def test_prepared_gemv_reads_the_buffers_each_run(device):
    (w, x, b), (w64, x64, b64) = _inputs(2, K, N, "f16", bias=True)
    run, y = G.prepare_gemv(w, x, b, split_k=2, **CONFIG)
    for scale in (1.0, -2.0):
        x.numpy()[...] = (x64 * scale).astype(np.float16)
        run()
        metile.synchronize()
        _check(y, (w64, x64 * scale, b64), "f16")


def test_numpy_arguments(device):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((29, 130)).astype(np.float32)
    x = rng.standard_normal((2, 130)).astype(np.float16)
    out = np.zeros((2, 29), np.float16)
    G.gemv(w, x, out=out, split_k=2, **CONFIG)
    metile.synchronize()
    _check(metile.Buffer(data=out), (w.astype(np.float64), x.astype(np.float64), None), "f16")


def test_agrees_with_interp(device):
    (w, x, b), _ = _inputs(3, K, N, "f32", bias=True)
    y = G.gemv(w, x, b, split_k=2, **CONFIG).numpy()
    with metile.use_device("interp"):
        wi, xi, bi = (metile.Buffer(data=a.numpy()) for a in (w, x, b))
        ref = G.gemv(wi, xi, bi, split_k=2, **CONFIG).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call,message", [
    (lambda w, x: G.gemv(w[0], x), "W must be 2-D [N, K]"),
    (lambda w, x: G.gemv(w, np.zeros((2, 7), np.float32)), "x must be [K] or [M, K] with K = 30"),
    (lambda w, x: G.gemv(w, np.zeros((17, 30), np.float32)), "x has 17 rows; gemv takes 1 to 16"),
    (lambda w, x: G.gemv(w, x, bias=np.zeros(9, np.float32)), "bias must be [N] = (20,)"),
    (lambda w, x: G.gemv(w, x, out=np.zeros((2, 21), np.float32)), "out must have shape (2, 20)"),
    (lambda w, x: G.gemv(w, x, block_n=3), "block_n must be a power of two, got 3"),
    (lambda w, x: G.gemv(w, x, num_warps=0), "num_warps must be a power of two, got 0"),
    (lambda w, x: G.gemv(w, x, split_k=0), "split_k must be a positive int, got 0"),
    (lambda w, x: G.gemv(w, x, method="mma"), "method must be one of fma, dot, got 'mma'"),
    (lambda w, x: G.gemv(w, np.zeros((2, 30), np.int32)), "x has numpy dtype int32"),
    (lambda w, x: G.gemv(w, metile.Buffer.zeros((2, 30), "i32")), "x is i32"),
    (lambda w, x: G.gemv([[1.0]], x), "W must be a metile.Buffer, a numpy array or a DLPack"),
])
def test_bad_arguments_are_named(device, call, message):
    w = np.zeros((20, 30), np.float32)
    x = np.zeros((2, 30), np.float32)
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(").replace(
            ")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        call(w, x)


@pytest.mark.parametrize("m", [1, 4])
def test_cuda_k_loop_carries_the_unreduced_tile(tmp_path, monkeypatch, m):
    """The layouts on cuda (dumped on any device): each row's K loop carries the f32
    [BLOCK_N, BLOCK_K] product tile (defer_reductions), so the loop exchanges nothing between
    threads, and the W tile is read with 16-byte vector loads."""
    monkeypatch.setenv("METILE_DEBUG", "layouts,cuda")
    monkeypatch.setenv("METILE_DEBUG_DIR", str(tmp_path))
    w = np.zeros((64, 1024), np.float16)
    x = np.zeros((m, 1024), np.float16)
    with metile.use_device("interp"):
        kernel = metile.kernel(G.gemv_kernel.fn)
        kernel[(32, 1)](w, x, w, x, x, 64, 1024, 1024, M=m, BLOCK_N=2, BLOCK_K=1024,
                        HAS_BIAS=False, SPLIT=False, num_threads=128)
    layouts = (tmp_path / "gemv_kernel.layouts.txt").read_text()
    loops = [line for line in layouts.splitlines() if " = for " in line]
    assert loops and all(line.count("tile<2x1024xf32>") == m for line in loops), loops
    cuda = (tmp_path / "gemv_kernel.cuda.txt").read_text()
    body = cuda.index("int(blockIdx.x)")        # the kernel, past the prelude's helpers
    # The K loops end where the reduction after them starts (its first shuffle).
    loop = cuda[cuda.index("  for (int i = ", body):cuda.index("__shfl_xor_sync", body)]
    # 16-byte loads: the canonical layout gives a thread runs of 8 16-bit elements on cuda.
    assert "const mt_vec<ushort, 8> tile_vec = *(const mt_vec<ushort, 8>*)(W" in loop
    assert "scratch" not in loop and "__syncthreads" not in loop and "mma" not in loop
