"""Vector accesses whose chunks share one alignment (vectorize-access's `one_align`): the CUDA
emitter tests only the first chunk's address for 16-byte alignment. Row kernels with several
4-element chunks per thread (BLOCK 1024 over 128 threads) on rows whose starts are not 16-byte
aligned (N not a multiple of 4) and are, with the piece on and off (METILE_GPU_OFF=one_align),
on every device against float64 numpy; the generated CUDA tests chunk 0's address only."""

import os

import numpy as np
import pytest

import metile
from kernels import rmsnorm, seed_softmax

SENTINEL = -777.0
SIZES = [1000, 1001, 1027, 2050, 2052]


class one_align_off:
    """METILE_GPU_OFF=one_align while compiling, on a new kernel object (compiled kernels are
    cached per program; the variable is read when one compiles)."""

    def __enter__(self):
        self.old = os.environ.get("METILE_GPU_OFF")
        os.environ["METILE_GPU_OFF"] = "one_align"

    def __exit__(self, *exc):
        if self.old is None:
            del os.environ["METILE_GPU_OFF"]
        else:
            os.environ["METILE_GPU_OFF"] = self.old


def launch(name, kernel, *args, **kw):
    if name == "off":
        with one_align_off():
            metile.kernel(kernel.fn)[(3,)](*args, **kw)
    else:
        kernel[(3,)](*args, **kw)


@pytest.mark.parametrize("n", SIZES)
def test_row_kernels_on_unaligned_rows(device, n):
    r = np.random.default_rng(n)
    x = np.stack([r.standard_normal(n) * 3, np.linspace(-40, 40, n), np.full(n, 2.5)]).astype(np.float32)
    w = np.linspace(0.5, 1.5, n).astype(np.float32)
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(1, keepdims=True))
    want_sm = e / e.sum(1, keepdims=True)
    want_rms = xd / np.sqrt((xd * xd).mean(1, keepdims=True) + 1e-5) * w
    for name in ("on", "off"):
        out = np.full_like(x, SENTINEL)
        launch(name, seed_softmax, x, out, n, BLOCK=1024, num_threads=128)
        np.testing.assert_allclose(out, want_sm, rtol=2e-5, atol=1e-7, err_msg=f"softmax {name}")
        out = np.full_like(x, SENTINEL)
        launch(name, rmsnorm, x, w, out, n, BLOCK=1024, num_threads=128)
        np.testing.assert_allclose(out, want_rms, rtol=2e-5, atol=2e-5, err_msg=f"rmsnorm {name}")


def test_cuda_source_tests_the_first_chunk_only(tmp_path, monkeypatch):
    """The CUDA text (generated on any device for the dump): the row loops' vector accesses test
    `[0]`'s address; with the piece off, each chunk's (`[4]`, ... in the loads' one test of all
    chunks, `[c]` chunk by chunk)."""
    x = np.zeros((2, 1000), np.float32)
    out = np.zeros_like(x)
    monkeypatch.setenv("METILE_DEBUG", "cuda")
    monkeypatch.setenv("METILE_DEBUG_DIR", str(tmp_path))
    texts = {}
    dump = tmp_path / "seed_softmax.cuda.txt"
    with metile.use_device("interp"):
        for name in ("on", "off", "on"):  # the second "on" is a cache hit: still dumped
            kernel = metile.kernel(seed_softmax.fn)
            if name == "off":
                monkeypatch.setenv("METILE_GPU_OFF", "one_align")
            else:
                monkeypatch.delenv("METILE_GPU_OFF", raising=False)
            if dump.exists():
                dump.unlink()
            kernel[(2,)](x, out, 1000, BLOCK=1024, num_threads=128)
            assert texts.setdefault(name, dump.read_text()) == dump.read_text()
    on, off = texts["on"], texts["off"]
    assert "[0]) & 15ull) == 0" in on and "[c]) & 15ull) == 0" not in on
    assert "[4]) & 15ull) == 0" not in on
    assert "[c]) & 15ull) == 0" in off and "[4]) & 15ull) == 0" in off
