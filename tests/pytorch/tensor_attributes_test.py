#!/usr/bin/env python3
"""Tensors a model holds outside its parameters and buffers.

* A plain tensor attribute (`self.order = torch.arange(n)`, models:
  plain_tensor_index): the exporter registers it as a non-persistent buffer
  on its own copy, so the trace takes it as an input on the CPU and on meta
  (the same graph), the step's prediction is within 8 bytes of its measured
  step (which counts the attribute as resident, as it counts buffers), and
  the user's model is left as it was.
* A tensor held in a list (models:listed_tensor_index): exit 2 naming the
  op, the module and the ways around, on either device.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import Checks  # noqa: E402

LISTED_ERROR = (
    "memplan export: models:listed_tensor_index: ExportError: aten.index.Tensor in the "
    "model's own code reads a tensor that is neither an input, a parameter, a buffer nor a "
    "tensor attribute of a module (one held in a list or a dict, or made outside the "
    "forward), which the trace cannot take as an input; register it as a buffer "
    "(register_buffer(name, tensor, persistent=False)); on --device meta, --device cpu may "
    "trace it, with a smaller config if the model does not fit this machine")


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "python"),
                                                    e.get("PYTHONPATH")]))
    return e


def memplan_py(*args):
    return subprocess.run([sys.executable, "-m", "memplan", *args], capture_output=True,
                          text=True, env=env(), timeout=600)


def plain_attribute_checks(check, tmp, binary):
    graphs = {}
    for device in ("cpu", "meta"):
        graphs[device] = os.path.join(tmp, f"plain.{device}.json")
        p = memplan_py("export", "models:plain_tensor_index", "--batch", "4", "--static",
                       "--device", device, "-o", graphs[device], "-q")
        check(f"a plain tensor attribute exports on --device {device}", p.returncode == 0,
              p.stderr[-600:])
    if not all(os.path.exists(g) for g in graphs.values()):
        return
    same = open(graphs["cpu"], "rb").read() == open(graphs["meta"], "rb").read()
    check("the meta export is the CPU export, byte for byte", same)
    graph = json.load(open(graphs["cpu"]))
    order = [t for t in graph["tensors"] if t["id"].endswith("order")]
    check("the attribute is a buffer of the graph (64 int64, 512 bytes)",
          len(order) == 1 and order[0].get("kind") == "buffer", json.dumps(order)[:300])
    report = os.path.join(tmp, "plain.report.json")
    a = subprocess.run([binary, "analyze", graphs["cpu"], "--json", report, "-q"],
                       capture_output=True, text=True, timeout=120)
    m = memplan_py("measure", "models:plain_tensor_index", "--batch", "4", "-q")
    ran = a.returncode == 0 and m.returncode == 0
    if not check("analyze and measure run", ran, "" if ran else (a.stderr + m.stderr)[-600:]):
        return
    predicted = json.load(open(report))["peak_bytes"]
    measured = json.loads(m.stdout)["peak_bytes"]
    check(f"predicted within 8 bytes of the measured step ({predicted} B, {measured} B)",
          abs(predicted - measured) <= 8)


def api_checks(check):
    import torch

    from memplan.torch import export, models
    from memplan.torch._common import plain_tensor_attributes
    model = models.plain_tensor_index()
    found = [(path, tuple(t.shape)) for path, t in plain_tensor_attributes(model)]
    check("plain_tensor_attributes lists the attribute, not parameters or buffers",
          found == [("order", (64,))], found)
    export(model, model.example_input(2))
    check("export leaves the user's model as it was",
          isinstance(vars(model).get("order"), torch.Tensor)
          and "order" not in dict(model.named_buffers()), list(dict(model.named_buffers())))


def listed_checks(check, tmp):
    for device in ("cpu", "meta"):
        p = memplan_py("export", "models:listed_tensor_index", "--batch", "4", "--static",
                       "--device", device, "-o", os.path.join(tmp, "x.json"))
        lines = p.stderr.strip().splitlines()
        ok = p.returncode == 2 and lines == [LISTED_ERROR]
        check(f"a tensor in a list, --device {device}: exit 2 naming op, module and the ways "
              "around", ok, "" if ok else f"exit {p.returncode}: {p.stderr[-800:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", default=os.path.join(ROOT, "build", "cli", "memplan"))
    args = ap.parse_args()
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        plain_attribute_checks(check, tmp, args.memplan)
        api_checks(check)
        listed_checks(check, tmp)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
