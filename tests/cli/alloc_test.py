#!/usr/bin/python3
"""CLI tests of the reserved-memory prediction of `memplan analyze` (stdlib only).

Usage: alloc_test.py --memplan PATH/TO/memplan

Checks --alloc-conf's error message and exit code, and that the JSON report's
"reserved" object is there, valid and no lower than the allocation peak.
Prints one line per failure and a closing line "N passed, M failed"; exits 1
when anything failed.
"""
import argparse
import json
import os
import sys
import tempfile

from harness import Runner, describe

GRAPH = "examples/gpt_tiny.graph.json"


def test_bad_alloc_conf(r):
    rc, out, err = r.run("analyze", GRAPH, "--alloc-conf", "max_split_size_mb:abc")
    want = ('memplan: error: --alloc-conf: max_split_size_mb: expected a number of MiB >= 20, '
            'found "abc"\n')
    r.check("--alloc-conf max_split_size_mb:abc exits 2", rc == 2, describe(rc, out, err))
    r.check("--alloc-conf max_split_size_mb:abc: exact message", err == want, err)
    r.check("--alloc-conf max_split_size_mb:abc: nothing on stdout", out == "", out)


def reserved_of(r, label, *extra):
    report = r.path("r.json")
    rc, out, err = r.run("analyze", GRAPH, "--json", report, "-q", *extra)
    if not r.check(label + ": exit 0", rc == 0, describe(rc, out, err)):
        return None, None
    vrc, vout = r.validate(os.path.join("schemas", "report.schema.json"), [report])
    r.check(label + ": report matches schemas/report.schema.json", vrc == 0, vout)
    with open(report, encoding="utf-8") as f:
        doc = json.load(f)
    if not r.check(label + ": report has reserved", "reserved" in doc, sorted(doc)):
        return doc, None
    return doc, doc["reserved"]


def test_reserved_in_report(r):
    doc, res = reserved_of(r, "analyze --json")
    if res is None:
        return
    r.check("reserved.peak_bytes >= peak_bytes", res["peak_bytes"] >= doc["peak_bytes"], res)
    r.check("reserved.peak_bytes >= allocated_peak_bytes >= peak_bytes",
            res["peak_bytes"] >= res["allocated_peak_bytes"] >= doc["peak_bytes"], res)
    r.check("reserved.alloc_conf is empty by default", res["alloc_conf"] == "", res)
    r.check("reserved.iterations is 2", res["iterations"] == 2, res)
    doc, res = reserved_of(r, "analyze --alloc-conf expandable_segments:True", "--alloc-conf",
                           "expandable_segments:True")
    if res is not None:
        r.check("reserved.alloc_conf echoes --alloc-conf",
                res["alloc_conf"] == "expandable_segments:True", res)
        r.check("expandable: reserved.peak_bytes >= peak_bytes",
                res["peak_bytes"] >= doc["peak_bytes"], res)


def test_summary_line(r):
    rc, out, err = r.run("analyze", GRAPH, "--top", "0")
    lines = out.splitlines()
    peak = [i for i, l in enumerate(lines) if l.startswith("  peak ")]
    ok = rc == 0 and len(peak) == 1 and peak[0] + 1 < len(lines) and \
        lines[peak[0] + 1].startswith("  reserved  ")
    r.check("summary: a reserved line right after the peak line", ok, describe(rc, out, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = Runner(os.path.abspath(args.memplan), tmp)
        test_bad_alloc_conf(r)
        test_reserved_in_report(r)
        test_summary_line(r)
    print("%d passed, %d failed" % (r.passed, len(r.failed)))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
