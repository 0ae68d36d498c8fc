"""Row kernels as users write them (issue 16 item 3), against Triton's fused kernels and the
copy bandwidth, in one run on one GPU.

    python3 bench/cuda_rows.py [--quick] [--device cuda] [--out FILE] [--only softmax,...]

Kernels (f32, one program per row):
  seed_softmax   the seed README softmax verbatim: three tile_range passes (max, sum of exp,
                 normalize); the compiler merges the first two (online softmax) unless
                 --no-fuse; both forms are timed unless --fused-only.
  layernorm      seed style: a tile_range pass for the sum, one for the sum of squares, one that
                 normalizes (the first two merge into one pass).
  layernorm_centred  textbook style: a mean pass, a pass summing (x - mean)^2, one that
                 normalizes (the first two merge into one pass: Youngs and Cramer's update on
                 the mean pass's sum).
  rmsnorm        seed style: a sum-of-squares pass, then the normalizing pass.
Variants: fused with the row kept (keep_rows=True), fused re-reading (the defaults), and as
written (fuse_reductions=False) with and without the row kept (both skipped by --fused-only).
Shapes: 16384x1024, 4096x4096, 1024x32768, 16384x4096, 256x262144 (--quick: small ones).
Peers: Triton's fused kernels (the whole row in one tile up to 32768 columns, an online
two-pass loop beyond), torch's softmax/layer_norm, and `torch.Tensor.copy_` of the same matrix
(the copy bandwidth: 2 x 4 bytes per element, the least any of these kernels must move).
Time per call = median over 5 repeats of (calls back-to-back, then synchronize) / calls, after a
warm-up call, the same for every framework. Each (kernel, shape, framework) runs in its own
try block: a failure prints its error and the run goes on. Prints one JSON line per row and a
table of TB/s and ratios at the end (metile / Triton, metile / copy).
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
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402

SHAPES = [(16384, 1024), (4096, 4096), (1024, 32768), (16384, 4096), (256, 262144)]
QUICK_SHAPES = [(64, 1024), (16, 5000)]


# ---- metile kernels, written the way the seeds write them: the tests' own (one copy) ---------
# layernorm here is the seed-style one with a loop per statistic (layernorm_loops in the tests).
from kernels import layernorm_centred, layernorm_loops as layernorm, rmsnorm, seed_softmax  # noqa: E402,F401


# ---- references (float64 numpy) -------------------------------------------------------------

def ref_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def ref_layernorm(x, w, b):
    return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w + b


def ref_rmsnorm(x, w):
    return x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * w


def triton_kernels():
    """Triton's fused forms: the whole row in one tile, or an online loop for long rows."""
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_tile(X, O, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        m = c < N
        x = tl.load(X + row * N + c, mask=m, other=-float("inf"))
        e = tl.exp(x - tl.max(x, 0))
        tl.store(O + row * N + c, e / tl.sum(e, 0), mask=m)

    @triton.jit
    def softmax_loop(X, O, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        mx = tl.full((BLOCK,), -float("inf"), tl.float32)
        s = tl.zeros((BLOCK,), tl.float32)
        for i in range(0, N, BLOCK):
            c = i + tl.arange(0, BLOCK)
            x = tl.load(X + row * N + c, mask=c < N, other=-float("inf"))
            new = tl.maximum(mx, x)
            s = s * tl.exp(mx - new) + tl.exp(x - new)
            s = tl.where(new == -float("inf"), 0.0, s)
            mx = new
        m = tl.max(mx, 0)
        total = tl.sum(s * tl.exp(mx - m), 0)
        for i in range(0, N, BLOCK):
            c = i + tl.arange(0, BLOCK)
            x = tl.load(X + row * N + c, mask=c < N)
            tl.store(O + row * N + c, tl.exp(x - m) / total, mask=c < N)

    @triton.jit
    def layernorm_tile(X, W, B, O, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        m = c < N
        x = tl.load(X + row * N + c, mask=m, other=0.0)
        mean = tl.sum(x, 0) / N
        d = tl.where(m, x - mean, 0.0)
        inv = 1.0 / tl.sqrt(tl.sum(d * d, 0) / N + 1e-5)
        w = tl.load(W + c, mask=m)
        b = tl.load(B + c, mask=m)
        tl.store(O + row * N + c, d * inv * w + b, mask=m)

    @triton.jit
    def layernorm_loop(X, W, B, O, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        s = tl.zeros((BLOCK,), tl.float32)
        ss = tl.zeros((BLOCK,), tl.float32)
        for i in range(0, N, BLOCK):
            c = i + tl.arange(0, BLOCK)
            x = tl.load(X + row * N + c, mask=c < N, other=0.0)
            s += x
            ss += x * x
        mean = tl.sum(s, 0) / N
        inv = 1.0 / tl.sqrt(tl.sum(ss, 0) / N - mean * mean + 1e-5)
        for i in range(0, N, BLOCK):
            c = i + tl.arange(0, BLOCK)
            m = c < N
            x = tl.load(X + row * N + c, mask=m)
            w = tl.load(W + c, mask=m)
            b = tl.load(B + c, mask=m)
            tl.store(O + row * N + c, (x - mean) * inv * w + b, mask=m)

    @triton.jit
    def rmsnorm_tile(X, W, O, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        m = c < N
        x = tl.load(X + row * N + c, mask=m, other=0.0)
        inv = 1.0 / tl.sqrt(tl.sum(x * x, 0) / N + 1e-5)
        tl.store(O + row * N + c, x * inv * tl.load(W + c, mask=m), mask=m)

    @triton.jit
    def rmsnorm_loop(X, W, O, N, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        ss = tl.zeros((BLOCK,), tl.float32)
        for i in range(0, N, BLOCK):
            c = i + tl.arange(0, BLOCK)
            x = tl.load(X + row * N + c, mask=c < N, other=0.0)
            ss += x * x
        inv = 1.0 / tl.sqrt(tl.sum(ss, 0) / N + 1e-5)
        for i in range(0, N, BLOCK):
            c = i + tl.arange(0, BLOCK)
            m = c < N
            x = tl.load(X + row * N + c, mask=m)
            tl.store(O + row * N + c, x * inv * tl.load(W + c, mask=m), mask=m)

    return {"seed_softmax": (softmax_tile, softmax_loop), "layernorm": (layernorm_tile, layernorm_loop),
            "rmsnorm": (rmsnorm_tile, rmsnorm_loop)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small shapes, few calls (a smoke run)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    ap.add_argument("--only", default="seed_softmax,layernorm,layernorm_centred,rmsnorm")
    ap.add_argument("--block", type=int, default=0,
                    help="metile's BLOCK (default: min(N rounded up to a power of 2, 4096))")
    ap.add_argument("--fused-only", action="store_true", help="skip the fuse_reductions=False runs")
    ap.add_argument("--no-keep", action="store_true", help="skip the keep_rows=True runs")
    ap.add_argument("--num-threads", default="0",
                    help="metile's threads per program, a comma list run as variants (compile "
                         "option; 0: the compiler's choice)")
    ap.add_argument("--shapes", default=None, help="ROWSxCOLS,... instead of the five shapes")
    args = ap.parse_args()
    metile.set_device(args.device)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    thread_counts = [int(t) for t in args.num_threads.split(",")]
    kernels = args.only.split(",")
    try:
        import torch
        peers = torch.cuda.is_available() and args.device == "cuda"
    except ImportError:
        peers = False
    tri = None
    if peers:
        try:
            tri = triton_kernels()
        except Exception as e:  # a missing or broken Triton still leaves metile's numbers
            print(json.dumps({"error": "triton: %r" % e}), flush=True)
    sync = metile.synchronize
    rng = np.random.default_rng(0)
    rows_out = []
    started = time.perf_counter()

    def record(r):
        rows_out.append(r)
        print(json.dumps(r), flush=True)

    for (R, N) in shapes:
        nbytes = 2 * 4 * R * N
        calls = max(3, min(50, int(2e9 // nbytes))) if not args.quick else 2
        x_host = rng.standard_normal((R, N), dtype=np.float32)
        w_host = rng.standard_normal(N, dtype=np.float32)
        b_host = rng.standard_normal(N, dtype=np.float32)
        x, w, b = (metile.Buffer(data=a) for a in (x_host, w_host, b_host))
        out = metile.Buffer.zeros((R, N))
        block = args.block or min(1 << max(N - 1, 1).bit_length(), 4096)
        copy_t = None
        if peers:
            try:
                tx = torch.from_numpy(x_host).cuda()
                to = torch.empty_like(tx)
                copy_t = time_per_call(lambda: to.copy_(tx), torch.cuda.synchronize, calls)
                record({"kernel": "copy", "shape": [R, N], "TBps": nbytes / copy_t / 1e12})
            except Exception as e:
                record({"kernel": "copy", "shape": [R, N], "error": repr(e)})
        x64 = x_host.astype(np.float64)
        for name in kernels:
            base = "layernorm" if name == "layernorm_centred" else name
            launch_args = {"seed_softmax": (x, out), "layernorm": (x, w, b, out),
                           "rmsnorm": (x, w, out)}[base]
            make_ref = {"seed_softmax": lambda: ref_softmax(x64),
                        "layernorm": lambda: ref_layernorm(x64, w_host, b_host),
                        "rmsnorm": lambda: ref_rmsnorm(x64, w_host)}[base]
            cached = []

            def ref():
                if not cached:
                    cached.append(make_ref())
                return cached[0]
            kern = {"seed_softmax": seed_softmax, "layernorm": layernorm,
                    "layernorm_centred": layernorm_centred, "rmsnorm": rmsnorm}[name]
            variants = [(True, True), (True, False)] + ([] if args.fused_only else
                                                        [(False, True), (False, False)])
            variants = [v for v in variants if not (args.no_keep and v[1])]
            variants = [v + (th,) for v in variants for th in thread_counts]
            triton_t = []  # Triton's time for this kernel and shape, measured once
            for fuse, keep, threads in variants:
                r = {"kernel": name, "shape": [R, N], "fuse_reductions": fuse, "keep_rows": keep,
                     "BLOCK": block, "num_threads": threads}
                try:
                    go = kern[(R,)]
                    opts = {"num_threads": threads} if threads else {}
                    t = time_per_call(lambda: go(*launch_args, N, BLOCK=block, fuse_reductions=fuse,
                                                 keep_rows=keep, **opts), sync, calls)
                    err = float(np.abs(out.numpy() - ref()).max())
                    r.update(metile_ms=t * 1e3, metile_TBps=nbytes / t / 1e12, max_abs_err=err)
                    if copy_t:
                        r["of_copy"] = copy_t / t
                except Exception as e:
                    r["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
                if tri is not None and "error" not in r:
                    try:
                        tile, loop = tri[base]
                        targs = [torch.from_numpy(a).cuda() for a in
                                 {"seed_softmax": (x_host,), "layernorm": (x_host, w_host, b_host),
                                  "rmsnorm": (x_host, w_host)}[base]]
                        to = torch.empty_like(targs[0])
                        targs.insert(1 if base == "seed_softmax" else len(targs), to)
                        if N <= 32768:
                            fn = lambda: tile[(R,)](*targs, N, BLOCK=1 << (N - 1).bit_length())
                        else:
                            fn = lambda: loop[(R,)](*targs, N, BLOCK=4096)
                        if not triton_t:
                            triton_t.append(time_per_call(fn, torch.cuda.synchronize, calls))
                        tt = triton_t[0]
                        r.update(triton_ms=tt * 1e3, triton_TBps=nbytes / tt / 1e12,
                                 metile_over_triton=tt / (r["metile_ms"] / 1e3))
                    except Exception as e:
                        r["triton_error"] = repr(e)
                record(r)
    print("\nwhole run: %.1f s" % (time.perf_counter() - started))
    print("%-17s %-13s %-5s %-5s %4s %9s %9s %9s %8s %8s" % ("kernel", "shape", "fuse", "keep", "thr",
                                                             "metile", "triton", "copy", "vs tri",
                                                             "of copy"))
    copies = {tuple(r["shape"]): r.get("TBps") for r in rows_out if r["kernel"] == "copy"}
    for r in rows_out:
        if r["kernel"] == "copy":
            continue
        shape = "%dx%d" % tuple(r["shape"])
        if "error" in r:
            print("%-17s %-13s %-5s %-5s FAILED: %s" % (r["kernel"], shape, r["fuse_reductions"],
                                                       r["keep_rows"], r["error"].splitlines()[-1][:120]))
            continue
        cp = copies.get(tuple(r["shape"]))
        print("%-17s %-13s %-5s %-5s %4s %9.2f %9s %9s %8s %8s" % (
            r["kernel"], shape, r["fuse_reductions"], r["keep_rows"], r["num_threads"] or "-",
            r["metile_TBps"],
            "%.2f" % r["triton_TBps"] if "triton_TBps" in r else "-",
            "%.2f" % cp if cp else "-",
            "%.2fx" % r["metile_over_triton"] if "metile_over_triton" in r else "-",
            "%.0f%%" % (100 * r["of_copy"]) if "of_copy" in r else "-"))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": args.device, "rows": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
