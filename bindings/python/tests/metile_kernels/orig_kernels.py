"""Kernels written the way the original meTile's users write them (its public kernel language:
metile.scalar, simd_sum, fast_exp, Config hints WM/WN/SWIZZLE, ...), covering the families of
its kernels/ folder. They are this suite's own code; test_original_kernels.py runs them."""

import metile


@metile.kernel
def row_softmax(X, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    base = row * N
    m = -1e38
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        m = metile.maximum(m, metile.load(X + base + offs, mask=offs < N))
    m = metile.max(m)
    total = 0.0
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        total = total + metile.exp(metile.load(X + base + offs, mask=offs < N) - m)
    total = metile.sum(total)
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        keep = offs < N
        x = metile.load(X + base + offs, mask=keep)
        metile.store(Out + base + offs, metile.exp(x - m) / total, mask=keep)


@metile.kernel
def row_layernorm(X, W, B, Out, N, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    acc = 0.0
    acc_sq = 0.0
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        x = metile.load(X + row * N + offs, mask=offs < N)
        acc = acc + x
        acc_sq = acc_sq + x * x
    mean = metile.sum(acc) / N
    rstd = 1.0 / metile.sqrt(metile.sum(acc_sq) / N - mean * mean + 1e-5)
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        keep = offs < N
        x = metile.load(X + row * N + offs, mask=keep)
        y = (x - mean) * rstd * metile.load(W + offs, mask=keep) + metile.load(B + offs, mask=keep)
        metile.store(Out + row * N + offs, y, mask=keep)


@metile.kernel
def row_rmsnorm(X, W, Out, N, eps, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    sq = 0.0
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        x = metile.cast(metile.load(X + row * N + offs, mask=offs < N), "f32")
        sq = sq + x * x
    scale = 1.0 / metile.sqrt(metile.sum(sq) / N + eps)
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        keep = offs < N
        x = metile.cast(metile.load(X + row * N + offs, mask=keep), "f32")
        w = metile.cast(metile.load(W + offs, mask=keep), "f32")
        metile.store(Out + row * N + offs, x * scale * w, mask=keep)


@metile.kernel
def row_add_rmsnorm(X, R, W, Sum, Out, N, eps, BLOCK: metile.constexpr):
    row = metile.program_id(0)
    sq = 0.0
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        keep = offs < N
        s = metile.cast(metile.load(X + row * N + offs, mask=keep), "f32") + metile.cast(
            metile.load(R + row * N + offs, mask=keep), "f32")
        metile.store(Sum + row * N + offs, s, mask=keep)
        sq = sq + s * s
    scale = 1.0 / metile.sqrt(metile.sum(sq) / N + eps)
    for start in metile.tile_range(0, N, BLOCK):
        offs = start + metile.arange(0, BLOCK)
        keep = offs < N
        s = metile.cast(metile.load(Sum + row * N + offs, mask=keep), "f32")
        w = metile.cast(metile.load(W + offs, mask=keep), "f32")
        metile.store(Out + row * N + offs, s * scale * w, mask=keep)


@metile.kernel
def sum4(p0, p1, p2, p3, out, N_ELEM, BLOCK_SIZE: metile.constexpr):
    offs = metile.program_id(0) * BLOCK_SIZE + metile.arange(0, BLOCK_SIZE)
    keep = offs < N_ELEM
    acc = metile.load(p0 + offs, mask=keep) + metile.load(p1 + offs, mask=keep)
    acc = acc + metile.load(p2 + offs, mask=keep) + metile.load(p3 + offs, mask=keep)
    metile.store(out + offs, acc, mask=keep)


@metile.kernel
def gelu_approx(X, out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    keep = offs < N
    x = metile.load(X + offs, mask=keep)
    metile.store(out + offs, x / (1.0 + metile.exp(0.0 - 1.702 * x)), mask=keep)


@metile.kernel
def exp_and_sqrt_roles(X, out_exp, out_sqrt, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    keep = offs < N
    x = metile.load(X + offs, mask=keep)
    with metile.simdgroup_role(role=0, num_roles=2):
        metile.store(out_exp + offs, metile.exp(x), mask=keep)
    with metile.simdgroup_role(role=1, num_roles=2):
        metile.store(out_sqrt + offs, metile.sqrt(metile.abs(x)), mask=keep)


GEMM_CONFIGS = [
    metile.Config(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, WM=2, WN=2, SWIZZLE="linear"),
    metile.Config(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, WM=2, WN=2, SWIZZLE="hilbert"),
    metile.Config(BLOCK_M=32, BLOCK_N=16, BLOCK_K=8, WM=2, WN=1, SWIZZLE="grouped4",
                  num_stages=2),
    metile.Config(BLOCK_M=16, BLOCK_N=32, BLOCK_K=16, WM=1, WN=2, SWIZZLE="auto",
                  num_simdgroups=2),
]




@metile.autotune(configs=GEMM_CONFIGS, key=["M", "N", "K"], verbose=False)
@metile.kernel
def gemm(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
         BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N))


@metile.kernel
def gemm_morton(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
                BLOCK_K: metile.constexpr):
    pid_m, pid_n = metile.tile_swizzle(metile.program_id(0), metile.program_id(1),
                                       pattern="morton", block_size=2)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K, num_stages=2):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N))


@metile.autotune(configs=GEMM_CONFIGS, key=["M", "N", "K"], verbose=False)
@metile.kernel
def gemm_silu(A, B, C, M, N, K, BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
              BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N))
        acc = metile.dot(a, b, acc)
    acc = acc / (1.0 + metile.exp(0.0 - acc))
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N))


