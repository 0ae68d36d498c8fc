"""Where the checked TMA GEMM falls short (issue 19): a few configurations, split-K among them,
on the shapes below 0.9x cuBLAS (2048^3, 4096^3, M=128 N=K=8192), torch.matmul in the same
process. The kernel is bench/gemm_vs_cublas.py's; each result is checked against float64 first,
then timed with gpu_timing.time_per_call.

    python3 bench/gemm_tma_sweep.py [--dtype f16] [--out FILE]
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

# shape -> [(BLOCK_M, BLOCK_N, BLOCK_K, num_threads, extra options)]
SWEEP = {
    (2048, 2048, 2048): [(128, 128, 64, 256, {}), (128, 128, 64, 256, {"num_stages": 4}),
                         (128, 256, 64, 256, {}), (64, 256, 64, 128, {}), (128, 128, 64, 128, {})],
    (4096, 4096, 4096): [(128, 256, 64, 256, {}), (128, 256, 64, 256, {"num_stages": 4}),
                         (128, 128, 64, 256, {"num_stages": 4}), (256, 128, 64, 256, {})],
    (128, 8192, 8192): [(64, 128, 64, 128, {}), (128, 128, 64, 256, {}), (128, 128, 64, 256, {"split_k": 2}),
                        (128, 128, 64, 256, {"split_k": 4}), (128, 256, 64, 256, {"split_k": 4}),
                        (64, 128, 64, 128, {"split_k": 2}), (64, 256, 64, 128, {"split_k": 4})],
}


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    metile.set_device("cuda")
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    rng = np.random.default_rng(0)
    rows = []
    for (m, n, k), configs in SWEEP.items():
        ta = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).cuda().to(tdt)
        tb = torch.from_numpy(rng.standard_normal((k, n), dtype=np.float32)).cuda().to(tdt)
        ref = ta.double() @ tb.double()
        flops = 2.0 * m * n * k
        calls = max(2, min(50, int(2e12 / flops)))

        def device_copy(t):
            buf = metile.Buffer.zeros(tuple(t.shape), args.dtype)
            host = t.cpu()
            buf.numpy()[...] = host.view(torch.int16).numpy().view(np.uint16) if args.dtype == "bf16" else host.numpy()
            return buf

        ma, mb, mc = device_copy(ta), device_copy(tb), metile.Buffer.zeros((m, n))
        t_torch = time_per_call(lambda: torch.matmul(ta, tb), torch.cuda.synchronize, calls)
        for bm, bn, bk, thr, extra in configs:
            launch = gemm[(metile.cdiv(m, bm), metile.cdiv(n, bn))]
            opts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_threads=thr, **extra)
            mc.numpy()[...] = np.nan
            try:
                tma = "tma_load" in launch.compile(ma, mb, mc, m, n, k, **opts).source("gpu_ir")
                launch(ma, mb, mc, m, n, k, **opts)
                metile.synchronize()
            except Exception as e:
                print("skip", (m, n, k), opts, str(e).splitlines()[0], flush=True)
                continue
            got = torch.from_numpy(mc.numpy().copy()).cuda().double()
            err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
            if not err < 1e-2:
                print("WRONG", (m, n, k), opts, err, flush=True)
                continue
            t = time_per_call(lambda: launch(ma, mb, mc, m, n, k, **opts), metile.synchronize, calls, 3)
            row = {"shape": [m, n, k], "dtype": args.dtype, "options": opts, "tma": tma, "rel_err": err,
                   "tflops": flops / t / 1e12, "torch_tflops": flops / t_torch / 1e12}
            rows.append(row)
            print("%-15s %-60s tma=%-5s %7.1f TFLOP/s  cuBLAS %7.1f  %.2fx" % (
                "x".join(map(str, (m, n, k))), opts, tma, row["tflops"], row["torch_tflops"],
                row["tflops"] / row["torch_tflops"]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
