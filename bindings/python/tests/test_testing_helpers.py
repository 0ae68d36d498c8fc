"""metile.testing as Triton's (issue 32 item 5): do_bench in millisecond budgets, assert_close,
perf_report / Benchmark."""

import csv
import os
import time

import numpy as np
import pytest

import metile
from metile import testing


def test_do_bench_budgets_are_milliseconds():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.02)                  # a 20 ms "op"

    ms = testing.do_bench(slow, warmup=25, rep=100)
    assert 15 < ms < 200
    # 1 + 5 estimating calls, then about 25/20 warmup and 100/20 timed calls: well under the
    # 125 calls (2.5 s) that counting warmup and rep as calls took.
    assert len(calls) <= 6 + 2 + 6


def test_do_bench_modes_and_quantiles(device, bench_flush):
    x = metile.Buffer(np.ones(4096, np.float32))

    @metile.kernel
    def twice(X, N, BLOCK: metile.constexpr):
        offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
        metile.store(X + offs, metile.load(X + offs, mask=offs < N) * 2.0, mask=offs < N)

    run = twice[(16,)].prepare(x, 4096, BLOCK=256)
    every = testing.do_bench(run, warmup=1, rep=5, return_mode="all")
    assert isinstance(every, list) and every and all(v > 0 for v in every)
    lo, mid, hi = testing.do_bench(run, warmup=1, rep=5, quantiles=[0.2, 0.5, 0.8])
    assert 0 < lo <= mid <= hi
    assert testing.do_bench(run, warmup=1, rep=5, quantiles=[0.5]) > 0
    for mode in ("mean", "median", "min", "max"):
        assert testing.do_bench(run, warmup=0, rep=2, return_mode=mode) > 0


def test_assert_close():
    a = np.array([1.0, 2.0, np.nan], np.float32)
    testing.assert_close(a, a + 0.005)
    testing.assert_close(metile.Buffer(data=np.ones(4, np.float32)), np.ones(4))
    testing.assert_close(np.array([True, False]), np.array([1, 0]))
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        testing.assert_close(a, a + np.array([0, 0.5, 0], np.float32))
    testing.assert_close(a, a * 1.1, atol=0, rtol=0.2)
    with pytest.raises(AssertionError, match="context"):
        testing.assert_close(1.0, 2.0, err_msg="context")


def test_perf_report_tables(tmp_path, capsys):
    seen = []

    @testing.perf_report(testing.Benchmark(
        x_names=["N"], x_vals=[2, 4], line_arg="provider", line_vals=["a", "b"],
        line_names=["A", "B"], plot_name="toy", args={"scale": 10}))
    def bench(N, provider, scale):
        seen.append((N, provider, scale))
        return (N * scale + (provider == "b"), 0.0, 0.0) if provider == "b" else N * scale

    rows = bench.run(print_data=True, save_path=str(tmp_path), return_df=True)
    assert seen == [(2, "a", 10), (2, "b", 10), (4, "a", 10), (4, "b", 10)]
    out = capsys.readouterr().out
    assert "toy:" in out and "41" in out
    with open(os.path.join(tmp_path, "toy.csv")) as f:
        table = list(csv.DictReader(f))
    assert [float(r["B"]) for r in table] == [21.0, 41.0]
    if isinstance(rows, list):
        assert rows[1]["A"] == 40.0
    else:  # pandas
        assert list(rows["A"]) == [20.0, 40.0]
    with pytest.raises(metile.InvalidArgumentError, match="2 line_names for 1 line_vals"):
        testing.Benchmark(["N"], [1], "p", ["a"], ["A", "B"], "bad")
