"""Attention as metile users write it (examples/python/flash_attention.py, decode_attention.py)
against torch and Triton, in one run on one GPU (issue 20).

    python3 bench/attention_gpu.py [--quick] [--device cuda] [--out FILE] [--only flash,decode]
                                   [--configs BM,BN,THREADS;...] [--dims 64,128] [--dtypes f16,bf16]

flash   forward, batch 4 x 32 heads, seq 1024 / 4096 / 16384, causal and not, for each of --dims
        (head_dim, default 128) and --dtypes (f16, bf16; default f16).
        metile: the example kernel, the fastest of CONFIGS (BLOCK_M, BLOCK_N, num_threads) after
        a check against torch; torch: scaled_dot_product_attention on its flash backend; Triton:
        a fused-attention kernel with the tutorial's algorithm (online softmax in exp2, one
        program per BLOCK_M query rows of one head, causal loop bound), written here, autotuned.
        TFLOP/s = 4 * batch * heads * seq^2 * head_dim / time (half that when causal).
decode  one query per head against a 32768-token f16 KV cache, batch 4, 32 query heads over 8
        KV heads (GQA), head_dim 128, split-KV with the merge kernel (the best of SPLITS x BLOCK_NS);
        GB/s = the K and V cache bytes / time, against torch's copy of a tensor of that size
        (the HBM bandwidth this machine reaches).
Time per call = median over repeats of (calls back-to-back, then synchronize) / calls after a
warm-up, the same for every framework. Each row runs in its own try block: a failure prints
its error and the run goes on. Without torch (e.g. --quick --device cpu) only metile runs.
"""

import argparse
import json
import math
import os
import sys
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "python"))
import metile  # noqa: E402
from gpu_timing import time_per_call  # noqa: E402
from attention_bwd import metile_buffer, random_inputs  # noqa: E402
import decode_attention  # noqa: E402
import flash_attention  # noqa: E402

# BLOCK_M, BLOCK_N, threads. (128, 128, 256) is the warpgroup form's best at 16k tokens on an
# H100 (bench/results/attention_h100.md), (128, 64, 256) at 1k-4k.
CONFIGS = [(128, 128, 256), (128, 64, 256), (64, 64, 128), (64, 32, 128), (32, 32, 128)]
SPLITS = [8, 16, 32]
BLOCK_NS = [16, 32, 64]  # keys per K/V tile: smaller tiles hold fewer registers (decode)


def parse_configs(text):
    """"BM,BN,THREADS;..." -> [(BM, BN, THREADS), ...]"""
    return [tuple(int(x) for x in c.split(",")) for c in text.split(";") if c]


def metile_copy(x, dtype="f16"):
    """A metile buffer holding numpy array x (its own memory, moved to the GPU by the first launch)."""
    buf = metile.Buffer.zeros(x.shape, dtype)
    buf.numpy()[...] = x
    return buf


