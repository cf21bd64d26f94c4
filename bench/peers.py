#!/usr/bin/env python3
"""memplan beside PyTorch's own memory tools, on the same models, steps and
budgets, in one run (issue 16, "peers"). Every figure is measured or computed
by this script when it runs; bench/peers.sh is the entry point.

Per model (a subprocess each; bench/results/peers.json gets the row after each):
  1. torch.compile with torch._functorch.config.activation_memory_budget at
     BUDGETS (the min-cut partitioner's knapsack): the compiled step
     (forward + loss in one graph, its compiled backward) measured like an
     eager one (memplan.torch.measure: torch.profiler memory events, one
     intra-op thread, after a warm-up step that compiles), and the median time
     of 3 steps (bench/torch_models.step_seconds). Beside each: memplan's plan
     (`memplan plan --granularity sac`) at the same peak (the compiled step's
     measured peak as a fraction of the eager baseline's, times memplan's
     predicted baseline), applied with memplan.torch.apply_plan and measured
     the same way eagerly.
  2. PyTorch's automatic SAC (torch.distributed._tools: MemTracker,
     RuntimeEstimator, SACEstimator under FakeTensorMode -> sac_milp ->
     get_optimal_checkpointing_policy_per_module), first as documented, then
     with the workarounds this CPU needs (each named in the row), its policies
     applied with torch.utils.checkpoint and measured at the same budgets.
  3. Estimators of a step with Adam (foreach=False) against its measured peak:
     memplan analyze --optimizer adam, MemTracker (FakeTensorMode and real),
     accelerate estimate-memory's training figure, and DeepSpeed's formula,
     re-implemented (estimate_zero2_model_states_mem_needs written out in
     peers_lib.py: deepspeed is not installed, its function is not run).

Budgets are compared strictly: a measured peak one byte over its budget is over
(OVER_BUDGET_SLACK = 0). `--render` re-derives the summaries and peers.md from
the raw measurements already in peers.json, without running anything.

Usage: bench/peers.py [--memplan PATH] [--quick] [--models a,b] [--json OUT] [--md OUT]
       bench/peers.py --render [--json IN] [--md OUT]
       (.venv/bin/python; pulp, pwlf, scipy, psutil and accelerate on PYTHONPATH:
       bench/peers.sh installs them into a folder of its own)
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

import torch_models as tm  # noqa: E402  (also puts exporters/pytorch on sys.path)
import provenance  # noqa: E402

BUDGETS = [1.0, 0.8, 0.6, 0.4, 0.2, 0.1]
QUICK_BUDGETS = [1.0, 0.6, 0.2]
# name -> (spec, batch, input shape, label): small enough for a 2-core CPU.
MODELS = {
    "gpt": ("models:gpt_small", 8, None, "GPT (models:gpt_small, 4 layers, d=128, seq 64), batch 8"),
    "resnet18": ("torchvision:resnet18", 16, (3, 112, 112), "resnet18, batch 16, 3x112x112"),
    "hf_gpt2": (tm.HF_GPT2, 2, None, "hf gpt2-style (4 layers, d=256, seq 128), batch 2"),
}
# (spec, backend) jobs beyond aot_eager on every model: inductor compiles take
# ~1-2 minutes per budget here, so only on the smallest model.
INDUCTOR = ["models:gpt_small"]
GPU_TYPE = "NVIDIA H100"  # the datasheet the roofline workaround pins
TIMEOUT_S = 900
# A measured peak over its budget by more than this fraction counts as over budget: 0, strict
# (runs before 2026-12-03 allowed +0.1%, which hid 7 of 48 memplan rows, all under 0.003%).
OVER_BUDGET_SLACK = 0.0


def err_text(e):
    return f"{type(e).__name__}: {e}"[:600]


def rel(a, b):
    return (a - b) / b if a is not None and b else None


def paired_seconds(mt, torch, model, ref, inputs, target, repeats=3):
    """Median step time of `model` and of the eager `ref`, timed alternately
    (`repeats` rounds of one step each; both already warm: memplan.torch.measure
    ran two steps of `model`), so both see the same load of this shared
    machine. Steps as bench/torch_models.step_seconds: grads None, forward,
    loss, backward."""
    import time as _t

    def one(m):
        m.zero_grad(set_to_none=True)
        t = _t.perf_counter()
        mt.step_loss(m, inputs, target).backward()
        return _t.perf_counter() - t

    torch.set_num_threads(1)
    xs, rs = [], []
    for _ in range(repeats):
        xs.append(one(model))
        rs.append(one(ref))
    ref.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)
    x, r = statistics.median(xs), statistics.median(rs)
    return {"step_seconds": x, "eager_step_seconds": r, "overhead": x / r - 1.0}


def memplan_run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True)


def analyze_peak(binary, graph, *extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as rep:
        p = memplan_run(binary, "analyze", graph, "--json", rep.name, "-q", *extra)
        if p.returncode != 0:
            raise RuntimeError(f"memplan analyze {' '.join(extra)}: exit {p.returncode}: "
                               f"{p.stderr[-300:]}")
        return json.load(open(rep.name))["peak_bytes"]


# --------------------------------------------------------------------------
# One job: one model, one torch.compile backend
# --------------------------------------------------------------------------
def job(spec, batch, shape, backend, budgets, binary, full):
    import torch
    torch.set_num_threads(1)
    import memplan.torch as mt
    import peers_lib as pl
    row = {"model": spec, "batch": batch, "input_shape": list(shape) if shape else None,
           "backend": backend, "torch": torch.__version__, "threads": 1}
    t_job = time.time()
    model = mt.load_model(spec)
    inputs = mt.example_inputs(model, batch, shape)
    target = mt.make_target(model, inputs)
    row["params"] = sum(p.numel() for p in model.parameters())
    eager = mt.measure(model, inputs, target)
    row["eager"] = {"peak_bytes": eager["peak_bytes"], "resident_bytes": eager["resident_bytes"],
                    "step_seconds": tm.step_seconds(mt, torch, model, inputs, target)}
    depth = tm.MODULE_DEPTH.get(spec, 2)
    row["module_depth"] = depth
    tmp = tempfile.mkdtemp(prefix="peers-")
    graph = os.path.join(tmp, "graph.json")
    t = time.time()
    # Op times and scratch measured on this CPU (one thread): the planner's
    # recompute costs, and the scratch the rules miss on strided convolutions.
    g = mt.export(model, inputs, target, name=spec, times=True, workspace="measure")
    row["memplan_op_seconds"] = sum(o.get("time_us", 0) for o in g["ops"]) / 1e6
    with open(graph, "w") as f:
        f.write(mt.dumps(g))
    row["export_seconds"] = round(time.time() - t, 1)
    row["memplan_baseline_predicted_bytes"] = analyze_peak(binary, graph)
    # `model` stays: the eager reference every timed variant alternates with.

    # 1. torch.compile at each activation_memory_budget
    comp = []
    for b in budgets:
        r = {"budget": b}
        try:
            c = pl.compiled_model(spec, backend, b)
            t = time.time()
            c(*inputs, target).backward()  # compiles forward and backward
            r["compile_seconds"] = round(time.time() - t, 1)
            m = mt.measure(c, inputs, target)
            r["peak_bytes"] = m["peak_bytes"]
            r.update(paired_seconds(mt, torch, c, model, inputs, target))
            r["peak_vs_eager"] = m["peak_bytes"] / row["eager"]["peak_bytes"]
            del c
        except Exception as e:
            r["error"] = err_text(e)
        comp.append(r)
        print(f"  {backend} budget {b}: {r.get('peak_bytes', r.get('error'))}", file=sys.stderr,
              flush=True)
    row["compile"] = comp
    torch._dynamo.reset()
    torch._functorch.config.activation_memory_budget = 1.0

    # 1b. memplan at the same peaks: op decisions inside modules (sac) and
    # whole modules (module: torch.utils.checkpoint, no per-op policy)
    for granularity, key in (("sac", "memplan"), ("module", "memplan_module")):
        row[key] = memplan_plans(spec, granularity, comp, row, graph, tmp, depth, inputs,
                                 target, model, binary, mt, torch)
    plans = row["memplan"]

    # 2. PyTorch's automatic SAC (SACEstimator + sac_milp)
    row["torch_sac"] = torch_sac(spec, batch, shape, inputs, target, plans, model, pl, mt,
                                 torch)

    # 3. Estimators, on a step with Adam
    if full:
        row["estimators"] = estimators(spec, batch, shape, inputs, target, graph, binary,
                                       pl, mt, torch)
    row["eager"]["step_seconds_end"] = tm.step_seconds(mt, torch, model, inputs, target)
    row["seconds"] = round(time.time() - t_job, 1)
    return row


def memplan_plans(spec, granularity, comp, row, graph, tmp, depth, inputs, target, ref,
                  binary, mt, torch):
    """memplan plan at each compiled step's peak (relative to eager, times
    memplan's predicted baseline), applied and measured eagerly."""
    plans, done = [], {}
    for r in comp:
        if "peak_bytes" not in r:
            plans.append({"budget": r["budget"], "error": "torch.compile failed at this budget"})
            continue
        budget = int(r["peak_vs_eager"] * row["memplan_baseline_predicted_bytes"])
        if budget in done:  # the same budget as an earlier row: the same plan
            plans.append({**done[budget], "budget": r["budget"], "same_as": done[budget]["budget"]})
            continue
        p = {"budget": r["budget"], "budget_bytes": budget, "granularity": granularity}
        plan = os.path.join(tmp, f"{granularity}{r['budget']}.json")
        rep = os.path.join(tmp, f"{granularity}{r['budget']}.rep.json")
        t = time.time()
        proc = memplan_run(binary, "plan", graph, "--budget", str(budget), "--granularity",
                           granularity, "--module-depth", str(depth), "--device", "cpu",
                           "--budget-of", "allocated", "-o", plan, "--json", rep, "-q")
        p["plan_seconds"] = round(time.time() - t, 2)
        p["exit"] = proc.returncode
        if proc.returncode not in (0, 3) or not os.path.exists(plan):
            p["error"] = f"memplan plan exit {proc.returncode}: {proc.stderr[-300:]}"
            plans.append(p)
            continue
        pj, rj = json.load(open(plan)), json.load(open(rep))
        p["fits_predicted"] = proc.returncode == 0
        p["predicted_peak_bytes"] = pj["predicted"]["peak_bytes"]
        p["predicted_recompute_overhead"] = rj.get("recompute_overhead")
        p["policy_modules"] = rj.get("policy_modules", [])
        p["modules"] = pj.get("modules", [])
        try:
            m = mt.load_model(spec)
            p["measured_peak_bytes"] = mt.measure(m, inputs, target, plan=plan)["peak_bytes"]
            p.update(paired_seconds(mt, torch, m, ref, inputs, target))
            p["measured_vs_budget"] = rel(p["measured_peak_bytes"], budget)
            del m
        except Exception as e:
            p["error"] = err_text(e)
        plans.append(p)
        done[budget] = p
    return plans


