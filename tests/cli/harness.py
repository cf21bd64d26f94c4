"""Shared harness of the CLI test scripts: runs the memplan binary from the
repository root, counts checks, and prints what failed."""
import json
import os
import subprocess
import sys

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
