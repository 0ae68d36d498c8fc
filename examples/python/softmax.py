"""Row softmax (the seed README's kernel, with masked-off lanes reading -inf so any row length
works), checked against numpy. Run: python3 examples/python/softmax.py [ROWS] [COLS]"""

import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile


@metile.kernel
def softmax(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    m = -1e38
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        m = metile.maximum(m, x)            # a loop-carried tile, found automatically
    m = metile.max(m)

    s = 0.0
    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        s = s + metile.exp(x - m)
    s = metile.sum(s)

    for i in metile.tile_range(0, N, BLOCK):
        cols = i + metile.arange(0, BLOCK)
        mask = cols < N
        x = metile.load(X + row * N + cols, mask=mask)
        metile.store(Out + row * N + cols, metile.exp(x - m) / s, mask=mask)


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    cols = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    print(f"device: {metile.get_device().name}")
    x = np.random.randn(rows, cols).astype(np.float32)
    out = np.zeros_like(x)                 # numpy arrays are used in place (zero-copy)
    t0 = time.perf_counter()
    softmax[(rows,)](x, out, cols, BLOCK=256)
    metile.synchronize()
    t1 = time.perf_counter()
    softmax[(rows,)](x, out, cols, BLOCK=256)
    metile.synchronize()
    t2 = time.perf_counter()
    ref = np.exp(x - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    err = np.abs(out - ref).max()
    print(f"{rows}x{cols}: first call (trace+compile+run) {1e3 * (t1 - t0):.1f} ms, "
          f"second {1e3 * (t2 - t1):.2f} ms, max |error| {err:.2e}")
    print("row sums:", out.sum(1)[:4])
    return 0 if err < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
