"""Where the C++ `memplan` binary is, and how the Python side runs it.

Search order: $MEMPLAN_BINARY; the binary installed inside this package
(memplan/bin/memplan, put there by the wheel); a checkout's build
(build/cli/memplan beside python/). The first that exists wins.
"""
import os
from typing import TYPE_CHECKING, List, Optional, Sequence

if TYPE_CHECKING:
    import subprocess

_HERE = os.path.dirname(os.path.abspath(__file__))


class BinaryNotFound(RuntimeError):
    """No memplan binary: the package was not installed from a wheel and no
    checkout build exists."""


def candidates() -> List[str]:
    """The paths looked at, in order."""
    out = []
    env = os.environ.get("MEMPLAN_BINARY")
    if env:
        out.append(env)
    out.append(os.path.join(_HERE, "bin", "memplan"))
    out.append(os.path.normpath(os.path.join(_HERE, "..", "..", "build", "cli", "memplan")))
    return out


def find_binary() -> str:
    """The memplan binary's path; raises BinaryNotFound naming where it looked."""
    for path in candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise BinaryNotFound("no memplan binary: looked at " + ", ".join(candidates())
                         + " (pip install memplan, or build the checkout: cmake --build build)")


def run(args: Sequence[str], timeout: Optional[float] = 600,
        check_codes: Sequence[int] = (0,)) -> "subprocess.CompletedProcess":
    """Runs `memplan ARGS...` and returns the finished process (text output).
    An exit code outside `check_codes` raises MemplanError with its stderr."""
    import subprocess  # not at import: the launcher's start-up stays short

    p = subprocess.run([find_binary(), *args], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode not in check_codes:
        raise MemplanError(p.returncode, list(args), p.stderr.strip() or p.stdout.strip())
    return p


class MemplanError(RuntimeError):
    """The memplan binary failed: its exit code and message."""

    def __init__(self, returncode: int, args: List[str], message: str):
        super().__init__(f"memplan {' '.join(args[:1])} exited {returncode}: {message}")
        self.returncode = returncode
        self.message = message
