#!/usr/bin/python3
"""Kernels as users write them on the cpu device, against numpy, measured side by side.

    METILE_LIBRARY=build/libmetile.so /usr/bin/python3 bench/cpu_seed_rows.py [--rounds 7] [--markdown]

Workloads (f32): the seed README softmax verbatim (three tile_range passes) at 4096x4096, with
the compiler's reduction merge (fuse_reductions, the default) and without; seed-style layernorm
(and the textbook form, a mean pass then a pass summing (x - mean)^2, merged as Welford's update)
and rmsnorm (a loop per statistic, bench/cuda_rows.py's kernels) at 4096x4096; the tutorial
vector add at 2^25 elements against `numpy.add(x, y, out=o)`.
Method: every workload's contenders run one call each in turn, `--rounds` times (after a warm-up
call each), through a prepared launch (metile) or a plain call (numpy), each call followed by
synchronize; the table gives the median ms of each and the median over rounds of the per-round
ratio numpy / metile, so both sides see the same machine load. The load average is printed.
"""

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
import metile  # noqa: E402
from cuda_rows import layernorm, layernorm_centred, rmsnorm, seed_softmax  # noqa: E402


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask) + metile.load(Y + offs, mask=mask),
                 mask=mask)


def alternate(contenders, rounds):
    """{name: [seconds per round]}, calling each contender once per round in turn."""
    for fn in contenders.values():
        fn()
    times = {k: [] for k in contenders}
    for _ in range(rounds):
        for k, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def synced(fn):
    def run():
        fn()
        metile.synchronize()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--block", type=int, default=1024, help="BLOCK of the row kernels")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    metile.set_device("cpu")
    rng = np.random.default_rng(0)
    R, N, B = args.rows, args.cols, args.block
    x = metile.Buffer(data=rng.standard_normal((R, N), dtype=np.float32))
    w = metile.Buffer(data=rng.standard_normal(N, dtype=np.float32))
    b = metile.Buffer(data=rng.standard_normal(N, dtype=np.float32))
    out = metile.Buffer.zeros((R, N))
    xn, wn, bn = x.numpy(), w.numpy(), b.numpy()

    def np_softmax():
        e = np.exp(xn - xn.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def np_layernorm():
        xc = xn - xn.mean(1, keepdims=True)
        return xc / np.sqrt((xc * xc).mean(1, keepdims=True) + 1e-5) * wn + bn

    def np_rmsnorm():
        return xn / np.sqrt((xn * xn).mean(1, keepdims=True) + 1e-5) * wn

    n_add = 1 << 25
    ax = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
    ay = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
    ao = metile.Buffer.zeros((n_add,))
    axn, ayn, aon = ax.numpy(), ay.numpy(), ao.numpy()
    ABLOCK = 8192

    workloads = [
        ("seed softmax %dx%d, BLOCK %d" % (R, N, B), {
            "numpy": np_softmax,
            "metile fused": synced(seed_softmax[(R,)].prepare(x, out, N, BLOCK=B)),
            "metile as written": synced(seed_softmax[(R,)].prepare(x, out, N, BLOCK=B,
                                                                   fuse_reductions=False)),
        }),
        ("layernorm loops %dx%d, BLOCK %d" % (R, N, B), {
            "numpy": np_layernorm,
            "metile fused": synced(layernorm[(R,)].prepare(x, w, b, out, N, BLOCK=B)),
            "metile centred": synced(layernorm_centred[(R,)].prepare(x, w, b, out, N, BLOCK=B)),
            "metile centred as written": synced(layernorm_centred[(R,)].prepare(
                x, w, b, out, N, BLOCK=B, fuse_reductions=False)),
            "metile as written": synced(layernorm[(R,)].prepare(x, w, b, out, N, BLOCK=B,
                                                                fuse_reductions=False)),
        }),
        ("rmsnorm loops %dx%d, BLOCK %d" % (R, N, B), {
            "numpy": np_rmsnorm,
            "metile": synced(rmsnorm[(R,)].prepare(x, w, out, N, BLOCK=B)),
        }),
        ("vector add 2^25", {
            "numpy": lambda: np.add(axn, ayn, out=aon),
            "metile": synced(add[(metile.cdiv(n_add, ABLOCK),)].prepare(ax, ay, ao, n_add,
                                                                             BLOCK=ABLOCK)),
        }),
    ]
    rows = []
    for name, contenders in workloads:
        t = alternate(contenders, args.rounds)
        ref = t["numpy"]
        for k in contenders:
            if k == "numpy":
                continue
            ratio = statistics.median(r / m for r, m in zip(ref, t[k]))
            rows.append((name, k, statistics.median(t[k]) * 1e3, statistics.median(ref) * 1e3,
                         ratio))
            print("%-36s %-18s %9.2f ms  numpy %9.2f ms  numpy/metile %.2fx" % rows[-1], flush=True)
    load = os.getloadavg()
    print("machine: %s, %d cpus, %s; load average %.1f %.1f %.1f; metile threads: %s" % (
        platform.processor() or platform.machine(), os.cpu_count(), platform.platform(), *load,
        os.environ.get("METILE_NUM_THREADS", "default")))
    if args.markdown:
        print("\n| workload | metile | ms | numpy ms | numpy / metile |\n|---|---|---|---|---|")
        for r in rows:
            print("| %s | %s | %.2f | %.2f | %.2fx |" % r)


if __name__ == "__main__":
    main()
