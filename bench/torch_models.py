#!/usr/bin/env python3
"""The PyTorch 2.x table: predicted vs measured peaks of eager CPU training
steps (one intra-op thread), torchvision models, a GPT and two transformers
models, from ONE symbolic export per model at batch 2.

Per model, in a subprocess (bench/results/torch_models_2x.json gets a row
after each):
  * export at batch 2 (symbolic: traced at batch 2..4 and solved), three
    ways for the per-op scratch: measured (the replay; the oracle), rules
    (exporters/pytorch/workspace.py; what `export` writes by default) and
    none;
  * `memplan analyze` at batch 2 and `--set batch=8`, against eager steps
    measured at batch 2 and 8 (torch.profiler, memplan.torch.measure);
  * module plans (`plan --granularity module`) and op-level plans (`plan
    --granularity sac`) at 70% and 50% of the baseline prediction at batch 8
    (the same export, `--set batch=8`; modules at MODULE_DEPTH), applied
    with torch.utils.checkpoint, and for op-level plans a selective
    activation checkpointing policy per module:
    predicted vs measured peak, the measured step-time overhead (median of
    3 steps each) beside the plan's predicted recompute overhead.

Usage: bench/torch_models.py [--memplan build/cli/memplan] [--models a,b]
       [--out bench/results/torch_models_2x.json] [--plans-only]
       (run with .venv/bin/python; --plans-only redoes the plan columns only)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

HF_GPT2 = "hf:gpt2:n_layer=4,n_embd=256,n_head=4,vocab_size=8000,n_positions=256,seq=128"
HF_LLAMA = ("hf:llama:hidden_size=256,intermediate_size=688,num_hidden_layers=4,"
            "num_attention_heads=8,num_key_value_heads=4,vocab_size=8000,seq=128")
MODELS = ["torchvision:resnet18", "torchvision:resnet50", "torchvision:mobilenet_v2",
          "torchvision:densenet121", "torchvision:efficientnet_b0",
          "torchvision:shufflenet_v2_x1_0", "torchvision:vit_b_16",
          "torchvision:convnext_tiny", "torchvision:swin_t", "models:gpt_small", HF_GPT2,
          HF_LLAMA]
EXPORT_BATCH, OTHER_BATCH, PLAN_BATCH = 2, 8, 8
# The scope depth that names one block (a plan's modules): "layer1.0",
# "features.1.0", "encoder.layers.encoder_layer_0", "lm.model.layers.0".
MODULE_DEPTH = {"torchvision:densenet121": 3, "torchvision:efficientnet_b0": 3,
                "torchvision:vit_b_16": 3, "torchvision:convnext_tiny": 3,
                "torchvision:swin_t": 3, HF_GPT2: 4, HF_LLAMA: 4}


def memplan(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    return p


def analyze(binary, graph, batch):
    with tempfile.NamedTemporaryFile(suffix=".json") as rep:
        p = memplan(binary, "analyze", graph, "--set", f"batch={batch}", "--json", rep.name, "-q")
        if p.returncode != 0:
            raise RuntimeError(f"analyze: {p.stderr[-300:]}")
        return json.load(open(rep.name))["peak_bytes"]


def step_seconds(mt, torch, model, inputs, target, repeats=3):
    return mt.step_seconds(model, inputs, target, repeats)


def one(spec, binary, plans_only=False):
    import torch
    import memplan.torch as mt
    row = {"model": spec, "torch": torch.__version__, "threads": 1}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        graphs = {}
        for ws in (("rules",) if plans_only else ("measure", "rules")):
            model = mt.load_model(spec)
            g, st = mt.export_symbolic(model, EXPORT_BATCH, name=spec, workspace=ws)
            graphs[ws] = os.path.join(tmp, f"{ws}.json")
            with open(graphs[ws], "w") as f:
                f.write(mt.dumps(g))
            if ws == "measure":
                row["symbols"] = st["symbols"]
                row["ops"] = len(g["ops"])
                for o in g["ops"]:
                    o.pop("workspace_bytes", None)
                graphs["none"] = os.path.join(tmp, "none.json")
                with open(graphs["none"], "w") as f:
                    f.write(mt.dumps(g))
        row["export_seconds"] = round(time.time() - t0, 1)
        for batch in (() if plans_only else (EXPORT_BATCH, OTHER_BATCH)):
            model = mt.load_model(spec)
            inputs = mt.example_inputs(model, batch)
            meas = mt.measure(model, inputs, mt.make_target(model, inputs))["peak_bytes"]
            r = {"measured_peak_bytes": meas}
            for ws, path in graphs.items():
                pred = analyze(binary, path, batch)
                r[f"predicted_{ws}"] = pred
                r[f"error_{ws}"] = (pred - meas) / meas
            row[f"batch{batch}"] = r
        # Plans at batch 8 (the export's --set batch=8): at batch 2 parameters
        # and their gradients are most of the peak and no module plan reaches 70%.
        base_pred = analyze(binary, graphs["rules"], PLAN_BATCH)
        row["plan_batch"] = PLAN_BATCH
        row["plan_baseline_predicted_bytes"] = base_pred
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, PLAN_BATCH)
        target = mt.make_target(model, inputs)
        base_time = step_seconds(mt, torch, model, inputs, target)
        row["step_seconds"] = base_time
        depth = str(MODULE_DEPTH.get(spec, 2))
        row["module_depth"] = int(depth)
        for granularity, frac in (("module", 0.7), ("module", 0.5), ("sac", 0.7), ("sac", 0.5)):
            key = f"{'plan' if granularity == 'module' else 'sac'}{int(frac * 100)}"
            plan = os.path.join(tmp, key + ".json")
            rep = os.path.join(tmp, key + ".rep.json")
            budget = int(base_pred * frac)
            p = memplan(binary, "plan", graphs["rules"], "--set", f"batch={PLAN_BATCH}",
                        "--budget", str(budget), "--granularity", granularity,
                        "--module-depth", depth, "-o", plan, "--json", rep, "-q")
            if p.returncode != 0:
                row[key] = {"budget_bytes": budget, "feasible": False, "exit": p.returncode}
                if os.path.exists(rep):  # the lowest peak a module plan reaches
                    row[key]["min_feasible_peak_bytes"] = json.load(open(rep)).get(
                        "min_feasible_peak_bytes")
                continue
            pj, rj = json.load(open(plan)), json.load(open(rep))
            model = mt.load_model(spec)
            meas = mt.measure(model, inputs, target, plan=plan)
            planned = mt.load_model(spec)
            mt.apply_plan(planned, plan)
            t = step_seconds(mt, torch, planned, inputs, target)
            row[key] = {"budget_bytes": budget, "feasible": True,
                        "modules": len(pj.get("modules", [])),
                        "predicted_peak_bytes": pj["predicted"]["peak_bytes"],
                        "measured_peak_bytes": meas["peak_bytes"],
                        "error": (pj["predicted"]["peak_bytes"] - meas["peak_bytes"])
                        / meas["peak_bytes"],
                        "predicted_recompute_overhead": rj.get("recompute_overhead"),
                        "measured_time_overhead": t / base_time - 1.0}
    row["seconds"] = round(time.time() - t0, 1)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--models")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "torch_models_2x.json"))
    ap.add_argument("--plans-only", action="store_true",
                    help="redo only the plan columns of the rows already in --out")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.memplan, args.plans_only)))
        return 0
    models = args.models.split(",") if args.models else MODELS
    doc = {"format": "memplan.bench.torch_models/2", "rows": [],
           "method": "eager CPU steps, 1 intra-op thread, torch.profiler running sum "
                     "(memplan.torch.measure); one symbolic export at batch 2 per model"}
    old = {}
    if args.plans_only:
        doc = json.load(open(args.out))
        old = {r["model"]: r for r in doc["rows"]}
        doc["rows"] = []
    for spec in models:
        cmd = [sys.executable, os.path.abspath(__file__), "--memplan", args.memplan, "--one", spec]
        p = subprocess.run(cmd + (["--plans-only"] if args.plans_only else []),
                           capture_output=True, text=True)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        row = json.loads(lines[-1]) if p.returncode == 0 and lines else \
            {"model": spec, "error": p.stderr[-800:]}
        if args.plans_only:
            base = old.get(spec, {"model": spec})
            base.update({k: v for k, v in row.items()
                         if k.startswith(("plan", "sac")) or k in ("step_seconds", "error",
                                                                   "module_depth")})
            row = base
        doc["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        b2, b8 = row.get(f"batch{EXPORT_BATCH}", {}), row.get(f"batch{OTHER_BATCH}", {})
        print(f"{spec[:40]:40s} b2 {100 * b2.get('error_rules', float('nan')):+.3f}% "
              f"b8 {100 * b8.get('error_rules', float('nan')):+.3f}% "
              f"(measured scratch b8 {100 * b8.get('error_measure', float('nan')):+.3f}%) "
              f"{row.get('seconds')} s {row.get('error', '')[:200]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
