#!/usr/bin/python3
"""What keeping every access inside its buffer costs (docs/semantics.md, "No access leaves
its buffer"): each kernel compiled twice, guarded (the default) and with `unchecked=True`, timed in
alternating samples in one process so drift and neighbours hit both alike.

    /usr/bin/python3 bench/bounds_cost.py [--device cpu|cuda|metal-sim] [--samples N]
        [--calls N] [--quick] [--markdown] [--clock wall|cpu]

The kernels are bench/cuda_vs_triton.py's (vector add, one-row softmax, layernorm, written as a
Triton user writes them). Time per call = (N back-to-back calls, then a synchronize) / N; the
reported figure is the median over the samples, and the ratio is guarded / unchecked (1.00 =
free; the aim is <= 1.02). On cuda run it on the GPU machine (the lead's H100/H200 runs) with
--device cuda and the default (large) sizes.
"""

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cuda_vs_triton import add, layernorm, softmax  # noqa: E402

import metile  # noqa: E402


CLOCK = time.perf_counter


def per_call(fn, calls):
    t0 = CLOCK()
    for _ in range(calls):
        fn()
    metile.synchronize()
    return (CLOCK() - t0) / calls


def compare(name, launch, bytes_moved, samples, calls):
    guarded = lambda: launch(unchecked=False)  # noqa: E731
    bare = lambda: launch(unchecked=True)  # noqa: E731
    for fn in (guarded, bare):  # compile and warm both first
        fn()
        per_call(fn, max(1, calls // 4))
    tg, tb = [], []
    for i in range(samples):
        pair = [(guarded, tg), (bare, tb)]
        for fn, out in (pair if i % 2 == 0 else pair[::-1]):
            out.append(per_call(fn, calls))
    mg, mb = statistics.median(tg), statistics.median(tb)
    # The best-of ratio too: on a shared machine interference only ever adds time, so the
    # fastest sample of each is the least disturbed one.
    return (name, mg, mb, bytes_moved / mg / 1e9, bytes_moved / mb / 1e9, mg / mb,
            min(g / b for g, b in zip(tg, tb)), max(g / b for g, b in zip(tg, tb)),
            min(tg) / min(tb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--calls", type=int, default=0, help="calls per sample (default by device)")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: the process's CPU time (all its threads), for host devices on a "
                         "machine shared with other work, where waiting for a core is not cost")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    gpu = a.device == "cuda"
    n_add = 1 << (16 if a.quick else 28 if gpu else 22)
    rows, cols = (64, 1024) if a.quick else (16384, 4096) if gpu else (2048, 1024)
    calls = a.calls or (50 if gpu else 20)
    rng = np.random.default_rng(0)
    with metile.use_device(a.device):
        x = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
        y = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
        o = metile.Buffer.zeros((n_add,))
        xs = metile.Buffer(data=rng.standard_normal((rows, cols), dtype=np.float32))
        os_ = metile.Buffer.zeros((rows, cols))
        w = metile.Buffer(data=rng.standard_normal(cols, dtype=np.float32))
        b = metile.Buffer(data=rng.standard_normal(cols, dtype=np.float32))
        block = 4096 if gpu else 1024
        la, sm, ln = add[(metile.cdiv(n_add, block),)], softmax[(rows,)], layernorm[(rows,)]
        results = [
            compare("vector add %d f32" % n_add,
                    lambda **o_: la(x, y, o, n_add, BLOCK=block, **o_), 12 * n_add,
                    a.samples, calls),
            compare("softmax %dx%d f32" % (rows, cols),
                    lambda **o_: sm(xs, os_, cols, BLOCK=cols, **o_), 8 * rows * cols,
                    a.samples, calls),
            compare("layernorm %dx%d f32" % (rows, cols),
                    lambda **o_: ln(xs, w, b, os_, cols, BLOCK=cols, **o_), 8 * rows * cols,
                    a.samples, calls),
        ]
        dev = metile.get_device()
        desc = "%s (%s)" % (dev.name, getattr(dev, "description", ""))
    print("device: %s; host: %s, %d cpus; %d alternating samples of %d calls; %s clock" %
          (desc, platform.processor() or platform.machine(), os.cpu_count(), a.samples, calls,
           a.clock))
    if a.markdown:
        print("\n| kernel | guarded | unchecked | guarded GB/s | unchecked GB/s | ratio (median) "
              "| ratio range | ratio (best of each) |\n|---|---|---|---|---|---|---|---|")
        for r in results:
            print("| %s | %.1f us | %.1f us | %.1f | %.1f | %.3f | %.3f-%.3f | %.3f |" %
                  (r[0], r[1] * 1e6, r[2] * 1e6, r[3], r[4], r[5], r[6], r[7], r[8]))
    else:
        for r in results:
            print("%-26s guarded %9.1f us  unchecked %9.1f us  (%7.1f / %7.1f GB/s)  ratio %.3f "
                  "[%.3f, %.3f] best-of %.3f" % (r[0], r[1] * 1e6, r[2] * 1e6, r[3], r[4], r[5], r[6], r[7],
                                             r[8]))


if __name__ == "__main__":
    main()
