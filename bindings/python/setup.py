"""Build step that records which libmetile this package was built against.

`pip install ./bindings/python` writes metile/_installed.py with the absolute path of the
library found now, so `import metile` finds it later without METILE_LIBRARY. Looked for, in
order: $METILE_LIBRARY, the checkout's build tree (this file's ../../build*), and
`pkg-config --variable=libdir metile`. Nothing found: nothing is recorded, and the import
looks in the other places metile/_ffi.py lists. A library copied into metile/ is bundled
instead (pyproject.toml's package-data).
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
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


class BuildPyRecordingTheLibrary(build_py):
    def run(self):
        super().run()
        path = find_library()
        target = os.path.join(self.build_lib, "metile", "_installed.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write('"""Written by setup.py at install time: the libmetile found then."""\n\n')
            f.write(f"LIBRARY = {path!r}\n")
        self.announce(f"metile: recorded library {path or '(none found)'}", level=2)


setup(cmdclass={"build_py": BuildPyRecordingTheLibrary})
