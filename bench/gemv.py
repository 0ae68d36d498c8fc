"""GEMV and batched GEMV (examples/python/gemv.py) against torch (cuBLAS) and the copy bandwidth,
in one run on one GPU (issue 33).

    python3 bench/gemv.py [--device cuda] [--out FILE.jsonl] [--quick] [--sweep]
                          [--shapes NxK,...] [--dtypes f16,bf16] [--m 1,4,16]

Shapes (N x K, W is [N, K]): 4096x4096, 8192x8192, 16384x16384, 4096x14336, 14336x4096; f16 and
bf16 (W, x and y the same dtype); M = 1, 4, 16 rows of x. Each row: metile's gemv at its
default config (default_config: the config the example picks for the device), timed as a
prepared launch (prepare_gemv: the host checks done once; gemv_call_us is gemv() as called,
checks included, which can exceed the GPU time of the small shapes), torch's
F.linear(x, W) (for M = 1 the faster of it and torch.mv(W, x); cuBLAS), and `Tensor.copy_` of a tensor of W's size
(the bandwidth this GPU reaches in this run). GB/s = bytes of W + x + y / time; of_copy = metile
GB/s / copy GB/s; vs_torch = torch time / metile time (> 1: metile faster). Every metile result
is checked against float64 (max |error| / sum |w x| over K, reported as max_rel_err).
--sweep: every config of SWEEP (block_n x block_k x num_warps x split_k; DOT_SWEEP for the
"dot" method from two rows of x) per shape, one JSON line
each, and the best per shape at the end. Time per call = median over 5 repeats of (calls
back-to-back, then synchronize) / calls after a warm-up, the same for every framework. Without
torch (--quick --device cpu: a smoke run, the sweep cut to 3 configs) only metile runs. One
JSON line per row on stdout and in --out; a table at the end.
"""

import argparse
import itertools
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
import gemv as G  # noqa: E402

SHAPES = [(4096, 4096), (8192, 8192), (16384, 16384), (4096, 14336), (14336, 4096)]
QUICK_SHAPES = [(300, 200), (70, 520)]
SWEEP = {"block_n": (1, 2, 4, 8), "block_k": (256, 512, 1024), "num_warps": (4, 8),
         "split_k": (1, 2, 4)}
DOT_SWEEP = {"block_n": (32, 64, 128), "block_k": (64, 128, 256), "num_warps": (4,),
             "split_k": (1, 2, 4, 8)}
CONFIG_KEYS = ("block_n", "block_k", "num_warps", "split_k", "method")


def sweep_configs(m, dtype):
    """The SWEEP configs worth compiling for the "fma" method: 4 to 16 W elements per thread
    (the canonical layout gives a thread 4 consecutive elements per chunk), at most 128 f32
    accumulators per thread; for two rows of x and more with a 16-bit W, DOT_SWEEP's for the
    "dot" method."""
    out = []
    for bn, bk, nw, sk in itertools.product(*SWEEP.values()):
        per_thread = bn * bk // (32 * nw)
        if 4 <= per_thread <= 16 and m * per_thread <= 128:
            out.append(dict(zip(CONFIG_KEYS, (bn, bk, nw, sk, "fma"))))
    if m >= 2 and dtype != "f32":
        out += [dict(zip(CONFIG_KEYS, c + ("dot",))) for c in itertools.product(*DOT_SWEEP.values())]
    return out


def parse_config(text):
    """'4/512/4/1/fma' (a field '*' keeps the default's) -> the fields given, by CONFIG_KEYS."""
    fields = text.split("/")
    if len(fields) != len(CONFIG_KEYS):
        raise SystemExit(f"--configs: {text!r} is not bn/bk/warps/split/method")
    return {key: (v if key == "method" else int(v))
            for key, v in zip(CONFIG_KEYS, fields) if v != "*"}


def inputs(n, k, m, dtype, torch, rng):
    """(W, x, y) as metile Buffers (over torch's CUDA tensors when torch runs) and the torch
    tensors (or None), and float64 W and x for the reference."""
    if torch is not None:
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        tw = torch.randn(n, k, device="cuda").to(tdt)
        tx = torch.randn(m, k, device="cuda").to(tdt)
        ty = torch.empty(m, n, device="cuda", dtype=tdt)
        torch.cuda.synchronize()
        bufs = tuple(metile.from_dlpack(t) for t in (tw, tx, ty))
        return bufs, (tw, tx, ty), None
    w, w64 = G.make(rng.standard_normal((n, k)), dtype)
    x, x64 = G.make(rng.standard_normal((m, k)), dtype)
    return (w, x, metile.Buffer.zeros((m, n), dtype)), None, (w64, x64)


