"""metile GEMM on the cuda device against torch (cuBLAS) and a Triton matmul, one run, one GPU.

    python3 bench/gemm_vs_cublas.py [--quick] [--out FILE]

C = A @ B, row-major, C in the inputs' dtype as torch.matmul returns it (f16, bf16; f32 for the
tf32 rows; --c-dtype f32 gives every kernel an f32 C, the form of the results before 2026-12-07),
for f16, bf16 and f32 inputs (f32 as TF32 on all three: metile
with allow_tf32, torch with allow_tf32 matmuls, Triton's default for an f32 dot), at 1024^3,
4096^3, 8192^3 and the skinny M=16, N=K=8192. metile's kernel is the seed README GEMM
(tile_load / dot / tile_store) with Triton's grouped program order (tile_swizzle); it picks the fastest of a few (BLOCK_M, BLOCK_N, BLOCK_K,
num_threads, num_stages, warps_m x warps_n) configurations per shape (CONFIGS, filtered by
fits()), as Triton's autotuner does for its kernel. The Triton
kernel is the usual tiled matmul with grouped program order and a small autotune list.

Every result is checked against torch in float64 (relative Frobenius error) before it is timed,
with the output poisoned (NaN) first; metile's operands are its own device-resident buffers.
Time per call = median over repeats of (N back-to-back calls, then a device synchronize) / N,
after warm-up, the same host-timed method for all three. TFLOP/s = 2 M N K / time.
"""

import argparse
import json
import sys
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402


@metile.kernel
def gemm(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
         BLOCK_K: metile.constexpr):
    # Triton's grouped program order (as the Triton kernel below does by hand): programs that
    # run together share A rows and B columns in L2.
    pid_m, pid_n = metile.tile_swizzle(metile.program_id(0), metile.program_id(1), "grouped", 8)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc.to(C.dtype), (BLOCK_M, BLOCK_N),
                      bounds=(M, N))


# (BLOCK_M, BLOCK_N, BLOCK_K, num_threads, num_stages, warps_m, warps_n); num_stages 0 and
# warps 0 x 0 are the compiler's choices (3 stages on CUDA; warp tiles as square as possible).
CONFIGS = [
    (128, 128, 32, 256, 0, 0, 0), (128, 128, 32, 256, 4, 0, 0), (128, 128, 32, 256, 3, 4, 2),
    (128, 128, 64, 256, 3, 0, 0), (128, 256, 32, 256, 3, 0, 0), (256, 128, 32, 256, 3, 0, 0),
    (128, 256, 64, 256, 3, 0, 0), (128, 128, 32, 128, 4, 0, 0), (128, 128, 64, 128, 3, 0, 0),
    (64, 128, 32, 128, 4, 0, 0), (64, 64, 32, 128, 4, 0, 0), (64, 64, 64, 128, 3, 0, 0),
    (16, 128, 64, 128, 4, 0, 0), (16, 64, 64, 64, 4, 0, 0), (16, 64, 128, 128, 3, 0, 0),
    (16, 128, 128, 128, 3, 0, 0), (32, 128, 64, 128, 4, 0, 0),
    # 17-19: larger programs (64x64 warp tiles on 8 warps): less L2 traffic per flop.
    (256, 128, 64, 256, 3, 0, 0), (128, 256, 32, 256, 4, 0, 0), (256, 128, 32, 256, 4, 0, 0),
]


