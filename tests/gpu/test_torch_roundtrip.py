"""torch <-> metile on the cuda device, both directions, with torch working on a side stream
(issue 17 item 1). Not part of CI (no torch or GPU there): it skips without torch, a CUDA GPU
or metile's cuda device. Run it on a GPU machine either way:

    METILE_LIBRARY=$PWD/build/libmetile.so python3 -m pytest tests/gpu/test_torch_roundtrip.py -q
    METILE_LIBRARY=$PWD/build/libmetile.so python3 tests/gpu/test_torch_roundtrip.py

What it checks: a torch CUDA tensor passed to a metile kernel is used in place (a DLPack
import, not a copy) and the kernel sees what torch's side stream wrote before it, without the
test synchronizing; torch reads the kernel's result after Device.signal_stream(); and
torch.from_dlpack(metile.Buffer) works (kDLCUDA, not kDLCUDAManaged) with the consumer's stream
ordered after metile's launches through __dlpack__(stream=...).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bindings", "python"))

torch = pytest.importorskip("torch")
import metile  # noqa: E402

N = 1 << 24       # large enough that an unordered launch would read unfinished torch work
BLOCK = 1024


@metile.kernel
def axpy(X, Y, Out, N, alpha, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, alpha * metile.load(X + offs, mask=m) + metile.load(Y + offs, mask=m),
                 mask=m)


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    if "cuda" not in metile.devices():
        pytest.skip("metile's cuda device is not available here")
    return metile.set_device("cuda")


def test_torch_tensors_in_kernel_out_on_a_side_stream():
    dev = _cuda()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.arange(N, device="cuda", dtype=torch.float32)
        for _ in range(20):                  # keep the side stream busy
            x = x * 1.0 + 0.0
        y = torch.full((N,), 2.0, device="cuda")
        out = torch.zeros(N, device="cuda")
        # The import asks torch (through __dlpack__(stream=metile's stream)) to order its
        # pending side-stream work before metile's launches: no synchronize here.
        axpy[(metile.cdiv(N, BLOCK),)](x, y, out, N, 3.0, BLOCK=BLOCK)
        dev.signal_stream(side.cuda_stream)  # torch's later work on `side` waits for the kernel
        got = out * 1.0                      # computed on the side stream
    torch.cuda.synchronize()
    expect = torch.arange(N, device="cuda", dtype=torch.float32) * 3.0 + 2.0
    # CUDA contracts alpha * x + y into one FMA (torch rounds twice): last-bit differences only.
    # An unordered launch would read unfinished side-stream work: whole elements wrong.
    torch.testing.assert_close(got, expect, rtol=2e-7, atol=0)
    # In place, not a copy: the imported buffer's address is torch's.
    buf = metile.from_dlpack(out)
    assert buf.shares_memory
    assert buf.__dlpack_device__() == (2, 0)


def test_metile_buffer_to_torch_on_a_side_stream():
    _cuda()
    import numpy as np
    src = metile.Buffer(data=np.arange(N, dtype=np.float32))
    out = metile.Buffer.zeros((N,))
    axpy[(metile.cdiv(N, BLOCK),)](src, src, out, N, 2.0, BLOCK=BLOCK)   # asynchronous
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # torch passes its current stream (`side`) to __dlpack__: metile orders it after the
        # launch above instead of synchronizing the host.
        t = torch.from_dlpack(out)
        assert t.device.type == "cuda" and t.dtype == torch.float32 and t.shape == (N,)
        got = t * 1.0
    torch.cuda.synchronize()
    assert torch.equal(got, torch.arange(N, device="cuda", dtype=torch.float32) * 3.0)
    # And back: the same memory comes back into metile as an import.
    again = metile.from_dlpack(t)
    assert again.shares_memory


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))


def test_a_cached_launch_rebinds_torch_tensors_only_when_they_change():
    """A kernel called again with the same torch tensors on torch's default stream keeps their
    imports (no DLPack handshake per call); a tensor whose memory moved (resize_), a new tensor,
    and a call on a side stream each get a fresh import, so every result is right without a
    synchronize between torch's writes and the launches."""
    _cuda()
    grid = (metile.cdiv(N, BLOCK),)
    x = torch.arange(N, device="cuda", dtype=torch.float32)
    y = torch.full((N,), 2.0, device="cuda")
    out = torch.zeros(N, device="cuda")
    expect = torch.arange(N, device="cuda", dtype=torch.float32)
    for step in range(3):           # the same tensors, written by torch between the launches
        y.fill_(float(step))
        axpy[grid](x, y, out, N, 3.0, BLOCK=BLOCK)
        torch.testing.assert_close(out, expect * 3.0 + step, rtol=2e-7, atol=0)
    old = out.data_ptr()
    out.resize_(2 * N)              # its memory moves: the launch must not keep the old address
    assert out.data_ptr() != old
    out.zero_()
    axpy[grid](x, y, out, N, 1.0, BLOCK=BLOCK)
    torch.testing.assert_close(out[:N], expect + 2.0, rtol=2e-7, atol=0)
    assert float(out[N:].abs().max()) == 0.0
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):   # another stream: the import orders the side stream's work
        for _ in range(20):
            y = y * 1.0 + 1.0
        axpy[grid](x, y, out, N, 1.0, BLOCK=BLOCK)
        metile.get_device().signal_stream(side.cuda_stream)
        got = out[:N] * 1.0
    torch.cuda.synchronize()
    torch.testing.assert_close(got, expect + 22.0, rtol=2e-7, atol=0)


