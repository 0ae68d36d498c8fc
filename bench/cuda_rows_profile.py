"""One row kernel at one shape on cuda, launched a few times: the target of Nsight Compute in
bench/cuda_rows_run.sh (python3 bench/cuda_rows_profile.py KERNEL ROWS COLS)."""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
import metile  # noqa: E402
import kernels  # noqa: E402

name, R, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
metile.set_device("cuda")
rng = np.random.default_rng(0)
x = metile.Buffer(data=rng.standard_normal((R, N), dtype=np.float32))
w = metile.Buffer(data=rng.standard_normal(N, dtype=np.float32))
out = metile.Buffer.zeros((R, N))
args = {"seed_softmax": (x, out), "layernorm_loops": (x, w, w, out), "rmsnorm": (x, w, out)}[name]
for _ in range(3):
    getattr(kernels, name)[(R,)](*args, N, BLOCK=min(1 << max(N - 1, 1).bit_length(), 4096))
metile.synchronize()
