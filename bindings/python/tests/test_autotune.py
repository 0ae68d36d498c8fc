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
    cap = capsys.readouterr()
    out = cap.err
    assert cap.out == "", "progress goes to stderr, not stdout"
    assert "autotune matmul [M=128, N=128, K=128]" in out and f"best {best!r}" in out
    for cfg in CONFIGS:  # one progress line per config, with its time
        assert any(repr(cfg) in line and line.endswith(" ms") for line in out.splitlines())
    timings = tuned.last_timings
    assert [t[0] for t in timings] == CONFIGS and all(t[1] > 0 for t in timings)
    c[:] = 0
    again = tuned[grid](a, b, c, 128, 128, 128)   # a memory-cache hit: no second tuning
    assert again is best and capsys.readouterr().err == ""
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    a2, b2, c2 = _problem(64)                     # new key values: tuned again
    tuned[grid](a2, b2, c2, 64, 64, 64)
    assert "M=64" in capsys.readouterr().err
    np.testing.assert_allclose(c2, a2.astype(np.float64) @ b2, rtol=1e-4, atol=1e-4)


def test_failing_configs_are_reported_and_skipped(device, capsys):
    bad = metile.Config(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, NO_SUCH_PARAM=1)
    tuned = make_tuned([bad] + CONFIGS)
    a, b, c = _problem(64)
    best = tuned[grid](a, b, c, 64, 64, 64)
    assert best in CONFIGS
    out = capsys.readouterr().err
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
    if device.name in ("cpu", "metal-sim"):
        # Three processes, each compiling every config: the record is the same on every device,
        # so the host devices leave it to interp (and cuda, where a GPU runs the suite).
        pytest.skip("the winner's record is device-independent; interp carries it on the host")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, METILE_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.path.dirname(here))
    code = textwrap.dedent(SCRIPT.format(tests=here, device=device.name))
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           timeout=300)
    if first.returncode != 0 and "is not supported on" in first.stderr and device.name not in (
            "interp", "cpu"):
        pytest.skip(f"{device.name} cannot run the tuned kernel (dot) yet")
    assert first.returncode == 0, first.stderr
    assert "autotune matmul" in first.stderr
    best = first.stdout.split("BEST ")[1].strip()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "autotune matmul" not in second.stderr, "the second process re-tuned"
    assert second.stdout.split("BEST ")[1].strip() == best
    other = dict(env, METILE_CACHE_DIR=str(tmp_path / "elsewhere"))
    third = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=other, timeout=300)
    assert "autotune matmul" in third.stderr, "another cache directory starts empty"


def test_no_search_when_the_caller_gives_every_tuned_constexpr(device, capsys):
    tuned = make_tuned(CONFIGS)
    a, b, c = _problem(64)
    chosen = tuned[grid](a, b, c, 64, 64, 64, BLOCK_M=16, BLOCK_N=32, BLOCK_K=8,
                         allow_tf32=False)
    assert chosen.kwargs == {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 8}
    assert capsys.readouterr().err == "" and tuned.last_timings == []
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_explicit_constexprs_are_never_overridden(device):
    seen = []

    def spy(meta):
        seen.append(meta["BLOCK_K"])
        return grid(meta)

    tuned = make_tuned(CONFIGS)
    a, b, c = _problem(64)
    tuned[spy](a, b, c, 64, 64, 64, BLOCK_K=16)   # BLOCK_M/N tuned, BLOCK_K the caller's
    assert seen and set(seen) == {16}
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_each_value_of_an_untuned_constexpr_is_tuned_on_its_own(device, capsys):
    @metile.autotune(configs=[metile.Config(BLOCK=32), metile.Config(BLOCK=64)], key=["n"],
                     warmup=1, rep=2)
    @metile.kernel
    def scale(X, Out, n, FACTOR: metile.constexpr, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        m = offs < n
        metile.store(Out + offs, metile.load(X + offs, mask=m) * FACTOR, mask=m)

    x = np.arange(100, dtype=np.float32)
    for factor in (2, 3):  # another FACTOR is another kernel: tuned again, not taken from 2's
        out = np.zeros_like(x)
        scale[lambda meta: (metile.cdiv(100, meta["BLOCK"]),)](x, out, 100, FACTOR=factor)
        assert "best " in capsys.readouterr().err, f"FACTOR={factor} was not tuned"
        np.testing.assert_array_equal(out, x * factor)


def test_config_dict_form():
    assert metile.Config({"BLOCK": 64}, num_warps=4).kwargs == {"BLOCK": 64, "num_warps": 4}
    assert metile.Config({"BLOCK": 64}) == metile.Config(BLOCK=64)
    with pytest.raises(metile.InvalidArgumentError, match="dict of constexprs"):
        metile.Config([("BLOCK", 64)])


def _in_place(**kw):
    @metile.autotune(configs=[metile.Config(BLOCK=32), metile.Config(BLOCK=64)], key=["N"],
                     warmup=1, rep=2, verbose=False, **kw)
    @metile.kernel
    def bump(X, Acc, N, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        keep = offs < N
        x = metile.load(X + offs, mask=keep)
        metile.store(X + offs, x * 2 + 1, mask=keep)
        metile.store(Acc + offs, metile.load(Acc + offs, mask=keep) + x, mask=keep)
    return bump


def test_restore_value_and_reset_to_zero_make_cold_and_warm_runs_agree(device):
    n = 200
    g = lambda m: (metile.cdiv(n, m["BLOCK"]),)  # noqa: E731
    x0 = np.arange(n, dtype=np.float32)
    results = []
    for _ in range(2):  # cold (tunes), then a fresh kernel object whose winner is persisted
        bump = _in_place(restore_value=["X"], reset_to_zero=["Acc"])
        x, acc = x0.copy(), metile.Buffer(np.full(n, 5, np.float32))
        bump[g](x, acc, n)
        metile.synchronize()
        results.append((x.copy(), acc.numpy().copy()))
    for x, acc in results:
        np.testing.assert_array_equal(x, x0 * 2 + 1)
        np.testing.assert_array_equal(acc, 5 + x0)
    # Without restore_value the trials' writes show (what the option exists for).
    bump = _in_place()
    m = 150  # new key values: this launch tunes
    x = x0[:m].copy()
    bump[lambda meta: (metile.cdiv(m, meta["BLOCK"]),)](x, np.zeros(m, np.float32), m)
    metile.synchronize()
    if metile.Buffer(data=x).shares_memory:  # a device that copies host arrays (metal, unless
        assert not np.array_equal(x, x0[:m] * 2 + 1)  # page-aligned) gives each trial a fresh copy


def test_restore_value_names_are_checked():
    with pytest.raises(metile.InvalidArgumentError, match="restore_value names `Q`"):
        _in_place(restore_value=["Q"])
