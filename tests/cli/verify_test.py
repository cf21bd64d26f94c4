#!/usr/bin/python3
"""End-to-end tests of `memplan verify` (stdlib only).

Usage: verify_test.py --memplan PATH/TO/memplan

Writes memplan.plan/1 files from baseline programs computed here in Python from
`memplan lower` output (SPEC section 2: ops in file order, each buffer freed
right after its last reader; accumulate ops in place where PyTorch would), and
checks that verify replays them to the peak `memplan analyze` reports; then
hand-edited invalid plans (exit 1, the message names the step and the tensor),
malformed plans (exit 2), warnings (graph_sha256, predicted peak, budget),
recomputation, --json against schemas/report.schema.json, determinism.

Prints one line per failure and a closing line "N passed, M failed"; exits 1
when anything failed.
"""
import argparse
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

from harness import Runner, describe, load, read_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VALIDATE = os.path.join(ROOT, "tests", "tools", "validate_json.py")
REPORT_SCHEMA = os.path.join("schemas", "report.schema.json")
PLAN_SCHEMA = os.path.join("schemas", "plan.schema.json")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

# (graph, accumulation modes whose baseline this file rebuilds)
GRAPHS = [
    ("examples/mlp.graph.json", ["inplace", "out_of_place"]),
    ("examples/densenet_toy.graph.json", ["inplace", "out_of_place"]),
    ("examples/gpt_tiny.graph.json", ["inplace", "out_of_place"]),
    ("examples/cnn_small.joint.graph.json", ["inplace", "out_of_place"]),
    ("examples/mlp_torch.joint.graph.json", ["inplace", "out_of_place"]),
]
RESIDENT = {"input", "parameter", "buffer", "optimizer_state"}
DTYPE_SIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
              "float8_e5m2": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
              "bool": 1, "complex64": 8}