def fits(m, n, config):
    """The autotune space of a shape: tiles no larger than the matrix; 16-row tiles only for
    skinny M and skinny M only with them; small tiles only for shapes too small to fill the GPU."""
    bm, bn = config[0], config[1]
    if m < 64:
        return bm <= 32
    if bm < 64 or bm > m or bn > n:
        return False
    return (m // bm) * (n // bn) >= 132 or (bm, bn) in ((64, 64), (64, 128))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dtypes", default="f16,bf16,tf32")
    ap.add_argument("--shapes", default=None, help="e.g. 4096x4096x4096,16x8192x8192")
    ap.add_argument("--configs", default=None, help="indices into CONFIGS to try, e.g. 0,1,4")
    ap.add_argument("--memory", choices=("managed", "dlpack"), default="managed",
                    help="metile's own managed buffers, or torch's device memory through DLPack")
    ap.add_argument("--c-dtype", choices=("input", "f32"), default="input",
                    help="C's dtype for every framework: the inputs' (torch.matmul's) or f32")
    args = ap.parse_args()
    import torch
    import triton
    import triton.language as tl

    @triton.autotune(configs=[
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
        triton.Config({"BM": 128, "BN": 128, "BK": 32, "G": 8}, num_stages=4, num_warps=4),
        triton.Config({"BM": 64, "BN": 128, "BK": 32, "G": 8}, num_stages=4, num_warps=4),
        triton.Config({"BM": 16, "BN": 128, "BK": 128, "G": 1}, num_stages=4, num_warps=4),
    ], key=["M", "N", "K"])
    @triton.jit
    def t_matmul(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 G: tl.constexpr):
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
            b = tl.load(B + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(C + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    metile.set_device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    gpu = torch.cuda.get_device_name()
    shapes = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (16, 8192, 8192)]
    if args.quick:
        shapes = [(256, 256, 256), (16, 1024, 1024)]
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    rng = np.random.default_rng(0)
    rows = []
    for dt in args.dtypes.split(","):
        for (m, n, k) in shapes:
            a32 = rng.standard_normal((m, k), dtype=np.float32)
            b32 = rng.standard_normal((k, n), dtype=np.float32)
            tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}[dt]
            ta = torch.from_numpy(a32).cuda().to(tdt)
            tb = torch.from_numpy(b32).cuda().to(tdt)
            ref = ta.double() @ tb.double()
            flops = 2.0 * m * n * k
            calls = max(2, min(50, int(2e12 / flops)))

            # metile's own (managed) buffers, filled from the host once and prefetched to the GPU
            # by the first launch. Buffer(data=numpy) would wrap host memory in place on a GPU
            # with pageable-memory access (HMM), and the kernel would read it over the host
            # link; a DLPack import of torch's device memory failed in cuMemPrefetchAsync.
            def device_copy(t):
                name = {"f16": "f16", "bf16": "bf16", "tf32": "f32"}[dt]
                buf = metile.Buffer.zeros(tuple(t.shape), name)
                host = t.cpu()
                buf.numpy()[...] = (host.view(torch.int16).numpy().view(np.uint16) if dt == "bf16"
                                    else host.numpy())
                return buf

            cdt = torch.float32 if args.c_dtype == "f32" else tdt
            tout = torch.empty((m, n), device="cuda", dtype=cdt)
            if args.memory == "dlpack":
                ma, mb, mc = metile.from_dlpack(ta), metile.from_dlpack(tb), metile.from_dlpack(tout)
            else:
                ma, mb = device_copy(ta), device_copy(tb)
                mc = metile.Buffer.zeros((m, n), {torch.float16: "f16", torch.bfloat16: "bf16"}.get(cdt, "f32"))
            best = None
            picked = ([CONFIGS[int(i)] for i in args.configs.split(",")] if args.configs else CONFIGS)
            for config in picked:
                bm, bnn, bk, thr, stages, wm, wn = config
                if not fits(m, n, config):
                    continue
                launch = gemm[(metile.cdiv(m, bm), metile.cdiv(n, bnn))]
                extra = {"num_stages": stages} if stages else {}
                if wm:
                    extra.update(warps_m=wm, warps_n=wn)

                def run(launch=launch, bm=bm, bnn=bnn, bk=bk, thr=thr, extra=extra):
                    launch(ma, mb, mc, m, n, k, BLOCK_M=bm, BLOCK_N=bnn, BLOCK_K=bk,
                           num_threads=thr, allow_tf32=True, **extra)
                if args.memory == "dlpack":  # every element must be written
                    tout.fill_(float("nan"))
                    torch.cuda.synchronize()
                else:
                    mc.numpy()[...] = 0x7FC0 if cdt == torch.bfloat16 else np.nan  # bf16: NaN as bits
                try:
                    run()
                    metile.synchronize()
                except Exception as e:  # a configuration the compiler rejects (resources)
                    print("skip", dt, (m, n, k), config, str(e).splitlines()[0], flush=True)
                    continue
                if args.memory == "dlpack":
                    got = tout.double()
                else:
                    host = mc.numpy().copy()
                    got = (torch.from_numpy(host.view(np.int16)).view(torch.bfloat16) if cdt == torch.bfloat16
                           else torch.from_numpy(host)).cuda().double()
                err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
                if not err < (5e-3 if dt != "bf16" else 1e-2):
                    print("WRONG", dt, (m, n, k), config, "rel err", err, flush=True)
                    continue
                t = time_per_call(run, metile.synchronize, calls, 3)
                if best is None or t < best[0]:
                    best = (t, config, err)
            tc = torch.empty((m, n), device="cuda", dtype=cdt)
            # cuBLAS writes C in cdt: into tc where that is the inputs' dtype, else (f16/bf16 with
            # an f32 C, which torch.matmul cannot write) its own f16/bf16 result.
            t_torch = time_per_call(lambda: torch.matmul(ta, tb, out=tc) if cdt == tdt else torch.matmul(ta, tb),
                                    torch.cuda.synchronize, calls)
            grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
            t_matmul[grid](ta, tb, tc, m, n, k)
            terr = float(torch.linalg.norm(tc.double() - ref) / torch.linalg.norm(ref))
            t_triton = time_per_call(lambda: t_matmul[grid](ta, tb, tc, m, n, k), torch.cuda.synchronize, calls)
            row = {"dtype": dt, "shape": [m, n, k], "gpu": gpu, "memory": args.memory, "c_dtype": str(cdt),
                   "torch_tflops": flops / t_torch / 1e12, "triton_tflops": flops / t_triton / 1e12,
                   "triton_rel_err": terr}
            if best is not None:
                row.update({"metile_tflops": flops / best[0] / 1e12, "metile_config": best[1],
                            "metile_rel_err": best[2]})
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print("%-5s %-16s %9s %9s %9s %8s %8s  %s" % ("dtype", "M,N,K", "metile", "cuBLAS", "triton",
                                                   "vs cuBLAS", "vs tri", "metile config"))
    for r in rows:
        mt = r.get("metile_tflops", float("nan"))
        print("%-5s %-16s %9.1f %9.1f %9.1f %8.2fx %8.2fx  %s" % (
            r["dtype"], ",".join(map(str, r["shape"])), mt, r["torch_tflops"], r["triton_tflops"],
            mt / r["torch_tflops"], mt / r["triton_tflops"], r.get("metile_config")))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
