"""Packaging: `pip wheel` / `pip install --no-build-isolation ./bindings/python` work offline
and put libmetile into the package (a platform wheel); with no library to bundle the build
fails naming where it looked, unless METILE_NO_LIBRARY=1. The package finds libmetile:
$METILE_LIBRARY, its own folder, the build tree, the system."""

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


def _copy_package(tmp_path_factory):
    src = tmp_path_factory.mktemp("src") / "python"
    shutil.copytree(PKG_ROOT, src, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info", "libmetile*", "_installed.py"))
    return src


def _pip_env(env_extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("METILE_LIBRARY", "PKG_CONFIG_PATH", "METILE_NO_LIBRARY")}
    env.update(env_extra)
    return env


def _pip_install(tmp_path_factory, env_extra, check=True):
    """pip install --target of a copy of the package (outside the checkout), offline."""
    src = _copy_package(tmp_path_factory)
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=600, env=_pip_env(env_extra))
    if not check:
        return r
    assert r.returncode == 0, r.stdout + r.stderr
    return src, target


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Installed without a library (METILE_NO_LIBRARY=1): it looks for one when imported."""
    return _pip_install(tmp_path_factory, {"METILE_NO_LIBRARY": "1"})


@pytest.fixture(scope="module")
def installed_recording(tmp_path_factory):
    """Installed after a build: METILE_LIBRARY names the library at install time only, and
    the install carries a copy of it."""
    return _pip_install(tmp_path_factory, {"METILE_LIBRARY": metile.LIBRARY_PATH})


def test_pip_install_bundles_the_library_it_was_built_against(installed_recording):
    _, target = installed_recording
    assert (target / "metile" / "py.typed").exists()
    bundled = target / "metile" / "libmetile.so.0"
    assert bundled.stat().st_size == os.path.getsize(os.path.realpath(metile.LIBRARY_PATH))
    r = _import({}, str(target))             # no METILE_LIBRARY now
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(bundled)


def test_no_library_to_bundle_is_an_error(tmp_path_factory):
    r = _pip_install(tmp_path_factory, {}, check=False)
    if r.returncode == 0:
        pytest.skip("pkg-config finds an installed libmetile here")
    out = r.stdout + r.stderr
    assert "metile: no libmetile to put in the package" in out
    assert "METILE_LIBRARY=/path/to/libmetile.so" in out and "METILE_NO_LIBRARY=1" in out


def test_pip_wheel_carries_the_library(tmp_path_factory):
    import zipfile
    src = _copy_package(tmp_path_factory)
    out = tmp_path_factory.mktemp("wheels")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                        "--no-deps", "--no-index", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=600,
                       env=_pip_env({"METILE_LIBRARY": metile.LIBRARY_PATH}))
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("metile-*.whl")
    assert not wheel.name.endswith("-none-any.whl"), wheel.name   # tagged for this platform
    names = zipfile.ZipFile(wheel).namelist()
    assert "metile/libmetile.so.0" in names and "metile/_ffi.py" in names
    site = tmp_path_factory.mktemp("unpacked")
    zipfile.ZipFile(wheel).extractall(site)
    os.chmod(site / "metile" / "libmetile.so.0", 0o755)
    code = ("import metile, numpy as np; print(metile.LIBRARY_PATH); "
            "print(metile.devices())")
    env = {k: v for k, v in os.environ.items() if k != "METILE_LIBRARY"}
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd="/", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(site / "metile" / "libmetile.so.0")
    assert "interp" in r.stdout.splitlines()[1]


def test_import_runs_no_subprocess(installed_recording):
    _, target = installed_recording
    code = ("import subprocess, ctypes.util\n"
            "def boom(*a, **k): raise AssertionError('a subprocess ran during import')\n"
            "subprocess.Popen.__init__ = boom\n"
            "ctypes.util.find_library = boom\n"
            "import metile; print(metile.LIBRARY_PATH)")
    env = {k: v for k, v in os.environ.items() if k != "METILE_LIBRARY"}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd="/", timeout=120)
    assert r.returncode == 0, r.stderr


def test_pkg_config_path_points_at_a_prefix(installed, tmp_path):
    _, target = installed
    prefix = tmp_path / "prefix with space"
    (prefix / "lib" / "pkgconfig").mkdir(parents=True)
    os.symlink(os.path.realpath(metile.LIBRARY_PATH), prefix / "lib" / "libmetile.so.0")
    (prefix / "lib" / "pkgconfig" / "metile.pc").write_text(
        "prefix=${pcfiledir}/../..\nexec_prefix=${prefix}\nlibdir=${exec_prefix}/lib\n"
        "includedir=${prefix}/include\n\nName: metile\nDescription: x\nVersion: 0.1.0\n"
        "Libs: -L${libdir} -lmetile\n")
    r = _import({"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, str(target))
    if r.returncode == 0 and "prefix with space" not in r.stdout:
        pytest.skip(f"a system libmetile is installed ({r.stdout.strip()})")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("prefix with space/lib/pkgconfig/../../lib/libmetile.so.0")


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
    assert "PKG_CONFIG_PATH=<prefix>/lib/pkgconfig" in r.stderr
    assert "_installed" not in r.stderr
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


def test_a_file_that_is_not_the_library_fails_clearly_on_first_use(tmp_path):
    # Importing only finds the library (opening it is most of an import's cost); the first call
    # opens it, and a file that is not a loadable library is an ImportError naming it.
    bad = tmp_path / "libmetile.so"
    bad.write_text("not a shared library")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, METILE_LIBRARY=str(bad), PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", "import metile; print('imported'); metile.devices()"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and r.stdout.strip() == "imported"
    assert f"cannot load the libmetile shared library {bad}" in r.stderr
