#!/usr/bin/env python3
"""memplan's prediction of a torch.compile training step against the step
measured (issue 33, part 1). Every figure is measured by this script when it
runs; bench/results/compile_predict.{json,md} are its output.

Per model, backend (aot_eager, inductor) and loop convention (the output
held through the backward, or dropped once the loss is computed):
  * predicted: `memplan.torch.export(..., compile=backend)` (torch's own
    partitioner and decompositions for that backend, the graphs written as
    they run) and `memplan analyze`: the allocation-level peak. Nothing is
    measured for it: the export runs the traced graphs once on this CPU for
    shapes and storages, never the compiled step.
  * measured: `memplan.torch.measure(model, ..., compile=backend)`: a fresh
    `torch.compile(model, backend=backend)`, the loss eager outside it, one
    warm-up step (it compiles), then one step under torch.profiler memory
    events (parameters, inputs and target resident plus the running sum of
    allocation events), one intra-op thread.
The models: the peers bench's three (bench/peers.py) and held-out ones that
the compiled export was never checked on while it was written.

Usage: .venv-newest/bin/python bench/compile_predict.py [--memplan PATH]
       [--models a,b] [--backends aot_eager,inductor] [--json OUT] [--md OUT]
       bench/compile_predict.py --render   (the .md from the .json)
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch_models as tm  # noqa: E402
import provenance  # noqa: E402

# name -> (spec, batch, input shape or None, held out?)
MODELS = {
    "gpt_small": ("models:gpt_small", 8, None, False),
    "resnet18": ("torchvision:resnet18", 16, (3, 112, 112), False),
    "hf_gpt2": (tm.HF_GPT2, 2, None, False),
    "mobilenet_v2": ("torchvision:mobilenet_v2", 8, (3, 96, 96), True),
    "shufflenet_v2": ("torchvision:shufflenet_v2_x1_0", 8, (3, 96, 96), True),
    "convnext_tiny": ("torchvision:convnext_tiny", 2, (3, 64, 64), True),
    "hf_llama": (tm.HF_LLAMA, 2, None, True),
}
BACKENDS = ("aot_eager", "inductor")
RESULTS = os.path.join(ROOT, "bench", "results")


def predict(binary, graph):
    import memplan.torch as mt
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        with open(path, "w") as f:
            f.write(mt.dumps(graph))
        subprocess.run([binary, "analyze", path, "--json", path + ".r", "-q"], check=True)
        with open(path + ".r") as f:
            return json.load(f)["peak_bytes"]


def run_one(binary, name, backend, held):
    import memplan.torch as mt
    import torch
    spec, batch, shape, held_out = MODELS[name]
    torch.manual_seed(0)
    model = mt.load_model(spec)
    inputs = mt.example_inputs(model, batch, shape)
    target = mt.make_target(model, inputs)
    t = time.time()
    graph = mt.export(model, inputs, target, name=name, compile=backend, hold_outputs=held)
    export_s = time.time() - t
    predicted = predict(binary, graph)
    torch._dynamo.reset()
    t = time.time()
    measured = mt.measure(mt.load_model(spec), inputs, target, hold_outputs=held,
                          compile=backend)["peak_bytes"]
    return {"model": name, "spec": spec, "batch": batch, "input_shape": shape,
            "held_out": held_out, "backend": backend, "outputs_held": held,
            "predicted_bytes": predicted, "measured_bytes": measured,
            "error": (predicted - measured) / measured, "export_s": round(export_s, 2),
            "measure_s": round(time.time() - t, 2)}


def render(doc):
    lines = ["# memplan's prediction of torch.compile steps against measured ones", "",
             f"{doc['date']}, {doc['machine']}, torch {doc['torch']}, transformers "
             f"{doc['transformers']}, commit {doc['commit']}. `{doc['command']}` "
             f"({doc['seconds']:.0f} s). Raw data: `bench/results/compile_predict.json`.", "",
             "*Predicted*: `memplan.torch.export(..., compile=backend)` and `memplan analyze` "
             "(the allocation-level peak); the export never runs the compiled step. "
             "*Measured*: a fresh `torch.compile(model, backend=...)`, the loss eager outside "
             "it, one warm-up step that compiles, then one step under torch.profiler memory "
             "events, one thread (`memplan.torch.measure(compile=...)`). *held*: the loop keeps "
             "the output through the backward. *Held out*: models the compiled export was not "
             "checked on while it was written.", ""]
    return "\n".join(lines) + "\n" + tables(doc)


def tables(doc):
    """One table, a row per backend, model and convention, then each backend's
    largest error (docs/compile.md shows this part, scripts/docs_tables.py)."""
    lines = ["| backend | model | held out | batch | output held | predicted MiB | "
             "measured MiB | error | error bytes | export s |",
             "|---|---|:---:|---:|:---:|---:|---:|---:|---:|---:|"]
    notes = []
    for backend in BACKENDS:
        rows = [r for r in doc["rows"] if r["backend"] == backend]
        if not rows:
            continue
        for r in rows:
            head = (f"| {backend} | {r['model']} | {'yes' if r['held_out'] else 'no'} | "
                    f"{r.get('batch', '')} | {'yes' if r['outputs_held'] else 'no'} | ")
            if "failed" in r:
                lines.append(head + f"failed: {r['failed']} | | | | |")
                continue
            lines.append(head + f"{r['predicted_bytes'] / 2**20:.2f} | "
                         f"{r['measured_bytes'] / 2**20:.2f} | {100 * r['error']:+.3f}% | "
                         f"{r['predicted_bytes'] - r['measured_bytes']:+,} | "
                         f"{r['export_s']:.1f} |")
        errs = [abs(r["error"]) for r in rows if "error" in r]
        held_out = [abs(r["error"]) for r in rows if r["held_out"] and "error" in r]
        notes.append(f"**{backend}**: {len(errs)} steps; largest |error| "
                     f"{100 * max(errs or [0]):.3f}%; held-out models only: "
                     f"{100 * max(held_out or [0]):.3f}%; "
                     f"{sum(1 for r in rows if 'failed' in r)} failed.")
    return "\n".join(lines + [""] + notes) + "\n"


def run_header(script, **extra):
    """Sets torch up for a compile bench (one thread, no AOTAutograd or FX graph
    caches, no compile workers: 2 shared cores) and returns the run's
    provenance: date, machine, torch, commit, command, `extra`, rows []."""
    import torch
    import torch._functorch.config
    import torch._inductor.config
    torch.set_num_threads(1)
    torch._functorch.config.enable_autograd_cache = False
    torch._inductor.config.fx_graph_cache = False
    torch._inductor.config.compile_threads = 1
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Python "
                       f"{platform.python_version()}",
            "torch": torch.__version__, **extra,
            "commit": provenance.commit(),
            "command": script + " " + " ".join(sys.argv[1:]), "rows": []}


def bench_args(name, models):
    """The compile benches' command line (bench/NAME.py)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--models", default=",".join(models))
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--json", default=os.path.join(RESULTS, name + ".json"))
    ap.add_argument("--md", default=os.path.join(RESULTS, name + ".md"))
    ap.add_argument("--render", action="store_true",
                    help="only the .md, from the .json already there")
    return ap.parse_args()


