"""torch float8_e4m3fn / float8_e5m2 tensors through DLPack into a metile kernel and back, on
the cuda device (and on cpu where torch runs without a GPU). Not part of CI (no torch there); it
skips without torch, without a torch that exchanges FP8 through DLPack, or without the device:

    METILE_LIBRARY=$PWD/build/libmetile.so python3 -m pytest tests/gpu/test_torch_float8.py -q

What it checks: metile.from_dlpack(torch FP8 tensor) is an f8e4m3 / f8e5m2 buffer over the same
memory, a kernel that loads it, scales in f32 and stores FP8 gives torch's own rounding of the
saturated product (clamping to the finite range first makes torch's cast agree with metile's
saturating one), and torch.from_dlpack(metile buffer) sees torch's FP8 dtype.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bindings", "python"))

torch = pytest.importorskip("torch")
import metile  # noqa: E402

N = 1 << 20
BLOCK = 1024
FORMATS = [("float8_e4m3fn", "f8e4m3", 448.0), ("float8_e5m2", "f8e5m2", 57344.0)]


@metile.kernel
def scale(X, Y, N, s, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Y + offs, metile.load(X + offs, mask=m) * s, mask=m)


def _device(name):
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    if name not in metile.devices():
        pytest.skip(f"metile's {name} device is not available here")
    return name


def _torch_dtype(tname):
    dt = getattr(torch, tname, None)
    if dt is None:
        pytest.skip(f"torch {torch.__version__} has no {tname}")
    try:
        torch.utils.dlpack.to_dlpack(torch.zeros(1, dtype=dt))
    except Exception as e:  # noqa: BLE001 - older torch refuses FP8 in DLPack
        pytest.skip(f"torch {torch.__version__} does not export {tname} through DLPack: {e}")
    return dt


@pytest.mark.parametrize("where", ["cuda", "cpu"])
@pytest.mark.parametrize("tname,mname,biggest", FORMATS)
@pytest.mark.parametrize("factor", [2.0, -0.37])
def test_torch_fp8_through_a_metile_kernel(where, tname, mname, biggest, factor):
    dev = _device(where)
    dt = _torch_dtype(tname)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(N, generator=g) * biggest / 4).clamp(-biggest, biggest).to(dt).to(where)
    y = torch.zeros(N, dtype=dt, device=where)
    with metile.use_device(dev):
        xb, yb = metile.from_dlpack(x), metile.from_dlpack(y)
        assert (xb.metile_dtype, yb.metile_dtype) == (mname, mname)
        scale[(metile.cdiv(N, BLOCK),)](xb, yb, N, factor, BLOCK=BLOCK)
        metile.synchronize()
        back = torch.from_dlpack(yb)
    assert back.dtype == dt
    product = x.float() * torch.tensor(factor, dtype=torch.float32)
    want = product.clamp(-biggest, biggest).to(dt)
    assert torch.equal(y.view(torch.uint8).cpu(), want.view(torch.uint8).cpu())  # y was written in place
    assert torch.equal(back.view(torch.uint8).cpu(), want.view(torch.uint8).cpu())
