"""The tutorial "Your first kernel": vector add on the default device ($METILE_DEVICE, else
metal, cuda, cpu, interp). Run: python3 examples/python/vector_add.py [N]"""

import sys

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    offs = pid * BLOCK + metile.arange(0, BLOCK)
    mask = offs < N
    x = metile.load(X + offs, mask=mask)
    y = metile.load(Y + offs, mask=mask)
    metile.store(Out + offs, x + y, mask=mask)


def main():
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    device = metile.get_device()
    print(f"device: {device.name} ({device.description})")

    x = metile.Buffer(data=np.random.randn(N).astype(np.float32))
    y = metile.Buffer(data=np.random.randn(N).astype(np.float32))
    out = metile.Buffer.zeros((N,))

    grid = (metile.cdiv(N, 256),)   # ceil(N / 256) program instances
    add[grid](x, y, out, N, BLOCK=256)

    print("x[:5]   =", x.numpy()[:5])
    print("y[:5]   =", y.numpy()[:5])
    print("out[:5] =", out.numpy()[:5])   # numpy() synchronizes, then views the buffer
    expected = x.numpy() + y.numpy()
    if not np.array_equal(out.numpy(), expected):
        print("MISMATCH: max error", np.abs(out.numpy() - expected).max())
        return 1
    print(f"OK: {N} elements match numpy, {grid[0]} program instances of 256")
    print("\nTile IR (what the kernel traced to):")
    print(add[grid].trace(x, y, out, N, BLOCK=256))
    return 0


if __name__ == "__main__":
    sys.exit(main())
