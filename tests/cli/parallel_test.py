#!/usr/bin/python3
"""CLI tests of --parallel (one rank's step: analyzer/lower/parallel/rank_step.h), stdlib only.

Usage: parallel_test.py --memplan PATH/TO/memplan

analyze, plan, check and report take --parallel ddp|zero1|fsdp --world-size N,
and --parallel pipeline --pp-stages S --micro-batches M (one stage's step);
the reports carry graph.parallel and match schemas/report.schema.json;
report and snapshot under --parallel show the rank's numbers analyze gives
(peak, bytes by kind, reserved; the pickle's allocated and reserved peaks and
segments); bad options exit 2 with exact messages. Prints one line per
failure and "N passed, M failed"; exits 1 when anything failed.
"""
import html
import json
import os
import pickle
import re
import sys

from harness import check_exit2, describe, run_tests

GRAPH = "examples/gpt_tiny.graph.json"
MIB = 1 << 20


def analyze(r, label, *extra):
    report = r.path("a.json")
    rc, out, err = r.run("analyze", GRAPH, "--optimizer", "adam", "--json", report, *extra)
    if not r.check(label + ": exit 0", rc == 0, describe(rc, out, err)):
        return None, out
    vrc, vout = r.validate(os.path.join("schemas", "report.schema.json"), [report])
    r.check(label + ": report matches schemas/report.schema.json", vrc == 0, vout)
    with open(report, encoding="utf-8") as f:
        return json.load(f), out


def test_strategies(r):
    single, _ = analyze(r, "single device")
    ddp, out = analyze(r, "ddp", "--parallel", "ddp", "--world-size", "8")
    zero1, _ = analyze(r, "zero1", "--parallel", "zero1", "--world-size", "8")
    fsdp, fout = analyze(r, "fsdp", "--parallel", "fsdp", "--world-size", "8")
    mixed, mout = analyze(r, "fsdp bfloat16", "--parallel", "fsdp", "--world-size", "8",
                          "--fsdp-param-dtype", "bfloat16")
    if mixed and fsdp:
        r.check("fsdp bfloat16: block and line", mixed["graph"]["parallel"].get("param_dtype")
                == "bfloat16" and ", gathered as bfloat16\n" in mout, mout)
        r.check("fsdp bfloat16: a lower peak than float32",
                mixed["peak_bytes"] < fsdp["peak_bytes"])
    if not (single and ddp and zero1 and fsdp):
        return
    r.check("single device: no parallel block", "parallel" not in single["graph"])
    p = ddp["graph"].get("parallel", {})
    r.check("ddp: block", p.get("strategy") == "ddp" and p.get("world_size") == 8
            and p.get("buckets", 0) >= 1 and p.get("gradient_as_bucket_view") is False, p)
    r.check("ddp: the buckets hold every gradient: the parameter bytes",
            p.get("bucket_bytes") == p.get("parameter_bytes"), p)
    r.check("ddp: peak at least the single device's", ddp["peak_bytes"] >= single["peak_bytes"])
    r.check("ddp: summary line",
            "  rank      0 of 8 under ddp: parameters 14.28 MiB, optimizer state 28.55 MiB, "
            "2 gradient buckets 14.28 MiB\n" in out, out)
    z = zero1["graph"].get("parallel", {})
    r.check("zero1: a share of the optimizer state",
            0 < z.get("optimizer_state_bytes", 0) < p.get("optimizer_state_bytes", 0), z)
    r.check("zero1: lower peak than ddp", zero1["peak_bytes"] < ddp["peak_bytes"])
    f = fsdp["graph"].get("parallel", {})
    r.check("fsdp: parameters sharded 8 ways (padded)",
            p.get("parameter_bytes", 0) / 8 <= f.get("parameter_bytes", 0)
            < p.get("parameter_bytes", 0) / 7, f)
    # Modules above the shard depth (embeddings, final norm, head) are the root's.
    r.check("fsdp: units", f.get("units") == ["", "h.0", "h.1"]
            and f.get("reshard_after_forward"), f)
    r.check("fsdp: lower peak than single device", fsdp["peak_bytes"] < single["peak_bytes"])


