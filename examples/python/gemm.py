"""Tiled GEMM (the seed README's kernel, with bounds so any M, N, K works) with a fused ReLU,
tuned over block sizes with @metile.autotune. Run: python3 examples/python/gemm.py [M N K]"""

import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile


@metile.autotune(
    configs=[metile.Config(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32),
             metile.Config(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32),
             metile.Config(BLOCK_M=64, BLOCK_N=32, BLOCK_K=64)],
    key=["M", "N", "K"], warmup=2, rep=5)
@metile.kernel
def matmul_relu(A, B, C, M, N, K,
                BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr, BLOCK_K: metile.constexpr):
    pid_m, pid_n = metile.tile_swizzle(metile.program_id(0), metile.program_id(1),
                                       pattern="morton", block_size=2)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    acc = metile.where(acc > 0, acc, 0)     # fused epilogue
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N),
                      bounds=(M, N))


def main():
    M, N, K = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (256, 192, 160)
    dev = metile.get_device()
    print(f"device: {dev.name}")
    a = metile.Buffer(data=np.random.randn(M, K).astype(np.float32))
    b = metile.Buffer(data=np.random.randn(K, N).astype(np.float32))
    c = metile.Buffer.zeros((M, N))
    grid = lambda meta: (metile.cdiv(meta["M"], meta["BLOCK_M"]),  # noqa: E731
                         metile.cdiv(meta["N"], meta["BLOCK_N"]))
    best = matmul_relu[grid](a, b, c, M, N, K)        # tunes once, then launches the winner
    run = matmul_relu[grid].prepare(a, b, c, M, N, K)  # the winner as a fast dispatcher
    t0 = time.perf_counter()
    for _ in range(5):
        run()
    metile.synchronize()
    ms = (time.perf_counter() - t0) / 5 * 1e3
    ref = np.maximum(a.numpy().astype(np.float64) @ b.numpy(), 0)
    err = np.abs(c.numpy() - ref).max() / max(1.0, np.abs(ref).max())
    print(f"{M}x{N}x{K} with {best}: {ms:.2f} ms/launch ({2 * M * N * K / ms / 1e6:.2f} GFLOP/s), "
          f"max relative error {err:.1e}")
    tol = 5e-2 if dev.name in ("metal", "cuda", "metal-sim") else 1e-4  # TF32 on GPUs
    return 0 if err < tol else 1


if __name__ == "__main__":
    sys.exit(main())
