"""The Triton tutorial wrapper idiom against a prepared launch: microseconds per call and the
process's resident memory over many calls.

    /usr/bin/python3 bench/python_wrapper_bench.py [--device cpu|interp|metal-sim|cuda]
        [--n ELEMENTS] [--calls 10000]

Three ways to run the same vector add (one program per BLOCK elements):
  prepared   run = add[grid].prepare(x, y, out, n, BLOCK=...) once, then run() per call
  fixed      add[grid](x, y, out, n, BLOCK=...) with a module-level grid and the same arrays
  tutorial   def wrapper(x, y): out = empty_like(x); grid = lambda meta: (cdiv(n, meta["BLOCK"]),);
             add[grid](x, y, out, n, BLOCK=...); return out   (a new output and lambda per call)
The per-call time is the best of 7 runs of the mean over --iters calls. RSS is read from
/proc/self/statm before and after --calls tutorial calls (after a gc.collect()); flat means the
cached launches keep none of the outputs alive. On cuda the arrays are torch tensors when torch
is installed (the tutorial's own idiom), else metile Buffers (the tutorial line then allocates a
Buffer); times there include torch.cuda.synchronize() only once at the end of each run.
"""

import argparse
import gc
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import metile  # noqa: E402


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m) + metile.load(Y + offs, mask=m),
                 mask=m)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def per_call_us(fn, iters, sync, repeats=7):
    samples = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return min(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=10000)
    a = ap.parse_args()
    metile.set_device(a.device)
    n, block = a.n, a.block

    torch = None
    if a.device == "cuda":
        try:
            import torch  # noqa: F811
        except ImportError:
            torch = None
    if torch is not None:
        x = torch.rand(n, device="cuda")
        y = torch.rand(n, device="cuda")
        out = torch.empty_like(x)
        empty_like = torch.empty_like
        sync = torch.cuda.synchronize
        kind = "torch tensors"
    elif a.device == "cuda":
        x = metile.Buffer(data=np.random.rand(n).astype(np.float32))
        y = metile.Buffer(data=np.random.rand(n).astype(np.float32))
        out = metile.Buffer.zeros((n,))
        empty_like = lambda t: metile.Buffer.zeros(t.shape)  # noqa: E731
        sync = metile.synchronize
        kind = "metile Buffers"
    else:
        x = np.random.rand(n).astype(np.float32)
        y = np.random.rand(n).astype(np.float32)
        out = np.empty_like(x)
        empty_like = np.empty_like
        sync = lambda: None  # noqa: E731
        kind = "numpy arrays"

    fixed_grid = (metile.cdiv(n, block),)
    run = add[fixed_grid].prepare(x, y, out, n, BLOCK=block)

    def fixed():
        add[fixed_grid](x, y, out, n, BLOCK=block)

    def wrapper(x, y):
        o = empty_like(x)
        grid = lambda meta: (metile.cdiv(n, meta["BLOCK"]),)  # noqa: E731
        add[grid](x, y, o, n, BLOCK=block)
        return o

    def tutorial():
        wrapper(x, y)

    for f in (run, fixed, tutorial):  # compile and fill the caches outside the timing
        f()
    sync()
    got = wrapper(x, y)
    sync()
    expect = (x + y)
    if torch is not None:
        assert torch.allclose(got, expect)
    elif a.device != "cuda":
        np.testing.assert_allclose(got, expect, rtol=1e-6)

    t_prep = per_call_us(run, a.iters, sync)
    t_fixed = per_call_us(fixed, a.iters, sync)
    t_tut = per_call_us(tutorial, a.iters, sync)

    gc.collect()
    r0 = rss_mb()
    for _ in range(a.calls):
        wrapper(x, y)
    sync()
    gc.collect()
    r1 = rss_mb()

    print(f"device {a.device} ({kind}), n={n}, BLOCK={block}, {platform.machine()}, "
          f"{os.cpu_count()} cpus, python {platform.python_version()}")
    print(f"{'prepared run()':<28}{t_prep:8.2f} us/call")
    print(f"{'fixed grid, same arrays':<28}{t_fixed:8.2f} us/call  ({t_fixed / t_prep:.2f}x prepared)")
    print(f"{'tutorial wrapper':<28}{t_tut:8.2f} us/call  ({t_tut / t_prep:.2f}x prepared)")
    print(f"RSS over {a.calls} tutorial calls: {r0:.1f} MB -> {r1:.1f} MB ({r1 - r0:+.1f} MB; "
          f"{n * 4 / 2**20:.3f} MB per output)")


if __name__ == "__main__":
    main()