def snapshot_peaks(path):
    """(allocated peak, reserved peak, segments) of a memory_viz pickle, from its trace
    alone: alloc less free_completed, segment_alloc/map less segment_free/unmap."""
    with open(path, "rb") as f:
        d = pickle.load(f)
    allocated = reserved = peak_a = peak_r = 0
    for e in d["device_traces"][0]:
        allocated += {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)
        reserved += {"segment_alloc": e["size"], "segment_map": e["size"],
                     "segment_free": -e["size"], "segment_unmap": -e["size"]}.get(e["action"], 0)
        peak_a, peak_r = max(peak_a, allocated), max(peak_r, reserved)
    return peak_a, peak_r, len(d["segments"])


def same_as_analyze(r, label, *flags):
    """`report --html` and `snapshot` under the rank's flags show the rank's numbers
    `analyze` gives under them: the peak (bytes, step, op), the bytes by kind at the
    peak and the reserved peak on the page and its summary line; the allocated and
    reserved peaks and the segments of the pickle's trace. Returns analyze's report."""
    flags = ("--optimizer", "adam") + flags
    a = r.path("same.analyze.json")
    rc, out, err = r.run("analyze", GRAPH, "--json", a, "-q", *flags)
    if not r.check(label + ": analyze exit 0", rc == 0, describe(rc, out, err)):
        return None
    with open(a, encoding="utf-8") as f:
        want = json.load(f)
    page = r.path("same.html")
    rc, out, err = r.run("report", GRAPH, "--html", page, *flags)
    if r.check(label + ": report exit 0", rc == 0, describe(rc, out, err)):
        with open(page, encoding="utf-8") as f:
            text = f.read()
        peak = re.search(r'id="peak" data-step="(\d+)" data-op="([^"]*)" data-bytes="(\d+)"', text)
        got = peak and (int(peak.group(3)), int(peak.group(1)), html.unescape(peak.group(2)))
        r.check(label + ": report's peak (bytes, step, op) is analyze's", got ==
                (want["peak_bytes"], want["peak_step"], want["peak_op"]),
                (got, want["peak_bytes"], want["peak_step"], want["peak_op"]))
        r.check(label + ": report's summary line is analyze's peak",
                out.endswith("(%d bytes) at step %d\n" % (want["peak_bytes"], want["peak_step"])),
                out)
        kinds = {k: int(v) for k, v in re.findall(
            r'<tr data-kind="(\w+)" data-bytes="\d+"><td>\w+</td><td class="n">(\d+)</td>', text)}
        total = re.search(r'<tr><th>total</th><td class="n">(\d+)</td>', text)
        nonzero = {k: v for k, v in want["by_category"].items() if v}
        r.check(label + ": report's bytes by kind at the peak are analyze's", kinds == nonzero
                and total and int(total.group(1)) == want["peak_bytes"],
                (kinds, total and total.group(1), want["by_category"]))
        mib = "reserved %.2f MiB (steady state)" % (want["reserved"]["peak_bytes"] / MIB)
        r.check(label + ": report's reserved curve is analyze's", mib in text, mib)
    pickled = r.path("same.pickle")
    rc, out, err = r.run("snapshot", GRAPH, "-o", pickled, *flags)
    if r.check(label + ": snapshot exit 0", rc == 0, describe(rc, out, err)):
        got = snapshot_peaks(pickled)
        r.check(label + ": snapshot's allocated peak, reserved peak and segments are analyze's",
                got == (want["peak_bytes"], want["reserved"]["peak_bytes"],
                        want["reserved"]["segments"]),
                (got, want["peak_bytes"], want["reserved"]["peak_bytes"],
                 want["reserved"]["segments"]))
    return want


