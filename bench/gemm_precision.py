"""f32 dot precision on cuda (issue 30 item 1): error and speed of each input_precision against
float64, beside cuBLAS in f32 and in TF32, one process, one GPU.

    python3 bench/gemm_precision.py [--shapes 4096,8192] [--out FILE]

C = A @ B, A M x K and B K x N row-major f32, standard normal, square shapes. metile's kernel is
the tests' mm_precision (tile_load / dot(a, b, acc, input_precision=P) / tile_store) with one configuration (CONFIG) for
every mode, so the modes differ only in the dot: "ieee" (f32 FMAs), "tf32x3" (three TF32
mma.sync products, the default), "tf32" (one TF32 product; wgmma on sm_90 where it applies).
torch runs a @ b with torch.backends.cuda.matmul.allow_tf32 False ("f32") and True ("tf32").

Error: max |C - C64| / max |C64| and the relative Frobenius error, C64 computed by torch in
float64 on the GPU. The output is poisoned (NaN) before the checked run. Time per call:
gpu_timing.time_per_call (median of repeats of N back-to-back calls and a synchronize), the same
for every library. TFLOP/s = 2 M N K / time. Writes JSON lines, and a markdown table to --out.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
sys.path.insert(0, HERE)
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402
from kernels import mm_precision as gemm  # noqa: E402

CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_threads=256, num_stages=3)
MODES = ["ieee", "tf32x3", "tf32"]


def errors(got, ref):
    d = (got.double() - ref).abs()
    return (float(d.max() / ref.abs().max()),
            float((got.double() - ref).norm() / ref.norm()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096,8192")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch
    metile.set_device("cuda")
    gpu = torch.cuda.get_device_name()
    rows = []
    for size in (int(s) for s in args.shapes.split(",")):
        m = n = k = size
        flops = 2.0 * m * n * k
        calls = max(2, min(20, int(4e12 / flops)))
        gen = torch.Generator(device="cuda").manual_seed(size)
        ta = torch.randn((m, k), device="cuda", generator=gen)
        tb = torch.randn((k, n), device="cuda", generator=gen)
        ref = ta.double() @ tb.double()
        ma, mb = metile.from_dlpack(ta), metile.from_dlpack(tb)
        tc = torch.empty((m, n), device="cuda")
        mc = metile.from_dlpack(tc)
        launch = gemm[(metile.cdiv(m, CONFIG["BLOCK_M"]), metile.cdiv(n, CONFIG["BLOCK_N"]))]
        for mode in MODES:
            row = {"library": "metile", "mode": mode, "shape": [m, n, k], "gpu": gpu}
            src = launch.compile(ma, mb, mc, m, n, k, PREC=mode, **CONFIG).source("cuda")
            row["atom"] = ("wgmma" if ".tf32.tf32" in src else
                           "mma.sync" if "mma" in src and "tf32" in src else "fma")

            def run(mode=mode):
                launch(ma, mb, mc, m, n, k, PREC=mode, **CONFIG)
            tc.fill_(float("nan"))
            run()
            metile.synchronize()
            row["max_rel_err"], row["fro_rel_err"] = errors(tc, ref)
            row["tflops"] = flops / time_per_call(run, metile.synchronize, calls, 3) / 1e12
            print(json.dumps(row), flush=True)
            rows.append(row)
        for mode, tf32 in (("f32", False), ("tf32", True)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            row = {"library": "torch", "mode": mode, "shape": [m, n, k], "gpu": gpu}

            def run():
                torch.matmul(ta, tb, out=tc)
            tc.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            row["max_rel_err"], row["fro_rel_err"] = errors(tc, ref)
            row["tflops"] = flops / time_per_call(run, torch.cuda.synchronize, calls, 3) / 1e12
            print(json.dumps(row), flush=True)
            rows.append(row)
        torch.backends.cuda.matmul.allow_tf32 = False
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# f32 GEMM per input_precision, {gpu}\n\n"
                    "`python3 bench/gemm_precision.py` (method in its docstring).\n\n"
                    "| shape | library | mode | atom | max rel err | Frobenius rel err | TFLOP/s |\n"
                    "|---|---|---|---|---|---|---|\n")
            for r in rows:
                f.write(f"| {r['shape'][0]}^3 | {r['library']} | {r['mode']} | {r.get('atom', '')} | "
                        f"{r['max_rel_err']:.2e} | {r['fro_rel_err']:.2e} | {r['tflops']:.1f} |\n")


if __name__ == "__main__":
    main()
