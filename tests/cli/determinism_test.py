#!/usr/bin/env python3
"""Determinism: identical input gives byte-identical output (SPEC section 4).

Runs analyze, lower, plan (at 70% of the baseline peak, with a sweep) and
verify twice on every example, each run in a fresh directory under the same
path, and compares every output file, stdout, stderr and exit code byte for
byte. `profile --backend cpu` is compared too, but only with its measured
times masked (the JSON's *time_us members, the trace's ts and dur): those are
wall-clock measurements and differ from run to run by nature; measured bytes
and everything else must match. Its stdout (which prints times) is not
compared.

Usage: determinism_test.py --memplan PATH
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".json"))
TIME_KEYS = {"ts", "dur"}  # trace events


def mask_times(value):
    """The document with every measured time replaced by 0."""
    if isinstance(value, dict):
        return {k: (0 if (k in TIME_KEYS or k.endswith("time_us")) and
                    isinstance(v, (int, float)) else mask_times(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_times(v) for v in value]
    return value


def run_all(memplan, work):
    """Runs every command once in `work` (cwd); returns {name: bytes} of what
    they printed and wrote."""
    out = {}

    def run(name, *args):
        p = subprocess.run([memplan] + list(args), cwd=work, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        out[name + ".rc"] = str(p.returncode).encode()
        out[name + ".stdout"] = p.stdout
        out[name + ".stderr"] = p.stderr
        return p.returncode

    for ex in EXAMPLES:
        g = os.path.join(ROOT, "examples", ex)
        stem = ex[:-len(".json")]
        run(stem + ".analyze", "analyze", g, "--json", stem + ".analyze.json", "--trace",
            stem + ".analyze.trace.json", "--top", "20")
        run(stem + ".analyze_deferred", "analyze", g, "--accumulation", "deferred", "--json",
            stem + ".deferred.json")
        run(stem + ".lower", "lower", g, "-o", stem + ".joint.json")
        with open(os.path.join(work, stem + ".analyze.json"), encoding="utf-8") as f:
            peak = json.load(f)["peak_bytes"]
        budget = str(peak * 7 // 10)
        run(stem + ".plan", "plan", g, "--budget", budget, "-o", stem + ".plan.json", "--json",
            stem + ".plan.report.json", "--trace", stem + ".plan.trace.json", "--sweep", "4")
        run(stem + ".plan_module", "plan", g, "--budget", budget, "--granularity", "module",
            "-o", stem + ".module.plan.json")
        run(stem + ".verify", "verify", g, stem + ".plan.json", "--json",
            stem + ".verify.json")
        rc = run(stem + ".profile", "profile", g, "--backend", "cpu", "--json",
                 stem + ".profile.json", "--trace", stem + ".profile.trace.json", "-q")
        del out[stem + ".profile.stdout"]  # prints measured times
        if rc == 0:
            for name in (stem + ".profile.json", stem + ".profile.trace.json"):
                path = os.path.join(work, name)
                with open(path, encoding="utf-8") as f:
                    doc = mask_times(json.load(f))
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(doc, f, sort_keys=False)
    for name in sorted(os.listdir(work)):
        with open(os.path.join(work, name), "rb") as f:
            out[name] = f.read()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    tmp = tempfile.mkdtemp(prefix="memplan-determinism-")
    try:
        work = os.path.join(tmp, "work")
        runs = []
        for _ in range(2):
            os.mkdir(work)
            runs.append(run_all(memplan, work))
            shutil.rmtree(work)
        a, b = runs
        failed = []
        if sorted(a) != sorted(b):
            failed.append("different sets of outputs: %s" % sorted(set(a) ^ set(b)))
        for name in sorted(set(a) & set(b)):
            if a[name] != b[name]:
                x, y = a[name], b[name]
                i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]),
                         min(len(x), len(y)))
                failed.append("%s differs at byte %d: %r vs %r" %
                              (name, i, x[max(0, i - 40):i + 40], y[max(0, i - 40):i + 40]))
        files = [n for n in a if not n.endswith((".rc", ".stdout", ".stderr"))]
        if len(files) < 8 * len(EXAMPLES):
            failed.append("only %d output files for %d examples: %s" %
                          (len(files), len(EXAMPLES), sorted(files)))
        for f in failed:
            print("FAIL " + f)
        print("determinism: %d outputs of %d examples compared, %d differ" %
              (len(a), len(EXAMPLES), len(failed)))
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