def torch_sac(spec, batch, shape, inputs, target, plans, ref, pl, mt, torch):
    out = {"documented": {}, "workaround": {}}
    for mode in ("operator-level-cost-model", "operator-level-benchmark"):
        try:
            pl.TorchSacIlp(spec, batch, shape, mode=mode)
            out["documented"][mode] = {"ok": True}
        except Exception as e:
            out["documented"][mode] = {"ok": False, "error": err_text(e),
                                       "where": traceback.extract_tb(e.__traceback__)[-1].name}
    w = out["workaround"]
    accel = torch.accelerator.is_available()
    w["workarounds"] = [] if accel else [
        "torch.accelerator.is_available() answers True while the estimators run "
        "(the roofline's guard; no accelerator on this machine)",
        f"RuntimeEstimator/SACEstimator gpu_type={GPU_TYPE!r}: roofline times from that "
        "datasheet (not this CPU); memory figures are device-independent",
    ]
    kw = {} if accel else {"gpu_type": GPU_TYPE}
    t = time.time()
    try:
        with (contextlib.nullcontext() if accel else pl.accelerator_pretend()):
            try:
                ilp = pl.TorchSacIlp(spec, batch, shape, **kw)
            except AssertionError as e:
                w["without_dedup_error"] = err_text(e)
                ilp = pl.TorchSacIlp(spec, batch, shape, dedup_order=True, **kw)
                w["workarounds"].append(
                    "module order lists deduplicated (first call kept) for modules called "
                    "more than once per step: " + ", ".join(ilp.called_twice[:6])
                    + (" ..." if len(ilp.called_twice) > 6 else ""))
        w["ok"] = True
        w["baseline_peak_bytes"], w["baseline_runtime_ms"] = ilp.baseline()
    except Exception as e:
        w["ok"] = False
        w["error"] = err_text(e)
        return out
    w["estimate_seconds"] = round(time.time() - t, 1)
    rows, done = [], {}
    for p in plans:
        if "budget_bytes" not in p:
            continue
        if p["budget_bytes"] in done:  # the same budget: the same ILP solution
            rows.append({**done[p["budget_bytes"]], "budget": p["budget"],
                         "same_as": done[p["budget_bytes"]]["budget"]})
            continue
        r = {"budget": p["budget"], "budget_bytes": p["budget_bytes"]}
        try:
            t = time.time()
            decisions, ratios, recompute_ms, ilp_peak = ilp.solve(p["budget_bytes"])
            r["solve_seconds"] = round(time.time() - t, 2)
            r["feasible"] = ilp_peak != -1
            r["discard_ratios"] = ratios
            r["ilp_recompute_ms"] = recompute_ms
            r["ilp_peak_bytes"] = ilp_peak
            if ilp.unset:
                r["policy_round_none_workaround"] = [f.split(".", 1)[-1] for f in ilp.unset]
            if r["feasible"]:
                m = mt.load_model(spec)
                pl.apply_torch_sac(m, decisions)
                r["measured_peak_bytes"] = mt.measure(m, inputs, target)["peak_bytes"]
                r.update(paired_seconds(mt, torch, m, ref, inputs, target))
                r["measured_vs_budget"] = rel(r["measured_peak_bytes"], p["budget_bytes"])
                del m
        except Exception as e:
            r["error"] = err_text(e) + " (in " + traceback.extract_tb(e.__traceback__)[-1].name + ")"
        rows.append(r)
        done[p["budget_bytes"]] = r
    out["rows"] = rows
    return out


