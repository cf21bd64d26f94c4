#!/usr/bin/python3
"""CLI tests of the reserved-memory prediction of `memplan analyze` (stdlib only).

Usage: alloc_test.py --memplan PATH/TO/memplan

Checks --alloc-conf's error message and exit code, and that the JSON report's
"reserved" object is there, valid and no lower than the allocation peak.
Prints one line per failure and a closing line "N passed, M failed"; exits 1
when anything failed.
"""
import json
import os
import sys

from harness import check_exit2, describe, run_tests

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


def test_device(r):
    """--device: the whole device's memory, in analyze and plan; plan budgets it by default."""
    doc, res = reserved_of(r, "analyze --device h100", "--device", "h100")
    _, bare = reserved_of(r, "analyze without --device")
    if res is None or bare is None:
        return
    dev = doc.get("device_memory")
    if not r.check("analyze --device h100: report has device_memory", dev is not None, sorted(doc)):
        return
    r.check("device.total = reserved + context",
            dev["total_peak_bytes"] == dev["reserved_peak_bytes"] + dev["context_bytes"], dev)
    r.check("device.reserved_peak_bytes is the report's reserved peak",
            dev["reserved_peak_bytes"] == res["peak_bytes"], (dev, res))
    r.check("the cuBLAS workspace (32 MiB on sm90) is held by the allocator",
            dev["cublas_workspace_bytes"] == 32 << 20 and
            res["peak_bytes"] >= bare["peak_bytes"] + (20 << 20), (res, bare))
    r.check("the context is an estimate by default", dev["context_is_estimate"] is True)
    r.check("fits on an H100", dev["fits"] is True and dev["capacity_bytes"] == 81050 << 20)
    rc, out, err = r.run("analyze", GRAPH, "--device", "h100")
    r.check("summary has the device line",
            "  device    " in out and "on h100: reserved" in out and
            "CUDA context 600.00 MiB (estimate): fits" in out, out)

    # A capacity below the step: does not fit, and says by how much.
    doc, _ = reserved_of(r, "analyze --device-conf capacity=100MiB", "--device", "a100",
                         "--device-conf", "capacity=100MiB,cuda_context=10MiB")
    if doc:
        dev = doc["device_memory"]
        r.check("small capacity: does not fit", dev["fits"] is False and
                dev["context_is_estimate"] is False and
                dev["cublas_workspace_bytes"] == 8519680, dev)

    # plan --device: the budget bounds the whole device unless --budget-of says otherwise.
    report = r.path("plan.json")
    rc, out, err = r.run("plan", GRAPH, "--budget", "750MiB", "--device", "h100", "--json",
                         report, "-q")
    if r.check("plan --device h100 --budget 750MiB: exit 0", rc == 0, describe(rc, out, err)):
        vrc, vout = r.validate(os.path.join("schemas", "report.schema.json"), [report])
        r.check("plan --device: report matches the schema", vrc == 0, vout)
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
        r.check("plan --device: budget_of device", doc.get("budget_of") == "device", doc.get(
            "budget_of"))
        r.check("plan --device: the device total fits the budget",
                doc["feasible"] and doc["device_memory"]["total_peak_bytes"] <= 750 << 20, doc.get("device_memory"))
    rc, out, err = r.run("plan", GRAPH, "--budget", "750MiB", "--device", "h100",
                         "--budget-of", "allocated", "--json", report, "-q")
    if r.check("plan --budget-of allocated --device: exit 0", rc == 0, describe(rc, out, err)):
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
        r.check("plan --budget-of allocated: kept", doc["budget_of"] == "allocated" and
                "device_memory" in doc, doc.get("budget_of"))

    check_exit2(r, [
        (("analyze", GRAPH, "--device-conf", "capacity=1GiB"),
         "memplan: error: --device-conf: needs --device (h100, h200, a100)\n"),
        (("analyze", GRAPH, "--device", "v100"),
         "memplan: error: --device v100: no memory preset for it; expected one of h100, h200, "
         "a100\n"),
        (("analyze", GRAPH, "--device", "h100", "--device-conf", "ram=1GiB"),
         "memplan: error: --device-conf: unknown key \"ram\": expected capacity, cuda_context, "
         "cublas_workspace, cublas_workspace_config or cublaslt_workspace (key=value, "
         "comma-separated)\n"),
        (("plan", GRAPH, "--budget", "1GiB", "--budget-of", "device"),
         "memplan: error: --budget-of device: needs --device (h100, h200, a100)\n"),
    ])


if __name__ == "__main__":
    sys.exit(run_tests(test_bad_alloc_conf, test_reserved_in_report, test_summary_line, test_device))