def test_report_snapshot_are_analyze(r):
    """Each strategy's rank (and two pipeline stages) through report and snapshot; the
    rank's numbers differ from the single device's, so the flags reached them."""
    single = same_as_analyze(r, "single device")
    pp = ("--parallel", "pipeline", "--pp-stages", "2", "--micro-batches", "4")
    for label, flags in [("ddp", ("--parallel", "ddp", "--world-size", "8")),
                         ("zero1 rank 3", ("--parallel", "zero1", "--world-size", "8",
                                           "--rank", "3")),
                         ("fsdp", ("--parallel", "fsdp", "--world-size", "8")),
                         ("fsdp bfloat16, no reshard", ("--parallel", "fsdp", "--world-size",
                                                        "8", "--fsdp-param-dtype", "bfloat16",
                                                        "--fsdp-reshard-after-forward",
                                                        "false")),
                         ("pipeline stage 0", pp + ("--rank", "0")),
                         ("pipeline stage 1 gpipe", pp + ("--rank", "1", "--pp-schedule",
                                                          "gpipe"))]:
        rank = same_as_analyze(r, "report/snapshot --parallel " + label, *flags)
        if single and rank:
            r.check("--parallel %s: the rank's peak is not the single device's" % label,
                    rank["peak_bytes"] != single["peak_bytes"]
                    and rank["graph"].get("parallel"), (rank["peak_bytes"], single["peak_bytes"]))


def test_plan_check_report(r):
    flags = ["--optimizer", "adam", "--parallel", "fsdp", "--world-size", "8"]
    report = r.path("p.json")
    plan = r.path("plan.json")
    rc, out, err = r.run("plan", GRAPH, "--budget", "110MiB", "--json", report, "-o", plan, "-q",
                         *flags)
    if r.check("plan --parallel fsdp: exit 0", rc == 0, describe(rc, out, err)):
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
        r.check("plan: fits the rank's budget", doc["feasible"]
                and doc["predicted"]["peak_bytes"] <= 110 * MIB)
        r.check("plan: the rank's graph", doc["graph"].get("parallel", {}).get("strategy") == "fsdp")
    # --global-batch is over all ranks: 64 over 8 ranks searches a batch of 8.
    mb = r.path("mb.json")
    rc, out, err = r.run("plan", GRAPH, "--budget", "200MiB", "--global-batch", "64", "--json", mb,
                         "-q", "--parallel", "ddp", "--world-size", "8")
    if r.check("plan --global-batch --parallel: exit 0", rc == 0, describe(rc, out, err)):
        with open(mb, encoding="utf-8") as f:
            doc = json.load(f)
        r.check("plan --global-batch 64 over 8 ranks: a rank's share of 8",
                doc["global_batch"] == 8 and doc["baseline"]["micro_batch"] <= 8, doc["global_batch"])
    rc, out, err = r.run("verify", GRAPH, plan, *flags)
    r.check("verify --parallel fsdp: the rank's plan replays", rc == 0, describe(rc, out, err))
    rank_line = "  rank      0 of 8 under fsdp: parameters 1.78 MiB, optimizer state 3.57 MiB, "
    r.check("verify: the rank line", rank_line in out, out)
    rc, out, err = r.run("plan", GRAPH, "--budget", "110MiB", *flags)
    r.check("plan: the rank line", rank_line in out, out)
    rc, out, err = r.run("verify", GRAPH, plan, "-q")
    r.check("verify without --parallel: exit 2 naming a rank-only tensor",
            rc == 2 and 'unknown tensor "wte.weight.unsharded"' in err, describe(rc, out, err))
    rc, out, err = r.run("check", GRAPH, "--budget", "110MiB", *flags)
    r.check("check --parallel fsdp over budget: exit 1", rc == 1, describe(rc, out, err))
    rc, out, err = r.run("check", GRAPH, "--budget", "1GiB", *flags)
    r.check("check --parallel fsdp within budget: exit 0", rc == 0, describe(rc, out, err))
    # report and snapshot under --parallel: test_report_snapshot_are_analyze.


