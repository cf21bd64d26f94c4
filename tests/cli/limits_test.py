#!/usr/bin/env python3
"""Limits and input errors at the command line (issue 7): each refusal is exit 2
with a message that quotes the offending text or names the limit.

- --budget that does not parse (plan, and check when built): the text, quoted;
- --budget over 2^63-1 bytes;
- --set that makes a tensor overflow 64-bit arithmetic: the tensor's pointer;
- a graph over 2^61 bytes: the limit;
- JSON nested deeper than 64 levels (graph and plan): the limit.

Usage: limits_test.py --memplan PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MLP = "examples/mlp.graph.json"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    failed = []
    passed = 0

    def expect(name, argv, needles):
        nonlocal passed
        p = subprocess.run([memplan] + argv, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        err = p.stderr.decode("utf-8", "replace")
        missing = [n for n in needles if n not in err]
        if p.returncode != 2 or missing or not err.startswith("memplan: error: "):
            failed.append("%s: exit %d, stderr %r; expected exit 2 and %r" %
                          (name, p.returncode, err[-600:], needles))
        else:
            passed += 1

    has_check = subprocess.run([memplan, "check", "--help"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    for text in ["lots", "-1GiB", "12.5.3MB", "24 GiBs", "1e9", "", "0x10", "5 PiB"]:
        quoted = '"%s"' % text
        expect("plan --budget %r" % text, ["plan", MLP, "--budget", text, "-q"],
               ["--budget", "invalid size " + quoted])
        if has_check:
            expect("check --budget %r" % text, ["check", MLP, "--budget", text],
                   ["invalid size " + quoted])
    for text in ["8388608TiB", "9223372036854775808", "9300000TB"]:
        expect("plan --budget %r" % text, ["plan", MLP, "--budget", text, "-q"],
               ['size "%s" is larger than 2^63-1 bytes' % text])
    expect("--set overflow", ["analyze", "examples/gpt_tiny.graph.json", "--set",
                              "batch=999999999999999999", "-q"],
           ["examples/gpt_tiny.graph.json: /tensors/", "/shape: element count overflows "
            "64-bit arithmetic"])

    with tempfile.TemporaryDirectory(prefix="memplan-limits-") as tmp:
        huge = os.path.join(tmp, "huge.graph.json")
        big = 2 ** 58  # float32: 2^60 bytes each, 3 * 2^60 in all
        with open(huge, "w") as f:
            json.dump({"format": "memplan.graph/1", "tensors": [
                {"id": "x", "shape": [big], "dtype": "float32", "kind": "input"},
                {"id": "a", "shape": [big], "dtype": "float32"},
                {"id": "b", "shape": [big], "dtype": "float32"}],
                "ops": [{"id": "r", "type": "relu", "inputs": ["x"], "outputs": ["a"]},
                        {"id": "s", "type": "relu", "inputs": ["a"], "outputs": ["b"]}],
                "outputs": ["b"]}, f)
        for cmd in (["analyze", huge, "-q"], ["plan", huge, "--budget", "1GiB", "-q"],
                    ["lower", huge, "-o", os.path.join(tmp, "j.json")]):
            expect("graph over 2^61 bytes: " + cmd[0], cmd,
                   [huge + ": the tensors and workspaces of this graph add up to "
                    "3458764513820540928 bytes; memplan handles at most 2^61 bytes"])
        deep = os.path.join(tmp, "deep.graph.json")
        with open(deep, "w") as f:
            f.write('{"format": "memplan.graph/1", "tensors": ' + "[" * 100000 +
                    "]" * 100000 + "}")
        expect("graph nested 100000 deep", ["analyze", deep, "-q"],
               [deep + ": nesting deeper than 64 levels", "expected at most 64 levels"])
        plan = os.path.join(tmp, "deep.plan.json")
        with open(plan, "w") as f:
            f.write('{"format": "memplan.plan/1", "steps": ' + "[" * 100000 + "]" * 100000 +
                    "}")
        expect("plan nested 100000 deep", ["verify", MLP, plan],
               [plan + ": nesting deeper than 64 levels"])

        # A path that is not UTF-8 (Linux allows any bytes): the JSON reports
        # write U+FFFD for the bad byte instead of crashing.
        odd = os.path.join(tmp.encode(), b"mlp\xff.graph.json")
        with open(odd, "wb") as f, open(os.path.join(ROOT, MLP), "rb") as src:
            f.write(src.read())
        for sub, extra in (("analyze", []), ("plan", ["--budget", "1GiB"]),
                           ("check", ["--budget", "1GiB"])):
            report = os.path.join(tmp, sub + ".odd.json")
            p = subprocess.run([memplan.encode(), sub.encode(), odd, b"--json", report.encode(),
                                b"-q"] + [a.encode() for a in extra], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            try:
                with open(report, encoding="utf-8") as f:
                    file_field = json.load(f)["graph"]["file"]
            except (OSError, ValueError, KeyError) as e:
                file_field = repr(e)
            if p.returncode == 0 and file_field.endswith("mlp\ufffd.graph.json"):
                passed += 1
            else:
                failed.append("%s of a non-UTF-8 path: exit %d, graph.file %r, stderr %r" %
                              (sub, p.returncode, file_field, p.stderr[-300:]))

    for f in failed:
        print("FAIL " + f)
    print("limits: %d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
