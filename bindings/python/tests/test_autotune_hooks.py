"""Autotune as Triton's (issue 32 item 5): prune_configs_by, pre_hook / post_hook, the
best_config attribute, and a warning for arguments the kernel reads and writes that no
restore_value covers."""

import warnings

import numpy as np
import pytest

import metile


def _scale_kernel(**autotune):
    @metile.autotune(key=["N"], warmup=1, rep=2, verbose=False, **autotune)
    @metile.kernel
    def scale(X, Out, N, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        m = offs < N
        metile.store(Out + offs, metile.load(X + offs, mask=m) * 3.0, mask=m)
    return scale


def grid(meta):
    return (metile.cdiv(meta["N"], meta["BLOCK"]),)


CONFIGS = [metile.Config(BLOCK=16), metile.Config(BLOCK=32), metile.Config(BLOCK=64),
           metile.Config(BLOCK=128)]


def test_prune_configs_by_and_best_config(device):
    seen = []

    def early(configs, named, **kwargs):
        assert named["N"] == 200 and "X" in named
        return [c for c in configs if c.kwargs["BLOCK"] >= 32]

    def model(**kw):
        seen.append(kw["BLOCK"])
        return -kw["BLOCK"]            # "bigger is faster"

    timed = []
    k = _scale_kernel(configs=CONFIGS, prune_configs_by={
        "early_config_prune": early, "perf_model": model, "top_k": 2},
        pre_hook=lambda named: timed.append(named["BLOCK"]))
    x = np.arange(200, dtype=np.float32)
    out = np.zeros_like(x)
    assert k.best_config is None
    best = k[grid](x, out, 200)
    np.testing.assert_array_equal(out, 3 * x)
    assert sorted(seen) == [32, 64, 128]               # the model saw what early pruning kept
    assert sorted(timed) == [64, 128]                  # top 2 by the model were timed
    assert best in (CONFIGS[2], CONFIGS[3]) and k.best_config is best
    # One config left after pruning: nothing is timed.
    k1 = _scale_kernel(configs=CONFIGS, prune_configs_by={"perf_model": model, "top_k": 0.25},
                       pre_hook=lambda named: pytest.fail("timed a single config"))
    assert k1[grid](x, out, 200) == CONFIGS[3]


def test_a_stored_winner_counts_only_if_pruning_keeps_it(device):
    # Two tuners of one kernel and key, pruned to different configs: the first stores its
    # winner on disk, the second must not take it.
    only = lambda block: {"early_config_prune": lambda configs, named, **kw: [
        c for c in configs if c.kwargs["BLOCK"] == block]}
    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    assert _scale_kernel(configs=CONFIGS, prune_configs_by=only(64))[grid](x, out, 300) == CONFIGS[2]
    assert _scale_kernel(configs=CONFIGS, prune_configs_by=only(128))[grid](x, out, 300) == CONFIGS[3]
    np.testing.assert_array_equal(out, 3 * x)


def test_hooks_and_config_pre_hook(device):
    calls = []
    cfgs = [metile.Config(BLOCK=32, pre_hook=lambda n: calls.append(("cfg", n["BLOCK"]))),
            metile.Config(BLOCK=64)]
    k = _scale_kernel(configs=cfgs,
                      post_hook=lambda named, exc: calls.append(("post", named["BLOCK"], exc)))
    x = np.ones(100, np.float32)
    out = np.zeros_like(x)
    best = k[grid](x, out, 100)
    assert ("cfg", 32) in calls and ("post", 32, None) in calls and ("post", 64, None) in calls
    calls.clear()
    k[grid](x, out, 100)                               # cached: no trials, no post_hook
    assert [c[0] for c in calls] == (["cfg"] if best is cfgs[0] else [])


def test_bad_prune_and_hook_arguments():
    with pytest.raises(metile.InvalidArgumentError, match="not top_n"):
        metile.autotune(configs=CONFIGS, key=["N"], prune_configs_by={"top_n": 1})
    with pytest.raises(metile.InvalidArgumentError, match="pre_hook must be callable"):
        metile.autotune(configs=CONFIGS, key=["N"], pre_hook=3)
    with pytest.raises(metile.InvalidArgumentError, match="pre_hook must be callable"):
        metile.Config(BLOCK=1, pre_hook=3)
    k = _scale_kernel(configs=CONFIGS, prune_configs_by={"early_config_prune": lambda c, n: []})
    x = np.ones(8, np.float32)
    with metile.use_device("interp"), pytest.raises(metile.InvalidArgumentError,
                                                    match="kept no config"):
        k[grid](x, np.zeros_like(x), 8)


def _accumulate_kernel(**autotune):
    @metile.autotune(configs=[metile.Config(BLOCK=32), metile.Config(BLOCK=64)], key=["N"],
                     warmup=1, rep=2, verbose=False, **autotune)
    @metile.kernel
    def acc(X, N, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        m = offs < N
        metile.store(X + offs, metile.load(X + offs, mask=m) + 1.0, mask=m)
    return acc


def test_read_and_written_arguments_warn_without_restore_value():
    x = np.zeros(64, np.float32)
    with metile.use_device("interp"):
        k = _accumulate_kernel()
        with pytest.warns(UserWarning, match=r"reads and writes X.*restore_value=\['X'\]"):
            k[grid](x, 64)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = np.zeros(64, np.float32)
            _accumulate_kernel(restore_value=["X"])[grid](y, 64)
        np.testing.assert_array_equal(y, 1)           # trials restored, then one launch
