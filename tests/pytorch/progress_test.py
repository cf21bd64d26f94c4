#!/usr/bin/python3
"""The exporter's progress line: on a terminal, `memplan export`
redraws one line on stderr (phase, done/total, seconds); nothing when stderr
is a pipe or with -q. Runs under a pseudo-terminal for stderr.

Usage: progress_test.py (with a Python that has torch)
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import Checks, on_terminal  # noqa: E402

os.environ["PYTHONPATH"] = os.path.join(ROOT, "python")  # for `python -m memplan`


def main():
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "g.json")
        cmd = [sys.executable, "-m", "memplan", "export", "models:cnn_small", "--batch", "2", "-o", out]
        rc, stdout, err = on_terminal(cmd)
        check("export on a terminal exits 0", rc == 0, err[-500:])
        check("the progress line names the phase and counts the exports",
              "memplan export: export 2/3 (batch=3): tracing (AOTAutograd)" in err
              and "\r\033[K" in err,
              repr(err[-300:]))
        check("the line is cleared at the end", err.rstrip(" \n").endswith("\033[K")
              or err.endswith("\r\033[K"), repr(err[-80:]))
        rc, stdout, err = on_terminal(cmd + ["-q"])
        check("-q: no progress on a terminal", rc == 0 and "memplan export:" not in err,
              repr(err[-300:]))
        p = subprocess.run(cmd, capture_output=True, text=True)
        check("piped: no progress", p.returncode == 0 and "memplan export:"
              not in p.stderr and "\033[K" not in p.stderr, repr(p.stderr[-300:]))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
