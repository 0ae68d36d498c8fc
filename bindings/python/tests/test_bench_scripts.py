"""The benchmark scripts (bench/*.py) time the tests' own kernels (kernels.py), not copies, and
bench/cuda_rows.py, written for a GPU, runs its quick shapes on interp with every row correct
against float64 (a smoke run: no time is asserted)."""

import importlib
import json
import os
import subprocess
import sys

import pytest

import kernels

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench"))


def _bench(name):
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)


def test_bench_scripts_use_the_tests_kernels():
    rows = _bench("cuda_rows")
    assert rows.seed_softmax is kernels.seed_softmax
    assert rows.layernorm is kernels.layernorm_loops
    assert rows.rmsnorm is kernels.rmsnorm
    assert rows.layernorm_centred is kernels.layernorm_centred
    cpu = _bench("cpu_seed_rows")
    assert (cpu.seed_softmax, cpu.layernorm, cpu.rmsnorm, cpu.add) == (
        kernels.seed_softmax, kernels.layernorm_loops, kernels.rmsnorm, kernels.vector_add)
    assert _bench("cuda_vs_triton").add is kernels.vector_add
    assert _bench("bounds_cost").add is kernels.vector_add
    ptr = _bench("gemm_pointer_tiles")
    assert (ptr.mm_pointers, ptr.mm_tiles) == (kernels.mm_pointers, kernels.mm_tiles)


def test_cuda_rows_quick_run_on_interp(tmp_path):
    out = tmp_path / "rows.json"
    # Rows shorter than the quick shapes' (interp takes microseconds an element): one in a
    # single block, one over several.
    subprocess.run([sys.executable, os.path.join(BENCH, "cuda_rows.py"), "--quick", "--device",
                    "interp", "--shapes", "8x512,2x5000", "--out", str(out)], check=True,
                   capture_output=True, timeout=600)
    rows = json.loads(out.read_text())["rows"]
    # 2 shapes x 4 kernels x (fused, as written) x (row kept, re-read); no copy rows without
    # torch on cuda.
    assert len(rows) == 2 * 4 * 4, rows
    assert {(r["fuse_reductions"], r["keep_rows"]) for r in rows} == {(True, True), (True, False),
                                                                     (False, True), (False, False)}
    for r in rows:
        assert "error" not in r, r
        assert r["max_abs_err"] < 1e-3, r


@pytest.mark.parametrize("grouped", [[], ["--grouped"]], ids=["per_head", "grouped"])
def test_decode_sweep_runs_on_cpu(tmp_path, grouped):
    r = subprocess.run([sys.executable, os.path.join(BENCH, "decode_sweep.py"), "--device", "cpu",
                        "--batch", "1", "--heads", "4", "--kv-heads", "2", "--seq", "100",
                        "--dim", "16", "--splits", "1,3", "--block-n", "16", "--warps", "1",
                        *grouped],
                       check=True, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, DUMP=str(tmp_path)))
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows[0]["shape"] == [1, 4, 2, 100, 16] and rows[0]["copy_gbs"] is None
    assert [(x["splits"], x["block_n"]) for x in rows[1:]] == [(1, 16), (3, 16)]
    for x in rows[1:]:
        assert "error" not in x and x["err"] < 1e-2 and x["gbs"] > 0, x
    assert sorted(os.listdir(tmp_path)) == ["s1_bn16_w1.cpp", "s1_bn16_w1.tile",
                                            "s3_bn16_w1.cpp", "s3_bn16_w1.tile"]


@pytest.mark.parametrize("sweep", [[], ["--sweep"], ["--configs", "2/*/*/1/fma;*/*/*/2/*"]],
                         ids=["default", "sweep", "configs"])
