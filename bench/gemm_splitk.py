"""split_k on the cuda device: the GEMM of bench/gemm_vs_cublas.py with split_k off (1), the
compiler's choice (0) and explicit part counts, against torch (cuBLAS), one run, one GPU.

    python3 bench/gemm_splitk.py [--shapes 16x8192x8192,128x8192x8192] [--dtypes f16,bf16]
                                 [--splits 1,0,2,4] [--configs 12,13]

For each shape, dtype and split_k, the fastest of the configurations gemm_vs_cublas.py's fits()
allows (or --configs, indices into its CONFIGS); every result is checked against torch in
float64 (relative Frobenius error) with the output poisoned (NaN) first, then timed with the
same host-timed method (bench/gpu_timing.py: median over repeats of N back-to-back calls and a
synchronize, / N). TFLOP/s = 2 M N K / time. "auto" is split_k 0, whose n the runtime picks per
launch (include/metile/metile.h: the GPU's SMs / the grid's programs, at most 8).
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
from gemm_vs_cublas import CONFIGS, fits, gemm  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16x8192x8192,128x8192x8192")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--splits", default="1,0,2,4")
    ap.add_argument("--configs", default=None)
    args = ap.parse_args()
    import torch

    metile.set_device("cuda")
    gpu = torch.cuda.get_device_name()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    splits = [int(s) for s in args.splits.split(",")]
    rng = np.random.default_rng(0)
    rows = []
    for dt in args.dtypes.split(","):
        for (m, n, k) in shapes:
            tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dt]
            ta = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).cuda().to(tdt)
            tb = torch.from_numpy(rng.standard_normal((k, n), dtype=np.float32)).cuda().to(tdt)
            ref = ta.double() @ tb.double()
            flops = 2.0 * m * n * k
            calls = max(2, min(50, int(2e12 / flops)))

            def device_copy(t):
                buf = metile.Buffer.zeros(tuple(t.shape), dt)
                host = t.cpu()
                buf.numpy()[...] = (host.view(torch.int16).numpy().view(np.uint16) if dt == "bf16"
                                    else host.numpy())
                return buf

            ma, mb, mc = device_copy(ta), device_copy(tb), metile.Buffer.zeros((m, n))
            t_torch = time_per_call(lambda: torch.matmul(ta, tb), torch.cuda.synchronize, calls)
            row = {"dtype": dt, "shape": [m, n, k], "gpu": gpu,
                   "cublas_tflops": flops / t_torch / 1e12}
            picked = [CONFIGS[int(i)] for i in args.configs.split(",")] if args.configs else CONFIGS
            for split in splits:
                best = None
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
                               num_threads=thr, split_k=split, **extra)
                    mc.numpy()[...] = np.nan
                    try:
                        run()
                        metile.synchronize()
                    except Exception as e:  # a configuration the compiler rejects (resources)
                        print("skip", dt, (m, n, k), config, split, str(e).splitlines()[0], flush=True)
                        continue
                    got = torch.from_numpy(mc.numpy().copy()).cuda().double()
                    err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
                    if not err < 1e-2:
                        print("WRONG", dt, (m, n, k), config, split, "rel err", err, flush=True)
                        continue
                    t = time_per_call(run, metile.synchronize, calls, 3)
                    if best is None or t < best[0]:
                        best = (t, config, err)
                name = "auto" if split == 0 else str(split)
                if best is not None:
                    row["split_" + name] = {"tflops": flops / best[0] / 1e12, "config": best[1],
                                            "rel_err": best[2]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    names = ["auto" if s == 0 else str(s) for s in splits]
    print("%-5s %-14s %8s " % ("dtype", "M,N,K", "cuBLAS") + " ".join("%14s" % ("split " + x) for x in names))
    for r in rows:
        cells = []
        for x in names:
            c = r.get("split_" + x)
            cells.append("%14s" % ("-" if c is None else "%.1f (%.2fx)" % (c["tflops"], c["tflops"] / r["cublas_tflops"])))
        print("%-5s %-14s %8.1f " % (r["dtype"], "x".join(map(str, r["shape"])), r["cublas_tflops"]) + " ".join(cells))


if __name__ == "__main__":
    main()
