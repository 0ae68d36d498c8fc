"""Packaging: `pip install --no-build-isolation ./bindings/python` works offline, and the
package finds libmetile: $METILE_LIBRARY, its own folder, the build tree, the system."""

import os
import shutil
import subprocess
import sys

import pytest

import metile

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import(env_extra, path):
    env = {k: v for k, v in os.environ.items() if k != "METILE_LIBRARY"}
    env.update(env_extra)
    env["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-c", "import metile; print(metile.LIBRARY_PATH)"],
                          capture_output=True, text=True, env=env, cwd="/", timeout=120)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    src = tmp_path_factory.mktemp("src") / "python"
    shutil.copytree(PKG_ROOT, src, ignore=shutil.ignore_patterns("tests", "__pycache__",
                                                                 "build", "*.egg-info"))
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return src, target


def test_pip_install_and_library_lookup(installed):
    src, target = installed
    assert (target / "metile" / "_ffi.py").exists()
    assert (target / "metile" / "runtime" / "metal_device.py").exists()
    # Installed outside a checkout, without a library: a clear error listing where it looked.
    r = _import({}, str(target))
    if r.returncode == 0:
        pytest.skip(f"a system libmetile is installed ({r.stdout.strip()})")
    assert "cannot find the libmetile shared library" in r.stderr
    assert "the package folder" in r.stderr and "METILE_LIBRARY" in r.stderr
    # $METILE_LIBRARY wins.
    r = _import({"METILE_LIBRARY": metile.LIBRARY_PATH}, str(target))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == metile.LIBRARY_PATH
    r = _import({"METILE_LIBRARY": "/nonexistent/libmetile.so"}, str(target))
    assert r.returncode != 0 and "$METILE_LIBRARY: /nonexistent/libmetile.so (missing)" in r.stderr


def test_bundled_library_is_found_in_the_package_folder(installed, tmp_path):
    _, target = installed
    site = tmp_path / "site"
    shutil.copytree(target, site)
    shutil.copy(os.path.realpath(metile.LIBRARY_PATH), site / "metile" / "libmetile.so")
    r = _import({}, str(site))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(site / "metile" / "libmetile.so")


def test_build_tree_is_found_from_a_checkout():
    repo = os.path.dirname(os.path.dirname(PKG_ROOT))
    if not os.path.exists(os.path.join(repo, "build", "libmetile.so")):
        pytest.skip("no build/libmetile.so in this checkout")
    r = _import({}, PKG_ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(os.path.join(repo, "build"))
