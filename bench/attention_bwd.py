"""Flash attention backward as metile users write it (examples/python/flash_attention_bwd.py)
against a Triton backward with the algorithm of Triton's fused-attention tutorial, or torch
SDPA's backward where Triton is absent, in one run on one GPU (issue 34).

    python3 bench/attention_bwd.py [--device cuda] [--out FILE.jsonl] [--quick]
                                   [--dtypes f16,bf16] [--dims 64,128] [--seqs 1024,4096,16384]
                                   [--configs BLOCK,STEP,THREADS;...]

Shapes: batch 4 x 32 heads, head_dim 64 and 128, seq 1024 / 4096 / 16384, causal and not, f16
(--quick: 1 x 2 heads, seq 128 and 200, the float64 reference, no peers). Each row starts from
the same q, k, v, dO and the same forward output O and log-sum-exp (metile's forward kernel),
and times the backward alone:
  metile  the example's three kernels (preprocess, dkdv, dq). dkdv and dq are each timed alone
          at every CONFIGS entry (BLOCK rows per program, STEP rows per loop turn, num_threads),
          the fastest of each kept, then the three timed together at those.
  triton  written here with the tutorial's algorithm: a preprocess kernel for Delta, then one
          kernel whose program i computes dK and dV of keys [128 i, 128 i + 128) stepping 32
          queries at a time and dQ of queries [128 i, 128 i + 128) stepping 32 keys (causal:
          the diagonal block in half-size masked steps, the rest unmasked); autotuned over the
          tutorial's 4 warps x 5 stages and two more configurations. It needs seq % 128 == 0.
  torch   scaled_dot_product_attention's backward on its flash backend (autograd.grad of the
          output, the graph kept): the peer where Triton is absent, reported where present too.
TFLOP/s = 2.5 x the forward's 4 * batch * heads * seq^2 * head_dim (half that when causal), the
tutorial's count. Every result is checked against torch's gradients on the GPU (float64 numpy
in --quick): max |error| / max |reference| over dq, dk, dv. Time per call = median over repeats
of (calls back-to-back, then synchronize) / calls after a warm-up, the same for every framework
(bench/gpu_timing.py). One JSON line per row on stdout and in --out (appended); a table at the
end. Each row runs in its own try block: a failure prints its error and the run goes on.
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
import flash_attention as F  # noqa: E402
import flash_attention_bwd as B  # noqa: E402

# Each is two compiled kernels per (dtype, head_dim, causal): NVRTC takes seconds per kernel.
CONFIGS = [(128, 32, 128), (128, 64, 256), (64, 64, 128), (64, 32, 128)]
TOL = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-2}


def parse_configs(text):
    """"BLOCK,STEP,THREADS;..." -> [(BLOCK, STEP, THREADS), ...]"""
    return [tuple(int(x) for x in c.split(",")) for c in text.split(";") if c]


def triton_backward():
    """run(q, k, v, o, lse, do, dq, dk, dv, delta, causal) over torch tensors [bh, seq, dim];
    lse in base 2 as flash_attention.py writes it."""
    import triton
    import triton.language as tl

    @triton.jit
    def preprocess(O, dO, Delta, seq, HEAD_DIM: tl.constexpr, BM: tl.constexpr):
        bh = tl.program_id(1).to(tl.int64)
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        at = bh * seq * HEAD_DIM + rm[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
        o = tl.load(O + at).to(tl.float32)
        do = tl.load(dO + at).to(tl.float32)
        tl.store(Delta + bh * seq + rm, tl.sum(o * do, axis=1))

    @triton.jit
    def dkdv_steps(dk, dv, k, v, Q, dO, Lse, Delta, start_n, lo, hi, scale_log2,
                   HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, MASK: tl.constexpr):
        """dK, dV of keys [start_n, start_n + BN) over queries [lo, hi), BM at a time."""
        rn = start_n + tl.arange(0, BN)
        rd = tl.arange(0, HEAD_DIM)
        for start_m in range(lo, hi, BM):
            rm = start_m + tl.arange(0, BM)
            qt = tl.load(Q + rm[None, :] * HEAD_DIM + rd[:, None])          # [HEAD_DIM, BM]
            do = tl.load(dO + rm[:, None] * HEAD_DIM + rd[None, :])         # [BM, HEAD_DIM]
            lse = tl.load(Lse + rm)
            delta = tl.load(Delta + rm)
            pt = tl.math.exp2(tl.dot(k, qt) * scale_log2 - lse[None, :])    # P^T [BN, BM]
            if MASK:
                pt = tl.where(rm[None, :] >= rn[:, None], pt, 0.0)
            dv += tl.dot(pt.to(do.dtype), do)
            dst = pt * (tl.dot(v, tl.trans(do)) - delta[None, :])
            dk += tl.dot(dst.to(qt.dtype), tl.trans(qt))
        return dk, dv

    @triton.jit
    def dq_steps(dq, q, do, lse, delta, K, V, start_m, lo, hi, scale_log2,
                 HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, MASK: tl.constexpr):
        """dQ of queries [start_m, start_m + BM) over keys [lo, hi), BN at a time."""
        rm = start_m + tl.arange(0, BM)
        rd = tl.arange(0, HEAD_DIM)
        for start_n in range(lo, hi, BN):
            rn = start_n + tl.arange(0, BN)
            kt = tl.load(K + rn[None, :] * HEAD_DIM + rd[:, None])          # [HEAD_DIM, BN]
            vt = tl.load(V + rn[None, :] * HEAD_DIM + rd[:, None])
            p = tl.math.exp2(tl.dot(q, kt) * scale_log2 - lse[:, None])
            if MASK:
                p = tl.where(rm[:, None] >= rn[None, :], p, 0.0)
            ds = p * (tl.dot(do, vt) - delta[:, None])
            dq += tl.dot(ds.to(kt.dtype), tl.trans(kt))
        return dq

    @triton.autotune(configs=[
        triton.Config({"BM1": 32, "BN1": 128, "BM2": 128, "BN2": 32}, num_warps=4, num_stages=5),
        triton.Config({"BM1": 32, "BN1": 128, "BM2": 128, "BN2": 32}, num_warps=8, num_stages=3),
        triton.Config({"BM1": 64, "BN1": 128, "BM2": 128, "BN2": 64}, num_warps=8, num_stages=3),
    ], key=["seq", "HEAD_DIM", "CAUSAL"])
    @triton.jit
    def backward(Q, K, V, dO, Lse, Delta, dQ, dK, dV, seq, scale_log2, sm_scale,
                 HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BM1: tl.constexpr,
                 BN1: tl.constexpr, BM2: tl.constexpr, BN2: tl.constexpr):
        pid = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)
        off = bh * seq * HEAD_DIM                              # this (batch, head)'s matrices
        Q += off
        K += off
        V += off
        dO += off
        dQ += off
        dK += off
        dV += off
        Lse += bh * seq
        Delta += bh * seq
        rd = tl.arange(0, HEAD_DIM)

        start_n = pid * BN1                                    # dK, dV of these keys
        rn = start_n + tl.arange(0, BN1)
        k = tl.load(K + rn[:, None] * HEAD_DIM + rd[None, :])
        v = tl.load(V + rn[:, None] * HEAD_DIM + rd[None, :])
        dk = tl.zeros((BN1, HEAD_DIM), tl.float32)
        dv = tl.zeros((BN1, HEAD_DIM), tl.float32)
        if CAUSAL:
            dk, dv = dkdv_steps(dk, dv, k, v, Q, dO, Lse, Delta, start_n, start_n,
                                start_n + BN1, scale_log2, HEAD_DIM, BM1 // 2, BN1, True)
            dk, dv = dkdv_steps(dk, dv, k, v, Q, dO, Lse, Delta, start_n, start_n + BN1, seq,
                                scale_log2, HEAD_DIM, BM1, BN1, False)
        else:
            dk, dv = dkdv_steps(dk, dv, k, v, Q, dO, Lse, Delta, start_n, 0, seq, scale_log2,
                                HEAD_DIM, BM1, BN1, False)
        tl.store(dV + rn[:, None] * HEAD_DIM + rd[None, :], dv.to(dV.dtype.element_ty))
        tl.store(dK + rn[:, None] * HEAD_DIM + rd[None, :], (dk * sm_scale).to(dK.dtype.element_ty))

        start_m = pid * BM2                                    # dQ of these queries
        rm = start_m + tl.arange(0, BM2)
        q = tl.load(Q + rm[:, None] * HEAD_DIM + rd[None, :])
        do = tl.load(dO + rm[:, None] * HEAD_DIM + rd[None, :])
        lse = tl.load(Lse + rm)
        delta = tl.load(Delta + rm)
        dq = tl.zeros((BM2, HEAD_DIM), tl.float32)
        if CAUSAL:
            dq = dq_steps(dq, q, do, lse, delta, K, V, start_m, start_m, start_m + BM2,
                          scale_log2, HEAD_DIM, BM2, BN2 // 2, True)
            dq = dq_steps(dq, q, do, lse, delta, K, V, start_m, 0, start_m, scale_log2,
                          HEAD_DIM, BM2, BN2, False)
        else:
            dq = dq_steps(dq, q, do, lse, delta, K, V, start_m, 0, seq, scale_log2, HEAD_DIM,
                          BM2, BN2, False)
        tl.store(dQ + rm[:, None] * HEAD_DIM + rd[None, :], (dq * sm_scale).to(dQ.dtype.element_ty))

    def run(q, k, v, o, lse, do, dq, dk, dv, delta, causal):
        bh, seq, dim = q.shape
        if seq % 128:
            raise ValueError(f"the Triton backward needs seq % 128 == 0, got {seq}")
        preprocess[(seq // 128, bh)](o, do, delta, seq, HEAD_DIM=dim, BM=128)
        grid = lambda meta: (seq // meta["BN1"], bh)  # noqa: E731  (BN1 == BM2)
        backward[grid](q, k, v, do, lse, delta, dq, dk, dv, seq, F.LOG2E / math.sqrt(dim),
                       1.0 / math.sqrt(dim), HEAD_DIM=dim, CAUSAL=causal)
    return run


def random_inputs(rng, shape, dtype):
    """q, k, v, dO as float32 arrays holding values of `dtype` (bf16 rounded to nearest even)."""
    out = []
    for scale in (0.5, 0.5, 0.5, 1.0):
        x = (rng.standard_normal(shape, dtype=np.float32) * scale)
        if dtype == "bf16":
            b = x.view(np.uint32)
            x = (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
        elif dtype == "f16":
            x = x.astype(np.float16).astype(np.float32)
        out.append(x)
    return out


def metile_buffer(x, dtype):
    """A metile buffer of `dtype` holding the float32 array x (exact: x holds dtype's values)."""
    buf = metile.Buffer.zeros(x.shape, dtype)
    if dtype == "bf16":
        buf.numpy()[...] = (np.ascontiguousarray(x).view(np.uint32) >> 16).astype(np.uint16)
    else:
        buf.numpy()[...] = x
    return buf


def values(buf):
    a = buf.numpy()
    if buf.metile_dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def rel_err(got, ref):
    return max(float(np.abs(g - r).max() / max(np.abs(r).max(), 1e-6)) for g, r in zip(got, ref))


def bench_row(args, torch, tri, dtype, dim, seq, causal, configs):
    batch, heads = (1, 2) if args.quick else (4, 32)
    bh, shape = batch * heads, (batch * heads, seq, dim)
    flops = 2.5 * 4.0 * batch * heads * seq * seq * dim / (2 if causal else 1)
    calls = max(1, min(20, int(5e12 / flops)))
    row = {"kernel": "flash_bwd", "dtype": dtype, "head_dim": dim, "seq": seq, "causal": causal,
           "shape": [batch, heads, seq, dim], "flops": flops}
    rng = np.random.default_rng(seq * 3 + dim + causal)
    x = random_inputs(rng, shape, dtype)
    mq, mk, mv, mdo = (metile_buffer(a, dtype) for a in x)
    mo = metile.Buffer.zeros(shape, dtype)
    lse = F.attention(mq, mk, mv, mo, causal)
    delta = metile.Buffer.zeros((bh, seq), "f32")
    grads = [metile.Buffer.zeros(shape, dtype) for _ in range(3)]
    if torch is not None:
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        tq, tk, tv, tdo = (torch.from_numpy(a).cuda().to(tdt) for a in x)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            leaves = [t.detach().view(batch, heads, seq, dim).requires_grad_()
                      for t in (tq, tk, tv)]
            tout = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
            g4 = tdo.view(batch, heads, seq, dim)
            fn = lambda: torch.autograd.grad(tout, leaves, g4, retain_graph=True)  # noqa: E731
            ref = [g.float().reshape(shape).cpu().numpy() for g in fn()]
            row["torch_tflops"] = flops / time_per_call(fn, torch.cuda.synchronize, calls) / 1e12
    else:
        ref = [r.astype(np.float32) for r in B.reference(*x, causal)]
    sync = metile.synchronize
    if tri is not None:
        try:
            to = torch.from_numpy(values(mo)).cuda().to(tdt)
            tlse = torch.from_numpy(lse.numpy()).cuda()
            tdelta = torch.empty_like(tlse)
            tg = [torch.empty_like(tq) for _ in range(3)]
            run = lambda: tri(tq, tk, tv, to, tlse, tdo, *tg, tdelta, causal)  # noqa: E731
            run()
            row["triton_err"] = rel_err([g.float().cpu().numpy() for g in tg], ref)
            row["triton_tflops"] = flops / time_per_call(run, torch.cuda.synchronize, calls) / 1e12
        except Exception:
            traceback.print_exc()
    scale_log2, sm_scale = F.LOG2E / math.sqrt(dim), 1.0 / math.sqrt(dim)
    B.flash_attention_bwd_preprocess[(metile.cdiv(seq, 64), bh)](mo, mdo, delta, seq,
                                                                  HEAD_DIM=dim, BLOCK=64)
    sync()

    def dkdv(cfg):
        block, step, threads = cfg
        B.flash_attention_bwd_dkdv[(metile.cdiv(seq, block), bh)](
            mq, mk, mv, mdo, lse, delta, grads[1], grads[2], seq, scale_log2, sm_scale,
            HEAD_DIM=dim, BLOCK=block, STEP=step, CAUSAL=causal, num_threads=threads)

    def dq(cfg):
        block, step, threads = cfg
        B.flash_attention_bwd_dq[(metile.cdiv(seq, block), bh)](
            mq, mk, mv, mdo, lse, delta, grads[0], seq, scale_log2, sm_scale,
            HEAD_DIM=dim, BLOCK=block, STEP=step, CAUSAL=causal, num_threads=threads)

    best = {}
    for name, launch, which in (("dkdv", dkdv, (1, 2)), ("dq", dq, (0,))):
        for cfg in configs:
            try:
                for i in which:
                    grads[i].numpy()[...] = np.nan if dtype != "bf16" else 0x7FC0
                launch(cfg)
                sync()
            except metile.MetileError as e:
                print("skip", name, cfg, str(e).splitlines()[0], flush=True)
                continue
            err = rel_err([values(grads[i]) for i in which], [ref[i] for i in which])
            if not err < TOL[dtype]:
                print("WRONG", name, cfg, row, "error", err, flush=True)
                continue
            t = time_per_call(lambda cfg=cfg: launch(cfg), sync, calls, 3)
            if name not in best or t < best[name][0]:
                best[name] = (t, cfg)
    if len(best) == 2:
        def run():
            B.flash_attention_bwd_preprocess[(metile.cdiv(seq, 64), bh)](
                mo, mdo, delta, seq, HEAD_DIM=dim, BLOCK=64)
            dkdv(best["dkdv"][1])
            dq(best["dq"][1])
        for g in grads:
            g.numpy()[...] = np.nan if dtype != "bf16" else 0x7FC0
        run()
        sync()
        t = time_per_call(run, sync, calls, 3)
        row.update(metile_tflops=flops / t / 1e12,
                   metile_err=rel_err([values(g) for g in grads], ref),
                   metile_dkdv=list(best["dkdv"][1]), metile_dq=list(best["dq"][1]),
                   metile_ms={"all": t * 1e3, "dkdv": best["dkdv"][0] * 1e3,
                              "dq": best["dq"][0] * 1e3})
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="append the rows here as JSON lines")
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqs", default=None, help="default 1024,4096,16384 (--quick: 128,200)")
    ap.add_argument("--configs", default=None, help="BLOCK,STEP,THREADS;... (default: CONFIGS)")
    args = ap.parse_args()
    metile.set_device(args.device)
    torch = tri = None
    gpu = metile.get_device().name
    if not args.quick:
        try:
            import torch
            gpu = torch.cuda.get_device_name()
        except Exception:
            torch = None
        if torch is not None:
            try:
                tri = triton_backward()
            except ImportError:
                print("Triton is absent: torch SDPA's backward is the peer", flush=True)
    seqs = args.seqs or ("128,200" if args.quick else "1024,4096,16384")
    seqs = [int(s) for s in seqs.split(",")]
    configs = parse_configs(args.configs) if args.configs else (
        [(32, 16, 128), (16, 16, 128)] if args.quick else CONFIGS)
    out = open(args.out, "a") if args.out else None
    rows = []
    for dtype in args.dtypes.split(","):
        for dim in (int(d) for d in args.dims.split(",")):
            for seq in seqs:
                for causal in (False, True):
                    try:
                        row = bench_row(args, torch, tri, dtype, dim, seq, causal, configs)
                    except Exception as e:
                        traceback.print_exc()
                        row = {"kernel": "flash_bwd", "dtype": dtype, "head_dim": dim, "seq": seq,
                               "causal": causal,
                               "error": str(e).splitlines()[0] if str(e) else repr(e)}
                    row["gpu"] = gpu
                    line = json.dumps(row)
                    print(line, flush=True)
                    if out:
                        out.write(line + "\n")
                        out.flush()
                    rows.append(row)
    if out:
        out.close()
    nan = float("nan")
    print(f"\n{gpu}, metile on {metile.get_device().name}; backward TFLOP/s (2.5x forward FLOPs)")
    print("%-5s %4s %6s %-6s %7s %7s %7s %8s %8s  %s" % ("dtype", "dim", "seq", "", "metile",
                                                         "triton", "torch", "vs tri", "vs torch",
                                                         "dkdv / dq config"))
    for r in rows:
        m, tr, t = (r.get(k, nan) for k in ("metile_tflops", "triton_tflops", "torch_tflops"))
        print("%-5s %4d %6d %-6s %7.1f %7.1f %7.1f %7.2fx %7.2fx  %s / %s" % (
            r["dtype"], r["head_dim"], r["seq"], "causal" if r["causal"] else "", m, tr, t,
            m / tr, m / t, r.get("metile_dkdv"), r.get("metile_dq")))


if __name__ == "__main__":
    main()
