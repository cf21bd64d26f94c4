#!/usr/bin/env python3
"""The tables of figures in README.md and docs/*.md, generated from bench/results/*.json
(CTest: docs.tables runs --check).

A table lives between two markers, the generator's name in the first:

    <!-- table: plan_compare -->
    | graph | 90% | ... |
    <!-- /table -->

--write replaces what is between the markers with the generator's output; --check (the
default) fails, with a diff, when a page's table is not what its JSON gives, names an
unknown generator, or leaves a marker unclosed. --list prints the generators.
Standard library only; each generator reads one JSON file of bench/results/ and is
written to tolerate rows whose fields are missing (a cell then says "n/a").
"""
import argparse
import difflib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
OPEN_RE = re.compile(r"^<!--\s*table:\s*(?P<name>[\w-]+)\s*-->\s*$")
CLOSE_RE = re.compile(r"^<!--\s*/table\s*-->\s*$")
MIB = 1 << 20
GB = 10 ** 9
NA = "n/a"


def load(name):
    with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
        return json.load(f)


def g(d, *path, default=None):
    """d[path[0]][path[1]]..., or default where a step is missing."""
    for p in path:
        if isinstance(d, dict) and p in d:
            d = d[p]
        elif isinstance(d, list) and isinstance(p, int) and -len(d) <= p < len(d):
            d = d[p]
        else:
            return default
    return d


def num(x, fmt=None):
    """x with fmt, or by default 4 significant figures and no exponent."""
    if x is None:
        return NA
    if fmt is None:
        return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"
    return fmt.format(x)


def pct(x, digits=1, sign=True):
    if x is None:
        return NA
    s = f"{100 * x:+.{digits}f}%" if sign else f"{100 * x:.{digits}f}%"
    return s


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


GENERATORS = {}


def generator(source):
    def wrap(fn):
        GENERATORS[fn.__name__] = (fn, source)
        return fn
    return wrap


# --- planning ---------------------------------------------------------------------------

PLAN_NAMES = {"cnn_small": "cnn_small (joint, captured)",
              "synthetic_chain_1000": "chain, 1k ops", "synthetic_chain_10000": "chain, 10k ops",
              "synthetic_chain_100000": "chain, 100k ops",
              "synthetic_transformer_1000": "transformer, 1k ops",
              "synthetic_transformer_10000": "transformer, 10k ops",
              "synthetic_transformer_100000": "transformer, 100k ops"}


@generator("plan_compare.json")
def plan_compare():
    """memplan plan's recompute cost at 90/70/50% of the baseline peak and at the best
    hand-written set's peak (bench/bench_plan.sh)."""
    doc = load("plan_compare.json")
    rows = []
    for gr in doc.get("graphs", []):
        rws = {r.get("budget"): r for r in gr.get("rows", [])}
        if not any(g(r, "memplan", "feasible") for r in rws.values()):
            continue  # mlp, densenet_toy: peak at the end of the backward, nothing helps

        def cost(label, rws=rws, gr=gr):
            r = rws.get(label)
            if r is None:
                return NA
            m = r.get("memplan", {})
            if m.get("feasible"):
                return num(m.get("recompute_cost"))
            least = m.get("min_peak_bytes")
            base = gr.get("baseline_peak_bytes")
            return ("no fit" if not (least and base)
                    else f"no fit (min {100 * least / base:.1f}%)")

        best = None
        for r in rws.values():
            lab = str(r.get("budget", ""))
            if lab.startswith("="):
                best = r
        if best is not None:
            name = best["budget"][1:]
            base = next((b for b in gr.get("baselines", []) if b.get("name") == name), {})
            best_cell = (f"{name} ({base.get('peak_pct', 0):.1f}%, "
                         f"{num(base.get('recompute_cost'))}; {cost(best['budget'])})")
        else:
            best_cell = NA
        t70 = g(rws.get("70%"), "memplan", "plan_s")
        rows.append([PLAN_NAMES.get(gr.get("name"), gr.get("name")), cost("90%"), cost("70%"),
                     cost("50%"), best_cell, num(t70, "{:.2f} s")])
    commit = str(g(doc, "git", "commit", default=""))[:7]
    out = table(["graph", "90%", "70%", "50%", "best hand-written set (its peak, its cost; "
                 "memplan's cost there)", "plan time at 70%"], rows,
                ["---", "---:", "---:", "---:", "---", "---:"])
    return out + ["", f"Recompute cost in µs (roofline, {g(doc, 'planner_options', 'device')}); "
                  f"`bench/results/plan_compare.json`, {str(doc.get('date', ''))[:10]}, "
                  f"commit {commit}."]


