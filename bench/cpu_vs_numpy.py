#!/usr/bin/python3
"""metile's cpu device against numpy and a plain C++ loop, measured side by side in one run.

Runs the Google Benchmark binary bench/cpu_kernels_bench (built with -DMETILE_BUILD_BENCH=ON)
with --benchmark_format=json for metile's numbers, times the same workloads with numpy in this
process right before each, and prints a table of ratios (higher is better for metile) plus the
machine description. Usage:

    /usr/bin/python3 bench/cpu_vs_numpy.py [--bench build-bench/bench/cpu_kernels_bench]
        [--blas-dir DIR] [--repeat N] [--markdown]

--blas-dir DIR puts DIR first on LD_LIBRARY_PATH and re-runs this script, so numpy's libblas.so.3
can be OpenBLAS without changing the system (e.g. the openblas-pthread directory of the
libopenblas0-pthread package unpacked with `dpkg -x`).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np


def median_seconds(fn, repeat, min_time=0.3):
    """Median wall time of fn() over `repeat` samples of at least min_time seconds each."""
    fn()  # warm up (page faults, BLAS thread start)
    samples = []
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        samples.append(elapsed / n)
    return statistics.median(samples)


def run_bench(binary, pattern, repeat):
    """Median real time (seconds) and counters of each benchmark matching `pattern`."""
    out = subprocess.run(
        [binary, "--benchmark_format=json", "--benchmark_filter=" + pattern,
         "--benchmark_repetitions=%d" % repeat, "--benchmark_report_aggregates_only=true"],
        check=True, capture_output=True, text=True).stdout
    results = {}
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    for b in json.loads(out)["benchmarks"]:
        if (b.get("aggregate_name") or "median") != "median":
            continue
        name = b["run_name"]
        results[name] = dict(b, seconds=b["real_time"] * scale[b["time_unit"]])
    return results


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def numpy_layernorm(x, w, b, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def blas_name():
    try:
        import numpy.core._multiarray_umath as m
        libs = subprocess.run(["ldd", m.__file__], capture_output=True, text=True).stdout
        for line in libs.splitlines():
            if "blas" in line:
                target = line.split("=>")[-1].split("(")[0].strip()
                real = os.path.realpath(target)
                if "openblas" in real or "openblas" in line:
                    return "OpenBLAS (" + real + ")"
                return "reference BLAS (" + real + ")"
    except Exception as e:  # the description is informative only
        return "unknown (%s)" % e
    return "unknown"


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%s, %d hardware threads, %s, load average %s" % (
        model, os.cpu_count(), platform.platform(), " ".join("%.1f" % x for x in os.getloadavg()))


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "build-bench", "bench", "cpu_kernels_bench"))
    ap.add_argument("--blas-dir")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.blas_dir and os.environ.get("METILE_BENCH_BLAS_DIR") != args.blas_dir:
        env = dict(os.environ, METILE_BENCH_BLAS_DIR=args.blas_dir,
                   LD_LIBRARY_PATH=args.blas_dir + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    rng = np.random.default_rng(0)
    rows = []  # (workload, metile, reference, unit, ratio)

    m = run_bench(args.bench, "VectorAdd", args.repeat)
    met = m["BM_VectorAdd_Metile/16777216/real_time"]["bytes_per_second"]
    loop = m["BM_VectorAdd_PlainLoop/16777216/real_time"]["bytes_per_second"]
    rows.append(("vector add 2^24 f32 (GB/s) vs plain -O3 loop", met / 1e9, loop / 1e9, met / loop, 0.9))

    for name, fn, mk in [("softmax", numpy_softmax, None), ("layernorm", numpy_layernorm, None)]:
        for r, c in [(4096, 4096), (512, 32768)]:
            x = rng.standard_normal((r, c), dtype=np.float32)
            if name == "softmax":
                t_np = median_seconds(lambda: fn(x), args.repeat)
                key = "BM_Softmax/%d/%d/real_time" % (r, c)
                bench = run_bench(args.bench, "BM_Softmax/%d/%d" % (r, c), args.repeat)
            else:
                w = rng.standard_normal(c, dtype=np.float32)
                b = rng.standard_normal(c, dtype=np.float32)
                t_np = median_seconds(lambda: fn(x, w, b), args.repeat)
                key = "BM_LayerNorm/%d/%d/real_time" % (r, c)
                bench = run_bench(args.bench, "BM_LayerNorm/%d/%d" % (r, c), args.repeat)
            t_m = bench[key]["seconds"]
            rows.append(("%s %dx%d (ms) vs numpy" % (name, r, c), t_m * 1e3, t_np * 1e3, t_np / t_m, 2.0))

    for n in (1024, 2048):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        t_np = median_seconds(lambda: np.matmul(a, b), args.repeat)
        bench = run_bench(args.bench, "BM_Gemm/%d/" % n, args.repeat)
        t_m = bench["BM_Gemm/%d/real_time" % n]["seconds"]
        gf = 2.0 * n ** 3 / 1e9
        rows.append(("GEMM %d^3 f32 (GFLOP/s) vs numpy.matmul" % n, gf / t_m, gf / t_np, t_np / t_m, 0.5))

    launch = run_bench(args.bench, "Launch", args.repeat)
    prepared = launch["BM_Launch_Prepared/real_time"]["seconds"] * 1e6
    oneshot = launch["BM_Launch_OneShot/real_time"]["seconds"] * 1e6
    compile_ = run_bench(args.bench, "ColdCompile", 1)

    print("machine: " + machine())
    print("numpy %s, BLAS: %s" % (np.__version__, blas_name()))
    fmt = "| {:<52} | {:>10} | {:>10} | {:>7} | {:>5} |" if args.markdown else "{:<54} {:>10} {:>10} {:>8} {:>6}"
    print(fmt.format("workload", "metile", "reference", "ratio", "aim"))
    if args.markdown:
        print("|" + "---|" * 5)
    for name, a, b, ratio, aim in rows:
        print(fmt.format(name, "%.2f" % a, "%.2f" % b, "%.2fx" % ratio, ">=%.1fx" % aim))
    print("launch overhead, empty kernel: prepared %.2f us, one-shot %.2f us (aim: prepared <= 2 us)"
          % (prepared, oneshot))
    for k in sorted(compile_):
        print("cold compile %-10s %.2f s" % (compile_[k].get("label", k), compile_[k]["seconds"]))


if __name__ == "__main__":
    main()
