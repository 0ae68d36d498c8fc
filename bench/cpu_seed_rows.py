#!/usr/bin/python3
"""Kernels as users write them on the cpu device, against numpy, measured side by side.

    METILE_LIBRARY=build/libmetile.so /usr/bin/python3 bench/cpu_seed_rows.py [--rounds 7] [--markdown]

Workloads (f32): the seed README softmax verbatim (three tile_range passes) at 4096x4096, with
the compiler's reduction merge (fuse_reductions, the default) and without; seed-style layernorm
(and the textbook form, a mean pass then a pass summing (x - mean)^2, merged as Welford's update)
and rmsnorm (a loop per statistic) at 4096x4096; the tutorial vector add at 2^25 elements against
`numpy.add(x, y, out=o)`; the seed README GEMM (tile_load, dot over K, tile_store, with bounds) at
1024^3 f32 against OpenBLAS's cblas_sgemm, called through ctypes from `--openblas` (Debian:
libopenblas0-pthread; numpy is not used for it because Debian's numpy links the reference BLAS
unless the alternative is switched). Every kernel is bindings/python/tests/kernels.py's.
"no streaming" contenders are the same kernels prepared with METILE_CPU_STREAM_MIN_BYTES set out of
reach, so their stores never bypass the cache (the library's behaviour before streamed stores).
Method: every workload's contenders run one call each in turn, `--rounds` times (after a warm-up
call each), through a prepared launch (metile) or a plain call (numpy, OpenBLAS), each call
followed by synchronize; the table gives the median ms of each, the median process CPU ms per
call (all threads of the process: the pool's, OpenBLAS's), and the median over rounds of the
per-round ratio reference / metile, so both sides see the same machine load. The load average is
printed before and after.
"""

import argparse
import ctypes
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
import metile  # noqa: E402
# The tests' kernels (one copy); layernorm is the seed-style one with a loop per statistic.
from kernels import layernorm_centred, layernorm_loops as layernorm, rmsnorm, seed_softmax  # noqa: E402
from kernels import matmul as gemm, vector_add as add  # noqa: E402


def alternate(contenders, rounds):
    """{name: ([wall seconds], [process CPU seconds])}, one call of each contender per round."""
    for fn in contenders.values():
        fn()
    times = {k: ([], []) for k in contenders}
    for _ in range(rounds):
        for k, fn in contenders.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times[k][0].append(time.perf_counter() - t0)
            times[k][1].append(time.process_time() - c0)
    return times


def no_streaming(make):
    """A launch prepared with streamed stores off (they are decided when a launch is prepared)."""
    saved = os.environ.get("METILE_CPU_STREAM_MIN_BYTES")
    os.environ["METILE_CPU_STREAM_MIN_BYTES"] = str(1 << 62)
    try:
        return make()
    finally:
        if saved is None:
            del os.environ["METILE_CPU_STREAM_MIN_BYTES"]
        else:
            os.environ["METILE_CPU_STREAM_MIN_BYTES"] = saved


def openblas_sgemm(path, a, b, c):
    """C = A @ B through cblas_sgemm (row-major, no transposes)."""
    lib = ctypes.CDLL(path)
    fp = ctypes.POINTER(ctypes.c_float)
    (m, k), n = a.shape, b.shape[1]
    args = (101, 111, 111, m, n, k, ctypes.c_float(1.0), a.ctypes.data_as(fp), k,
            b.ctypes.data_as(fp), n, ctypes.c_float(0.0), c.ctypes.data_as(fp), n)
    return lambda: lib.cblas_sgemm(*args)


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
    ap.add_argument("--gemm", type=int, default=1024, help="M = N = K of the GEMM (0: skip)")
    ap.add_argument("--gemm-blocks", default="64x64x32,128x128x64,96x128x256",
                    help="BLOCK_M x BLOCK_N x BLOCK_K configurations of the GEMM")
    ap.add_argument("--openblas", default="/usr/lib/x86_64-linux-gnu/libopenblas.so.0")
    ap.add_argument("--only", default="", help="comma list of workload prefixes to run")
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
            "metile no streaming": no_streaming(lambda: synced(
                add[(metile.cdiv(n_add, ABLOCK),)].prepare(ax, ay, ao, n_add, BLOCK=ABLOCK))),
        }),
    ]
    workloads[0][1]["metile fused no streaming"] = no_streaming(lambda: synced(
        seed_softmax[(R,)].prepare(x, out, N, BLOCK=B)))
    if args.gemm:
        G = args.gemm
        ga = rng.standard_normal((G, G), dtype=np.float32)
        gb = rng.standard_normal((G, G), dtype=np.float32)
        gc = np.zeros((G, G), np.float32)
        ma, mb, mc = metile.Buffer(data=ga), metile.Buffer(data=gb), metile.Buffer.zeros((G, G))
        contenders = {"OpenBLAS": openblas_sgemm(args.openblas, ga, gb, gc)}
        for cfg in args.gemm_blocks.split(","):
            bm, bn, bk = (int(v) for v in cfg.split("x"))
            grid = (metile.cdiv(G, bm), metile.cdiv(G, bn))
            contenders["metile %s" % cfg] = synced(gemm[grid].prepare(
                ma, mb, mc, G, G, G, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk))
        workloads.append(("GEMM %d^3 f32" % G, contenders))
    if args.only:
        workloads = [w for w in workloads if w[0].startswith(tuple(args.only.split(",")))]
    load0 = os.getloadavg()
    rows = []
    for name, contenders in workloads:
        t = alternate(contenders, args.rounds)
        refname = next(iter(contenders))
        ref = t[refname][0]
        for k in contenders:
            if k == refname:
                continue
            ratio = statistics.median(r / m for r, m in zip(ref, t[k][0]))
            rows.append((name, k, statistics.median(t[k][0]) * 1e3, statistics.median(t[k][1]) * 1e3,
                         refname, statistics.median(ref) * 1e3,
                         statistics.median(t[refname][1]) * 1e3, ratio))
            print("%-36s %-18s %8.2f ms (cpu %8.2f)  %s %8.2f ms (cpu %8.2f)  ratio %.2fx" % rows[-1],
                  flush=True)
        if name.startswith("GEMM"):
            err = np.abs(mc.numpy() - ga.astype(np.float64) @ gb).max()
            print("GEMM max abs error vs float64 (last metile config): %.1e" % err)
    load = os.getloadavg()
    print("machine: %s, %d cpus, %s; load average before %.1f %.1f %.1f, after %.1f %.1f %.1f; "
          "metile threads: %s" % (platform.processor() or platform.machine(), os.cpu_count(),
                                  platform.platform(), *load0, *load,
                                  os.environ.get("METILE_NUM_THREADS", "default")))
    if args.markdown:
        print("\n| workload | metile | ms | CPU ms | reference | ms | CPU ms | reference / metile |\n"
              "|---|---|---|---|---|---|---|---|")
        for r in rows:
            print("| %s | %s | %.2f | %.2f | %s | %.2f | %.2f | %.2fx |" % r)


if __name__ == "__main__":
    main()
