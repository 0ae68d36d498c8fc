"""Before/after timings of metile's mma.sync GEMM in one run: each variant (a libmetile.so, a
METILE_GPU_OFF list and, optionally, a METILE_GPU_ON list) in its own process, in rounds that alternate the variants' order, so two
builds or a piece switched on and off are compared on the same GPU minutes apart at most.

    METILE_CUDA_WGMMA=0 python3 bench/gemm_ab.py \\
        --variant after=/tmp/mb/libmetile.so: --variant off=/tmp/mb/libmetile.so:stage_counter \\
        --case f16:4096:2 --case tf32:4096:4 [--rounds 2] [--out FILE]
    python3 bench/gemm_ab.py --variant off=LIB: --variant ws=LIB::specialize-warps --case f16:4096:6

A case is dtype:n:config (f16 or tf32, n^3; config an index into gemm_vs_cublas.py's CONFIGS). Each variant
gets its own compile cache directory (the cache keys do not name the library build). Every
result is checked against float64 (relative Frobenius error, output poisoned with NaN first);
time per call as in gpu_timing.py; the table shows the best round per variant and case.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def child(cases):
    sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
    sys.path.insert(0, HERE)
    import numpy as np
    import metile
    from gemm_vs_cublas import CONFIGS, gemm
    from gpu_timing import time_per_call

    metile.set_device(os.environ.get("METILE_AB_DEVICE", "cuda"))  # another device: a dry run
    out = []
    for case in cases:
        dt, n, ci = case.split(":")
        n, (bm, bn, bk, thr, stages, wm, wn) = int(n), CONFIGS[int(ci)]
        rng = np.random.default_rng(0)
        name = "f32" if dt == "tf32" else dt
        host = {"f16": np.float16, "f32": np.float32}[name]
        a32 = rng.standard_normal((n, n)).astype(host).astype(np.float32)
        b32 = rng.standard_normal((n, n)).astype(host).astype(np.float32)
        a, b = metile.Buffer.zeros((n, n), name), metile.Buffer.zeros((n, n), name)
        a.numpy()[...] = a32.astype(host)
        b.numpy()[...] = b32.astype(host)
        c = metile.Buffer.zeros((n, n))
        c.numpy()[...] = np.nan
        extra = {k: v for k, v in (("num_stages", stages), ("warps_m", wm), ("warps_n", wn)) if v}
        launch = gemm[(metile.cdiv(n, bm), metile.cdiv(n, bn))]

        def run():
            launch(a, b, c, n, n, n, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_threads=thr,
                   allow_tf32=True, **extra)

        run()
        metile.synchronize()
        rows = slice(0, 64)  # a row block against float64 (the whole product is 8192^3 on the host)
        want = a32[rows].astype(np.float64) @ b32.astype(np.float64)
        err = float(np.linalg.norm(c.numpy()[rows] - want) / np.linalg.norm(want))
        t = time_per_call(run, metile.synchronize, min(50, max(5, int(2e12 / (2 * n ** 3) / 4))))
        out.append({"case": case, "tflops": 2 * n ** 3 / t / 1e12, "err": err})
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True, help="name=LIB:GPU_OFF[:GPU_ON]")
    ap.add_argument("--case", action="append", required=True, help="dtype:n:config")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        return child(args.case)
    variants = []
    for v in args.variant:
        name, rest = v.split("=", 1)
        lib, off, on = (rest.split(":", 2) + [""])[:3]
        variants.append((name, lib, off, on, tempfile.mkdtemp(prefix="metile-ab-")))
    best = {}
    for r in range(args.rounds):
        for name, lib, off, on, cache in (variants if r % 2 == 0 else variants[::-1]):
            env = dict(os.environ, METILE_LIBRARY=lib, METILE_GPU_OFF=off, METILE_GPU_ON=on, METILE_CACHE_DIR=cache)
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--variant", "x=y:z"]
            for c in args.case:
                cmd += ["--case", c]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if res.returncode != 0:
                print(name, "failed:", res.stderr[-2000:])
                continue
            for row in json.loads(res.stdout.strip().splitlines()[-1]):
                key = (name, row["case"])
                if key not in best or row["tflops"] > best[key]["tflops"]:
                    best[key] = row
    print("%-10s" % "case" + "".join("%16s" % v[0] for v in variants) + "   (TFLOP/s, best of %d rounds; max rel err)" % args.rounds)
    for c in args.case:
        cells = [best.get((v[0], c)) for v in variants]
        errs = max((x["err"] for x in cells if x), default=float("nan"))
        print("%-14s" % c + "".join("%12.1f    " % x["tflops"] if x else "%16s" % "-" for x in cells) + "  %.1e" % errs)
    if args.out:
        json.dump([dict(v, variant=k[0]) for k, v in best.items()], open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
