"""Decode attention (examples/python/decode_attention.py) over splits x BLOCK_N x num_warps:
GB/s of the KV cache read, max error against float64, registers per thread, threads; on cuda
torch's copy of a tensor of the cache's size in the same run. One JSON line per configuration.
DUMP=DIR writes each configuration's CUDA/MSL/C++ source and GPU IR there.

    python3 bench/decode_sweep.py [--device cuda] [--seq 32768] [--kv-heads 8] [--warps 1,2,4,8]"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
import decode_attention as D  # noqa: E402
import metile  # noqa: E402


def per_call(fn, reps=20):
    fn()
    metile.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        metile.synchronize()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32768)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--splits", default="16,32,64,128")
    ap.add_argument("--block-n", default="16,32,64")
    ap.add_argument("--warps", default="1,2,4,8")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--grouped", action="store_true",
                    help="decode_attention_grouped: one program per KV head and its query heads")
    ap.add_argument("--planned", action="store_true",
                    help="only decode() with the launch plan() picks (what a caller gets)")
    a = ap.parse_args()
    metile.set_device(a.device)
    b, h, kvh, seq, dim = a.batch, a.heads, a.kv_heads, a.seq, a.dim
    rng = np.random.default_rng(1)
    q = rng.standard_normal((b, h, dim), dtype=np.float32).astype(np.float16)
    k, v = ((rng.standard_normal((b, kvh, seq, dim), dtype=np.float32) * 0.5).astype(np.float16)
            for _ in range(2))
    bufs = []
    for x in (q, k, v):
        buf = metile.Buffer.zeros(x.shape, "f16")
        buf.numpy()[...] = x
        bufs.append(buf)
    mq, mk, mv = bufs
    mo = metile.Buffer.zeros((b, h, dim), "f16")
    cache = 2 * k.nbytes
    ref = D.reference(q, k, v)
    copy = None
    try:
        if a.device != "cuda":
            raise RuntimeError("the copy reference is measured on cuda only")
        import torch
        src = torch.empty(cache // 2, dtype=torch.float16, device="cuda")
        dst = torch.empty_like(src)
        fn = lambda: dst.copy_(src)  # noqa: E731
        fn(); torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        copy = 2 * cache / ((time.perf_counter() - t0) / 20) / 1e9
    except Exception as e:  # noqa: BLE001
        print("no torch copy:", e, file=sys.stderr)
    print(json.dumps({"shape": [b, h, kvh, seq, dim], "cache_bytes": cache, "copy_gbs": copy}))
    if a.planned:
        grouped, splits, bn = D.plan(b, h, kvh, seq)
        scratch = D.workspace(b, h, dim, splits)
        run = lambda: D.decode(mq, mk, mv, mo, scratch=scratch)  # noqa: E731
        mo.numpy()[...] = np.nan
        run()
        metile.synchronize()
        err = float(np.abs(mo.numpy().astype(np.float64) - ref).max())
        t = per_call(run)
        row = {"planned": True, "grouped": grouped, "splits": splits, "block_n": bn, "err": err,
               "ms": t * 1e3, "gbs": cache / t / 1e9}
        if copy:
            row["of_copy"] = row["gbs"] / copy
        print(json.dumps(row), flush=True)
        return 0
    scale = D.LOG2E / math.sqrt(dim)
    for splits in map(int, a.splits.split(",")):
        for bn in map(int, a.block_n.split(",")):
            for w in map(int, a.warps.split(",")):
                sp, chunk = D.split_plan(seq, splits, bn)
                acc, m, s = D.workspace(b, h, dim, sp)
                row = {"splits": sp, "block_n": bn, "num_warps": w}
                try:
                    def run():
                        if a.grouped:
                            D.decode_attention_grouped[(b * kvh, sp)](
                                mq, mk, mv, acc, m, s, seq, chunk, scale, HEADS=h, KV_HEADS=kvh,
                                HEAD_DIM=dim, BLOCK_N=bn, GROUP_P2=D.group_rows(h, kvh), num_warps=w)
                        else:
                            D.decode_attention_partial[(b * h, sp)](
                                mq, mk, mv, mo, acc, m, s, seq, chunk, scale, HEADS=h, KV_HEADS=kvh,
                                HEAD_DIM=dim, BLOCK_N=bn, SPLIT=sp > 1, num_warps=w)
                        if sp > 1 or a.grouped:
                            D.decode_attention_merge[(b * h,)](acc, m, s, mo, sp, HEAD_DIM=dim,
                                                               SPLITS_P2=metile.next_power_of_2(sp))
                    mo.numpy()[...] = np.nan
                    run()
                    metile.synchronize()
                    err = float(np.abs(mo.numpy().astype(np.float64) - ref).max())
                    t = per_call(run)
                    kern = D.decode_attention_grouped if a.grouped else D.decode_attention_partial
                    spec = list(kern._programs.values())[-1]
                    ck = list(spec.kernels.values())[-1]
                    row.update(err=err, ms=t * 1e3, gbs=cache / t / 1e9, **{
                        k2: ck.info[k2] for k2 in ("registers_per_thread", "threads_per_group",
                                                   "threadgroup_memory_bytes")})
                    if copy:
                        row["of_copy"] = row["gbs"] / copy
                    if os.environ.get("DUMP"):
                        os.makedirs(os.environ["DUMP"], exist_ok=True)
                        base = os.path.join(os.environ["DUMP"], f"s{sp}_bn{bn}_w{w}")
                        code = {"cuda": "cuda", "metal": "msl", "metal-sim": "msl"}.get(a.device, "cpp")
                        for stage, ext in ((code, code), ("tile_ir_opt", "tile")):
                            with open(f"{base}.{ext}", "w") as f:
                                f.write(ck.source(stage))
                except Exception as e:  # noqa: BLE001
                    row["error"] = str(e).splitlines()[0][:200]
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
