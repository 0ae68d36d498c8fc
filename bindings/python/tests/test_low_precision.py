"""Packed 4-bit values, E8M0 scales, dot_scaled and the weight-only quantization examples
(int4_gemv.py, int4_gemm.py, mxfp4_gemm.py) on every device against float64 references built
here from the format definitions: all 256 bytes of each decode, the low-nibble-first order on
both axes, dot_scaled on every format with and without block scales, ragged shapes, and bad
input named (operand, format and shape)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import metile

BINDINGS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(BINDINGS, "..", "..", "examples", "python")
sys.path.insert(0, EXAMPLES)
import int4_gemm as IG  # noqa: E402
import int4_gemv as IV  # noqa: E402
import mxfp4_gemm as MX  # noqa: E402
from gemv import from_bf16_bits, make, values  # noqa: E402

BYTES = np.arange(256, dtype=np.uint8)


def e2m1(code):
    """E2M1 from its definition: sign, 2 exponent bits (bias 1), 1 mantissa bit."""
    sign = -1.0 if code & 8 else 1.0
    e, m = (code >> 1) & 3, code & 1
    return sign * (m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1))


E2M1 = np.array([e2m1(c) for c in range(16)])


def e8m0(b):
    return np.nan if b == 255 else 2.0 ** (int(b) - 127)


@metile.kernel
def decode_kernel(P, O1, O2, E, C, B: metile.constexpr, DT: metile.constexpr):
    i = metile.arange(0, B)
    p = metile.load(P + i)
    j = metile.arange(0, 2 * B)
    metile.store(O1 + j, metile.unpack_e2m1(p, dtype=DT))
    metile.store(O2 + j, metile.unpack_uint4(p))
    metile.store(E + i, metile.e8m0_to_float(p, DT))
    metile.store(C + i, metile.e2m1_to_float(p & 15, DT))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_every_byte_decodes_as_defined(device, dtype):
    bufs = [metile.Buffer.zeros((512,), dtype), metile.Buffer.zeros((512,), "i32"),
            metile.Buffer.zeros((256,), dtype), metile.Buffer.zeros((256,), dtype)]
    decode_kernel[(1,)](metile.Buffer(data=BYTES), *bufs, B=256, DT=dtype)
    got = [values(b) if b.metile_dtype != "i32" else b.numpy() for b in bufs]
    lo, hi = BYTES & 15, BYTES >> 4
    assert np.array_equal(got[0], np.stack([E2M1[lo], E2M1[hi]], 1).reshape(-1))
    assert np.array_equal(np.signbit(got[0]), np.signbit(np.stack([E2M1[lo], E2M1[hi]], 1)
                                                         .reshape(-1)))
    assert np.array_equal(got[1], np.stack([lo, hi], 1).reshape(-1))
    assert np.array_equal(got[2], np.array([e8m0(b) for b in BYTES]), equal_nan=True)
    assert np.array_equal(got[3], E2M1[lo])


@metile.kernel
def unpack_2d(P, O, R: metile.constexpr, C: metile.constexpr, AXIS: metile.constexpr):
    p = metile.tile_load(P, 0, 0, C, (R, C))
    v = metile.unpack_e2m1(p, axis=AXIS)
    if AXIS == 0:
        metile.tile_store(O, 0, 0, C, v, (2 * R, C))
    else:
        metile.tile_store(O, 0, 0, 2 * C, v, (R, 2 * C))


@pytest.mark.parametrize("axis", [0, 1])
def test_unpack_interleaves_low_nibble_first_on_either_axis(device, axis):
    p = np.random.default_rng(axis).integers(0, 256, (8, 16), dtype=np.uint8)
    out = metile.Buffer.zeros((16, 16) if axis == 0 else (8, 32), "f32")
    unpack_2d[(1,)](metile.Buffer(data=p), out, R=8, C=16, AXIS=axis)
    lo, hi = E2M1[p & 15], E2M1[p >> 4]
    want = np.stack([lo, hi], axis + 1).reshape(out.shape)
    assert np.array_equal(out.numpy(), want)


FMT_DTYPE = {"e4m3": "f8e4m3", "e5m2": "f8e5m2", "bf16": "bf16", "fp16": "f16"}


def _operand(fmt, rows, cols, k_axis, rng):
    """(device data as a Buffer, float64 values, dtype) of one dot_scaled operand [rows, cols]
    with K along k_axis; e2m1 packs along K, low nibble first."""
    if fmt == "e2m1":
        codes = rng.integers(0, 16, (rows, cols), dtype=np.uint8)
        if k_axis == 1:
            packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
        else:
            packed = codes[0::2, :] | (codes[1::2, :] << 4)
        return metile.Buffer(data=np.ascontiguousarray(packed, np.uint8)), E2M1[codes], "u8"
    if fmt in ("e4m3", "e5m2"):
        import test_float8 as F
        codes = rng.integers(0, 256, (rows, cols), dtype=np.uint8)
        vals = F.table(FMT_DTYPE[fmt])[codes]
        bad = ~np.isfinite(vals)
        codes[bad] = 0
        vals[bad] = 0
        return metile.Buffer(data=codes, dtype=FMT_DTYPE[fmt]), vals, FMT_DTYPE[fmt]
    buf, vals = make(rng.standard_normal((rows, cols)), "f16" if fmt == "fp16" else "bf16")
    return buf, vals, FMT_DTYPE[fmt]


@metile.kernel
def scaled_kernel(A, SA, B, SB, Out, M: metile.constexpr, N: metile.constexpr,
                  K: metile.constexpr, AF: metile.constexpr, BF: metile.constexpr,
                  HAS_SA: metile.constexpr, HAS_SB: metile.constexpr):
    KA = K // 2 if AF == "e2m1" else K
    KB = K // 2 if BF == "e2m1" else K
    a = metile.tile_load(A, 0, 0, KA, (M, KA))
    b = metile.tile_load(B, 0, 0, N, (KB, N))
    sa = metile.tile_load(SA, 0, 0, K // 32, (M, K // 32)) if HAS_SA else None
    sb = metile.tile_load(SB, 0, 0, K // 32, (N, K // 32)) if HAS_SB else None
    metile.tile_store(Out, 0, 0, N, metile.dot_scaled(a, sa, AF, b, sb, BF), (M, N))


PAIRS = [("e2m1", "bf16"), ("bf16", "e2m1"), ("e2m1", "e2m1"), ("e4m3", "e2m1"),
         ("e5m2", "e4m3"), ("fp16", "e2m1"), ("bf16", "bf16")]


@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("lhs_format,rhs_format", PAIRS)
def test_dot_scaled_matches_float64(device, lhs_format, rhs_format, scaled):
    m, n, k = 16, 16, 64
    rng = np.random.default_rng(len(lhs_format) * 7 + len(rhs_format))
    a, a64, _ = _operand(lhs_format, m, k, 1, rng)
    b, b64, _ = _operand(rhs_format, k, n, 0, rng)
    lo, hi = (124, 131) if "fp16" in (lhs_format, rhs_format) else (110, 145)
    sa = rng.integers(lo, hi, (m, k // 32), dtype=np.uint8)
    sb = rng.integers(lo, hi, (n, k // 32), dtype=np.uint8)
    if scaled:
        a64 = a64 * np.ldexp(1.0, np.repeat(sa.astype(int), 32, 1) - 127)
        b64 = b64 * np.ldexp(1.0, np.repeat(sb.astype(int), 32, 1) - 127).T
    out = metile.Buffer.zeros((m, n), "f32")
    scaled_kernel[(1,)](a, metile.Buffer(data=sa), b, metile.Buffer(data=sb), out, M=m, N=n,
                        K=k, AF=lhs_format, BF=rhs_format, HAS_SA=scaled, HAS_SB=scaled)
    # the scaled operands round to bf16 / f16 only where a format is bf16 / fp16 (exact else)
    want = a64 @ b64
    err = np.abs(out.numpy() - want) / (np.abs(a64) @ np.abs(b64) + 1e-300)
    assert err.max() < 1e-5, f"relative error {err.max():.2e}"



def _run_bad(fn, match):
    @metile.kernel
    def bad(P, Q, S, O):
        fn(P, Q, S)
    args = (metile.Buffer.zeros((256,), "u8"), metile.Buffer.zeros((1024,), "bf16"),
            metile.Buffer.zeros((64,), "u8"), metile.Buffer.zeros((4,), "f32"))
    with pytest.raises(metile.TracingError, match=match):
        bad[(1,)](*args)


def _p(P, r, c):
    return metile.tile_load(P, 0, 0, c, (r, c))


def test_bad_scaled_dots_name_the_operand_and_shape():
    _run_bad(lambda P, Q, S: metile.dot_scaled(_p(Q, 16, 64), None, "bf16", _p(P, 32, 16),
                                               _p(S, 8, 2), "e2m1"),
             r"rhs_scale u8\[8,2\] does not fit rhs u8\[32,16\] in e2m1: need u8\[16,2\]")
    _run_bad(lambda P, Q, S: metile.dot_scaled(_p(Q, 16, 33), None, "bf16", _p(P, 16, 16),
                                               None, "e2m1"),
             r"lhs has K = 33 but rhs has K = 32 \(rhs in e2m1 hold two K values a byte")
    _run_bad(lambda P, Q, S: metile.dot_scaled(_p(Q, 16, 64), None, "fp4", _p(P, 32, 16),
                                               None, "e2m1"),
             r"lhs_format 'fp4' is not one of")
    _run_bad(lambda P, Q, S: metile.dot_scaled(_p(Q, 16, 64), None, "fp16", _p(P, 32, 16),
                                               None, "e2m1"),
             r"lhs in fp16 must be a f16 tile, got bf16")
    _run_bad(lambda P, Q, S: metile.dot_scaled(_p(Q, 16, 64).to("f16"), None, "fp16",
                                               _p(Q, 64, 16), None, "bf16"),
             r"the pair fp16 x bf16 is not supported")
    _run_bad(lambda P, Q, S: metile.dot_scaled(_p(Q, 16, 48), _p(S, 16, 1), "bf16",
                                               _p(Q, 48, 16), None, "bf16"),
             r"lhs_scale .* K = 48 is not a multiple of 32")
    _run_bad(lambda P, Q, S: metile.unpack_e2m1(_p(Q, 4, 4)), r"packed must be a u8 tile")
    _run_bad(lambda P, Q, S: metile.unpack_uint4(_p(P, 4, 4), axis=2), r"axis 2 is out of range")
    _run_bad(lambda P, Q, S: metile.e8m0_to_float(_p(P, 4, 4), "i32"), r"dtype must be one of")


# ------------------------------------------------------------------------------ examples

@pytest.mark.parametrize("group,dtype,m,k,form", [(32, "f16", 1, 296, "words"),
                                                 (64, "bf16", 3, 296, "words"),
                                                 (128, "f16", 16, 296, "words"),
                                                 (64, "f16", 2, 300, "bytes"),
                                                 (128, "bf16", 1, 300, None),
                                                 (32, "bf16", 4, 296, "subnormal"),
                                                 (128, "f16", 1, 296, "subnormal")])
def test_int4_gemv_matches_float64(device, group, dtype, m, k, form):
    n = 37                  # ragged against BLOCK_N = 4, BLOCK_K = 128 and every group size
    rng = np.random.default_rng(group + m)
    (wq, s, b), w64 = IV.quantized(n, k, group, dtype, rng)
    x, x64 = make(rng.standard_normal((m, k)), dtype)
    y = IV.int4_gemv(wq, s, b, x if m > 1 else metile.Buffer(data=x.numpy()[0], dtype=dtype),
                     group=group, block_k=128, form=form)  # K = 300: bytes (4 codes past a word)
    err = (np.abs(values(y).reshape(m, n) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max()
    assert err < IV.tolerance(dtype, k), f"relative error {err:.2e}"


@pytest.mark.parametrize("form", ["subnormal", "words"])
@pytest.mark.parametrize("dtype,lo,hi", [("f16", -24, 6), ("bf16", -56, 40)])
def test_int4_gemv_holds_over_the_activations_range(device, form, dtype, lo, hi):
    """X of magnitudes 2^lo to 2^hi: all of f16's (subnormals to products near its largest), and
    for bf16 the range the subnormal form keeps every product a normal f32 (2^-56 to 2^48)."""
    if device == "metal" and form == "subnormal":
        pytest.skip("Metal GPUs may flush subnormals: the subnormal form is not used there")
    n, k, m = 12, 296, 2
    rng = np.random.default_rng(5)
    (wq, s, b), w64 = IV.quantized(n, k, 64, dtype, rng)
    x, x64 = make(rng.choice([-1.0, 1.0], (m, k)) * 2.0 ** rng.integers(lo, hi + 1, (m, k)), dtype)
    y = IV.int4_gemv(wq, s, b, x, group=64, form=form)
    err = (np.abs(values(y) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max()
    assert err < IV.tolerance(dtype, k), f"relative error {err:.2e}"


@pytest.mark.parametrize("group,dtype", [(32, "bf16"), (128, "f16")])
def test_int4_gemm_matches_float64(device, group, dtype):
    m, n, k = 45, 40, 260
    rng = np.random.default_rng(group)
    (wq, s, b), w64 = IV.quantized(n, k, group, dtype, rng)
    x, x64 = make(rng.standard_normal((m, k)), dtype)
    y = IG.int4_gemm(x, wq, s, b, block_m=16, block_n=16, block_k=32)
    err = (np.abs(values(y) - IG.reference(x64, w64, dtype)) /
           (np.abs(x64) @ np.abs(w64).T)).max()
    assert err < {"f16": 1e-3, "bf16": 8e-3}[dtype], f"relative error {err:.2e}"


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mxfp4_gemm_matches_float64(device, dtype):
    m, n, k = 45, 40, 202   # K even but not a multiple of 32: the last block is short
    rng = np.random.default_rng(3)
    (wq, ws), w64 = MX.quantized(n, k, rng, (124, 130) if dtype == "f16" else (110, 140))
    x, x64 = make(rng.standard_normal((m, k)), dtype)
    y = MX.mxfp4_gemm(x, wq, ws, block_m=16, block_n=16, block_k=64)
    err = (np.abs(values(y) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max()
    assert err < {"f16": 1e-3, "bf16": 8e-3}[dtype], f"relative error {err:.2e}"


@pytest.mark.parametrize("dtype,m,n,k", [("bf16", 70, 72, 136), ("f16", 70, 72, 136),
                                         ("bf16", 150, 200, 458), ("f16", 131, 136, 330)])
def test_mxfp4_gemm_default_tiles_match_float64(device, dtype, m, n, k):
    """Partial tiles on every side at the device's default tiles (cuda: 128 x 128 x 64, the
    warpgroup form with B decoded into two slots and X's ring); the longer K runs over several
    turns of both, its last scale block short (K not a multiple of 32)."""
    rng = np.random.default_rng(4 + k)
    (wq, ws), w64 = MX.quantized(n, k, rng, (124, 130) if dtype == "f16" else (110, 140))
    x, x64 = make(rng.standard_normal((m, k)), dtype)
    y = MX.mxfp4_gemm(x, wq, ws)
    err = (np.abs(values(y) - x64 @ w64.T) / (np.abs(x64) @ np.abs(w64).T)).max()
    assert err < {"f16": 1e-3, "bf16": 8e-3}[dtype], f"relative error {err:.2e}"


def _standin_k_loop(tmp_path, lines: str, kernel: str) -> str:
    """The K loop of the CUDA that sm_90 gets for `kernel` when the child script `lines` (after
    the imports' path set-up) runs on the stand-in driver: compiled, not run."""
    lib = os.environ.get("METILE_LIBRARY", "")
    driver = os.path.join(os.path.dirname(lib), "tests", "cuda_standin",
                          "libmetile_standin_cuda.so")
    if not os.path.exists(driver):
        pytest.skip("the stand-in CUDA driver is not built next to METILE_LIBRARY")
    script = tmp_path / "child.py"
    script.write_text("import sys\n" f"sys.path[:0] = [{BINDINGS!r}, {EXAMPLES!r}]\n" + lines)
    env = dict(os.environ, METILE_CUDA_DRIVER=driver, METILE_DEBUG="cuda",
               METILE_DEBUG_DIR=str(tmp_path))
    env.pop("METILE_DEVICE", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=300)
    if "NVRTC" in r.stderr and r.returncode != 0:
        pytest.skip("NVRTC is not installed")
    assert r.returncode == 0, r.stdout + r.stderr
    cuda = (tmp_path / f"{kernel}.cuda.txt").read_text()
    loop = cuda[cuda.index("  for (int i = ", cuda.index("int(blockIdx.x)")):]  # the K loop
    return loop[:loop.index("\n  }\n")]          # to its closing brace


_MXFP4_CHILD = ("import numpy as np, metile, mxfp4_gemm as MX\n"
                "metile.set_device('cuda')\n"
                "x = metile.Buffer.zeros((256, 256), '{dtype}')\n"
                "MX.mxfp4_gemm(x, metile.Buffer.zeros((256, 128), 'u8'),\n"
                "              metile.Buffer.zeros((256, 8), 'u8'))\n")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_mxfp4_gemm_cuda_decodes_in_registers(tmp_path, dtype):
    """The CUDA that sm_90 gets at cuda's default tiles (compiled, not run, on the stand-in
    driver in a child process): the codes are decoded where they were loaded (the byte repeat
    along K a register copy, the transposes of the weights' bytes cancelled) and the decoded B
    tile goes to threadgroup memory once, K-major with 16-byte stores, into one of two slots for
    the warpgroup MMAs, while X streams through its ring by TMA: one barrier a K step and no
    exchange through scratch memory."""
    loop = _standin_k_loop(tmp_path, _MXFP4_CHILD.format(dtype=dtype), "mxfp4_gemm_kernel")
    assert "scratch" not in loop and loop.count("__syncthreads") == 1, loop
    assert "mt_tma_load_2d" in loop and "mt_vec<ushort, 8>*)(" in loop, loop
    assert loop.count(f"wgmma.mma_async.sync.aligned.m64n128k16.f32.{dtype}.{dtype}") == 4, loop
    assert "mt_mma_" not in loop, loop


def test_mxfp4_gemm_cuda_stored_b_switches_off(tmp_path, monkeypatch):
    """METILE_GPU_OFF=warpgroup_stored_b gives the earlier form: mma.sync, B staged element by
    element, X copied with cp.async and waited for in its own step (two barriers a step)."""
    monkeypatch.setenv("METILE_GPU_OFF", "warpgroup_stored_b")
    loop = _standin_k_loop(tmp_path, _MXFP4_CHILD.format(dtype="bf16"), "mxfp4_gemm_kernel")
    assert loop.count("__syncthreads") == 2 and "mt_mma_bf16" in loop, loop
    assert "mt_cp_async16" in loop and "wgmma" not in loop, loop


def test_int4_gemv_cuda_decodes_subnormals(tmp_path):
    """The CUDA that sm_90 gets at cuda's defaults (compiled, not run, on the stand-in driver in
    a child process): the subnormal form, whose whole-step K loop decodes a code with one and
    (one shift a word for codes 5-7), no or and no magic sum, and exchanges nothing between
    threads."""
    loop = _standin_k_loop(tmp_path, (
        "import metile, int4_gemv as IV\n"
        "metile.set_device('cuda')\n"
        "IV.int4_gemv(metile.Buffer.zeros((64, 512), 'u8'), metile.Buffer.zeros((64, 8), 'bf16'),\n"
        "             metile.Buffer.zeros((64, 8), 'bf16'), metile.Buffer.zeros((1024,), 'bf16'))\n"),
        "int4_gemv_subnormal_kernel")
    decode = [line for line in loop.splitlines() if "mt_bitcast<float>" in line]
    assert len(decode) == 1 and "mt_shr(" in decode[0] and " & " in decode[0], decode
    assert " | " not in loop and "__syncthreads" not in loop and "shfl" not in loop, loop


def test_example_inputs_are_checked():
    rng = np.random.default_rng(0)
    (wq, s, b), _ = IV.quantized(8, 64, 32, "f16", rng)
    x, _ = make(rng.standard_normal((2, 64)), "f16")
    x_odd, _ = make(rng.standard_normal((2, 63)), "f16")
    with pytest.raises(ValueError, match="K = 63 is odd"):
        IV.int4_gemv(wq, s, b, x_odd)
    with pytest.raises(ValueError, match=r"Scales must be \[N, K/G\] = \[8"):
        IV.int4_gemv(wq, metile.Buffer.zeros((7, 2), "f16"), b, x)
    with pytest.raises(ValueError, match="must both be f16 or both bf16"):
        IV.int4_gemv(wq, s, metile.Buffer.zeros((8, 2), "bf16"), x)
    with pytest.raises(ValueError, match="x has 17 rows"):
        IV.int4_gemv(wq, s, b, metile.Buffer.zeros((17, 64), "f16"))
    with pytest.raises(ValueError, match="words form needs K and block_k multiples of 8"):
        IV.int4_gemv(wq, s, b, x, block_k=4, form="words")
    with pytest.raises(ValueError, match="subnormal form needs K and block_k multiples of 8"):
        IV.int4_gemv(wq, s, b, x, block_k=4, form="subnormal")
    with pytest.raises(ValueError, match=r"maxnreg must be an int in \[16, 255\], got 8"):
        IV.int4_gemv(wq, s, b, x, maxnreg=8)
    with pytest.raises(ValueError, match=r"Wq is \[8, 32\], which packs K = 64, but x has K = 66"):
        IG.int4_gemm(metile.Buffer.zeros((3, 66), "f16"), wq, s, b)
    (mq, ms), _ = MX.quantized(8, 64, rng)
    with pytest.raises(ValueError, match=r"Ws must be u8 \[N, ceil\(K/32\)\] = \[8, 2\]"):
        MX.mxfp4_gemm(x, mq, metile.Buffer.zeros((8, 3), "u8"))
    with pytest.raises(ValueError, match="K = 63 is odd"):
        MX.mxfp4_gemm(x_odd, mq, ms)
