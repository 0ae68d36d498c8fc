"""@metile.autotune: every config is timed, failures are reported and skipped, the winner is
cached per key values in memory and persisted across processes."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import metile


def make_tuned(configs, key=("M", "N", "K")):
    @metile.autotune(configs=configs, key=list(key), warmup=1, rep=3)
    @metile.kernel
    def matmul(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
               BLOCK_K: metile.constexpr):
        pid_m = metile.program_id(0)
        pid_n = metile.program_id(1)
        acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
        for k in metile.tile_range(0, K, BLOCK_K):
            a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K), bounds=(M, K))
            b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N), bounds=(K, N))
            acc = metile.dot(a, b, acc)
        metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N),
                          bounds=(M, N))
    return matmul


def grid(cfg):
    return (metile.cdiv(cfg["M"], cfg["BLOCK_M"]), metile.cdiv(cfg["N"], cfg["BLOCK_N"]))


def _problem(n):
    r = np.random.default_rng(n)
    a = r.standard_normal((n, n), dtype=np.float32)
    b = r.standard_normal((n, n), dtype=np.float32)
    return a, b, np.zeros((n, n), np.float32)


CONFIGS = [metile.Config(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, allow_tf32=0),
           metile.Config(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, allow_tf32=0)]


def test_autotune_picks_a_config_and_caches_it(device, capsys):
    tuned = make_tuned(CONFIGS)
    a, b, c = _problem(128)
    best = tuned[grid](a, b, c, 128, 128, 128)
    assert best in CONFIGS
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    out = capsys.readouterr().out
    assert "autotune matmul [M=128, N=128, K=128]" in out and "<--" in out
    assert all(repr(cfg) in out for cfg in CONFIGS)
    timings = tuned.last_timings
    assert [t[0] for t in timings] == CONFIGS and all(t[1] > 0 for t in timings)
    c[:] = 0
    again = tuned[grid](a, b, c, 128, 128, 128)   # a memory-cache hit: no second tuning
    assert again is best and capsys.readouterr().out == ""
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    a2, b2, c2 = _problem(64)                     # new key values: tuned again
    tuned[grid](a2, b2, c2, 64, 64, 64)
    assert "M=64" in capsys.readouterr().out
    np.testing.assert_allclose(c2, a2.astype(np.float64) @ b2, rtol=1e-4, atol=1e-4)


def test_failing_configs_are_reported_and_skipped(device, capsys):
    bad = metile.Config(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NO_SUCH_PARAM=1)
    tuned = make_tuned([bad] + CONFIGS)
    a, b, c = _problem(64)
    best = tuned[grid](a, b, c, 64, 64, 64)
    assert best in CONFIGS
    out = capsys.readouterr().out
    assert f"{bad!r}" in out and "FAILED (InvalidArgumentError" in out and "NO_SUCH_PARAM" in out
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    all_bad = make_tuned([bad])
    with pytest.raises(metile.MetileError, match="all 1 configs failed"):
        all_bad[grid](a, b, c, 64, 64, 64)


def test_prepare_returns_the_winners_dispatcher(device):
    tuned = make_tuned(CONFIGS)
    a, b, c = _problem(96)
    run = tuned[grid].prepare(a, b, c, 96, 96, 96)
    c[:] = 0
    run()
    metile.synchronize()
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_bad_autotune_arguments():
    with pytest.raises(metile.InvalidArgumentError, match="non-empty list of metile.Config"):
        metile.autotune(configs=[], key=["N"])
    with pytest.raises(metile.InvalidArgumentError, match="key `Q` is not a parameter"):
        make_tuned(CONFIGS, key=["Q"])


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np, metile
from test_autotune import make_tuned, grid, CONFIGS, _problem
metile.set_device({device!r})
tuned = make_tuned(CONFIGS)
a, b, c = _problem(64)
best = tuned[grid](a, b, c, 64, 64, 64)
assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("BEST", best)
"""


def test_winner_persists_across_processes(device, tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, METILE_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.path.dirname(here))
    code = textwrap.dedent(SCRIPT.format(tests=here, device=device.name))
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    assert "autotune matmul" in first.stdout
    best = first.stdout.split("BEST ")[1].strip()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "autotune matmul" not in second.stdout, "the second process re-tuned"
    assert second.stdout.split("BEST ")[1].strip() == best
    other = dict(env, METILE_CACHE_DIR=str(tmp_path / "elsewhere"))
    third = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=other, timeout=300)
    assert "autotune matmul" in third.stdout, "another cache directory starts empty"
