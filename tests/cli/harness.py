"""Shared harness of the CLI test scripts: runs the memplan binary from the
repository root, counts checks, and prints what failed."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VALIDATE = os.path.join(ROOT, "tests", "tools", "validate_json.py")
# Debian's Python has python3-jsonschema; a python3 earlier on PATH may not.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class Runner:
    def __init__(self, memplan, tmp):
        self.memplan = memplan
        self.tmp = tmp
        self.passed = 0
        self.failed = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
            print("FAIL %s" % name)
            if detail:
                for line in str(detail).rstrip("\n").split("\n"):
                    print("    " + line)
        return ok

    def run(self, *args):
        p = subprocess.run([self.memplan] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8",
                                                                                "replace")

    def path(self, name):
        return os.path.join(self.tmp, name)

    def validate(self, schema, files):
        p = subprocess.run([PYTHON, VALIDATE, schema] + files, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
        return p.returncode, p.stdout.decode("utf-8", "replace")


def describe(rc, out, err):
    return "exit %d\nstdout: %s\nstderr: %s" % (rc, out[-1500:], err[-1500:])


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def check_exit2(r, cases):
    """Each (argv, stderr) case exits 2 with exactly that stderr."""
    for args, want in cases:
        rc, out, err = r.run(*args)
        r.check("%s: exit 2 and exact message" % " ".join(args[2:]), rc == 2 and err == want,
                describe(rc, out, err))


def run_tests(*tests):
    """A CLI test's main(): --memplan PATH, one Runner in a temporary folder for every
    test in turn, then "N passed, M failed". Returns the exit status: 1 if any check
    failed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = Runner(os.path.abspath(args.memplan), tmp)
        for test in tests:
            test(r)
    print("%d passed, %d failed" % (r.passed, len(r.failed)))
    return 1 if r.failed else 0
