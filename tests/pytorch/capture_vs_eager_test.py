#!/usr/bin/env python3
"""Captures joint graphs from real PyTorch models (AOTAutograd, torch 1.13 CPU),
analyzes them with memplan, and compares the predicted baseline peak with the
peak of a measured eager training step (torch.profiler memory events).

Usage: capture_vs_eager_test.py --memplan PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPORTER = os.path.join(ROOT, "exporters", "pytorch")
TOLERANCE = 0.01  # 1%: the gap is scalar temporaries outside the graph


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    args = ap.parse_args()
    py = sys.executable
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model, batch in [("cnn_small", 4), ("cnn_small", 8), ("mlp", 16)]:
            name = f"{model} batch {batch}"
            graph = os.path.join(tmp, f"{model}_{batch}.json")
            measured_json = os.path.join(tmp, f"{model}_{batch}.measured.json")
            report_json = os.path.join(tmp, f"{model}_{batch}.report.json")
            try:
                run([py, os.path.join(EXPORTER, "capture_joint.py"), "--model", model,
                     "--batch", str(batch), "-o", graph])
                run([py, os.path.join(EXPORTER, "measure_eager.py"), "--model", model,
                     "--batch", str(batch), "--json", measured_json])
                run([args.memplan, "analyze", graph, "--json", report_json, "-q"])
                measured = json.load(open(measured_json))["peak_bytes"]
                report = json.load(open(report_json))
                predicted = report["peak_bytes"]
                err = abs(predicted - measured) / measured
                ok = err <= TOLERANCE and report["graph"]["style"] == "joint"
                print(f"{'ok  ' if ok else 'FAIL'} {name}: predicted {predicted} B, "
                      f"measured eager {measured} B, error {100 * err:.3f}%")
            except Exception as e:  # noqa: BLE001 - report and count
                ok = False
                print(f"FAIL {name}: {e}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
