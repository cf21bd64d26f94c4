#!/usr/bin/python3
"""The progress line (cli/progress.h): on a terminal, long commands redraw one
line on stderr (phase, done/total, programs simulated, seconds); never when
stderr is a pipe or with -q, so CI logs and golden outputs stay clean. Runs
the commands under a pseudo-terminal for stderr.

Usage: progress_test.py --memplan PATH
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import Checks, on_terminal  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DENSENET = os.path.join(ROOT, "examples", "densenet_toy.graph.json")
GPT = os.path.join(ROOT, "examples", "gpt_tiny.graph.json")
TIMEOUT = 300  # s per command: a hung planner fails the test instead of hanging CI


def piped(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    a = ap.parse_args()
    m = a.memplan
    c = Checks()
    commands = {
        "plan --sweep": [m, "plan", DENSENET, "--budget", "25MiB", "--sweep", "4"],
        "plan --global-batch": [m, "plan", GPT, "--global-batch", "32", "--budget", "120MiB"],
        "analyze": [m, "analyze", GPT],
    }
    expect = {
        "plan --sweep": ["memplan: loading", "memplan: planning, 1 programs simulated",
                         "sweep 1/4", "sweep 4/4", "programs simulated"],
        "plan --global-batch": ["memplan: loading", "memplan: planning micro-batches",
                                "micro-batch 32"],
        "analyze": ["memplan: loading", "memplan: analyzing"],
    }
    for name, argv in commands.items():
        rc, out, err = on_terminal(argv, timeout=TIMEOUT)
        c.check(rc in (0, 3), f"{name}: runs under a terminal (exit {rc})", err[-500:])
        for text in expect[name]:
            c.check(text in err, f"{name}: the terminal shows {text!r}", repr(err[-800:]))
        c.check(err.endswith("\r\x1b[K"), f"{name}: the line is erased at the end",
                repr(err[-200:]))
        rc2, out2, err2 = piped(argv)
        c.check(rc2 == rc and out2 == out, f"{name}: the same stdout on a pipe")
        c.check("\x1b[K" not in err2 and "memplan: loading" not in err2,
                f"{name}: no progress on a pipe", repr(err2[-300:]))
        rc3, _, err3 = on_terminal(argv + ["-q"], timeout=TIMEOUT)
        c.check(rc3 == rc and "memplan: loading" not in err3 and "\x1b[K" not in err3,
                f"{name}: no progress with -q", repr(err3[-300:]))
    print(f"progress_test: {c.passed} passed, {len(c.failed)} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
