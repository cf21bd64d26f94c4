#!/usr/bin/env python3
"""CLI tests of `memplan check`: every exit code, each output format, the
inclusive budget and regression boundaries, baseline reports of every kind,
bad input, schema validity and byte-identical reports.

Usage: check_test.py --memplan PATH
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, Runner, describe, load, read_bytes  # noqa: E402

GRAPH = "examples/gpt_tiny.graph.json"
SCHEMA = "schemas/report.schema.json"


def write(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def baseline_with_limit(limit, pct):
    """The smallest baseline B whose limit B + floor(B * pct / 100) is `limit`."""
    b = limit * 100 // (100 + pct) - 2
    while b + b * pct // 100 < limit:
        b += 1
    assert b + b * pct // 100 == limit, (b, limit)
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = Runner(os.path.abspath(args.memplan), tmp)
        rc, out, err = r.run("analyze", GRAPH, "--json", r.path("analyze.json"), "-q")
        r.check("analyze for the baseline", rc == 0, describe(rc, out, err))
        peak = load(r.path("analyze.json"))["peak_bytes"]
        reports = []

        def check(name, expect_rc, *argv):
            report = r.path("check%d.json" % len(reports))
            rc, out, err = r.run("check", GRAPH, *argv, "--json", report)
            ok = r.check("%s: exit %d" % (name, expect_rc), rc == expect_rc,
                         describe(rc, out, err))
            doc = load(report) if ok and expect_rc in (0, 1) else None
            if doc is not None:
                reports.append(report)
                r.check("%s: passed matches the exit code" % name,
                        doc["passed"] == (expect_rc == 0), json.dumps(doc["failures"]))
            return rc, out, err, doc

        # Budget: inclusive.
        _, out, _, doc = check("budget = peak", 0, "--budget", str(peak))
        r.check("text summary says passed", "result: passed" in out, out)
        r.check("report peak is analyze's", doc and doc["peak_bytes"] == peak)
        _, out, _, doc = check("budget = peak - 1", 1, "--budget", str(peak - 1))
        r.check("text summary says FAILED", "result: FAILED" in out and "FAIL" in out, out)
        r.check("budget failure: expected vs actual",
                doc and doc["failures"] == [{
                    "name": "budget", "condition": "peak_bytes <= budget_bytes",
                    "expected": peak - 1, "actual": peak,
                    "message": doc["failures"][0]["message"]}], json.dumps(doc))

        # Regression at the tolerance boundary, 0 and 2%, percent and fraction.
        base = r.path("base.json")
        an = load(r.path("analyze.json"))
        for tol, pct in (("0", 0), ("0%", 0), ("2%", 2), ("0.02", 2)):
            write(base, dict(an, peak_bytes=baseline_with_limit(peak, pct)))
            _, _, _, doc = check("limit = peak at %s" % tol, 0, "--budget", "1GiB",
                                 "--baseline", base, "--tolerance", tol)
            r.check("limit reported at %s" % tol,
                    doc and doc["baseline"]["limit_bytes"] == peak, json.dumps(doc))
            write(base, dict(an, peak_bytes=baseline_with_limit(peak - 1, pct)))
            _, _, _, doc = check("limit = peak - 1 at %s" % tol, 1, "--budget", "1GiB",
                                 "--baseline", base, "--tolerance", tol)
            r.check("one byte over at %s: expected vs actual" % tol,
                    doc and [(f["name"], f["expected"], f["actual"]) for f in doc["failures"]]
                    == [("regression", peak - 1, peak)], json.dumps(doc))
        # No --tolerance: 0.
        write(base, dict(an, peak_bytes=peak - 1))
        check("default tolerance 0", 1, "--budget", "1GiB", "--baseline", base)
        # Regression alone: no --budget needed; neither is exit 2.
        _, out, _, doc = check("regression only, regressed", 1, "--baseline", base)
        r.check("regression only: one condition, budget_bytes null",
                doc and [f["name"] for f in doc["conditions"]] == ["regression"]
                and doc["budget_bytes"] is None, json.dumps(doc))
        r.check("regression only: no budget line in the summary", "budget" not in out, out)
        write(base, dict(an, peak_bytes=peak))
        check("regression only, same peak", 0, "--baseline", base)
        write(base, dict(an, peak_bytes=peak - 1))
        rc, out, err = r.run("check", GRAPH)
        r.check("neither --budget nor --baseline: exit 2 with the message",
                rc == 2 and err == "memplan: error: check needs --budget SIZE, --baseline "
                "REPORT.json, or both\n", describe(rc, out, err))
        # Both conditions fail together.
        _, _, _, doc = check("over budget and regressed", 1, "--budget", "1KiB",
                             "--baseline", base)
        r.check("both failures listed",
                doc and [f["name"] for f in doc["failures"]] == ["budget", "regression"])

        # Baselines from each report kind: plan (predicted/peak_bytes), check, verify.
        plan = r.path("plan.json")
        rc, out, err = r.run("plan", GRAPH, "--budget", "110MiB", "-o", plan, "--json",
                             r.path("plan_report.json"), "-q")
        r.check("plan for --plan", rc == 0, describe(rc, out, err))
        planned = load(r.path("plan_report.json"))["predicted"]["peak_bytes"]
        _, _, _, doc = check("--plan fits", 0, "--budget", "110MiB", "--plan", plan,
                             "--baseline", r.path("plan_report.json"))
        r.check("--plan peak is the plan's", doc and doc["peak_bytes"] == planned
                and doc["program"] == {"source": "plan", "plan": plan,
                                       "accumulation": "inplace"}, json.dumps(doc))
        r.check("plan baseline pointer",
                doc and doc["baseline"]["pointer"] == "/predicted/peak_bytes")
        _, _, _, doc = check("baseline program against the plan's peak", 1, "--budget", "1GiB",
                             "--baseline", r.path("plan_report.json"), "--tolerance", "2%")
        _, _, _, doc = check("a check report as baseline", 0, "--budget", "1GiB", "--baseline",
                             reports[0])
        rc, _, err = r.run("verify", GRAPH, plan, "--json", r.path("verify.json"), "-q")
        check("a verify report as baseline", 0, "--budget", "1GiB", "--plan", plan,
              "--baseline", r.path("verify.json"))

        # An invalid plan fails the check (exit 1), naming the step.
        bad_plan = load(plan)
        bad_plan["steps"] = [s for s in bad_plan["steps"] if "free" not in s][:3] + \
            [{"free": ["loss"]}]
        write(r.path("bad_plan.json"), bad_plan)
        _, out, _, doc = check("invalid plan", 1, "--budget", "1GiB", "--plan",
                               r.path("bad_plan.json"))
        r.check("invalid plan: failure with the simulator's message",
                doc and doc["failures"][0]["name"] == "plan" and doc["peak_bytes"] is None
                and "step" in doc["failures"][0]["actual"], json.dumps(doc))

        # Formats.
        rc, out, err = r.run("check", GRAPH, "--budget", "1KiB", "--baseline", reports[0],
                             "--format", "github")
        lines = out.splitlines()
        r.check("github: exit 1", rc == 1, describe(rc, out, err))
        r.check("github: one ::error and one ::notice",
                len(lines) == 2 and lines[0].startswith("::error file=%s,title=" % GRAPH)
                and lines[1].startswith("::notice file=%s,title=" % GRAPH), out)
        r.check("github: % escaped", "%25" in out and "% " not in out.replace("%25", ""), out)
        rc, out, err = r.run("check", GRAPH, "--budget", "1KiB", "--format", "markdown")
        r.check("markdown: exit 1 with a table",
                rc == 1 and out.startswith("### memplan check: FAILED")
                and "| condition | expected | actual | result |" in out and "**FAIL**" in out,
                describe(rc, out, err))
        rc, out, err = r.run("check", GRAPH, "--budget", "1GiB", "--format", "markdown")
        r.check("markdown: passed", rc == 0 and "### memplan check: passed" in out, out)
        rc, out, err = r.run("check", GRAPH, "--budget", "1KiB", "--quiet")
        r.check("--quiet: exit 1, nothing on stdout", rc == 1 and out == "", out)

        # Bad usage and input: exit 2 with the offending text.
        def bad(name, needle, *argv):
            rc, out, err = r.run("check", GRAPH, *argv)
            r.check("%s: exit 2 naming %s" % (name, needle), rc == 2 and needle in err,
                    describe(rc, out, err))

        bad("bad tolerance", '"2x"', "--budget", "1GiB", "--baseline", reports[0],
            "--tolerance", "2x")
        bad("negative tolerance", '"-2%"', "--budget", "1GiB", "--baseline", reports[0],
            "--tolerance=-2%")
        bad("tolerance without baseline", "--tolerance 2%: needs --baseline", "--budget", "1GiB",
            "--tolerance", "2%")
        bad("bad budget", '"lots"', "--budget", "lots")
        bad("no budget", "--budget", "--json", r.path("x.json"))
        bad("bad format", "--format", "--budget", "1GiB", "--format", "xml")
        bad("missing baseline", "nope.json", "--budget", "1GiB", "--baseline", "nope.json")
        for name, doc, needle in (
                ("not JSON", "{", "not JSON"),
                ("wrong format", {"format": "memplan.plan/1"},
                 '/format: found "memplan.plan/1"; expected "memplan.report/1"'),
                ("unknown command", {"format": "memplan.report/1", "command": "lower"},
                 '/command: found "lower"'),
                ("no peak", {"format": "memplan.report/1", "command": "analyze"},
                 "/peak_bytes: found nothing; expected the peak as an integer number of bytes"),
                ("plan without predicted peak", {"format": "memplan.report/1",
                                                 "command": "plan", "predicted": {}},
                 "/predicted/peak_bytes: found nothing"),
                ("string peak", {"format": "memplan.report/1", "command": "check",
                                 "peak_bytes": "1GiB"}, '/peak_bytes: found "1GiB"')):
            f = write(r.path("bad_base.json"), doc)
            bad("baseline " + name, f + ": " + needle, "--budget", "1GiB", "--baseline", f)

        # The sample workflow's command passes against the committed baseline.
        with open(os.path.join(ROOT, "examples", "ci", "memory-check.yml"), encoding="utf-8") as f:
            yml = f.read()
        step = yml.split("name: Check the predicted peak")[1].split("run: >")[1].split("- ")[0]
        argv = " ".join(step.split()).split()
        r.check("workflow step runs memplan check", argv[:2] == ["build/cli/memplan", "check"],
                step)
        argv = [a.replace("memplan-check.json", r.path("workflow.json")) for a in argv[2:]]
        rc, out, err = r.run("check", *argv)
        r.check("workflow check passes on the committed baseline", rc == 0 and
                out.startswith("::notice") and "::error" not in out, describe(rc, out, err))
        reports.append(r.path("workflow.json"))
        rc, out = r.validate(SCHEMA, [os.path.join("examples", "ci", "gpt_tiny.baseline.json")])
        r.check("the committed baseline validates", rc == 0, out)

        # --optimizer: state bytes are 1x (momentum) or 2x (adam, adamw) the
        # parameters' on gpt_tiny (float32, every parameter alive at the peak).
        params = an["by_category"]["parameter"]
        for opt, factor in (("sgd", 0), ("momentum", 1), ("adam", 2), ("adamw", 2)):
            rc, out, err = r.run("analyze", GRAPH, "--optimizer", opt, "--json",
                                 r.path("opt.json"), "-q")
            d = load(r.path("opt.json")) if rc == 0 else {}
            r.check("--optimizer %s: peak + %dx parameter bytes" % (opt, factor),
                    rc == 0 and d["peak_bytes"] == peak + factor * params and
                    d["by_category"]["optimizer_state"] == factor * params,
                    describe(rc, out, err))
        rc, out, err = r.run("analyze", GRAPH, "--optimizer", "adam", "--master-weights", "fp32",
                             "--json", r.path("opt.json"), "-q")
        r.check("--master-weights fp32 on float32 parameters adds no copy",
                rc == 0 and load(r.path("opt.json"))["peak_bytes"] == peak + 2 * params)
        _, _, _, doc = check("check --optimizer adam", 1, "--budget", str(peak + params),
                             "--optimizer", "adam")
        r.check("check report names the optimizer", doc and doc["optimizer"] == "adam" and
                doc["peak_bytes"] == peak + 2 * params, json.dumps(doc))
        rc, out, err = r.run("analyze", "examples/mlp.graph.json", "--optimizer", "adam",
                             "--json", r.path("mlp.json"), "-q")
        r.check("mlp with adam peaks in the optimizer phase (its update workspace)",
                rc == 0 and load(r.path("mlp.json"))["peak_phase"] == "optimizer",
                describe(rc, out, err))
        rc, out, err = r.run("plan", GRAPH, "--budget", "200MiB", "--optimizer", "adam",
                             "--json", r.path("optplan.json"), "-q")
        r.check("plan --optimizer adam fits 200 MiB", rc == 0, describe(rc, out, err))
        rc, out, err = r.run("analyze", GRAPH, "--master-weights", "fp32")
        r.check("--master-weights without --optimizer: exit 2",
                rc == 2 and "--master-weights fp32: needs --optimizer" in err, err)

        # Determinism and schema.
        rc, _, _ = r.run("check", GRAPH, "--budget", "1KiB", "--baseline", reports[0],
                         "--json", r.path("again.json"))
        rc2, _, _ = r.run("check", GRAPH, "--budget", "1KiB", "--baseline", reports[0],
                          "--json", r.path("again2.json"))
        r.check("byte-identical reports", read_bytes(r.path("again.json")) ==
                read_bytes(r.path("again2.json")))
        rc, out = r.validate(SCHEMA, reports)
        r.check("%d check reports validate" % len(reports), rc == 0, out)

        print("check_test: %d passed, %d failed" % (r.passed, len(r.failed)))
        return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