@generator("checkmate.json")
def checkmate():
    """memplan's plan against the Checkmate-style MILP (bench/checkmate.sh). Columns
    follow the JSON: every member of a row that is a MILP solve (has a status) gets its
    own columns, so a cold solve added beside the warm-started one shows up as such."""
    doc = load("checkmate.json")
    solves = []
    for gr in doc.get("graphs", []):
        for r in gr.get("rows", []):
            for k, v in r.items():
                if isinstance(v, dict) and "status" in v and k not in solves:
                    solves.append(k)
    header = ["graph", "budget", "memplan cost"]
    for k in solves:
        header += [f"`{k}`: status", f"`{k}`: start", "best", "bound", "memplan vs best"]
    rows = []
    for gr in doc.get("graphs", []):
        for r in gr.get("rows", []):
            m = r.get("memplan", {})
            cells = [g(gr, "graph", "name", default=gr.get("name", NA)),
                     r.get("budget_label", NA),
                     num(m.get("recompute_cost")) if m.get("feasible") else "no fit"]
            for k in solves:
                s = r.get(k) or {}
                best = s.get("model_cost", s.get("objective"))
                start = g(s, "start", "cost")
                status = "infeasible" if s.get("infeasible") else (
                    "optimal" if s.get("optimal") else s.get("status", NA))
                mc = m.get("recompute_cost")
                rel = (NA if best in (None, 0) or mc is None or not m.get("feasible")
                       else pct(mc / best - 1))
                cells += [status, "none" if start is None and s else num(start),
                          num(best), num(s.get("dual_bound")), rel]
            rows.append(cells)
    meta = doc.get("meta", {})
    return table(header, rows, ["---", "---", "---:"] + ["---", "---:", "---:", "---:",
                                                          "---:"] * len(solves)) + [
        "", f"HiGHS {meta.get('highs', NA)}, {meta.get('time_limit_s', NA)} s per solve; "
        f"`bench/results/checkmate.json`, {str(meta.get('date', ''))[:10]}. *start* is the "
        "program the solve was warm-started with (memplan's own, where given): a *best* equal "
        "to it means HiGHS found nothing cheaper, not an independent reference; only "
        "*optimal* rows and *bound* are."]


# --- analyze / scale --------------------------------------------------------------------

def human_count(n):
    if n >= 10**6:
        return f"{n / 10**6:.1f}".rstrip("0").rstrip(".") + "M"
    return f"{n // 1000}k" if n >= 1000 else str(n)


@generator("analyze_scale.json")
def analyze_scale():
    """memplan analyze and lower on synthetic graphs (bench/bench_analyze.sh)."""
    doc = load("analyze_scale.json")

    def rss(mib):
        if mib is None:
            return NA
        return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"

    rows = []
    for c in doc.get("cases", []):
        a, lo, b = c.get("analyze", {}), c.get("lower", {}), c.get("before", {})
        ph = a.get("phases_s") or {}
        phases = " / ".join(num(ph.get(k), "{:.2f}") for k in
                            ("parse", "lower", "analyze", "reserved")) if ph else NA
        rows.append([c.get("shape"), human_count(c.get("ops", 0)),
                     human_count(c.get("tensors", 0)),
                     num(b.get("wall_s"), "{:.3g} s"), num(a.get("wall_s"), "{:.3g} s"), phases,
                     rss(b.get("max_rss_mib")), rss(a.get("max_rss_mib")),
                     num(a.get("rss_kib_per_op"), "{:.2f}"),
                     num(lo.get("wall_s"), "{:.3g} s")])
    before = doc.get("before")
    return table(["shape", "ops", "tensors", "analyze before", "analyze",
                  "parse / lower / analyze / reserved s", "max RSS before", "max RSS",
                  "KiB per op", "`lower`"], rows) + [
        "", f"Median of {g(doc, 'cases', 0, 'analyze', 'runs', default=NA)} runs (1M ops: one); "
        f"before: {before or NA}, alternated; `bench/results/analyze_scale.json`, "
        f"{str(doc.get('date', ''))[:10]}, commit {str(g(doc, 'git', 'commit', default=''))[:7]}."]


