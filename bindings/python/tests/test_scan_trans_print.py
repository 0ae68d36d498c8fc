"""cumsum / cumprod, trans / permute and device_print (issue 17 item 7) on every device,
against a float64 numpy reference and the interp oracle, with ragged masks (inactive lanes) and
the errors for bad input."""

import inspect

import numpy as np
import pytest

import metile


@metile.kernel
def scan_1d(X, Out, N, BLOCK: metile.constexpr, PROD: metile.constexpr,
            REVERSE: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + offs, mask=offs < N)  # lanes >= N are inactive: they add nothing
    y = metile.cumprod(x, 0, reverse=REVERSE) if PROD else x.cumsum(axis=0, reverse=REVERSE)
    metile.store(Out + offs, y)  # inactive lanes are not stored


def reference_scan(x, prod, reverse, axis=0):
    x = np.flip(x, axis) if reverse else x
    r = np.cumprod(x, axis) if prod else np.cumsum(x, axis)
    return np.flip(r, axis) if reverse else r


@pytest.mark.pairwise("dtype", "prod", "reverse")
@pytest.mark.parametrize("dtype", ["f32", "i32", "f16"])
@pytest.mark.parametrize("prod", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_1d_ragged(device, dtype, prod, reverse):
    block, n = 256, 203
    rng = np.random.default_rng(7)
    npt = {"f32": np.float32, "i32": np.int32, "f16": np.float16}[dtype]
    if dtype == "i32":
        x = rng.integers(-3, 4, 300) if not prod else rng.choice([-1, 1, 2], 300, p=[.1, .8, .1])
    else:
        x = rng.uniform(0.95, 1.05, 300) if prod else rng.standard_normal(300)
    x = x.astype(npt)
    out = np.full(block, -7, npt)
    scan_1d[(1,)](x, out, n, BLOCK=block, PROD=prod, REVERSE=reverse)
    want = reference_scan(x[:n].astype(np.float64), prod, reverse)
    if dtype == "i32":
        want = want.astype(np.int64).astype(np.int32)  # wrapping products
        np.testing.assert_array_equal(out[:n], want)
    else:
        np.testing.assert_allclose(out[:n].astype(np.float64), want,
                                   rtol=2e-3 if dtype == "f16" else 1e-4, atol=1e-2 if dtype == "f16" else 1e-4)
    np.testing.assert_array_equal(out[n:], -7)  # inactive lanes stayed untouched
    # Every device folds in interp's order: the same bits.
    with metile.use_device("interp"):
        ref = np.full(block, -7, npt)
        scan_1d[(1,)](x, ref, n, BLOCK=block, PROD=prod, REVERSE=reverse)
    np.testing.assert_array_equal(out, ref)


@metile.kernel
def scan_2d(X, Out, R, C, BR: metile.constexpr, BC: metile.constexpr, AXIS: metile.constexpr,
            PROD: metile.constexpr, REVERSE: metile.constexpr):
    rows = metile.arange(0, BR)[:, None]
    cols = metile.arange(0, BC)[None, :]
    m = (rows < R) & (cols < C)
    x = metile.load(X + rows * C + cols, mask=m)
    y = metile.cumprod(x, AXIS, REVERSE) if PROD else metile.cumsum(x, axis=AXIS, reverse=REVERSE)
    metile.store(Out + rows * C + cols, y, mask=m)


@pytest.mark.pairwise("shape", "block", "axis", "prod")
@pytest.mark.parametrize("shape,block", [((13, 29), (16, 32)), ((30, 50), (32, 64)),
                                         ((300, 3), (512, 4))])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("prod", [False, True])
def test_scan_2d_ragged(device, shape, block, axis, prod):
    r, c = shape
    rng = np.random.default_rng(3)
    x = (rng.uniform(0.9, 1.1, shape) if prod else rng.standard_normal(shape)).astype(np.float32)
    for reverse in (False, True):
        out = np.zeros(shape, np.float32)
        scan_2d[(1,)](x, out, r, c, BR=block[0], BC=block[1], AXIS=axis, PROD=prod,
                      REVERSE=reverse)
        want = reference_scan(x.astype(np.float64), prod, reverse, axis)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@metile.kernel
def bool_count(X, Out, BLOCK: metile.constexpr):
    offs = metile.arange(0, BLOCK)
    metile.store(Out + offs, metile.cumsum(metile.load(X + offs) > 0))


def test_cumsum_of_bools_counts_in_i32(device):
    x = np.random.default_rng(5).standard_normal(128).astype(np.float32)
    out = np.zeros(128, np.int32)
    bool_count[(1,)](x, out, BLOCK=128)
    np.testing.assert_array_equal(out, np.cumsum(x > 0))


@metile.kernel
def transpose(X, Out, R, C, BR: metile.constexpr, BC: metile.constexpr, HOW: metile.constexpr):
    rows = metile.arange(0, BR)[:, None]
    cols = metile.arange(0, BC)[None, :]
    x = metile.load(X + rows * C + cols, mask=(rows < R) & (cols < C))  # ragged: inactive lanes
    if HOW == 0:
        t = metile.trans(x)
    elif HOW == 1:
        t = metile.permute(x, (1, 0))
    elif HOW == 2:
        t = x.T
    else:
        t = x.permute(0, 1).trans(1, 0)
    # t[j, i] = x[i, j]: stored at Out[j * R + i]; inactive lanes stay untouched.
    ti = metile.arange(0, BC)[:, None]
    tj = metile.arange(0, BR)[None, :]
    metile.store(Out + ti * R + tj, t + 0.5)


@pytest.mark.parametrize("dtype", ["f32", "i32"])
@pytest.mark.parametrize("how", [0, 1, 2, 3])
def test_trans_ragged(device, dtype, how):
    r, c, br, bc = 21, 45, 32, 64
    npt = np.float32 if dtype == "f32" else np.int32
    x = (np.random.default_rng(2).standard_normal((r, c)) * 100).astype(npt)
    out = np.full((c + 20) * r, -9, np.float32)
    transpose[(1,)](x, out, r, c, BR=br, BC=bc, HOW=how)
    np.testing.assert_array_equal(out[:c * r].reshape(c, r), x.T.astype(np.float32) + np.float32(0.5))
    np.testing.assert_array_equal(out[c * r:], -9)


@metile.kernel
def printer(X, N, BLOCK: metile.constexpr):
    pid = metile.program_id(0)
    offs = metile.arange(0, BLOCK)
    x = metile.load(X + pid * BLOCK + offs, mask=offs < N)
    metile.device_print("x =", x)
    metile.device_print("", pid * 10, (offs * 2).to("i32")[:, None] + metile.zeros((1, 2), "i32"))
    metile.device_print("done")


def _line(fn, text):
    src, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(src) if text in s)


