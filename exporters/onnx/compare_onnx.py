#!/usr/bin/python3
"""memplan's ONNX route against measured eager steps, on torchvision models.

For each model: export it to ONNX in training mode (torch.onnx.export with
TrainingMode.TRAINING, do_constant_folding=False, a symbolic batch), run
`memplan analyze MODEL.onnx --set batch=N --json`, and measure one eager CPU
training step of the same model, inputs and cross-entropy target with
memplan.torch.measure() (torch.profiler memory events,
one thread, after a warm-up step). Writes OUT.md and OUT.json.

    compare_onnx.py --memplan build/cli/memplan [--models resnet18,...] [--batch 2]
                    [--out bench/results/onnx_models]

efficientnet_b0 is built with stochastic_depth_prob=0: torch 1.13 cannot export
StochasticDepth's in-place bernoulli_ in training mode. Its measured step uses
the same model, so the comparison is like for like.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import torch

warnings.filterwarnings("ignore")  # torch.onnx's notes on num_batches_tracked, one per BN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import memplan.torch as mt  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "densenet121", "shufflenet_v2_x1_0",
          "efficientnet_b0"]
MIB = 1 << 20


def build(name):
    import torchvision
    torch.manual_seed(mt.SEED)
    kwargs = {"stochastic_depth_prob": 0.0} if name.startswith("efficientnet") else {}
    return getattr(torchvision.models, name)(weights=None, **kwargs).train()


def export_onnx(model, inputs, path, opset=14):
    """Training-mode export with a symbolic batch dimension named `batch`."""
    m = copy.deepcopy(model)
    names = [f"x{i}" if len(inputs) > 1 else "x" for i in range(len(inputs))]
    axes = {n: {0: "batch"} for n in names}
    axes["logits"] = {0: "batch"}
    torch.onnx.export(m, tuple(inputs), path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=names, output_names=["logits"],
                      dynamic_axes=axes, opset_version=opset)


def analyze(memplan, path, batch, rep):
    p = subprocess.run([memplan, "analyze", path, "--set", f"batch={batch}", "--json", rep, "-q"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"memplan analyze {path}: exit {p.returncode}: {p.stderr}")
    warnings = [l for l in p.stderr.splitlines() if "warning" in l]
    return json.load(open(rep)), warnings


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "onnx_models"))
    args = ap.parse_args()
    joint = {}  # the PyTorch exporter's joint route on the same step, for reference
    try:
        for r in json.load(open(os.path.join(ROOT, "bench", "results", "torch_models.json"))):
            if r.get("batch") == args.batch:
                joint[r["model"]] = r["predicted"]
    except (OSError, ValueError, KeyError):
        pass
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = build(name)
            inputs = mt.example_inputs(model, args.batch, (3, 224, 224))
            target = mt.make_target(model, inputs)
            path = os.path.join(tmp, name + ".onnx")
            t0 = time.time()
            export_onnx(model, inputs, path)
            t_export = time.time() - t0
            t0 = time.time()
            rep, warnings = analyze(args.memplan, path, args.batch, path + ".rep.json")
            t_analyze = time.time() - t0
            meas = mt.measure(model, inputs, target)
            pred, got = rep["peak_bytes"], meas["peak_bytes"]
            row = {"model": name, "batch": args.batch, "onnx_bytes": os.path.getsize(path),
                   "onnx_nodes": None, "ops": rep["graph"]["ops"],
                   "predicted_peak_bytes": pred, "measured_peak_bytes": got,
                   "relative_error": (pred - got) / got,
                   "predicted_resident_bytes": rep.get("resident_bytes"),
                   "measured_resident_bytes": meas["resident_bytes"],
                   "peak_op": rep["peak_op"], "peak_phase": rep["peak_phase"],
                   "measured_peak_op_stack": meas.get("peak_op_stack"),
                   "warnings": warnings, "export_s": round(t_export, 2),
                   "analyze_s": round(t_analyze, 2)}
            import onnx
            row["onnx_nodes"] = len(onnx.load(path, load_external_data=False).graph.node)
            row["joint_route_predicted_bytes"] = joint.get(name)
            rows.append(row)
            print(f"{name}: predicted {pred / MIB:.2f} MiB, measured {got / MIB:.2f} MiB, "
                  f"error {100 * row['relative_error']:+.3f}%", flush=True)
    doc = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
           "method": "torch.onnx.export(training=TRAINING, do_constant_folding=False, opset 14, "
                     "symbolic batch) -> memplan analyze --set batch=N; measured: "
                     "memplan.torch.measure (torch.profiler CPU memory events, 1 thread)",
           "rows": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(args.out + ".md", "w") as f:
        f.write(f"# memplan's ONNX route vs measured eager CPU steps\n\n"
                f"Measured {doc['date']} with `exporters/onnx/compare_onnx.py` (torch "
                f"{torch.__version__} CPU, one thread, batch {args.batch}, inputs 3x224x224, "
                "cross-entropy loss; peaks include parameters, buffers, inputs and target).\n\n"
                "| model | ONNX nodes | memplan ops | measured peak (MiB) | predicted (MiB) | "
                "error | joint route (MiB) | analyze (s) |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in rows:
            jr = (f"{r['joint_route_predicted_bytes'] / MIB:.2f}"
                  if r["joint_route_predicted_bytes"] else "")
            f.write(f"| {r['model']} | {r['onnx_nodes']} | {r['ops']} | "
                    f"{r['measured_peak_bytes'] / MIB:.2f} | {r['predicted_peak_bytes'] / MIB:.2f} "
                    f"| {100 * r['relative_error']:+.3f}% | {jr} | {r['analyze_s']:.2f} |\n")
        f.write("\nThe joint route is the PyTorch exporter's (bench/results/torch_models.json, "
                "same step). Where the ONNX route misses by more than 1% (resnet18, resnet50), "
                "the eager peak is inside a convolution backward, in scratch oneDNN allocates "
                "(`aten::empty` under `convolution_backward`): the joint route measures it as "
                "`workspace_bytes` by replaying its backward graph; an ONNX graph has no backward "
                "to replay, so the ONNX route (like the exporter's forward style, which predicts "
                "the same peaks) leaves it out.\n")
        warned = [(r["model"], w) for r in rows for w in r["warnings"]]
        f.write("\nWarnings printed by memplan:" + ("\n\n" if warned else " none.\n"))
        for model, w in warned:
            f.write(f"- {model}: `{w}`\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