def write_json(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return path


# ---------------------------------------------------------------------------
# Baseline programs, rebuilt from the joint graph (SPEC section 2).


def baseline_steps(joint, mode):
    """Ops in file order, frees after the last reader; in "inplace" mode an
    accumulate op takes over the first input it may (analyzer/sim/program.h)."""
    tensors = {t["id"]: t for t in joint["tensors"]}
    symbols = joint.get("symbols", {})

    def nbytes(tid):
        t = tensors[tid]
        n = DTYPE_SIZE[t["dtype"]]
        for d in t["shape"]:
            n *= symbols[d] if isinstance(d, str) else d
        return n

    def is_view(tid):
        return "alias_of" in tensors[tid]

    kept = set(joint.get("outputs", []))
    for tid, t in tensors.items():
        if t["kind"] in RESIDENT:
            kept.add(tid)
        if "grad_of" in t and tensors[t["grad_of"]]["kind"] == "parameter":
            kept.add(tid)
    views = {}
    for tid, t in tensors.items():
        if is_view(tid):
            views.setdefault(t["alias_of"], []).append(tid)
    ops = joint["ops"]
    last = {}
    for i, op in enumerate(ops):
        for t in op["outputs"]:
            last[t] = i
            if is_view(t):
                last[tensors[t]["alias_of"]] = max(last.get(tensors[t]["alias_of"], -1), i)
        for t in op["inputs"]:
            last[t] = max(last.get(t, -1), i)

    def can_take_over(op, i, tin, tout):
        if is_view(tin) or is_view(tout) or tin in kept or last.get(tin) != i:
            return False
        if nbytes(tin) != nbytes(tout) or op["inputs"].count(tin) != 1:
            return False
        stack = list(views.get(tin, []))
        while stack:
            w = stack.pop()
            if w in kept or last.get(w, -1) >= i:
                return False
            stack.extend(views.get(w, []))
        return True

    consumed = set()
    runs = []
    for i, op in enumerate(ops):
        step = {"run": op["id"]}
        if mode == "inplace" and op.get("accumulate") and len(op["outputs"]) == 1:
            for tin in op["inputs"]:
                if can_take_over(op, i, tin, op["outputs"][0]):
                    step["inplace"] = {op["outputs"][0]: tin}
                    consumed.add(tin)
                    break
        runs.append(step)
    frees = [[] for _ in ops]
    for t in joint["tensors"]:
        tid = t["id"]
        if tid in last and tid not in kept and tid not in consumed:
            frees[last[tid]].append(tid)
    steps = []
    for i, step in enumerate(runs):
        steps.append(step)
        if frees[i]:
            steps.append({"free": frees[i]})
    return steps


def make_plan(graph_path, joint, steps, peak, budget=None):
    return {
        "format": "memplan.plan/1",
        "graph": joint.get("name", ""),
        "graph_sha256": hashlib.sha256(read_bytes(os.path.join(ROOT, graph_path))).hexdigest(),
        "budget_bytes": peak if budget is None else budget,
        "feasible": True,
        "accumulation": {},
        "saved": [],
        "recomputed": [],
        "predicted": {"peak_bytes": peak, "baseline_peak_bytes": peak, "recompute_cost": 0,
                      "cost_unit": "flops"},
        "steps": steps,
    }


class Fixture:
    """A graph, its joint form, and the analyze peaks per accumulation mode."""

    def __init__(self, r, graph, extra=()):
        self.graph = graph
        self.extra = list(extra)
        base = os.path.basename(graph) + "".join(e.replace("=", "") for e in extra)
        joint_path = r.path(base + ".joint.json")
        rc, out, err = r.run("lower", graph, "-o", joint_path, *extra)
        self.ok = r.check("lower %s: exit 0" % graph, rc == 0, describe(rc, out, err))
        self.joint = load(joint_path) if self.ok else None
        self.peak = {}
        self.base = base

    def analyze_peak(self, r, mode):
        if mode not in self.peak:
            path = r.path("%s.%s.analyze.json" % (self.base, mode))
            rc, out, err = r.run("analyze", self.graph, "-q", "--accumulation", mode, "--json",
                                 path, *self.extra)
            if not r.check("analyze %s --accumulation %s: exit 0" % (self.graph, mode), rc == 0,
                           describe(rc, out, err)):
                return None
            self.peak[mode] = load(path)["peak_bytes"]
        return self.peak[mode]


def verify(r, graph, plan_path, name, *extra):
    """Runs verify --json; returns (report or None, rc, out, err)."""
    path = r.path(name)
    if os.path.exists(path):
        os.remove(path)
    rc, out, err = r.run("verify", graph, plan_path, "--json", path, *extra)
    return (load(path) if os.path.exists(path) else None), rc, out, err


# ---------------------------------------------------------------------------


def test_baselines(r):
    plans, reports = [], []
    for graph, modes in GRAPHS:
        fx = Fixture(r, graph)
        if not fx.ok:
            continue
        for mode in modes:
            peak = fx.analyze_peak(r, mode)
            if peak is None:
                continue
            steps = baseline_steps(fx.joint, mode)
            plan_path = write_json(r.path("%s.%s.plan.json" % (fx.base, mode)),
                                   make_plan(graph, fx.joint, steps, peak))
            plans.append(plan_path)
            label = "verify %s (%s baseline)" % (graph, mode)
            rep, rc, out, err = verify(r, graph, plan_path, "%s.%s.verify.json" % (fx.base, mode))
            if not r.check(label + ": exit 0", rc == 0 and rep is not None,
                           describe(rc, out, err)):
                continue
            reports.append(r.path("%s.%s.verify.json" % (fx.base, mode)))
            r.check(label + ": peak_bytes equals analyze's", rep["peak_bytes"] == peak,
                    "verify %s, analyze %s" % (rep["peak_bytes"], peak))
            r.check(label + ": valid, no error, nothing recomputed",
                    rep["valid"] is True and rep["error"] is None and
                    rep["recomputed_runs"] == 0 and rep["recompute_cost"] == 0, rep)
            r.check(label + ": graph_sha256 matches, within budget",
                    rep["graph_sha256_matches"] is True and rep["within_budget"] is True and
                    rep["budget_bytes"] == peak and rep["predicted_peak_bytes"] == peak, rep)
            r.check(label + ": report names the graph and the plan",
                    rep["graph"]["file"] == graph and rep["plan"] == plan_path and
                    rep["graph"]["style"] == ("joint" if ".joint." in graph else "forward"),
                    rep["graph"])
            r.check(label + ": nothing on stderr (no warning)", err == "", err)
            r.check(label + ": summary says valid and the peak",
                    "  result    valid\n" in out and ("(%d bytes)" % peak) in out, out)
            if mode == "inplace" and "densenet" in graph:
                r.check(label + ": the plan has in-place steps",
                        any("inplace" in s for s in steps))
    if plans:
        rc, out = r.validate(PLAN_SCHEMA, plans)
        r.check("the plans written here validate against %s" % PLAN_SCHEMA, rc == 0, out)
    if reports:
        rc, out = r.validate(REPORT_SCHEMA, reports)
        r.check("verify --json reports validate against %s" % REPORT_SCHEMA, rc == 0, out)


def first_index(steps, pred):
    return next(i for i, s in enumerate(steps) if pred(s))


def test_invalid(r, fx):
    """Hand-edited plans whose programs break the execution model: exit 1."""
    graph = fx.graph
    peak = fx.analyze_peak(r, "out_of_place")
    if peak is None:
        return
    steps = baseline_steps(fx.joint, "out_of_place")
    ops = {op["id"]: op for op in fx.joint["ops"]}
    reports = []

    def case(name, edited, step_index, names):
        path = write_json(r.path("invalid.%s.plan.json" % name),
                          make_plan(graph, fx.joint, edited, peak))
        rep_name = "invalid.%s.verify.json" % name
        rep, rc, out, err = verify(r, graph, path, rep_name)
        label = "verify, %s" % name
        if not r.check(label + ": exit 1", rc == 1, describe(rc, out, err)):
            return
        want = ["step %d " % step_index] + ['"%s"' % n for n in names]
        r.check(label + ": stderr names the plan, step %d and %s" % (step_index, names),
                err.startswith("memplan: error: %s: invalid program: " % path) and
                all(w in err for w in want), err)
        r.check(label + ": the summary says INVALID with the same message",
                "  result    INVALID: step %d " % step_index in out, out)
        if r.check(label + ": --json written", rep is not None):
            reports.append(r.path(rep_name))
            r.check(label + ": report valid=false, error, null replay fields",
                    rep["valid"] is False and all(w in rep["error"] for w in want) and
                    rep["peak_bytes"] is None and rep["recompute_cost"] is None and
                    rep["recomputed_runs"] is None and rep["within_budget"] is None, rep)
        return err

    # Free a tensor twice: repeat the first free step at the end.
    f = first_index(steps, lambda s: "free" in s)
    twice = steps + [copy.deepcopy(steps[f])]
    err = case("free_twice", twice, len(steps), [steps[f]["free"][0]])
    if err is not None:
        r.check("free twice: says when it was freed", "(freed at step %d)" % f in err, err)

    # Run a backward op twice.
    b = first_index(steps, lambda s: "run" in s and ops[s["run"]].get("phase") == "backward")
    op = steps[b]["run"]
    err = case("backward_twice", steps[:b + 1] + [{"run": op}] + steps[b + 1:], b + 1, [op])
    if err is not None:
        r.check("backward twice: says it already ran and when",
                "already ran at step %d" % b in err, err)

    # Read a freed tensor: free an input of a backward op just before it runs.
    b = first_index(steps, lambda s: "run" in s and ops[s["run"]].get("phase") == "backward" and
                    any(fx.joint_kind(t) not in RESIDENT for t in ops[s["run"]]["inputs"]))
    reader = steps[b]["run"]
    victim = next(t for t in ops[reader]["inputs"] if fx.joint_kind(t) not in RESIDENT)
    edited = steps[:b] + [{"free": [victim]}] + steps[b:]
    err = case("read_freed", edited, b + 1, [reader, victim])
    if err is not None:
        r.check("read freed: says the input is not alive and when it was freed",
                ('input "%s" is not alive (freed at step %d)' % (victim, b)) in err, err)

    # Leave out a backward op.
    last_bw = max(i for i, s in enumerate(steps)
                  if "run" in s and ops[s["run"]].get("phase") == "backward")
    skipped = steps[last_bw]["run"]
    rep, rc, out, err = verify(r, graph, write_json(r.path("invalid.skip.plan.json"),
                                                    make_plan(graph, fx.joint,
                                                              steps[:last_bw] +
                                                              steps[last_bw + 1:], peak)),
                               "invalid.skip.verify.json")
    r.check("verify, a backward op left out: exit 1 naming it",
            rc == 1 and ('backward op "%s" never runs' % skipped) in err, describe(rc, out, err))

    if reports:
        rc, out = r.validate(REPORT_SCHEMA, reports)
        r.check("invalid-plan reports validate against %s" % REPORT_SCHEMA, rc == 0, out)


def test_warnings_and_recompute(r, fx):
    graph = fx.graph
    peak = fx.analyze_peak(r, "out_of_place")
    if peak is None:
        return
    steps = baseline_steps(fx.joint, "out_of_place")

    # graph_sha256 of another file: a warning, still valid.
    plan = make_plan(graph, fx.joint, steps, peak)
    plan["graph_sha256"] = "0" * 64
    rep, rc, out, err = verify(r, graph, write_json(r.path("sha.plan.json"), plan),
                               "sha.verify.json")
    r.check("graph_sha256 mismatch: exit 0 with a warning naming graph_sha256",
            rc == 0 and "memplan: warning: " in err and "graph_sha256" in err and
            graph in err, describe(rc, out, err))
    r.check("graph_sha256 mismatch: graph_sha256_matches false, still valid",
            rep is not None and rep["graph_sha256_matches"] is False and rep["valid"] is True,
            rep)
    r.check("graph_sha256 mismatch: the summary says so", "DOES NOT MATCH" in out, out)

    # A predicted peak that the replay does not reproduce.
    plan = make_plan(graph, fx.joint, steps, peak)
    plan["predicted"]["peak_bytes"] = peak + 1000
    rep, rc, out, err = verify(r, graph, write_json(r.path("pred.plan.json"), plan),
                               "pred.verify.json")
    r.check("predicted peak differs: exit 0 with a warning giving both numbers",
            rc == 0 and "warning" in err and "predicted" in err and str(peak + 1000) in err and
            str(peak) in err, describe(rc, out, err))
    r.check("predicted peak differs: predicted_peak_bytes and peak_bytes in the report",
            rep is not None and rep["predicted_peak_bytes"] == peak + 1000 and
            rep["peak_bytes"] == peak, rep)
    r.check("predicted peak differs: the summary says by how much",
            "1000 bytes more than replayed" in out, out)

    # Over budget: a warning and within_budget false; exit 0 (the program is valid).
    plan = make_plan(graph, fx.joint, steps, peak, budget=peak - 1)
    rep, rc, out, err = verify(r, graph, write_json(r.path("budget.plan.json"), plan),
                               "budget.verify.json")
    r.check("over budget: exit 0, within_budget false, a warning",
            rc == 0 and rep is not None and rep["within_budget"] is False and "budget" in err,
            describe(rc, out, err))
    # No budget: budget_bytes 0.
    plan = make_plan(graph, fx.joint, steps, peak, budget=0)
    rep, rc, out, err = verify(r, graph, write_json(r.path("nobudget.plan.json"), plan),
                               "nobudget.verify.json")
    r.check("budget_bytes 0: within_budget null, no warning",
            rc == 0 and rep is not None and rep["within_budget"] is None and err == "",
            describe(rc, out, err))

    # Recompute: run the first forward op again right after it ran (its output
    # is still alive: the fresh copy counts while it runs, then is dropped).
    ops = {op["id"]: op for op in fx.joint["ops"]}
    first = steps[0]["run"]
    flops = ops[first].get("flops", 0)
    plan = make_plan(graph, fx.joint, steps[:1] + [{"run": first}] + steps[1:], peak)
    rep, rc, out, err = verify(r, graph, write_json(r.path("recompute.plan.json"), plan),
                               "recompute.verify.json")
    if r.check("a recomputed forward op: exit 0", rc == 0 and rep is not None,
               describe(rc, out, err)):
        r.check("recompute: recomputed_runs 1, recompute_cost the op's flops",
                rep["recomputed_runs"] == 1 and rep["recompute_cost"] == flops,
                "%s (flops of %s: %s)" % (rep, first, flops))
        r.check("recompute: the summary counts it", "  recompute 1 runs, cost " in out, out)
    files = [r.path(n) for n in ("sha.verify.json", "pred.verify.json", "budget.verify.json",
                                 "nobudget.verify.json", "recompute.verify.json")]
    files = [f for f in files if os.path.exists(f)]
    rc, out = r.validate(REPORT_SCHEMA, files)
    r.check("warning-case reports validate against %s" % REPORT_SCHEMA, rc == 0, out)


def test_malformed(r, fx):
    """Bad input: exit 2, one error line naming the file and the JSON pointer."""
    graph = fx.graph
    steps = baseline_steps(fx.joint, "out_of_place")
    good = make_plan(graph, fx.joint, steps, 0)
    cases = []

    def edited(name, f):
        plan = copy.deepcopy(good)
        f(plan)
        cases.append((name, write_json(r.path("malformed.%s.json" % name), plan)))

    edited("wrong_format", lambda p: p.update(format="memplan.plan/2"))
    edited("unknown_op", lambda p: p["steps"].insert(1, {"run": "no_such_op"}))
    edited("unknown_tensor_in_free", lambda p: p["steps"].insert(1, {"free": ["no_such"]}))
    edited("run_and_free", lambda p: p["steps"].insert(1, {"run": steps[0]["run"],
                                                           "free": []}))
    edited("inplace_without_run", lambda p: p["steps"].insert(1, {"free": [], "inplace": {}}))
    edited("steps_not_array", lambda p: p.update(steps={"run": steps[0]["run"]}))
    edited("bad_accumulation_mode", lambda p: p.update(accumulation={
        fx.joint["tensors"][0]["id"]: "lazy"}))
    edited("missing_predicted", lambda p: p.pop("predicted"))
    pointers = {
        "wrong_format": "/format", "unknown_op": "/steps/1/run",
        "unknown_tensor_in_free": "/steps/1/free/0", "run_and_free": "/steps/1",
        "inplace_without_run": "/steps/1/inplace", "steps_not_array": "/steps",
        "bad_accumulation_mode": "/accumulation/" + fx.joint["tensors"][0]["id"],
        "missing_predicted": "/predicted",
    }
    invalid = r.path("malformed.invalid_json.json")
    with open(invalid, "w") as f:
        f.write('{"format": "memplan.plan/1",\n "steps": [,]}\n')
    for name, path in cases:
        rep, rc, out, err = verify(r, graph, path, "malformed.%s.verify.json" % name)
        label = "verify, malformed plan %s" % name
        r.check(label + ": exit 2", rc == 2, describe(rc, out, err))
        r.check(label + ": one error line naming the file and %s" % pointers[name],
                err.startswith("memplan: error: %s: %s: " % (path, pointers[name])) and
                err.count("\n") == 1, err)
        r.check(label + ": no report, nothing on stdout", rep is None and out == "",
                describe(rc, out, err))
    rep, rc, out, err = verify(r, graph, invalid, "malformed.invalid_json.verify.json")
    r.check("verify, plan with invalid JSON: exit 2 naming the file and the line",
            rc == 2 and (invalid + ": invalid JSON") in err and "line 2" in err,
            describe(rc, out, err))
    rc, out, err = r.run("verify", graph, "no/such/plan.json")
    r.check("verify, missing plan file: exit 2 naming it",
            rc == 2 and "no/such/plan.json" in err, describe(rc, out, err))
    rc, out, err = r.run("verify", "no/such/graph.json", cases[0][1])
    r.check("verify, missing graph file: exit 2 naming it",
            rc == 2 and "no/such/graph.json" in err, describe(rc, out, err))
    # A plan for another graph: its ids are unknown here.
    rc, out, err = r.run("verify", "examples/cnn_small.joint.graph.json",
                         r.path("mlp.graph.json.out_of_place.plan.json"))
    r.check("verify, a plan made for another graph: exit 2 (unknown ids)",
            rc == 2 and "unknown op" in err, describe(rc, out, err))
    for label, args in [("verify without PLAN", ["verify", graph]),
                        ("verify without arguments", ["verify"]),
                        ("verify with an unknown option",
                         ["verify", graph, cases[0][1], "--frobnicate"])]:
        rc, out, err = r.run(*args)
        r.check(label + ": exit 2 with a message", rc == 2 and err.startswith("memplan: error: "),
                describe(rc, out, err))
    rc, out, err = r.run("verify", "--help")
    r.check("verify --help: exit 0, usage names GRAPH and PLAN",
            rc == 0 and "GRAPH" in out and "PLAN" in out, describe(rc, out, err))


def test_misc(r, fx):
    graph = fx.graph
    peak = fx.analyze_peak(r, "out_of_place")
    if peak is None:
        return
    plan_path = write_json(r.path("misc.plan.json"),
                           make_plan(graph, fx.joint, baseline_steps(fx.joint, "out_of_place"),
                                     peak))
    # -q: nothing on stdout.
    rc, out, err = r.run("verify", graph, plan_path, "-q")
    r.check("verify -q: exit 0, nothing on stdout", rc == 0 and out == "", describe(rc, out, err))
    # Determinism.
    runs = []
    for i in (1, 2):
        rep, rc, out, err = verify(r, graph, plan_path, "det%d.verify.json" % i)
        runs.append((out, read_bytes(r.path("det%d.verify.json" % i)) if rep else None))
    r.check("verify: identical stdout and --json across runs",
            runs[0] == runs[1] and runs[0][1] is not None)
    # --set: the same plan (same ids) replayed at another batch size.
    fx2 = Fixture(r, graph, ["--set", "batch=2"])
    peak2 = fx2.analyze_peak(r, "out_of_place")
    if peak2 is not None:
        rep, rc, out, err = verify(r, graph, plan_path, "set.verify.json", "--set", "batch=2")
        r.check("verify --set batch=2: peak equals analyze --set batch=2",
                rc == 0 and rep is not None and rep["peak_bytes"] == peak2 and peak2 < peak,
                describe(rc, out, err) + "\nanalyze %s" % peak2)
    # The version in the report is memplan's.
    rc, out, err = r.run("--version")
    rep, _, _, _ = verify(r, graph, plan_path, "version.verify.json")
    if rep is not None:
        r.check("verify report: memplan_version matches --version",
                out.strip() == "memplan " + rep["memplan_version"], out)
    # The report's keys, in order.
    if rep is not None:
        r.check("verify report: keys in the documented order",
                list(rep) == ["format", "command", "memplan_version", "graph", "plan", "valid",
                              "error", "peak_bytes", "recompute_cost", "recomputed_runs",
                              "predicted_peak_bytes", "graph_sha256_matches", "budget_bytes",
                              "within_budget"], list(rep))
    # The unknown-subcommand message lists verify.
    rc, out, err = r.run("frobnicate")
    r.check("unknown subcommand: the list includes verify", re.search(r"\bverify\b", err),
            err)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memplan", required=True, help="path to the memplan binary")
    args = ap.parse_args()
    memplan = os.path.abspath(args.memplan)
    with tempfile.TemporaryDirectory(prefix="memplan-verify-test-") as tmp:
        r = Runner(memplan, tmp)
        test_baselines(r)
        fx = Fixture(r, "examples/mlp.graph.json")
        if fx.ok:
            kinds = {t["id"]: t["kind"] for t in fx.joint["tensors"]}
            fx.joint_kind = kinds.get
            test_invalid(r, fx)
            test_warnings_and_recompute(r, fx)
            test_malformed(r, fx)
            test_misc(r, fx)
    print("%d passed, %d failed" % (r.passed, len(r.failed)))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
