# Does TMA engage and is it exact? The suite GEMM on cuda (sm_90) with and without unchecked=True: ragged shapes against float64, then f16 4096^3 at 128x256x64 timed both ways, alternating.
# Run from the repository root: python3 bench/gemm_tma_check.py (METILE_LIBRARY pointing at a build).
import sys, numpy as np
sys.path[:0] = ["bindings/python", "bindings/python/tests", "bench"]
import metile
from kernels import matmul as gemm
from gpu_timing import time_per_call
metile.set_device("cuda")
rng = np.random.default_rng(1)
for unchecked in (False, True):
    for (m, n, k) in ((136, 72, 40), (72, 200, 88), (256, 256, 256), (1000, 520, 328)):
        a = rng.standard_normal((m, k)).astype(np.float16); b = rng.standard_normal((k, n)).astype(np.float16)
        ma, mb, mc = metile.Buffer(data=a), metile.Buffer(data=b), metile.Buffer.zeros((m, n))
        launch = gemm[(metile.cdiv(m, 64), metile.cdiv(n, 64))]
        opts = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=16, unchecked=unchecked)
        g = launch.compile(ma, mb, mc, m, n, k, **opts).source("gpu_ir")
        launch(ma, mb, mc, m, n, k, **opts); metile.synchronize()
        want = a.astype(np.float64) @ b.astype(np.float64)
        err = np.linalg.norm(mc.numpy() - want) / np.linalg.norm(want)
        print(f"unchecked={unchecked} {m}x{n}x{k} tma={'tma_load' in g} wgmma={'wgmma' in g} relerr={err:.2e}", flush=True)
m = n = k = 4096
a = (rng.standard_normal((m, k)) * 0.1).astype(np.float16); b = (rng.standard_normal((k, n)) * 0.1).astype(np.float16)
ma, mb, mc = metile.Buffer(data=a), metile.Buffer(data=b), metile.Buffer.zeros((m, n))
for unchecked in (False, True, False, True):
    launch = gemm[(m // 128, n // 256)]
    opts = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_threads=256, unchecked=unchecked)
    g = launch.compile(ma, mb, mc, m, n, k, **opts).source("gpu_ir")
    t = time_per_call(lambda: launch(ma, mb, mc, m, n, k, **opts), metile.synchronize, 20, 3)
    print(f"4096^3 128x256x64 unchecked={unchecked} tma={'tma_load' in g} {2*m*n*k/t/1e12:.0f} TFLOP/s", flush=True)