def test_pipeline(r):
    pp = ["--parallel", "pipeline", "--pp-stages", "2", "--micro-batches", "4"]
    one, out = analyze(r, "pipeline 1f1b stage 0", *pp, "--rank", "0")
    gpipe, _ = analyze(r, "pipeline gpipe stage 0", *pp, "--rank", "0", "--pp-schedule", "gpipe")
    default, _ = analyze(r, "pipeline, the default stage", *pp)
    last, _ = analyze(r, "pipeline stage 1, no outputs returned", *pp, "--rank", "1",
                      "--pp-return-outputs", "false")
    if not (one and gpipe and default and last):
        return
    p = one["graph"].get("parallel", {})
    r.check("pipeline: block", p.get("strategy") == "pipeline" and p.get("world_size") == 2
            and p.get("rank") == 0 and p.get("schedule") == "1f1b" and p.get("micro_batches") == 4
            and p.get("in_flight") == 2 and p.get("stage_starts") == ["wte", "h.1.ln_1"], p)
    r.check("pipeline: summary line",
            "  stage     0 of 2 (from wte), 1f1b x 4 micro-batches, 2 in flight: parameters 7.26 "
            "MiB, optimizer state 14.53 MiB, receive buffers 8.00 MiB\n" in out, out)
    r.check("pipeline: gpipe holds all 4 micro-batches, 1f1b 2: a higher peak",
            gpipe["peak_bytes"] > one["peak_bytes"]
            and gpipe["graph"]["parallel"]["in_flight"] == 4)
    r.check("pipeline: without --rank, the stage with the highest peak (the last: it keeps and "
            "merges the outputs)", default["graph"]["parallel"]["rank"] == 1
            and default["peak_bytes"] > one["peak_bytes"], default["graph"]["parallel"])
    r.check("pipeline: without returned outputs the last stage's peak falls",
            last["peak_bytes"] < default["peak_bytes"], (last["peak_bytes"], default["peak_bytes"]))
    flags = ["--optimizer", "adam", *pp, "--rank", "0"]
    plan = r.path("pp_plan.json")
    report = r.path("pp_p.json")
    rc, out, err = r.run("plan", GRAPH, "--budget", "100MiB", "-o", plan, "--json", report, "-q",
                         *flags)
    if r.check("plan --parallel pipeline: exit 0", rc == 0, describe(rc, out, err)):
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
        r.check("plan: the stage's plan fits under its baseline",
                doc["feasible"] and doc["predicted"]["peak_bytes"] <= 100 * MIB
                < one["peak_bytes"], doc["predicted"])
        rc, out, err = r.run("verify", GRAPH, plan, "-q", *flags)
        r.check("verify --parallel pipeline: the stage's plan replays", rc == 0,
                describe(rc, out, err))
    rc, out, err = r.run("check", GRAPH, "--budget", "100MiB", *flags)
    r.check("check --parallel pipeline over budget: exit 1", rc == 1, describe(rc, out, err))
    check_exit2(r, [
        (("analyze", GRAPH, "--micro-batches", "4"),
         "memplan: error: --pp-stages, --micro-batches, --pp-schedule, --pp-split and "
         "--pp-return-outputs need --parallel pipeline\n"),
        (("analyze", GRAPH, "--parallel", "pipeline"),
         "memplan: error: --parallel pipeline: needs --pp-stages\n"),
        (("analyze", GRAPH, *pp, "--world-size", "4"),
         "memplan: error: --world-size 4: --parallel pipeline runs one stage per rank, and "
         "--pp-stages is 2\n"),
        (("analyze", GRAPH, *pp, "--pp-split", "wte"),
         "memplan: error: examples/gpt_tiny.graph.json: --parallel pipeline: --pp-split: stage 0 "
         "would be empty: module \"wte\" begins at the first forward op\n"),
        (("analyze", GRAPH, "--parallel", "pipeline", "--pp-stages", "3", "--pp-split",
          "h.1,h.0"),
         "memplan: error: examples/gpt_tiny.graph.json: --parallel pipeline: --pp-split: stage 1 "
         "would be empty: module \"h.0\" does not begin after module \"h.1\" in the forward\n"),
        (("analyze", GRAPH, "--parallel", "pipeline", "--pp-stages", "100"),
         "memplan: error: examples/gpt_tiny.graph.json: --parallel pipeline: --pp-stages 100: "
         "stage 25 would be empty: a stage begins where a module begins, and the forward enters "
         "at most 25 (wte, wpe, h.0.ln_1, h.0.attn.c_attn, h.0.attn, h.0.attn.c_proj, ...); give "
         "at most 25 stages, or --pp-split\n"),
        (("analyze", GRAPH, *pp, "--pp-split", "h.7"),
         "memplan: error: examples/gpt_tiny.graph.json: --parallel pipeline: --pp-split: no "
         "forward op of the graph is scoped in module \"h.7\"\n"),
        (("plan", GRAPH, "--budget", "1GiB", "--global-batch", "8", *pp),
         "memplan: error: --global-batch: not with --parallel pipeline, whose graph is one "
         "micro-batch: give --set batch=MICRO and --micro-batches\n"),
    ])