@metile.kernel
def affine2d(X, Out, M, N, sxm, sxn, som, son, BM: metile.constexpr, BN: metile.constexpr):
    rm = metile.program_id(0) * BM + metile.arange(0, BM)
    rn = metile.program_id(1) * BN + metile.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    x = metile.load(X + rm[:, None] * sxm + rn[None, :] * sxn, mask=m)
    metile.store(Out + rm[:, None] * som + rn[None, :] * son, x * 2.0 + 1.0, mask=m)


def _affine(x, out):
    m, n = x.shape
    grid = lambda meta: (metile.cdiv(m, meta["BM"]), metile.cdiv(n, meta["BN"]))  # noqa: E731
    affine2d[grid](x, out, m, n, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                   BM=32, BN=32)


def test_strided_torch_tensors_in_place_and_fresh_outputs_each_call():
    """Transposed, sliced and stepped torch views in and out, in place (issue 32 item 2), and the
    tutorial idiom (a new output and a new grid lambda each call), whose tensors a cached launch
    binds by address: every result right, nothing written outside the views, no synchronize
    between torch's writes and the launches."""
    _cuda()
    base = torch.arange(300 * 200, device="cuda", dtype=torch.float32).reshape(300, 200)
    for view in (base.T, base[:, 17:150], base[::3], base[5:290:7, ::2]):
        out_base = torch.full((320, 320), -1.0, device="cuda")
        out = out_base[3: view.shape[0] + 3, 1: view.shape[1] + 1]
        _affine(view, out)
        torch.testing.assert_close(out, view * 2.0 + 1.0, rtol=0, atol=0)
        out_base[3: view.shape[0] + 3, 1: view.shape[1] + 1] = -1.0
        assert bool((out_base == -1.0).all())
    outT = torch.zeros(200, 300, device="cuda")
    _affine(base, outT.T)
    torch.testing.assert_close(outT, (base * 2.0 + 1.0).T, rtol=0, atol=0)
    results = []
    for step in range(50):          # fresh outputs: each bound by address, none kept alive
        base.add_(1.0)
        out = torch.empty_like(base)
        _affine(base, out)
        results.append((out, base * 2.0 + 1.0))
    for got, want in results:
        torch.testing.assert_close(got, want, rtol=0, atol=0)
