"""The package's version: written into the wheel at build time
(_build_version.py, from CMakeLists.txt's project version through
pyproject.toml), else read from the checkout's CMakeLists.txt: one source for
both. importlib.metadata is the last resort (it costs ~40 ms of start-up)."""
import os
import re


def _version() -> str:
    try:
        from ._build_version import __version__ as built  # the wheel

        return built
    except ImportError:
        pass
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
