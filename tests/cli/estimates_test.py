#!/usr/bin/env python3
"""What the reports say is not measured (issue 31): a symbolic export's frozen
workspace or dropped flop count (the graph's source.warnings, written by
python/memplan/symbolic.py) is printed by analyze and plan whenever --set
moves a symbol away from the exported sizes; the device total is marked an
estimate while the CUDA context is the default (summary, JSON, HTML page);
the plan summary says when SAC's dispatch charge is the unmeasured default.

Usage: estimates_test.py --memplan build/cli/memplan
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
from harness import describe, load, run_tests  # noqa: E402
from memplan import symbolic  # noqa: E402

REPORT_SCHEMA = os.path.join("schemas", "report.schema.json")
GRAPH_SCHEMA = os.path.join("schemas", "graph.schema.json")
FROZEN = ('memplan: warning: op "fc": workspace_bytes frozen at 4.00 KiB by the symbolic '
          'export at batch=2 (not multilinear in batch); at batch=64 it may be larger\n')


def at_batch(point):
    """One export at batch b: fc's scratch grows as b^2, which no multilinear
    expression in batch fits."""
    (b,) = point
    return {"format": "memplan.graph/1", "name": "frozen", "symbols": {},
            "source": {"framework": "test"},
            "tensors": [
                {"id": "x", "shape": [b, 16], "dtype": "float32", "kind": "input"},
                {"id": "w", "shape": [16, 16], "dtype": "float32", "kind": "parameter"},
                {"id": "h", "shape": [b, 16], "dtype": "float32", "kind": "activation"},
                {"id": "l", "shape": [], "dtype": "float32", "kind": "activation"}],
            "ops": [
                {"id": "fc", "type": "linear", "inputs": ["x", "w"], "outputs": ["h"],
                 "phase": "forward", "flops": 512 * b, "workspace_bytes": 256 * b * b},
                {"id": "loss", "type": "sum", "inputs": ["h"], "outputs": ["l"],
                 "phase": "forward"}],
            "outputs": ["l"]}


def write(r, name, doc):
    path = r.path(name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def test_frozen_size(r):
    graph, stats = symbolic.make_symbolic(at_batch, ["batch"], (2,), (1,))
    r.check("the export freezes fc's scratch at the largest value seen (batch 4)",
            graph["ops"][0]["workspace_bytes"] == 4096 and stats["workspace_constant"] == 1,
            graph["ops"][0])
    r.check("... and says so in source.warnings",
            graph["source"]["warnings"] == [
                {"kind": "frozen", "op": "fc", "field": "workspace_bytes", "value": 4096,
                 "symbols": ["batch"], "exported_at": {"batch": 2}}], graph["source"])
    path = write(r, "frozen.graph.json", graph)
    rc, out = r.validate(GRAPH_SCHEMA, [path])
    r.check("the graph with source.warnings matches graph.schema.json", rc == 0, out)

    for sets in ([], ["--set", "batch=2"]):
        rc, out, err = r.run("analyze", path, *sets)
        r.check("analyze %s: at the exported sizes, no warning" % (" ".join(sets) or "as is"),
                rc == 0 and err == "", describe(rc, out, err))
    report = r.path("frozen.analyze.json")
    rc, out, err = r.run("analyze", path, "--set", "batch=64", "--json", report)
    r.check("analyze --set batch=64: one warning naming the op and what was frozen",
            rc == 0 and err == FROZEN, describe(rc, out, err))
    if rc == 0:
        r.check("analyze --json: the warning is in the report's warnings",
                load(report)["warnings"] == [FROZEN[len("memplan: warning: "):-1]],
                load(report)["warnings"])
        vrc, vout = r.validate(REPORT_SCHEMA, [report])
        r.check("analyze --json: matches report.schema.json", vrc == 0, vout)

    report = r.path("frozen.plan.json")
    rc, out, err = r.run("plan", path, "--set", "batch=64", "--budget", "1MiB", "--device",
                         "cpu", "--json", report)
    r.check("plan --set batch=64: the same warning", rc == 0 and err == FROZEN,
            describe(rc, out, err))
    if rc == 0:
        r.check("plan --json: the warning is in the report's warnings",
                load(report)["warnings"] == [FROZEN[len("memplan: warning: "):-1]],
                load(report)["warnings"])
    rc, out, err = r.run("plan", path, "--set", "batch=2", "--budget", "1MiB", "--device", "cpu")
    r.check("plan --set batch=2: no warning", rc == 0 and err == "", describe(rc, out, err))
    # The micro-batch search: said once, at the micro-batch it settles on.
    rc, out, err = r.run("plan", path, "--global-batch", "8", "--budget", "1MiB", "--device",
                         "cpu", "-q")
    r.check("plan --global-batch 8: one warning, at the micro-batch chosen (8)",
            rc == 0 and err == FROZEN.replace("batch=64", "batch=8"), describe(rc, out, err))

    # A malformed entry is bad input (exit 2) naming its JSON pointer.
    bad = json.loads(json.dumps(graph))
    bad["source"]["warnings"][0]["op"] = "nope"
    bad_path = write(r, "bad.graph.json", bad)
    rc, out, err = r.run("analyze", bad_path)
    r.check("a warning naming an unknown op: exit 2, the pointer named",
            rc == 2 and err == f"memplan: error: {bad_path}: /source/warnings/0/op: unknown op "
            "\"nope\"; expected the id of an op in /ops\n", describe(rc, out, err))
    del bad["source"]["warnings"][0]["exported_at"]["batch"]
    bad["source"]["warnings"][0]["op"] = "fc"
    bad_path = write(r, "bad2.graph.json", bad)
    rc, out, err = r.run("plan", bad_path, "--budget", "1MiB")
    r.check("a warning without the exported value of its symbol: exit 2",
            rc == 2 and err == f"memplan: error: {bad_path}: /source/warnings/0/exported_at: no "
            "value for \"batch\"; expected one for each name in /source/warnings/0/symbols\n",
            describe(rc, out, err))


def test_device_estimate(r):
    graph = "examples/gpt_tiny.graph.json"
    rc, out, err = r.run("analyze", graph, "--device", "h100")
    r.check("analyze --device h100: the default CUDA context is marked (estimate)",
            rc == 0 and "CUDA context 600.00 MiB (estimate): fits" in out, describe(rc, out, err))
    for conf, estimate in (("", True), ("cuda_context=512MiB", False)):
        report = r.path("device.json")
        extra = ["--device-conf", conf] if conf else []
        rc, out, err = r.run("analyze", graph, "--device", "h100", "--json", report, *extra)
        if not r.check(f"analyze --device h100 {conf}: exit 0", rc == 0, describe(rc, out, err)):
            continue
        dev = load(report)["device_memory"]
        r.check(f"analyze --json {conf}: which constants are defaults",
                dev["context_is_estimate"] is estimate and dev["capacity_is_preset"] is True
                and dev["workspace_is_default"] is True, dev)
        vrc, vout = r.validate(REPORT_SCHEMA, [report])
        r.check(f"analyze --json {conf}: matches report.schema.json", vrc == 0, vout)
        html = r.path("device.html")
        rc, out, err = r.run("report", graph, "--device", "h100", "--html", html, "-q", *extra)
        if not r.check(f"report --html --device h100 {conf}: exit 0", rc == 0,
                       describe(rc, out, err)):
            continue
        with open(html, encoding="utf-8") as f:
            page = f.read()
        marked = ("(estimate: the CUDA context, 600.00 MiB, is the default)</text>" in page
                  and "CUDA context; an estimate: the CUDA context" in page)
        r.check("report --html {}: the device total is {}".format(
            conf, "marked an estimate" if estimate else "not marked"),
            marked if estimate else ("(estimate" not in page and "an estimate" not in page),
            [line for line in page.split("\n") if "device" in line])


def test_sac_dispatch(r):
    graph = "examples/gpt_tiny.graph.json"
    budget = str(142925421)  # 90% of the baseline
    cases = [
        ([], "  dispatch  SAC's dispatch charged 0 us per op and pass: the h100 preset's "
             "default, not measured (--sac-dispatch-us sets it)\n", "unmeasured_default", 0),
        (["--device", "cpu"], "  dispatch  SAC's dispatch charged 105 us per op and pass: the cpu "
         "preset's, measured (bench/results/sac_dispatch.json)\n", "measured", 105),
        (["--sac-dispatch-us", "3"], "  dispatch  SAC's dispatch charged 3 us per op and pass "
         "(--sac-dispatch-us)\n", "given", 3),
    ]
    for extra, line, source, us in cases:
        report = r.path("sac.json")
        rc, out, err = r.run("plan", graph, "--budget", budget, "--granularity", "sac",
                             "--json", report, *extra)
        label = "plan --granularity sac {}".format(" ".join(extra))
        if not r.check(label + ": exit 0", rc == 0, describe(rc, out, err)):
            continue
        r.check(label + ": the dispatch line", line in out, out)
        doc = load(report)
        r.check(label + ": sac_dispatch_us and sac_dispatch_source",
                doc["sac_dispatch_us"] == us and doc["sac_dispatch_source"] == source,
                {k: doc.get(k) for k in ("sac_dispatch_us", "sac_dispatch_source")})
        vrc, vout = r.validate(REPORT_SCHEMA, [report])
        r.check(label + ": matches report.schema.json", vrc == 0, vout)
    rc, out, err = r.run("plan", graph, "--budget", budget, "--granularity", "sac",
                         "--objective", "flops")
    r.check("plan --granularity sac --objective flops: no dispatch line (nothing charged)",
            rc == 0 and "  dispatch  " not in out, describe(rc, out, err))
    rc, out, err = r.run("plan", graph, "--budget", budget)
    r.check("plan --granularity op: no dispatch line", rc == 0 and "  dispatch  " not in out,
            describe(rc, out, err))


if __name__ == "__main__":
    sys.exit(run_tests(test_frozen_size, test_device_estimate, test_sac_dispatch))
