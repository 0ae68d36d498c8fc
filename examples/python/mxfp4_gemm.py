"""MXFP4 weights x bf16 activations (prefill GEMM): Y[M, N] = X[M, K] . W[N, K]^T with W in the
OCP MX format MXFP4: E2M1 values (0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives) in blocks of 32
along K that share one E8M0 scale 2^(e - 127).

Layout: `Wq` u8 [N, K / 2], two E2M1 codes a byte, the low nibble first (W[n, 2i] in bits 0-3
of Wq[n, i]); `Ws` u8 [N, ceil(K / 32)], one E8M0 byte per 32 consecutive K values of a row.
X and Y are bf16 (or f16). K is even; a K that is not a multiple of 32 reads its last block
short (the codes past K are taken as 0).

The K loop hands each [BLOCK_N, BLOCK_K / 2] tile of codes, transposed to K-major, and its
[BLOCK_N, BLOCK_K / 32] scales to `metile.dot_scaled` with X's tile as the bf16 left operand:
the codes are decoded and scaled in registers and multiplied by an ordinary bf16 `dot` with f32
accumulation. Every E2M1 value times a power of two is exact in bf16, so the only error is the
f32 sums and the output's rounding.

Run: python3 examples/python/mxfp4_gemm.py [M N K] [--dtype bf16|f16]
"""

import argparse
import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile
from gemv import make, values

BLOCK = 32                      # elements per E8M0 scale (OCP MX)
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
FORMAT = {"bf16": "bf16", "f16": "fp16"}


@metile.kernel
def mxfp4_gemm_kernel(X, Wq, Ws, Y, M, N, K, FMT: metile.constexpr,
                      BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                      BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    n0 = metile.program_id(1) * BLOCK_N
    kb = K // 2
    ks = metile.cdiv(K, 32)
    acc = metile.zeros((BLOCK_M, BLOCK_N), "f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        x = metile.tile_load(X, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        w = metile.tile_load(Wq, n0, k // 2, kb, (BLOCK_N, BLOCK_K // 2), bounds=(N, kb))
        s = metile.tile_load(Ws, n0, k // 32, ks, (BLOCK_N, BLOCK_K // 32), bounds=(N, ks))
        acc = metile.dot_scaled(x, None, FMT, metile.trans(w), s, "e2m1", acc)
    metile.tile_store(Y, pid_m * BLOCK_M, n0, N, acc.to(Y.dtype), (BLOCK_M, BLOCK_N),
                      bounds=(M, N))


def _buffer(a, what):
    if isinstance(a, metile.Buffer):
        return a
    if hasattr(a, "__dlpack__"):
        return metile.from_dlpack(a)
    if isinstance(a, np.ndarray):
        return metile.Buffer(data=np.ascontiguousarray(a))
    raise TypeError(f"mxfp4_gemm: {what} must be a metile.Buffer, a numpy array or a DLPack "
                    f"tensor, got {type(a).__name__}")


def default_config(device=None):
    """(BLOCK_M, BLOCK_N, BLOCK_K, threads) for `device` (the current one by default): on cuda
    128 x 128 tiles of 64 K values over 8 warps (the decoded B tile is 32 values a thread);
    elsewhere 64 x 64 x 32 (Metal's 32 KB of threadgroup memory holds both staged operands and
    the decode's exchange) with the device's default threads."""
    device = device or metile.get_device()
    return (128, 128, 64, 256) if device.name == "cuda" else (64, 64, 32, None)


def mxfp4_gemm(x, Wq, Ws, out=None, block_m=None, block_n=None, block_k=None,
               num_threads=None):
    """out [M, N] = x [M, K] . W^T, W decoded from the MXFP4 codes Wq [N, K/2] and scales
    Ws [N, ceil(K/32)]; x bf16 or f16, out of x's dtype (allocated when not given). Tiles and
    threads not given come from default_config()."""
    x, Wq, Ws = _buffer(x, "x"), _buffer(Wq, "Wq"), _buffer(Ws, "Ws")
    if x.metile_dtype not in FORMAT or len(x.shape) != 2:
        raise ValueError(f"mxfp4_gemm: x must be bf16 or f16 [M, K], got {x.metile_dtype} "
                         f"{list(x.shape)}")
    m, k = x.shape
    if k % 2:
        raise ValueError(f"mxfp4_gemm: K = {k} is odd; packed E2M1 weights need an even K")
    if Wq.metile_dtype != "u8" or len(Wq.shape) != 2 or Wq.shape[1] * 2 != k:
        raise ValueError(f"mxfp4_gemm: Wq must be u8 [N, K/2] = [N, {k // 2}], got "
                         f"{Wq.metile_dtype} {list(Wq.shape)}")
    n = Wq.shape[0]
    if Ws.metile_dtype != "u8" or tuple(Ws.shape) != (n, -(-k // BLOCK)):
        raise ValueError(f"mxfp4_gemm: Ws must be u8 [N, ceil(K/32)] = [{n}, {-(-k // BLOCK)}]"
                         f" (one E8M0 scale per 32 K values), got {Ws.metile_dtype} "
                         f"{list(Ws.shape)}")
    dm, dn, dk, dt = default_config()
    block_m, block_n, block_k = block_m or dm, block_n or dn, block_k or dk
    num_threads = num_threads or (dt if (block_m, block_n, block_k) == (dm, dn, dk) else None)
    if block_k % BLOCK:
        raise ValueError(f"mxfp4_gemm: block_k must be a multiple of {BLOCK}, got {block_k}")
    if out is None:
        out = metile.Buffer.zeros((m, n), x.metile_dtype)
    elif tuple(out.shape) != (m, n):
        raise ValueError(f"mxfp4_gemm: out must have shape {[m, n]}, got {list(out.shape)}")
    grid = (metile.cdiv(m, block_m), metile.cdiv(n, block_n))
    hints = {} if num_threads is None else {"num_threads": num_threads}
    mxfp4_gemm_kernel[grid](x, Wq, Ws, out, m, n, k, FMT=FORMAT[x.metile_dtype],
                            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, **hints)
    return out


def quantized(n, k, rng, exponents=(118, 136)):
    """Random MXFP4 weights: (Wq, Ws) Buffers and W in float64."""
    codes = rng.integers(0, 16, (n, k), dtype=np.uint8)
    scales = rng.integers(*exponents, (n, -(-k // BLOCK)), dtype=np.uint8)
    wq = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    w64 = E2M1[codes] * np.ldexp(1.0, np.repeat(scales.astype(int), BLOCK, 1)[:, :k] - 127)
    return (metile.Buffer(data=wq), metile.Buffer(data=scales)), w64


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", type=int, nargs="*", default=[70, 96, 200], help="M N K")
    ap.add_argument("--dtype", default="bf16", choices=tuple(FORMAT))
    a = ap.parse_args()
    if len(a.shape) != 3:
        ap.error("give M N K")
    m, n, k = a.shape
    print(f"device: {metile.get_device().name}")
    rng = np.random.default_rng(2)
    (wq, ws), w64 = quantized(n, k, rng, (124, 130) if a.dtype == "f16" else (118, 136))
    x, x64 = make(rng.standard_normal((m, k)), a.dtype)
    t0 = time.perf_counter()
    y = mxfp4_gemm(x, wq, ws)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    err = (np.abs(values(y) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max()
    print(f"{m}x{k} . mxfp4({n}x{k})^T, {a.dtype}: {ms:.1f} ms (first call), max relative "
          f"error {err:.2e}")
    return 0 if err < {"f16": 1e-3, "bf16": 8e-3}[a.dtype] + 1e-6 * k ** 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
