"""Launch overhead of the Python binding: microseconds per `kernel[grid](...)` call and per
prepared launch (`kernel[grid].prepare(...)()`), for a small kernel (one program of 64
elements). Runs on cpu when it is available, else on interp (labelled); --device picks one.

    /usr/bin/python3 bench/python_launch_bench.py [--device NAME] [--iters N]

Each time includes the device's own launch cost (for interp: interpreting the program), so the
kernel does almost nothing; `bare C launch` is metile_launch_run called straight through ctypes,
the floor for any Python launch path. The last block replaces the device call by a no-op C call
of the same signature (metile_launch_release(NULL)) to show the binding's own overhead.
"""

import argparse
import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
import metile  # noqa: E402
from metile import _ffi  # noqa: E402


@metile.kernel
def tiny(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m) + 1.0, mask=m)


def per_call_us(fn, iters, repeats=7):
    """The best of `repeats` runs of the mean time per call, in microseconds (the minimum is
    the least disturbed by other load on the machine)."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return min(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--iters", type=int, default=20000)
    args = ap.parse_args()
    name = args.device or ("cpu" if "cpu" in metile.devices() else "interp")
    dev = metile.set_device(name)
    label = "" if name == "cpu" else f"  [{name}: not the cpu device]"

    x = metile.Buffer(data=np.arange(64, dtype=np.float32))
    out = metile.Buffer.zeros((64,))
    xa = np.arange(64, dtype=np.float32)
    oa = np.zeros(64, np.float32)
    launcher = tiny[(1,)]
    launcher(x, out, 64, BLOCK=64)          # trace + compile outside the timing
    launcher(xa, oa, 64, BLOCK=64)
    prepared = launcher.prepare(x, out, 64, BLOCK=64)
    handle = prepared._handle
    run = _ffi.metile_launch_run

    results = [
        ("bare C launch (metile_launch_run via ctypes)",
         per_call_us(lambda: run(handle), args.iters)),
        ("prepared launch: run = k[grid].prepare(...); run()", per_call_us(prepared, args.iters)),
        ("k[grid](buffers, N, BLOCK=64)", per_call_us(lambda: tiny[(1,)](x, out, 64, BLOCK=64),
                                                      args.iters)),
        ("k[grid](numpy arrays, N, BLOCK=64)",
         per_call_us(lambda: tiny[(1,)](xa, oa, 64, BLOCK=64), args.iters)),
    ]
    fresh = [np.zeros(64, np.float32) for _ in range(64)]
    i = [0]

    def changing():   # a different output array each call, of a shape and dtype seen before
        i[0] = (i[0] + 1) % len(fresh)
        tiny[(1,)](xa, fresh[i[0]], 64, BLOCK=64)
    results.append(("k[grid](...) with another array each call (re-wrapped)",
                    per_call_us(changing, args.iters)))
    results.append(("k[grid](x, np.empty_like(x), ...) (re-wrapped)",
                    per_call_us(lambda: tiny[(1,)](xa, np.empty_like(xa), 64, BLOCK=64),
                                args.iters)))
    shapes = [np.zeros(64 + k, np.float32) for k in range(64)]

    def unseen():     # a new shape each call: the full (classify + prepare) path
        i[0] = (i[0] + 1) % len(shapes)
        tiny[(1,)](xa, shapes[i[0]], 64, BLOCK=64)
    results.append(("k[grid](...) with an unseen shape each call (full path)",
                    per_call_us(unseen, max(args.iters // 10, 100))))
    dev.synchronize()
    assert (out.numpy() == np.arange(64) + 1).all() and (oa == xa + 1).all()

    # Binding overhead alone: the launch handles become NULL and the run call a no-op.
    from metile import _kernel
    null = ctypes.POINTER(_ffi.metile_launch)()
    noop = _ffi.metile_launch_release
    launcher(x, out, 64, BLOCK=64)          # make these arguments the launcher's cached launch
    last = launcher._recent[0]
    saved = (_kernel._run, prepared._handle, last._handle)
    _kernel._run, prepared._handle, last._handle = noop, null, null
    try:
        overhead = [
            ("no-op C call (metile_launch_release(NULL))",
             per_call_us(lambda: noop(null), args.iters)),
            ("prepared launch, device call stubbed", per_call_us(prepared, args.iters)),
            ("k[grid](buffers, N, BLOCK=64), device call stubbed",
             per_call_us(lambda: tiny[(1,)](x, out, 64, BLOCK=64), args.iters)),
        ]
    finally:
        _kernel._run, prepared._handle, last._handle = saved

    print(f"metile Python launch overhead on {dev.name} ({dev.description}){label}")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, library "
          f"{metile.LIBRARY_PATH}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    bare = results[0][1]
    print(f"  {'':<56} {'per call':>11} {'over bare C':>12}")
    for what, us in results:
        extra = f"{us - bare:+9.2f} us" if what != results[0][0] else ""
        print(f"  {what:<56} {us:8.2f} us {extra:>12}")
    print("binding overhead (no device work):")
    for what, us in overhead:
        extra = f"{us - overhead[0][1]:+9.2f} us" if what != overhead[0][0] else ""
        print(f"  {what:<56} {us:8.2f} us {extra:>12}")
    print("targets: <= 10 us per k[grid](...) call, <= 3 us per prepared launch")


if __name__ == "__main__":
    main()