def estimators(spec, batch, shape, inputs, target, graph, binary, pl, mt, torch):
    est = {"optimizer": "torch.optim.Adam(lr=1e-3, foreach=False)"}
    model = mt.load_model(spec)
    est["measured"] = pl.measure_adam_step(model, inputs, target)
    meas = est["measured"]["peak_bytes"]

    def put(name, fn):
        t = time.time()
        try:
            v = fn()
            v["error_vs_measured"] = rel(v["peak_bytes"], meas)
        except Exception as e:
            v = {"error": err_text(e)}
        v["seconds"] = round(time.time() - t, 2)
        est[name] = v

    put("memplan", lambda: {"peak_bytes": analyze_peak(binary, graph, "--optimizer", "adam")})
    put("memtracker_fake", lambda: pl.memtracker_peak(spec, batch, shape, fake=True))
    put("memtracker_real", lambda: pl.memtracker_peak(spec, batch, shape, fake=False))

    def acc():
        a = pl.accelerate_estimate(model)
        return {**a, "peak_bytes": a["training_adam_bytes"]}
    put("accelerate", acc)

    def ds():
        n = pl.model_to_params(model)
        cpu, gpu = pl.deepspeed_zero2_estimate(n)
        return {"params": n, "peak_bytes": gpu, "cpu_bytes": cpu,
                "call": "estimate_zero2_model_states_mem_needs(params, num_gpus_per_node=1, "
                        "num_nodes=1, cpu_offload=False)"}
    put("deepspeed_zero2", ds)
    return est


# --------------------------------------------------------------------------
# Summary (derived numbers, kept in the JSON too) and the Markdown
# --------------------------------------------------------------------------
def rises(points):
    """points: [(budget knob, peak)] with the knob falling; the steps where
    the peak rose as the knob fell."""
    return [(a[0], b[0], b[1] - a[1]) for a, b in zip(points, points[1:])
            if a[1] is not None and b[1] is not None and b[1] > a[1]]


