"""Block pointers and tensor descriptors, as Triton's tutorial 08 and its users write them
(`import metile as tl`, `@tl.jit`): a GEMM whose A and B blocks advance along K with
`tl.advance` inside a `tl.range` loop, with ragged shapes and boundary checks; B read through
a transposed view (strides swapped); 1-D blocks with padding; a tensor-descriptor copy; and the
errors for misuse. Every device, against float64 numpy."""

import numpy as np
import pytest

import metile as tl


@tl.jit
def matmul_block_ptr(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K),
                                order=(1, 0))
    b_block = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                offsets=(0, pid_n * BLOCK_N), block_shape=(BLOCK_K, BLOCK_N),
                                order=(1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in tl.range(0, K, BLOCK_K):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N),
                                block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    tl.store(c_block, acc, boundary_check=(0, 1))


def run_matmul(m, n, k, b_transposed, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    if b_transposed:  # B is the transpose of an n x k row-major array: strides (1, k)
        bt = rng.standard_normal((n, k)).astype(np.float32)
        b, b_strides = bt.T, (1, k)
        b_arg = bt
    else:
        b = rng.standard_normal((k, n)).astype(np.float32)
        b_strides, b_arg = (n, 1), b
    c = np.full((m, n), np.nan, dtype=np.float32)
    grid = (tl.cdiv(m, 32), tl.cdiv(n, 32))
    matmul_block_ptr[grid](a, b_arg, c, m, n, k, k, 1, *b_strides, n, 1,
                           BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    return c, want


@pytest.mark.parametrize("m,n,k", [(64, 64, 32), (45, 70, 37), (1, 33, 100)])
@pytest.mark.parametrize("b_transposed", [False, True], ids=["b_row_major", "b_transposed_view"])
def test_block_pointer_matmul_matches_float64(device, m, n, k, b_transposed):
    c, want = run_matmul(m, n, k, b_transposed, seed=m * 7 + n + k)
    assert not np.isnan(c).any(), "every element written"
    err = np.linalg.norm(c - want) / np.linalg.norm(want)
    assert err < 1e-5, err


def test_block_pointer_matmul_becomes_tile_loads():
    """The compiler's pointer_tiles pass stages a block pointer's block as it stages tile_load:
    its offsets start at 0 and advance by BLOCK_K, so 0 <= index holds and the bounds are the
    tile's."""
    m = n = k = 64
    a, b, c = (np.zeros((m, k), np.float16), np.zeros((k, n), np.float16),
               np.zeros((m, n), np.float32))
    with tl.use_device("interp"):
        kern = matmul_block_ptr[(2, 2)].compile(a, b, c, m, n, k, k, 1, n, 1, n, 1,
                                                 BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
        opt = kern.source("tile_ir_opt")
    assert opt.count("tile_load ") == 2 and opt.count("tile_store ") == 1, opt
    assert " load " not in opt and "ptr_offset" not in opt, opt


@tl.jit
def shifted_copy(x_ptr, out_ptr, n, shift, BLOCK: tl.constexpr, PAD: tl.constexpr):
    pid = tl.program_id(0)
    src = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(pid * BLOCK + shift,),
                            block_shape=(BLOCK,), order=(0,))
    dst = tl.make_block_ptr(out_ptr, shape=(n,), strides=(1,), offsets=(pid * BLOCK,),
                            block_shape=(BLOCK,), order=(0,))
    tl.store(dst, tl.load(src, boundary_check=(0,), padding_option=PAD), boundary_check=(0,))


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("shift", [-5, 0, 7])
def test_one_dimensional_blocks_pad_outside_the_tensor(device, pad, shift):
    n = 100
    x = np.arange(n, dtype=np.float32) + 1
    out = np.full(n + 8, -1.0, dtype=np.float32)
    shifted_copy[(tl.cdiv(n, 32),)](x, out, n, shift, BLOCK=32, PAD=pad)
    idx = np.arange(n) + shift
    fill = 0.0 if pad == "zero" else np.nan
    want = np.where((idx >= 0) & (idx < n), x[np.clip(idx, 0, n - 1)], fill)
    np.testing.assert_array_equal(out[:n], want)
    assert (out[n:] == -1).all(), "nothing written past n"


@tl.jit
def rows_only_check(x_ptr, out_ptr, rows, COLS: tl.constexpr, BLOCK_R: tl.constexpr):
    # Only the rows are checked: the block's columns are the whole (COLS-wide) row.
    pid = tl.program_id(0)
    at, block = (pid * BLOCK_R, 0), (BLOCK_R, COLS)
    src = tl.make_block_ptr(x_ptr, (rows, COLS), (COLS, 1), at, block, (1, 0))
    dst = tl.make_block_ptr(out_ptr, (rows, COLS), (COLS, 1), at, block, (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0,)) * 2.0, boundary_check=(0,))


def test_boundary_check_of_one_dimension(device):
    rows, cols = 37, 16
    x = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)
    out = np.full((rows + 2, cols), 5.0, dtype=np.float32)
    rows_only_check[(tl.cdiv(rows, 8),)](x, out, rows, COLS=cols, BLOCK_R=8)
    np.testing.assert_array_equal(out[:rows], x * 2)
    assert (out[rows:] == 5).all()


