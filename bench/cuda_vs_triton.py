"""metile on the cuda device against Triton and torch, in one run on one GPU.

    python3 bench/cuda_vs_triton.py [--quick] [--out FILE]

Bandwidth kernels (f32): vector add over 2^28 elements, softmax and layernorm over 16384 x 4096
rows, each written the way a Triton user writes it (one program per BLOCK elements / per row).
Time per call = median over repeats of (N back-to-back calls, then a device synchronize) / N,
after warm-up; the same host-timed method for all three frameworks, so launch gaps count
alike. TB/s counts the bytes each kernel must move (inputs read once, outputs written once).

Launch overhead (an empty-ish kernel, one program): Python `kernel[grid](...)`, a prepared
launch, and Triton's launch, timed the same way. The C API and raw cuLaunchKernel numbers come
from bench/cuda_launch_bench (Google Benchmark). Compile: NVRTC cold compile vs a warm disk
cache in a fresh process.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python", "tests"))
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402
from kernels import vector_add as add  # noqa: E402  (the tests' copy)


# ---- metile kernels -------------------------------------------------------------------------

@metile.kernel
def softmax(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    cols = metile.arange(0, BLOCK)
    mask = cols < N
    x = metile.load(X + row * N + cols, mask=mask, other=-float("inf"))
    e = metile.exp(x - metile.max(x))
    metile.store(Out + row * N + cols, e / metile.sum(e), mask=mask)


@metile.kernel
def layernorm(X, W, B, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    cols = metile.arange(0, BLOCK)
    mask = cols < N
    x = metile.load(X + row * N + cols, mask=mask)
    mean = metile.sum(x) / N
    d = metile.where(mask, x - mean, 0.0)
    inv_std = 1.0 / metile.sqrt(metile.sum(d * d) / N + 1e-5)
    w = metile.load(W + cols, mask=mask)
    b = metile.load(B + cols, mask=mask)
    metile.store(Out + row * N + cols, d * inv_std * w + b, mask=mask)


@metile.kernel
def tiny(X, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    metile.store(X + offs, 1.0, mask=offs < N)


# ---- timing ---------------------------------------------------------------------------------

def sweep(rng, n_add, rows, cols, calls):
    """TB/s of each metile kernel for several threadgroup sizes (the compile option)."""
    x = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
    y = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
    o = metile.Buffer.zeros((n_add,))
    xs = metile.Buffer(data=rng.standard_normal((rows, cols), dtype=np.float32))
    os_ = metile.Buffer.zeros((rows, cols))
    w = metile.Buffer(data=rng.standard_normal(cols, dtype=np.float32))
    b = metile.Buffer(data=rng.standard_normal(cols, dtype=np.float32))
    for threads in (128, 256, 512, 1024):
        for block in (2048, 4096, 8192):
            la = add[(metile.cdiv(n_add, block),)]
            t = time_per_call(lambda: la(x, y, o, n_add, BLOCK=block, num_threads=threads), metile.synchronize, calls)
            print("sweep add block=%d threads=%d: %.2f TB/s" % (block, threads, 12 * n_add / t / 1e12), flush=True)
        sm, ln = softmax[(rows,)], layernorm[(rows,)]
        t = time_per_call(lambda: sm(xs, os_, cols, BLOCK=cols, num_threads=threads), metile.synchronize, calls)
        print("sweep softmax threads=%d: %.2f TB/s" % (threads, 8 * rows * cols / t / 1e12), flush=True)
        t = time_per_call(lambda: ln(xs, w, b, os_, cols, BLOCK=cols, num_threads=threads), metile.synchronize, calls)
        print("sweep layernorm threads=%d: %.2f TB/s" % (threads, 8 * rows * cols / t / 1e12), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--sweep", action="store_true",
                    help="only time metile's kernels over num_threads choices")
    ap.add_argument("--first-launch", action="store_true",
                    help="print the ms of this process's first launch of a small kernel")
    args = ap.parse_args()
    metile.set_device(args.device)
    if args.first_launch:
        buf = metile.Buffer.zeros((64,))
        t0 = time.perf_counter()
        tiny[(1,)](buf, 64, BLOCK=64)
        metile.synchronize()
        print((time.perf_counter() - t0) * 1e3)
        return
    msync = metile.synchronize
    n_add = 1 << (20 if args.quick else 28)
    rows, cols = (256, 4096) if args.quick else (16384, 4096)
    calls = 3 if args.quick else 20
    results = {"device": args.device, "rows": []}

    try:
        import torch
        import triton
        import triton.language as tl
        have_peers = torch.cuda.is_available()
    except ImportError:
        have_peers = False
    if have_peers:
        results["gpu"] = torch.cuda.get_device_name()
        tsync = torch.cuda.synchronize

        @triton.jit
        def t_add(X, Y, O, N, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < N
            tl.store(O + offs, tl.load(X + offs, mask=m) + tl.load(Y + offs, mask=m), mask=m)

        @triton.jit
        def t_softmax(X, O, N, BLOCK: tl.constexpr):
            row = tl.program_id(0)
            c = tl.arange(0, BLOCK)
            m = c < N
            x = tl.load(X + row * N + c, mask=m, other=-float("inf"))
            e = tl.exp(x - tl.max(x, 0))
            tl.store(O + row * N + c, e / tl.sum(e, 0), mask=m)

        @triton.jit
        def t_layernorm(X, W, B, O, N, BLOCK: tl.constexpr):
            row = tl.program_id(0)
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
        def t_tiny(X, N, BLOCK: tl.constexpr):
            o = tl.arange(0, BLOCK)
            tl.store(X + o, 1.0, mask=o < N)

    rng = np.random.default_rng(0)
    if args.sweep:
        sweep(rng, n_add, rows, cols, calls)
        return

    def row(name, bytes_moved, t_metile, t_triton=None, t_torch=None):
        r = {"kernel": name, "metile_ms": t_metile * 1e3, "metile_TBps": bytes_moved / t_metile / 1e12}
        if t_triton:
            r.update(triton_ms=t_triton * 1e3, triton_TBps=bytes_moved / t_triton / 1e12,
                     metile_over_triton=t_triton / t_metile)
        if t_torch:
            r.update(torch_ms=t_torch * 1e3, torch_TBps=bytes_moved / t_torch / 1e12,
                     metile_over_torch=t_torch / t_metile)
        results["rows"].append(r)
        print(json.dumps(r), flush=True)

    # vector add
    x = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
    y = metile.Buffer(data=rng.standard_normal(n_add, dtype=np.float32))
    o = metile.Buffer.zeros((n_add,))
    block = 4096
    launch = add[(metile.cdiv(n_add, block),)]
    t_m = time_per_call(lambda: launch(x, y, o, n_add, BLOCK=block), msync, calls)
    assert np.allclose(o.numpy(), x.numpy() + y.numpy())
    t_t = t_p = None
    if have_peers:
        tx, ty = torch.from_numpy(x.numpy()).cuda(), torch.from_numpy(y.numpy()).cuda()
        to = torch.empty_like(tx)
        t_t = time_per_call(lambda: t_add[(triton.cdiv(n_add, 4096),)](tx, ty, to, n_add, BLOCK=4096), tsync, calls)
        t_p = time_per_call(lambda: torch.add(tx, ty, out=to), tsync, calls)
    row("vector_add 2^%d f32" % (n_add.bit_length() - 1), 3 * 4 * n_add, t_m, t_t, t_p)

    # softmax
    xs = metile.Buffer(data=rng.standard_normal((rows, cols), dtype=np.float32))
    os_ = metile.Buffer.zeros((rows, cols))
    sm = softmax[(rows,)]
    t_m = time_per_call(lambda: sm(xs, os_, cols, BLOCK=cols), msync, calls)
    ref = np.exp(xs.numpy() - xs.numpy().max(1, keepdims=True))
    assert np.allclose(os_.numpy(), ref / ref.sum(1, keepdims=True), rtol=1e-4, atol=1e-6)
    t_t = t_p = None
    if have_peers:
        tx = torch.from_numpy(xs.numpy()).cuda()
        to = torch.empty_like(tx)
        t_t = time_per_call(lambda: t_softmax[(rows,)](tx, to, cols, BLOCK=cols), tsync, calls)
        t_p = time_per_call(lambda: torch.softmax(tx, 1), tsync, calls)
    row("softmax %dx%d f32" % (rows, cols), 2 * 4 * rows * cols, t_m, t_t, t_p)

    # layernorm
    w = metile.Buffer(data=rng.standard_normal(cols, dtype=np.float32))
    b = metile.Buffer(data=rng.standard_normal(cols, dtype=np.float32))
    ln = layernorm[(rows,)]
    t_m = time_per_call(lambda: ln(xs, w, b, os_, cols, BLOCK=cols), msync, calls)
    xv = xs.numpy().astype(np.float64)
    ref = (xv - xv.mean(1, keepdims=True)) / np.sqrt(xv.var(1, keepdims=True) + 1e-5) * w.numpy() + b.numpy()
    assert np.allclose(os_.numpy(), ref, rtol=1e-3, atol=1e-3)
    t_t = t_p = None
    if have_peers:
        tw, tb = torch.from_numpy(w.numpy()).cuda(), torch.from_numpy(b.numpy()).cuda()
        t_t = time_per_call(lambda: t_layernorm[(rows,)](tx, tw, tb, to, cols, BLOCK=cols), tsync, calls)
        t_p = time_per_call(lambda: torch.nn.functional.layer_norm(tx, (cols,), tw, tb, 1e-5), tsync, calls)
    row("layernorm %dx%d f32" % (rows, cols), 2 * 4 * rows * cols, t_m, t_t, t_p)

    # launch overhead (per call, host-timed, GPU drained at the end)
    buf = metile.Buffer.zeros((64,))
    launcher = tiny[(1,)]
    n = 200 if args.quick else 20000
    lat = {"python kernel[grid]": time_per_call(lambda: launcher(buf, 64, BLOCK=64), msync, n)}
    prepared = launcher.prepare(buf, 64, BLOCK=64)
    lat["python prepared"] = time_per_call(prepared, msync, n)
    if have_peers:
        tbuf = torch.zeros(64, device="cuda")
        lat["triton kernel[grid]"] = time_per_call(lambda: t_tiny[(1,)](tbuf, 64, BLOCK=64), tsync, n)
    for k, v in lat.items():
        print(json.dumps({"launch": k, "us": v * 1e6}), flush=True)
    results["launch_us"] = {k: v * 1e6 for k, v in lat.items()}

    # NVRTC cold compile vs warm disk cache, each in a fresh process
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, METILE_CACHE_DIR=cache)
        cmd = [sys.executable, os.path.abspath(__file__), "--device", args.device, "--first-launch"]
        cold = float(subprocess.check_output(cmd, env=env).split()[-1])
        warm = float(subprocess.check_output(cmd, env=env).split()[-1])
    results["first_launch_ms"] = {"cold (trace + compile + load)": cold,
                                  "warm (trace + disk cache + load)": warm}
    print(json.dumps(results["first_launch_ms"]), flush=True)

    print("\n%-28s %10s %10s %10s %8s %8s" % ("kernel", "metile", "triton", "torch", "vs tri", "vs torch"))
    for r in results["rows"]:
        print("%-28s %8.2f TB/s %8s %8s %8s %8s" % (
            r["kernel"], r["metile_TBps"],
            "%.2f" % r["triton_TBps"] if "triton_TBps" in r else "-",
            "%.2f" % r["torch_TBps"] if "torch_TBps" in r else "-",
            "%.2fx" % r["metile_over_triton"] if "metile_over_triton" in r else "-",
            "%.2fx" % r["metile_over_torch"] if "metile_over_torch" in r else "-"))
    for k, v in results["launch_us"].items():
        print("launch %-24s %8.2f us" % (k, v))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