def test_errors(r):
    check_exit2(r, [
        (("analyze", GRAPH, "--fsdp-param-dtype", "bfloat16"),
         "memplan: error: --fsdp-param-dtype: needs --parallel fsdp\n"),
        (("analyze", GRAPH, "--parallel", "fsdp", "--world-size", "2", "--fsdp-reduce-dtype",
          "int8"),
         "memplan: error: --fsdp-reduce-dtype int8: expected a floating dtype (float64, float32, "
         "float16, bfloat16, float8_e4m3fn, float8_e5m2)\n"),
        (("analyze", GRAPH, "--parallel", "fsdp", "--world-size", "2", "--fsdp-param-dtype",
          "complex64"),
         "memplan: error: --fsdp-param-dtype complex64: expected a floating dtype (float64, "
         "float32, float16, bfloat16, float8_e4m3fn, float8_e5m2)\n"),
        (("plan", GRAPH, "--budget", "200MiB", "--global-batch", "60", "--parallel", "ddp",
          "--world-size", "8"),
         "memplan: error: --global-batch 60 does not divide over --world-size 8: each rank takes "
         "an equal share\n"),
        (("analyze", GRAPH, "--world-size", "4"),
         "memplan: error: --world-size, --rank, --ddp-bucket-view and --fsdp-modules need "
         "--parallel\n"),
        (("analyze", GRAPH, "--parallel", "ddp", "--world-size", "0"),
         "memplan: error: --world-size 0: expected at least 1\n"),
        (("analyze", GRAPH, "--parallel", "zero1", "--world-size", "8", "--rank", "8"),
         "memplan: error: --rank 8: expected 0 to 7 (--world-size 8)\n"),
        (("analyze", GRAPH, "--parallel", "zero1", "--world-size", "8"),
         "memplan: error: examples/gpt_tiny.graph.json: --parallel zero1: it shards the "
         "optimizer state, and the step has none: give --optimizer\n"),
        (("analyze", GRAPH, "--parallel", "fsdp", "--world-size", "8", "--fsdp-modules",
          "h.0,h.9"),
         "memplan: error: examples/gpt_tiny.graph.json: --parallel fsdp: --fsdp-modules: no op "
         "of the graph is scoped in module \"h.9\"\n"),
    ])


if __name__ == "__main__":
    sys.exit(run_tests(test_strategies, test_plan_check_report, test_report_snapshot_are_analyze,
                       test_pipeline, test_errors))
