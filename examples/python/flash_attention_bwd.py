"""Flash attention, backward: dQ, dK and dV of softmax(Q K^T * scale) V from the forward's output
O and its rows' log-sum-exp (flash_attention.py writes both), FlashAttention-2's scheme: the
seq x seq probabilities are recomputed block by block and never stored.

Three kernels over [batch * heads, seq, HEAD_DIM] arrays (f32, f16 or bf16; f32 accumulation):
  preprocess  Delta = rowsum(dO * O), one f32 per query row ([batch * heads, seq]);
  dkdv        one program per BLOCK keys of one (batch, head) keeps its K and V tiles and walks
              the queries STEP rows at a time: P^T = exp2(K Q^T * qk_scale_log2 - Lse),
              dV += P^T dO, dS^T = P^T * (V dO^T - Delta), dK += dS^T Q;
  dq          one program per BLOCK queries walks the keys STEP rows at a time:
              dS = P * (dO V^T - Delta), dQ += dS K.
dQ and dK take the softmax scale at the end. Causal programs start (dkdv) or stop (dq) their loop
at the diagonal (a bound that depends on the program), so the blocks wholly above it are never
visited; the mask (causal, and rows past seq) is applied to each block visited. Any seq works:
rows past seq read zeros, take no part in any sum and are not stored.

Run: python3 examples/python/flash_attention_bwd.py [BATCH*HEADS SEQ HEAD_DIM] [--causal] [--f16]
"""

import math
import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile
from flash_attention import LOG2E, attention, check_args, dtype_name


@metile.kernel
def flash_attention_bwd_preprocess(Out, dOut, Delta, seq, HEAD_DIM: metile.constexpr,
                                   BLOCK: metile.constexpr):
    start = metile.program_id(0) * BLOCK
    bh = metile.program_id(1)
    base = bh * seq * HEAD_DIM
    o = metile.tile_load(Out + base, start, 0, HEAD_DIM, (BLOCK, HEAD_DIM), bounds=(seq, HEAD_DIM))
    do = metile.tile_load(dOut + base, start, 0, HEAD_DIM, (BLOCK, HEAD_DIM),
                          bounds=(seq, HEAD_DIM))
    rows = start + metile.arange(0, BLOCK)
    delta = metile.sum(o.to("f32") * do.to("f32"), axis=1)
    metile.store(Delta + bh * seq + rows, delta, mask=rows < seq)