def triton_attention():
    import triton
    import triton.language as tl

    @triton.autotune(configs=[
        triton.Config({"BM": 128, "BN": 64}, num_stages=3, num_warps=8),
        triton.Config({"BM": 128, "BN": 128}, num_stages=3, num_warps=8),
        triton.Config({"BM": 64, "BN": 64}, num_stages=4, num_warps=4),
    ], key=["seq", "HEAD_DIM", "CAUSAL"])
    @triton.jit
    def attn(Q, K, V, O, seq, qk_scale_log2, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr):
        start_m = tl.program_id(0) * BM
        base = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
        rm = start_m + tl.arange(0, BM)
        rd = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + base + rm[:, None] * HEAD_DIM + rd[None, :], mask=rm[:, None] < seq, other=0.0)
        m_i = tl.full((BM,), float("-inf"), tl.float32)
        l_i = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, HEAD_DIM), tl.float32)
        if CAUSAL:
            hi = tl.minimum(start_m + BM, seq)
        else:
            hi = seq
        for start_n in range(0, hi, BN):
            rn = start_n + tl.arange(0, BN)
            kt = tl.load(K + base + rn[None, :] * HEAD_DIM + rd[:, None], mask=rn[None, :] < seq, other=0.0)
            s = tl.dot(q, kt) * qk_scale_log2
            keep = rn[None, :] < seq
            if CAUSAL:
                keep = keep & (rn[None, :] <= rm[:, None])
            s = tl.where(keep, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.math.exp2(m_i - m_new)
            p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + base + rn[:, None] * HEAD_DIM + rd[None, :], mask=rn[:, None] < seq, other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        out = acc / l_i[:, None]
        tl.store(O + base + rm[:, None] * HEAD_DIM + rd[None, :], out.to(O.dtype.element_ty),
                 mask=rm[:, None] < seq)

    def run(q, k, v, o, causal):
        bh, seq, dim = q.shape[0] * q.shape[1], q.shape[2], q.shape[3]
        grid = lambda meta: (triton.cdiv(seq, meta["BM"]), bh)  # noqa: E731
        attn[grid](q, k, v, o, seq, flash_attention.LOG2E / math.sqrt(dim), HEAD_DIM=dim,
                   CAUSAL=causal)
    return run


def bench_flash(args, torch, rows):
    tri = triton_attention() if torch is not None else None  # one kernel: autotuned per key
    for dim in (int(d) for d in args.dims.split(",")):
        for dtype in args.dtypes.split(","):
            bench_flash_shape(args, torch, tri, rows, dim, dtype)


def bench_flash_shape(args, torch, tri, rows, dim, dtype):
    batch, heads = (1, 2) if args.quick else (4, 32)
    seqs = [100, 256] if args.quick else [1024, 4096, 16384]
    rng = np.random.default_rng(0)
    for seq in seqs:
        x = random_inputs(rng, (batch, heads, seq, dim), dtype)[:3]  # float32 holding dtype's values
        mq, mk, mv = (metile_buffer(a.reshape(batch * heads, seq, dim), dtype) for a in x)
        mo = metile.Buffer.zeros((batch * heads, seq, dim), dtype)
        mlse = metile.Buffer.zeros((batch * heads, seq), "f32")
        if torch is not None:
            tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
            tq, tk, tv = (torch.from_numpy(a).cuda().to(tdt) for a in x)  # exact: a holds tdt's values
            to = torch.empty_like(tq)
        for causal in (False, True):
            flops = 4.0 * batch * heads * seq * seq * dim / (2 if causal else 1)
            calls = max(1, min(20, int(5e12 / flops)))
            row = {"kernel": "flash", "seq": seq, "causal": causal, "dtype": dtype,
                   "shape": [batch, heads, seq, dim]}
            try:
                if torch is not None:
                    from torch.nn.attention import SDPBackend, sdpa_kernel
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        f = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                            tq, tk, tv, is_causal=causal)
                        ref = f().float()
                        row["torch_tflops"] = flops / time_per_call(f, torch.cuda.synchronize, calls) / 1e12
                    tri(tq, tk, tv, to, causal)
                    row["triton_err"] = float((to.float() - ref).abs().max())
                    row["triton_tflops"] = flops / time_per_call(
                        lambda: tri(tq, tk, tv, to, causal), torch.cuda.synchronize, calls) / 1e12
                    ref_np = ref.cpu().numpy()
                else:
                    ref_np = flash_attention.reference(*(a.reshape(batch * heads, seq, dim) for a in x), causal)
                best = None
                configs = parse_configs(args.configs) if args.configs else CONFIGS
                for bm, bn, threads in configs[:2] if args.quick else configs:
                    def run(bm=bm, bn=bn, threads=threads):
                        flash_attention.flash_attention_fwd[(metile.cdiv(seq, bm), batch * heads)](
                            mq, mk, mv, mo, mlse, seq, flash_attention.LOG2E / math.sqrt(dim),
                            HEAD_DIM=dim, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, num_threads=threads)
                    try:
                        mo.numpy()[...] = np.nan if dtype == "f16" else 0x7FC0  # bf16: NaN as bits
                        run()
                        metile.synchronize()
                    except metile.MetileError as e:
                        print("skip", (bm, bn, threads), str(e).splitlines()[0], flush=True)
                        continue
                    got = mo.numpy()
                    got = (got.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16" else got.astype(np.float32)
                    err = float(np.abs(got.reshape(ref_np.shape) - ref_np).max())
                    if not err < (2e-2 if dtype == "f16" else 6e-2):
                        print("WRONG", row, (bm, bn, threads), "max err", err, flush=True)
                        continue
                    t = time_per_call(run, metile.synchronize, calls, 3)
                    if best is None or t < best[0]:
                        best = (t, (bm, bn, threads), err)
                if best is not None:
                    row.update(metile_tflops=flops / best[0] / 1e12, metile_config=best[1],
                               metile_err=best[2])
            except Exception:
                traceback.print_exc()
            print(json.dumps(row), flush=True)
            rows.append(row)


def bench_decode(args, torch, rows):
    batch, heads, kv_heads, seq, dim = (1, 4, 2, 3000, 64) if args.quick else (4, 32, 8, 32768, 128)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((batch, heads, dim), dtype=np.float32).astype(np.float16)
    k, v = ((rng.standard_normal((batch, kv_heads, seq, dim), dtype=np.float32) * 0.5).astype(np.float16)
            for _ in range(2))
    mq, mk, mv = metile_copy(q), metile_copy(k), metile_copy(v)
    mo = metile.Buffer.zeros((batch, heads, dim), "f16")
    cache_bytes = 2 * k.nbytes
    row = {"kernel": "decode", "shape": [batch, heads, kv_heads, seq, dim], "cache_bytes": cache_bytes}
    try:
        ref = decode_attention.reference(q, k, v)
        if torch is not None:
            src = torch.empty(cache_bytes // 2, dtype=torch.float16, device="cuda")
            dst = torch.empty_like(src)
            t = time_per_call(lambda: dst.copy_(src), torch.cuda.synchronize, 20)
            row["copy_gbs"] = 2 * cache_bytes / t / 1e9   # a copy reads and writes
        best = None
        configs = ((g, s, bn) for g in (False, True) for s in SPLITS for bn in BLOCK_NS)
        for grouped, splits, block_n in configs:
            scratch = decode_attention.workspace(batch, heads, dim, splits)
            run = lambda splits=splits, bn=block_n, w=scratch, g=grouped: decode_attention.decode(  # noqa: E731
                mq, mk, mv, mo, splits, bn, scratch=w, grouped=g)
            mo.numpy()[...] = np.nan
            run()
            metile.synchronize()
            err = float(np.abs(mo.numpy().astype(np.float64) - ref).max())
            if not err < 1e-2:
                print("WRONG decode splits", splits, "block_n", block_n, "grouped", grouped,
                      "max err", err, flush=True)
                continue
            t = time_per_call(run, metile.synchronize, 10, 3)
            if best is None or t < best[0]:
                best = (t, splits, err, block_n, grouped)
        if best is not None:
            row.update(metile_gbs=cache_bytes / best[0] / 1e9, metile_splits=best[1], metile_err=best[2],
                       metile_block_n=best[3], metile_grouped=best[4])
    except Exception:
        traceback.print_exc()
    print(json.dumps(row), flush=True)
    rows.append(row)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="flash,decode")
    ap.add_argument("--configs", default=None, help="BM,BN,THREADS;... (default: CONFIGS)")
    ap.add_argument("--dims", default="128", help="flash head_dims, comma list")
    ap.add_argument("--dtypes", default="f16", help="flash dtypes: f16, bf16")
    args = ap.parse_args()
    metile.set_device(args.device)
    try:
        import torch
        gpu = torch.cuda.get_device_name()
    except Exception:  # a smoke run without torch or a GPU
        torch, gpu = None, metile.get_device().name
    rows = []
    if "flash" in args.only:
        bench_flash(args, torch, rows)
    if "decode" in args.only:
        bench_decode(args, torch, rows)
    print(f"\n{gpu}, metile on {metile.get_device().name}")
    nan = float("nan")
    print("%-7s %-22s %7s %7s %7s %8s %8s  %s" % ("kernel", "shape", "metile", "torch", "triton",
                                                  "vs torch", "vs tri", "config"))
    for r in rows:
        if r["kernel"] == "flash":
            m, t, tr = (r.get(k, nan) for k in ("metile_tflops", "torch_tflops", "triton_tflops"))
            print("%-7s %-22s %7.1f %7.1f %7.1f %7.2fx %7.2fx  %s  (TFLOP/s)" % (
                "flash", f"{r.get('dtype', 'f16')} d{r['shape'][3]} seq {r['seq']}{' causal' if r['causal'] else ''}",
                m, t, tr, m / t, m / tr,
                r.get("metile_config")))
        else:
            m, c = r.get("metile_gbs", nan), r.get("copy_gbs", nan)
            print("%-7s %-22s %7.0f %7s %7s %7.2fx %8s  (splits, block_n) %s  (GB/s; vs torch = of copy BW)" % (
                "decode", f"cache {r['shape'][3]}", m, "-", "-", m / c, "-", (r.get("metile_splits"), r.get("metile_block_n"))))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": gpu, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
