"""No access leaves its buffer (docs/semantics.md): loads outside read 0, stores outside are dropped,
check_bounds / METILE_CHECK=1 report the first such access with its source line, `unchecked`
drops the guards; tile_load/tile_store default to the matrix (extent // stride, stride), so the
seed GEMM is exact on ragged shapes."""

import numpy as np
import pytest

import metile
from kernels import matmul  # the suite GEMM (tile_load with bounds, dot, tile_store)

SENTINEL = -777.0


def _reports(device, kern, *args, **kw):
    """Launches; on interp (the checker) expects the report of the first bad access instead."""
    if device.name != "interp":
        kern[(1,)](*args, **kw)
        return False
    with pytest.raises(metile.MetileError, match="outside buffer"):
        kern[(1,)](*args, **kw)
    return True


@metile.kernel
def wild(X, Idx, Out, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    idx = metile.load(Idx + offs)
    v = metile.load(X + idx)  # indices far past the end, negative, huge
    metile.store(Out + idx, v + 1.0)  # stores at the same wild places
    metile.store(Out + offs * 1000003, v)  # a huge stride
    metile.store(Out + BLOCK + offs, v)  # in range: the loads' values


def test_wild_kernel_stays_inside_its_buffers(device):
    block = 64
    r = np.random.default_rng(0)
    n = 4 * block
    idx = r.integers(-2**31, 2**31 - 1, block).astype(np.int32)
    idx[:8] = np.arange(8) * 3  # a few in range
    idx[8:16] = -np.arange(1, 9)  # just before the start
    idx[16:24] = n + np.arange(8)  # just past the end
    x = r.random(n).astype(np.float32)
    out = np.full(n, SENTINEL, np.float32)
    if _reports(device, wild, x, idx, out, BLOCK=block):
        return
    inside = (idx >= 0) & (idx < n)
    vals = np.where(inside, x[np.clip(idx, 0, n - 1)], 0.0).astype(np.float32)
    np.testing.assert_array_equal(out[block:2 * block], vals)
    expect = np.full(n, SENTINEL, np.float32)
    for lane in np.nonzero(inside)[0]:  # the stores in program order
        expect[idx[lane]] = vals[lane] + 1.0
    expect[0] = vals[0]  # offs * 1000003 is inside only for lane 0
    expect[block:2 * block] = vals
    np.testing.assert_array_equal(out, expect)


def test_wild_kernel_leaves_a_neighbouring_buffer_intact(device):
    block = 64
    n = 2 * block
    # One allocation: Out is its middle third, the outer thirds are its neighbours.
    arr = np.full(3 * n, SENTINEL, np.float32)
    x = np.arange(n, dtype=np.float32)
    idx = np.concatenate([np.arange(-32, 0), np.arange(n, n + 32)]).astype(np.int32)
    out = arr[n:2 * n]
    _reports(device, wild, x, idx, out, BLOCK=block)
    assert (arr[:n] == SENTINEL).all(), "a store landed before the output"
    assert (arr[2 * n:] == SENTINEL).all(), "a store landed after the output"


@metile.kernel
def off_the_end(X, Out, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    metile.store(Out + offs, metile.load(X + offs + N))


def test_check_bounds_reports_the_first_bad_access_with_its_line(device):
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    with pytest.raises(metile.MetileError) as e:
        off_the_end[(1,)](x, out, 8, BLOCK=64, check_bounds=True)
    assert "test_bounds.py" in str(e.value), str(e.value)
    # In range: no report.
    off_the_end[(1,)](x, out, 0, BLOCK=64, check_bounds=True)
    np.testing.assert_array_equal(out, x)


def _off_the_end_again():
    """The same ops as off_the_end, traced from other lines (as a copy in another file is)."""
    @metile.kernel
    def off_the_end(X, Out, N, BLOCK: metile.constexpr):
        offs = metile.arange(0, BLOCK)
        metile.store(Out + offs, metile.load(X + offs + N))
    return off_the_end


def test_the_same_ops_from_another_line_report_their_own_line(device):
    # Both copies compile to the same code, but a report names the copy that ran: the compile
    # cache must not hand the second the first's source locations.
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    lines = []
    for kernel in (off_the_end, _off_the_end_again()):
        with pytest.raises(metile.MetileError) as e:
            kernel[(1,)](x, out, 8, BLOCK=64, check_bounds=True)
        line = kernel.fn.__code__.co_firstlineno + 3  # the load
        assert f"test_bounds.py:{line}" in str(e.value), (line, str(e.value))
        lines.append(line)
    assert lines[0] != lines[1]


def test_out_of_range_loads_read_zero_and_unchecked_runs(device):
    if device.name == "interp":
        pytest.skip("the interp device reports every bad access (the checker)")
    x = np.arange(64, dtype=np.float32)
    out = np.full(64, SENTINEL, np.float32)
    off_the_end[(1,)](x, out, 8, BLOCK=64)
    np.testing.assert_array_equal(out, np.concatenate([x[8:], np.zeros(8, np.float32)]))
    out2 = np.full(64, SENTINEL, np.float32)
    off_the_end[(1,)](x, out2, 0, BLOCK=64, unchecked=True)  # in range: same result unguarded
    np.testing.assert_array_equal(out2, x)


# The seed README GEMM, verbatim (seeds/003): no bounds, yet exact on ragged shapes.
@metile.kernel
def gemm(A, B, C, M, N, K,
         BLOCK_M: metile.constexpr, BLOCK_N: metile.constexpr,
         BLOCK_K: metile.constexpr):
    pid_m = metile.program_id(0)
    pid_n = metile.program_id(1)
    acc = metile.zeros((BLOCK_M, BLOCK_N), dtype="f32")
    for k in metile.tile_range(0, K, BLOCK_K):
        a = metile.tile_load(A, pid_m * BLOCK_M, k, K, (BLOCK_M, BLOCK_K))
        b = metile.tile_load(B, k, pid_n * BLOCK_N, N, (BLOCK_K, BLOCK_N))
        acc = metile.dot(a, b, acc)
    metile.tile_store(C, pid_m * BLOCK_M, pid_n * BLOCK_N, N, acc, (BLOCK_M, BLOCK_N))


@pytest.mark.parametrize("m,n,k", [(100, 72, 50), (33, 65, 7), (64, 64, 64), (1, 5, 3)])
def test_seed_gemm_is_exact_on_ragged_shapes(device, m, n, k):
    r = np.random.default_rng(m * n + k)
    a = r.standard_normal((m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    # C sits between two guard rows: a store past the matrix would show there.
    c_all = np.full((m + 2, n), SENTINEL, np.float32)
    c = c_all[1:m + 1]
    assert c.flags["C_CONTIGUOUS"]
    gemm[(metile.cdiv(m, 32), metile.cdiv(n, 32))](a, b, c, m, n, k,
                                                    BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, allow_tf32=False)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-4)
    assert (c_all[0] == SENTINEL).all() and (c_all[-1] == SENTINEL).all()


@metile.kernel
def tile_copy(X, Out, R, C, BR: metile.constexpr, BC: metile.constexpr):
    t = metile.tile_load(X, 0, 0, C, (BR, BC), bounds=(R, C - 1))  # bounds= overrides
    metile.tile_store(Out, 0, 0, C, t, (BR, BC))


def test_tile_load_bounds_override_the_default(device):
    r_, c_ = 5, 6
    x = np.arange(r_ * c_, dtype=np.float32).reshape(r_, c_) + 1
    out = np.full((r_, c_), SENTINEL, np.float32)
    tile_copy[(1,)](x, out, r_, c_, BR=8, BC=8)
    ref = x.copy()
    ref[:, -1] = 0  # outside the given bounds: read as 0, stored inside the default matrix
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("kernel", ["suite", "seed"])
@pytest.mark.parametrize("m_real", [80, 0])
def test_a_gemm_whose_bounds_reach_past_a_stays_inside_it(device, kernel, m_real):
    # The suite GEMM's bounds=(M, K) claim 192 rows of A (the seed GEMM's default matrix is A's
    # whole buffer); A holds 80 rows, or less than one: the rows past it read 0. On sm_90 the
    # checked program's A and B are TMA copies whose tensor the runtime keeps inside the buffer
    # as the bounds pass does (runtime/cuda/tma_map.h, TmaMap.ClampedBoundsFollowTheBoundsPass);
    # with no whole row left it runs the build without TMA.
    m, n, k = 192, 128, 64
    rng = np.random.default_rng(5)
    a = rng.standard_normal((max(m_real, 1), k)).astype(np.float16)
    a = a[:m_real] if m_real else a[0, : k // 2].copy()
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, dtype=np.float32)
    launch = (matmul if kernel == "suite" else gemm)[(metile.cdiv(m, 64), metile.cdiv(n, 128))]
    options = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, num_stages=3)
    if device.name == "cuda" and device.architecture.startswith("sm_90"):
        assert "tma_load" in launch.compile(a, b, c, m, n, k, **options).source("gpu_ir")
    if device.name == "interp" and kernel == "suite":  # interp reports the access instead
        with pytest.raises(metile.DeviceError, match="outside buffer `A`"):
            launch(a, b, c, m, n, k, **options)
        return
    launch(a, b, c, m, n, k, **options)
    metile.synchronize()
    if m_real:
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.linalg.norm(c[:m_real] - want) / np.linalg.norm(want) < 1e-5
    assert np.all(c[m_real:] == 0)  # rows past A's buffer read 0


@metile.kernel
def claimed_rows(X, Out, R, ROW, BR: metile.constexpr):
    t = metile.tile_load(X, ROW, 0, 4, (BR, 4), bounds=(R, 4))  # R may claim more rows than X has
    metile.tile_store(Out, ROW, 0, 4, t, (BR, 4), bounds=(R, 4))


# (rows of X, rows of Out, claimed rows, first row of the tile, reported): a tile that touches
# a claimed row past X (load) or past Out (store) is an access outside its buffer; one that
# reaches past the claim but not past the buffers is not.
@pytest.mark.parametrize("x_rows,out_rows,rows,row,bad", [
    (2, 8, 8, 0, True), (2, 8, 8, 4, True), (8, 2, 8, 0, True),
    (2, 8, 2, 0, False), (2, 8, 1, 0, False), (8, 8, 8, 4, False)])
def test_check_bounds_reports_given_bounds_past_the_buffer(device, x_rows, out_rows, rows, row, bad):
    x = np.arange(x_rows * 4, dtype=np.float32).reshape(x_rows, 4) + 1
    out = np.full((out_rows, 4), SENTINEL, np.float32)
    if bad:
        with pytest.raises(metile.MetileError, match="outside"):
            claimed_rows[(1,)](x, out, rows, row, BR=4, check_bounds=True)
        return
    claimed_rows[(1,)](x, out, rows, row, BR=4, check_bounds=True)
    want = np.full((out_rows, 4), SENTINEL, np.float32)
    end = min(row + 4, rows)
    want[row:end] = x[row:end]
    np.testing.assert_array_equal(out, want)


@metile.kernel
def past_the_end(X, Out, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    metile.store(Out + offs, metile.load(X + offs + 1))


def test_metile_check_set_in_process_applies_to_the_next_launch(monkeypatch):
    # The Python launcher keeps compiled kernels; one compiled before METILE_CHECK changed must
    # not answer after it (the library reads the variable when it compiles).
    if "cpu" not in metile.devices():
        pytest.skip("no cpu device")
    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    with metile.use_device("cpu"):
        past_the_end[(1,)](x, out, BLOCK=8)
        np.testing.assert_array_equal(out, np.append(x[1:], 0))  # the read past the end is 0
        monkeypatch.setenv("METILE_CHECK", "1")
        with pytest.raises(metile.MetileError, match="outside its buffer"):
            past_the_end[(1,)](x, out, BLOCK=8)
        monkeypatch.delenv("METILE_CHECK")
        past_the_end[(1,)](x, out, BLOCK=8)