@metile.kernel
def decode_attention(Q, K, V, Out, N, scale, D: metile.constexpr, Q_HEADS: metile.constexpr,
                     KV_HEADS: metile.constexpr, BLOCK: metile.constexpr):
    # One program per (batch, query head); each simdgroup walks every num_sg-th token with an
    # online softmax, then simdgroup 0's lanes merge the per-simdgroup states.
    q_index = metile.program_id(0)
    kv_head = (q_index // Q_HEADS) * KV_HEADS + (q_index % Q_HEADS) // (Q_HEADS // KV_HEADS)
    thread = metile.thread_id()
    lane = metile.simd_lane_id()
    sg = thread // 32
    num_sg = BLOCK // 32
    per_lane = D // 32
    sg_max = metile.shared(BLOCK, dtype="f32")
    sg_sum = metile.shared(BLOCK, dtype="f32")
    sg_out = metile.shared(D * num_sg, dtype="f32")
    q = [metile.cast(metile.load(Q + q_index * D + lane * per_lane + c), "f32") * scale
         for c in range(per_lane)]
    run_max = metile.scalar(-1e30)
    run_sum = metile.scalar(0.0)
    run_out = [metile.scalar(0.0) for _ in range(per_lane)]
    for token in metile.tile_range(sg, N, num_sg):
        row = (kv_head * N + token) * D
        dot_qk = 0.0
        for c in range(per_lane):
            dot_qk = dot_qk + q[c] * metile.cast(metile.load(K + row + lane * per_lane + c), "f32")
        dot_qk = metile.simd_sum(dot_qk)
        new_max = metile.maximum(run_max, dot_qk)
        shrink = metile.fast_exp(run_max - new_max)
        p = metile.fast_exp(dot_qk - new_max)
        run_sum = run_sum * shrink + p
        for c in range(per_lane):
            v = metile.cast(metile.load(V + row + lane * per_lane + c), "f32")
            run_out[c] = run_out[c] * shrink + p * v
        run_max = new_max
    metile.store(sg_max + thread, run_max)
    metile.store(sg_sum + thread, run_sum)
    for c in range(per_lane):
        metile.store(sg_out + (lane * per_lane + c) * num_sg + sg, run_out[c])
    metile.barrier()
    src_ok = lane < num_sg
    src = metile.minimum(lane, num_sg - 1)
    m_src = metile.where(src_ok, metile.load(sg_max + src * 32), -1e30)
    m_all = metile.simd_max(m_src)
    f_src = metile.where(src_ok, metile.fast_exp(m_src - m_all), 0.0)
    denom = metile.simd_sum(metile.where(src_ok, metile.load(sg_sum + src * 32), 0.0) * f_src)
    for chunk in range(0, 32, num_sg):
        for c in range(per_lane):
            dim = (sg + chunk) * per_lane + c
            o = metile.where(src_ok, metile.load(sg_out + dim * num_sg + src), 0.0)
            metile.store(Out + q_index * D + dim, metile.simd_sum(o * f_src) / denom,
                         mask=lane == 0)


@metile.kernel
def radix2_fft(X_re, X_im, Y_re, Y_im, TW_re, TW_im, N, LOG_N: metile.constexpr,
               BLOCK: metile.constexpr):
    # One row of N = BLOCK complex values per program, one value per thread: a bit-reversed
    # gather, then LOG_N butterfly stages (within a simdgroup through lane shuffles, across
    # simdgroups through threadgroup memory). TW holds, for the stage of half-width h, the
    # twiddles exp(-2 pi i j / 2h) at [h - 1, 2h - 1).
    base = metile.program_id(0) * N
    tid = metile.thread_id()
    src = metile.reverse_bits(tid) >> (32 - LOG_N)
    re = metile.load(X_re + base + src)
    im = metile.load(X_im + base + src)
    buf_re = metile.shared(BLOCK)
    buf_im = metile.shared(BLOCK)
    for stage in range(LOG_N):
        half = 1 << stage
        low = (tid & half) == 0
        w_re = metile.load(TW_re + (half - 1) + (tid & (half - 1)))
        w_im = metile.load(TW_im + (half - 1) + (tid & (half - 1)))
        if half < 32:
            other_re = metile.simd_shuffle_xor(re, half)
            other_im = metile.simd_shuffle_xor(im, half)
        else:
            metile.store(buf_re + tid, re)
            metile.store(buf_im + tid, im)
            metile.barrier()
            other_re = metile.load(buf_re + (tid ^ half))
            other_im = metile.load(buf_im + (tid ^ half))
            metile.barrier()
        odd_re = metile.where(low, other_re, re)
        odd_im = metile.where(low, other_im, im)
        even_re = metile.where(low, re, other_re)
        even_im = metile.where(low, im, other_im)
        t_re = odd_re * w_re - odd_im * w_im
        t_im = odd_re * w_im + odd_im * w_re
        re = metile.where(low, even_re + t_re, even_re - t_re)
        im = metile.where(low, even_im + t_im, even_im - t_im)
    metile.store(Y_re + base + tid, re)
    metile.store(Y_im + base + tid, im)


@metile.kernel
def affine_qmv(X, W, Scales, Biases, Out, K, N, GROUP_SIZE: metile.constexpr,
               BITS: metile.constexpr, BLOCK: metile.constexpr, PER_SG: metile.constexpr):
    # Out[row, n] = sum_k X[row, k] * (q[n, k] * scale + bias) with q packed 32 // BITS to a
    # u32 word; each simdgroup owns PER_SG consecutive outputs and its lanes stride the words.
    thread = metile.thread_id()
    lane = thread % 32
    first = metile.program_id(0) * (BLOCK // 32) * PER_SG + (thread // 32) * PER_SG
    row = first // N
    col0 = first % N
    per_word = 32 // BITS
    words = K // per_word
    acc = [metile.scalar(0.0) for _ in range(PER_SG)]
    for w in metile.tile_range(lane, words, 32):
        xs = [metile.load(X + row * K + w * per_word + e) for e in range(per_word)]
        for o in range(PER_SG):
            col = col0 + o
            packed = metile.load(W + col * words + w)
            g = col * (K // GROUP_SIZE) + w // (GROUP_SIZE // per_word)
            s = metile.load(Scales + g)
            b = metile.load(Biases + g)
            for e in range(per_word):
                q = metile.cast((packed >> (e * BITS)) & ((1 << BITS) - 1), "f32")
                acc[o] = acc[o] + xs[e] * (q * s + b)
    for o in range(PER_SG):
        metile.store(Out + first + o, metile.simd_sum(acc[o]), mask=lane == 0)


def _qmv_accumulate(X, sets, K, row, col0, lane, GROUP_SIZE, BITS, PER_SG, DT):
    # The original keeps the packed-word loop in a helper the kernel calls: the loop's
    # carried list lives in the helper's frame. `sets` holds (W, Scales, Biases) triples that
    # share the loop (SwiGLU's gate and up projections); acc[j * PER_SG + o] is set j's output
    # o. DT is the decode dtype: with "f16" the products are f16 and the f32 scalar
    # accumulators widen to f32 tiles.
    per_word = 32 // BITS
    words = K // per_word
    acc = [metile.scalar(0.0) for _ in range(len(sets) * PER_SG)]
    for w in metile.tile_range(lane, words, 32):
        xs = [metile.cast(metile.load(X + row * K + w * per_word + e), DT)
              for e in range(per_word)]
        for j, (W, Scales, Biases) in enumerate(sets):
            for o in range(PER_SG):
                col = col0 + o
                packed = metile.load(W + col * words + w)
                g = col * (K // GROUP_SIZE) + w // (GROUP_SIZE // per_word)
                s = metile.cast(metile.load(Scales + g), DT)
                b = metile.cast(metile.load(Biases + g), DT)
                for e in range(per_word):
                    q = metile.cast((packed >> (e * BITS)) & ((1 << BITS) - 1), DT)
                    acc[j * PER_SG + o] += xs[e] * (q * s + b)
    return acc


def _qmv_outputs(BLOCK, PER_SG):
    thread = metile.thread_id()
    lane = thread % 32
    first = metile.program_id(0) * (BLOCK // 32) * PER_SG + (thread // 32) * PER_SG
    return thread // 32, lane, first


def _decode_dtype(HALF):
    return "f16" if HALF else "f32"


@metile.kernel
def affine_qmv_helper(X, W, Scales, Biases, Out, K, N, GROUP_SIZE: metile.constexpr,
                      BITS: metile.constexpr, BLOCK: metile.constexpr, PER_SG: metile.constexpr,
                      HALF: metile.constexpr = False):
    _, lane, first = _qmv_outputs(BLOCK, PER_SG)
    acc = _qmv_accumulate(X, [(W, Scales, Biases)], K, first // N, first % N, lane,
                          GROUP_SIZE, BITS, PER_SG, _decode_dtype(HALF))
    for o in range(PER_SG):
        metile.store(Out + first + o, metile.simd_sum(acc[o]), mask=lane == 0)


@metile.kernel
def affine_qmv_residual(X, W, Scales, Biases, Residual, Out, K, N,
                        GROUP_SIZE: metile.constexpr, BITS: metile.constexpr,
                        BLOCK: metile.constexpr, PER_SG: metile.constexpr,
                        HALF: metile.constexpr = False):
    # The residual add fused into the store: only lane 0 reads and writes.
    _, lane, first = _qmv_outputs(BLOCK, PER_SG)
    acc = _qmv_accumulate(X, [(W, Scales, Biases)], K, first // N, first % N, lane,
                          GROUP_SIZE, BITS, PER_SG, _decode_dtype(HALF))
    writer = lane == 0
    for o in range(PER_SG):
        r = metile.load(Residual + first + o, mask=writer)
        metile.store(Out + first + o, metile.simd_sum(acc[o]) + r, mask=writer)


def _silu_times(gate, up):
    return gate / (1.0 + metile.fast_exp(0.0 - gate)) * up


@metile.kernel
def affine_qmv_swiglu(X, GW, GS, GB, UW, US, UB, Out, K, N, GROUP_SIZE: metile.constexpr,
                      BITS: metile.constexpr, BLOCK: metile.constexpr,
                      PER_SG: metile.constexpr, HALF: metile.constexpr = False):
    # silu(x W_gate^T) * (x W_up^T): both projections' accumulators in one carried list.
    _, lane, first = _qmv_outputs(BLOCK, PER_SG)
    acc = _qmv_accumulate(X, [(GW, GS, GB), (UW, US, UB)], K, first // N, first % N, lane,
                          GROUP_SIZE, BITS, PER_SG, _decode_dtype(HALF))
    for o in range(PER_SG):
        y = _silu_times(metile.simd_sum(acc[o]), metile.simd_sum(acc[PER_SG + o]))
        metile.store(Out + first + o, y, mask=lane == 0)


@metile.kernel
def affine_qmv_swiglu_staged(X, GW, GS, GB, UW, US, UB, Out, K, N,
                             GROUP_SIZE: metile.constexpr, BITS: metile.constexpr,
                             BLOCK: metile.constexpr, PER_SG: metile.constexpr,
                             HALF: metile.constexpr = False):
    # The two projections one after the other (two loops), each simdgroup's sums staged in
    # threadgroup memory across a barrier before the epilogue reads them back.
    sg, lane, first = _qmv_outputs(BLOCK, PER_SG)
    outputs = (BLOCK // 32) * PER_SG
    dt = _decode_dtype(HALF)
    stage = metile.shared(2 * 32 * outputs, dtype=dt)
    for j, triple in enumerate([(GW, GS, GB), (UW, US, UB)]):
        acc = _qmv_accumulate(X, [triple], K, first // N, first % N, lane, GROUP_SIZE, BITS,
                              PER_SG, dt)
        for o in range(PER_SG):
            slot = (j * outputs + sg * PER_SG + o) * 32 + lane
            metile.store(stage + slot, metile.simd_sum(acc[o]))
    metile.barrier()
    for o in range(PER_SG):
        slot = (sg * PER_SG + o) * 32 + lane
        y = _silu_times(metile.load(stage + slot), metile.load(stage + outputs * 32 + slot))
        metile.store(Out + first + o, y, mask=lane == 0)


@metile.kernel
def flash_attention_rows(Q, K, V, Out, Q_LEN, K_LEN, scale, D: metile.constexpr,
                         Q_HEADS: metile.constexpr, KV_HEADS: metile.constexpr,
                         CAUSAL: metile.constexpr, BLOCK: metile.constexpr):
    # One program per (query head, query token): decode_attention's online softmax over the
    # keys this token may see (all of them, or the causal prefix aligned to the end).
    work = metile.program_id(0)
    q_tok = work % Q_LEN
    q_index = work // Q_LEN
    kv_head = (q_index // Q_HEADS) * KV_HEADS + (q_index % Q_HEADS) // (Q_HEADS // KV_HEADS)
    thread = metile.thread_id()
    lane = metile.simd_lane_id()
    sg = thread // 32
    num_sg = BLOCK // 32
    per_lane = D // 32
    sg_max = metile.shared(BLOCK, dtype="f32")
    sg_sum = metile.shared(BLOCK, dtype="f32")
    sg_out = metile.shared(D * num_sg, dtype="f32")
    q = [metile.load(Q + work * D + lane * per_lane + c) * scale for c in range(per_lane)]
    run_max = metile.scalar(-1e30)
    run_sum = metile.scalar(0.0)
    run_out = [metile.scalar(0.0) for _ in range(per_lane)]
    end = K_LEN
    if CAUSAL:
        end = K_LEN - Q_LEN + q_tok + 1
    for token in metile.tile_range(sg, end, num_sg):
        row = (kv_head * K_LEN + token) * D
        s = 0.0
        for c in range(per_lane):
            s = s + q[c] * metile.load(K + row + lane * per_lane + c)
        s = metile.simd_sum(s)
        new_max = metile.maximum(run_max, s)
        shrink = metile.fast_exp(run_max - new_max)
        p = metile.fast_exp(s - new_max)
        run_sum = run_sum * shrink + p
        for c in range(per_lane):
            run_out[c] = run_out[c] * shrink + p * metile.load(V + row + lane * per_lane + c)
        run_max = new_max
    metile.store(sg_max + thread, run_max)
    metile.store(sg_sum + thread, run_sum)
    for c in range(per_lane):
        metile.store(sg_out + (lane * per_lane + c) * num_sg + sg, run_out[c])
    metile.barrier()
    src_ok = lane < num_sg
    src = metile.minimum(lane, num_sg - 1)
    m_src = metile.where(src_ok, metile.load(sg_max + src * 32), -1e30)
    f_src = metile.where(src_ok, metile.fast_exp(m_src - metile.simd_max(m_src)), 0.0)
    denom = metile.simd_sum(metile.where(src_ok, metile.load(sg_sum + src * 32), 0.0) * f_src)
    for chunk in range(0, 32, num_sg):
        for c in range(per_lane):
            dim = (sg + chunk) * per_lane + c
            o = metile.where(src_ok, metile.load(sg_out + dim * num_sg + src), 0.0)
            metile.store(Out + work * D + dim, metile.simd_sum(o * f_src) / denom,
                         mask=lane == 0)


@metile.kernel
def decode_attention_partial(Q, K, V, PartOut, PartMax, PartSum, N, scale,
                             D: metile.constexpr, Q_HEADS: metile.constexpr,
                             KV_HEADS: metile.constexpr, NUM_BLOCKS: metile.constexpr,
                             TOKENS_PER_BLOCK: metile.constexpr, BLOCK: metile.constexpr):
    # Split-K decode: program (query head, token block) leaves its block's running max, sum and
    # unnormalized output; decode_attention_merge combines the blocks.
    work = metile.program_id(0)
    q_index = work // NUM_BLOCKS
    kv_head = (q_index // Q_HEADS) * KV_HEADS + (q_index % Q_HEADS) // (Q_HEADS // KV_HEADS)
    thread = metile.thread_id()
    lane = metile.simd_lane_id()
    sg = thread // 32
    num_sg = BLOCK // 32
    per_lane = D // 32
    sg_max = metile.shared(BLOCK, dtype="f32")
    sg_sum = metile.shared(BLOCK, dtype="f32")
    sg_out = metile.shared(D * num_sg, dtype="f32")
    q = [metile.load(Q + q_index * D + lane * per_lane + c) * scale for c in range(per_lane)]
    run_max = metile.scalar(-1e30)
    run_sum = metile.scalar(0.0)
    run_out = [metile.scalar(0.0) for _ in range(per_lane)]
    start = (work % NUM_BLOCKS) * TOKENS_PER_BLOCK
    stop = metile.minimum(start + TOKENS_PER_BLOCK, N)
    for token in metile.tile_range(start + sg, stop, num_sg):
        row = (kv_head * N + token) * D
        s = 0.0
        for c in range(per_lane):
            s = s + q[c] * metile.load(K + row + lane * per_lane + c)
        s = metile.simd_sum(s)
        new_max = metile.maximum(run_max, s)
        shrink = metile.fast_exp(run_max - new_max)
        p = metile.fast_exp(s - new_max)
        run_sum = run_sum * shrink + p
        for c in range(per_lane):
            run_out[c] = run_out[c] * shrink + p * metile.load(V + row + lane * per_lane + c)
        run_max = new_max
    metile.store(sg_max + thread, run_max)
    metile.store(sg_sum + thread, run_sum)
    for c in range(per_lane):
        metile.store(sg_out + (lane * per_lane + c) * num_sg + sg, run_out[c])
    metile.barrier()
    src_ok = lane < num_sg
    src = metile.minimum(lane, num_sg - 1)
    m_src = metile.where(src_ok, metile.load(sg_max + src * 32), -1e30)
    m_block = metile.simd_max(m_src)
    f_src = metile.where(src_ok, metile.fast_exp(m_src - m_block), 0.0)
    s_block = metile.simd_sum(metile.where(src_ok, metile.load(sg_sum + src * 32), 0.0) * f_src)
    metile.store(PartMax + work * 32 + sg, m_block, mask=lane == 0)
    metile.store(PartSum + work * 32 + sg, s_block, mask=lane == 0)
    for chunk in range(0, 32, num_sg):
        for c in range(per_lane):
            dim = (sg + chunk) * per_lane + c
            o = metile.where(src_ok, metile.load(sg_out + dim * num_sg + src), 0.0)
            metile.store(PartOut + work * D + dim, metile.simd_sum(o * f_src), mask=lane == 0)


@metile.kernel
def decode_attention_merge(PartOut, PartMax, PartSum, Out, D: metile.constexpr,
                           NUM_BLOCKS: metile.constexpr, BLOCK: metile.constexpr):
    # Lane b of every simdgroup reads block b's statistics (b < NUM_BLOCKS <= 32); each
    # simdgroup then produces D // num_sg of the head's output dimensions.
    head = metile.program_id(0)
    thread = metile.thread_id()
    lane = metile.simd_lane_id()
    sg = thread // 32
    dims_per_sg = D // (BLOCK // 32)
    ok = lane < NUM_BLOCKS
    src = head * NUM_BLOCKS + metile.minimum(lane, NUM_BLOCKS - 1)
    m_src = metile.where(ok, metile.load(PartMax + src * 32), -1e30)
    f_src = metile.where(ok, metile.fast_exp(m_src - metile.simd_max(m_src)), 0.0)
    denom = metile.simd_sum(metile.where(ok, metile.load(PartSum + src * 32), 0.0) * f_src)
    for c in range(dims_per_sg):
        dim = sg * dims_per_sg + c
        o = metile.where(ok, metile.load(PartOut + src * D + dim), 0.0)
        metile.store(Out + head * D + dim, metile.simd_sum(o * f_src) / denom, mask=lane == 0)
