"""tf32 GEMM on cuda (issue 19): metile's wgmma .tf32 path against its mma.sync path, cuBLAS and
Triton, one process, one GPU.

    python3 bench/gemm_tf32.py [--shapes 4096x4096x4096,...] [--modes nt,nn] [--out FILE]

C = A @ B^T with A M x K and B given N x K (row-major, "NT": both operands K-major, the form
wgmma .tf32 reads; metile's kernel is tile_load / dot(a, trans(b)) / tile_store, which takes
the tf32 warpgroup atom on sm_90), and C = A @ B with B given K x N ("NN": wgmma has no
transposed tf32 form, so metile computes C^T = B^T A^T with B^T's fragments from registers;
with METILE_CUDA_WGMMA=0 both run on mma.sync m16n8k8). f32 inputs and C, TF32 on
all: metile allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True (cuBLAS, same layouts:
a @ bt.T and a @ b), Triton's default tf32 dot (an autotuned tiled matmul of each layout, its
B tile transposed in registers for NT). metile takes the fastest of a few configurations per
shape (CONFIGS, filtered by fits()).

Every metile result is checked against torch in float64 (relative Frobenius error) after the
output is poisoned (NaN), before it is timed. Time per call: gpu_timing.time_per_call (median of
repeats of N back-to-back calls and a synchronize), the same for every library; each metile
configuration is timed twice (alternating) and the better kept. TFLOP/s = 2 M N K / time.
METILE_CUDA_WGMMA=0 in the environment takes the tf32 warpgroup atom away (NT then runs on
mma.sync with B transposed while staging).
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
from gpu_timing import time_per_call  # noqa: E402


@metile.kernel
def gemm_nt(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
            BLOCK_K: metile.constexpr):
    pid_m, pid_n = metile.tile_swizzle(metile.program_id(0), metile.program_id(1), "grouped", 8)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, pid_n * BLOCK_N, k, K, (BLOCK_N, BLOCK_K), bounds=(N, K))
        acc = metile.dot(a, metile.trans(b), acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))


@metile.kernel
def gemm_nn(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
            BLOCK_K: metile.constexpr):
    pid_m, pid_n = metile.tile_swizzle(metile.program_id(0), metile.program_id(1), "grouped", 8)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N), bounds=(M, N))


# (BLOCK_M, BLOCK_N, BLOCK_K, num_threads, num_stages) per layout.
CONFIGS = {
    "nt": [(128, 256, 32, 256, 3), (128, 256, 32, 256, 4), (128, 128, 32, 256, 4), (64, 128, 32, 128, 4)],
    "nn": [(128, 256, 32, 256, 3), (128, 256, 32, 256, 4), (128, 128, 32, 256, 4), (64, 128, 32, 128, 4)],
}


def fits(m, n, config):
    """Large shapes: tiles of 128 rows; skinny M: the 64-row tile (enough programs)."""
    bm, bn = config[0], config[1]
    if m < 1024:
        return bm == 64
    return bm >= 128 and bm <= m and bn <= n


def main():
    import torch
    import triton
    import triton.language as tl

    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2048x2048x2048,4096x4096x4096,8192x8192x8192,"
                    "8192x8192x16384,128x8192x8192")
    ap.add_argument("--modes", default="nt,nn")
    ap.add_argument("--no-peers", action="store_true", help="metile only (no cuBLAS / Triton)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    configs = [triton.Config({"BM": 128, "BN": 256, "BK": 32, "G": 8}, num_stages=3, num_warps=8),
               triton.Config({"BM": 128, "BN": 128, "BK": 32, "G": 8}, num_stages=4, num_warps=4),
               triton.Config({"BM": 64, "BN": 128, "BK": 32, "G": 8}, num_stages=4, num_warps=4)]

    @triton.autotune(configs=configs, key=["M", "N", "K", "NT"])
    @triton.jit
    def t_matmul(A, B, C, M, N, K, NT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        per_group = G * grid_n
        first_m = (pid // per_group) * G
        size_m = min(grid_m - first_m, G)
        pm = first_m + (pid % per_group) % size_m
        pn = (pid % per_group) // size_m
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            kk = k * BK + rk
            a = tl.load(A + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            if NT:
                bt = tl.load(B + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
                acc = tl.dot(a, tl.trans(bt), acc)
            else:
                b = tl.load(B + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
                acc = tl.dot(a, b, acc)
        tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    metile.set_device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    gpu = torch.cuda.get_device_name()
    wgmma_env = os.environ.get("METILE_CUDA_WGMMA", "")
    rng = np.random.default_rng(0)
    rows = []
    for shape in args.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        ta = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).cuda()
        tbt = torch.from_numpy(rng.standard_normal((n, k), dtype=np.float32)).cuda()  # B^T: N x K
        tb = tbt.t().contiguous()  # B: K x N
        ref = ta.double() @ tbt.double().t()
        flops = 2.0 * m * n * k
        calls = max(2, min(50, int(2e12 / flops)))

        def device_copy(t):
            buf = metile.Buffer.zeros(tuple(t.shape), "f32")
            buf.numpy()[...] = t.cpu().numpy()
            return buf

        ma, mc = device_copy(ta), metile.Buffer.zeros((m, n))
        tc = torch.empty((m, n), device="cuda", dtype=torch.float32)
        for mode in args.modes.split(","):
            kernel, mb = (gemm_nt, device_copy(tbt)) if mode == "nt" else (gemm_nn, device_copy(tb))
            runs = []
            for config in CONFIGS[mode]:
                bm, bn, bk, thr, stages = config
                if not fits(m, n, config):
                    continue
                launch = kernel[(metile.cdiv(m, bm), metile.cdiv(n, bn))]
                opts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_threads=thr, num_stages=stages, allow_tf32=True)
                mc.numpy()[...] = np.nan
                try:
                    src = launch.compile(ma, mb, mc, m, n, k, **opts).source("cuda")
                    launch(ma, mb, mc, m, n, k, **opts)
                    metile.synchronize()
                except Exception as e:  # a configuration the compiler rejects (resources)
                    print("skip", mode, shape, config, str(e).splitlines()[0], flush=True)
                    continue
                got = torch.from_numpy(mc.numpy().copy()).cuda().double()
                err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
                if not err < 3e-3:
                    print("WRONG", mode, shape, config, "rel err", err, flush=True)
                    continue
                atom = "wgmma" if ".tf32.tf32" in src else "mma.sync" if "mt_mma_tf32" in src else "fma"
                runs.append([lambda launch=launch, opts=opts: launch(ma, mb, mc, m, n, k, **opts), config, atom, err, []])
            for _ in range(2):
                for r in runs:
                    r[4].append(time_per_call(r[0], metile.synchronize, calls, 3))
            row = {"mode": mode, "shape": [m, n, k], "gpu": gpu, "METILE_CUDA_WGMMA": wgmma_env}
            if runs:
                best = min(runs, key=lambda r: min(r[4]))
                row.update({"metile_tflops": flops / min(best[4]) / 1e12, "metile_config": best[1],
                            "metile_atom": best[2], "metile_rel_err": best[3],
                            "all": [[r[1], r[2], flops / min(r[4]) / 1e12] for r in runs]})
            if not args.no_peers:
                bt = tbt if mode == "nt" else tb
                fn = (lambda: torch.matmul(ta, tbt.t(), out=tc)) if mode == "nt" else (lambda: torch.matmul(ta, tb, out=tc))
                row["cublas_tflops"] = flops / time_per_call(fn, torch.cuda.synchronize, calls) / 1e12
                grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
                tc.fill_(float("nan"))
                t_matmul[grid](ta, bt, tc, m, n, k, mode == "nt")
                row["triton_rel_err"] = float(torch.linalg.norm(tc.double() - ref) / torch.linalg.norm(ref))
                row["triton_tflops"] = flops / time_per_call(lambda: t_matmul[grid](ta, bt, tc, m, n, k, mode == "nt"),
                                                             torch.cuda.synchronize, calls) / 1e12
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print("%-4s %-16s %8s %-8s %8s %8s %9s %8s  %s" % ("mode", "M,N,K", "metile", "atom", "cuBLAS", "triton",
                                                       "vs cuBLAS", "vs tri", "config"))
    nan = float("nan")
    for r in rows:
        mt = r.get("metile_tflops", nan)
        cb, tr = r.get("cublas_tflops", nan), r.get("triton_tflops", nan)
        print("%-4s %-16s %8.1f %-8s %8.1f %8.1f %8.2fx %7.2fx  %s" % (
            r["mode"], ",".join(map(str, r["shape"])), mt, r.get("metile_atom"), cb, tr, mt / cb, mt / tr,
            r.get("metile_config")))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
