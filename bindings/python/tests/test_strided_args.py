"""Strided numpy views passed in place (issue 32 item 2): the kernel indexes them with the
strides it is given, writes land in the caller's array, and the bounds guard allows exactly
the bytes the view spans."""

import numpy as np
import pytest

import metile


@metile.kernel
def affine2d(X, Out, M, N, sxm, sxn, som, son, BM: metile.constexpr, BN: metile.constexpr):
    rm = metile.arange(0, BM)
    rn = metile.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    x = metile.load(X + rm[:, None] * sxm + rn[None, :] * sxn, mask=m)
    metile.store(Out + rm[:, None] * som + rn[None, :] * son, x * 2.0 + 1.0, mask=m)


def _run(x, out):
    m, n = x.shape
    es = x.itemsize
    affine2d[(1,)](x, out, m, n, x.strides[0] // es, x.strides[1] // es,
                   out.strides[0] // es, out.strides[1] // es, BM=16, BN=16)


def _expect(x):
    return (x.astype(np.float64) * 2 + 1).astype(np.float32)


def test_transposed_and_sliced_views_in_place(device):
    base = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    for view in (base.T, base[:, 2:7], base[::2], base[1:9:3, ::2]):
        out_base = np.full((16, 16), -1, np.float32)
        out = out_base[: view.shape[0], : view.shape[1]]       # a sliced output
        _run(view, out)
        np.testing.assert_array_equal(out, _expect(view))
        rest = out_base.copy()
        rest[: view.shape[0], : view.shape[1]] = -1
        assert (rest == -1).all()                              # nothing outside the view
    # A transposed output: writes land in the caller's array through its strides.
    x = np.arange(6 * 9, dtype=np.float32).reshape(6, 9)
    out_base = np.zeros((9, 6), np.float32)
    _run(x, out_base.T)
    np.testing.assert_array_equal(out_base, _expect(x).T)
    # Strided views of another dtype keep their strides too (a second specialization).
    xi = np.arange(60, dtype=np.float32).reshape(6, 10)[::3, 1::4]
    oi = np.zeros((4, 8), np.float32)[::2, ::3]
    _run(xi, oi)
    np.testing.assert_array_equal(oi, _expect(xi))


def test_read_only_and_broadcast_views(device):
    x = np.arange(40, dtype=np.float32).reshape(4, 10)[:, ::3]
    x.flags.writeable = False
    out = np.zeros(x.shape, np.float32)
    _run(x, out)
    np.testing.assert_array_equal(out, _expect(x))
    row = np.broadcast_to(np.arange(5, dtype=np.float32), (3, 5))  # zero row stride
    out = np.zeros((3, 5), np.float32)
    _run(row, out)
    np.testing.assert_array_equal(out, _expect(row))


@metile.kernel
def store_at(Out, I, V):
    metile.store(Out + I, V)


def test_bounds_guard_uses_the_view_span(device):
    base = np.zeros(20, np.float32)
    view = base[2:12:3]            # elements 2, 5, 8, 11: spans 10 elements from its first
    store_at[(1,)](view, 9, 7.0)   # the view's last element, through a raw index
    assert base[11] == 7.0
    with pytest.raises(metile.DeviceError, match="outside (its )?buffer"):
        store_at[(1,)](view, 10, 7.0, check_bounds=True)
    assert base[12] == 0


def test_negative_strides_are_refused_with_a_reason(device):
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with pytest.raises(metile.InvalidArgumentError, match="negative strides"):
        _run(x[::-1], np.zeros((4, 4), np.float32))


def test_empty_views(device):
    x = np.zeros((4, 10), np.float32)[:, 3:3]
    out = np.zeros((4, 10), np.float32)[:, 5:5]
    _run(x, out)   # launches over nothing, writes nothing


class _Tensor:
    """A DLPack producer other than numpy (as a torch or CuPy tensor is) over a numpy view: the
    kernel takes it through the DLPack import, strides and offset included."""

    def __init__(self, arr):
        self.arr, self.dtype, self.shape, self.strides = arr, arr.dtype, arr.shape, arr.strides
        self.itemsize = arr.itemsize

    def __dlpack__(self, **kwargs):
        kwargs.pop("max_version", None)
        return self.arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_strided_dlpack_tensors_in_place(device):
    """Transposed, sliced and stepped DLPack views in, a sliced and a transposed DLPack output:
    writes land in the producer's memory and nowhere else, on a first (prepared) call and on
    cached calls with other views of the same dtype."""
    if device.name in ("cuda", "metal"):
        pytest.skip("this producer's memory is numpy's, which a GPU without HMM (cuda) or memory "
                    "not page-aligned (metal) cannot be used in place through DLPack; "
                    "tests/gpu/test_torch_roundtrip.py passes strided torch views on cuda")
    base = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
    for view in (base.T, base[:, 2:7], base[::2], base[1:9:3, ::2]):
        out_base = np.full((16, 16), -1, np.float32)
        out = out_base[1: view.shape[0] + 1, 2: view.shape[1] + 2]
        _run(_Tensor(view), _Tensor(out))
        np.testing.assert_array_equal(out, _expect(view))
        rest = out_base.copy()
        rest[1: view.shape[0] + 1, 2: view.shape[1] + 2] = -1
        assert (rest == -1).all()
    x = np.arange(6 * 9, dtype=np.float32).reshape(6, 9)
    out_base = np.zeros((9, 6), np.float32)
    _run(_Tensor(x), _Tensor(out_base.T))
    np.testing.assert_array_equal(out_base, _expect(x).T)


def test_from_dlpack_of_a_strided_view_names_the_strides():
    with pytest.raises(metile.InvalidArgumentError,
                       match=r"not compact row-major \(strides \(4, 2\) for shape \(4, 2\)\).*"
                             "pass it to a kernel"):
        metile.from_dlpack(_Tensor(np.zeros((4, 4), np.float32)[:, ::2]), "interp")


def test_a_dlpack_view_with_a_negative_stride_is_refused_by_name(device):
    x = np.arange(16, dtype=np.float32).reshape(4, 4)[::-1]
    with pytest.raises(metile.InvalidArgumentError, match=r"strides \(-4, 1\).*negative stride"):
        _run(_Tensor(x), _Tensor(np.zeros((4, 4), np.float32)))