@generator("reserved_overhead.json")
def reserved_overhead():
    """analyze --timings phases on the 100k-op graphs (bench/reserved_overhead.py)."""
    doc = load("reserved_overhead.json")
    rows = []
    for r in doc.get("rows", []):
        m = r.get("median_s", {})
        rows.append([r.get("graph"), num(m.get("parse"), "{:.2f} s"),
                     num(m.get("lower"), "{:.2f} s"), num(m.get("analyze"), "{:.2f} s"),
                     num(m.get("reserved"), "{:.2f} s"), num(r.get("total_s"), "{:.2f} s"),
                     pct(r.get("reserved_share"), 0, False)])
    return table(["graph", "parse", "lower", "analyze", "allocator model", "total",
                  "allocator share"], rows) + [
        "", f"Median of {doc.get('repeat', NA)} runs of `{doc.get('command', NA)}`; "
        f"`bench/results/reserved_overhead.json`, {str(doc.get('date', ''))[:10]}, commit "
        f"{doc.get('commit', NA)}."]


@generator("scale.json")
def scale():
    """A 200k-op chain analyzed, planned and verified on one core (bench/bench_scale.sh)."""
    doc = load("scale.json")
    rows = []
    for r in doc.get("runs", []):
        rows.append([f"`{r.get('command')}`", num(r.get("wall_s"), "{:.1f} s"),
                     num(r.get("max_rss_mib"), "{:.0f} MiB"),
                     f"{num(r.get('target_wall_s'), '{:.0f} s')}, "
                     f"{num(r.get('target_rss_mib'), '{:.0f} MiB')}",
                     "met" if r.get("met") else "missed"])
    w = doc.get("wide") or {}
    if w:
        rows.append([f"`{w.get('command')}`, {human_count(w.get('tensors', 0))} tensors",
                     num(w.get("wall_s"), "{:.1f} s"), num(w.get("max_rss_mib"), "{:.0f} MiB"),
                     "", ""])
    return table(["command (200k-op chain)", "wall", "max RSS", "target", ""], rows) + [
        "", f"`bench/results/scale.json`, {str(doc.get('date', ''))[:10]}, "
        f"{g(doc, 'machine', 'pinned', default='')}."]


# --- reserved memory --------------------------------------------------------------------

@generator("reserved_table.json")
def reserved_table():
    """Allocated and reserved peaks predicted for an H100 (bench/reserved_table.py)."""
    doc = load("reserved_table.json")

    def rel(r, a):
        return NA if r is None or not a else f"{r / MIB:.0f} MiB ({100.0 * (r - a) / a:+.0f}%)"

    rows = []
    for r in doc.get("rows", []):
        model = str(r.get("model", "")).split(":")[1] if ":" in str(r.get("model")) else r.get(
            "model")
        if "error" in r:
            rows.append([model, r.get("batch"), "failed: " + r["error"][:60]] + [""] * 5)
            continue
        d, e, peak = r.get("default", {}), r.get("expandable", {}), r.get("peak_bytes")
        pa = g(d, "plan70", "peak_bytes")
        rows.append([model, r.get("batch"), num(peak and peak / MIB, "{:.0f} MiB"),
                     rel(d.get("reserved_bytes"), peak), rel(e.get("reserved_bytes"), peak),
                     num(pa and pa / MIB, "{:.0f} MiB"),
                     rel(g(d, "plan70", "reserved_bytes"), pa),
                     rel(g(e, "plan70", "reserved_bytes"), g(e, "plan70", "peak_bytes"))])
    return table(["model", "batch", "allocated peak", "reserved (default)",
                  "reserved (expandable)", "70% plan: allocated", "reserved (default)",
                  "reserved (expandable)"], rows)


# --- PyTorch ----------------------------------------------------------------------------

