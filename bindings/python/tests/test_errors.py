"""Bad input gets a clear error naming the problem (and, for kernel code, the user's line)."""

import inspect

import numpy as np
import pytest

import metile

HERE = __file__


def line_of(fn, text):
    """The source line number of the first line of `fn` containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    for i, l in enumerate(lines):
        if text in l:
            return first + i
    raise AssertionError(text)


@metile.kernel
def add(X, Y, Out, N, BLOCK: metile.constexpr):
    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)
    m = offs < N
    metile.store(Out + offs, metile.load(X + offs, mask=m) + metile.load(Y + offs, mask=m), mask=m)


def _arrays(n=100, dtype=np.float32):
    return [np.zeros(n, dtype) for _ in range(3)]


def test_wrong_argument_count(device):
    x, y, o = _arrays()
    with pytest.raises(metile.InvalidArgumentError, match=r"missing runtime argument\(s\) `N`"):
        add[(1,)](x, y, o, BLOCK=64)
    with pytest.raises(metile.InvalidArgumentError, match=r"`Out`, `N`"):
        add[(1,)](x, y, BLOCK=64)
    with pytest.raises(metile.InvalidArgumentError, match="constexpr.*`BLOCK`.*keyword"):
        add[(1,)](x, y, o, 100)
    with pytest.raises(metile.InvalidArgumentError, match="takes 4 runtime arguments"):
        add[(1,)](x, y, o, 100, 64, 1)
    with pytest.raises(metile.InvalidArgumentError, match="unexpected keyword argument `BLOK`"):
        add[(1,)](x, y, o, 100, BLOK=64)
    with pytest.raises(metile.InvalidArgumentError, match="multiple values for argument `X`"):
        add[(1,)](x, y, o, 100, X=x, BLOCK=64)


def test_constexpr_passed_positionally_is_named(device):
    x, y, o = _arrays()
    with pytest.raises(metile.InvalidArgumentError) as e:
        add[(1,)](x, y, o, 100, 256)
    assert "`BLOCK` is a constexpr and must be passed by keyword (BLOCK=...)" in str(e.value)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int16, np.uint64, object])
def test_unsupported_numpy_dtypes_are_rejected(device, dtype):
    x, y, o = _arrays()
    bad = np.zeros(100, dtype)
    with pytest.raises(metile.InvalidArgumentError) as e:
        add[(1,)](x, bad, o, 100, BLOCK=64)
    msg = str(e.value)
    assert "argument `Y`" in msg and str(np.dtype(dtype)) in msg and "no metile counterpart" in msg


def test_numpy_float64_scalar_is_rejected(device):
    x, y, o = _arrays()

    @metile.kernel
    def scale(X, s, BLOCK: metile.constexpr):
        offs = metile.arange(0, BLOCK)
        metile.store(X + offs, metile.load(X + offs) * s)
    with pytest.raises(metile.InvalidArgumentError, match="`s` is a numpy float64 scalar"):
        scale[(1,)](x, np.float64(2.0), BLOCK=64)
    with pytest.raises(metile.InvalidArgumentError, match="argument `s` is a str"):
        scale[(1,)](x, "2", BLOCK=64)


def test_views_a_kernel_cannot_index_are_rejected(device):
    # Views with positive strides pass in place (test_strided_args.py); negative ones cannot.
    x, y, o = _arrays(200)
    with pytest.raises(metile.InvalidArgumentError, match="argument `Out`.*negative strides"):
        add[(1,)](x, y, o[::-2], 100, BLOCK=64)
    with pytest.raises(metile.InvalidArgumentError, match="not C-contiguous"):
        metile.Buffer(data=np.zeros((8, 8), np.float32).T)


@metile.kernel
def branchy(X, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)
    if metile.sum(x) > 0:  # a device `if` that returns: no run-time form
        return
    metile.store(X + offs, x, mask=offs < N)


@metile.kernel
def logical(X, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    mask = offs < N and offs >= 0
    metile.store(X + offs, 1.0, mask=mask)


def test_python_control_flow_on_traced_values_points_at_the_line(device):
    x = np.zeros(16, np.float32)
    with pytest.raises(metile.TracingError) as e:
        branchy[(1,)](x, 16, BLOCK=16)
    assert f"{HERE}:{line_of(branchy.fn, 'if metile.sum')}" in str(e.value)
    assert "metile.where" in str(e.value)
    with pytest.raises(metile.TracingError) as e:
        logical[(1,)](x, 16, BLOCK=16)
    assert f"{HERE}:{line_of(logical.fn, 'mask = offs < N and')}" in str(e.value)


@metile.kernel
def mismatch(X, Y, BLOCK: metile.constexpr):
    a = metile.load(X + metile.arange(0, BLOCK))
    b = metile.load(Y + metile.arange(0, 2 * BLOCK))
    metile.store(X + metile.arange(0, BLOCK), a + b)


def test_shape_mismatch_points_at_the_line(device):
    x = np.zeros(64, np.float32)
    with pytest.raises(metile.InvalidProgramError) as e:
        mismatch[(1,)](x, x, BLOCK=16)
    msg = str(e.value)
    assert f"{HERE}:{line_of(mismatch.fn, 'a + b')}" in msg
    assert "broadcast" in msg


@metile.kernel
def bad_dot(A, BLOCK: metile.constexpr):
    a = metile.tile_load(A, 0, 0, BLOCK, (BLOCK, BLOCK))
    b = metile.tile_load(A, 0, 0, BLOCK, (2 * BLOCK, BLOCK))
    c = metile.dot(a, b)
    metile.tile_store(A, 0, 0, BLOCK, c, (BLOCK, BLOCK))


@metile.kernel
def bad_tile_store(A, BLOCK: metile.constexpr):
    a = metile.tile_load(A, 0, 0, BLOCK, (BLOCK, BLOCK))
    metile.tile_store(A, 0, 0, BLOCK, a, (BLOCK, 2 * BLOCK))


def test_verifier_errors_name_the_line(device):
    a = np.zeros(256, np.float32)
    with pytest.raises(metile.InvalidProgramError) as e:
        bad_dot[(1,)](a, BLOCK=8)
    assert f"{HERE}:{line_of(bad_dot.fn, 'metile.dot(a, b)')}" in str(e.value)
    with pytest.raises(metile.TracingError) as e:
        bad_tile_store[(1,)](a, BLOCK=8)
    assert f"{HERE}:{line_of(bad_tile_store.fn, 'metile.tile_store')}" in str(e.value)


@metile.kernel
def out_of_bounds(X, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs)
    metile.store(X + offs, x + 1.0)


def test_out_of_bounds_access_is_caught_by_interp():
    if "interp" not in metile.devices():
        pytest.skip("needs interp")
    with metile.use_device("interp"):
        x = np.zeros(10, np.float32)
        with pytest.raises(metile.DeviceError) as e:
            out_of_bounds[(1,)](x, BLOCK=16)
    assert f"{HERE}:{line_of(out_of_bounds.fn, 'x = metile.load')}" in str(e.value)


@metile.kernel
def runtime_size(X, N):
    offs = metile.arange(0, N)
    metile.store(X + offs, 1.0)


@metile.kernel
def store_to_value(X, N, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    metile.store(N + offs, 1.0)


@metile.kernel
def returns(X):
    return metile.program_id(0)


def test_misused_language_functions(device):
    x = np.zeros(16, np.float32)
    with pytest.raises(metile.TracingError, match="arange size must be a compile-time int"):
        runtime_size[(1,)](x, 16)
    with pytest.raises(metile.TracingError, match="store needs a pointer"):
        store_to_value[(1,)](x, 16, BLOCK=16)
    with pytest.raises(metile.TracingError, match="returned a value"):
        returns[(1,)](x)
    with pytest.raises(RuntimeError, match="inside a @metile.kernel"):
        metile.program_id(0)
    with pytest.raises(metile.TracingError, match=r"add\[grid\]"):
        add(x, x, x, 16, BLOCK=16)


def test_buffer_on_another_device_is_rejected():
    names = metile.devices()
    if len(names) < 2:
        pytest.skip("needs two devices")
    a = metile.Buffer.zeros(16, device=names[0])
    with metile.use_device(names[1]):
        with pytest.raises(metile.InvalidArgumentError, match=f"buffer on device {names[0]}"):
            add[(1,)](a, a, a, 16, BLOCK=16)


def test_error_classes_follow_the_status():
    from metile import _errors, _ffi
    assert isinstance(_errors.error_for(_ffi.METILE_ERROR_COMPILE), metile.CompileError)
    assert isinstance(_errors.error_for(_ffi.METILE_ERROR_UNSUPPORTED), metile.UnsupportedError)
    assert isinstance(_errors.error_for(_ffi.METILE_ERROR_OUT_OF_MEMORY), MemoryError)
    assert isinstance(_errors.error_for(_ffi.METILE_ERROR_INVALID_ARGUMENT), ValueError)
    assert issubclass(metile.TracingError, metile.MetileError)


@metile.kernel
def overflowing_literal(X, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs)
    metile.store(X + offs, x * 300)


def test_integer_literals_must_fit_the_value_they_meet(device):
    x = np.zeros(16, np.int8)
    with pytest.raises(metile.TracingError) as e:
        overflowing_literal[(1,)](x, BLOCK=16)
    assert "literal 300 does not fit the i8" in str(e.value)
    assert f"{HERE}:{line_of(overflowing_literal.fn, 'x * 300')}" in str(e.value)
