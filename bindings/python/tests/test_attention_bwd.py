"""Flash attention's backward pass written in metile's tile language
(examples/python/flash_attention_bwd.py) against float64 numpy on every device: dQ, dK and dV,
causal or not, head_dim 64 and 128, f32/f16/bf16, sequence lengths that are not a multiple of
the block; the forward's log-sum-exp it starts from; arguments it refuses with a message.

Each (dtype, head_dim, causal) is three compiled kernels, so interp (which compiles nothing)
runs every combination and the compiling devices run CASES, which cover each 16-bit dtype, each
head_dim and both masks; f32 runs there in test_examples.py (flash_attention_bwd.py checks
itself against float64)."""

import os
import sys

import numpy as np
import pytest

import metile
from test_attention import _check, _inputs, _to_bf16_bits, _values

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples", "python"))
import flash_attention  # noqa: E402
import flash_attention_bwd  # noqa: E402

CASES = {("f16", 128, True), ("bf16", 64, False)}


def _backward(dtype, causal, bh, seq, dim, block=None, step=None):
    """The backward kernels on random q, k, v, dO and the float64 forward's O (rounded to dtype)
    and log-sum-exp: (metile's dq, dk, dv, the float64 reference's), as float64 arrays."""
    (q, k, v, dout), vals = _inputs([(bh, seq, dim)] * 4, dtype)
    o, lse = flash_attention.reference(*vals[:3], causal, with_lse=True)
    if dtype == "bf16":
        out = metile.Buffer(data=_to_bf16_bits(o), dtype="bf16")
    else:
        out = metile.Buffer(data=o.astype(np.float16 if dtype == "f16" else np.float32))
    grads = [metile.Buffer.zeros((bh, seq, dim), dtype=dtype) for _ in range(3)]
    for g in grads:  # NaN: a row the kernels leave unwritten fails the check
        g.numpy()[...] = 0x7FC0 if dtype == "bf16" else np.nan
    lse = metile.Buffer(data=lse.astype(np.float32))
    flash_attention_bwd.attention_backward(q, k, v, out, lse, dout, *grads, causal, block=block,
                                           step=step)
    return [_values(g) for g in grads], flash_attention_bwd.reference(*vals, causal)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_flash_attention_backward(device, dtype, causal, head_dim):
    """Sequences of one row, fewer rows than a block and a ragged last block (BLOCK 32 or 16,
    STEP 32, 16 or 8): rows past seq take no part and are not written."""
    if device.name != "interp" and (dtype, head_dim, causal) not in CASES:
        pytest.skip("interp runs this combination; the compiling devices run CASES")
    for bh, seq in ((1, 1), (1, 5), (2, 37)):
        got, ref = _backward(dtype, causal, bh, seq, head_dim)
        for name, g, r in zip(("dq", "dk", "dv"), got, ref):
            try:
                _check(g, r, dtype)
            except AssertionError as e:
                raise AssertionError(f"seq {seq}, {name}: {e}") from None


def test_flash_attention_backward_blocks_of_different_shapes(device):
    """BLOCK above, equal to and below STEP (interp: any shape is cheap to run there; the
    compiling devices run the defaults, BLOCK = 2 * STEP at head_dim 128, in the test above)."""
    if device.name != "interp":
        pytest.skip("interp runs the block shapes; the compiling devices run the defaults")
    for block, step in ((32, 16), (16, 32), (16, 16)):
        got, ref = _backward("f32", True, 1, 45, 64, block, step)
        for g, r in zip(got, ref):
            _check(g, r, "f32")


def test_flash_attention_backward_rejects_bad_arguments(device):
    x = np.zeros((2, 20, 64), np.float32)
    lse = np.zeros((2, 20), np.float32)

    def bwd(**over):
        a = dict(q=x, k=x, v=x, out=x, lse=lse, dout=x, dq=x, dk=x, dv=x)
        a.update(over)
        flash_attention_bwd.attention_backward(**a)
    with pytest.raises(ValueError, match=r"dk has shape \(2, 21, 64\); expected \(2, 20, 64\)"):
        bwd(dk=np.zeros((2, 21, 64), np.float32))
    with pytest.raises(TypeError, match="dout is f16 but q is f32; .* must share one dtype"):
        bwd(dout=x.astype(np.float16))
    with pytest.raises(TypeError, match="q is int32; attention takes f32, f16, bf16"):
        bwd(**{n: x.astype(np.int32) for n in ("q", "k", "v", "out", "dout", "dq", "dk", "dv")})
    with pytest.raises(ValueError, match=r"lse has shape \(2, 21\); expected \(2, 20\)"):
        bwd(lse=np.zeros((2, 21), np.float32))
    with pytest.raises(TypeError, match="lse is f16; the log-sum-exp is f32"):
        bwd(lse=lse.astype(np.float16))
    with pytest.raises(ValueError, match="head_dim 48 must be a power of two from 16 to 256"):
        y = np.zeros((2, 20, 48), np.float32)
        bwd(q=y, k=y, v=y, out=y, dout=y, dq=y, dk=y, dv=y)
    with pytest.raises(ValueError, match=r"q must be \[batch\*heads, seq, head_dim\]"):
        bwd(q=np.zeros((20, 64), np.float32))
    with pytest.raises(ValueError, match=r"delta must be f32 shaped \(2, 20\)"):
        bwd(delta=np.zeros((2, 19), np.float32))
    # The forward checks the same way.
    with pytest.raises(ValueError, match=r"flash_attention: v has shape \(2, 20, 32\)"):
        flash_attention.attention(x, x, np.zeros((2, 20, 32), np.float32), x)


def test_attention_bwd_bench_quick_run_on_interp(tmp_path):
    """bench/attention_bwd.py's smoke run: every metile row checked against float64 (the script
    drops a configuration whose result is wrong), JSON lines in --out."""
    import json
    import subprocess
    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench",
                         "attention_bwd.py")
    out = tmp_path / "bwd.jsonl"
    subprocess.run([sys.executable, bench, "--quick", "--device", "interp", "--dims", "64",
                    "--seqs", "40", "--dtypes", "bf16", "--configs", "32,16,128;16,16,128",
                    "--out", str(out)], check=True,
                   capture_output=True, timeout=600)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["causal"] for r in rows] == [False, True]
    for r in rows:
        assert "error" not in r and r["metile_err"] < 4e-2 and r["metile_tflops"] > 0, r
        assert r["metile_dkdv"] in ([32, 16, 128], [16, 16, 128]), r
