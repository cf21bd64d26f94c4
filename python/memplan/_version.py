"""The package's version: the wheel's metadata when installed, else the
project version in the checkout's CMakeLists.txt (one source for both)."""
import os
import re


def _version() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    cmake = os.path.join(here, "..", "..", "CMakeLists.txt")
    if os.path.exists(cmake):  # a checkout: python/memplan on PYTHONPATH
        with open(cmake) as f:
            m = re.search(r"project\(memplan VERSION ([0-9.]+)", f.read())
        if m:
            return m.group(1)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memplan")
    except PackageNotFoundError:
        return "unknown"


__version__ = _version()
