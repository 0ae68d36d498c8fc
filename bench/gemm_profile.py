"""One metile GEMM launch for a profiler (ncu), after one warm-up launch.

    ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 python3 bench/gemm_profile.py \
        [--dtype f16] [--n 4096] [--config 128,128,32,256]

--config is BLOCK_M, BLOCK_N, BLOCK_K, num_threads of bench/gemm_vs_cublas.py's kernel.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import metile  # noqa: E402
from gemm_vs_cublas import gemm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--dtype", default="f16", choices=("f16", "bf16", "tf32"))
ap.add_argument("--n", type=int, default=4096)
ap.add_argument("--config", default="128,128,32,256")
args = ap.parse_args()
bm, bn, bk, thr = (int(x) for x in args.config.split(","))
metile.set_device("cuda")
n = args.n
rng = np.random.default_rng(0)
name = "f32" if args.dtype == "tf32" else args.dtype
a = metile.Buffer.zeros((n, n), name)
b = metile.Buffer.zeros((n, n), name)
for buf in (a, b):
    x = rng.standard_normal((n, n)).astype(np.float32)
    if name == "bf16":  # round to nearest even, as bits
        u = x.view(np.uint32)
        buf.numpy()[...] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    else:
        buf.numpy()[...] = x.astype(np.float16 if name == "f16" else np.float32)
c = metile.Buffer.zeros((n, n))
for _ in range(2):
    gemm[(metile.cdiv(n, bm), metile.cdiv(n, bn))](a, b, c, n, n, n, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                   num_threads=thr, allow_tf32=True)
metile.synchronize()
print("done", float(np.abs(c.numpy()).mean()))