@metile.kernel
def flash_attention_bwd_dkdv(Q, K, V, dOut, Lse, Delta, dK, dV, seq, qk_scale_log2, sm_scale,
                             HEAD_DIM: metile.constexpr, BLOCK: metile.constexpr,
                             STEP: metile.constexpr, CAUSAL: metile.constexpr):
    start_n = metile.program_id(0) * BLOCK          # this program's keys
    bh = metile.program_id(1)
    base = bh * seq * HEAD_DIM
    cols = start_n + metile.arange(0, BLOCK)
    k = metile.tile_load(K + base, start_n, 0, HEAD_DIM, (BLOCK, HEAD_DIM), bounds=(seq, HEAD_DIM))
    v = metile.tile_load(V + base, start_n, 0, HEAD_DIM, (BLOCK, HEAD_DIM), bounds=(seq, HEAD_DIM))
    dk = metile.zeros((BLOCK, HEAD_DIM), "f32")
    dv = metile.zeros((BLOCK, HEAD_DIM), "f32")
    # Causal: queries before the first whole STEP block that reaches start_n see none of these keys.
    begin = (start_n // STEP) * STEP if CAUSAL else 0
    for start_m in metile.tile_range(begin, seq, STEP):
        q = metile.tile_load(Q + base, start_m, 0, HEAD_DIM, (STEP, HEAD_DIM),
                             bounds=(seq, HEAD_DIM))
        do = metile.tile_load(dOut + base, start_m, 0, HEAD_DIM, (STEP, HEAD_DIM),
                              bounds=(seq, HEAD_DIM))
        rows = start_m + metile.arange(0, STEP)
        lse = metile.load(Lse + bh * seq + rows, mask=rows < seq, other=0.0)
        delta = metile.load(Delta + bh * seq + rows, mask=rows < seq, other=0.0)
        keep = rows[None, :] < seq
        if CAUSAL:
            keep = keep & (rows[None, :] >= cols[:, None])
        st = metile.dot(k, metile.trans(q))                      # S^T, raw scores
        pt = metile.where(keep, metile.exp2(st * qk_scale_log2 - lse[None, :]), 0.0)
        dv = metile.dot(pt.to(do.dtype), do, dv)
        dpt = metile.dot(v, metile.trans(do))
        dst = pt * (dpt - delta[None, :])
        dk = metile.dot(dst.to(q.dtype), q, dk)
    metile.tile_store(dK + base, start_n, 0, HEAD_DIM, (dk * sm_scale).to(dK.dtype),
                      (BLOCK, HEAD_DIM), bounds=(seq, HEAD_DIM))
    metile.tile_store(dV + base, start_n, 0, HEAD_DIM, dv.to(dV.dtype), (BLOCK, HEAD_DIM),
                      bounds=(seq, HEAD_DIM))


@metile.kernel
def flash_attention_bwd_dq(Q, K, V, dOut, Lse, Delta, dQ, seq, qk_scale_log2, sm_scale,
                           HEAD_DIM: metile.constexpr, BLOCK: metile.constexpr,
                           STEP: metile.constexpr, CAUSAL: metile.constexpr):
    start_m = metile.program_id(0) * BLOCK          # this program's queries
    bh = metile.program_id(1)
    base = bh * seq * HEAD_DIM
    rows = start_m + metile.arange(0, BLOCK)
    q = metile.tile_load(Q + base, start_m, 0, HEAD_DIM, (BLOCK, HEAD_DIM), bounds=(seq, HEAD_DIM))
    do = metile.tile_load(dOut + base, start_m, 0, HEAD_DIM, (BLOCK, HEAD_DIM),
                          bounds=(seq, HEAD_DIM))
    lse = metile.load(Lse + bh * seq + rows, mask=rows < seq, other=0.0)
    delta = metile.load(Delta + bh * seq + rows, mask=rows < seq, other=0.0)
    dq = metile.zeros((BLOCK, HEAD_DIM), "f32")
    end = metile.minimum(start_m + BLOCK, seq) if CAUSAL else seq
    for start_n in metile.tile_range(0, end, STEP):
        k = metile.tile_load(K + base, start_n, 0, HEAD_DIM, (STEP, HEAD_DIM),
                             bounds=(seq, HEAD_DIM))
        v = metile.tile_load(V + base, start_n, 0, HEAD_DIM, (STEP, HEAD_DIM),
                             bounds=(seq, HEAD_DIM))
        cols = start_n + metile.arange(0, STEP)
        keep = cols[None, :] < seq
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = metile.dot(q, metile.trans(k))
        p = metile.where(keep, metile.exp2(s * qk_scale_log2 - lse[:, None]), 0.0)
        dp = metile.dot(do, metile.trans(v))
        ds = p * (dp - delta[:, None])
        dq = metile.dot(ds.to(k.dtype), k, dq)
    metile.tile_store(dQ + base, start_m, 0, HEAD_DIM, (dq * sm_scale).to(dQ.dtype),
                      (BLOCK, HEAD_DIM), bounds=(seq, HEAD_DIM))


def default_blocks(dim):
    """(BLOCK, STEP) that fit the device: Metal has 32 KB of threadgroup memory, which the
    dkdv kernel's four operand tiles share."""
    if metile.get_device().name.startswith("metal"):
        return (16, 16) if dim <= 64 else (16, 8)
    return (32, 32) if dim <= 64 else (32, 16)


def attention_backward(q, k, v, out, lse, dout, dq, dk, dv, causal=False, block=None, step=None,
                       delta=None):
    """dq, dk, dv (written) from the forward's inputs q, k, v, its output `out` and log-sum-exp
    `lse` (flash_attention.attention's), and the output's gradient `dout`: numpy arrays or
    metile Buffers, [batch*heads, seq, head_dim] of one dtype, `lse` f32 [batch*heads, seq].
    `delta` (f32 [batch*heads, seq]) is the preprocess kernel's scratch, allocated when not
    given. `block` rows per program and `step` rows per loop turn come from default_blocks()
    when not given."""
    check_args("flash_attention_bwd", q.shape,
               {"q": q, "k": k, "v": v, "out": out, "dout": dout, "dq": dq, "dk": dk, "dv": dv},
               ("lse", lse))
    bh, seq, dim = q.shape
    if delta is None:
        delta = metile.Buffer.zeros((bh, seq), "f32")
    elif tuple(delta.shape) != (bh, seq) or dtype_name(delta) != "f32":
        raise ValueError(f"flash_attention_bwd: delta must be f32 shaped {(bh, seq)}; got "
                         f"{dtype_name(delta)} {tuple(delta.shape)}")
    dflt = default_blocks(dim)
    block, step = block or dflt[0], step or dflt[1]
    qk_scale_log2, sm_scale = LOG2E / math.sqrt(dim), 1.0 / math.sqrt(dim)
    flash_attention_bwd_preprocess[(metile.cdiv(seq, block), bh)](
        out, dout, delta, seq, HEAD_DIM=dim, BLOCK=block)
    flash_attention_bwd_dkdv[(metile.cdiv(seq, block), bh)](
        q, k, v, dout, lse, delta, dk, dv, seq, qk_scale_log2, sm_scale, HEAD_DIM=dim,
        BLOCK=block, STEP=step, CAUSAL=causal)
    flash_attention_bwd_dq[(metile.cdiv(seq, block), bh)](
        q, k, v, dout, lse, delta, dq, seq, qk_scale_log2, sm_scale, HEAD_DIM=dim,
        BLOCK=block, STEP=step, CAUSAL=causal)


def reference(q, k, v, dout, causal=False):
    """float64 numpy (dq, dk, dv), the check for every device."""
    q, k, v, dout = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        seq = q.shape[1]
        s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = dout @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))   # rowsum(dP * P) = rowsum(dO * O)
    return ds @ k * scale, ds.transpose(0, 2, 1) @ q * scale, p.transpose(0, 2, 1) @ dout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    bh, seq, dim = (int(a) for a in args[:3]) if len(args) >= 3 else (4, 200, 64)
    causal = "--causal" in sys.argv
    dtype = np.float16 if "--f16" in sys.argv else np.float32
    print(f"device: {metile.get_device().name}")
    q, k, v, dout = (np.random.randn(bh, seq, dim).astype(dtype) for _ in range(4))
    out = np.zeros_like(q)
    grads = [np.zeros_like(q) for _ in range(3)]
    t0 = time.perf_counter()
    lse = attention(q, k, v, out, causal)
    attention_backward(q, k, v, out, lse, dout, *grads, causal)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    errs = [np.abs(g - r).max() / max(1.0, np.abs(r).max())
            for g, r in zip(grads, reference(q, k, v, dout, causal))]
    print(f"{bh}x{seq}x{dim} causal={causal} {np.dtype(dtype).name}: {ms:.1f} ms forward and "
          f"backward (first call: trace, compile, run), max relative error dq {errs[0]:.2e} "
          f"dk {errs[1]:.2e} dv {errs[2]:.2e}")
    tol = 2e-2 if dtype == np.float16 else 5e-3 if metile.get_device().name == "cuda" else 1e-3
    return 0 if max(errs) < tol else 1


if __name__ == "__main__":
    sys.exit(main())
