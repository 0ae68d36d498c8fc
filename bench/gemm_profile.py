"""One metile GEMM launch for a profiler (ncu): f16 4096^3 with BLOCK 64x64x64 on 128 threads.

    ncu --clock-control none -k regex:gemm python3 bench/gemm_profile.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import metile  # noqa: E402
from gemm_vs_cublas import gemm  # noqa: E402

metile.set_device("cuda")
n = 4096
rng = np.random.default_rng(0)
a = metile.Buffer.zeros((n, n), "f16")
b = metile.Buffer.zeros((n, n), "f16")
a.numpy()[...] = rng.standard_normal((n, n)).astype(np.float16)
b.numpy()[...] = rng.standard_normal((n, n)).astype(np.float16)
c = metile.Buffer.zeros((n, n))
for _ in range(2):
    gemm[(n // 64, n // 64)](a, b, c, n, n, n, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_threads=128)
metile.synchronize()
print("done", float(np.abs(c.numpy()).mean()))