def test_device_print_lines(device, capfd):
    x = np.array([1.5, -2.25, 3e-8, 7, 9, 11, 13, 15], np.float32)
    if device.name == "metal":  # Metal has no printf: refused up front, naming the op
        with pytest.raises(metile.UnsupportedError, match="device_print: the metal device has no printf"):
            printer[(2,)](x, 3, BLOCK=4)
        return
    capfd.readouterr()
    printer[(2,)](x, 3, BLOCK=4)
    metile.synchronize()
    got = sorted(capfd.readouterr().out.splitlines())
    f = inspect.getsourcefile(printer.fn)
    l1, l2, l3 = (_line(printer.fn, t) for t in ('"x ="', '"", pid', '"done"'))
    want = []
    for pid in range(2):
        head = f"{f}:{{}}: pid ({pid}, 0, 0)"
        for i in range(3):  # lane 3 is masked off: inactive, not printed
            want.append(f"{head.format(l1)} idx ({i}) x = {float(x[pid * 4 + i]):.9g}")
        want.append(f"{head.format(l2)} (operand 0) {pid * 10}")
        for i in range(4):
            for j in range(2):
                want.append(f"{head.format(l2)} idx ({i}, {j}) (operand 1) {2 * i}")
        want.append(f"{head.format(l3)} done")
    assert got == sorted(want)


