"""Weight-only int4 GEMV (decode): Y[M, N] = X[M, K] . W[N, K]^T for M = 1..16, with W stored as
affine uint4 codes in groups along K.

Weight layout (the original project's affine_qmv kernels, MLX's affine quantization):
- `Wq`: u8 [N, K / 2], two 4-bit codes q in [0, 15] a byte, the low nibble first (W[n, 2i] is
  bits 0-3 of Wq[n, i], W[n, 2i + 1] bits 4-7). The original's u32 words holding eight codes,
  low bits first, are the same bytes on a little-endian machine.
- `Scales`, `Biases`: [N, ceil(K / G)] of f16 or bf16 (one dtype for both), G = 32, 64 or 128:
  W[n, k] = q * Scales[n, k // G] + Biases[n, k // G]. A zero point z is the bias -z * scale.
X and Y are f16 or bf16; K is even. Decoding happens in registers inside the K loop, in f32:
each program owns BLOCK_N rows of W, reads a [BLOCK_N, BLOCK_K] block of codes a step, and
broadcasts each word of codes to its codes in K order, so X is one contiguous tile a step. Three
forms (`form=`; default_form says which is taken):
- "subnormal" (the default on cuda where K is a multiple of 8): Wq read as u32 words of 8 codes
  (Buffer.view, no copy). Code j is masked where it is (codes 5-7 after one shared shift by 12):
  read as an f32, q * 2^(p - 149), a subnormal. X's values are scaled by 2^(79 - p), once for
  all rows, so each product is q x 2^-70: one and and one FMA a code. Needs a device that keeps
  subnormals (cuda, and interp, cpu and metal-sim, where it is slower); exact within f32's
  rounding while |q x| >= 2^-56 and |x| < 2^48 (every f16 X; bf16 X beyond are rare in practice).
- "words" (the default elsewhere where K is a multiple of 8): the same words; code j is moved by
  one of three rotations (each shared by two codes) to bits 16-19 or 12-15 and OR-ed into the
  mantissa of 128.0 or 2048.0, whose units those bits are: the f32 v = m + q in one and-or a
  code. Over a word, sum(W x) = s * (sum(v x) - sum(m x)) + z * sum(x), sum(m x) and sum(x)
  shared by the rows: one FMA a code.
- "bytes": Wq read as bytes, each broadcast to its two codes; q becomes a float by OR-ing it
  into the mantissa of 2^23 and subtracting 2^23; over a chunk of 8,
  sum(W x) = s * sum(q x) + z * sum(x).
Each thread keeps one f32 partial sum per word (chunk) it holds, and the rows are reduced
across threads once, after the loop. The output is rounded once to X's dtype. No dense W is
ever materialized.

Run: python3 examples/python/int4_gemv.py [N K [M]] [--group 32|64|128] [--dtype f16|bf16]
"""

import argparse
import sys
import time

import numpy as np

import _path  # noqa: F401  (source checkouts)
import metile
from gemv import from_bf16_bits, make, values  # noqa: F401  (bf16 helpers shared with gemv)

MAX_M = 16
DTYPES = ("f16", "bf16")
GROUPS = (32, 64, 128)