def over_budget(p):
    """True when the measured peak exceeds the budget (strictly, OVER_BUDGET_SLACK = 0)."""
    m, b = p.get("measured_peak_bytes"), p.get("budget_bytes")
    return m is not None and b is not None and m > b * (1 + OVER_BUDGET_SLACK)


def no_plan(p):
    """memplan exited 3: no plan under the budget; the plan applied is its lowest peak."""
    return p.get("exit") == 3 or p.get("fits_predicted") is False


def fits_cell(p):
    """'yes', or 'no' with the bytes and the fraction over; '; exit 3' when memplan found no
    plan under the budget."""
    m, b = p["measured_peak_bytes"], p["budget_bytes"]
    cell = "yes" if not over_budget(p) else f"**no** (+{m - b:,} B, {pct(rel(m, b), digits=4)})"
    if no_plan(p):
        cell += "; exit 3"
    return cell


def summarize(row):
    s = {"over_budget_slack": OVER_BUDGET_SLACK}
    comp = [(r["budget"], r.get("peak_bytes")) for r in row.get("compile", [])]
    s["compile_rises"] = rises(comp)
    s["compile_monotone"] = not s["compile_rises"]
    ok = [p for p in comp if p[1] is not None]
    s["compile_lowest_peak_vs_eager"] = min(p[1] for p in ok) / row["eager"]["peak_bytes"] \
        if ok else None
    for key in ("memplan", "memplan_module"):
        mp = sorted([(p["budget_bytes"], p.get("measured_peak_bytes"))
                     for p in row.get(key, []) if "budget_bytes" in p], reverse=True)
        s[key + "_rises"] = rises(mp)
        s[key + "_monotone"] = not s[key + "_rises"]
        s[key + "_over_budget"] = sum(1 for p in row.get(key, []) if over_budget(p))
        s[key + "_exit3"] = sum(1 for p in row.get(key, []) if no_plan(p))
    ts = sorted([(r["budget_bytes"], r.get("measured_peak_bytes"))
                 for r in row.get("torch_sac", {}).get("rows", [])], reverse=True)
    s["torch_sac_rises"] = rises(ts)
    s["torch_sac_monotone"] = not s["torch_sac_rises"]
    s["torch_sac_over_budget"] = sum(1 for r in row.get("torch_sac", {}).get("rows", [])
                                     if over_budget(r))
    row["summary"] = s


TOOLS = (("memplan", "memplan sac"), ("memplan_module", "memplan module"),
         ("torch_sac", "torch SAC (workarounds)"))


def tool_rows(row, key):
    return row.get("torch_sac", {}).get("rows", []) if key == "torch_sac" else row.get(key, [])


def totals(doc):
    """Counts over every job, compared strictly, and each row over budget or without a plan
    (exit 3) with its figures (the JSON's "totals")."""
    t = {"over_budget_slack": OVER_BUDGET_SLACK, "rows_over_budget": [], "rows_exit3": []}
    for key, _ in TOOLS:
        measured = over = exit3 = distinct_over = 0
        for row in doc["rows"]:
            for p in tool_rows(row, key):
                if "measured_peak_bytes" not in p:
                    continue
                measured += 1
                item = {"tool": key, "model": row.get("label", row.get("model")),
                        "backend": row.get("backend"), "budget": p["budget"],
                        "budget_bytes": p["budget_bytes"],
                        "predicted_peak_bytes": p.get("predicted_peak_bytes",
                                                      p.get("ilp_peak_bytes")),
                        "measured_peak_bytes": p["measured_peak_bytes"],
                        "over_bytes": p["measured_peak_bytes"] - p["budget_bytes"],
                        "measured_vs_budget": rel(p["measured_peak_bytes"], p["budget_bytes"]),
                        "exit": p.get("exit"), "same_as": p.get("same_as")}
                if over_budget(p):
                    over += 1
                    distinct_over += p.get("same_as") is None
                    t["rows_over_budget"].append(item)
                if key != "torch_sac" and no_plan(p):
                    exit3 += 1
                    t["rows_exit3"].append(item)
        t[key] = {"measured": measured, "over_budget": over,
                  "over_budget_distinct": distinct_over}
        if key != "torch_sac":
            t[key]["exit3"] = exit3
    return t


MiB = 2 ** 20


def mib(b):
    return "—" if b is None else f"{b / MiB:.2f}"


def pct(x, signed=True, digits=1):
    if x is None:
        return "—"
    return f"{100 * x:+.{digits}f}%" if signed else f"{100 * x:.{digits}f}%"


def pct2(x):
    return pct(x, digits=2)


def sec(x):
    return "—" if x is None else f"{x:.3f}"


def mcell(p):
    if "measured_peak_bytes" not in p:
        return "—"
    return f"{mib(p['measured_peak_bytes'])}, {sec(p.get('step_seconds'))} ({pct(p.get('overhead'))})"


