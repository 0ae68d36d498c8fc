"""Time of one flash attention program against its K loop's length: one wave of programs (one
per SM), each with query block 0 of its own (batch, head), over seq = 1k..16k keys. A straight
line t = fixed + per_block * (seq / BLOCK_N) separates the cost of a program's prologue and
epilogue from the cost of its loop iterations.

    python3 bench/attention_program_cost.py [--config 128,128,256] [--programs 132] [--dim 128]
"""

import argparse
import json
import math

import numpy as np

from attention_gpu import flash_attention, metile, metile_copy
from gpu_timing import time_per_call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="128,128,256")
    ap.add_argument("--programs", type=int, default=132, help="programs in the wave (the SM count)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    args = ap.parse_args()
    bm, bn, threads = (int(x) for x in args.config.split(","))
    rng = np.random.default_rng(0)
    seqs = [int(s) for s in args.seqs.split(",")]
    rows = []
    for seq in seqs:
        x = [metile_copy(rng.standard_normal((args.programs, seq, args.dim), dtype=np.float32) * 0.5)
             for _ in range(3)]
        out = metile.Buffer.zeros((args.programs, seq, args.dim), "f16")
        lse = metile.Buffer.zeros((args.programs, seq), "f32")

        def run():
            flash_attention.flash_attention_fwd[(1, args.programs)](
                *x, out, lse, seq, flash_attention.LOG2E / math.sqrt(args.dim), HEAD_DIM=args.dim,
                BLOCK_M=bm, BLOCK_N=bn, CAUSAL=False, num_threads=threads)
        t = time_per_call(run, metile.synchronize, 20, 7)
        rows.append({"seq": seq, "blocks": seq // bn, "us": t * 1e6})
        print(json.dumps(rows[-1]), flush=True)
    n = np.array([r["blocks"] for r in rows], float)
    t = np.array([r["us"] for r in rows])
    slope, fixed = np.polyfit(n, t, 1)
    print(f"config {args.config}, {args.programs} programs, head_dim {args.dim}: "
          f"t = {fixed:.1f} us + {slope:.3f} us per K/V block of {bn} "
          f"({4 * bm * bn * args.dim / slope / 1e6 * args.programs:.0f} TFLOP/s in the loop)")


if __name__ == "__main__":
    main()
