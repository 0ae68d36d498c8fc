"""FP8 e4m3 GEMM with per-row scales of A and per-column scales of B, applied to the f32
accumulator in the epilogue: C[i, j] = sa[i] * sb[j] * sum_k A[i, k] * B[k, j], stored as f16,
bf16 or f32. The dot on FP8 tiles has exact products and f32 sums (docs/semantics.md, "FP8
dots"). The example quantizes random f32 matrices on the host (scale = amax / 448 per row of A,
per column of B), runs the kernel and checks it against a float64 product of the decoded FP8
values. Run: python3 examples/python/fp8_gemm.py [M N K] [--out f16|bf16|f32]"""

import sys

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile

E4M3_MAX = 448.0
OUT_DTYPES = ("f16", "bf16", "f32")


@metile.kernel
def fp8_gemm_kernel(A, B, SA, SB, C, M, N, K, BLOCK_M: metile.constexpr,
                    BLOCK_N: metile.constexpr, BLOCK_K: metile.constexpr):
    pid_m, pid_n = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)  # f8e4m3 x f8e4m3 -> f32
    rows = pid_m * BLOCK_M + metile.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + metile.arange(0, BLOCK_N)
    sa = metile.load(SA + rows, mask=rows < M, other=0.0)
    sb = metile.load(SB + cols, mask=cols < N, other=0.0)
    acc = acc * sa[:, None] * sb[None, :]  # the scales, once, on the f32 accumulator
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc.to(C.dtype),
                      (BLOCK_M, BLOCK_N), bounds=(M, N))


@metile.kernel
def fp8_gemm_nt_kernel(A, BT, SA, SB, C, M, N, K, BLOCK_M: metile.constexpr,
                       BLOCK_N: metile.constexpr, BLOCK_K: metile.constexpr):
    """The same GEMM with B given transposed, BT [N, K] (a column-major B, as cuBLAS and
    torch._scaled_mm take it): dot(a, trans(bt)) reads both operands K-major, the form cuda's
    FP8 wgmma atom takes on sm_90 (docs/semantics.md, "FP8 dots")."""
    pid_m, pid_n = metile.program_id(0), metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        bt = metile.tile_load(BT, pid_n * BLOCK_N, k, K, (BLOCK_N, BLOCK_K), bounds=(N, K))
        acc = metile.dot(a, metile.trans(bt), acc)
    rows = pid_m * BLOCK_M + metile.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + metile.arange(0, BLOCK_N)
    sa = metile.load(SA + rows, mask=rows < M, other=0.0)
    sb = metile.load(SB + cols, mask=cols < N, other=0.0)
    acc = acc * sa[:, None] * sb[None, :]
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc.to(C.dtype),
                      (BLOCK_M, BLOCK_N), bounds=(M, N))


def default_config(device=None):
    """(BLOCK_M, BLOCK_N, BLOCK_K): 128x128x64 tiles on cuda, 64x64x32 elsewhere."""
    device = device or metile.get_device()
    return (128, 128, 64) if device.name == "cuda" else (64, 64, 32)


def _check(x, what, dtype, shape):
    if not isinstance(x, metile.Buffer):
        raise TypeError(f"fp8_gemm: {what} must be a metile.Buffer, got {type(x).__name__}")
    if x.metile_dtype != dtype:
        raise TypeError(f"fp8_gemm: {what} must be {dtype}, got {x.metile_dtype}")
    if shape is not None and tuple(x.shape) != shape:
        raise ValueError(f"fp8_gemm: {what} must have shape {shape}, got {tuple(x.shape)}")