def bench_module(name):
    """Imports bench/NAME.py, whose renderer a table shares (stdlib only at import time)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


# Model names and signed percentages as bench/torch_models_table.py writes them.
_TORCH_MODELS = bench_module("torch_models_table")
tm_name, spct = _TORCH_MODELS.name, _TORCH_MODELS.pct


@generator("torch_models_2x.json")
def torch_models():
    """Exported once at batch 2, analyzed at 2 and 8, plans at 8, each against a measured
    eager step (bench/torch_models.py; the rendering of bench/torch_models_table.py)."""
    return _TORCH_MODELS.render(load("torch_models_2x.json"))


@generator("torch_models.json")
def torch_models_113():
    """The earlier table: torch 1.13, batch 2, 70% module plans (bench/compare_models.py)."""
    doc = load("torch_models.json")
    rows = []
    for r in doc:
        if "predicted" not in r:
            why = "unverified (typed by hand)" if r.get("unverified", True) else NA
            rows.append([r.get("model"), "", why] + [""] * 5)
            continue
        plan = (num(r.get("plan_predicted", 0) / MIB, "{:.2f}")
                + ("" if r.get("plan_fits") else " (no fit)"))
        rows.append([r.get("model"), r.get("ops", NA), num(r["measured"] / MIB, "{:.2f}"),
                     num(r["predicted"] / MIB, "{:.2f}"), spct(r.get("error")), plan,
                     num(r.get("plan_measured") and r["plan_measured"] / MIB, "{:.2f}"),
                     spct(r.get("plan_error"))])
    return table(["model", "ops", "measured peak", "predicted", "error",
                  "70% module plan: predicted", "measured", "error"], rows)


@generator("sac_dispatch.json")
def sac_dispatch():
    """What a selective-checkpointing policy costs when it saves every op
    (bench/sac_dispatch.py)."""
    doc = load("sac_dispatch.json")
    rows = []
    for r in doc.get("rows", []):
        e, s = r.get("eager_step_seconds"), r.get("sac_step_seconds")
        rows.append([tm_name(r.get("model", "")), r.get("batch"), r.get("forward_ops"),
                     num(e and e * 1000, "{:.0f} ms"), num(s and s * 1000, "{:.0f} ms"),
                     pct(s / e - 1, 0) if e and s else NA,
                     num(r.get("us_per_op_and_pass"), "{:.0f} µs")])
    return table(["model", "batch", "forward ops", "eager step", "step, policy saving every op",
                  "overhead", "per op and pass"], rows) + [
        "", f"torch {doc.get('torch', NA)}, {doc.get('threads', NA)} thread, "
        f"{doc.get('machine', NA)}; `bench/results/sac_dispatch.json`, "
        f"{str(doc.get('date', ''))[:10]}."]


@generator("llama7b_meta.json")
def llama7b_meta():
    """The 7B-shaped export on the meta device (bench/llama7b_meta.sh)."""
    d = load("llama7b_meta.json")
    t = d.get("targets", {})
    peaks = d.get("predicted_peak_bytes", {})
    rows = [["export wall time", num(d.get("export_wall_seconds"), "{:.0f} s"),
             num(t.get("export_wall_seconds"), "{:.0f} s")],
            ["export max RSS", num(d.get("max_rss_bytes", 0) / 2**30, "{:.1f} GiB"),
             num(t.get("max_rss_bytes", 0) / 2**30, "{:.0f} GiB")],
            ["ops", d.get("ops", NA), ""],
            ["resident (parameters, ...)", num(d.get("resident_bytes", 0) / 2**30,
                                               "{:.1f} GiB"), ""]]
    rows += [[f"predicted peak, {k}", num(v / 2**30, "{:.1f} GiB"), ""] for k, v in peaks.items()]
    return table(["", "value", "target"], rows) + [
        "", f"{d.get('cores', NA)} cores; `bench/results/llama7b_meta.json`. The peaks are "
        "predictions: no GPU step of this model was measured."]


# --- parallel ---------------------------------------------------------------------------

def opts_text(o):
    return ", ".join(f"{k}={v}" for k, v in (o or {}).items()) or "-"


@generator("parallel.json")
def parallel():
    """Per-rank peaks predicted vs measured on gloo (bench/parallel_gloo.sh)."""
    doc = load("parallel.json")
    rows, seen = [], set()
    for r in doc.get("rows", []):
        if g(r, "options", "optimizer") is False:
            continue  # the no-optimizer cross-check of the measurement, not a prediction
        key = (r.get("model"), r.get("strategy"), opts_text(r.get("options")),
               r.get("world_size"))
        if key in seen:
            continue  # the single-process run repeated as the reference of the next rows
        seen.add(key)
        ranks = g(r, "prediction", "ranks", default=None)
        if not ranks:
            rows.append([r.get("model"), r.get("strategy"), opts_text(r.get("options")),
                         r.get("world_size"), "failed in torch: " +
                         str(r.get("error", "no prediction"))[:60], ""])
            continue
        errs = [x.get("error") for x in ranks if x.get("error") is not None]
        exact = all(x.get("exact", True) for x in r.get("ranks", []))
        worst = max(errs, key=abs) if errs else None
        rows.append([r.get("model"), r.get("strategy"), opts_text(r.get("options")),
                     r.get("world_size"), pct(worst, 1),
                     "" if exact else "some rank not exact (upper bound)"])
    return table(["model", "strategy", "options", "ranks", "error (worst rank)", ""], rows,
                 ["---", "---", "---", "---:", "---:", "---"]) + [
        "", f"torch {doc.get('torch', NA)}, gloo on the CPU; error = (predicted - measured) / "
        f"measured; `bench/results/parallel.json`, {str(doc.get('date', ''))[:10]}."]


@generator("llama_scale.json")
def llama_scale():
    """Llama-2 shapes under FSDP2, 80 GB per rank (bench/llama_scale.py's README table)."""
    doc = load("llama_scale.json")
    ls = bench_module("llama_scale")
    import tempfile
    with tempfile.NamedTemporaryFile("r", suffix=".md") as f:
        ls.write_readme(doc, f.name)
        text = open(f.name, encoding="utf-8").read().split("\n")
    out = [line for line in text if line.startswith("|") or line.startswith("Time on ")]
    return [line for line in out if line.startswith("|")] + [""] + [
        line for line in out if line.startswith("Time on ")]


# --- ONNX -------------------------------------------------------------------------------

@generator("onnx_models.json")
def onnx_models():
    """The ONNX route against measured eager steps (exporters/onnx/compare_onnx.py)."""
    doc = load("onnx_models.json")
    rows = []
    for r in doc.get("rows", []):
        j = r.get("joint_route_predicted_bytes")
        rows.append([r.get("model"), r.get("onnx_nodes", NA),
                     num(r.get("measured_peak_bytes", 0) / MIB, "{:.2f}"),
                     num(r.get("predicted_peak_bytes", 0) / MIB, "{:.2f}"),
                     spct(r.get("relative_error")), num(j and j / MIB, "{:.2f}")])
    return table(["model", "ONNX nodes", "measured peak", "ONNX route", "error", "joint route"],
                 rows) + [
        "", f"torch {doc.get('torch', NA)}, {str(doc.get('date', ''))[:10]}; peaks in MiB; "
        "`bench/results/onnx_models.json`."]


# --- peers ------------------------------------------------------------------------------

@generator("peers.json")
def peers_estimates():
    """Step-peak estimates (Adam step) against the measured step (bench/peers.sh)."""
    doc = load("peers.json")
    names = [("memplan", "memplan"), ("memtracker_real", "MemTracker"),
             ("accelerate", "accelerate"),
             ("deepspeed_zero2", "DeepSpeed ZeRO-2 (its formula, re-implemented)")]
    rows = []
    for r in doc.get("rows", []):
        est = r.get("estimators") or {}
        if not est:
            continue
        rows.append([r.get("label", r.get("model")), num(g(est, "measured", "peak_bytes", default=0)
                                                          / MIB, "{:.2f} MiB")] +
                    [pct(g(est, k, "error_vs_measured"), 2) for k, _ in names])
    h = doc.get("header", {})
    return table(["model", "measured peak"] + [n for _, n in names], rows) + [
        "", f"torch {h.get('torch', NA)}, {h.get('threads', NA)} thread, CPU; "
        f"`bench/results/peers.json`, {str(h.get('date', ''))[:10]}."]


@generator("peers.json")
def peers_budgets():
    """memplan's plans at torch.compile's measured peaks: measured peak against the budget,
    compared strictly (no slack), and the measured time overhead (bench/peers.sh)."""
    doc = load("peers.json")
    rows, over, exit3 = [], 0, 0
    for r in doc.get("rows", []):
        label = r.get("label", r.get("model"))
        if r.get("backend"):
            label += f", compile backend {r['backend']}"
        for key, kind in (("memplan", "sac"), ("memplan_module", "module")):
            for p in r.get(key) or []:
                b, m = p.get("budget_bytes"), p.get("measured_peak_bytes")
                if b is None:
                    continue
                within = NA if m is None else ("yes" if m <= b else f"**no**, +{m - b} B")
                over += m is not None and m > b
                exit3 += p.get("exit") == 3
                pred = p.get("predicted_peak_bytes")
                rows.append([label, kind, p.get("budget"), num(b / MIB, "{:.2f}"),
                             num(pred and pred / MIB, "{:.2f}"), p.get("exit", NA),
                             num(m and m / MIB, "{:.2f}"), within,
                             f"{pct(p.get('overhead'), 0)} "
                             f"({pct(p.get('predicted_recompute_overhead'), 0, False)})"
                             if p.get("overhead") is not None else NA])
    return table(["model", "plan", "at compile's peak of budget", "budget (MiB)",
                  "predicted (MiB)", "memplan exit", "measured (MiB)", "measured ≤ budget",
                  "time overhead (predicted)"], rows,
                 ["---", "---", "---:", "---:", "---:", "---:", "---:", "---", "---:"]) + [
        "", f"{over} of {len(rows)} measured plans are over their budget, compared strictly "
        f"(no slack); {exit3} of them had exit 3 (memplan said no plan fits and the plan with "
        "the lowest peak was measured)."]


@generator("peers.json")
def peers_over_budget():
    """The measured plans over their budget, strictly, as bench/peers.py lists them in
    `totals.rows_over_budget` (every tool, not only memplan)."""
    doc = load("peers.json")
    totals = doc.get("totals")
    if not isinstance(totals, dict) or "rows_over_budget" not in totals:
        return ["(bench/results/peers.json has no `totals.rows_over_budget`: rerun "
                "bench/peers.sh)"]
    rows = []
    keys = ("tool", "model", "backend", "budget", "budget_bytes", "measured_peak_bytes",
            "over_bytes", "exit", "same_as")
    for r in totals.get("rows_over_budget") or []:
        rows.append([NA if r.get(k) is None else r[k] for k in keys])
    slack = totals.get("over_budget_slack")
    return table(["tool", "model", "compile backend", "budget", "budget (B)", "measured (B)",
                  "over by (B)", "exit", "same plan as budget"], rows,
                 ["---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:"]) + [
        "", f"{len(rows)} rows over budget; slack allowed: "
        f"{NA if slack is None else pct(slack, 1, False)}."]


@generator("compile_predict.json")
def compile_predict():
    """torch.compile steps predicted against measured ones (bench/compile_predict.py)."""
    text = bench_module("compile_predict").tables(load("compile_predict.json"))
    return text.rstrip("\n").split("\n")


@generator("compile_peers.json")
def compile_peers():
    """memplan's compiled plans beside torch's solvers (bench/compile_peers.py)."""
    return bench_module("compile_peers").summary_table(load("compile_peers.json")).split("\n")


# --- the GPU check (profiler/gpu_check.sh on a lent H200) -------------------------------

def mib(x):
    return NA if x is None else f"{x / MIB:.1f}"


@generator("gpu/gpu_check.json")
def gpu_profile():
    """memplan profile on the CUDA backend: every case's CUPTI-measured peak against
    the prediction (a consistency check of the executor), and CUPTI's overhead."""
    d = load("gpu/gpu_check.json")
    cases = d["cases"]
    by_alloc = {}
    for c in cases:
        a = by_alloc.setdefault(c["allocator"], [0, 0, 0.0])
        a[0] += 1
        a[1] += bool(c.get("exact"))
        a[2] = max(a[2], abs(c.get("relative_error") or 0))
    rows = [[f"`{k}`", n, e, pct(m, 2, False)] for k, (n, e, m) in sorted(by_alloc.items())]
    out = table(["allocator", "cases", "exact to the byte", "largest error"], rows)
    over = ", ".join(f"{o['graph']} {pct(o['wall_overhead'], 0)}" for o in d["cupti_overhead"])
    out += ["", f"{d['cases_run']} cases run, {d['cases_failed']} failed, "
            f"{d['cases_skipped']} skipped, in {d['seconds']} s; CUPTI's wall-time "
            f"overhead: {over}."]
    return out


def cudnn_scratch(model):
    """The largest scratch one convolution call took in the step (op_scratch.json)."""
    rows = [r for r in load("gpu/op_scratch.json")["rows"] if r.get("model") == model]
    if not rows or "ops" not in rows[0]:
        return None
    ops = rows[0]["ops"]
    conv = [o["scratch_bytes"] for o in ops if "conv" in o["op"]]
    return max(conv) if conv else 0


@generator("gpu/torch_gpu_check.json")
def gpu_torch():
    """Real PyTorch training steps on the device against memplan's prediction
    (profiler/torch_gpu_check.py), with the largest cuDNN convolution scratch
    measured in the same step (profiler/gpu_op_scratch.py)."""
    d = load("gpu/torch_gpu_check.json")
    rows = []
    for r in d["rows"]:
        if r.get("error"):
            rows.append([f"`{r['model']}`", r.get("batch", NA)] + [NA] * 5 + [r["error"][:60]])
            continue
        spec = r["model"].split(":", 2)[-1] if r["model"].startswith("compile:") else r["model"]
        spec = spec if ":" in spec else "torchvision:" + spec
        plan = r.get("plan70") or {}
        plan_error = (pct(plan["relative_error"], 2) if "relative_error" in plan else
                      f"no plan fits (exit {plan['exit']})" if "exit" in plan else NA)
        rows.append([f"`{r['model']}`", r["batch"], mib(r["predicted_peak_bytes"]),
                     mib(r["baseline"]["measured_peak_bytes"]), pct(r["relative_error"], 2),
                     plan_error,
                     mib(cudnn_scratch(spec)) if not r["model"].startswith("compile:") else NA,
                     r["torch"]])
    return table(["step", "batch", "predicted MiB", "measured MiB", "error",
                  "70% plan's error", "largest cuDNN conv scratch MiB", "torch"], rows)


@generator("gpu/op_scratch.json")
def gpu_at_peak():
    """Per model of profiler/gpu_op_scratch.py: the op running at the step's peak, the
    scratch it took, and memplan's miss on the same step (torch_gpu_check.json)."""
    d = load("gpu/op_scratch.json")
    missed = {r["model"] if ":" in r["model"] else "torchvision:" + r["model"]: r
              for r in load("gpu/torch_gpu_check.json")["rows"]
              if not r.get("error") and not r["model"].startswith("compile:")}
    rows = []
    for r in d["rows"]:
        if r.get("error"):
            continue
        at = [o for o in r["ops"] if o.get("at_peak")]
        shape = g(r, "op_at_peak_inputs", 0, "shape")
        m = missed.get(r["model"])
        miss = None if m is None else \
            m["predicted_peak_bytes"] - m["baseline"]["measured_peak_bytes"]
        agree = r.get("measured_peak_bytes") == r.get("allocator_peak_bytes")
        rows.append([f"`{r['model']}`", r["batch"], f"`{r['op_at_peak']}`",
                     "x".join(map(str, shape)) if shape else NA,
                     mib(at[0]["scratch_bytes"]) if at else "0.0", mib(miss),
                     "yes" if agree else "no"])
    return table(["model", "batch", "op at the peak", "its first input", "its scratch MiB",
                  "memplan's miss MiB", "profiler sum = allocator peak"], rows,
                 ["---", "---:", "---", "---", "---:", "---:", "---"]) + [
        "", f"{d['device_name']}, torch {d['torch']}, cuDNN {d['cudnn']}, "
        f"cudnn.benchmark {d['cudnn_benchmark']}."]


@generator("gpu/alloc_replay.json")
def gpu_alloc_replay():
    """Real PyTorch allocator histories replayed through memplan's allocator model
    (bench/alloc_replay.py)."""
    d = load("gpu/alloc_replay.json")
    rows = []
    for r in d["rows"]:
        first = r["first_segment_size_difference"]
        rows.append(["held out" if r["run"] == "run2" else "first", f"`{r['model']}`",
                     r["batch"], f"`{r['alloc_conf']}`", r["allocs"],
                     mib(r["real_reserved_peak_bytes"]), mib(r["model_reserved_peak_bytes"]),
                     pct(r["relative_error"], 2),
                     f"{r['model_segment_allocs']} / {r['real_segment_allocs']}",
                     "none" if first < 0 else f"the {first + 1}th"])
    exact = sum(1 for r in d["rows"] if r["relative_error"] == 0
                and r["first_segment_size_difference"] < 0)
    return table(["run", "model", "batch", "PYTORCH_CUDA_ALLOC_CONF", "allocs",
                  "PyTorch reserved MiB", "model reserved MiB", "error",
                  "segments model / PyTorch", "first segment that differs"], rows,
                 ["---", "---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:"]) + [
        "", f"{exact} of {len(d['rows'])} histories reproduced segment by segment; torch "
        f"{d['rows'][0]['torch'] if d['rows'] else NA}, {d['device']}."]


@generator("search_speed.json")
def search_speed():
    """plan --global-batch on the Llama-2 exports, two binaries in one run
    (bench/search_speed.py)."""
    return bench_module("search_speed").table_lines(load("search_speed.json"))


@generator("search_speed_kernel.json")
def search_speed_kernel():
    """The op-level searches again, before and after a change to the scoring
    kernel (bench/search_speed.py --kinds op:allocated)."""
    return bench_module("search_speed").table_lines(load("search_speed_kernel.json"))


@generator("search_speed_floor.json")
def search_speed_floor():
    """The 70B searches on 8 ranks again, before and after batch 1's floor
    check (bench/search_speed.py --models 70b --worlds 8)."""
    return bench_module("search_speed").table_lines(load("search_speed_floor.json"))


@generator("search_speed_lean.json")
def search_speed_lean():
    """Every search again, before and after trials replayed from their
    program's layout (bench/search_speed.py)."""
    return bench_module("search_speed").table_lines(load("search_speed_lean.json"))


@generator("plan_speed.json")
def plan_speed():
    """Single plans on the synthetic chains and transformers, two builds in one run
    (bench/plan_speed.py)."""
    return bench_module("plan_speed").table_lines(load("plan_speed.json"))


@generator("export_speed.json")
def export_speed():
    """The Llama-2 meta exports, traces one after another vs in parallel
    (bench/export_speed.py)."""
    return bench_module("export_speed").table_lines(load("export_speed.json"))


# --- the machinery ----------------------------------------------------------------------

def pages():
    out = [os.path.join(ROOT, "README.md")]
    for dirpath, _, files in os.walk(os.path.join(ROOT, "docs")):
        out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".md")]
    return [p for p in out if os.path.exists(p)]