@tl.jit
def descriptor_transpose(x_ptr, out_ptr, M, N, BLOCK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1],
                                    block_shape=[BLOCK, BLOCK])
    dst = tl.make_tensor_descriptor(out_ptr, shape=[N, M], strides=[M, 1],
                                    block_shape=[BLOCK, BLOCK])
    block = src.load([pid_m * BLOCK, pid_n * BLOCK])
    dst.store([pid_n * BLOCK, pid_m * BLOCK], tl.trans(block))


def test_tensor_descriptor_transpose(device):
    m, n = 45, 70
    x = np.random.default_rng(4).standard_normal((m, n)).astype(np.float32)
    out = np.full((n, m), np.nan, dtype=np.float32)
    descriptor_transpose[(tl.cdiv(m, 16), tl.cdiv(n, 16))](x, out, m, n, BLOCK=16)
    np.testing.assert_array_equal(out, x.T)


@tl.jit
def misuse(x_ptr, n, WHAT: tl.constexpr):
    bp = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (32,), (0,))
    if WHAT == "mask":
        tl.load(bp, mask=tl.arange(0, 32) < n)
    elif WHAT == "check_on_plain_pointer":
        tl.load(x_ptr + tl.arange(0, 32), boundary_check=(0,))
    elif WHAT == "check_out_of_range":
        tl.load(bp, boundary_check=(1,))
    elif WHAT == "padding":
        tl.load(bp, boundary_check=(0,), padding_option="one")
    elif WHAT == "order":
        tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (0, 0))
    elif WHAT == "rank":
        tl.make_block_ptr(x_ptr, (n, n), (1,), (0, 0), (16, 16), (1, 0))
    elif WHAT == "advance":
        tl.advance(x_ptr, (16,))


@pytest.mark.parametrize("what,message", [
    ("mask", "takes boundary_check (and padding_option), not mask/other"),
    ("check_on_plain_pointer", "boundary_check and padding_option need a block pointer"),
    ("check_out_of_range", "names a dimension outside 0..0"),
    ("padding", "padding_option 'one' is not 'zero' or 'nan'"),
    ("order", "order (0, 0) is not a permutation of 0..1"),
    ("rank", "strides must be a tuple of 2 entries"),
    ("advance", "advance needs a block pointer"),
])
def test_misuse_is_an_error_naming_it(device, what, message):
    x = np.zeros(64, dtype=np.float32)
    with pytest.raises(tl.TracingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        misuse[(1,)](x, 64, WHAT=what)