def fp8_gemm(a, b, scale_a, scale_b, out_dtype="f16", out=None, config=None, b_transposed=False,
             num_threads=None):
    """C = diag(scale_a) (a @ b) diag(scale_b) for a: f8e4m3 [M, K], b: f8e4m3 [K, N] (or its
    transpose [N, K] with b_transposed, the form cuda's FP8 wgmma takes), scale_a: f32 [M],
    scale_b: f32 [N]; C of out_dtype (f16, bf16 or f32) [M, N], written to `out` when given.
    Wrong dtypes or shapes raise TypeError / ValueError naming the argument."""
    _check(a, "a", "f8e4m3", None)
    if len(a.shape) != 2:
        raise ValueError(f"fp8_gemm: a must be 2-D [M, K], got shape {tuple(a.shape)}")
    m, k = a.shape
    _check(b, "b", "f8e4m3", None)
    kdim = 1 if b_transposed else 0
    if len(b.shape) != 2 or b.shape[kdim] != k:
        form = "[N, K]" if b_transposed else "[K, N]"
        raise ValueError(f"fp8_gemm: b must be {form} with K = {k} (a's columns), got shape "
                         f"{tuple(b.shape)}")
    n = b.shape[1 - kdim]
    if 0 in (m, n, k):
        raise ValueError(f"fp8_gemm: empty dimension in a {tuple(a.shape)} @ b {tuple(b.shape)}")
    _check(scale_a, "scale_a (one per row of a)", "f32", (m,))
    _check(scale_b, "scale_b (one per column of b)", "f32", (n,))
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"fp8_gemm: out_dtype must be one of {OUT_DTYPES}, got {out_dtype!r}")
    if out is None:
        out = metile.Buffer.zeros((m, n), out_dtype)
    _check(out, "out", out_dtype, (m, n))
    bm, bn, bk = config or default_config()
    kernel = fp8_gemm_nt_kernel if b_transposed else fp8_gemm_kernel
    hints = {} if num_threads is None else {"num_threads": num_threads}
    kernel[(metile.cdiv(m, bm), metile.cdiv(n, bn))](
        a, b, scale_a, scale_b, out, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, **hints)
    return out


# ---- host side: quantization and the float64 reference ----------------------------------------

def e4m3_values():
    """The value of each of the 256 E4M3 codes (the "fn" variant: S.1111.111 is NaN)."""
    codes = np.arange(256)
    e, m = (codes >> 3) & 15, codes & 7
    v = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7.0))
    v = np.where((codes & 0x7F) == 0x7F, np.nan, v)
    return np.where(codes & 0x80, -v, v)


def quantize(x, axis):
    """(codes, scales): x / scale rounded to the nearest E4M3 value, scale = amax / 448 along
    `axis` (1: per row, 0: per column)."""
    scale = np.maximum(np.abs(x).max(axis=axis), 1e-12) / E4M3_MAX
    q = x / (scale[:, None] if axis == 1 else scale[None, :])
    table = e4m3_values()
    finite = np.where(np.isnan(table), np.inf, table)
    order = np.argsort(finite[:128])
    # The nearest non-negative code by magnitude, ties to the even code (as the device's casts).
    mags = finite[:128][order]
    idx = np.clip(np.searchsorted(mags, np.abs(q)), 1, 127)
    lo, hi = mags[idx - 1], mags[idx]
    lo_code, hi_code = order[idx - 1], order[idx]
    d_lo, d_hi = np.abs(q) - lo, hi - np.abs(q)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi_code % 2 == 0))
    codes = np.where(pick_hi, hi_code, lo_code) | np.where(q < 0, 0x80, 0)
    return codes.astype(np.uint8), scale.astype(np.float32)


def reference(a_codes, b_codes, sa, sb):
    table = e4m3_values()
    return (table[a_codes] @ table[b_codes]) * sa.astype(np.float64)[:, None] * \
        sb.astype(np.float64)[None, :]


def from_bf16_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def main():
    args = [v for v in sys.argv[1:] if not v.startswith("--")]
    out_dtype = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "f16"
    args = [v for v in args if v != out_dtype]
    m, n, k = (int(v) for v in args[:3]) if len(args) >= 3 else (200, 136, 300)
    dev = metile.get_device()
    print(f"device: {dev.name}")
    rng = np.random.default_rng(0)
    a_codes, sa = quantize(rng.standard_normal((m, k)).astype(np.float32), axis=1)
    b_codes, sb = quantize(rng.standard_normal((k, n)).astype(np.float32), axis=0)
    a = metile.Buffer(data=a_codes, dtype="f8e4m3")
    b = metile.Buffer(data=b_codes, dtype="f8e4m3")
    c = fp8_gemm(a, b, metile.Buffer(data=sa), metile.Buffer(data=sb), out_dtype)
    got = c.numpy()
    got = from_bf16_bits(got) if out_dtype == "bf16" else got.astype(np.float32)
    ref = reference(a_codes, b_codes, sa, sb)
    # f32 sums of exact products: a few f32 roundings per term, relative to sum |a b|; then the
    # store's rounding to out_dtype (2^-8 for bf16, 2^-11 for f16).
    scale = (np.abs(e4m3_values()[a_codes]) @ np.abs(e4m3_values()[b_codes])) * \
        sa.astype(np.float64)[:, None] * sb.astype(np.float64)[None, :]
    err = (np.abs(got - ref) / np.maximum(scale, 1e-30)).max()
    tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}[out_dtype]
    print(f"{m}x{n}x{k} e4m3 -> {out_dtype}: max error {err:.1e} of sum |a b| (tolerance {tol:.0e})")
    return 0 if err < tol else 1


if __name__ == "__main__":
    sys.exit(main())
