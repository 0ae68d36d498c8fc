"""Device functions (issue 37 item 2): a helper called from a kernel, decorated with
`@metile.jit` / `@metile.kernel` or plain, is inlined at trace time with its constexpr
arguments; its tile_range loops carry their variables, and a list it updates is carried by the
caller's loop. `metile.jit` is the Triton spelling of `metile.kernel`."""

import numpy as np
import pytest

import metile
import metile as tl


@tl.jit
def leaky(x, SLOPE: tl.constexpr):
    return tl.where(x >= 0, x, x * SLOPE)


@tl.jit
def act(x, ACTIVATION: tl.constexpr):
    if ACTIVATION == "leaky":
        return leaky(x, 0.25)  # a device function calling another
    if ACTIVATION == "square":
        return x * x
    return x


@tl.jit
def row_sum_and_max(X, row, N, BLOCK: tl.constexpr):
    # A loop inside a device function carries its own variables.
    s = tl.zeros((BLOCK,), tl.float32)
    m = tl.full((BLOCK,), -1e30, tl.float32)
    for k in tl.range(0, N, BLOCK):
        offs = k + tl.arange(0, BLOCK)
        x = tl.load(X + row * N + offs, mask=offs < N, other=0.0)
        s += x
        m = tl.maximum(m, tl.where(offs < N, x, -1e30))
    return tl.sum(s, axis=0), tl.max(m, axis=0)


@tl.jit
def add_scaled(acc, x):
    for i in range(len(acc)):
        acc[i] += x * (i + 1)


@tl.jit(do_not_specialize=["N"], debug=False, noinline=True)
def uses_device_functions(X, Out, N, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    s, m = row_sum_and_max(X, row, N, BLOCK)
    parts = [tl.zeros((BLOCK,), tl.float32), tl.zeros((BLOCK,), tl.float32)]
    for k in tl.range(0, N, BLOCK):
        offs = k + tl.arange(0, BLOCK)
        x = tl.load(X + row * N + offs, mask=offs < N, other=0.0)
        add_scaled(parts, act(x, ACTIVATION))
    tl.store(Out + row * 4 + 0, s)
    tl.store(Out + row * 4 + 1, m)
    tl.store(Out + row * 4 + 2, tl.sum(parts[0], axis=0))
    tl.store(Out + row * 4 + 3, tl.sum(parts[1], axis=0))


@pytest.mark.parametrize("activation", ["leaky", "square", "none"])
@pytest.mark.parametrize("n", [5, 64, 100])
def test_device_functions_are_inlined(device, activation, n):
    rows = 3
    x = np.random.standard_normal((rows, n)).astype(np.float32)
    out = np.zeros((rows, 4), np.float32)
    uses_device_functions[(rows,)](x, out, n, ACTIVATION=activation, BLOCK=32)
    x64 = x.astype(np.float64)
    a = {"leaky": np.where(x64 >= 0, x64, 0.25 * x64), "square": x64 * x64, "none": x64}
    ref = np.stack([x64.sum(1), x64.max(1), a[activation].sum(1), 2 * a[activation].sum(1)], 1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_a_device_function_outside_a_kernel_says_what_it_is():
    with pytest.raises(metile.TracingError, match="device function, usable only inside"):
        leaky(1.0, 0.5)


def test_jit_is_kernel():
    assert metile.jit is metile.kernel
    assert isinstance(leaky, metile.KernelFunction)


def test_errors_in_a_device_function_point_at_its_line():
    @tl.jit
    def bad_helper(x):
        return tl.load(x)  # x is not a pointer

    @tl.jit
    def calls_bad(X):
        bad_helper(tl.program_id(0))

    with pytest.raises(metile.TracingError) as e:
        calls_bad[(1,)](np.zeros(1, np.float32))
    assert "load needs a pointer" in str(e.value)
    assert f"{__file__}:" in str(e.value)
