#!/usr/bin/python3
"""The eager peaks tests/simulator_test.cc compares the captured example graphs
with (examples/cnn_small.joint.graph.json, examples/mlp_torch.joint.graph.json):
measured here with memplan.torch.measure (torch 1.13 CPU, one thread, batch 8)
and checked against the numbers written in that test, so they come from this
script and go stale loudly.

Usage: eager_peaks.py [--print]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import memplan.torch as mt  # noqa: E402
from checks import Checks  # noqa: E402

CASES = {"cnn_small.joint.graph.json": ("models:cnn_small", 8),
         "mlp_torch.joint.graph.json": ("models:mlp", 8)}


def main():
    written = dict(re.findall(r'Case\{"([^"]+)", (\d+)\}',
                              open(os.path.join(ROOT, "tests", "simulator_test.cc")).read()))
    check = Checks()
    for file, (spec, batch) in CASES.items():
        model = mt.load_model(spec)
        inputs = mt.example_inputs(model, batch)
        # The example graphs free the output once the loss is computed.
        peak = mt.measure(model, inputs, mt.make_target(model, inputs),
                          hold_outputs=False)["peak_bytes"]
        if "--print" in sys.argv:
            print(f'Case{{"{file}", {peak}}}')
        check(f"{file}: simulator_test.cc holds the measured eager peak ({spec}, batch {batch})",
              written.get(file) == str(peak), f"written {written.get(file)}, measured {peak}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
