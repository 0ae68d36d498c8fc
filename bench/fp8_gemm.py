"""FP8 e4m3 GEMM with per-row / per-column scales (examples/python/fp8_gemm.py) against torch
`_scaled_mm` (cuBLAS FP8, row-wise scales) and the f16 GEMM (torch.matmul, and metile's kernel
on f16 operands), one run, one GPU (issue 35).

    python3 bench/fp8_gemm.py [--shapes 4096x4096x4096,...] [--out FILE.jsonl]

C[i, j] = sa[i] * sb[j] * sum_k A[i, k] B[k, j], A [M, K] and B e4m3, C bf16 (the output
torch's row-wise scaled path gives), at 4096^3 and 8192^3. metile takes the fastest of CONFIGS
(BLOCK_M, BLOCK_N, BLOCK_K, num_threads, num_stages) for B given as cuBLAS takes it, [N, K]
(fp8_gemm_nt_kernel: the FP8 wgmma atom on sm_90, two-level accumulation); at that
configuration it also times B [K, N] (fp8_gemm_kernel: f16 staging on cuda) and the fast
accumulation (METILE_GPU_OFF=fp8_promote), each with its error. Its operands are torch's tensors
through DLPack. Every result is checked against float64 (relative Frobenius error) before it is timed,
the output poisoned (NaN) first. Time per call: gpu_timing.time_per_call, the same for every
framework. TFLOP/s = 2 M N K / time. cuda only: elsewhere (no cuda device, no torch with CUDA
or no FP8 in torch) it says why and exits 0.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402
import fp8_gemm as F  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
# The last two: four warpgroups of 64 x 128 each, so the two-level accumulation's second register
# tile fits beside the accumulator (64 + 64 registers a thread).
CONFIGS = [(128, 128, 64, 256, 3), (128, 128, 128, 256, 3), (128, 256, 64, 256, 3),
           (256, 128, 64, 256, 3), (128, 128, 64, 128, 4), (256, 128, 128, 512, 3),
           (128, 256, 128, 512, 3)]


def unavailable():
    """Why this machine cannot run the comparison, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch has no CUDA device"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return "this torch has no float8_e4m3fn / _scaled_mm"
    if "cuda" not in metile.devices():
        return "metile has no cuda device"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=None, help="e.g. 4096x4096x4096,8192x8192x8192")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    why = unavailable()
    if why:
        print(f"fp8_gemm bench skipped: {why}")
        return 0
    import torch
    metile.set_device("cuda")
    gpu = torch.cuda.get_device_name()
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x"))
                                             for s in args.shapes.split(",")]
    rows = []
    for m, n, k in shapes:
        g = torch.Generator(device="cuda").manual_seed(0)
        a32 = torch.randn((m, k), device="cuda", generator=g)
        b32 = torch.randn((k, n), device="cuda", generator=g)
        sa = (a32.abs().amax(dim=1) / F.E4M3_MAX).float()
        sb = (b32.abs().amax(dim=0) / F.E4M3_MAX).float()
        a8 = (a32 / sa[:, None]).to(torch.float8_e4m3fn)
        b8 = (b32 / sb[None, :]).to(torch.float8_e4m3fn)
        ref = (a8.double() @ b8.double()) * sa.double()[:, None] * sb.double()[None, :]
        flops = 2.0 * m * n * k
        calls = max(2, min(50, int(2e12 / flops)))
        out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        ma, mb = metile.from_dlpack(a8), metile.from_dlpack(b8)
        msa, msb, mc = metile.from_dlpack(sa), metile.from_dlpack(sb), metile.from_dlpack(out)

        def rel_err(t):
            return float(torch.linalg.norm(t.double() - ref) / torch.linalg.norm(ref))

        # B as cuBLAS takes it (column-major: bt8 [N, K] row-major): metile's K-major form, the
        # FP8 wgmma atom on sm_90 (two-level accumulation unless METILE_GPU_OFF=fp8_promote).
        bt8 = b8.t().contiguous()
        mbt = metile.from_dlpack(bt8)

        def measure(kernel, b_arg, config):
            """(seconds per call, rel err) of one configuration, or None where it fails."""
            bm, bn, bk, thr, stages = config
            launch = kernel[(metile.cdiv(m, bm), metile.cdiv(n, bn))]

            def run():
                launch(ma, b_arg, msa, msb, mc, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                       num_threads=thr, num_stages=stages)
            out.fill_(float("nan"))
            torch.cuda.synchronize()
            try:
                run()
                metile.synchronize()
            except Exception as e:  # a configuration the compiler rejects (resources)
                print("skip", kernel.fn.__name__, (m, n, k), config, str(e).splitlines()[0], flush=True)
                return None
            err = rel_err(out)
            if not err < 1e-2:
                print("WRONG", kernel.fn.__name__, (m, n, k), config, "rel err", err, flush=True)
                return None
            return time_per_call(run, metile.synchronize, calls, 3), err

        best = None
        for config in CONFIGS:
            if config[0] > m or config[1] > n:
                continue
            r = measure(F.fp8_gemm_nt_kernel, mbt, config)
            if r is not None and (best is None or r[0] < best[0]):
                best = (r[0], config, r[1])
        # The same best configuration: B [K, N] (exact f16 staging on cuda), and the fast
        # accumulation (a kernel object of its own, compiled under METILE_GPU_OFF=fp8_promote).
        nn = fast = None
        if best is not None:
            nn = measure(F.fp8_gemm_kernel, mb, best[1])
            os.environ["METILE_GPU_OFF"] = "fp8_promote"
            fast = measure(metile.kernel(F.fp8_gemm_nt_kernel.fn), mbt, best[1])
            del os.environ["METILE_GPU_OFF"]
        # cuBLAS FP8: B column-major, row-wise scales as [M, 1] and [1, N].
        b8_cm = b8.t().contiguous().t()
        scaled = lambda: torch._scaled_mm(a8, b8_cm, scale_a=sa[:, None], scale_b=sb[None, :],  # noqa: E731
                                          out_dtype=torch.bfloat16)
        t_cublas = time_per_call(scaled, torch.cuda.synchronize, calls)
        cublas_err = rel_err(scaled())
        a16, b16 = a32.half(), b32.half()
        t_f16 = time_per_call(lambda: torch.matmul(a16, b16), torch.cuda.synchronize, calls)
        c16 = torch.empty((m, n), device="cuda", dtype=torch.float32)
        ones_m, ones_n = torch.ones(m, device="cuda"), torch.ones(n, device="cuda")
        m16 = [metile.from_dlpack(x) for x in (a16, b16, ones_m, ones_n, c16)]
        bm, bn, bk, thr, stages = best[1] if best else CONFIGS[0]
        f16_launch = F.fp8_gemm_kernel[(metile.cdiv(m, bm), metile.cdiv(n, bn))]
        f16_run = lambda: f16_launch(*m16, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,  # noqa: E731
                                     num_threads=thr, num_stages=stages)
        t_metile_f16 = time_per_call(f16_run, metile.synchronize, calls, 3)
        row = {"shape": [m, n, k], "gpu": gpu, "out": "bf16",
               "cublas_fp8_tflops": flops / t_cublas / 1e12, "cublas_fp8_rel_err": cublas_err,
               "torch_f16_tflops": flops / t_f16 / 1e12,
               "metile_f16_tflops": flops / t_metile_f16 / 1e12}
        if best is not None:
            row.update({"metile_fp8_tflops": flops / best[0] / 1e12, "metile_config": best[1],
                        "metile_rel_err": best[2],
                        "vs_cublas_fp8": t_cublas / best[0]})
        if nn is not None:
            row.update({"metile_fp8_b_kn_tflops": flops / nn[0] / 1e12, "metile_fp8_b_kn_rel_err": nn[1]})
        if fast is not None:
            row.update({"metile_fp8_fast_accum_tflops": flops / fast[0] / 1e12,
                        "metile_fp8_fast_accum_rel_err": fast[1]})
        print(json.dumps(row), flush=True)
        rows.append(row)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    print()
    print("%-16s %11s %11s %11s %10s %10s %9s  %s" % ("M,N,K", "metile fp8", "fast accum", "cuBLAS fp8",
                                                      "torch f16", "metile f16", "vs cuBLAS", "config"))
    for r in rows:
        mt = r.get("metile_fp8_tflops", float("nan"))
        print("%-16s %11.1f %11.1f %11.1f %10.1f %10.1f %8.2fx  %s" % (
            ",".join(map(str, r["shape"])), mt, r.get("metile_fp8_fast_accum_tflops", float("nan")),
            r["cublas_fp8_tflops"], r["torch_f16_tflops"], r["metile_f16_tflops"],
            mt / r["cublas_fp8_tflops"], r.get("metile_config")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
