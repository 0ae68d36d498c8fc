"""Build step that puts libmetile into the package, so a wheel carries it.

`pip wheel ./bindings/python` (or `pip install`) copies the library found now into metile/
(as libmetile.so.0; `import metile` looks in its own folder first), and the wheel is tagged
for this platform. Looked for, in order: $METILE_LIBRARY, the checkout's build tree (this
file's ../../build*), and `pkg-config --variable=libdir metile`. A library already copied into
metile/ is used as it is (pyproject.toml's package-data). Nothing found is an error naming
where it looked, unless METILE_NO_LIBRARY=1 asks for a package without one (it then looks for
a library when imported: metile/_ffi.py lists where).
"""

import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAMES = {"darwin": ["libmetile.dylib", "libmetile.0.dylib"],
          "win32": ["metile.dll"]}.get(sys.platform, ["libmetile.so.0", "libmetile.so"])


def _first(folder):
    for n in _NAMES:
        path = os.path.join(folder, n)
        if os.path.exists(path):
            return path
    return None


def find_library():
    env = os.environ.get("METILE_LIBRARY")
    if env:
        return os.path.abspath(env) if os.path.exists(env) else None
    repo = os.path.dirname(os.path.dirname(_HERE))
    if os.path.exists(os.path.join(repo, "include", "metile", "metile.h")):
        for build in ("build", "build-release", "build-debug"):
            found = _first(os.path.join(repo, build))
            if found:
                return found
    if shutil.which("pkg-config"):
        try:
            libdir = subprocess.run(["pkg-config", "--variable=libdir", "metile"],
                                    capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            libdir = ""
        if libdir:
            return _first(libdir)
    return None


class BuildPyBundlingTheLibrary(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "metile")
        bundled = [n for n in _NAMES + ["libmetile.so"] if os.path.exists(os.path.join(pkg, n))]
        path = None
        if not bundled:
            path = find_library()
            if path is None and os.environ.get("METILE_NO_LIBRARY") != "1":
                raise SystemExit(
                    "metile: no libmetile to put in the package. Looked at $METILE_LIBRARY "
                    "(unset), the checkout's build/, build-release/ and build-debug/ (none, or "
                    "not building from a checkout), and `pkg-config --variable=libdir metile` "
                    "(nothing). Build it first (cmake -S . -B build -G Ninja "
                    "-DCMAKE_BUILD_TYPE=Release && ninja -C build metile), or set "
                    "METILE_LIBRARY=/path/to/libmetile.so; METILE_NO_LIBRARY=1 builds a "
                    "package without one, which looks for a library when imported.")
            if path is not None:
                shutil.copyfile(os.path.realpath(path), os.path.join(pkg, _NAMES[0]))
                os.chmod(os.path.join(pkg, _NAMES[0]), 0o755)
        target = os.path.join(pkg, "_installed.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write('"""Written by setup.py at build time: where the bundled libmetile came '
                    'from (None: no library was bundled)."""\n\n')
            f.write(f"SOURCE = {path!r}\nLIBRARY = None\n")
        self.announce(f"metile: bundled {path or (bundled[0] if bundled else '(no library)')}",
                      level=2)


class BinaryDistribution(Distribution):
    """The package carries a native library: its wheel is tagged for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyBundlingTheLibrary}, distclass=BinaryDistribution)