def test_bad_scan_axis_is_named():
    @metile.kernel
    def bad(X):
        metile.store(X + metile.arange(0, 32), metile.cumsum(metile.load(X + metile.arange(0, 32)), 1))

    with pytest.raises(metile.TracingError, match=r"cumsum: axis 1 is invalid for a tile of shape \(32,\)"):
        bad[(1,)](np.zeros(32, np.float32))

    @metile.kernel
    def scalar(X):
        metile.store(X, metile.cumprod(metile.load(X)))

    with pytest.raises(metile.TracingError, match="cumprod needs a 1-D or 2-D tile, got f32"):
        scalar[(1,)](np.zeros(1, np.float32))


def test_trans_of_a_1d_tile_and_bad_permutations_are_named():
    @metile.kernel
    def bad(X):
        metile.trans(metile.load(X + metile.arange(0, 32)))

    with pytest.raises(metile.TracingError, match=r"trans needs a 2-D tile, got f32\[32\]"):
        bad[(1,)](np.zeros(32, np.float32))

    @metile.kernel
    def perm(X):
        x = metile.load(X + metile.arange(0, 4)[:, None] * 4 + metile.arange(0, 4)[None, :])
        metile.permute(x, 1, 1)

    with pytest.raises(metile.TracingError, match=r"permute: dims \(1, 1\) are not a permutation"):
        perm[(1,)](np.zeros(16, np.float32))


@pytest.mark.parametrize("prefix,why", [("a\nb", "control character"), ("tab\there", "control character"),
                                        ("x" * 300, "300 bytes"), ("bad\udcff", None)])
def test_bad_device_print_prefix_is_named(prefix, why):
    @metile.kernel
    def bad(X):
        metile.device_print(prefix, metile.load(X))

    if why is None:  # not encodable as UTF-8 at all
        with pytest.raises((UnicodeEncodeError, metile.InvalidArgumentError)):
            bad[(1,)](np.zeros(1, np.float32))
        return
    with pytest.raises(metile.InvalidArgumentError, match=f"device_print prefix .*{why}"):
        bad[(1,)](np.zeros(1, np.float32))


def test_device_print_rejects_pointers_and_non_text():
    @metile.kernel
    def ptr(X):
        metile.device_print("p", X)

    with pytest.raises(metile.TracingError, match="cannot print the pointer"):
        ptr[(1,)](np.zeros(1, np.float32))

    @metile.kernel
    def num(X):
        metile.device_print(3, metile.load(X))

    with pytest.raises(metile.TracingError, match="prefix must be a str, got int"):
        num[(1,)](np.zeros(1, np.float32))


_PRINTING_MODULE = '''
import metile

@metile.kernel
def shout(X):
    metile.device_print("h\\u00e9llo \\u2192", metile.load(X))
'''


@pytest.mark.parametrize("file_name", ["k.py", "k\x01\x7f.py"])
def test_device_print_of_non_ascii_text_from_any_file(device, capfd, tmp_path, file_name):
    # Non-ASCII bytes reach the generated source twice (the prefix and the FILE:LINE of a file
    # under "café"); a file name that cannot be a source location (control characters) is
    # spelled with visible escapes, never dropped.
    import importlib.util
    folder = tmp_path / "caf\u00e9"
    folder.mkdir()
    path = folder / file_name
    path.write_text(_PRINTING_MODULE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("printing_module_" + str(len(file_name)), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = np.array([2.5], np.float32)
    if device.name == "metal":
        with pytest.raises(metile.UnsupportedError, match="has no printf"):
            mod.shout[(1,)](x)
        return
    capfd.readouterr()
    mod.shout[(1,)](x)
    metile.synchronize()
    shown = str(path).replace("\x01", "\\x01").replace("\x7f", "\\x7f")
    assert capfd.readouterr().out.splitlines() == [
        f"{shown}:6: pid (0, 0, 0) h\u00e9llo \u2192 2.5"]