def load(args):
    """The run's document from args.json (--render)."""
    with open(args.json) as f:
        return json.load(f)


def save(args, doc, start, render_fn=None):
    """Writes args.json (doc, its seconds set to those since `start`) and,
    with render_fn, the .md."""
    doc["seconds"] = time.time() - start
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    if render_fn is not None:
        write_md(args, doc, render_fn)


def write_md(args, doc, render_fn):
    with open(args.md, "w") as f:
        f.write(render_fn(doc) + "\n")


def main():
    args = bench_args("compile_predict", MODELS)
    if args.render:
        write_md(args, load(args), render)
        return 0
    try:
        import transformers
        tv = transformers.__version__
    except ImportError:
        tv = "not installed"
    doc = run_header("bench/compile_predict.py", transformers=tv)
    start = time.time()
    for backend in args.backends.split(","):
        for name in args.models.split(","):
            for held in (True, False):
                try:
                    row = run_one(args.memplan, name, backend, held)
                except Exception as e:  # noqa: BLE001 - a failed row is reported, not hidden
                    row = {"model": name, "backend": backend, "outputs_held": held,
                           "held_out": MODELS[name][3],
                           "failed": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                print(json.dumps(row), flush=True)
                doc["rows"].append(row)
    save(args, doc, start, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
