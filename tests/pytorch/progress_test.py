#!/usr/bin/python3
"""The exporter's progress line: on a terminal, `memplan export`
redraws one line on stderr (phase, done/total, seconds); nothing when stderr
is a pipe or with -q. Runs under a pseudo-terminal for stderr.

Both halves test what the exporter really prints: the terminal run must show
exactly the lines below, and the piped and -q runs must show none of the
text the terminal run showed (not a string typed here that it might never
print).

Usage: progress_test.py (with a Python that has torch)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import Checks, on_terminal  # noqa: E402

os.environ["PYTHONPATH"] = os.path.join(ROOT, "python")  # for `python -m memplan`

ERASE = "\r\033[K"
# `export models:cnn_small --batch 2` on a terminal, line by line (seconds dropped):
# the symbolic export traces at batch 2, 3 and 4.
LINES = ["memplan export: building models:cnn_small"] + [
    f"memplan export: export {k}/3 (batch={k + 1}): {phase}"
    for k in (1, 2, 3) for phase in ("tracing (AOTAutograd)", "converting")]
TIMEOUT = 600  # s; an export of cnn_small takes ~10 s


def drawn(err):
    """The lines drawn between erasures, their trailing ', N s' dropped."""
    return [re.sub(r", \d+ s$", "", part) for part in err.split(ERASE) if part]


def main():
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "g.json")
        cmd = [sys.executable, "-m", "memplan", "export", "models:cnn_small", "--batch", "2",
               "-o", out]
        rc, stdout, err = on_terminal(cmd, timeout=TIMEOUT)
        check("export on a terminal exits 0", rc == 0, err[-500:])
        shown = drawn(err)
        check("the progress line names each phase and counts the exports, in order",
              shown == LINES, f"{shown!r}")
        check("every line is drawn over the last (erase, then text, then seconds)",
              err.startswith(ERASE) and all(
                  re.fullmatch(r".+, \d+ s", part) for part in err.split(ERASE)[1:-1]),
              repr(err[:300]))
        check("the line is erased at the end", err.endswith(ERASE), repr(err[-80:]))
        # What the terminal showed (each line's text, and the erase) must be
        # absent from the quiet and the piped runs.
        prefix = os.path.commonprefix(shown)
        check("the lines share the prefix the quiet checks look for",
              prefix == "memplan export: ", repr(prefix))
        rc, stdout, err = on_terminal(cmd + ["-q"], timeout=TIMEOUT)
        check("-q: no progress on a terminal", rc == 0 and err == "", repr(err[-300:]))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        check("piped: no progress", p.returncode == 0 and prefix not in p.stderr
              and ERASE not in p.stderr and not any(line in p.stderr for line in shown),
              repr(p.stderr[-300:]))
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
