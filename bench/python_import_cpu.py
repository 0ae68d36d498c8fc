#!/usr/bin/env python3
"""What `import metile` costs over `import numpy`, from CPython's -X importtime.

Each run is a fresh `python3 -X importtime -c "import metile"`; the cost of one run is metile's
cumulative import time minus numpy's (numpy is imported by metile, so its time is inside
metile's). Prints the median, quartiles and the modules with the largest median self time.

    METILE_LIBRARY=build/libmetile.so /usr/bin/python3 bench/python_import_cpu.py [runs] [dir]

`dir` (default bindings/python) is the folder holding the `metile` package, e.g. an older
checkout's, to compare two versions on the same machine at the same time.
"""
import collections
import os
import pathlib
import re
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def one_run(package_dir):
    env = dict(os.environ, PYTHONPATH=package_dir)
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import metile"], env=env,
                         capture_output=True, text=True, check=True).stderr
    selfs, cumulative = {}, {}
    for m in LINE.finditer(err):
        selfs[m.group(4)] = int(m.group(1))
        cumulative[m.group(4)] = int(m.group(2))
    return cumulative["metile"] - cumulative["numpy"], selfs


CPU = ("import time, numpy\nt = time.process_time()\nimport metile\n"
       "print((time.process_time() - t) * 1000)")


def cpu_run(package_dir):
    """CPU time the process spends in `import metile` after numpy: unlike -X importtime's wall
    clock, it does not count the time other processes hold the cores."""
    env = dict(os.environ, PYTHONPATH=package_dir)
    out = subprocess.run([sys.executable, "-c", CPU], env=env, capture_output=True, text=True,
                         check=True).stdout
    return float(out)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 41
    package_dir = sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "bindings" / "python")
    costs, selfs = [], collections.defaultdict(list)
    for _ in range(runs):
        cost, s = one_run(package_dir)
        costs.append(cost / 1000)
        for name, us in s.items():
            if name.startswith("metile"):
                selfs[name].append(us / 1000)
    cpu = [cpu_run(package_dir) for _ in range(runs)]
    q = statistics.quantiles(costs, n=4)
    print(f"import metile ({package_dir}) over numpy, {runs} runs: median {statistics.median(costs):.2f} ms "
          f"(quartiles {q[0]:.2f} / {q[2]:.2f} ms)")
    c = statistics.quantiles(cpu, n=4)
    print(f"  CPU time of the import after numpy: median {statistics.median(cpu):.2f} ms "
          f"(quartiles {c[0]:.2f} / {c[2]:.2f} ms)")
    print(f"  load average during the runs: {os.getloadavg()[0]:.1f}")
    print("largest median self times (ms):")
    top = sorted(selfs.items(), key=lambda kv: -statistics.median(kv[1]))[:8]
    for name, v in top:
        print(f"  {name:28s} {statistics.median(v):6.2f}")


if __name__ == "__main__":
    main()
