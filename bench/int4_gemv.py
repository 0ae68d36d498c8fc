"""Weight-only int4 GEMV (examples/python/int4_gemv.py) against the copy bandwidth measured in
the same run on one GPU (issue 35's aim: >= 80% of copy bandwidth on the packed weights).

    python3 bench/int4_gemv.py [--device cuda] [--out FILE.jsonl] [--quick]
                               [--shapes NxK,...] [--groups 32,64,128] [--dtypes f16,bf16]
                               [--m 1,4] [--configs BN/BK[/FORM[/MAXNREG]];...]

Shapes (N x K, W is [N, K]): 4096, 8192, 16384 square. Each row: int4_gemv at its default
config as a prepared launch (prepare_int4_gemv), and `Tensor.copy_` of a buffer the size of the
packed weights (Wq + Scales + Biases). GB/s = bytes of Wq + Scales + Biases + x + y / time;
of_copy = that / copy GB/s. Every result is checked against float64 (max |error| / sum |w x|,
max_rel_err). Time per call = median over 5 repeats of (calls back-to-back, then synchronize) /
calls after a warm-up. The bench is for cuda: elsewhere it says so and exits 0, unless --quick
(a smoke run on small shapes, on any device, copy bandwidth not measured).
"""

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402
import int4_gemv as Q  # noqa: E402
from gemv import make, values  # noqa: E402

SHAPES = [(4096, 4096), (8192, 8192), (16384, 16384)]
QUICK_SHAPES = [(70, 520)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="append the rows here as JSON lines")
    ap.add_argument("--quick", action="store_true", help="small shapes, few calls (a smoke run)")
    ap.add_argument("--shapes", default=None, help="NxK,... instead of the three squares")
    ap.add_argument("--groups", default="32,64,128")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--m", default="1,4", help="rows of x, a comma list")
    ap.add_argument("--configs", default=None,
                    help="time these (block_n/block_k[/form[/maxnreg]];...) beside the "
                         "default config; an empty form is int4_gemv's choice (8/1024//96)")
    args = ap.parse_args()
    extra = []
    for c in (args.configs.split(";") if args.configs else []):
        parts = c.split("/")
        try:
            bn, bk = int(parts[0]), int(parts[1])
            form = parts[2] or None if len(parts) >= 3 else None
            maxnreg = int(parts[3]) if len(parts) == 4 else None
            if len(parts) > 4 or form not in (None,) + Q.FORMS:
                raise ValueError
        except (ValueError, IndexError):
            raise SystemExit(f"--configs: {c!r} is not "
                             f"block_n/block_k[/{'|'.join(Q.FORMS)}[/maxnreg]]")
        extra.append((bn, bk, form, maxnreg))
    if args.device not in metile.devices() or (args.device != "cuda" and not args.quick):
        print(f"bench/int4_gemv.py: skipped: it measures cuda (device {args.device!r} given; "
              f"available: {', '.join(metile.devices())}); --quick runs a smoke test anywhere")
        return 0
    metile.set_device(args.device)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    torch = None
    if args.device == "cuda":
        try:
            import torch
            if not torch.cuda.is_available():
                torch = None
        except ImportError:
            torch = None
    out = open(args.out, "a") if args.out else None
    rows = []
    started = time.perf_counter()

    def record(r):
        rows.append(r)
        line = json.dumps(r)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    if torch is not None:
        record({"kernel": "info", "gpu": torch.cuda.get_device_name(),
                "architecture": metile.get_device().architecture, "torch": torch.__version__})
    rng = np.random.default_rng(0)
    msync = metile.synchronize
    for dtype in args.dtypes.split(","):
        for group in (int(g) for g in args.groups.split(",")):
            for (n, k) in shapes:
                (wq, s, b), w64 = Q.quantized(n, k, group, dtype, rng)
                wbytes = wq.nbytes + s.nbytes + b.nbytes
                copy_gbs = None
                if torch is not None:
                    src = torch.empty(wbytes, dtype=torch.uint8, device="cuda")
                    dst = torch.empty_like(src)
                    calls = max(10, min(500, int(4e9 // wbytes)))
                    t = time_per_call(lambda: dst.copy_(src), torch.cuda.synchronize, calls)
                    copy_gbs = 2 * wbytes / t / 1e9
                    del src, dst
                for m, cfg in ((int(v), c) for v in args.m.split(",") for c in [None] + extra):
                    config = cfg or Q.default_config(n, k, group) + (None, None)
                    if config[2] is None:  # the form int4_gemv chooses
                        config = config[:2] + (Q.default_form(k, config[1]),) + config[3:]
                    r = {"kernel": "int4_gemv", "dtype": dtype, "group": group, "N": n, "K": k,
                         "M": m, "copy_GBps": copy_gbs, "config": list(config),
                         "default": cfg is None}
                    try:
                        x, x64 = make(rng.standard_normal((m, k)), dtype)
                        fn, y = Q.prepare_int4_gemv(wq, s, b, x, group=group,
                                                    block_n=config[0], block_k=config[1],
                                                    form=config[2], maxnreg=config[3])
                        fn()
                        msync()
                        r["max_rel_err"] = float((np.abs(values(y) - x64 @ w64.T) /
                                                  (np.abs(x64) @ np.abs(w64).T)).max())
                        nbytes = wbytes + x.nbytes + y.nbytes
                        calls = 2 if args.quick else max(20, min(1000, int(4e9 // nbytes)))
                        t = time_per_call(fn, msync, calls)
                        r.update(metile_us=t * 1e6, metile_GBps=nbytes / t / 1e9)
                        if copy_gbs:
                            r["of_copy"] = r["metile_GBps"] / copy_gbs
                    except Exception as e:  # noqa: BLE001
                        r["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
                    record(r)
                del wq, s, b, w64
    print("\nwhole run: %.1f s" % (time.perf_counter() - started))
    print("%-5s %5s %-12s %3s %-14s %9s %9s %9s %8s %9s" % (
        "dtype", "group", "N x K", "M", "bn/bk", "us", "GB/s", "copy", "of copy", "rel err"))
    for r in rows:
        if r["kernel"] != "int4_gemv":
            continue
        shape = "%dx%d" % (r["N"], r["K"])
        cfg = "/".join(str(v) for v in r["config"] if v is not None)
        if "error" in r:
            print("%-5s %5d %-12s %3d %-14s FAILED: %s" % (r["dtype"], r["group"], shape, r["M"],
                                                          cfg, r["error"].splitlines()[-1][:100]))
            continue
        print("%-5s %5d %-12s %3d %-14s %9.1f %9.0f %9s %8s %9.1e" % (
            r["dtype"], r["group"], shape, r["M"], cfg, r["metile_us"], r["metile_GBps"],
            "%.0f" % r["copy_GBps"] if r.get("copy_GBps") else "-",
            "%.0f%%" % (100 * r["of_copy"]) if "of_copy" in r else "-", r["max_rel_err"]))
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