def max_rel_err(y, ts, host, torch):
    """max |y - x W^T| / (|x| |W|^T), float64 (on the GPU when torch runs)."""
    if torch is not None:
        tw, tx, ty = ts
        w, x = tw.double(), tx.double()
        ref, scale = x @ w.T, x.abs() @ w.abs().T
        return float(((ty.double() - ref).abs() / scale).max())
    w64, x64 = host
    return float((np.abs(G.values(y) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="append the rows here as JSON lines")
    ap.add_argument("--quick", action="store_true", help="small shapes, few calls (a smoke run)")
    ap.add_argument("--sweep", action="store_true", help="time every SWEEP config per shape")
    ap.add_argument("--shapes", default=None, help="NxK,... instead of the five shapes")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--m", default="1,4,16", help="rows of x, a comma list")
    ap.add_argument("--configs", default=None,
                    help="time these configs beside the default instead of the sweep: "
                         "'bn/bk/warps/split/method;...', '*' keeps the default's field")
    args = ap.parse_args()
    metile.set_device(args.device)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    torch = None
    if args.device == "cuda":
        try:
            import torch
            import torch.nn.functional as F
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
        for (n, k) in shapes:
            copy_gbs = None
            if torch is not None:
                try:
                    src = torch.empty(n * k, dtype=torch.float16, device="cuda")
                    dst = torch.empty_like(src)
                    calls = max(10, min(200, int(4e9 // (4 * n * k))))
                    t = time_per_call(lambda: dst.copy_(src), torch.cuda.synchronize, calls)
                    copy_gbs = 2 * src.nbytes / t / 1e9
                    del src, dst
                except Exception as e:  # noqa: BLE001
                    record({"kernel": "copy", "shape": [n, k], "error": repr(e)})
            for m in (int(v) for v in args.m.split(",")):
                base = {"dtype": dtype, "N": n, "K": k, "M": m}
                try:
                    (w, x, y), ts, host = inputs(n, k, m, dtype, torch, rng)
                except Exception as e:  # noqa: BLE001
                    record(dict(base, kernel="inputs", error=repr(e)))
                    continue
                nbytes = w.nbytes + x.nbytes + y.nbytes
                calls = 2 if args.quick else max(20, min(500, int(4e9 // nbytes)))
                torch_t = None
                if torch is not None:
                    tw, tx, ty = ts
                    try:
                        torch_t = time_per_call(lambda: F.linear(tx, tw), torch.cuda.synchronize,
                                                calls)
                        if m == 1:  # torch.mv: cuBLAS's gemv; the faster of the two counts
                            torch_t = min(torch_t, time_per_call(
                                lambda: torch.mv(tw, tx[0], out=ty[0]), torch.cuda.synchronize,
                                calls))
                    except Exception as e:  # noqa: BLE001
                        record(dict(base, kernel="torch", error=repr(e)))
                configs = ([None] + sweep_configs(m, dtype)) if args.sweep else [None]
                if args.configs:
                    configs = [None] + [parse_config(c) for c in args.configs.split(";")]
                if args.quick:
                    configs = configs[:4]
                best = None
                for cfg in configs:
                    r = dict(base, kernel="gemv", copy_GBps=copy_gbs)
                    kw = cfg or {}
                    chosen = dict(zip(CONFIG_KEYS, G.default_config(n, k, m, dtype)))
                    chosen.update(kw)
                    r["config"] = chosen
                    r["default"] = cfg is None
                    try:
                        fn, _ = G.prepare_gemv(w, x, out=y, **chosen)
                        fn()
                        msync()
                        r["max_rel_err"] = max_rel_err(y, ts, host, torch)
                        t = time_per_call(fn, msync, calls)
                        r.update(metile_us=t * 1e6, metile_GBps=nbytes / t / 1e9)
                        if cfg is None:  # gemv() as called: its checks on the host each call
                            r["gemv_call_us"] = 1e6 * time_per_call(
                                lambda: G.gemv(w, x, out=y, **chosen), msync, calls)
                        if copy_gbs:
                            r["of_copy"] = r["metile_GBps"] / copy_gbs
                        if torch_t:
                            r.update(torch_us=torch_t * 1e6, torch_GBps=nbytes / torch_t / 1e9,
                                     vs_torch=torch_t / t)
                        if best is None or t < best["metile_us"] * 1e-6:
                            best = r
                    except Exception as e:  # noqa: BLE001
                        r["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
                    record(r)
                if args.sweep and best is not None:
                    record(dict(best, kernel="best"))
                del w, x, y, ts
    print("\nwhole run: %.1f s" % (time.perf_counter() - started))
    print("%-5s %-12s %3s %-26s %8s %9s %9s %9s %8s %8s %9s" % (
        "dtype", "N x K", "M", "config (bn,bk,w,sk,how)", "us", "GB/s", "torch", "copy", "of copy",
        "vs torch", "rel err"))
    for r in rows:
        if r["kernel"] not in ("gemv", "best") or (args.sweep and r["kernel"] != "best"):
            continue
        shape = "%dx%d" % (r["N"], r["K"])
        c = r["config"]
        cfg = "%d,%d,%d,%d,%s" % (c["block_n"], c["block_k"], c["num_warps"], c["split_k"],
                                  c["method"])
        if "error" in r:
            print("%-5s %-12s %3d %-26s FAILED: %s" % (r["dtype"], shape, r["M"], cfg,
                                                      r["error"].splitlines()[-1][:100]))
            continue
        print("%-5s %-12s %3d %-26s %8.1f %9.0f %9s %9s %8s %8s %9.1e" % (
            r["dtype"], shape, r["M"], cfg, r["metile_us"], r["metile_GBps"],
            "%.0f" % r["torch_GBps"] if "torch_GBps" in r else "-",
            "%.0f" % r["copy_GBps"] if r.get("copy_GBps") else "-",
            "%.0f%%" % (100 * r["of_copy"]) if "of_copy" in r else "-",
            "%.2fx" % r["vs_torch"] if "vs_torch" in r else "-", r["max_rel_err"]))
    if out:
        out.close()


if __name__ == "__main__":
    main()
