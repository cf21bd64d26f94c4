"""Which commit a benchmark ran at, as its results record it (stdlib only)."""

from __future__ import annotations

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commit(short: int | None = 12) -> str:
    """HEAD's hash (abbreviated to `short` digits; None: in full), followed by
    " (uncommitted changes to tracked files)" when the working tree has some;
    "unknown" outside a git checkout or without git."""
    try:
        rev = ["rev-parse", f"--short={short}" if short else "", "HEAD"]
        head = subprocess.run(["git", "-C", ROOT, *filter(None, rev)], capture_output=True,
                              text=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               check=False).stdout.strip()
    except OSError:
        return "unknown"
    if not head:
        return "unknown"
    return head + (" (uncommitted changes to tracked files)" if dirty else "")
