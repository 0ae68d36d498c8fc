"""Weight-only int4 GEMM (prefill): Y[M, N] = X[M, K] . W[N, K]^T for any M, with W in the
affine uint4 layout of int4_gemv.py (Wq u8 [N, K/2], low nibble first; Scales and Biases
[N, ceil(K/G)] of f16 or bf16; W = q * scale + bias).

Each program computes a [BLOCK_M, BLOCK_N] tile of Y. In the K loop it reads
[BLOCK_N, BLOCK_K / 2] bytes of Wq, unpacks them with `metile.unpack_uint4` (the codes in K
order), decodes W = q * scale + bias in f32, rounds it to X's dtype (f16 or bf16, the dtype the
matrix units take) and calls an ordinary `dot` with f32 accumulation on the transposed tile. The
dense W never exists in memory. The rounding of the decoded weight to X's dtype is the only
error beyond the f32 sums (W's codes times a scale are not always representable in f16/bf16).

Run: python3 examples/python/int4_gemm.py [M N K] [--group 32|64|128] [--dtype f16|bf16]
"""

import argparse
import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile
from gemv import make, values
from int4_gemv import DTYPES, GROUPS, _shape_dtype, check_weights, quantized


@metile.kernel
def int4_gemm_kernel(X, Wq, Scales, Biases, Y, M, N, K, G: metile.constexpr,
                     BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                     BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    n0 = pid_n * BLOCK_N
    kb = K // 2
    groups = metile.cdiv(K, G)
    rows = n0 + metile.arange(0, BLOCK_N)
    acc = metile.zeros((BLOCK_M, BLOCK_N), "f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        x = metile.tile_load(X, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        q = metile.unpack_uint4(metile.tile_load(Wq, n0, k // 2, kb, (BLOCK_N, BLOCK_K // 2),
                                                 bounds=(N, kb)), axis=1)
        cols = k + metile.arange(0, BLOCK_K)
        g = rows[:, None] * groups + (cols // G)[None, :]
        gm = (rows < N)[:, None] & (cols < K)[None, :]
        s = metile.load(Scales + g, mask=gm, other=0.0).to("f32")
        z = metile.load(Biases + g, mask=gm, other=0.0).to("f32")
        w = (q.to("f32") * s + z).to(X.dtype)
        acc = metile.dot(x, metile.trans(w), acc)
    metile.tile_store(Y, pid_m * BLOCK_M, n0, N, acc.to(Y.dtype), (BLOCK_M, BLOCK_N),
                      bounds=(M, N))


def int4_gemm(x, Wq, Scales, Biases, out=None, block_m=32, block_n=32, block_k=64):
    """out [M, N] = x [M, K] . W^T, W decoded from Wq/Scales/Biases; x f16 or bf16, out of x's
    dtype (allocated when not given)."""
    x, xshape, xdt = _shape_dtype(x, "x")
    if xdt not in DTYPES or len(xshape) != 2:
        raise ValueError(f"int4_gemm: x must be f16 or bf16 [M, K], got {xdt} {list(xshape)}")
    m, k = xshape
    Wq, Scales, Biases, n, g = check_weights(Wq, Scales, Biases, k, "int4_gemm")
    if block_k % g and g % block_k:
        raise ValueError(f"int4_gemm: block_k {block_k} and the group size {g} must divide "
                         "one another")
    if out is None:
        out = metile.Buffer.zeros((m, n), xdt)
    elif tuple(out.shape) != (m, n):
        raise ValueError(f"int4_gemm: out must have shape {[m, n]}, got {list(out.shape)}")
    grid = (metile.cdiv(m, block_m), metile.cdiv(n, block_n))
    int4_gemm_kernel[grid](x, Wq, Scales, Biases, out, m, n, k, G=g, BLOCK_M=block_m,
                           BLOCK_N=block_n, BLOCK_K=block_k)
    return out


def reference(x64, w64, dtype):
    """float64 x . w^T with w rounded to `dtype` as the kernel rounds it."""
    w = make(w64, dtype)[1]
    return x64 @ w.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", type=int, nargs="*", default=[70, 96, 200], help="M N K")
    ap.add_argument("--group", type=int, default=32, choices=GROUPS)
    ap.add_argument("--dtype", default="bf16", choices=DTYPES)
    a = ap.parse_args()
    if len(a.shape) != 3:
        ap.error("give M N K")
    m, n, k = a.shape
    print(f"device: {metile.get_device().name}")
    rng = np.random.default_rng(1)
    (wq, s, b), w64 = quantized(n, k, a.group, a.dtype, rng)
    x, x64 = make(rng.standard_normal((m, k)), a.dtype)
    t0 = time.perf_counter()
    y = int4_gemm(x, wq, s, b)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    err = (np.abs(values(y) - reference(x64, w64, a.dtype)) /
           (np.abs(x64) @ np.abs(w64).T)).max()
    print(f"{m}x{k} . int4({n}x{k}, group {a.group})^T, {a.dtype}: {ms:.1f} ms (first call), "
          f"max relative error {err:.2e}")
    return 0 if err < {"f16": 1e-3, "bf16": 8e-3}[a.dtype] + 1e-6 * k ** 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
