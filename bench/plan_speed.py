#!/usr/bin/env python3
"""Single-plan speed of two builds in one run (issue 34, target 2): the planner
benchmark `memplan_plan_bench` (bench/plan_bench.cc) of each build on the same
synthetic graphs, one call at a time, each graph before then after.

Per graph and budget (90/70/50% of the baseline peak and the lowest peak a
hand-written set reaches, as bench/bench_plan.sh): each build's plan time and
its answer (fits, peak, recompute cost, programs simulated). The answers must
be the same unless --allow-changes: a speed-up that changes a plan is a
planner change and is measured by bench/bench_plan.sh instead.

With --before-memplan, also the single plans of bench/llama_scale.py that
take longest (op granularity, batch 1, 80 GB, FSDP on --llama-worlds ranks,
--llama-models; exports cached in --llama-work): `memplan plan` of each
build, --repeat times alternated, the median wall time and every run's.

Usage: bench/plan_speed.py --before OLD/memplan_plan_bench
           [--after build/bench/memplan_plan_bench] [--shapes chain,transformer]
           [--sizes 10000,100000] [--before-label L] [--after-label L] [--work DIR]
           [--before-memplan OLD/memplan [--after-memplan build/cli/memplan]
            --llama-models 70b --llama-worlds 8,512 --repeat 3 --llama-work DIR]
Writes bench/results/plan_speed.json (every row: both builds' times and
answers) and bench/results/plan_speed.md (--from-json: the md only, again).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
TARGET_S = 10
ANSWER_KEYS = ("feasible", "peak_bytes", "recompute_cost", "recomputed_tensors",
               "min_peak_bytes", "evaluations", "algorithm")


def graph_file(work: str, shape: str, ops: int) -> str:
    path = os.path.join(work, f"{shape}_{ops}.graph.json")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(BENCH, "gen_graph.py"), "--ops", str(ops),
                        "--shape", shape, "-o", path], check=True)
    return path


def run(binary: str, graph: str, work: str, timeout: float) -> dict:
    """One memplan_plan_bench call: wall seconds and its rows by budget."""
    out = os.path.join(work, "plan_speed_run.json")
    if os.path.exists(out):
        os.remove(out)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([binary, "--json", out, graph], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "timeout": timeout}
    seconds = round(time.perf_counter() - t0, 2)
    if p.returncode != 0 or not os.path.exists(out):
        return {"seconds": seconds, "exit": p.returncode, "error": p.stderr[-400:]}
    g = json.load(open(out))["graphs"][0]
    rows = {r["budget"]: {"plan_s": round(r["memplan"]["plan_s"], 3),
                          **{k: r["memplan"].get(k) for k in ANSWER_KEYS}} for r in g["rows"]}
    return {"seconds": seconds, "load_s": round(g["load_s"], 3), "rows": rows}


def llama_rows(a: argparse.Namespace) -> list[dict]:
    """The Llama single plans, both builds alternated, --repeat times each."""
    import llama_scale  # bench/llama_scale.py (stdlib at import time)

    rows = []
    for model in a.llama_models.split(","):
        m = llama_scale.MODELS[model]
        graph = os.path.join(a.llama_work, m["name"] + ".graph.json")
        if not os.path.exists(graph):
            sys.exit(f"plan_speed: {graph} missing: export it with bench/llama_scale.sh "
                     f"--models {model}")
        for world in [int(w) for w in a.llama_worlds.split(",")]:
            cmd = ["plan", graph, "--set", "batch=1", "--set", f"seq={llama_scale.SEQ}",
                   "--budget", llama_scale.BUDGET, "--optimizer", "adam", "--parallel", "fsdp",
                   "--world-size", str(world), "--fsdp-param-dtype", llama_scale.PARAM_DTYPE,
                   "--fsdp-modules", *llama_scale.fsdp_units(m)]
            runs: dict[str, list] = {"before": [], "after": []}
            reports = {}
            for _ in range(a.repeat):
                for side, binary in (("before", a.before_memplan), ("after", a.after_memplan)):
                    out = os.path.join(a.work, f"plan_speed_{side}.json")
                    t0 = time.perf_counter()
                    p = subprocess.run([binary, *cmd, "-q", "--json", out], capture_output=True,
                                       text=True, timeout=a.timeout)
                    runs[side].append(round(time.perf_counter() - t0, 2))
                    if p.returncode not in (0, 3):
                        sys.exit(f"plan_speed: {side} exited {p.returncode}: {p.stderr[-400:]}")
                    reports[side] = json.load(open(out))
            answer = {side: {k: reports[side].get(k) for k in
                             ("feasible", "min_feasible_peak_bytes", "recompute_overhead",
                              "evaluations")} for side in runs}
            rows.append({"graph": f"{m['name']}, FSDP {world} ranks, op, batch 1",
                         "budget": llama_scale.BUDGET,
                         "command": llama_scale.short_cmd(["memplan", *cmd]),
                         "before": {"plan_s": statistics.median(runs["before"]),
                                    "runs_s": runs["before"], **answer["before"]},
                         "after": {"plan_s": statistics.median(runs["after"]),
                                   "runs_s": runs["after"], **answer["after"]},
                         "same_answer": answer["before"] == answer["after"]})
            print(f"{rows[-1]['graph']}: {runs['before']} -> {runs['after']} s, same answer: "
                  f"{rows[-1]['same_answer']}", flush=True)
    return rows


def fmt_s(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"**{v:.2f}**" if v > TARGET_S else f"{v:.2f}"


def table_lines(doc: dict) -> list[str]:
    """The results table and its caption (docs/benchmarks.md shows these)."""
    lines = ["| graph | budget | before s | after s | speed-up | same answer | after: cost, "
             "programs |", "|---|---|---:|---:|---:|:---:|---|"]
    for r in doc["rows"]:
        b, a = r["before"], r["after"]
        speedup = f"{b['plan_s'] / a['plan_s']:.1f}x" if b and a and a["plan_s"] > 0 else "n/a"
        if a and a.get("recompute_cost") is None and a.get("min_feasible_peak_bytes"):
            answer = ("no fit, lowest " f"{a['min_feasible_peak_bytes'] / 1e9:.1f} GB, "
                      f"{a['evaluations']}" if not a["feasible"] else
                      f"overhead {a['recompute_overhead']:.3g}, {a['evaluations']}")
        else:
            answer = (f"{a['recompute_cost']:.4g}, {a['evaluations']}" if a and a["feasible"]
                      else "no fit" if a else "n/a")
        lines.append(f"| {r['graph']} | {r['budget']} | {fmt_s(b and b['plan_s'])} | "
                     f"{fmt_s(a and a['plan_s'])} | {speedup} | "
                     f"{'yes' if r['same_answer'] else '**no**'} | {answer} |")
    return lines + [
        "", f"before: {doc['before_label']}; after: {doc['after_label']}; {doc['date']}, "
        f"{doc['machine']}, one call at a time, each graph before then after. Synthetic graphs: "
        "plan time as `memplan_plan_bench` reports it (search only: the graph is loaded once "
        "per graph); budgets: % of the baseline peak, or =NAME, the lowest peak a "
        "hand-written set reaches. Llama rows: wall time of the whole `memplan plan` call "
        f"(load, lower, plan, report), the median of {doc.get('repeat', 1)} runs alternated "
        "between the builds (every run in the JSON). Bold: over the "
        f"{TARGET_S} s target."] + \
        [""] * bool(doc.get("notes")) + [f"- {n}" for n in doc.get("notes", [])]


def render(doc: dict) -> str:
    return "\n".join([f"# Single-plan speed: {doc['before_label']} against "
                      f"{doc['after_label']}", "",
                      f"Generated by `bench/plan_speed.py` on {doc['date']}; {doc['machine']}.",
                      ""] + table_lines(doc)) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the old build's memplan_plan_bench")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "bench", "memplan_plan_bench"))
    ap.add_argument("--before-label", default="before")
    ap.add_argument("--after-label", default="after")
    ap.add_argument("--shapes", default="chain,transformer")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                   "memplan-plan-speed"))
    ap.add_argument("--allow-changes", action="store_true")
    ap.add_argument("--before-memplan", help="the old build's memplan: also the Llama plans")
    ap.add_argument("--after-memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--llama-models", default="70b")
    ap.add_argument("--llama-worlds", default="8,512")
    ap.add_argument("--llama-work", default="/tmp/llama_scale")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=os.path.join(BENCH, "results", "plan_speed.json"))
    ap.add_argument("--md", default=os.path.join(BENCH, "results", "plan_speed.md"))
    ap.add_argument("--from-json", action="store_true", help="only write the md again")
    a = ap.parse_args()
    if a.from_json:
        with open(a.md, "w") as f:
            f.write(render(json.load(open(a.json))))
        return 0
    os.makedirs(a.work, exist_ok=True)
    doc = {"format": "memplan.bench.plan_speed/1",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs",
           "before_label": a.before_label, "after_label": a.after_label, "rows": [],
           "calls": [], "repeat": a.repeat}
    changed = False
    for shape in a.shapes.split(","):
        for ops in [int(s) for s in a.sizes.split(",")]:
            graph = graph_file(a.work, shape, ops)
            calls = {side: run(binary, graph, a.work, a.timeout)
                     for side, binary in (("before", a.before), ("after", a.after))}
            doc["calls"].append({"graph": f"{shape}_{ops}", **calls})
            budgets = list(calls["before"].get("rows") or calls["after"].get("rows") or {})
            for budget in budgets:
                b = (calls["before"].get("rows") or {}).get(budget)
                r = (calls["after"].get("rows") or {}).get(budget)
                same = bool(b and r) and all(b[k] == r[k] for k in ANSWER_KEYS)
                changed |= not same
                doc["rows"].append({"graph": f"{shape}_{ops}", "budget": budget, "before": b,
                                    "after": r, "same_answer": same})
                print(f"{shape}_{ops} {budget}: {b and b['plan_s']} -> {r and r['plan_s']} s, "
                      f"same answer: {same}", flush=True)
    if a.before_memplan:
        sys.path.insert(0, BENCH)
        llama = llama_rows(a)
        doc["rows"] += llama
        changed |= not all(r["same_answer"] for r in llama)
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    with open(a.md, "w") as f:
        f.write(render(doc))
    if changed and not a.allow_changes:
        print("plan_speed: some answers differ (see the table)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