def md_escape(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def write_md(doc, path):
    L = []
    h = doc["header"]
    L.append("# memplan beside PyTorch's memory tools (peers)\n")
    L.append(f"{h['date']}, {h['machine']}, torch {h['torch']}, transformers "
             f"{h['transformers']}, commit {h['commit']}, memplan `{h['memplan']}`. "
             f"`bash bench/peers.sh{' --quick' if h['quick'] else ''}` "
             f"(`bench/peers.py`), {h.get('seconds', '?')} s. Raw data: `bench/results/peers.json`.\n")
    L.append("**How each figure is measured.** A *peak* is the peak of one real CPU training "
             "step (zero_grad(set_to_none), forward, loss, backward; Adam's step too where "
             "said) measured by torch.profiler memory events (`memplan.torch.measure`: parameters, "
             "buffers, inputs and target resident plus the running sum of allocation events "
             "above the start of the step), one intra-op thread, after one unmeasured warm-up "
             "step (for torch.compile: after the compiling step). A *step time* (forward, loss, "
             "backward) is the median of 3 steps after a warm-up one, each followed by a step of "
             "the plain eager model (`peers.paired_seconds`); *overhead* is that median over "
             "the eager steps' median: the machine is shared (2 cores, other jobs running), and "
             "alternating keeps both under the same load; still, single figures move by ±10%. "
             "For torch.compile the overhead is against eager too (compiling also changes the "
             "kernels). memplan's predictions come from one `memplan.torch.export` of the eager "
             "step per model, with each op's time measured as it exports (`export(times=True)`: "
             "one thread, the least of 3 runs; their sum is given beside the eager step) and "
             "its scratch too (`workspace=\"measure\"`: the rules miss the strided "
             "convolutions' scratch at resnet18's 112 px, which put its module plans 1% over "
             "budget in earlier runs): its plans use `--device cpu --budget-of allocated`, those times as recompute costs, "
             "and SAC's dispatch charged at the cpu preset's 105 µs per forward op of each "
             "module with a policy, per pass (`bench/sac_dispatch.py`: calibrated on "
             "models:gpt_small, every op of its 4 blocks saved; the same measure gives 85 µs "
             "on the hf gpt2 and 43 µs on resnet18, where it is 7 ms of a 1.07 s step). The predicted overhead is that recompute cost, dispatch included, over "
             "the summed op times.\n")
    rows = doc["rows"]

    # ---- summary
    t = doc.get("totals") or totals(doc)
    L.append("## Summary\n")
    mp, mm, ts_ = t["memplan"], t["memplan_module"], t["torch_sac"]
    n_mem = mp["measured"] + mm["measured"]
    L.append(f"Measured peaks against their budgets, compared strictly (no slack): memplan's "
             f"plans are over budget in **{mp['over_budget'] + mm['over_budget']} of {n_mem}** "
             f"measured rows (sac {mp['over_budget']} of {mp['measured']}, module "
             f"{mm['over_budget']} of {mm['measured']}; "
             f"{mp['over_budget_distinct'] + mm['over_budget_distinct']} distinct measurements, "
             f"the others rows that reuse an earlier row's plan, `same_as`); "
             f"{mp['exit3'] + mm['exit3']} rows are exit 3 (memplan said no plan fits and the "
             f"plan with its lowest peak was applied). PyTorch's automatic SAC: over budget in "
             f"{ts_['over_budget']} of {ts_['measured']} measured rows. Every such row, with its "
             f"figures, is listed under *Over budget, and exit 3* below.\n")
    L.append("| model | backend | torch.compile peak monotone? (rises) | its lowest peak vs eager "
             "| memplan sac / module monotone? | memplan sac / module measured over budget "
             "(strict) | memplan sac / module exit 3 | torch SAC (workarounds) monotone? "
             "| over budget (strict) | failed rows |")
    L.append("|---|---|:---:|---:|:---:|:---:|:---:|:---:|:---:|:---:|")
    for row in rows:
        if "summary" not in row:
            L.append(f"| {md_escape(row.get('label', row['model']))} | {row.get('backend')} | "
                     "failed | | | | | | | |")
            continue
        s = row["summary"]
        n = len(row["memplan"])
        ts = row.get("torch_sac", {}).get("rows", [])
        yn = lambda b: "yes" if b else "no"  # noqa: E731
        L.append(f"| {md_escape(row['label'])} | {row['backend']} | "
                 f"{yn(s['compile_monotone'])} ({len(s['compile_rises'])}) | "
                 f"{pct(s['compile_lowest_peak_vs_eager'] - 1)} | "
                 f"{yn(s['memplan_monotone'])} / {yn(s['memplan_module_monotone'])} | "
                 f"{s['memplan_over_budget']} / {s['memplan_module_over_budget']} of {n} | "
                 f"{s.get('memplan_exit3', 0)} / {s.get('memplan_module_exit3', 0)} of {n} | "
                 f"{yn(s['torch_sac_monotone']) if ts else '—'} | "
                 f"{s['torch_sac_over_budget']} of {len(ts)} | "
                 f"{sum(1 for r in ts if 'error' in r)} of {len(ts)} |")
    L.append("")
    L.append("### Over budget, and exit 3\n")
    L.append("Each measured row over its budget (strictly) or for which memplan exited 3; "
             "*same as*: the row reuses the plan and measurement of the row at that budget "
             "knob.\n")
    L.append("| tool | model | backend | budget (knob) | budget B | predicted / ILP peak B "
             "| measured B | over by | memplan exit | same as |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|:---:|:---:|")
    names = dict(TOOLS)
    seen = set()
    for it in t["rows_over_budget"] + t["rows_exit3"]:
        k = (it["tool"], it["model"], it["backend"], it["budget"])
        if k in seen:
            continue
        seen.add(k)
        over = it["over_bytes"]
        pred = it["predicted_peak_bytes"]
        L.append(f"| {names[it['tool']]} | {md_escape(it['model'])} | {it['backend']} | "
                 f"{it['budget']} | {it['budget_bytes']:,} | "
                 f"{'—' if pred is None else format(pred, ',')} | "
                 f"{it['measured_peak_bytes']:,} | "
                 f"{'+' if over > 0 else ''}{over:,} B ({pct(it['measured_vs_budget'], digits=4)}) | "
                 f"{'—' if it['exit'] is None else it['exit']} | "
                 f"{'—' if it['same_as'] is None else it['same_as']} |")
    L.append("")

    # ---- 1. torch.compile
    L.append("## 1. torch.compile `activation_memory_budget` vs memplan at the same peak\n")
    L.append("torch.compile (backend named per table) compiles forward + loss (`peers_lib."
             "LossStep`) and its backward with `torch._functorch.config.activation_memory_budget"
             "` = *budget* (the min-cut partitioner's knapsack; a fresh `torch._dynamo.reset()` "
             "and no AOTAutograd/FX graph caches per budget; *compile s*: the first, compiling "
             "step, which may reuse inductor kernels compiled earlier). memplan's budget is the compiled step's "
             "measured peak relative to the eager baseline's, times memplan's predicted "
             "baseline. *memplan sac*: `memplan plan --granularity sac` (op decisions inside "
             "modules, applied as selective activation checkpointing by `memplan.torch."
             "apply_plan`; a module whose ops all recompute is wrapped plainly, without a "
             "policy: *wraps N, M with a policy*); *memplan module*: `--granularity module` (whole modules in "
             "`torch.utils.checkpoint`); both run eagerly. *Fits*: the measured peak at or "
             "under the budget, compared strictly (no slack: a byte over is **no**, with the "
             "bytes over); *exit 3*: memplan found no plan under the budget and the "
             "plan applied is its lowest. ↑ marks a measured peak above the previous row's "
             "although that tool's budget did not rise. A row whose memplan budget equals an "
             "earlier row's reuses that row's plan and figures (`same_as` in the JSON).\n")
    for row in rows:
        if "compile" not in row:
            L.append(f"**{md_escape(row.get('label', row['model']))}** ({row.get('backend')}): "
                     f"failed: `{md_escape(row.get('error', '?'))[:500]}`\n")
            continue
        s = row["summary"]
        e = row["eager"]
        L.append(f"**{md_escape(row['label'])}**, backend `{row['backend']}`: eager peak "
                 f"{mib(e['peak_bytes'])} MiB (memplan predicts "
                 f"{mib(row['memplan_baseline_predicted_bytes'])}, "
                 f"{pct2(rel(row['memplan_baseline_predicted_bytes'], e['peak_bytes']))}), "
                 f"eager step {sec(e['step_seconds'])} s ({sec(e.get('step_seconds_end'))} s when "
                 f"timed again at the end of the job; its ops' measured times sum to "
                 f"{sec(row.get('memplan_op_seconds'))} s); {row['params']:,} parameters; "
                 f"memplan modules at depth {row['module_depth']}.\n")
        L.append("| budget | compile s | torch.compile peak MiB (vs eager) | step s (overhead) "
                 "| memplan budget MiB | memplan sac: predicted / measured MiB | fits | step s "
                 "(overhead; predicted) | memplan module: predicted / measured MiB | fits | "
                 "step s (overhead; predicted) |")
        L.append("|---:|---:|---:|---:|---:|---:|:---:|---:|---:|:---:|---:|")
        prev = {}

        def mp_cells(p, key):
            if "measured_peak_bytes" not in p:
                return f"failed: `{md_escape(p.get('error'))[:200]}` | | "
            last = prev.get(key)
            up = " ↑" if last and p["budget_bytes"] <= last[0] and \
                p["measured_peak_bytes"] > last[1] else ""
            prev[key] = (p["budget_bytes"], p["measured_peak_bytes"])
            fits = fits_cell(p)
            wraps = ""
            if p.get("granularity") == "sac":
                wraps = f"; wraps {len(p.get('modules', []))}, {len(p.get('policy_modules', []))} " \
                        "with a policy"
            return (f"{mib(p['predicted_peak_bytes'])} / {mib(p['measured_peak_bytes'])}{up} | "
                    f"{fits} | {sec(p['step_seconds'])} ({pct(p['overhead'])}; "
                    f"{pct(p.get('predicted_recompute_overhead'))}{wraps})")

        for r, p, pm in zip(row["compile"], row["memplan"], row["memplan_module"]):
            if "error" in r:
                L.append(f"| {r['budget']} | — | failed: `{md_escape(r['error'])[:200]}` "
                         "| | | | | | | | |")
                continue
            up = " ↑" if "c" in prev and r["peak_bytes"] > prev["c"] else ""
            prev["c"] = r["peak_bytes"]
            L.append(f"| {r['budget']} | {r['compile_seconds']} | {mib(r['peak_bytes'])}{up} "
                     f"({pct(r['peak_vs_eager'] - 1)}) | {sec(r['step_seconds'])} "
                     f"({pct(r['overhead'])}) | {mib(p.get('budget_bytes'))} | "
                     f"{mp_cells(p, 'sac')} | {mp_cells(pm, 'module')} |")
        L.append("")

        def mono(key, fmt):
            if s[key + "_monotone"]:
                return "**yes**"
            return "**no** (" + "; ".join(fmt(a, b, d) for a, b, d in s[key + "_rises"]) + ")"
        knob = lambda a, b, d: f"{a}→{b}: +{mib(d)} MiB"  # noqa: E731
        byb = lambda a, b, d: f"budget {mib(a)}→{mib(b)} MiB: +{mib(d)} MiB"  # noqa: E731
        L.append(f"Peak monotone as the budget falls: torch.compile {mono('compile', knob)}; "
                 f"memplan sac {mono('memplan', byb)}; memplan module "
                 f"{mono('memplan_module', byb)} (memplan's over its own falling budgets). "
                 f"Measured over budget: memplan sac {s['memplan_over_budget']}, module "
                 f"{s['memplan_module_over_budget']} of {len(row['memplan'])}.\n")

    # ---- 2. torch automatic SAC
    L.append("## 2. PyTorch's automatic SAC (`SACEstimator` + `sac_ilp`) at the same budgets\n")
    L.append("As PyTorch's `test/distributed/_tools/test_sac_ilp.py` runs it: under "
             "`FakeTensorMode`, `MemTracker` (2 steps with Adam), `RuntimeEstimator` and "
             "`SACEstimator` -> `aggregate_stats` -> `parse_module_info` -> `sac_milp(graph, "
             "budget GiB)` -> per chosen module `get_optimal_checkpointing_policy_per_module("
             "1 - discard ratio)`; each policy applied with `torch.utils.checkpoint` + "
             "`create_selective_checkpoint_contexts` (k-th op of the module's call gets the "
             "k-th decision; a mismatch would fail the row), measured like memplan's. "
             "Budgets: memplan's of section 1 (same backend); a row whose budget equals an "
             "earlier row's reuses its solution and figures.\n")
    for row in rows:
        ts = row.get("torch_sac")
        if not ts:
            continue
        L.append(f"**{md_escape(row['label'])}** ({row['backend']} budgets)\n")
        for mode, d in ts["documented"].items():
            L.append(f"- as documented, `{mode}`: "
                     + ("runs" if d["ok"] else f"**fails** in `{d.get('where')}`: "
                        f"`{md_escape(d['error'])}`"))
        w = ts["workaround"]
        if w:
            L.append("- with workarounds: " + "; ".join(md_escape(x) for x in w["workarounds"]))
            if w.get("without_dedup_error"):
                L.append(f"  (without the last one: `{md_escape(w['without_dedup_error'])}`)")
            if not w.get("ok"):
                L.append(f"- with workarounds it still **fails**: `{md_escape(w['error'])}`")
            else:
                L.append(f"- its own baseline peak estimate (`get_peak_memory_runtime_baseline`) "
                         f"{mib(w['baseline_peak_bytes'])} MiB vs measured eager "
                         f"{mib(row['eager']['peak_bytes'])} MiB "
                         f"({pct2(rel(w['baseline_peak_bytes'], row['eager']['peak_bytes']))}); "
                         f"estimators took {w['estimate_seconds']} s")
        L.append("")
        if ts.get("rows"):
            L.append("| budget (knob of §1) | budget MiB | ILP: modules (discard ratio) | ILP "
                     "peak MiB | measured peak MiB | fits | step s (overhead) | memplan sac (§1): "
                     "measured MiB, step s (overhead) | memplan module (§1) |")
            L.append("|---:|---:|---|---:|---:|:---:|---:|---:|---:|")
            mp = {p["budget"]: p for p in row["memplan"]}
            mpm = {p["budget"]: p for p in row["memplan_module"]}
            dagger = False
            for r in ts["rows"]:
                p = mp.get(r["budget"], {})
                mods = ", ".join(f"{k} ({v:.2f})" for k, v in
                                 sorted(r.get("discard_ratios", {}).items())) or "none"
                if r.get("policy_round_none_workaround"):
                    mods += " †"
                    dagger = True
                if "error" in r:
                    L.append(f"| {r['budget']} | {mib(r['budget_bytes'])} | failed: "
                             f"`{md_escape(r['error'])[:240]}` | | | | | "
                             f"{mcell(p)} | {mcell(mpm.get(r['budget'], {}))} |")
                elif not r["feasible"]:
                    L.append(f"| {r['budget']} | {mib(r['budget_bytes'])} | infeasible (sac_milp "
                             f"returned -1) | — | — | — | — | {mib(p.get('measured_peak_bytes'))} "
                             f"| {mcell(p)} | {mcell(mpm.get(r['budget'], {}))} |")
                else:
                    fits = fits_cell(r)
                    L.append(f"| {r['budget']} | {mib(r['budget_bytes'])} | {mods} | "
                             f"{mib(r['ilp_peak_bytes'])} | {mib(r['measured_peak_bytes'])} | "
                             f"{fits} | {sec(r['step_seconds'])} ({pct(r['overhead'])}) | "
                             f"{mcell(p)} | {mcell(mpm.get(r['budget'], {}))} |")
            s = row["summary"]
            L.append("")
            if dagger:
                L.append("† `get_optimal_checkpointing_policy_per_module` raised `TypeError: type "
                         "NoneType doesn't define __round__ method` (PuLP leaves an op variable "
                         "that is in no constraint, with zero memory and time, unset); solved "
                         "again with those read as 0 (recompute).\n")
            L.append(f"torch SAC measured peak monotone as its budget falls: "
                     f"**{'yes' if s['torch_sac_monotone'] else 'no'}**.\n")

    # ---- 3. Estimators
    L.append("## 3. Estimators vs the measured peak of a step with Adam\n")
    L.append("The measured step: zero_grad(set_to_none), forward, loss, backward, "
             "`torch.optim.Adam(foreach=False).step()` (state made by the warm-up step, "
             "resident), `peers_lib.measure_adam_step`. memplan: `memplan analyze GRAPH "
             "--optimizer adam` on the same export. MemTracker: `torch.distributed._tools."
             "mem_tracker.MemTracker` (`track_external(model, optimizer)`, 2 steps, stats reset "
             "after the first; the peak snapshot's Total), under FakeTensorMode and on real "
             "tensors. accelerate: `accelerate estimate-memory`'s *Training using Adam* column "
             "from accelerate's own code (`calculate_maximum_sizes`, largest value of "
             "`estimate_training_usage(size, \"float32\")` = 4 x the model's bytes; model states "
             "only, no activations). DeepSpeed's formula, re-implemented (not DeepSpeed's "
             "function run: deepspeed is not installed): the GPU figure of "
             "`estimate_zero2_model_states_mem_needs(params, 1 GPU, cpu_offload=False)`, "
             "4·P + 16·P bytes, as DeepSpeed's `deepspeed/runtime/zero/stage_1_and_2.py` "
             "computes it, written out in `peers_lib.deepspeed_zero2_estimate`; it assumes fp16 "
             "weights with fp32 master weights and Adam state, model states only). Error = (estimate − measured) / measured.\n")
    L.append("| model | measured MiB | memplan | MemTracker (fake) | MemTracker (real) | "
             "accelerate | DeepSpeed ZeRO-2 (DeepSpeed's formula, re-implemented) |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        est = row.get("estimators")
        if not est:
            continue
        cells = []
        for k in ("memplan", "memtracker_fake", "memtracker_real", "accelerate",
                  "deepspeed_zero2"):
            v = est.get(k, {})
            cells.append(f"failed: `{md_escape(v['error'])[:160]}`" if "error" in v else
                         f"{mib(v['peak_bytes'])} ({pct2(v['error_vs_measured'])})")
        L.append(f"| {md_escape(row['label'])} | {mib(est['measured']['peak_bytes'])} | "
                 + " | ".join(cells) + " |")
    L.append("")
    fails = [r for r in rows if "error" in r and "compile" not in r]
    if fails:
        L.append("## Jobs that failed\n")
        for r in fails:
            L.append(f"- {md_escape(r.get('label', r['model']))} ({r.get('backend')}): "
                     f"`{md_escape(r['error'])[:600]}`")
        L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def header(args, quick):
    import torch
    import transformers
    cpu = "?"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} "
                       f"{platform.release()}, Python {platform.python_version()}",
            "torch": torch.__version__, "transformers": transformers.__version__,
            "commit": provenance.commit(),
            "memplan": args.memplan, "quick": quick, "threads": 1,
            "cuda_available": torch.cuda.is_available()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--quick", action="store_true",
                    help="GPT only, budgets 1.0/0.6/0.2, aot_eager only (about 5 minutes)")
    ap.add_argument("--models", help="comma-separated names of MODELS: " + ", ".join(MODELS)
                    + " (default: all)")
    ap.add_argument("--budgets", help="comma-separated activation_memory_budget values")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--backends", default="aot_eager,inductor",
                    help="jobs to run: aot_eager (every model), inductor (the models of INDUCTOR)")
    ap.add_argument("--json", default=os.path.join(BENCH, "results", "peers.json"))
    ap.add_argument("--md", default=os.path.join(BENCH, "results", "peers.md"))
    ap.add_argument("--render", action="store_true",
                    help="run nothing: re-derive the summaries and totals from the raw "
                         "measurements in --json, rewrite it and --md")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.memplan = os.path.abspath(args.memplan)
    if args.render:
        with open(args.json) as f:
            doc = json.load(f)
        for row in doc["rows"]:
            if "compile" in row:
                summarize(row)
        doc["totals"] = totals(doc)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        write_md(doc, args.md)
        print(f"wrote {args.json} and {args.md} from the measurements in {args.json}")
        return 0
    if args.one:
        spec, batch, shape, backend, budgets, full = json.loads(args.one)
        row = job(spec, batch, tuple(shape) if shape else None, backend, budgets,
                  args.memplan, full)
        print("ROW " + json.dumps(row))
        return 0
    budgets = [float(b) for b in args.budgets.split(",")] if args.budgets else \
        (QUICK_BUDGETS if args.quick else BUDGETS)
    names = args.models.split(",") if args.models else (["gpt"] if args.quick else list(MODELS))
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model {', '.join(unknown)}: one of {', '.join(MODELS)}")
    models = [MODELS[n] for n in names]
    backends = args.backends.split(",")
    jobs = [(m, "aot_eager", True) for m in models] if "aot_eager" in backends else []
    if not args.quick and not args.no_inductor and "inductor" in backends:
        jobs += [(m, "inductor", False) for m in models if m[0] in INDUCTOR]
    t0 = time.time()
    doc = {"format": "memplan.bench.peers/1", "header": header(args, args.quick),
           "budgets": budgets, "rows": []}
    for (spec, batch, shape, label), backend, full in jobs:
        t = time.time()
        cmd = [sys.executable, os.path.abspath(__file__), "--memplan", args.memplan, "--one",
               json.dumps([spec, batch, shape, backend, budgets, full])]
        print(f"{label} [{backend}] ...", flush=True)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
            lines = [l for l in p.stdout.splitlines() if l.startswith("ROW ")]
            row = json.loads(lines[-1][4:]) if p.returncode == 0 and lines else \
                {"model": spec, "backend": backend,
                 "error": f"exit {p.returncode}: {p.stderr[-800:]}"}
        except subprocess.TimeoutExpired as e:
            row = {"model": spec, "backend": backend,
                   "error": f"timed out after {TIMEOUT_S} s: {str(e.stderr or '')[-400:]}"}
        row["label"] = label
        if "compile" in row:
            summarize(row)
        doc["rows"].append(row)
        doc["totals"] = totals(doc)
        doc["header"]["seconds"] = round(time.time() - t0)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        write_md(doc, args.md)
        print(f"  {round(time.time() - t)} s" + (f"  ERROR {row['error'][:300]}"
                                                 if "error" in row else ""), flush=True)
    print(f"wrote {args.json} and {args.md} in {round(time.time() - t0)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
