#!/usr/bin/env python3
"""CLI tests of what --budget bounds (docs/budget.md): the default of --budget-of in
`plan`, `plan --global-batch` and `check` (the device with --device h100, reserved bytes
for a graph whose source.target_device is "cuda" or with --alloc-conf, else allocated
bytes), the summary lines that say so word for word, the warning when an allocated
budget is below the predicted reserved peak, micro-batches bounded on reserved bytes and
on the device, source.target_device errors, and the reports against the schemas.

Usage: budget_test.py --memplan PATH
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, check_exit2, describe, load, run_tests  # noqa: E402

GRAPH = "examples/gpt_tiny.graph.json"
REPORT_SCHEMA = os.path.join("schemas", "report.schema.json")
GRAPH_SCHEMA = os.path.join("schemas", "graph.schema.json")
MIB = 1 << 20


def with_target(r, device):
    """gpt_tiny with source.target_device set (None: the key left out)."""
    doc = load(os.path.join(ROOT, GRAPH))
    if device is not None:
        doc["source"] = dict(doc.get("source", {}), target_device=device)
    path = r.path("gpt_tiny.%s.graph.json" % device)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def plan_json(r, label, *args):
    """Runs plan ... --json; returns (report or None, stdout)."""
    report = r.path("plan.%d.json" % (r.passed + len(r.failed)))
    rc, out, err = r.run("plan", *args, "--json", report)
    if not r.check(label + ": exit 0", rc == 0, describe(rc, out, err)):
        return None, out
    vrc, vout = r.validate(REPORT_SCHEMA, [report])
    r.check(label + ": report matches the schema", vrc == 0, vout)
    return load(report), out


def lines_of(out, prefix):
    return [line for line in out.splitlines() if line.startswith(prefix)]


def test_plan_defaults(r):
    cuda, cpu = with_target(r, "cuda"), with_target(r, "cpu")
    budget = ["--budget", "130MiB", "--top", "0"]
    doc, out = plan_json(r, "target_device cuda", cuda, *budget)
    if doc:
        r.check("target_device cuda: the budget bounds reserved bytes",
                doc["budget_of"] == "reserved" and doc["feasible"]
                and doc["reserved"]["peak_bytes"] <= 130 * MIB, json.dumps(doc["reserved"]))
        r.check("target_device cuda: the summary says so",
                lines_of(out, "  budget ") ==
                ["  budget    130.00 MiB (136314880 bytes) of reserved bytes: fits"], out)
        r.check("target_device cuda: no warning (the budget bounded the reserved peak)",
                not lines_of(out, "  warning "), out)
    doc, out = plan_json(r, "no target_device", GRAPH, *budget)
    if doc:
        r.check("no target_device: the budget bounds allocated bytes",
                doc["budget_of"] == "allocated" and doc["allocation_budgets"] == [130 * MIB],
                doc.get("budget_of"))
        r.check("no target_device: the summary says so",
                lines_of(out, "  budget ") ==
                ["  budget    130.00 MiB (136314880 bytes) of allocated bytes: fits"], out)
        # The plan fits 130 MiB of allocations; the allocator reserves 158 MiB for it.
        r.check("no target_device: the reserved peak the budget did not bound is over it",
                doc["reserved"]["peak_bytes"] == 158 * MIB, json.dumps(doc["reserved"]))
        r.check("no target_device: the summary warns with both numbers, word for word",
                lines_of(out, "  warning ") ==
                ["  warning   the caching allocator is predicted to reserve 158.00 MiB, over the "
                 "budget of 130.00 MiB: --budget-of reserved bounds it"], out)
    doc, out = plan_json(r, "target_device cpu", cpu, *budget)
    if doc:
        r.check("target_device cpu: allocated bytes, and no warning (no caching allocator)",
                doc["budget_of"] == "allocated" and not lines_of(out, "  warning "), out)
    doc, out = plan_json(r, "--alloc-conf", GRAPH, *budget, "--alloc-conf",
                         "expandable_segments:True")
    if doc:
        r.check("--alloc-conf: the budget bounds reserved bytes", doc["budget_of"] == "reserved"
                and doc["reserved"]["alloc_conf"] == "expandable_segments:True", doc["budget_of"])
    doc, out = plan_json(r, "--device h100", cuda, "--budget", "750MiB", "--device", "h100",
                         "--top", "0")
    if doc:
        r.check("--device h100: the budget bounds the device, even for a cuda graph",
                doc["budget_of"] == "device"
                and doc["device_memory"]["total_peak_bytes"] <= 750 * MIB, doc["budget_of"])
        r.check("--device h100: the summary says so",
                lines_of(out, "  budget ") ==
                ["  budget    750.00 MiB (786432000 bytes) on the device: fits"], out)
    doc, out = plan_json(r, "--budget-of allocated on a cuda graph", cuda, *budget,
                         "--budget-of", "allocated")
    if doc:
        r.check("--budget-of allocated wins over target_device cuda",
                doc["budget_of"] == "allocated" and len(lines_of(out, "  warning ")) == 1, out)
    # An allocated budget under a device: the device total over it is said too.
    doc, out = plan_json(r, "--budget-of reserved --device h100", GRAPH, "--budget", "200MiB",
                         "--device", "h100", "--budget-of", "reserved", "--top", "0")
    if doc:
        total = doc["device_memory"]["total_peak_bytes"]
        r.check("--budget-of reserved --device h100: warns that the device holds more",
                lines_of(out, "  warning ") ==
                ["  warning   the device is predicted to hold %.2f MiB (reserved %.2f MiB + CUDA "
                 "context 600.00 MiB (estimate)), over the budget of 200.00 MiB: --budget-of device bounds "
                 "it" % (total / MIB, doc["reserved"]["peak_bytes"] / MIB)], out)


def micro(r, label, graph, budget, *extra):
    doc, out = plan_json(r, label, graph, "--budget", str(budget), "--global-batch", "64",
                         *extra)
    return doc, out


def test_microbatch(r):
    cuda = with_target(r, "cuda")
    budget = 200 * MIB
    alloc, out_a = micro(r, "--global-batch, allocated", GRAPH, budget)
    res, out_r = micro(r, "--global-batch, --budget-of reserved", GRAPH, budget,
                       "--budget-of", "reserved")
    if not alloc or not res:
        return
    r.check("--global-batch: the default is allocated without target_device",
            alloc["budget_of"] == "allocated" and alloc["baseline"]["reserved_peak_bytes"] is None,
            alloc.get("budget_of"))
    r.check("--global-batch allocated: the summary says what the budget bounded",
            lines_of(out_a, "  budget ") ==
            ['  budget    200.00 MiB (209715200 bytes) of allocated bytes, micro-batches over '
             'symbol "batch"'], out_a)
    # The allocated answer (9) reserves 224 MiB: said, with both numbers.
    r.check("--global-batch allocated: the recommended micro-batch's reserved peak is predicted",
            alloc["predicted"]["reserved_peak_bytes"] == 224 * MIB
            and alloc["micro_batch"] == 9, json.dumps(alloc["predicted"]))
    r.check("--global-batch allocated: the summary warns, word for word",
            lines_of(out_a, "  warning ") ==
            ["  warning   the caching allocator is predicted to reserve 224.00 MiB at micro-batch "
             "9, over the budget of 200.00 MiB: --budget-of reserved bounds it"], out_a)
    r.check("--global-batch reserved: budget_of reserved", res["budget_of"] == "reserved")
    r.check("--global-batch reserved: the summary says what the budget bounded",
            lines_of(out_r, "  budget ") ==
            ['  budget    200.00 MiB (209715200 bytes) of reserved bytes, micro-batches over '
             'symbol "batch"'], out_r)
    for kind in ("baseline", "checkpointed"):
        c, a = res[kind], alloc[kind]
        if not r.check("reserved %s: found" % kind, c["found"], json.dumps(c)):
            continue
        r.check("reserved %s: its predicted reserved peak is within the budget" % kind,
                c["reserved_peak_bytes"] <= budget and c["peak_bytes"] <= c["reserved_peak_bytes"],
                json.dumps(c))
        r.check("reserved %s: the next micro-batch's reserved peak is over the budget" % kind,
                c["micro_batch"] == 64 or c["next_reserved_peak_bytes"] > budget, json.dumps(c))
        r.check("reserved %s: no larger than the allocated-bounded micro-batch" % kind,
                c["micro_batch"] <= a["micro_batch"], "%d > %d" % (c["micro_batch"],
                                                                   a["micro_batch"]))
    r.check("--global-batch reserved: the recommended reserved peak is at the top",
            res["predicted"]["reserved_peak_bytes"] ==
            res[res["recommended"]]["reserved_peak_bytes"], json.dumps(res["predicted"]))
    b = res["baseline"]
    r.check("--global-batch reserved: the baseline line, word for word",
            lines_of(out_r, "  baseline ") ==
            ["  baseline  micro-batch %d x %d steps%s: reserved %.2f MiB (%.2f MiB at %d), "
             "peak %.2f MiB; recompute 0.0%%" % (
                 b["micro_batch"], b["accumulation_steps"],
                 "" if b["last_micro_batch"] == b["micro_batch"]
                 else ", the last of %d" % b["last_micro_batch"],
                 b["reserved_peak_bytes"] / MIB, b["next_reserved_peak_bytes"] / MIB,
                 b["micro_batch"] + 1, b["peak_bytes"] / MIB)], out_r)
    # The written plan is the recommended micro-batch's and replays there.
    plan = r.path("mb.plan.json")
    rc, out, err = r.run("plan", GRAPH, "--budget", str(budget), "--global-batch", "64",
                         "--budget-of", "reserved", "-o", plan, "-q")
    rc2, out2, err2 = r.run("verify", GRAPH, plan, "--set", "batch=%d" % res["micro_batch"],
                            "-q")
    r.check("--global-batch reserved -o: the plan verifies at the micro-batch",
            rc == 0 and rc2 == 0, describe(rc, out, err) + describe(rc2, out2, err2))

    dflt, out = micro(r, "--global-batch, target_device cuda", cuda, budget)
    if dflt:
        r.check("--global-batch: target_device cuda defaults to reserved, the same answer",
                dflt["budget_of"] == "reserved" and dflt["micro_batch"] == res["micro_batch"]
                and dflt["baseline"] == res["baseline"]
                and dflt["checkpointed"] == res["checkpointed"], dflt.get("budget_of"))
    dev, out = micro(r, "--global-batch --device h100", GRAPH, 800 * MIB, "--device", "h100")
    if dev:
        r.check("--global-batch --device h100: defaults to the device",
                dev["budget_of"] == "device" and "device_memory" in dev, dev.get("budget_of"))
        for kind in ("baseline", "checkpointed"):
            c = dev[kind]
            if c["found"]:
                r.check("device %s: reserved + context within the budget" % kind,
                        c["reserved_peak_bytes"] + dev["device_memory"]["context_bytes"]
                        <= 800 * MIB, json.dumps(c))
        r.check("--global-batch --device: the summary says so",
                lines_of(out, "  budget ") ==
                ['  budget    800.00 MiB (838860800 bytes) on the device, micro-batches over '
                 'symbol "batch"'], out)
    rc, out, err = r.run("plan", GRAPH, "--budget", "1MiB", "--global-batch", "8",
                         "--budget-of", "reserved")
    r.check("--global-batch reserved: nothing fits, exit 3, the lowest reserved peak named",
            rc == 3 and "  baseline  no micro-batch fits: " in out and " reserved at 1" in out,
            describe(rc, out, err))


def check_json(r, label, expect_rc, *args):
    report = r.path("check.%d.json" % (r.passed + len(r.failed)))
    rc, out, err = r.run("check", *args, "--json", report)
    if not r.check(label + ": exit %d" % expect_rc, rc == expect_rc, describe(rc, out, err)):
        return None, out
    vrc, vout = r.validate(REPORT_SCHEMA, [report])
    r.check(label + ": report matches the schema", vrc == 0, vout)
    return load(report), out


def test_check(r):
    cuda = with_target(r, "cuda")
    doc, out = check_json(r, "check, target_device cuda", 0, cuda, "--budget", "160MiB")
    if doc:
        r.check("check, target_device cuda: the budget bounds the reserved peak",
                doc["budget_of"] == "reserved" and doc["reserved_peak_bytes"] == 158 * MIB
                and doc["conditions"][0]["condition"] == "reserved_peak_bytes <= budget_bytes"
                and doc["conditions"][0]["actual"] == 158 * MIB, json.dumps(doc["conditions"]))
        r.check("check, target_device cuda: the text says so, word for word",
                "  ok        peak within budget: reserved peak 158.00 MiB (165675008 bytes) fits "
                "the budget 160.00 MiB (167772160 bytes) (2.00 MiB to spare)\n" in out, out)
    doc, out = check_json(r, "check, target_device cuda, 157 MiB", 1, cuda, "--budget",
                          "157MiB")
    if doc:
        r.check("check: a reserved peak over the budget fails, though allocations fit",
                doc["peak_bytes"] <= 157 * MIB and doc["failures"][0]["actual"] == 158 * MIB,
                json.dumps(doc["failures"]))
    doc, out = check_json(r, "check, no target_device", 0, GRAPH, "--budget", "160MiB")
    if doc:
        r.check("check, no target_device: allocated bytes",
                doc["budget_of"] == "allocated" and doc["reserved_peak_bytes"] is None
                and doc["conditions"][0]["condition"] == "peak_bytes <= budget_bytes",
                json.dumps(doc["conditions"]))
        r.check("check, no target_device: the text says so, word for word",
                "  ok        peak within budget: allocated peak 151.45 MiB (158806024 bytes) fits "
                "the budget 160.00 MiB (167772160 bytes) (8.55 MiB to spare)\n" in out, out)
    doc, out = check_json(r, "check --device h100", 1, GRAPH, "--budget", "160MiB", "--device",
                          "h100")
    if doc:
        r.check("check --device h100: the device total (with the 600 MiB context)",
                doc["budget_of"] == "device" and doc["device_total_bytes"] ==
                doc["reserved_peak_bytes"] + 600 * MIB, json.dumps(doc["conditions"]))
    doc, out = check_json(r, "check --budget-of allocated on a cuda graph", 0, cuda, "--budget",
                          "152MiB", "--budget-of", "allocated")
    if doc:
        r.check("check --budget-of allocated wins", doc["budget_of"] == "allocated")
    base = r.path("base.json")
    rc, out, err = r.run("analyze", cuda, "--json", base, "-q")
    doc, out = check_json(r, "check --baseline without --budget", 0, cuda, "--baseline", base)
    if doc:
        r.check("check without --budget: budget_of null, the regression on allocated peaks",
                doc["budget_of"] is None and doc["reserved_peak_bytes"] is None
                and doc["conditions"][0]["name"] == "regression", json.dumps(doc["conditions"]))
    check_exit2(r, [
        (("check", GRAPH, "--budget", "1GiB", "--budget-of", "device"),
         "memplan: error: --budget-of device: needs --device (h100, h200, a100)\n"),
        (("check", GRAPH, "--budget-of", "reserved", "--tolerance", "2%", "--baseline", GRAPH),
         "memplan: error: --budget-of reserved: needs --budget SIZE\n"),
    ])


def test_target_device_errors(r):
    doc = load(os.path.join(ROOT, GRAPH))
    cases = []
    for value, shown in (("tpu", '"tpu"'), (1, "1"), ("GPU", '"GPU"')):
        doc["source"] = {"framework": "pytorch", "target_device": value}
        path = r.path("bad_target_%s.graph.json" % shown.strip('"'))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        want = ("memplan: error: %s: /source/target_device: unknown target device %s; expected "
                '"cpu" or "cuda"\n' % (path, shown))
        cases += [(("plan", path, "--budget", "1GiB"), want), (("analyze", path), want),
                  (("check", path, "--budget", "1GiB"), want)]
        rc, out = r.validate(GRAPH_SCHEMA, [path])
        r.check("graph schema refuses target_device %s" % shown, rc != 0, out)
    check_exit2(r, cases)
    for device in ("cpu", "cuda"):
        path = with_target(r, device)
        rc, out = r.validate(GRAPH_SCHEMA, [path])
        r.check("graph schema accepts target_device %s" % device, rc == 0, out)
        lowered = r.path("lowered.%s.json" % device)
        rc, out, err = r.run("lower", path, "-o", lowered, "-q")
        r.check("lower keeps target_device %s" % device,
                rc == 0 and load(lowered)["source"]["target_device"] == device,
                describe(rc, out, err))


def test_microbatch_floor(r):
    """Under 1 MiB nothing fits gpt_tiny at batch 1, whatever it recomputes (its floor
    is over the budget): the search says so without planning; exit 3."""
    for extra in ((), ("--budget-of", "reserved")):
        label = "--global-batch under batch 1's floor %s" % " ".join(extra)
        report = r.path("floor.%d.json" % (r.passed + len(r.failed)))
        rc, out, err = r.run("plan", GRAPH, "--budget", "1MiB", "--global-batch", "64",
                             "--json", report, *extra)
        if not r.check(label + ": exit 3", rc == 3, describe(rc, out, err)):
            continue
        vrc, vout = r.validate(REPORT_SCHEMA, [report])
        r.check(label + ": report matches the schema", vrc == 0, vout)
        doc = load(report)
        one = [p for p in doc["evaluated"] if p["batch"] == 1]
        r.check(label + ": batch 1 over its floor, unplanned",
                len(one) == 1 and one[0].get("over_floor") is True and not one[0]["planned"]
                and not any(p["planned"] for p in doc["evaluated"]), json.dumps(doc["evaluated"]))
        floor = doc["checkpointed"]["lowest_peak_bytes"]
        r.check(label + ": the choice says its lowest peak is the floor",
                doc["checkpointed"].get("lowest_is_floor") is True, json.dumps(doc["checkpointed"]))
        r.check(label + ": the summary says so, word for word",
                lines_of(out, "  planned ") ==
                ["  planned   no micro-batch fits: no program goes below %.2f MiB at 1 (its floor)"
                 % (floor / MIB)], out)


if __name__ == "__main__":
    sys.exit(run_tests(test_plan_defaults, test_microbatch, test_microbatch_floor, test_check,
                       test_target_device_errors))
