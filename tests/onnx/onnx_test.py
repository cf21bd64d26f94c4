#!/usr/bin/python3
"""Tests of the ONNX route (`memplan analyze MODEL.onnx`) on models exported
with torch.onnx.export in training mode (do_constant_folding=False, symbolic
batch), against the torch models themselves and real eager steps (torch 1.13
CPU):

* parameter and buffer bytes equal the torch model's (BatchNormalization's
  running statistics are buffers; num_batches_tracked is not exported);
* the input and the logits have the torch shapes at --set batch=N;
* the predicted peak is within 5% of a measured eager step (memplan.torch
  measure) on a small CNN, a small GPT and resnet18;
* on the CNNs, the ONNX route and the PyTorch exporter's forward style (the
  same lowering from another graph) agree within 2%;
* detection by content (a .bin name), weights as external data, a missing
  --set (exit 2), plan --global-batch, a truncated file: exit
  codes and messages.

Fails (never skips) when torch, torchvision or onnx is missing, or memplan
was built without ONNX: CI installs them.   Usage: onnx_test.py --memplan PATH
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPORTER = os.path.join(ROOT, "python")
MEASURED_TOLERANCE = 0.05
ROUTE_TOLERANCE = 0.02

try:
    import onnx
    import torch
    import torchvision  # noqa: F401
except ImportError as e:
    print(f"FAIL: {e}; install python3-onnx, python3-torch, python3-torchvision "
          "(scripts/install-deps.sh --test)")
    sys.exit(1)
warnings.filterwarnings("ignore")
sys.path.insert(0, EXPORTER)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [EXPORTER, os.environ.get("PYTHONPATH")]))  # for `python -m memplan`
sys.path.insert(0, os.path.join(ROOT, "tests"))
import memplan.torch as mt  # noqa: E402
from checks import Checks  # noqa: E402

# (model, batch, compare with the forward-style export)
CASES = [
    ("models:cnn_small", 8, True),
    ("models:gpt_small", 4, False),
    ("torchvision:resnet18", 2, True),
]


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)


def export_onnx(model, inputs, path, opset):
    torch.onnx.export(copy.deepcopy(model), tuple(inputs), path,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=opset)


def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.onnx")
        with open(probe, "wb") as f:
            f.write(b"\x08\x07")
        p = run(args.memplan, "analyze", probe)
        if "built without ONNX support" in p.stderr:
            print("FAIL: memplan was built without ONNX support (libonnx-dev)")
            return 1
        for spec, batch, compare_forward in CASES:
            name = f"{spec} batch {batch}"
            stem = os.path.join(tmp, spec.replace(":", "_"))
            try:
                model = mt.load_model(spec)
                inputs = mt.example_inputs(model, batch, None)
                target = mt.make_target(model, inputs)
                path = stem + ".onnx"
                export_onnx(model, inputs, path, opset=17 if "gpt" in spec else 14)
                p = run(args.memplan, "lower", path, "--set", f"batch={batch}", "-o",
                        stem + ".joint.json", "-q")
                check(f"{name}: lower exits 0", p.returncode == 0, p.stderr[-400:])
                joint = json.load(open(stem + ".joint.json"))
                tensors = {t["id"]: t for t in joint["tensors"]}
                kinds = {}
                for t in joint["tensors"]:
                    if t["kind"] in ("parameter", "buffer") and "alias_of" not in t:
                        n = mt.DTYPE_SIZE[t["dtype"]]
                        for d in t["shape"]:
                            n *= d
                        kinds[t["kind"]] = kinds.get(t["kind"], 0) + n
                want_p = nbytes(model.parameters())
                want_b = nbytes(b for n, b in model.named_buffers()
                                if not n.endswith("num_batches_tracked"))
                check(f"{name}: parameter bytes equal the model's",
                      kinds.get("parameter", 0) == want_p,
                      f"{kinds.get('parameter', 0)} B vs {want_p} B")
                # Buffers: running statistics, plus constants computed from no input
                # (gpt_small's causal masks and positions: 16.5 KiB).
                check(f"{name}: buffer bytes are the running statistics (+ constants)",
                      kinds.get("buffer", 0) >= want_b and
                      kinds.get("buffer", 0) - want_b <= 32768,
                      f"{kinds.get('buffer', 0)} B vs {want_b} B")
                with torch.no_grad():
                    out = copy.deepcopy(model).eval()(*inputs)
                x_shape = [joint["symbols"].get(d, d) if isinstance(d, str) else d
                           for d in tensors["x"]["shape"]]
                check(f"{name}: input and logits have the torch shapes",
                      tensors["x"]["shape"][0] == "batch" and x_shape == list(inputs[0].shape)
                      and tensors["logits"]["shape"] == list(out.shape)
                      and joint["symbols"] == {"batch": batch},
                      f"x {tensors['x']['shape']}, logits {tensors['logits']['shape']}")
                p = run(args.memplan, "analyze", path, "--set", f"batch={batch}", "--json",
                        stem + ".rep.json", "-q")
                check(f"{name}: analyze exits 0", p.returncode == 0, p.stderr[-400:])
                rep = json.load(open(stem + ".rep.json"))
                # Both routes free the model's output once the loss is computed
                # (torch 1.13's exporter cannot mark a held output).
                meas = mt.measure(model, inputs, target, hold_outputs=False)
                e = (rep["peak_bytes"] - meas["peak_bytes"]) / meas["peak_bytes"]
                check(f"{name}: ONNX route within 5% of the measured eager step",
                      abs(e) <= MEASURED_TOLERANCE,
                      f"predicted {rep['peak_bytes']} B, measured {meas['peak_bytes']} B, "
                      f"error {100 * e:+.3f}%")
                if compare_forward:
                    fwd = stem + ".fwd.json"
                    p = subprocess.run([sys.executable, "-m", "memplan",
                                        "export", spec, "--batch", str(batch), "--style",
                                        "forward", "--no-hold-outputs", "-o", fwd],
                                       capture_output=True, text=True, timeout=600)
                    check(f"{name}: forward-style export exits 0", p.returncode == 0,
                          p.stderr[-400:])
                    run(args.memplan, "analyze", fwd, "--json", fwd + ".rep.json", "-q")
                    frep = json.load(open(fwd + ".rep.json"))
                    d = (rep["peak_bytes"] - frep["peak_bytes"]) / frep["peak_bytes"]
                    check(f"{name}: ONNX and forward-style routes agree within 2%",
                          abs(d) <= ROUTE_TOLERANCE,
                          f"ONNX {rep['peak_bytes']} B, forward style {frep['peak_bytes']} B, "
                          f"{100 * d:+.3f}%")
                if spec == "models:cnn_small":
                    cnn_path, cnn_peak = path, rep["peak_bytes"]
            except Exception as ex:  # noqa: BLE001 - report and count
                check(f"{name}: ran", False, f"{type(ex).__name__}: {ex}")

        # Detection by content, external data, errors (on the small CNN's export).
        try:
            bin_path = os.path.join(tmp, "model.bin")
            with open(cnn_path, "rb") as f:
                data = f.read()
            with open(bin_path, "wb") as f:
                f.write(data)
            p = run(args.memplan, "analyze", bin_path, "--set", "batch=8", "--json",
                    bin_path + ".json", "-q")
            check("an ONNX model is read by content, whatever its name",
                  p.returncode == 0 and json.load(open(bin_path + ".json"))["peak_bytes"] == cnn_peak,
                  p.stderr[-300:])
            ext_dir = os.path.join(tmp, "ext")
            os.mkdir(ext_dir)
            m = onnx.load(cnn_path)
            ext = os.path.join(ext_dir, "cnn.onnx")
            onnx.save_model(m, ext, save_as_external_data=True, all_tensors_to_one_file=True,
                            location="cnn.weights", size_threshold=0)
            p = run(args.memplan, "analyze", ext, "--set", "batch=8", "--json", ext + ".json",
                    "-q")
            check("weights in external data: same peak, the data file unread",
                  p.returncode == 0 and json.load(open(ext + ".json"))["peak_bytes"] == cnn_peak
                  and os.path.getsize(ext) < len(data), p.stderr[-300:])
            p = run(args.memplan, "analyze", cnn_path, "-q")
            check("no --set for a symbolic batch: exit 2, naming the symbol",
                  p.returncode == 2 and
                  f"{cnn_path}: /graph/input/0 (name \"x\"): dimension 0 is the symbol \"batch\", "
                  "which has no value; expected --set batch=N" in p.stderr,
                  p.stderr[-300:])
            p = run(args.memplan, "plan", cnn_path, "--budget", "4MiB", "--global-batch", "16",
                    "--json", os.path.join(tmp, "mb.json"), "-q")
            check("plan --global-batch sets the ONNX batch symbol itself",
                  p.returncode == 0 and
                  json.load(open(os.path.join(tmp, "mb.json")))["micro_batch"] >= 1,
                  p.stderr[-300:])
            cut = os.path.join(tmp, "cut.onnx")
            with open(cut, "wb") as f:
                f.write(data[:len(data) // 3])
            for cmd in (["analyze"], ["plan", "--budget", "1GiB"], ["check", "--budget", "1GiB"],
                        ["lower", "-o", os.path.join(tmp, "x.json")]):
                p = run(args.memplan, cmd[0], cut, *cmd[1:])
                check(f"{cmd[0]}: a truncated model is exit 2 with a clear message",
                      p.returncode == 2 and f"{cut}: not a memplan.graph/1 JSON document" in
                      p.stderr and "truncated or corrupt" in p.stderr, p.stderr[-300:])
        except Exception as ex:  # noqa: BLE001
            check("CLI cases: ran", False, f"{type(ex).__name__}: {ex}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
