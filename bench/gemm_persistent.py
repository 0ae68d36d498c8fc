"""Persistent tiles for the Hopper GEMM (issue 19): bench/gemm_vs_cublas.py's kernel (one program
per 128x256 output tile, grouped order) against the same GEMM written with persistent_range
(one program per SM walking the tiles in the same grouped order), with torch.matmul (cuBLAS)
in the same process, f16/bf16; every result is checked against float64 first (output
poisoned with NaN). --ksweep times M=N=4096 at several K: the intercept of time over K is the
per-tile cost outside the K loop (prologue, epilogue, launch).

    python3 bench/gemm_persistent.py [--dtype f16] [--shapes 4096x4096x4096,...] [--ksweep] [--out FILE]
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
import metile  # noqa: E402
from gemm_vs_cublas import gemm  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402


@metile.kernel
def gemm_persistent(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                    BLOCK_K: metile.constexpr, GROUP: metile.constexpr):
    tiles_m = metile.cdiv(M, BLOCK_M)
    tiles_n = metile.cdiv(N, BLOCK_N)
    width = GROUP * tiles_n
    for t in metile.persistent_range(tiles_m * tiles_n):
        # Triton's grouped order over the tile index (tile_swizzle maps the launch grid, which
        # a persistent kernel does not walk): GROUP rows of tiles, column by column.
        first_m = (t // width) * GROUP
        rows = metile.minimum(tiles_m - first_m, GROUP)
        pid_m = first_m + (t % width) % rows
        pid_n = (t % width) // rows
        acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
        for k in metile.tile_range(0, K, BLOCK_K):
            a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
            b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
            acc = metile.dot(a, b, acc)
        metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))


def triton_matmul():
    """An autotuned Triton matmul in the same grouped order, f32 C (what metile writes)."""
    import triton
    import triton.language as tl

    @triton.autotune(configs=[
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "G": 8}, num_stages=4, num_warps=8),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=8),
        triton.Config({"BM": 64, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
    ], key=["M", "N", "K"])
    @triton.jit
    def matmul(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        first_m = pid // (G * tiles_n) * G
        rows = min(tiles_m - first_m, G)
        pid_m = first_m + (pid % (G * tiles_n)) % rows
        pid_n = (pid % (G * tiles_n)) // rows
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
            b = tl.load(B + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    return matmul


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--shapes", default="2048x2048x2048,4096x4096x4096,8192x8192x8192")
    ap.add_argument("--configs", default="128,256,64,256")
    ap.add_argument("--ksweep", action="store_true")
    ap.add_argument("--variants", default="grid,persistent")
    ap.add_argument("--triton", action="store_true", help="also time an autotuned Triton matmul (f32 C, as metile)")
    ap.add_argument("--profile", action="store_true", help="two launches of each variant, no timing (ncu)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    metile.set_device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    rng = np.random.default_rng(0)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    if args.ksweep:
        shapes = [(4096, 4096, k) for k in (1024, 2048, 4096, 8192)]
    configs = [tuple(int(x) for x in c.split(",")) for c in args.configs.split(";")]
    t_matmul = triton_matmul() if args.triton else None
    rows = []
    for m, n, k in shapes:
        ta = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).cuda().to(tdt)
        tb = torch.from_numpy(rng.standard_normal((k, n), dtype=np.float32)).cuda().to(tdt)
        ref = None if args.profile else ta.double() @ tb.double()
        flops = 2.0 * m * n * k
        calls = max(3, min(50, int(2e12 / flops)))

        def device_copy(t):
            buf = metile.Buffer.zeros(tuple(t.shape), args.dtype)
            host = t.cpu()
            buf.numpy()[...] = host.view(torch.int16).numpy().view(np.uint16) if args.dtype == "bf16" else host.numpy()
            return buf

        ma, mb, mc = device_copy(ta), device_copy(tb), metile.Buffer.zeros((m, n))
        t_torch = 1.0 if args.profile else time_per_call(lambda: torch.matmul(ta, tb), torch.cuda.synchronize, calls)
        t_triton = None
        if t_matmul is not None:
            tc = torch.empty((m, n), dtype=torch.float32, device="cuda")
            grid = lambda meta: (metile.cdiv(m, meta["BM"]) * metile.cdiv(n, meta["BN"]),)  # noqa: E731
            t_matmul[grid](ta, tb, tc, m, n, k)
            terr = float(torch.linalg.norm(tc.double() - ref) / torch.linalg.norm(ref))
            t_triton = time_per_call(lambda: t_matmul[grid](ta, tb, tc, m, n, k), torch.cuda.synchronize, calls)
            print("%-16s %-10s %-28s %-9s %8.1f us %7.1f TFLOP/s  cuBLAS %7.1f  %.2fx  err %.1e" % (
                "x".join(map(str, (m, n, k))), "triton", "autotuned", "", t_triton * 1e6, flops / t_triton / 1e12,
                flops / t_torch / 1e12, t_torch / t_triton, terr), flush=True)
            rows.append({"shape": [m, n, k], "dtype": args.dtype, "variant": "triton", "rel_err": terr,
                         "us": t_triton * 1e6, "tflops": flops / t_triton / 1e12, "torch_tflops": flops / t_torch / 1e12})
        for bm, bn, bk, thr, *rest in configs:
            stages = rest[0] if rest else 0
            tiles = metile.cdiv(m, bm) * metile.cdiv(n, bn)
            variants = {
                "grid": (gemm[(metile.cdiv(m, bm), metile.cdiv(n, bn))], {}),
                "persistent": (gemm_persistent[(min(sms, tiles),)], {"GROUP": 8}),
            }
            for name, (launch, extra) in variants.items():
                if name not in args.variants.split(","):
                    continue
                opts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_threads=thr, num_stages=stages, **extra)
                mc.numpy()[...] = np.nan
                try:
                    tma = "tma_load" in launch.compile(ma, mb, mc, m, n, k, **opts).source("gpu_ir")
                    launch(ma, mb, mc, m, n, k, **opts)
                    metile.synchronize()
                except Exception as e:
                    print("skip", name, (m, n, k), opts, str(e).splitlines()[0], flush=True)
                    continue
                if args.profile:
                    launch(ma, mb, mc, m, n, k, **opts)
                    metile.synchronize()
                    continue
                got = torch.from_numpy(mc.numpy().copy()).cuda().double()
                err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
                if not err < 1e-2:
                    print("WRONG", name, (m, n, k), opts, err, flush=True)
                    continue
                t = time_per_call(lambda: launch(ma, mb, mc, m, n, k, **opts), metile.synchronize, calls, 5)
                row = {"shape": [m, n, k], "dtype": args.dtype, "variant": name, "options": opts, "tma": tma,
                       "gpu_off": os.environ.get("METILE_GPU_OFF", ""),
                       "rel_err": err, "us": t * 1e6, "tflops": flops / t / 1e12,
                       "torch_tflops": flops / t_torch / 1e12}
                rows.append(row)
                print("%-16s %-10s %-28s tma=%-5s %8.1f us %7.1f TFLOP/s  cuBLAS %7.1f  %.2fx  err %.1e" % (
                    "x".join(map(str, (m, n, k))), name, "%d,%d,%d,%d,s%d" % (bm, bn, bk, thr, stages), tma,
                    row["us"], row["tflops"], row["torch_tflops"], row["tflops"] / row["torch_tflops"], err),
                    flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
