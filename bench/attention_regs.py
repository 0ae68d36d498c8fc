"""Registers and speed of the flash attention example per configuration, for one library build:
run it once per build (METILE_LIBRARY) in the same GPU call to compare launch bounds.

    python3 bench/attention_regs.py [--label NAME] [--seqs 4096] [--configs 128,64,256] [--out FILE]

For each (BLOCK_M, BLOCK_N, threads) of bench/attention_gpu.py's CONFIGS (f16, batch 4 x 32
heads, head_dim 128, causal and not): registers per thread (the loaded function's), the
__launch_bounds__ the CUDA text carries, the max error against float64 on a small problem, and
TFLOP/s with bench/gpu_timing.py's method. Spills are read with ptxas -v on the CUDA text.
"""

import argparse
import json
import math
import os
import re

import numpy as np

from attention_gpu import CONFIGS, flash_attention, metile, metile_copy, parse_configs
from gpu_timing import time_per_call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="")
    ap.add_argument("--seqs", default="4096")
    ap.add_argument("--out", default=None)
    ap.add_argument("--configs", default=None, help="BM,BN,THREADS;... (default: attention_gpu's)")
    args = ap.parse_args()
    configs = parse_configs(args.configs) if args.configs else CONFIGS
    batch, heads, dim = 4, 32, 128
    rng = np.random.default_rng(0)
    rows = []
    for seq in (int(s) for s in args.seqs.split(",")):
        x = [(rng.standard_normal((batch * heads, seq, dim), dtype=np.float32) * 0.5).astype(np.float16)
             for _ in range(3)]
        mq, mk, mv = (metile_copy(a) for a in x)
        mo = metile.Buffer.zeros((batch * heads, seq, dim), "f16")
        mlse = metile.Buffer.zeros((batch * heads, seq), "f32")
        small = [np.ascontiguousarray(a[:2, :300]) for a in x]
        n = small[0].shape[1]
        for causal in (False, True):
            flops = 4.0 * batch * heads * seq * seq * dim / (2 if causal else 1)
            ref = flash_attention.reference(*small, causal)
            for bm, bn, threads in configs:
                kw = dict(HEAD_DIM=dim, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, num_threads=threads)
                so = np.zeros_like(small[0])
                slse = np.zeros((2, n), np.float32)
                launch = flash_attention.flash_attention_fwd[(metile.cdiv(n, bm), 2)]
                launch(*small, so, slse, n, flash_attention.LOG2E / math.sqrt(dim), **kw)
                err = float(np.abs(so.astype(np.float64) - ref).max())
                k = launch.compile(*small, so, slse, n, 0.1, **kw)
                cuda = metile.get_device().name == "cuda"
                bounds = re.search(r"__launch_bounds__\(([0-9, ]*)\)", k.source("cuda")).group(1) if cuda else None

                def run(bm=bm, kw=kw):
                    flash_attention.flash_attention_fwd[(metile.cdiv(seq, bm), batch * heads)](
                        mq, mk, mv, mo, mlse, seq, flash_attention.LOG2E / math.sqrt(dim), **kw)
                run()
                metile.synchronize()
                t = time_per_call(run, metile.synchronize, max(1, min(20, int(5e12 / flops))), 3)
                row = dict(label=args.label, gpu_off=os.environ.get("METILE_GPU_OFF", ""), seq=seq, causal=causal, config=[bm, bn, threads],
                           bounds=bounds, registers=k.info["registers_per_thread"], max_err=err,
                           tflops=flops / t / 1e12)
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
