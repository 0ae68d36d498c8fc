"""MXFP4 x bf16 GEMM at prefill sizes (examples/python/mxfp4_gemm.py) against torch's bf16 GEMM
(cuBLAS, on the same weights decoded to a dense bf16 matrix) and Triton's `tl.dot_scaled` on the
same MXFP4 bytes where Triton imports, in one run on one GPU (issue 35).

    python3 bench/mxfp4_gemm.py [--device cuda] [--out FILE.jsonl] [--quick]
                                [--shapes MxNxK,...] [--configs BMxBNxBKxTHREADS,...]

Shapes (M x N x K; W is [N, K]): M = 512, 2048, 8192 tokens against 4096x4096 and 14336x4096
weights. Each row: metile's mxfp4_gemm (its default tiles), torch `x @ W_bf16.T`, Triton's
dot_scaled kernel written below (bf16 lhs, e2m1 rhs with E8M0 scales, one [BLOCK_M, BLOCK_N]
tile a program). TFLOP/s = 2 M N K / time; vs_torch / vs_triton = peer time / metile time (> 1:
metile faster). Every result is checked against float64 on the GPU (max |error| / sum |x w|).
--configs also times metile at other tiles and thread counts, each checked the same way, in the
row's "configs" (config -> TFLOP/s and error), next to the default's numbers.
Time per call = median over 5 repeats of (calls back-to-back, then synchronize) / calls. The
bench is for cuda: elsewhere it says so and exits 0, unless --quick (a smoke run on one small
shape, on any device, metile only).
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
import mxfp4_gemm as MX  # noqa: E402
from gemv import make, values  # noqa: E402

SHAPES = [(m, n, 4096) for m in (512, 2048, 8192) for n in (4096, 14336)]
QUICK_SHAPES = [(40, 48, 128)]


def triton_gemm():
    """A Triton MXFP4 x bf16 GEMM through tl.dot_scaled, or None where Triton does not import."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(X, Wq, Ws, Y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, K, BK):
            kk = k + tl.arange(0, BK)
            x = tl.load(X + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M), other=0.0)
            kb = k // 2 + tl.arange(0, BK // 2)
            w = tl.load(Wq + rn[None, :] * (K // 2) + kb[:, None], mask=rn[None, :] < N,
                        other=0)
            ks = k // 32 + tl.arange(0, BK // 32)
            s = tl.load(Ws + rn[:, None] * (K // 32) + ks[None, :], mask=rn[:, None] < N,
                        other=127)
            acc = tl.dot_scaled(x, None, "bf16", w, s, "e2m1", acc)
        tl.store(Y + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(x, wq, ws, y, m, n, k, bm=128, bn=128, bk=128):
        kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](x, wq, ws, y, m, n, k, BM=bm, BN=bn,
                                                          BK=bk)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="append the rows here as JSON lines")
    ap.add_argument("--quick", action="store_true", help="one small shape (a smoke run)")
    ap.add_argument("--shapes", default=None, help="MxNxK,... instead of the six shapes")
    ap.add_argument("--configs", default=None,
                    help="BMxBNxBKxTHREADS,... metile configurations timed besides the default")
    args = ap.parse_args()
    if args.device not in metile.devices() or (args.device != "cuda" and not args.quick):
        print(f"bench/mxfp4_gemm.py: skipped: it measures cuda (device {args.device!r} given; "
              f"available: {', '.join(metile.devices())}); --quick runs a smoke test anywhere")
        return 0
    metile.set_device(args.device)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")] \
        if args.configs else []
    torch = None
    if args.device == "cuda":
        try:
            import torch
            if not torch.cuda.is_available():
                torch = None
        except ImportError:
            torch = None
    tri = triton_gemm() if torch is not None else None
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
                "architecture": metile.get_device().architecture, "torch": torch.__version__,
                "triton": getattr(sys.modules.get("triton"), "__version__", None)})
    rng = np.random.default_rng(0)
    msync = metile.synchronize
    for (m, n, k) in shapes:
        r = {"kernel": "mxfp4_gemm", "M": m, "N": n, "K": k}
        try:
            (wq, ws), w64 = MX.quantized(n, k, rng)
            x, x64 = make(rng.standard_normal((m, k)), "bf16")
            y = MX.mxfp4_gemm(x, wq, ws)
            msync()
            if torch is not None:
                dev = "cuda"
                tw = torch.from_numpy(w64).to(dev)
                tx64 = torch.from_numpy(x64).to(dev)
                ref, scale = tx64 @ tw.T, tx64.abs() @ tw.abs().T
                ty = torch.from_numpy(values(y)).to(dev)
                r["max_rel_err"] = float(((ty - ref).abs() / scale).max())
            else:
                r["max_rel_err"] = float((np.abs(values(y) - x64 @ w64.T) /
                                          (np.abs(x64) @ np.abs(w64).T)).max())
            calls = 2 if args.quick else max(5, min(200, int(2e13 // (2 * m * n * k))))
            t = time_per_call(lambda: MX.mxfp4_gemm(x, wq, ws, out=y), msync, calls)
            r.update(metile_us=t * 1e6, metile_TFLOPs=2 * m * n * k / t / 1e12)
            for c in configs:
                name = "x".join(map(str, c))
                kw = dict(block_m=c[0], block_n=c[1], block_k=c[2], num_threads=c[3])
                try:
                    yc = MX.mxfp4_gemm(x, wq, ws, **kw)
                    msync()
                    tc = time_per_call(lambda: MX.mxfp4_gemm(x, wq, ws, out=yc, **kw), msync,
                                       calls)
                    got = values(yc)
                    err = (np.abs(got - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max() \
                        if torch is None else float(((torch.from_numpy(got).to("cuda") - ref)
                                                     .abs() / scale).max())
                    r.setdefault("configs", {})[name] = {
                        "us": tc * 1e6, "TFLOPs": 2 * m * n * k / tc / 1e12,
                        "max_rel_err": float(err)}
                except Exception as e:  # noqa: BLE001
                    r.setdefault("configs", {})[name] = {"error": "".join(
                        traceback.format_exception_only(type(e), e)).strip()[-300:]}
            if torch is not None:
                txb = tx64.to(torch.bfloat16)
                twb = tw.to(torch.bfloat16)
                tt = time_per_call(lambda: txb @ twb.T, torch.cuda.synchronize, calls)
                r.update(torch_us=tt * 1e6, torch_TFLOPs=2 * m * n * k / tt / 1e12,
                         vs_torch=tt / t)
                if tri is not None:
                    try:
                        dq = torch.from_numpy(wq.numpy()).to(dev)
                        ds = torch.from_numpy(ws.numpy()).to(dev)
                        dy = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
                        tri(txb, dq, ds, dy, m, n, k)
                        torch.cuda.synchronize()
                        r["triton_max_rel_err"] = float(((dy.double() - ref).abs() /
                                                         scale).max())
                        t3 = time_per_call(lambda: tri(txb, dq, ds, dy, m, n, k),
                                           torch.cuda.synchronize, calls)
                        r.update(triton_us=t3 * 1e6, triton_TFLOPs=2 * m * n * k / t3 / 1e12,
                                 vs_triton=t3 / t)
                    except Exception as e:  # noqa: BLE001
                        r["triton_error"] = "".join(
                            traceback.format_exception_only(type(e), e)).strip()[-300:]
        except Exception as e:  # noqa: BLE001
            r["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()
        record(r)
    print("\nwhole run: %.1f s" % (time.perf_counter() - started))
    print("%-18s %9s %8s %8s %8s %9s %9s %9s" % ("M x N x K", "us", "TFLOP/s", "torch",
                                              "triton", "vs torch", "vs triton", "rel err"))
    for r in rows:
        if r["kernel"] != "mxfp4_gemm":
            continue
        shape = "%dx%dx%d" % (r["M"], r["N"], r["K"])
        if "error" in r:
            print("%-18s FAILED: %s" % (shape, r["error"].splitlines()[-1][:100]))
            continue
        print("%-18s %9.1f %8.1f %8s %8s %9s %9s %9.1e" % (
            shape, r["metile_us"], r["metile_TFLOPs"],
            "%.1f" % r["torch_TFLOPs"] if "torch_TFLOPs" in r else "-",
            "%.1f" % r["triton_TFLOPs"] if "triton_TFLOPs" in r else "-",
            "%.2fx" % r["vs_torch"] if "vs_torch" in r else "-",
            "%.2fx" % r["vs_triton"] if "vs_triton" in r else "-", r["max_rel_err"]))
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
