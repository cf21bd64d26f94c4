#!/usr/bin/env python3
"""CLI tests of `memplan profile` and `memplan plan --costs`: the CPU backend
measures exactly the predicted peak on every example (baseline and a plan at
70% of it), reports validate against the schema, traces carry both series,
the cuda backend without a GPU exits 4 with one line, bad input exits 2.

Usage: profile_test.py --memplan PATH --cuda-built 0|1
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Runner, describe, load  # noqa: E402

EXAMPLES = ["mlp.graph.json", "gpt_tiny.graph.json", "densenet_toy.graph.json",
            "cnn_small.joint.graph.json", "mlp_torch.joint.graph.json"]
REPORT_KEYS = ["format", "command", "memplan_version", "graph", "program", "backend", "allocator",
               "device", "device_name", "driver_version", "cuda_version", "cupti", "repeat",
               "predicted_peak_bytes", "predicted_peak_step", "measured_source",
               "measured_peak_bytes", "measured_peak_step", "allocator_peak_bytes",
               "device_peak_bytes", "relative_error", "exact", "first_divergence",
               "dropped_records", "records", "run_time_us", "wall_time_us", "ops", "notes",
               "warnings"]
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


class ProfileRunner(Runner):
    def run_env(self, env, *args):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return self.run(*args)
        finally:
            for k, v in saved.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v


def check_trace(r, name, path, steps):
    try:
        trace = load(path)
    except (OSError, ValueError) as e:
        r.check(f"{name}: trace is JSON", False, e)
        return []
    events = trace["traceEvents"]
    counters = [e for e in events if e.get("ph") == "C"]
    r.check(f"{name}: trace has both live-bytes series",
            counters and all("predicted" in e["args"] and "measured" in e["args"]
                             for e in counters), counters[:2])
    r.check(f"{name}: trace series agree (the cpu backend is exact)",
            all(e["args"]["predicted"] == e["args"]["measured"] for e in counters))
    steps_x = [e for e in events if e.get("ph") == "X" and e.get("cat") != "gpu"]
    r.check(f"{name}: one X event per step", len(steps_x) == steps, len(steps_x))
    r.check(f"{name}: X events on wall time, ordered",
            all(a["ts"] <= b["ts"] for a, b in zip(steps_x, steps_x[1:])))
    return steps_x


def profile_examples(r):
    for example in EXAMPLES:
        graph = os.path.join("examples", example)
        analysis = r.path("a.json")
        rc, out, err = r.run("analyze", graph, "-q", "--json", analysis)
        if not r.check(f"{example}: analyze", rc == 0, describe(rc, out, err)):
            continue
        baseline = load(analysis)["peak_bytes"]
        report, trace = r.path(f"{example}.profile.json"), r.path(f"{example}.trace.json")
        rc, out, err = r.run("profile", graph, "--backend", "cpu", "--json", report,
                             "--trace", trace)
        if not r.check(f"{example}: profile exits 0", rc == 0, describe(rc, out, err)):
            continue
        rep = load(report)
        r.check(f"{example}: report keys in order", list(rep) == REPORT_KEYS, list(rep))
        r.check(f"{example}: predicted is analyze's peak",
                rep["predicted_peak_bytes"] == baseline, (rep["predicted_peak_bytes"], baseline))
        r.check(f"{example}: cpu measures the predicted peak to the byte",
                rep["measured_peak_bytes"] == baseline and rep["exact"]
                and rep["relative_error"] == 0 and rep["first_divergence"] is None,
                json.dumps({k: rep[k] for k in ("measured_peak_bytes", "first_divergence")}))
        r.check(f"{example}: peak step agrees",
                rep["measured_peak_step"] == rep["predicted_peak_step"])
        r.check(f"{example}: cpu backend fields",
                rep["backend"] == "cpu" and rep["allocator"] == "host" and rep["device"] == "cpu"
                and rep["device_peak_bytes"] is None and rep["cupti"] is False)
        r.check(f"{example}: summary says it matches",
                "every step matches the prediction" in out, out)
        steps_x = check_trace(r, example, trace, rep["program"]["steps"])
        runs = sum(op["runs"] for op in rep["ops"])
        run_events = sum(1 for e in steps_x if e["cat"] != "free")
        r.check(f"{example}: every run step is timed once",
                runs == run_events > 0 and all(op["time_us"] >= 0 for op in rep["ops"]),
                (runs, run_events))

        # A plan at 70% of the baseline (or the lowest peak reachable).
        plan = r.path(f"{example}.plan.json")
        rc, out, err = r.run("plan", graph, "--budget", str(baseline * 70 // 100), "-o", plan, "-q")
        if not r.check(f"{example}: plan exits 0 or 3", rc in (0, 3), describe(rc, out, err)):
            continue
        predicted = load(plan)["predicted"]["peak_bytes"]
        preport = r.path(f"{example}.plan.profile.json")
        rc, out, err = r.run("profile", graph, "--plan", plan, "--backend", "cpu", "--json",
                             preport, "-q")
        if not r.check(f"{example}: profile --plan exits 0", rc == 0, describe(rc, out, err)):
            continue
        prep = load(preport)
        r.check(f"{example}: planned program measured exactly",
                prep["measured_peak_bytes"] == predicted == prep["predicted_peak_bytes"]
                and prep["exact"], (prep["measured_peak_bytes"], predicted))
        r.check(f"{example}: program names the plan",
                prep["program"] == {"source": "plan", "plan": plan, "accumulation": None,
                                    "steps": prep["program"]["steps"]})
        recomputed = sum(op["recompute_runs"] for op in prep["ops"])
        plan_doc = load(plan)
        runs = {}
        for s in plan_doc["steps"]:
            if "run" in s:
                runs[s["run"]] = runs.get(s["run"], 0) + 1
        r.check(f"{example}: recompute runs counted",
                recomputed == sum(n - 1 for n in runs.values()), (recomputed, runs))
        rc, vout = r.validate(os.path.join("schemas", "report.schema.json"), [report, preport])
        r.check(f"{example}: reports validate", rc == 0, vout)


def repeat_and_costs(r):
    graph = os.path.join("examples", "gpt_tiny.graph.json")
    report, costs = r.path("repeat.json"), r.path("costs.json")
    rc, out, err = r.run("profile", graph, "--backend", "cpu", "--repeat", "3", "--json", report,
                         "--emit-costs", costs, "-q")
    if not r.check("repeat: exits 0", rc == 0, describe(rc, out, err)):
        return
    rep = load(report)
    r.check("repeat: 3 runs, still exact", rep["repeat"] == 3 and rep["exact"])
    c = load(costs)
    r.check("emit-costs: format", c["format"] == "memplan.costs/1" and c["unit"] == "us"
            and c["backend"] == "cpu", {k: c[k] for k in c if k != "ops"})
    r.check("emit-costs: one time per op that ran",
            sorted(c["ops"]) == sorted(op["op"] for op in rep["ops"])
            and all(c["ops"][op["op"]] == op["time_us"] for op in rep["ops"]))
    rc, out, err = r.run("plan", graph, "--budget", "110MiB", "--costs", costs, "-q")
    r.check("plan --costs with measured costs runs", rc in (0, 3), describe(rc, out, err))

    # Hand-written costs: 1000 us per op -> recompute cost = 1000 x recomputed runs.
    flat = r.path("flat.json")
    with open(flat, "w") as f:
        json.dump({"format": "memplan.costs/1", "unit": "us",
                   "ops": {op["op"]: 1000.0 for op in rep["ops"]}}, f)
    plan = r.path("flat.plan.json")
    rc, out, err = r.run("plan", graph, "--budget", "110MiB", "--costs", flat, "-o", plan, "-q")
    if r.check("plan --costs flat: exits 0", rc == 0, describe(rc, out, err)):
        p = load(plan)
        runs = {}
        for s in p["steps"]:
            if "run" in s:
                runs[s["run"]] = runs.get(s["run"], 0) + 1
        rerun = sum(n - 1 for n in runs.values())
        r.check("plan --costs: recompute cost is the measured times of the reruns",
                p["predicted"]["cost_unit"] == "time_us"
                and abs(p["predicted"]["recompute_cost"] - 1000.0 * rerun) < 1e-6 and rerun > 0,
                (p["predicted"], rerun))


def bad_costs(r):
    graph = os.path.join("examples", "mlp.graph.json")
    cases = [
        ("not JSON", "{", "invalid JSON"),
        ("not an object", "[]", "(root): expected an object, found an array"),
        ("wrong format", '{"format": "memplan.plan/1", "unit": "us", "ops": {}}',
         '/format: unsupported format "memplan.plan/1"; expected "memplan.costs/1"'),
        ("wrong unit", '{"format": "memplan.costs/1", "unit": "ms", "ops": {}}',
         '/unit: found "ms"; expected "us" (microseconds)'),
        ("ops missing", '{"format": "memplan.costs/1", "unit": "us"}', "/ops: missing"),
        ("negative time", '{"format": "memplan.costs/1", "unit": "us", "ops": {"fc1": -1}}',
         "/ops/fc1: expected a finite number of microseconds >= 0, found -1"),
        ("string time", '{"format": "memplan.costs/1", "unit": "us", "ops": {"a/b": "1"}}',
         '/ops/a~1b: expected a finite number of microseconds >= 0, found "1"'),
        ("no known op", '{"format": "memplan.costs/1", "unit": "us", "ops": {"nope": 1}}',
         '/ops: no op of graph "mlp" has a time'),
    ]
    for name, text, expected in cases:
        path = r.path("bad_costs.json")
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = r.run("plan", graph, "--budget", "4MiB", "--costs", path, "-q")
        r.check(f"bad costs ({name}): exit 2 naming file, pointer, expectation",
                rc == 2 and err.startswith(f"memplan: error: {path}: ") and expected in err,
                describe(rc, out, err))
    good = r.path("good_costs.json")
    with open(good, "w") as f:
        f.write('{"format": "memplan.costs/1", "unit": "us", "ops": {"fc1": 1}}')
    rc, out, err = r.run("plan", graph, "--budget", "4MiB", "--costs", good, "--objective",
                         "flops", "-q")
    r.check("--costs with --objective flops: exit 2", rc == 2 and "--objective time" in err,
            describe(rc, out, err))
    rc, out, err = r.run("plan", graph, "--budget", "4MiB", "--costs", r.path("missing.json"))
    r.check("--costs missing file: exit 2", rc == 2 and "missing.json" in err,
            describe(rc, out, err))


def backends(r, cuda_built):
    graph = os.path.join("examples", "mlp.graph.json")
    rc, out, err = r.run_env(NO_GPU, "profile", graph, "--backend", "cuda")
    lines = err.strip().split("\n")
    expected = ("memplan: error: no CUDA GPU: " if cuda_built
                else "memplan: error: --backend cuda: this memplan was built without CUDA")
    r.check("--backend cuda without a GPU: exit 4, one line",
            rc == 4 and len(lines) == 1 and lines[0].startswith(expected) and out == "",
            describe(rc, out, err))
    report = r.path("auto.json")
    rc, out, err = r.run_env(NO_GPU, "profile", graph, "--json", report, "-q")
    if r.check("auto without a GPU: exit 0", rc == 0, describe(rc, out, err)):
        rep = load(report)
        r.check("auto without a GPU: cpu backend, with a note",
                rep["backend"] == "cpu" and len(rep["notes"]) == 1
                and "profiling on the cpu backend" in rep["notes"][0]
                and "memplan: note: " in err, (rep["notes"], err))
    rc, out, err = r.run("profile", graph, "--backend", "cpu", "--allocator", "async")
    r.check("--allocator async on cpu: exit 2", rc == 2 and "cuda" in err, describe(rc, out, err))
    # 2 TB of input and far more of activations: no machine has that; a clean
    # failure (exit 1) saying where, never the OOM killer.
    rc, out, err = r.run("profile", os.path.join("examples", "gpt_tiny.graph.json"), "--set",
                         "batch=1000000000", "--backend", "cpu", "-q")
    r.check("out of memory on the cpu backend: exit 1 saying where",
            rc == 1 and "memplan: error: examples/gpt_tiny.graph.json: the run failed at the "
            "resident tensors: out of memory: 2048000000000 bytes requested" in err,
            describe(rc, out, err))
    rc, out, err = r.run("profile", graph, "--backend", "tpu")
    r.check("--backend tpu: exit 2", rc == 2, describe(rc, out, err))
    rc, out, err = r.run("profile", graph, "--repeat", "0")
    r.check("--repeat 0: exit 2", rc == 2, describe(rc, out, err))


def bad_plans(r):
    graph = os.path.join("examples", "mlp.graph.json")
    plan = r.path("mlp.plan.json")
    rc, out, err = r.run("plan", graph, "--budget", "100MiB", "-o", plan, "-q")
    if not r.check("mlp plan", rc == 0, describe(rc, out, err)):
        return
    doc = load(plan)

    def write(name, value):
        path = r.path(name)
        with open(path, "w") as f:
            f.write(value if isinstance(value, str) else json.dumps(value))
        return path

    missing_bw = dict(doc, steps=[s for s in doc["steps"] if s.get("run") != "fc1.bw"])
    unknown_op = dict(doc, steps=doc["steps"] + [{"run": "nope"}])
    cases = [
        ("missing file", r.path("nope.plan.json"), "nope.plan.json"),
        ("not JSON", write("p1.json", "{"), "invalid JSON"),
        ("unknown op", write("p2.json", unknown_op), "unknown op \"nope\""),
        ("invalid program", write("p3.json", missing_bw),
         "invalid program: backward op \"fc1.bw\" never runs"),
    ]
    for name, path, expected in cases:
        rc, out, err = r.run("profile", graph, "--plan", path, "--backend", "cpu")
        r.check(f"bad --plan ({name}): exit 2 naming the file",
                rc == 2 and path in err and expected in err, describe(rc, out, err))
    # A plan for another graph.
    rc, out, err = r.run("profile", os.path.join("examples", "gpt_tiny.graph.json"), "--plan",
                         plan, "--backend", "cpu")
    r.check("--plan of another graph: exit 2", rc == 2 and plan in err, describe(rc, out, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--cuda-built", type=int, required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = ProfileRunner(os.path.abspath(args.memplan), tmp)
        profile_examples(r)
        repeat_and_costs(r)
        bad_costs(r)
        backends(r, args.cuda_built == 1)
        bad_plans(r)
    print("%d passed, %d failed" % (r.passed, len(r.failed)))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