@metile.kernel
def int4_gemv_kernel(Wq, Scales, Biases, X, Y, N, K, M: metile.constexpr,
                     G: metile.constexpr, BLOCK_N: metile.constexpr,
                     BLOCK_K: metile.constexpr):
    """Rows [pid * BLOCK_N, +BLOCK_N) of Y (all M rows of X)."""
    pid = metile.program_id(0)
    n0 = pid * BLOCK_N
    GK = min(G, BLOCK_K)                         # K values of one group within a step
    C = min(8, GK)                               # K values a partial sum: inside one group
    kb = K // 2                                  # bytes a row of Wq
    groups = metile.cdiv(K, G)
    rows = n0 + metile.arange(0, BLOCK_N)
    live = rows < N
    NB = BLOCK_N * BLOCK_K // 2                  # bytes a step
    RG = BLOCK_N * BLOCK_K // GK                 # (row, group) pairs a step
    RC = BLOCK_N * BLOCK_K // C                  # (row, chunk of C) pairs a step
    shift = metile.reshape(metile.arange(0, 2) * 4, (1, 2))   # low nibble, then high
    # acc[m]: one partial sum per (row, chunk of C K values), started as a reduction's result so
    # that it takes the layout the in-thread sums below leave (each thread holds whole chunks):
    # the loop adds registers to registers and the rows are reduced across threads once, after it.
    acc = [metile.sum(metile.zeros((RC, C), "f32"), axis=1) for _ in range(M)]
    for k in metile.tile_range(0, K, BLOCK_K):
        # Every load of the step first, so that they are in flight together.
        b = metile.tile_load(Wq, n0, k // 2, kb, (BLOCK_N, BLOCK_K // 2), bounds=(N, kb)).to("i32")
        s = metile.tile_load(Scales, n0, k // G, groups, (BLOCK_N, BLOCK_K // GK), bounds=(N, groups))
        z = metile.tile_load(Biases, n0, k // G, groups, (BLOCK_N, BLOCK_K // GK), bounds=(N, groups))
        cols = k + metile.arange(0, BLOCK_K)
        xs = [metile.load(X + m * K + cols, mask=cols < K, other=0.0).to("f32") for m in range(M)]
        # Each byte twice, shifted by 0 and 4: W's codes in K order (byte i holds K = 2i, 2i+1),
        # so X is read as one contiguous tile. The broadcast reads the byte tile where its
        # threads hold the pairs (no exchange). A code q becomes the f32 2^23 + q by OR-ing it
        # into 2^23's mantissa; subtracting 2^23 leaves q exactly (no integer conversion).
        b2 = metile.broadcast_to(metile.reshape(b, (NB, 1)), (NB, 2))
        q = (((b2 >> shift) & 15) | 0x4B000000).to("f32", bitcast=True) - 8388608.0
        q = metile.reshape(q, (BLOCK_N, BLOCK_K))
        # W = q * s + z over a chunk of one group: sum(W x) = s * sum(q x) + z * sum(x). The
        # group's scale and bias are one value a (row, group), broadcast over its chunks.
        s = metile.reshape(metile.broadcast_to(metile.reshape(s, (RG, 1)), (RG, GK // C)), (RC,))
        z = metile.reshape(metile.broadcast_to(metile.reshape(z, (RG, 1)), (RG, GK // C)), (RC,))
        s, z = s.to("f32"), z.to("f32")
        for m in range(M):  # unrolled while tracing: the weights are decoded once for all rows
            x = xs[m]
            qx = metile.sum(metile.reshape(q * x[None, :], (RC, C)), axis=1)
            sx = metile.sum(metile.reshape(x, (BLOCK_K // C, C)), axis=1)
            sx = metile.reshape(metile.broadcast_to(sx[None, :], (BLOCK_N, BLOCK_K // C)), (RC,))
            acc[m] = acc[m] + s * qx + z * sx
    for m in range(M):
        y = metile.sum(metile.reshape(acc[m], (BLOCK_N, BLOCK_K // C)), axis=1)
        metile.store(Y + m * N + rows, y.to(Y.dtype), mask=live)


@metile.kernel
def int4_gemv_words_kernel(Wq, Scales, Biases, X, Y, N, K, M: metile.constexpr,
                           G: metile.constexpr, BLOCK_N: metile.constexpr,
                           BLOCK_K: metile.constexpr):
    """int4_gemv_kernel on Wq read as u32 words of 8 codes (K a multiple of 8): rows
    [pid * BLOCK_N, +BLOCK_N) of Y (all M rows of X)."""
    pid = metile.program_id(0)
    n0 = pid * BLOCK_N
    GK = min(G, BLOCK_K)                         # K values of one group within a step
    kw = K // 8                                  # words a row of Wq
    groups = metile.cdiv(K, G)
    rows = n0 + metile.arange(0, BLOCK_N)
    live = rows < N
    KW = BLOCK_K // 8                            # words a row a step
    NW = BLOCK_N * KW                            # words a step: one partial sum each
    RG = BLOCK_N * BLOCK_K // GK                 # (row, group) pairs a step
    # Code j of a word (bits 4j..4j+3) is rotated to bits 16..19 (j even) or 12..15 (j odd):
    # codes 3 and 4 are there already, 1 and 2 by a rotation of 8, 5 and 6 of 24, 7 and 0 of
    # 16, so a word takes three rotations, not a shift a code. OR-ed into the mantissa of 128.0
    # (whose units are bits 16..19) or 2048.0 (bits 12..15) a code is the f32 m + q exactly:
    # one and-or a code, no conversion. sum(v x) - sum(m x) cancels at most 2048 / 15 of
    # sum(q x)'s magnitude: 7 of f32's 24 bits, below the output's rounding to f16 or bf16
    # (the float64 tests' errors are the same as with 1 + q/128 everywhere).
    j = metile.reshape(metile.arange(0, 8), (1, 8))
    rot = (48 - (j + 1) // 2 * 8) % 32           # 16, 8, 8, 0, 0, 24, 24, 16
    left = rot.to("u32")
    right = ((32 - rot) % 32).to("u32")
    odd = j % 2
    mask = metile.where(odd == 1, 0xF000, 0xF0000).to("u32")
    magic = metile.where(odd == 1, 0x45000000, 0x43000000).to("u32")
    mj = metile.where(odd == 1, 2048.0, 128.0)   # m of code j: sum(v x) = sum(q x) + sum(m x)
    # acc[m]: one partial sum per word a thread holds, started as a reduction's result so that it
    # takes the layout the in-thread sums below leave: registers to registers in the loop, the
    # rows reduced across threads once, after it.
    acc = [metile.sum(metile.zeros((NW, 8), "f32"), axis=1) for _ in range(M)]
    for k in metile.tile_range(0, K, BLOCK_K):
        # Every load of the step first, so that they are in flight together.
        w = metile.tile_load(Wq, n0, k // 8, kw, (BLOCK_N, KW), bounds=(N, kw))
        s = metile.tile_load(Scales, n0, k // G, groups, (BLOCK_N, BLOCK_K // GK),
                             bounds=(N, groups))
        z = metile.tile_load(Biases, n0, k // G, groups, (BLOCK_N, BLOCK_K // GK),
                             bounds=(N, groups))
        cols = k + metile.arange(0, BLOCK_K)
        xs = [metile.load(X + m * K + cols, mask=cols < K, other=0.0).to("f32") for m in range(M)]
        # Each word broadcast over its 8 codes (the threads holding it hold all 8: no exchange).
        w8 = metile.broadcast_to(metile.reshape(w, (NW, 1)), (NW, 8))
        v = metile.reshape(((((w8 << left) | (w8 >> right)) & mask) | magic).to(
            "f32", bitcast=True), (BLOCK_N, BLOCK_K))
        # Over a word (8 K values of one group), with v = m + q:
        # sum(W x) = s * sum(q x) + z * sum(x) = s * (sum(v x) - sum(m x)) + z * sum(x), where
        # sum(m x) and sum(x) are one value a word of X, shared by the rows. The group's s and z
        # are one value a (row, group), broadcast over its words.
        s = metile.reshape(metile.broadcast_to(metile.reshape(s, (RG, 1)), (RG, GK // 8)), (NW,))
        z = metile.reshape(metile.broadcast_to(metile.reshape(z, (RG, 1)), (RG, GK // 8)), (NW,))
        s, z = s.to("f32"), z.to("f32")
        for m in range(M):  # unrolled while tracing: the weights are decoded once for all rows
            x = xs[m]
            vx = metile.sum(metile.reshape(v * x[None, :], (NW, 8)), axis=1)
            x8 = metile.reshape(x, (KW, 8))
            sx = metile.sum(x8, axis=1)
            mx = metile.sum(x8 * mj, axis=1)
            sx = metile.reshape(metile.broadcast_to(sx[None, :], (BLOCK_N, KW)), (NW,))
            mx = metile.reshape(metile.broadcast_to(mx[None, :], (BLOCK_N, KW)), (NW,))
            acc[m] = acc[m] + s * (vx - mx) + z * sx
    for m in range(M):
        y = metile.sum(metile.reshape(acc[m], (BLOCK_N, KW)), axis=1)
        metile.store(Y + m * N + rows, y.to(Y.dtype), mask=live)


# 2^-70: the subnormal form's sums are kept in units of 2^70 times smaller (see below).
TINY = 2.0 ** -70


@metile.kernel
def int4_gemv_subnormal_kernel(Wq, Scales, Biases, X, Y, N, K, M: metile.constexpr,
                               G: metile.constexpr, BLOCK_N: metile.constexpr,
                               BLOCK_K: metile.constexpr):
    """int4_gemv_words_kernel with the codes left where they are: rows [pid * BLOCK_N, +BLOCK_N)
    of Y (all M rows of X)."""
    pid = metile.program_id(0)
    n0 = pid * BLOCK_N
    GK = min(G, BLOCK_K)                         # K values of one group within a step
    kw = K // 8                                  # words a row of Wq
    groups = metile.cdiv(K, G)
    rows = n0 + metile.arange(0, BLOCK_N)
    live = rows < N
    KW = BLOCK_K // 8                            # words a row a step
    NW = BLOCK_N * KW                            # words a step: one partial sum each
    RG = BLOCK_N * BLOCK_K // GK                 # (row, group) pairs a step
    # Code j of a word, masked in place (bits p = 4j, under f32's exponent for j <= 4) or after
    # one shift by 12 shared by codes 5..7 (to p = 4j - 12), read as an f32 is the subnormal
    # q * 2^(p - 149), exactly: one and a code, no or, no subtraction. X's value j of each word
    # is scaled by 2^(79 - p) (shared by the rows: exact, a power of two), so every product is
    # q x 2^-70, a normal f32 for |q x| >= 2^-56, and the sums are those of q x, 2^70 smaller.
    j = metile.reshape(metile.arange(0, 8), (1, 8))
    right = metile.where(j >= 5, 12, 0).to("u32")
    p = metile.where(j >= 5, j * 4 - 12, j * 4)
    mask = (15 << p).to("u32")
    xscale = ((206 - p) << 23).to("u32").to("f32", bitcast=True)   # 2^(79 - p): 127 + 79 - p
    acc = [metile.sum(metile.zeros((NW, 8), "f32"), axis=1) for _ in range(M)]
    for k in metile.tile_range(0, K, BLOCK_K):
        # Every load of the step first, so that they are in flight together.
        w = metile.tile_load(Wq, n0, k // 8, kw, (BLOCK_N, KW), bounds=(N, kw))
        s = metile.tile_load(Scales, n0, k // G, groups, (BLOCK_N, BLOCK_K // GK),
                             bounds=(N, groups))
        z = metile.tile_load(Biases, n0, k // G, groups, (BLOCK_N, BLOCK_K // GK),
                             bounds=(N, groups))
        cols = k + metile.arange(0, BLOCK_K)
        xs = [metile.load(X + m * K + cols, mask=cols < K, other=0.0).to("f32") for m in range(M)]
        w8 = metile.broadcast_to(metile.reshape(w, (NW, 1)), (NW, 8))
        v = metile.reshape(((w8 >> right) & mask).to("f32", bitcast=True), (BLOCK_N, BLOCK_K))
        # Over a word: sum(W x) 2^-70 = s * sum(v x') + z * sum(x) 2^-70, the sums over X shared
        # by the rows; s and z one value a (row, group), broadcast over its words.
        s = metile.reshape(metile.broadcast_to(metile.reshape(s, (RG, 1)), (RG, GK // 8)), (NW,))
        z = metile.reshape(metile.broadcast_to(metile.reshape(z, (RG, 1)), (RG, GK // 8)), (NW,))
        s, z = s.to("f32"), z.to("f32")
        for m in range(M):  # unrolled while tracing: the weights are decoded once for all rows
            x8 = metile.reshape(xs[m], (KW, 8))
            xq = metile.reshape(x8 * xscale, (BLOCK_K,))
            vx = metile.sum(metile.reshape(v * xq[None, :], (NW, 8)), axis=1)
            sx = metile.sum(x8, axis=1) * TINY
            sx = metile.reshape(metile.broadcast_to(sx[None, :], (BLOCK_N, KW)), (NW,))
            acc[m] = acc[m] + s * vx + z * sx
    for m in range(M):
        y = metile.sum(metile.reshape(acc[m], (BLOCK_N, KW)), axis=1) * (1.0 / TINY)
        metile.store(Y + m * N + rows, y.to(Y.dtype), mask=live)


# ----------------------------------------------------------------------------- host side

def _shape_dtype(a, what):
    if not isinstance(a, metile.Buffer):
        if hasattr(a, "__dlpack__"):
            a = metile.from_dlpack(a)
        elif isinstance(a, np.ndarray):
            a = metile.Buffer(data=np.ascontiguousarray(a))
        else:
            raise TypeError(f"int4_gemv: {what} must be a metile.Buffer, a numpy array or a "
                            f"DLPack tensor, got {type(a).__name__}")
    return a, tuple(a.shape), a.metile_dtype


def check_weights(Wq, Scales, Biases, k, op="int4_gemv"):
    """(Wq, Scales, Biases, N, group size) checked against K; errors name the operand."""
    Wq, wshape, wdt = _shape_dtype(Wq, "Wq")
    if wdt != "u8" or len(wshape) != 2:
        raise ValueError(f"{op}: Wq must be u8 [N, K/2] (two 4-bit codes a byte), got {wdt} "
                         f"{list(wshape)}")
    if k % 2:
        raise ValueError(f"{op}: K = {k} is odd; packed 4-bit weights need an even K")
    n = wshape[0]
    if wshape[1] * 2 != k:
        raise ValueError(f"{op}: Wq is {list(wshape)}, which packs K = {wshape[1] * 2}, but x "
                         f"has K = {k}")
    Scales, sshape, sdt = _shape_dtype(Scales, "Scales")
    Biases, bshape, bdt = _shape_dtype(Biases, "Biases")
    if sdt not in DTYPES or bdt != sdt:
        raise ValueError(f"{op}: Scales and Biases must both be f16 or both bf16, got {sdt} and "
                         f"{bdt}")
    if len(sshape) != 2 or sshape[0] != n or sshape[1] < 1:
        raise ValueError(f"{op}: Scales must be [N, K/G] = [{n}, ceil({k}/G)], got "
                         f"{list(sshape)}")
    group = next((g for g in GROUPS if -(-k // g) == sshape[1]), None)
    if group is None:
        raise ValueError(f"{op}: Scales {list(sshape)} gives no group size of {GROUPS} for "
                         f"K = {k} (need [{n}, ceil(K/G)])")
    if bshape != sshape:
        raise ValueError(f"{op}: Biases must have Scales' shape {list(sshape)}, got "
                         f"{list(bshape)}")
    return Wq, Scales, Biases, n, group


def default_config(n, k, group, device=None):
    """(block_n, block_k) for W [n, k] with groups of `group` K values. GPUs: [8, 1024] with 128
    threads: the [8, 128] words of a step are 1024 u32, whole chunks of 8 for every thread, so
    the codes' layout gives each thread one word of each of the 8 rows at the same K and the 8
    values of X those share (one 16-byte load); with fewer words a step (4 rows) the chunks are
    4 and the threads split words, exchanging partial sums. Host devices: small tiles."""
    device = device or metile.get_device()
    if device.name == "cuda" or device.name.startswith("metal"):
        return 8, 1024
    return 4, 128


FORMS = ("words", "bytes", "subnormal")


def default_form(k, block_k, device=None):
    """The form int4_gemv takes unless told: "bytes" where K or block_k is not a multiple of 8
    (no whole words), else "subnormal" on cuda (fewest instructions a code; NVRTC keeps
    subnormals) and "words" elsewhere (Metal GPUs may flush subnormals to zero; the host
    devices keep them, but slowly)."""
    device = device or metile.get_device()
    if k % 8 or block_k % 8:
        return "bytes"
    return "subnormal" if device.name == "cuda" else "words"


def _launch(Wq, Scales, Biases, x, group, out, block_n, block_k, form, maxnreg):
    """int4_gemv's arguments checked: (out, kernel, grid, args, kwargs)."""
    x, xshape, xdt = _shape_dtype(x, "x")
    if xdt not in DTYPES or len(xshape) not in (1, 2):
        raise ValueError(f"int4_gemv: x must be f16 or bf16 [K] or [M, K], got {xdt} "
                         f"{list(xshape)}")
    k = xshape[-1]
    m = 1 if len(xshape) == 1 else xshape[0]
    if not 1 <= m <= MAX_M:
        raise ValueError(f"int4_gemv: x has {m} rows; take 1 to {MAX_M} (int4_gemm beyond)")
    Wq, Scales, Biases, n, g = check_weights(Wq, Scales, Biases, k)
    if group is not None:
        if group not in GROUPS or -(-k // group) != Scales.shape[1]:
            raise ValueError(f"int4_gemv: group {group} does not match Scales "
                             f"{list(Scales.shape)} for K = {k}")
        g = group
    yshape = xshape[:-1] + (n,)
    if out is None:
        out = metile.Buffer.zeros(yshape, xdt)
    elif tuple(out.shape) != yshape:
        raise ValueError(f"int4_gemv: out must have shape {list(yshape)}, got "
                         f"{list(out.shape)}")
    bn, bk = default_config(n, k, g)
    bn, bk = block_n or bn, block_k or bk
    if bk < 2 or bk & (bk - 1) or (bk % g and g % bk):
        raise ValueError(f"int4_gemv: block_k must be a power of two that the group size {g} "
                         f"divides or that divides it, got {bk}")
    if form not in (None,) + FORMS:
        raise ValueError(f"int4_gemv: form must be one of {FORMS}, got {form!r}")
    # A register limit a thread (cuda; other devices ignore it): fewer registers, more programs a
    # multiprocessor, so more of Wq in flight, at the risk of spills (ptxas -v says).
    if maxnreg is not None and (isinstance(maxnreg, bool) or not isinstance(maxnreg, int) or
                                not 16 <= maxnreg <= 255):
        raise ValueError(f"int4_gemv: maxnreg must be an int in [16, 255], got {maxnreg!r}")
    # Words (8 codes a u32) need whole words a row of Wq and a step: K and block_k multiples of 8.
    if form not in (None, "bytes") and (k % 8 or bk % 8):
        raise ValueError(f"int4_gemv: the {form} form needs K and block_k multiples of 8, got "
                         f"K = {k}, block_k = {bk}")
    form = form or default_form(k, bk)
    if form == "bytes":
        kernel = int4_gemv_kernel
    else:
        kernel = int4_gemv_words_kernel if form == "words" else int4_gemv_subnormal_kernel
        Wq = Wq.view("u32")
    kwargs = dict(M=m, G=g, BLOCK_N=bn, BLOCK_K=bk, num_threads=128)
    if maxnreg is not None:
        kwargs["maxnreg"] = maxnreg
    return out, kernel, (metile.cdiv(n, bn),), (Wq, Scales, Biases, x, out, n, k), kwargs


def int4_gemv(Wq, Scales, Biases, x, group=None, out=None, block_n=None, block_k=None,
              form=None, maxnreg=None):
    """out = x . W^T with W = q * scale + bias decoded from Wq/Scales/Biases (see the module
    docstring): x [K] or [M, K] (1 <= M <= 16), f16 or bf16; out [N] or [M, N] of x's dtype.
    `group` is found from Scales' shape unless given (it is ambiguous only for tiny K). `form`:
    "words" (Wq read as u32 words, the default where K is a multiple of 8) or "bytes".
    `maxnreg`: at most that many registers a thread on cuda (16..255; None: the compiler's
    choice)."""
    out, kernel, grid, args, kwargs = _launch(Wq, Scales, Biases, x, group, out, block_n,
                                              block_k, form, maxnreg)
    kernel[grid](*args, **kwargs)
    return out


def prepare_int4_gemv(Wq, Scales, Biases, x, group=None, out=None, block_n=None,
                      block_k=None, form=None, maxnreg=None):
    """int4_gemv checked and compiled once: (run, out); run() recomputes out from what the
    buffers hold (a decoding loop's repeated call, without the per-call checks)."""
    out, kernel, grid, args, kwargs = _launch(Wq, Scales, Biases, x, group, out, block_n,
                                              block_k, form, maxnreg)
    return kernel[grid].prepare(*args, **kwargs), out


# ------------------------------------------------------------------------------ checking

def quantized(n, k, group, dtype, rng):
    """Random (Wq, Scales, Biases) Buffers and W in float64 (from the rounded scales)."""
    q = rng.integers(0, 16, (n, k), dtype=np.uint8)
    groups = -(-k // group)
    s, s64 = make(rng.uniform(0.01, 0.1, (n, groups)), dtype)
    b, b64 = make(rng.uniform(-0.5, 0.5, (n, groups)), dtype)
    wq = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    w64 = q * np.repeat(s64, group, 1)[:, :k] + np.repeat(b64, group, 1)[:, :k]
    return (metile.Buffer(data=wq), s, b), w64


def tolerance(dtype, k):
    """Bound on |error| / (sum over K of |w x|): the output's rounding plus f32 sums."""
    return {"f16": 1e-3, "bf16": 8e-3}[dtype] + 1e-6 * k ** 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shape", type=int, nargs="*", default=[300, 1000, 3], help="N K [M]")
    ap.add_argument("--group", type=int, default=64, choices=GROUPS)
    ap.add_argument("--dtype", default="f16", choices=DTYPES)
    a = ap.parse_args()
    if len(a.shape) not in (2, 3):
        ap.error("give N K [M]")
    n, k = a.shape[:2]
    m = a.shape[2] if len(a.shape) == 3 else 1
    print(f"device: {metile.get_device().name}")
    rng = np.random.default_rng(0)
    (wq, s, b), w64 = quantized(n, k, a.group, a.dtype, rng)
    x, x64 = make(rng.standard_normal((m, k)), a.dtype)
    t0 = time.perf_counter()
    y = int4_gemv(wq, s, b, x, group=a.group)
    metile.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    err = (np.abs(values(y) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max()
    print(f"{m}x{k} . int4({n}x{k}, group {a.group})^T, {a.dtype}: {ms:.1f} ms (first call), "
          f"max relative error {err:.2e}")
    return 0 if err < tolerance(a.dtype, k) else 1


if __name__ == "__main__":
    sys.exit(main())