def process(path, write):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    problems, out, i, n = [], [], 0, 0
    while i < len(lines):
        m = OPEN_RE.match(lines[i])
        out.append(lines[i])
        if not m:
            if CLOSE_RE.match(lines[i]):
                problems.append(f"{rel}:{i + 1}: <!-- /table --> without an opening marker")
            i += 1
            continue
        name = m.group("name")
        j = i + 1
        while j < len(lines) and not CLOSE_RE.match(lines[j]) and not OPEN_RE.match(lines[j]):
            j += 1
        if j == len(lines) or OPEN_RE.match(lines[j]):
            problems.append(f"{rel}:{i + 1}: table {name!r} is not closed by <!-- /table -->")
            i += 1
            continue
        n += 1
        shown = lines[i + 1:j]
        if name not in GENERATORS:
            problems.append(f"{rel}:{i + 1}: unknown table generator {name!r} "
                            f"(--list names them)")
            out += shown
        else:
            try:
                want = GENERATORS[name][0]()
            except (OSError, ValueError, KeyError, TypeError) as e:
                problems.append(f"{rel}:{i + 1}: table {name!r}: cannot render: {e!r}")
                want = shown
            if shown != want:
                d = difflib.unified_diff(shown, want, f"{rel} (page)",
                                         f"{name} (bench/results/{GENERATORS[name][1]})",
                                         lineterm="", n=0)
                problems.append(f"{rel}:{i + 1}: table {name!r} differs from its JSON:\n" +
                                "\n".join(d))
            out += want if write else shown
        out.append(lines[j])
        i = j + 1
    if write and out != lines:
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
    return problems, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare (the default)")
    mode.add_argument("--write", action="store_true", help="regenerate the tables in place")
    mode.add_argument("--list", action="store_true", help="list the generators")
    mode.add_argument("--render", metavar="NAME", help="print one generator's table")
    ap.add_argument("pages", nargs="*")
    args = ap.parse_args()
    if args.list:
        for name, (fn, src) in sorted(GENERATORS.items()):
            print(f"{name:20} bench/results/{src}: {fn.__doc__.split(chr(10))[0]}")
        return 0
    if args.render:
        if args.render not in GENERATORS:
            print(f"docs_tables: unknown generator {args.render!r}", file=sys.stderr)
            return 2
        print("\n".join(GENERATORS[args.render][0]()))
        return 0
    total, bad = 0, 0
    for path in [os.path.abspath(p) for p in args.pages] or pages():
        problems, n = process(path, args.write)
        total += n
        for p in problems:
            print(p)
        hard = [p for p in problems if "differs from its JSON" not in p] if args.write \
            else problems
        bad += len(hard)
    print(f"docs_tables: {total} tables {'written' if args.write else 'checked'}, "
          f"{bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
