"""The error of metile.exp on a device against float64 numpy, over every range a softmax meets:
python3 bench/cuda_exp_error.py [--device cuda]. Prints the largest relative error for |x| <= 1,
<= 10, <= 87 (and x up to 88.7, where f32 exp overflows) over 2^22 evenly spaced and 2^22 random
f32 inputs, and the same for the float64 reference rounded to f32 (the least any f32 exp can do)."""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import metile  # noqa: E402


@metile.kernel
def exp_kernel(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.exp(metile.load(X + offs, mask=m)), mask=m)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    metile.set_device(args.device)
    rng = np.random.default_rng(0)
    n = 1 << 22
    x = np.concatenate([np.linspace(-87.0, 88.7, n), rng.uniform(-87.0, 88.7, n)]).astype(np.float32)
    out = np.zeros_like(x)
    exp_kernel[((2 * n + 1023) // 1024,)](x, out, 2 * n, BLOCK=1024)
    ref = np.exp(x.astype(np.float64))
    rel = np.abs(out - ref) / ref
    rounded = np.abs(ref.astype(np.float32) - ref) / ref
    print("device %s: max relative error of exp (f32 rounding alone in brackets)" % args.device)
    for lim in (1.0, 10.0, 87.0, 88.7):
        sel = np.abs(x) <= lim
        print("  |x| <= %5.1f  %.3g  (%.3g)" % (lim, rel[sel].max(), rounded[sel].max()))


if __name__ == "__main__":
    main()
