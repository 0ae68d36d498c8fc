"""Lets the examples run from a source checkout without installing the package."""
import os
import sys

try:
    import metile  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "bindings", "python"))