def test_gemv_bench_quick_run_on_cpu(tmp_path, sweep):
    """bench/gemv.py's smoke run: every row checked against float64, JSON lines in --out; the
    sweep ends each shape with its best config; --configs times the named ones beside the
    default."""
    out = tmp_path / "gemv.jsonl"
    args = ["--shapes", "70x520", "--dtypes", "bf16", "--m", "1,3"] if sweep else []
    subprocess.run([sys.executable, os.path.join(BENCH, "gemv.py"), "--quick", "--device", "cpu",
                    "--out", str(out), *args, *sweep], check=True, capture_output=True, timeout=600)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    gemv = [r for r in rows if r["kernel"] == "gemv"]
    for r in gemv:
        assert "error" not in r and r["max_rel_err"] < 1e-2 and r["metile_GBps"] > 0, r
    if sweep and sweep[0] == "--configs":  # the default, then the two named, per M
        assert [(r["config"]["block_n"], r["config"]["split_k"]) for r in gemv[:3]] == \
            [(4, 1), (2, 1), (4, 2)], gemv[:3]
        assert len(gemv) == 6
    elif sweep:
        assert len(gemv) > 2 * 3 and [r["M"] for r in rows if r["kernel"] == "best"] == [1, 3]
    else:  # 2 quick shapes x 2 dtypes x M = 1, 4, 16
        assert len(gemv) == 12 and all(r["default"] for r in gemv)


def test_low_precision_benches_skip_without_cuda_and_smoke_run_on_interp(tmp_path):
    """bench/int4_gemv.py and bench/mxfp4_gemm.py measure cuda: without it they say so and exit
    0; --quick runs each on interp with every row checked against float64."""
    import metile
    for name, args in (("int4_gemv.py", ["--groups", "32,128", "--dtypes", "bf16", "--m", "1,3",
                                         "--configs", "2/64;2/64/bytes;2/64//40;2/64/subnormal"]),
                       ("mxfp4_gemm.py", [])):
        script = os.path.join(BENCH, name)
        if "cuda" not in metile.devices():
            r = subprocess.run([sys.executable, script], capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0 and "skipped: it measures cuda" in r.stdout, r.stdout
        out = tmp_path / (name + ".jsonl")
        subprocess.run([sys.executable, script, "--quick", "--device", "interp", "--out",
                        str(out), *args], check=True, capture_output=True, timeout=600)
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == (20 if name == "int4_gemv.py" else 1)
        for r in rows:
            assert "error" not in r and r["max_rel_err"] < 1e-2 and r["metile_us"] > 0, r
        if name == "int4_gemv.py":  # a register limit is a config's fourth field (empty form:
            assert sum(r["config"] == [2, 64, "words", 40] for r in rows) == 4  # the default)
    r = subprocess.run([sys.executable, os.path.join(BENCH, "int4_gemv.py"), "--quick",
                        "--device", "interp", "--configs", "2/64/words/many"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "is not block_n/block_k[/words|bytes|subnormal[/maxnreg]]" in r.stderr


def _session_scripts():
    import glob
    root = os.path.dirname(BENCH)
    return sorted(glob.glob(os.path.join(BENCH, "*_run.sh"))) + [
        os.path.join(root, "scripts", "gpu-session.sh")]


def test_session_scripts_share_one_preamble():
    # The deps unpacking and the Release build live in bench/lib.sh; each script sources it.
    lib = os.path.join(BENCH, "lib.sh")
    for script in _session_scripts():
        text = open(script).read()
        subprocess.run(["bash", "-n", script], check=True)
        assert "dpkg -x" not in text and "/tmp/deps" not in text, script
        if "use_debs" in text or "release_build" in text or "summary " in text:
            assert 'lib.sh"' in text, script
    assert "dpkg -x" in open(lib).read()


def test_use_debs_unpacks_and_points_the_build_at_them(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: fake-dev\nVersion: 1\nArchitecture: all\nMaintainer: x <x@y>\nDescription: x\n")
    (pkg / "usr" / "include").mkdir(parents=True)
    (pkg / "usr" / "include" / "fake.h").write_text("#define FAKE 1\n")
    debs = tmp_path / "debs"
    debs.mkdir()
    subprocess.run(["dpkg-deb", "--build", str(pkg), str(debs / "fake.deb")], check=True,
                   capture_output=True)
    deps = tmp_path / "deps"
    script = (f'. "{BENCH}/lib.sh"; use_debs "{debs}"; echo "$CPATH"; echo "${{deps_prefix[@]}}"; '
              f'use_debs ""; echo "$here"')
    out = subprocess.run(["bash", "-c", script], env={**os.environ, "DEPS_DIR": str(deps)},
                         check=True, capture_output=True, text=True).stdout.split("\n")
    assert (deps / "usr" / "include" / "fake.h").read_text() == "#define FAKE 1\n"
    assert out[:3] == [f"{deps}/usr/include", f"-DCMAKE_PREFIX_PATH={deps}/usr",
                       os.path.dirname(BENCH)]
