"""Kernels with many pointer parameters. Metal binds at most 31 buffers; metile passes every
scalar of a Metal kernel (the user's and the buffer extents it adds) in one packed binding, so a
kernel may have up to 30 pointer parameters with scalars (31 without), counting the ones metile
adds: check_bounds' error flag. Past that, compiling for Metal fails naming the count and the
limit; the other devices have no such limit. The kernels are written out as a module and
imported, as a user's file would be."""

import importlib.util

import numpy as np
import pytest

import metile

BLOCK = 64
METAL = ("metal", "metal-sim")


def weighted_sum_kernel(tmp_path, inputs):
    """out[i] = alpha * sum_k (k + 1) * in_k[i] + beta, for i < n: `inputs` + 1 pointers."""
    names = [f"in{k}" for k in range(inputs)]
    terms = " + ".join(f"{k + 1}.0 * metile.load({p} + offs, mask=mask)"
                       for k, p in enumerate(names))
    src = (
        "import metile\n\n\n@metile.kernel\n"
        f"def weighted_sum({', '.join(names)}, out, n, alpha, beta, BLOCK: metile.constexpr):\n"
        "    offs = metile.program_id(0) * BLOCK + metile.arange(0, BLOCK)\n"
        "    mask = offs < n\n"
        f"    metile.store(out + offs, alpha * ({terms}) + beta, mask=mask)\n")
    path = tmp_path / f"weighted_sum_{inputs}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.weighted_sum


def run(kernel, inputs, n, **options):
    rng = np.random.default_rng(inputs)
    xs = [rng.standard_normal(n).astype(np.float32) for _ in range(inputs)]
    out = np.full(n + 7, np.nan, dtype=np.float32)
    kernel[(metile.cdiv(n, BLOCK),)](*xs, out, n, 0.5, -2.0, BLOCK=BLOCK, **options)
    ref = 0.5 * sum((k + 1) * x.astype(np.float64) for k, x in enumerate(xs)) - 2.0
    np.testing.assert_allclose(out[:n], ref, rtol=1e-5, atol=1e-5 * inputs)
    assert np.isnan(out[n:]).all()  # nothing past n written


@pytest.mark.parametrize("pointers", [16, 28, 30])
def test_many_pointers_run_on_every_device(device, tmp_path, pointers):
    run(weighted_sum_kernel(tmp_path, pointers - 1), pointers - 1, 1000)


def test_check_bounds_flag_counts_against_metals_limit(device, tmp_path):
    run(weighted_sum_kernel(tmp_path, 28), 28, 300, check_bounds=True)  # 29 pointers + the flag
    kernel = weighted_sum_kernel(tmp_path, 29)  # 30 pointers: the flag is the 32nd binding
    if device.name not in METAL:
        run(kernel, 29, 300, check_bounds=True)
        return
    with pytest.raises(metile.MetileError, match=r"needs 32 buffer bindings \(31 pointer"):
        run(kernel, 29, 300, check_bounds=True)


def test_more_pointers_than_metal_binds_fail_naming_the_limit(device, tmp_path):
    kernel = weighted_sum_kernel(tmp_path, 30)  # 31 pointers and the scalars' binding
    if device.name not in METAL:
        run(kernel, 30, 300)
        return
    with pytest.raises(metile.MetileError) as e:
        run(kernel, 30, 300)
    assert e.value.status == "METILE_ERROR_UNSUPPORTED"
    message = str(e.value)
    assert "needs 32 buffer bindings (31 pointer parameters and one for all its scalars)" in message
    assert "over Metal's 31" in message
