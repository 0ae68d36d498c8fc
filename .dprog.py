# one wave of flash attention programs (one per SM), a few launches per seq, for ncu/nsys
import math, sys, time
sys.path.insert(0, "bench"); sys.path.insert(0, "examples/python")
import numpy as np, metile, flash_attention
from attention_gpu import metile_copy
P, d = 132, 128
for seq in (1024, 4096):
    rng = np.random.default_rng(0)
    x = [metile_copy(rng.standard_normal((P, seq, d), dtype=np.float32) * 0.5) for _ in range(3)]
    out = metile.Buffer.zeros((P, seq, d), "f16"); lse = metile.Buffer.zeros((P, seq), "f32")
    def run():
        flash_attention.flash_attention_fwd[(1, P)](*x, out, lse, seq, flash_attention.LOG2E / math.sqrt(d),
            HEAD_DIM=d, BLOCK_M=128, BLOCK_N=128, CAUSAL=False, num_threads=256)
    run(); metile.synchronize()
    for n in (1, 50):
        t = time.perf_counter()
        for _ in range(n): run()
        t1 = time.perf_counter(); metile.synchronize(); t2 = time.perf_counter()
        print(f"seq {seq}: {n} launches: host {(t1-t)/n*1e6:.1f} us/launch, with sync {(t2-t)/n*1e6:.1f} us/launch", flush=True)
