#!/usr/bin/env python3
"""Allocated vs reserved, predicted: the PyTorch exporter's table models traced
for an H100 (`export --device h100`: without data, no CPU scratch), analyzed
with the caching-allocator model under PyTorch's defaults and with
expandable_segments:True, and planned at 70% of the allocation-level peak.

No GPU ran: every figure is a prediction (issue 14's GPU check measures them).
Each row says which scratch it holds (`scratch`): the per-op scratch the
exporter's GPU rules give (memplan/torch/_workspace.py; by workspace_source:
rule:cublas-persistent and rule:cuda-depthwise are 0 bytes per op,
none:cudnn-conv is cuDNN's convolution workspace, not modelled and taken as
0), and the persistent cuBLAS workspace the device model holds (analyze
--device h100: device_memory.cublas_workspace_bytes).

Usage: bench/reserved_table.py [--memplan build/cli/memplan] [--models a,b]
       [--out bench/results/reserved_table.json]   (run with .venv/bin/python)
Writes the JSON and a Markdown table beside it (.md).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH")]))  # for `python -m memplan`
from torch_models import HF_GPT2, HF_LLAMA  # noqa: E402

# (model, batch): vision models at 32 images, sequence models at 8 sequences.
MODELS = [("torchvision:resnet18", 32), ("torchvision:resnet50", 32),
          ("torchvision:mobilenet_v2", 32), ("torchvision:densenet121", 32),
          ("torchvision:efficientnet_b0", 32), ("torchvision:vit_b_16", 32),
          ("torchvision:convnext_tiny", 32), ("torchvision:swin_t", 32),
          ("models:gpt_small", 8), (HF_GPT2, 8), (HF_LLAMA, 8)]
CONFS = {"default": "", "expandable": "expandable_segments:True"}
MiB = 1 << 20


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args[:3]), p.returncode,
                                                 p.stderr[-800:]))
    return p


def report(memplan, *args):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        run(memplan, *args, "--json", f.name, "-q")
        with open(f.name, encoding="utf-8") as r:
            return json.load(r)


def row(memplan, model, batch, tmp):
    graph = os.path.join(tmp, "g.json")
    run(sys.executable, "-m", "memplan", "export", model, "--batch", str(batch), "--static", "--device", "h100", "-o", graph,
        "-q")
    with open(graph, encoding="utf-8") as f:
        g = json.load(f)
    out = {"model": model, "batch": batch, "predicted": True,
           "scratch": {"per_op": g["source"].get("workspace"),
                       "per_op_bytes": sum(o.get("workspace_bytes", 0) for o in g["ops"])}}
    for name, conf in CONFS.items():
        a = report(memplan, "analyze", graph, "--alloc-conf", conf, "--device", "h100")
        out.setdefault("peak_bytes", a["peak_bytes"])
        out["scratch"].setdefault("cublas_workspace_bytes",
                                  a["device_memory"]["cublas_workspace_bytes"])
        out["scratch"].setdefault("cublaslt_workspace_bytes",
                                  a["device_memory"]["cublaslt_workspace_bytes"])
        out[name] = {"reserved_bytes": a["reserved"]["peak_bytes"],
                     "rounded_allocated_bytes": a["reserved"]["allocated_peak_bytes"],
                     "segments": a["reserved"]["segments"],
                     "device_total_bytes": a["device_memory"]["total_peak_bytes"]}
        budget = str(int(0.7 * a["peak_bytes"]))
        p = report(memplan, "plan", graph, "--budget", budget, "--budget-of", "allocated",
                   "--alloc-conf", conf, "--device", "h100")
        out[name]["plan70"] = {"feasible": p["feasible"],
                               "peak_bytes": p["predicted"]["peak_bytes"],
                               "reserved_bytes": p["reserved"]["peak_bytes"]}
    return out


def scratch_cell(r):
    """Which scratch the row's figures hold: the per-op scratch by source, and
    the persistent cuBLAS workspace."""
    sc = r.get("scratch") or {}
    ops = (sc.get("per_op") or {}).get("ops", {})
    parts = []
    if sc.get("per_op_bytes"):
        parts.append("%.0f MiB per-op" % (sc["per_op_bytes"] / MiB))
    unmodelled = sum(n for k, n in ops.items() if k.startswith("none:"))
    if unmodelled:
        parts.append("cuDNN conv: none (%d ops)" % unmodelled)
    if sc.get("cublas_workspace_bytes"):
        parts.append("cuBLAS %.0f MiB (rule)" % (sc["cublas_workspace_bytes"] / MiB))
    return "; ".join(parts) or "n/a"


def markdown(rows):
    lines = [
        "Predicted, no GPU ran: every figure is a prediction. Traced for an H100 (`export "
        "--device h100 --static`); reserved: PyTorch's caching allocator model, second "
        "training step; in brackets, above the allocated peak of the same column group. "
        "Plans: `plan --budget-of allocated` at 70% of the allocated peak.",
        "",
        "Scratch (last column): the persistent cuBLAS workspace is a rule, held in every "
        "reserved figure (rule:cublas-persistent: PyTorch's CUBLAS_WORKSPACE_CONFIG default, "
        "32 MiB on sm90, allocated once per handle and stream and kept; cuBLASLt shares it); "
        "no per-op scratch is modelled on the GPU: matmuls and depthwise convolutions have "
        "none by rule, and cuDNN's convolution workspace (chosen by its heuristics at run "
        "time) is not modelled, taken as 0 on the ops counted (none:cudnn-conv), so the "
        "CNN rows can under-predict by the largest such workspace.",
        "",
        "| model | batch | allocated peak | reserved (default) | reserved (expandable) | "
        "70% plan: allocated | reserved (default) | reserved (expandable) | scratch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|"]

    def pct(r, a):
        return "%.0f MiB (%+.0f%%)" % (r / MiB, 100.0 * (r - a) / a)

    for r in rows:
        if "error" in r:
            lines.append("| %s | %d | %s |" % (r["model"], r["batch"], r["error"][:80]))
            continue
        d, e = r["default"], r["expandable"]
        pa = d["plan70"]["peak_bytes"]
        lines.append("| %s | %d | %.0f MiB | %s | %s | %.0f MiB | %s | %s | %s |" % (
            r["model"].split(":")[1],
            r["batch"], r["peak_bytes"] / MiB, pct(d["reserved_bytes"], r["peak_bytes"]),
            pct(e["reserved_bytes"], r["peak_bytes"]), pa / MiB,
            pct(d["plan70"]["reserved_bytes"], pa), pct(e["plan70"]["reserved_bytes"],
                                                        e["plan70"]["peak_bytes"]),
            scratch_cell(r)))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    ap.add_argument("--models")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "reserved_table.json"))
    args = ap.parse_args()
    models = MODELS
    if args.models:
        wanted = args.models.split(",")
        models = [m for m in MODELS if m[0] in wanted or m[0].split(":")[1] in wanted]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, batch in models:
            try:
                rows.append(row(os.path.abspath(args.memplan), model, batch, tmp))
            except RuntimeError as e:
                rows.append({"model": model, "batch": batch, "error": str(e)})
            print(json.dumps(rows[-1]), flush=True)
    doc = {"what": "predicted allocation-level and reserved peaks (PyTorch caching allocator "
                   "model, 2 steps) of eager training steps traced for an H100; no GPU ran: "
                   "every figure is a prediction",
           "scratch": "per row: per_op = the graph's source.workspace (the exporter's GPU "
                      "scratch rules, memplan/torch/_workspace.py: ops counted by "
                      "workspace_source; rule:cublas-persistent and rule:cuda-depthwise are "
                      "0 bytes per op, none:cudnn-conv is cuDNN's convolution workspace, not "
                      "modelled, taken as 0); per_op_bytes = their sum; "
                      "cublas_workspace_bytes = the persistent cuBLAS workspace the device "
                      "model holds in every reserved figure (cuBLASLt shares it: "
                      "cublaslt_workspace_bytes 0)",
           "rows": rows}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    with open(args.out[:-5] + ".md", "w", encoding="utf-8") as f:
        f.write(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
