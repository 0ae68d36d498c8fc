"""The examples in examples/python run and check themselves (exit status 0)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = os.path.join(ROOT, "examples", "python")


@pytest.mark.parametrize("script,args", [("vector_add.py", ["1000"]),
                                         ("softmax.py", ["16", "300"]),
                                         ("gemm.py", ["96", "80", "70"]),
                                         ("flash_attention.py", ["2", "50", "64", "--causal"]),
                                         ("flash_attention_bwd.py", ["2", "50", "64", "--causal"]),
                                         ("decode_attention.py", ["1", "4", "2", "300", "64"]),
                                         ("paged_decode_attention.py", ["2", "4", "2", "200", "64"]),
                                         ("gemv.py", ["300", "1000", "3", "--bias"]),
                                         ("gemv.py", ["70", "520", "--dtype", "bf16", "--split-k", "3"]),
                                         ("fp8_gemm.py", ["100", "70", "90", "--out", "bf16"]),
                                         ("int4_gemv.py", ["70", "260", "3", "--group", "32"]),
                                         ("int4_gemm.py", ["40", "50", "200", "--dtype", "f16"]),
                                         ("mxfp4_gemm.py", ["40", "50", "202"])])
def test_example(device, script, args, tmp_path):
    env = dict(os.environ, METILE_DEVICE=device.name, METILE_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args],
                       capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0 and "is not supported on" in r.stderr and device.name not in (
            "interp", "cpu"):
        pytest.skip(f"{device.name} cannot run {script} yet (dot)")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"device: {device.name}" in r.stdout
