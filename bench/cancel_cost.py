#!/usr/bin/python3
"""What cuda's stop-word checks cost (docs/semantics.md, "Stopping a launch"): each kernel
built with the checks (the default) and without them (METILE_GPU_OFF=insert-cancel-points),
timed in alternating samples in one process so drift hits both alike. The kernels are
bandwidth-bound ones with the most checks per byte: a copy without loops (one read per warp of
each program, acted on before its store) at two program sizes, a row sum whose loop runs a few
turns (one read per warp of each program, acted on at every back-edge), and bench/bounds_cost.py's
softmax and layernorm (rows of 4096 in loops, at the register bound of their launch).

    METILE_LIBRARY=$PWD/build/libmetile.so /usr/bin/python3 bench/cancel_cost.py [--samples N]
        [--calls N] [--quick]

Time per call: bench/gpu_timing.py's (calls back-to-back, then a synchronize); the figure is
the median over the samples, the ratio checked / unchecked (1.00 = free).
"""

import argparse
import os
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
import metile  # noqa: E402
from cuda_vs_triton import layernorm, softmax  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402


@metile.kernel
def copy(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=mask), mask=mask)


@metile.kernel
def row_sum(X, Out, COLS, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    acc = metile.zeros((BLOCK,), dtype=metile.float32)
    for k in metile.tile_range(0, COLS, BLOCK):
        acc += metile.load(X + row * COLS + k + metile.arange(0, BLOCK))
    metile.store(Out + row, metile.sum(acc))


OFF = "insert-cancel-points"


def with_checks(on):
    """METILE_GPU_OFF for builds with (on) or without the checks, other names kept."""
    names = [n for n in os.environ.get("METILE_GPU_OFF", "").split(",") if n and n != OFF]
    if not on:
        names.append(OFF)
    if names:
        os.environ["METILE_GPU_OFF"] = ",".join(names)
    else:
        os.environ.pop("METILE_GPU_OFF", None)


def compare(name, launch, bytes_moved, samples, calls):
    times = {True: [], False: []}
    for i in range(samples):
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            with_checks(on)  # the launch picks the build made under this value
            times[on].append(time_per_call(launch, metile.synchronize, calls, repeats=1))
    with_checks(True)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print("%-30s checks %9.1f us  none %9.1f us  (%7.1f / %7.1f GB/s)  ratio %.3f best-of %.3f" %
          (name, on * 1e6, off * 1e6, bytes_moved / on / 1e9, bytes_moved / off / 1e9, on / off,
           min(times[True]) / min(times[False])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    a = ap.parse_args()
    n = 1 << (16 if a.quick else 28)
    rows, cols = (64, 2048) if a.quick else (1 << 17, 2048)
    norm_rows, norm_cols = (64, 1024) if a.quick else (16384, 4096)
    rng = np.random.default_rng(0)
    with metile.use_device("cuda"):
        x = metile.Buffer(data=rng.standard_normal(n, dtype=np.float32))
        o = metile.Buffer.zeros((n,))
        xs = metile.Buffer(data=rng.standard_normal((rows, cols), dtype=np.float32))
        sums = metile.Buffer.zeros((rows,))
        xn = metile.Buffer(data=rng.standard_normal((norm_rows, norm_cols), dtype=np.float32))
        on = metile.Buffer.zeros((norm_rows, norm_cols))
        w = metile.Buffer(data=rng.standard_normal(norm_cols, dtype=np.float32))
        b = metile.Buffer(data=rng.standard_normal(norm_cols, dtype=np.float32))
        dev = metile.get_device()
        print("device: %s (%s); %d alternating samples of %d calls" %
              (dev.name, getattr(dev, "description", ""), a.samples, a.calls))
        for block in (256, 2048):
            launch = copy[(metile.cdiv(n, block),)]
            compare("copy %d f32, BLOCK %d" % (n, block), lambda: launch(x, o, n, BLOCK=block),
                    8 * n, a.samples, a.calls)
        block = 256
        launch = row_sum[(rows,)]
        compare("row sum %dx%d f32, %d turns" % (rows, cols, cols // block),
                lambda: launch(xs, sums, cols, BLOCK=block), 4 * rows * cols, a.samples, a.calls)
        sm, ln = softmax[(norm_rows,)], layernorm[(norm_rows,)]
        compare("softmax %dx%d f32" % (norm_rows, norm_cols),
                lambda: sm(xn, on, norm_cols, BLOCK=norm_cols), 8 * norm_rows * norm_cols,
                a.samples, a.calls)
        compare("layernorm %dx%d f32" % (norm_rows, norm_cols),
                lambda: ln(xn, w, b, on, norm_cols, BLOCK=norm_cols), 8 * norm_rows * norm_cols,
                a.samples, a.calls)
        expect = xs.numpy().astype(np.float64).sum(axis=1)
        np.testing.assert_allclose(sums.numpy(), expect, rtol=1e-3, atol=1e-2)


if __name__ == "__main__":
    main()
