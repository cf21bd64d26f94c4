"""The `memplan` command: one entry point for the C++ analyzer and the
Python exporter.

    memplan export|measure ...   the PyTorch exporter (memplan.torch; needs torch)
    memplan --version            both versions
    memplan anything else        the C++ binary, exec'd with the same arguments

Exec (not a child process) keeps the launcher's cost to Python's start-up:
the binary's exit code, signals and standard streams are the command's own.
"""
import os
import sys
from typing import List, Optional

from . import _binary

PYTHON_COMMANDS = ("export", "measure")


def _python_command(argv: List[str]) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"memplan {argv[0]}: needs PyTorch: pip install 'memplan[torch]'",
              file=sys.stderr)
        return 2
    from .torch._cli import main as torch_main

    return torch_main(argv)


def _version_text() -> str:
    import subprocess

    from ._version import __version__

    try:
        p = subprocess.run([_binary.find_binary(), "--version"], capture_output=True,
                           text=True, timeout=30)
        binary = (p.stdout.strip() or p.stderr.strip()) or f"exit {p.returncode}"
    except (_binary.BinaryNotFound, OSError) as e:
        binary = f"not found ({e})"
    return f"memplan {__version__} (Python package)\nbinary: {binary}"


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the `memplan` command on `argv` (default sys.argv[1:])."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in PYTHON_COMMANDS:
        return _python_command(argv)
    if argv in (["--version"], ["-V"]):
        print(_version_text())
        return 0
    try:
        binary = _binary.find_binary()
    except _binary.BinaryNotFound as e:
        print(f"memplan: {e}", file=sys.stderr)
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        import subprocess

        rc = subprocess.run(["memplan", *argv], executable=binary).returncode
        try:
            print("\nPython commands (pip install 'memplan[torch]'):\n"
                  "  export     a PyTorch model's training step as a memplan.graph/1 file\n"
                  "  measure    the peak of one measured eager CPU step (torch.profiler)")
        except BrokenPipeError:  # `memplan --help | head`
            pass
        return rc
    sys.stdout.flush()
    os.execv(binary, ["memplan", *argv])  # argv[0]: what the user typed
    return 0  # not reached
