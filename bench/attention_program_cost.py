"""Time of one flash attention program against its K loop's length: one wave of programs (at
most one per SM) over seq = 1k..16k keys. A straight line t = fixed + per_block * (seq / BLOCK_N)
separates the cost of a program's prologue and epilogue from the cost of its loop iterations.

The wave's programs are query blocks of as few (batch, head)s as fill it (min(seq / BLOCK_M,
programs) blocks of each head), as in a real grid: the programs of a head read the same K/V
blocks, which L2 serves after the first. With --own-heads every program has a (batch, head) of
its own (query block 0 of each), the first form of this script: then every K/V block comes from
DRAM and the slope measures memory bandwidth (64 KB a program a block), not the loop's compute.

    python3 bench/attention_program_cost.py [--config 128,128,256] [--programs 132] [--dim 128]
                                            [--own-heads]
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
    ap.add_argument("--own-heads", action="store_true", help="one (batch, head) a program (DRAM-bound)")
    args = ap.parse_args()
    bm, bn, threads = (int(x) for x in args.config.split(","))
    rng = np.random.default_rng(0)
    seqs = [int(s) for s in args.seqs.split(",")]
    rows = []
    for seq in seqs:
        blocks = 1 if args.own_heads else min(seq // bm, args.programs)
        heads = args.programs // blocks
        x = [metile_copy(rng.standard_normal((heads, seq, args.dim), dtype=np.float32) * 0.5)
             for _ in range(3)]
        out = metile.Buffer.zeros((heads, seq, args.dim), "f16")
        lse = metile.Buffer.zeros((heads, seq), "f32")

        def run():
            flash_attention.flash_attention_fwd[(blocks, heads)](
                *x, out, lse, seq, flash_attention.LOG2E / math.sqrt(args.dim), HEAD_DIM=args.dim,
                BLOCK_M=bm, BLOCK_N=bn, CAUSAL=False, num_threads=threads)
        t = time_per_call(run, metile.synchronize, 20, 7)
        rows.append({"seq": seq, "blocks": seq // bn, "programs": blocks * heads, "us": t * 1e6})
        print(json.dumps(rows[-1]), flush=True)
    n = np.array([r["blocks"] for r in rows], float)
    t = np.array([r["us"] for r in rows])
    slope, fixed = np.polyfit(n, t, 1)
    programs = min(r["programs"] for r in rows)
    rate = f"{4 * bm * bn * args.dim / slope / 1e6 * programs:.0f} TFLOP/s in the loop"
    if args.own_heads:  # every program's K/V block from DRAM: 2 tiles of BLOCK_N x dim f16
        rate += f", {2 * bn * args.dim * 2 * programs / slope / 1e6:.2f} TB/s of K/V reads"
    print(f"config {args.config}, {programs} programs ({'own' if args.own_heads else 'shared'} heads), "
          f"head_dim {args.dim}: t = {fixed:.1f} us + {slope:.3f} us per K/V block of {bn} ({rate})")


if __name__ == "__main__":
    main()
